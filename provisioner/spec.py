"""The declarative cluster spec: what a user asks for.

Pure pydantic v2 models; unknown keys are errors. ``spec_problems`` lists the
cross-field mistakes pydantic cannot see (12 GPUs at 8 per node, a TTL shorter
than the job). Loading from YAML with file/line/column errors is in ``loader.py``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_serializer,
)

from provisioner.gpu_names import GPU_MODELS, canonical_gpu, gpu_model_problem
from provisioner.providers.registry import REGISTRY, facts
from provisioner.spec_checkpoint import CheckpointSpec
from provisioner.suggest import did_you_mean
from provisioner.termtext import counted

PROVIDER_NAMES = tuple(REGISTRY)
"""Every provider a spec may name: the registry's (providers/registry.py), in its order."""


class _Model(BaseModel):
    # allow_inf_nan=False: `.inf` / `.nan` in YAML are mistakes, not quantities to price.
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)


class Fabric(StrEnum):
    """Inter-node network fabric. ``any`` (in a spec) accepts every fabric."""

    ANY = "any"
    ETHERNET = "ethernet"
    ROCE = "roce"
    INFINIBAND = "infiniband"
    EFA = "efa"


class ControlPlane(StrEnum):
    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    NONE = "none"


class PricingMode(StrEnum):
    ON_DEMAND = "on_demand"
    SPOT = "spot"
    EITHER = "either"


class SharedFsKind(StrEnum):
    NONE = "none"
    NFS = "nfs"  # exported from the head node's NVMe
    MANAGED = "managed"  # the provider's managed filesystem (FSx, Filestore, Lambda FS, ...)


MAX_COUNT = 100_000
"""Upper bound on GPU and node counts: larger than any cluster a single spec can buy."""
MAX_QUANTITY = 1e9
"""Upper bound on every size, rate, duration and budget (GiB, Gbps, minutes, USD).

Bounds keep the cost arithmetic finite and exact to the cent; nothing real comes close."""
MAX_HOURS = 87_600.0
"""Upper bound on ``workload.hours``: ten years."""

# strict=True: YAML has typed scalars, so ``count: "8"`` or ``count: true`` is a wrong type,
# not something to coerce. (Strict floats still accept integers.)
PositiveInt = Annotated[int, Field(gt=0, le=MAX_COUNT, strict=True)]
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_QUANTITY, strict=True)]
PositiveFloat = Annotated[float, Field(gt=0, le=MAX_QUANTITY, strict=True)]


def empty_list() -> list[Any]:
    """A new empty list: the default factory of list fields. pydantic reads each factory's signature, and
    reading ``list``'s (a builtin's) sets up the tokenizer, ~3 ms of every plan."""
    return []


