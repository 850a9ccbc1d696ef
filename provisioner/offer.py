"""What a provider sells: offers, per-provider pricing facts, and a catalog of both.

An ``Offer`` is one rentable node shape in one region (or one marketplace ask).
Providers' ``list_offers`` return them; the bundled catalog and the refreshed
cache hold them; the optimizer ranks them. Units are in the field names.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.spec import Fabric


class Offer(BaseModel):
    """One node shape at one price in one place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    instance_type: str
    region: str
    zone: str | None = None
    offer_id: str | None = Field(None, description="Provider's own id (a Vast.ai ask id, ...).")
    gpu_model: str = Field(description="Canonical name: H100, H200, A100, B200, GH200, L40S, RTX4090, ...")
    gpus: int = Field(gt=0)
    gpu_memory_gib: float = Field(gt=0, description="Memory per GPU.")
    vcpus: int = Field(gt=0)
    memory_gib: float = Field(gt=0)
    local_nvme_gib: float = Field(0, ge=0)
    fabric: Fabric = Fabric.ETHERNET
    fabric_gbps: float = Field(0, ge=0, description="Inter-node bandwidth per node.")
    price_per_hour_usd: float | None = Field(None, ge=0, description="On-demand; None if not sold.")
    spot_price_per_hour_usd: float | None = Field(None, ge=0, description="Spot/interruptible; None if not sold.")
    billing_increment_s: int = Field(1, gt=0, description="Usage is rounded up to this step.")
    billing_minimum_s: int = Field(0, ge=0, description="Minimum billed time per node.")
    egress_usd_per_gb: float = Field(0, ge=0, description="Internet egress out of this offer.")
    ingress_usd_per_gb: float = Field(0, ge=0, description="Internet ingress into this offer.")
    disk_usd_per_gib_hour: float = Field(0, ge=0, description="Extra charge per GiB of local disk used.")
    interruptions_per_node_hour: float = Field(
        ge=0, description="Expected unplanned interruptions per node-hour, on-demand."
    )
    spot_interruptions_per_node_hour: float | None = Field(
        None, ge=0, description="Expected reclaims per node-hour when bought as spot."
    )
    interruption_basis: str = Field(description="Where the interruption estimates come from.")
    reliability: float = Field(0.99, ge=0, le=1, description="Host/provider reliability score.")
    max_nodes: int = Field(1, gt=0, description="Most nodes in one placement group / cluster.")
    min_nodes: int = Field(1, gt=0, description="Fewest nodes the provider sells this as (cluster products).")
    purchase: Purchase = Field(Purchase.INSTANCE, description="How it is bought; reservation/sales are quote-only.")
    bootstrap: Bootstrap = Field(Bootstrap.CLOUD_INIT, description="How a node runs the cluster bootstrap.")
    network: Network = Field(Network.PRIVATE, description="How nodes of one cluster reach each other.")
    how_to_obtain: str | None = Field(None, description="For quote-only products: how to get one (URL, steps).")
    as_of: dt.date | None = Field(None, description="Price date when it differs from the provider's as_of.")
    source: str | None = Field(None, description="Where this offer came from when not the provider's source.")
    available: bool = True

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Stable identity used for deterministic tie-breaks."""
        return (self.provider, self.region, self.zone or "", self.instance_type + (self.offer_id or ""))


class EgressTier(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    up_to_gb: float | None = Field(None, description="Upper bound of this tier; None (or absent) for the last tier.")
    usd_per_gb: float = Field(ge=0)


class ProviderInfo(BaseModel):
    """Per-provider facts that are not per offer, each with where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Where the prices and facts came from, and when.")
    as_of: dt.date | None = Field(None, description="When this provider's prices were read; None: the catalog's as_of.")
    internet_egress_tiers: list[EgressTier] = Field(
        default_factory=list, description="Tiered internet egress for data leaving this provider."
    )
    free_egress_gb: float = Field(0, ge=0, description="Free internet egress per month.")
    inter_region_usd_per_gb: float = Field(0, ge=0, description="Transfer between two of its regions.")
    shared_storage_usd_per_gib_month: float | None = Field(
        None, ge=0, description="Managed shared filesystem price; None if it has none."
    )
    shared_storage_kind: str | None = Field(None, description="FSx for Lustre, Filestore, ...")
    boot_minutes: float = Field(5, ge=0, description="Typical time from create to usable node.")
    egress_note: str = ""


class Catalog(BaseModel):
    """Offers plus provider facts, dated. ``origin`` says which file it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    as_of: dt.date
    origin: str = "bundled"
    providers: dict[str, ProviderInfo]
    offers: list[Offer]


__all__ = ["Catalog", "EgressTier", "Offer", "ProviderInfo"]
