"""What a provider sells: offers and per-provider pricing facts (provisioner.catalog_model holds them as a catalog).

An ``Offer`` is one rentable node shape in one region (or one marketplace ask).
Providers' ``list_offers`` return them; the bundled catalog and the refreshed
cache hold them; the optimizer ranks them. Units are in the field names.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.money import PRICE_PLACES
from provisioner.spec import Fabric, empty_list

SAFE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/+@-]{0,127}$"
SAFE_ID = re.compile(SAFE_ID_PATTERN)
"""The one rule for identifiers that come from outside (provider, instance type, region, zone,
GPU model, offer id): a letter or digit, then up to 127 of ``A-Za-z0-9._:/+@-``. No spaces, no
control characters, nothing a shell, cloud-init, slurm.conf or YAML would read as syntax. Catalog
files (JSON and columnar), plan files and provider answers are all checked against it."""

SafeId = Annotated[str, StringConstraints(pattern=SAFE_ID_PATTERN)]

MAX_PRICE_PER_HOUR_USD = Decimal(10_000)
"""Per node. The dearest real node (8x B200 on AWS) costs about 114 $/h; the engine's int64
headroom is proved for this bound (provisioner.offer_table, "Overflow")."""
MAX_RATE_USD = Decimal(1_000)
"""Per GB (egress, ingress) or per GiB-hour (disk) or per GiB-month (shared storage)."""
MAX_GPUS_PER_NODE = 64
MAX_NODES_PER_OFFER = 100_000
MAX_SIZE_GIB = 10_000_000.0
MAX_BILLING_S = 31_622_400
"""A year (366 days): the coarsest billing increment or minimum a catalog may state."""
MAX_INTERRUPTIONS_PER_NODE_HOUR = 1_000.0
MAX_BLOCK_HOURS = 4_368
"""The longest EC2 Capacity Block: 182 days."""


def _price_places(value: Decimal) -> Decimal:
    if value != value.scaleb(PRICE_PLACES).to_integral_value().scaleb(-PRICE_PLACES):
        raise ValueError(f"a price has at most {PRICE_PLACES} decimal places (kept exactly)")
    return value


Price = Annotated[Decimal, Field(gt=0, le=MAX_PRICE_PER_HOUR_USD, allow_inf_nan=False), AfterValidator(_price_places)]
"""A price per node-hour: exact, above zero (a zero price is never ranked as free), bounded."""
Rate = Annotated[Decimal, Field(ge=0, le=MAX_RATE_USD, allow_inf_nan=False)]
Size = Annotated[float, Field(ge=0, le=MAX_SIZE_GIB, allow_inf_nan=False)]


class Offer(BaseModel):
    """One node shape at one price in one place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: SafeId
    instance_type: SafeId
    region: SafeId
    zone: SafeId | None = None
    offer_id: SafeId | None = Field(None, description="Provider's own id (a Vast.ai ask id, ...).")
    gpu_model: SafeId = Field(description="Canonical name: H100, H200, A100, B200, GH200, L40S, RTX4090, ...")
    gpus: int = Field(gt=0, le=MAX_GPUS_PER_NODE)
    gpu_memory_gib: float = Field(gt=0, le=MAX_SIZE_GIB, allow_inf_nan=False, description="Memory per GPU.")
    vcpus: int = Field(gt=0, le=1_000_000)
    memory_gib: float = Field(gt=0, le=MAX_SIZE_GIB, allow_inf_nan=False)
    local_nvme_gib: Size = 0
    fabric: Fabric = Fabric.ETHERNET
    fabric_gbps: float = Field(0, ge=0, le=1_000_000, allow_inf_nan=False, description="Inter-node bandwidth per node.")
    price_per_hour_usd: Price | None = Field(None, description="On-demand, exact; None if not sold.")
    spot_price_per_hour_usd: Price | None = Field(None, description="Spot/interruptible, exact; None if not sold.")
    billing_increment_s: int = Field(1, gt=0, le=MAX_BILLING_S, description="Usage is rounded up to this step.")
    billing_minimum_s: int = Field(0, ge=0, le=MAX_BILLING_S, description="Minimum billed time per node.")
    egress_usd_per_gb: Rate = Field(Decimal(0), description="Internet egress out of this offer.")
    ingress_usd_per_gb: Rate = Field(Decimal(0), description="Internet ingress into this offer.")
    disk_usd_per_gib_hour: Rate = Field(Decimal(0), description="Extra charge per GiB of local disk used.")
    interruptions_per_node_hour: float = Field(
        ge=0,
        le=MAX_INTERRUPTIONS_PER_NODE_HOUR,
        allow_inf_nan=False,
        description="Expected unplanned interruptions per node-hour, on-demand (an estimate, not money).",
    )
    spot_interruptions_per_node_hour: float | None = Field(
        None,
        ge=0,
        le=MAX_INTERRUPTIONS_PER_NODE_HOUR,
        allow_inf_nan=False,
        description="Expected reclaims per node-hour when bought as spot.",
    )
    interruption_basis: str = Field(description="Where the interruption estimates come from.")
    reliability: float = Field(0.99, ge=0, le=1, allow_inf_nan=False, description="Host/provider reliability score.")
    max_nodes: int = Field(1, gt=0, le=MAX_NODES_PER_OFFER, description="Most nodes in one placement group / cluster.")
    min_nodes: int = Field(
        1, gt=0, le=MAX_NODES_PER_OFFER, description="Fewest nodes the provider sells this as (cluster products)."
    )
    purchase: Purchase = Field(Purchase.INSTANCE, description="How it is bought; reservation/sales are quote-only.")
    bootstrap: Bootstrap = Field(Bootstrap.CLOUD_INIT, description="How a node runs the cluster bootstrap.")
    network: Network = Field(Network.PRIVATE, description="How nodes of one cluster reach each other.")
    how_to_obtain: str | None = Field(None, description="For quote-only products: how to get one (URL, steps).")
    block_hours: int = Field(
        0,
        ge=0,
        le=MAX_BLOCK_HOURS,
        description=(
            "A reservation sold as one block (AWS Capacity Block): its length in hours, paid upfront in full at "
            "price_per_hour_usd per node-hour; 0: not a block."
        ),
    )
    block_start: str | None = Field(
        None,
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$",
        description="When the block starts, ISO-8601 UTC (it ends block_hours later).",
    )
    as_of: dt.date | None = Field(None, description="Price date when it differs from the provider's as_of.")
    source: str | None = Field(None, description="Where this offer came from when not the provider's source.")
    available: bool = True

    @model_validator(mode="after")
    def _quote_only_has_no_spot_price(self) -> Offer:
        if self.purchase.quote_only and self.spot_price_per_hour_usd is not None:
            raise ValueError(
                "spot_price_per_hour_usd: a reservation or sales product has no spot price "
                "(a Capacity Block is not spot); leave it out"
            )
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Stable identity used for deterministic tie-breaks."""
        return (self.provider, self.region, self.zone or "", self.instance_type + (self.offer_id or ""))


class EgressTier(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    up_to_gb: float | None = Field(
        None,
        ge=0,
        le=1e12,
        allow_inf_nan=False,
        description="Upper bound of this tier; None (or absent) for the last tier.",
    )
    usd_per_gb: Rate


class QuotaHeadroom(BaseModel):
    """What is left of one account quota in one region when ``catalog refresh`` read it, and which
    instance types (bought spot or not) count against it. The optimizer refuses an option that
    needs more (``Stage.QUOTA``); the shell reads quotas, the core only compares numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    region: SafeId
    code: SafeId = Field(description="The provider's quota id: L-417A185B, NVIDIA_H100_GPUS, ...")
    name: str = Field("", max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")
    unit: Literal["vcpus", "gpus"] = Field(description="What the quota counts per node.")
    spot: bool = Field(description="Whether it governs spot (preemptible) or on-demand nodes.")
    limit: int = Field(ge=0, le=10**9)
    available: int = Field(ge=0, le=10**9, description="The limit less what running nodes already use.")
    instance_types: list[SafeId] = Field(max_length=10_000)
    how_to_request: str = Field(
        "",
        max_length=400,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="How to ask for more (a command or a console page).",
    )


class ProviderInfo(BaseModel):
    """Per-provider facts that are not per offer, each with where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Where the prices and facts came from, and when.")
    as_of: dt.date | None = Field(None, description="When this provider's prices were read; None: the catalog's as_of.")
    internet_egress_tiers: list[EgressTier] = Field(
        default_factory=empty_list, description="Tiered internet egress for data leaving this provider."
    )
    free_egress_gb: float = Field(0, ge=0, le=1e12, allow_inf_nan=False, description="Free internet egress per month.")
    inter_region_usd_per_gb: Rate = Field(Decimal(0), description="Transfer between two of its regions.")
    shared_storage_usd_per_gib_month: Rate | None = Field(
        None, description="Managed shared filesystem price; None if it has none."
    )
    shared_storage_kind: str | None = Field(None, description="FSx for Lustre, Filestore, ...")
    boot_minutes: float = Field(
        5, ge=0, le=10_000, allow_inf_nan=False, description="Typical time from create to usable node."
    )
    egress_note: str = ""
    quotas: list[QuotaHeadroom] | None = Field(
        None, description="Account quota headroom read by `catalog refresh` (None: not read; no quota check)."
    )


__all__ = [
    "MAX_BLOCK_HOURS",
    "MAX_PRICE_PER_HOUR_USD",
    "SAFE_ID",
    "SAFE_ID_PATTERN",
    "EgressTier",
    "Offer",
    "Price",
    "ProviderInfo",
    "QuotaHeadroom",
    "Rate",
    "SafeId",
]