class GpuSpec(_Model):
    model: list[str] = Field(
        default_factory=empty_list,
        description="Acceptable GPU models, e.g. [H100, H200]. Empty accepts any model.",
    )
    count: PositiveInt = Field(description="Total GPUs in the cluster.")
    min_memory_gib: NonNegFloat = Field(0, description="Minimum memory per GPU in GiB.")

    @field_validator("model", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("model")
    @classmethod
    def _known_models(cls, models: list[str]) -> list[str]:
        for name in models:
            problem = gpu_model_problem(name)
            if problem:
                raise ValueError(problem)
        return models


class NodesSpec(_Model):
    gpus_per_node: PositiveInt | None = Field(None, description="GPUs on each node.")
    count: PositiveInt | None = Field(None, description="Number of nodes.")


class InterconnectSpec(_Model):
    fabric: Fabric = Field(Fabric.ANY, description="Required inter-node fabric.")
    min_gbps_per_node: NonNegFloat = Field(0, description="Minimum fabric bandwidth per node.")


SAFE_PATH = re.compile(r"(/[A-Za-z0-9._-]+)+")
"""Paths land unquoted in boot scripts, fstab lines and manifests: a plain charset, absolute."""


def check_safe_path(value: str) -> str:
    """``value`` if it is an absolute path of ``[A-Za-z0-9._-]`` parts without ``..``; else ValueError."""
    if not SAFE_PATH.fullmatch(value) or ".." in value.split("/"):
        raise ValueError(f"{value!r} must be an absolute path of letters, digits, '.', '_', '-' (boot scripts use it)")
    return value


class SharedStorageSpec(_Model):
    kind: SharedFsKind = SharedFsKind.NONE
    size_gib: NonNegFloat = 0
    mount_path: str = "/shared"

    @field_validator("mount_path")
    @classmethod
    def _mount_path(cls, value: str) -> str:
        return check_safe_path(value)


class StorageSpec(_Model):
    checkpoint_nvme_gib_per_node: NonNegFloat = Field(
        0, description="Local NVMe capacity for checkpoints on every node."
    )
    checkpoint_path: str = "/mnt/checkpoints"
    shared: SharedStorageSpec = Field(default_factory=SharedStorageSpec)

    @field_validator("checkpoint_path")
    @classmethod
    def _checkpoint_path(cls, value: str) -> str:
        return check_safe_path(value)


class SlurmSpec(_Model):
    accounting: bool = Field(False, description="Run slurmdbd (job accounting) on the head node.")


class KubernetesSpec(_Model):
    ingress: bool = Field(
        False,
        description="Install k3s's Traefik ingress and ServiceLB load balancer (they "
        "listen on 80/443 and on every Service's NodePort). Off: k3s runs without them, and "
        "the node firewall keeps those ports closed either way.",
    )


class ProvidersSpec(_Model):
    allow: list[str] = Field(default_factory=empty_list, description="Only these providers (empty: all).")
    deny: list[str] = Field(default_factory=empty_list)
    regions: list[str] = Field(default_factory=empty_list, description="Only these regions (empty: all).")

    @field_validator("allow", "deny")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in PROVIDER_NAMES:
                hint = did_you_mean(name, PROVIDER_NAMES)
                raise ValueError(f"unknown provider {name!r}; {hint}known: {', '.join(PROVIDER_NAMES)}")
        return names


NAME_PATTERN = r"[a-z][a-z0-9\-]{0,38}[a-z0-9]"
"""A cluster name (the schema publishes it; the validator checks it)."""


def _money_number(value: object) -> object:
    """A budget is a YAML number, read as the decimal written (``159.60`` is exactly 159.60)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("expected a number of USD")
    return Decimal(repr(value)) if isinstance(value, float) else value


def _money_json(value: Decimal) -> int | float:
    # A budget is read from a YAML number via its shortest repr, so the float written back reads
    # back as the same Decimal: plan.json keeps budgets as JSON numbers.
    return int(value) if value == value.to_integral_value() else float(value)


Budget = Annotated[
    Decimal,
    BeforeValidator(_money_number),
    Field(ge=0, le=Decimal(repr(MAX_QUANTITY)), allow_inf_nan=False),
    PlainSerializer(_money_json, when_used="json"),
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": MAX_QUANTITY}),
]
"""USD, exact: compared with the cluster's price without rounding (docs/cost-model.md)."""


class PricingSpec(_Model):
    mode: PricingMode = PricingMode.ON_DEMAND
    max_hourly_usd: Budget | None = Field(None, description="Cap on the cluster's hourly price (USD, exact).")
    max_total_usd: Budget | None = Field(None, description="Cap on the expected total cost (USD, exact).")
    reservations: bool = Field(
        False,
        description="Rank reservations the adapter can buy (AWS EC2 Capacity Blocks for ML: a block of "
        "whole days, paid upfront and non-refundable, starting at the offering's start time) next to the other "
        "options; false lists them under Quote only.",
    )


class ReliabilitySpec(_Model):
    min_score: Annotated[float, Field(ge=0, le=1, strict=True)] = Field(
        0, description="Minimum host reliability score (0-1), e.g. Vast.ai's."
    )


_SCHEMES = {found.storage_scheme: name for name, found in facts().items() if found.storage_scheme}
"""Object store URL scheme -> the provider a dataset there leaves from (``s3`` -> aws)."""
_LOCATION = re.compile(
    rf"^(?:(?P<provider>{'|'.join(map(re.escape, REGISTRY))}):(?P<region>[a-z0-9\-]+)"
    rf"|(?P<scheme>{'|'.join(map(re.escape, _SCHEMES))})://[^\s/]+(?:/\S*)?|internet|local|none)$"
)


class DatasetSpec(_Model):
    size_gb: NonNegFloat = 0
    location: str = Field(
        "none",
        description="Where the data lives: aws:us-east-1, gcp:us-central1, s3://bucket/path "
        "(set region), gs://bucket/path, internet, local or none.",
    )
    region: str | None = Field(None, description="Region of an s3:// or gs:// bucket.")

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        if not _LOCATION.match(value):
            raise ValueError(
                "expected PROVIDER:REGION (aws:us-east-1), s3://bucket, gs://bucket, internet, local or none"
            )
        return value

    @property
    def source(self) -> tuple[str | None, str | None]:
        """(provider, region) the data leaves from; provider None means the open internet."""
        match = _LOCATION.match(self.location)
        assert match is not None
        if match["provider"]:
            return match["provider"], match["region"]
        if match["scheme"]:
            return _SCHEMES[match["scheme"]], self.region
        return None, None


class WorkloadSpec(_Model):
    hours: Annotated[float, Field(gt=0, le=MAX_HOURS, strict=True)] = Field(
        1, description="Expected run time in hours."
    )
    dataset: DatasetSpec = Field(default_factory=DatasetSpec)
    results_out_gb: NonNegFloat = Field(0, description="GB leaving the cluster (results, checkpoints).")
    checkpoint_interval_minutes: PositiveFloat = 60
    restart_overhead_minutes: NonNegFloat = 10


class LifetimeSpec(_Model):
    ttl_hours: PositiveFloat | None = Field(None, description="Hard limit: every node powers off after this long.")
    idle_timeout_minutes: PositiveFloat | None = None


class AccessSpec(_Model):
    ssh_public_key: str | None = None
    allowed_cidrs: list[str] = Field(
        default_factory=empty_list,
        description="Where SSH (tcp/22) to the nodes is allowed from (CIDR blocks). Empty, "
        "the default: from nowhere outside the cluster; up and burst reach the nodes over SSH, so they refuse "
        "until it is set (e.g. [203.0.113.7/32], this machine's public address). 0.0.0.0/0 opens SSH to all.",
    )

    @field_validator("ssh_public_key")
    @classmethod
    def _ssh_key(cls, value: str | None) -> str | None:
        if value is not None and (
            not value.isprintable() or not re.match(r"^(ssh-(rsa|ed25519)|ecdsa-sha2-\S+) \S+", value)
        ):
            raise ValueError("expected an OpenSSH public key (ssh-ed25519 AAAA... or ssh-rsa AAAA...)")
        return value

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not a CIDR block") from None
        return values


class ClusterSpec(_Model):
    """A whole cluster request. Field names are the YAML keys."""

    name: str = Field(
        description="Cluster name: 2-40 lowercase letters, digits and dashes.",
        json_schema_extra={"pattern": f"^{NAME_PATTERN}$"},
    )
    gpus: GpuSpec
    nodes: NodesSpec = Field(default_factory=NodesSpec)
    interconnect: InterconnectSpec = Field(default_factory=InterconnectSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    control_plane: ControlPlane = ControlPlane.NONE
    slurm: SlurmSpec = Field(default_factory=SlurmSpec, description="Options for control_plane: slurm.")
    kubernetes: KubernetesSpec = Field(
        default_factory=KubernetesSpec, description="Options for control_plane: kubernetes."
    )
    providers: ProvidersSpec = Field(default_factory=ProvidersSpec)
    pricing: PricingSpec = Field(default_factory=PricingSpec)
    reliability: ReliabilitySpec = Field(default_factory=ReliabilitySpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    lifetime: LifetimeSpec = Field(default_factory=LifetimeSpec)
    access: AccessSpec = Field(default_factory=AccessSpec)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(NAME_PATTERN, value):
            raise ValueError("use 2-40 lowercase letters, digits and dashes, starting with a letter")
        return value

    @model_serializer(mode="wrap")
    def _without_unset_checkpoint(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A spec without checkpoint.remote serializes as before the key existed (plan.json unchanged).
        data = handler(self)
        if isinstance(data, dict) and self.checkpoint.remote is None:
            data.pop("checkpoint", None)
        return data

    def allowed_providers(self) -> list[str]:
        allow = self.providers.allow or list(PROVIDER_NAMES)
        return [name for name in allow if name not in self.providers.deny]


def spec_problems(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Yield ``(field path, message)`` for cross-field mistakes in an otherwise valid spec."""
    total = spec.gpus.count
    per_node, node_count = spec.nodes.gpus_per_node, spec.nodes.count
    if per_node and total % per_node:
        yield "nodes.gpus_per_node", f"{counted(total, 'GPU')} cannot be split evenly into nodes of {per_node}"
    if node_count and total % node_count:
        yield "nodes.count", f"{counted(total, 'GPU')} cannot be split evenly across {counted(node_count, 'node')}"
    if per_node and node_count and per_node * node_count != total:
        yield "nodes.count", f"{counted(node_count, 'node')} x {counted(per_node, 'GPU')} is not gpus.count={total}"
    if spec.slurm.accounting and spec.control_plane is not ControlPlane.SLURM:
        yield "slurm.accounting", "Slurm accounting needs control_plane: slurm"
    if spec.kubernetes.ingress and spec.control_plane is not ControlPlane.KUBERNETES:
        yield "kubernetes.ingress", "an ingress needs control_plane: kubernetes"
    if not spec.allowed_providers():
        yield "providers.deny", "every provider is excluded"
    overlap = set(spec.providers.allow) & set(spec.providers.deny)
    if overlap and spec.allowed_providers():
        yield "providers.deny", f"{', '.join(sorted(overlap))} is both allowed and denied"
    ttl = spec.lifetime.ttl_hours
    if ttl is not None and ttl < spec.workload.hours:
        yield "lifetime.ttl_hours", (f"TTL {ttl:g} h is shorter than the expected run of {spec.workload.hours:g} h")
    shared = spec.storage.shared
    if shared.kind != SharedFsKind.NONE and shared.size_gib <= 0:
        yield "storage.shared.size_gib", f"a {shared.kind.value} filesystem needs a size > 0"
    dataset = spec.workload.dataset
    if dataset.location.startswith(("s3://", "gs://")) and dataset.region is None and dataset.size_gb:
        yield "workload.dataset.region", "set the bucket's region to price moving the dataset"


__all__ = [
    "GPU_MODELS",
    "PROVIDER_NAMES",
    "AccessSpec",
    "CheckpointSpec",
    "ClusterSpec",
    "ControlPlane",
    "DatasetSpec",
    "Fabric",
    "GpuSpec",
    "InterconnectSpec",
    "KubernetesSpec",
    "LifetimeSpec",
    "NodesSpec",
    "PricingMode",
    "PricingSpec",
    "ProvidersSpec",
    "ReliabilitySpec",
    "SharedFsKind",
    "SharedStorageSpec",
    "SlurmSpec",
    "StorageSpec",
    "WorkloadSpec",
    "canonical_gpu",
    "check_safe_path",
    "empty_list",
    "gpu_model_problem",
    "spec_problems",
]
