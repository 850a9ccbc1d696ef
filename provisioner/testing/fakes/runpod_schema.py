"""The part of RunPod's GraphQL schema the RunPod fake serves, as SDL for graphql-core.

RunPod publishes its schema only as a browsable page (graphql-spec.runpod.io), not as a file, so
this subset is written from what the clients send: the official ``runpod`` 1.11.0 SDK
(``runpod/api/queries`` and ``mutations``: ``gpuTypes``, ``gpuTypes(input: {id})`` with
``lowestPrice``, ``myself { pods pubKey }``, ``pod(input: {podId})``, ``podFindAndDeployOnDemand``,
``podTerminate``, ``updateUserSettings``), dstack and gpuhunt (``podRentInterruptable``,
``lowestPrice`` filters, ``gpuTypes(input: {cluster})``) and this project's adapter and teardown
script. Type names of inputs follow those clients' variable declarations. A field or argument not
listed here is refused as the real server refuses an unknown one (``GRAPHQL_VALIDATION_FAILED``).

Which input fields are required is not published; the fake requires on ``podRentInterruptable``
the four every client sends (``gpuTypeId``, ``gpuCount``, ``bidPerGpu``, ``imageName``) and nothing
on ``podFindAndDeployOnDemand`` (its resolver refuses a pod without ``gpuTypeId``: this fake sells
GPU pods only).
"""

from __future__ import annotations

import functools

from graphql import GraphQLSchema, build_schema

SDL = """
scalar Void

enum CloudTypeEnum { ALL SECURE COMMUNITY }
enum PodStatus { CREATED RUNNING RESTARTING EXITED PAUSED DEAD TERMINATED }
enum PodType { RESERVED INTERRUPTABLE BID }

input GpuTypeFilter { id: String ids: [String] cluster: Boolean }
input GpuLowestPriceInput {
  gpuCount: Int secureCloud: Boolean dataCenterId: String countryCode: String minCudaVersion: String
  minDisk: Int minMemoryInGb: Int minVcpuCount: Int supportPublicIp: Boolean
  minDownload: Int minUpload: Int totalDisk: Int includeAiApi: Boolean allowedCudaVersions: [String]
}
input PodFilter { podId: String! }
input PodTerminateInput { podId: String! }
input EnvironmentVariableInput { key: String! value: String! }
input UpdateUserSettingsInput { pubKey: String }

input PodFindAndDeployOnDemandInput {
  name: String imageName: String gpuTypeId: String cloudType: CloudTypeEnum gpuCount: Int
  volumeInGb: Int containerDiskInGb: Int minVcpuCount: Int minMemoryInGb: Int dataCenterId: String
  countryCode: String startSsh: Boolean startJupyter: Boolean supportPublicIp: Boolean ports: String
  dockerArgs: String volumeMountPath: String env: [EnvironmentVariableInput] networkVolumeId: String
  minCudaVersion: String allowedCudaVersions: [String] templateId: String minDownload: Int
  minUpload: Int volumeKey: String containerRegistryAuthId: String
}

input PodRentInterruptableInput {
  name: String imageName: String! gpuTypeId: String! cloudType: CloudTypeEnum gpuCount: Int!
  bidPerGpu: Float! volumeInGb: Int containerDiskInGb: Int minVcpuCount: Int minMemoryInGb: Int
  dataCenterId: String countryCode: String startSsh: Boolean startJupyter: Boolean
  supportPublicIp: Boolean ports: String dockerArgs: String volumeMountPath: String
  env: [EnvironmentVariableInput] networkVolumeId: String minCudaVersion: String
  allowedCudaVersions: [String] templateId: String minDownload: Int minUpload: Int volumeKey: String
  containerRegistryAuthId: String
}

type LowestPrice {
  gpuName: String gpuTypeId: String minimumBidPrice: Float uninterruptablePrice: Float
  minVcpu: Float minMemory: Float stockStatus: String compliance: [String] countryCode: String
  maxUnreservedGpuCount: Int availableGpuCounts: [Int]
}
type DataCenter { id: String name: String listed: Boolean }

type GpuType {
  id: String displayName: String manufacturer: String memoryInGb: Int cudaCores: Int
  secureCloud: Boolean communityCloud: Boolean securePrice: Float communityPrice: Float
  secureSpotPrice: Float communitySpotPrice: Float oneWeekPrice: Float oneMonthPrice: Float
  threeMonthPrice: Float sixMonthPrice: Float clusterPrice: Float maxGpuCount: Int
  maxGpuCountSecureCloud: Int maxGpuCountCommunityCloud: Int minPodGpuCount: Int
  nodeGroupDatacenters: [DataCenter]
  lowestPrice(input: GpuLowestPriceInput): LowestPrice
}

type PortMapping { ip: String isIpPublic: Boolean privatePort: Int publicPort: Int type: String }
type PodRuntime { uptimeInSeconds: Int ports: [PortMapping] }
type Machine { podHostId: String gpuDisplayName: String location: String }

type Pod {
  id: String! name: String imageName: String env: [String] gpuCount: Int costPerHr: Float
  adjustedCostPerHr: Float desiredStatus: PodStatus lastStatusChange: String machineId: String
  machine: Machine memoryInGb: Float vcpuCount: Float containerDiskInGb: Int volumeInGb: Float
  volumeMountPath: String dockerArgs: String dockerId: String podType: PodType port: Int
  ports: String uptimeSeconds: Int runtime: PodRuntime
}

type NetworkVolume { id: String name: String size: Int dataCenterId: String }
type User {
  id: String pubKey: String clientBalance: Float pods: [Pod] networkVolumes: [NetworkVolume]
}

type Query {
  gpuTypes(input: GpuTypeFilter): [GpuType]
  dataCenters: [DataCenter]
  countryCodes: [String]
  myself: User
  pod(input: PodFilter): Pod
}

type Mutation {
  podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput): Pod
  podRentInterruptable(input: PodRentInterruptableInput!): Pod
  podTerminate(input: PodTerminateInput!): Void
  updateUserSettings(input: UpdateUserSettingsInput): User
}
"""


@functools.cache
def schema() -> GraphQLSchema:
    """The schema, built once per process."""
    return build_schema(SDL)


__all__ = ["SDL", "schema"]
