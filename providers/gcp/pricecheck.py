"""GCP: what a cluster's instances cost at Compute Engine's own SKU prices and billing rule.

GCP publishes no per-resource bill through an API the tool can read without a BigQuery export;
what it does publish is the Cloud Billing Catalog. The check prices the plan's machine type from
today's SKUs (GPU + vCPU + RAM, as ``catalog refresh`` does: ``billing.machine_price``) and bills
each instance's span from its ``creationTimestamp`` by GCE's rule: per second, one minute
minimum. A Cloud Billing export to BigQuery would add what this cannot see: the invoice's own
lines (sustained/committed use discounts, credits, taxes), disks, network and the minutes GCE
billed while an instance was STOPPING.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from provisioner.errors import ProviderAPIError
from provisioner.metering import NodeUsage, run_seconds
from provisioner.offer import Offer
from provisioner.providers.billing import Billed
from provisioner.providers.gcp.models import zone_region

if TYPE_CHECKING:
    from provisioner.providers.gcp.provider import GCPProvider

SOURCE = "gcp Cloud Billing Catalog SKU prices x instance times"
MINIMUM_S = 60
DIFFERENCES = (
    "GCP: list prices from SKUs, not a bill; a Cloud Billing export to BigQuery would add discounts, credits, "
    "taxes, disks and network",
)


def price_check(adapter: GCPProvider, usages: Sequence[NodeUsage], offer: Offer, spot: bool) -> Billed:
    """``usages`` at today's SKU price of ``offer``'s machine type, per second with a 1-minute minimum."""
    zone = offer.zone or ""
    region = zone_region(zone) if zone else offer.region
    kind = next((m for m in adapter.gpu_machine_types(zone) if m.machine_type == offer.instance_type), None)
    if kind is None:
        raise ProviderAPIError("gcp", 0, f"machine type {offer.instance_type} is not offered in {zone}")
    hourly = adapter.sku_prices({region}).machine_price(
        kind.machine_type, kind.accelerator, kind.gpus, kind.vcpus, Decimal(kind.memory_gib), region, spot
    )
    if hourly is None:
        raise ProviderAPIError("gcp", 0, f"no Cloud Billing SKU prices {offer.instance_type} in {region}")
    total = Decimal(0)
    for usage in usages:
        if usage.ended_at is not None:
            total += hourly * max(run_seconds(usage.started_at, usage.ended_at), MINIMUM_S) / 3600
    notes: tuple[str, ...] = DIFFERENCES
    planned = offer.spot_price_per_hour_usd if spot else offer.price_per_hour_usd
    if planned is not None and planned != hourly:
        notes += (f"the SKUs price {offer.instance_type} at ${hourly}/h today; the plan priced ${planned}/h",)
    return Billed(total_usd=total, source=SOURCE, terms_usd={"compute": total}, differences=notes)


__all__ = ["SOURCE", "price_check"]
