"""Pydantic models of the Fluence payloads the adapter reads and sends.

GPU Cloud shapes (``/gpu/plans/vms``, ``/gpu/instances/vms``, ``/ssh_keys``) follow Fluence's
documentation examples (they are not in the OpenAPI file); the v2 VM shapes (``/v1/clusters``,
``/v1/configurations/virtual_machines``, ``/v2/vms``) follow the OpenAPI 0.10.0 file.
Responses ignore fields we do not use; requests forbid unknown fields.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from provisioner.providers.addresses import HostText
from provisioner.providers.fluence.naming import to_gib


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----- GPU Cloud ----------------------------------------------------------------------------
class Count(_Payload):
    count: float
    units: str = "Gi"

    @property
    def gib(self) -> float:
        return to_gib(self.count, self.units)


class GpuModel(_Payload):
    vendor: str = ""
    model: str
    vram: str = ""
    interface: str = ""


class Pricing(_Payload):
    hour: float
    upfront_hours: int = 3
    currency: str = "USDC"


class PlanOption(_Payload):
    """One deployable option: ``id`` is the ``plan_id`` of a deploy."""

    id: str
    location: str
    provider: str = ""
    vcpu: Count
    memory: Count
    storage: Count
    deployment_type: str = "VM"
    pricing: Pricing
    nvlink: bool = False
    os_options: list[str] = Field(default_factory=list)


class Availability(_Payload):
    gpu_count: int
    minimum_price: float | None = None
    options: list[PlanOption] = Field(default_factory=list)


class PlanGroup(_Payload):
    gpu_model: GpuModel
    minimum_price: float | None = None
    availability_by_number: list[Availability] = Field(default_factory=list)


class PlansResponse(_Payload):
    data: list[PlanGroup] = Field(default_factory=list)


class Supply(_Payload):
    vcpu: Count
    memory: Count
    storage: Count
    gpu_count: int


class Resources(_Payload):
    supply: Supply
    gpu_model: GpuModel


class Instance(_Payload):
    """An item of ``GET /gpu/instances/vms`` (the detail view has more fields we do not need)."""

    id: str
    name: str
    status: str
    resources: Resources | None = None
    domain: HostText = None
    location: str = ""
    os_image: str | None = None
    ssh_connection: str | None = None
    created_at: str | None = None
    updated_at: str | None = Field(None, description="Of an ENDED instance: when it was terminated.")


class ChargeEntry(_Payload):
    """A row of ``GET /v1/billing/charges/aggregated`` (amounts are decimal strings)."""

    resource_id: str | None = Field(None, alias="resourceId")
    total_cost: str = Field(alias="totalCost")
    total_usage_hours: str = Field(alias="totalUsageHours")


class DeployRequest(_Request):
    """Body of ``POST /gpu/instances/vms``."""

    plan_id: str
    name: str = Field(min_length=1, max_length=25, pattern=r"^[a-z0-9-]+$")
    ssh_key: str
    os_image: str


class DeployResponse(_Payload):
    instance_id: str


class SshKey(_Payload):
    name: str
    fingerprint: str = ""
    algorithm: str = ""
    publicKey: str = ""
    public_key: str = ""  # the POST example answers in snake_case
    active: bool = True

    @property
    def material(self) -> str:
        return " ".join((self.publicKey or self.public_key).split()[:2])


# ----- v2 VM API (OpenAPI 0.10.0) ------------------------------------------------------------
class ClusterDto(_Payload):
    id: str
    name: str
    dcId: str = ""


class VmConfiguration(_Payload):
    id: str
    slug: str
    name: str = ""
    vcpu: int
    ramGb: int


class CloudInit(_Request):
    userData: str | None = Field(None, repr=False)


class BootDisk(_Request):
    """``CreateUserStorageRequest`` used inline as a new VM's boot disk."""

    clusterId: str
    name: str
    storageType: str = "NVME"
    volumeGb: int
    replicated: bool = False
    osImage: str | None = None


class CreateVmRequest(_Request):
    clusterId: str
    name: str
    configurationId: str
    bootDisk: BootDisk
    sshKeys: list[str] = Field(default_factory=list)
    cloudInit: CloudInit | None = None


class UserVm(_Payload):
    id: str
    clusterId: str
    configurationId: str
    configurationSlug: str | None = None
    name: str
    status: str
    allowedActions: list[str] = Field(default_factory=list)
    publicIp: str | None = None


class Pagination(_Payload):
    totalPages: int = 1
    currentPage: int = 1


class VmPage(_Payload):
    items: list[UserVm] = Field(default_factory=list)
    pagination: Pagination = Field(default_factory=Pagination)


__all__ = [
    "Availability",
    "BootDisk",
    "CloudInit",
    "ClusterDto",
    "Count",
    "CreateVmRequest",
    "DeployRequest",
    "DeployResponse",
    "GpuModel",
    "Instance",
    "Pagination",
    "PlanGroup",
    "PlanOption",
    "PlansResponse",
    "Pricing",
    "Resources",
    "SshKey",
    "Supply",
    "UserVm",
    "VmConfiguration",
    "VmPage",
]
