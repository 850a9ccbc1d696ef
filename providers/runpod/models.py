"""Pydantic models of the RunPod REST v2 payloads the adapter reads.

Only the fields the adapter uses are declared; everything else in a response is
ignored (``extra="ignore"``), so a richer provider response never breaks parsing.
Field names follow the API (camelCase) through aliases.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from provisioner.providers.addresses import HostText, IpText


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class GpuPrice(_Model):
    secure: float | None = None
    community: float | None = None


class GpuMaxCount(_Model):
    secure: int = 0
    community: int = 0


class DataCenterAvailability(_Model):
    id: str
    name: str = ""
    availability: str = "NONE"


class GpuType(_Model):
    """One entry of ``GET /v2/catalog/gpus``; prices are per GPU per hour."""

    id: str
    name: str
    manufacturer: str = "NVIDIA"
    memory_gb: int = Field(alias="memory")
    secure: bool = False
    community: bool = False
    price: GpuPrice
    max_count: GpuMaxCount = Field(alias="maxCount")
    availability: str | None = None
    data_centers: list[DataCenterAvailability] = Field(default_factory=list, alias="dataCenters")


class GpuCatalog(_Model):
    gpus: list[GpuType]


class SpotPrice(_Model):
    """One entry of the GraphQL ``gpuTypes`` query: per-GPU interruptible floor prices."""

    id: str
    secure_spot_price: float | None = Field(None, alias="secureSpotPrice")
    community_spot_price: float | None = Field(None, alias="communitySpotPrice")


class SshEndpoint(_Model):
    host: HostText
    port: int
    username: str = "root"


class PodSsh(_Model):
    proxy: SshEndpoint | None = None
    direct: SshEndpoint | None = None


class RuntimePort(_Model):
    private: int | None = None
    public: int | None = None
    type: str = ""
    ip: IpText = None


class PodRuntime(_Model):
    ports: list[RuntimePort] = Field(default_factory=list)


class PodGpu(_Model):
    id: str
    count: int = 1


class PodGlobalNetworking(_Model):
    enabled: bool = False
    ip: IpText = None


class PodCluster(_Model):
    """A member pod's place in an Instant Cluster: ``rank`` 0 is the primary (None until assigned),
    ``ip`` its address on the cluster's private overlay network (None until assigned)."""

    id: str
    rank: int | None = None
    ip: IpText = None


class Pod(_Model):
    """A pod as returned by ``GET /v2/pods`` and ``POST /v2/pods``."""

    id: str
    name: str
    status: str
    env: dict[str, str] = Field(default_factory=dict)
    gpu: PodGpu | None = None
    cloud: str = "SECURE"
    data_center_id: str | None = Field(None, alias="dataCenterId")
    ssh: PodSsh | None = None
    runtime: PodRuntime | None = None
    global_networking: PodGlobalNetworking | None = Field(None, alias="globalNetworking")
    cluster: PodCluster | None = None
    cost_usd_per_hour: float = Field(0.0, alias="cost")
    created_at: str | None = Field(None, alias="createdAt")

    def public_ip(self) -> str | None:
        """The address a user SSHes to: the published 22/tcp port's IP, else ``ssh.direct``."""
        for port in self.runtime.ports if self.runtime else []:
            if port.private == 22 and port.ip:
                return port.ip
        if self.ssh and self.ssh.direct and self.ssh.direct.host:
            return self.ssh.direct.host
        return None

    def ssh_endpoint(self) -> tuple[str, int] | None:
        """``(host, port)`` of the pod's own sshd: ``ssh.direct`` (the published ``22/tcp``), else the
        public side of 22/tcp in ``runtime.ports``. None until the pod runs with 22/tcp published.
        ``ssh.proxy`` is never used: it carries an interactive shell only (no command, no stdin) and
        logs in with a routing token, not a user."""
        if self.ssh and self.ssh.direct and self.ssh.direct.host:
            return self.ssh.direct.host, self.ssh.direct.port
        for port in self.runtime.ports if self.runtime else []:
            if port.private == 22 and port.type == "tcp" and port.ip and port.public:
                return port.ip, port.public
        return None


class PodList(_Model):
    pods: list[Pod]


class ClusterCompute(_Model):
    gpu_type_id: str = Field(alias="gpuTypeId")
    gpu_count_per_pod: int = Field(alias="gpuCountPerPod")
    pod_count: int = Field(alias="podCount")


class Cluster(_Model):
    """An Instant Cluster as ``GET/POST /v2/clusters`` return it (``pods`` is only a summary)."""

    id: str
    name: str
    type: str = "TRAINING"
    compute: ClusterCompute
    data_center_id: str | None = Field(None, alias="dataCenterId")


class ClusterList(_Model):
    clusters: list[Cluster]


class SshKeys(_Model):
    keys: list[str]


class Problem(_Model):
    """RFC 9457 problem+json error body."""

    title: str = ""
    status: int | None = None
    detail: str = ""
    errors: list[str] = Field(default_factory=list)


__all__ = [
    "Cluster",
    "ClusterCompute",
    "ClusterList",
    "DataCenterAvailability",
    "GpuCatalog",
    "GpuType",
    "Pod",
    "PodCluster",
    "PodList",
    "Problem",
    "SpotPrice",
    "SshKeys",
]


class PodBillingRecord(_Model):
    """One bucket of ``GET /v2/billing/pods`` (amounts are JSON doubles: read as the decimal written)."""

    pod_id: str = Field(alias="podId")
    start_time: str = Field(alias="startTime")
    end_time: str = Field(alias="endTime")
    total_amount: float = Field(alias="totalAmount")


class PodBillingList(_Model):
    records: list[PodBillingRecord] = Field(default_factory=list)
