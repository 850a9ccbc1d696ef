"""What the AWS adapter lists: one offer per (GPU instance type, zone) priced from the Pricing API
and the Spot price history, and the Capacity Blocks for ML on offer as quote-only offers. Pure
functions over what ``AWSClient`` answered (``provider.AWSProvider.list_offers`` / ``quote_offers``
call them); see ``provider``'s module docstring for what is listed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.errors import ProviderAPIError
from provisioner.offer import Offer
from provisioner.providers.aws.capacity_blocks import PROBE_COUNT, PROBE_HOURS, block_offer
from provisioner.providers.aws.client import AWSClient
from provisioner.providers.aws.efa import has_efa
from provisioner.providers.aws.models import GpuInstanceType, on_demand_price
from provisioner.providers.base import OfferQuery
from provisioner.spec import Fabric

log = logging.getLogger("provisioner.providers.aws")

BILLING_INCREMENT_S, BILLING_MINIMUM_S = 1, 60  # per-second Linux billing, 60 s minimum (bundled catalog)
_PRICE_FILTERS = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)


@lru_cache(maxsize=1)
def _catalog_templates() -> tuple[dict[str, Offer], Offer | None]:
    """The bundled catalog's AWS offers by instance type (interruption rates, egress, max nodes)
    and one typical offer for types the catalog does not know."""
    try:
        from provisioner.catalog import load_bundled_catalog

        offers = [o for o in load_bundled_catalog().offers if o.provider == "aws"]
    except Exception:  # the catalog is optional context, never a reason to fail listing
        offers = []
    if not offers:
        return {}, None
    typical = sorted(offers, key=lambda o: o.interruptions_per_node_hour)[len(offers) // 2]
    return {o.instance_type: o for o in offers}, typical


def on_demand_prices(client: AWSClient, region: str, instance_types: Iterable[str]) -> dict[str, Decimal]:
    """Linux on-demand USD/hour per type in ``region`` from the Pricing API (exact)."""
    prices: dict[str, Decimal] = {}
    for instance_type in instance_types:
        filters = [
            {"Field": f, "Value": v}
            for f, v in (("instanceType", instance_type), ("regionCode", region), *_PRICE_FILTERS)
        ]
        for item in client.get_products(filters):
            parsed = on_demand_price(item)
            if parsed and parsed[0] == instance_type and parsed[1] == region:
                prices[instance_type] = min(parsed[2], prices.get(instance_type, parsed[2]))
    return prices


def instance_offers(
    kind: GpuInstanceType,
    *,
    region: str,
    zones: dict[str, list[str]],
    on_demand: dict[str, Decimal],
    spot: dict[tuple[str, str], Decimal],
    query: OfferQuery,
) -> list[Offer]:
    """One offer per zone EC2 sells ``kind`` in, with the price the query asks for (on-demand, spot)."""
    by_type, typical = _catalog_templates()
    template = by_type.get(kind.instance_type, typical)
    made = []
    for zone in zones.get(kind.instance_type, []):
        price = on_demand.get(kind.instance_type)
        spot_price = spot.get((kind.instance_type, zone)) if kind.spot_supported else None
        if (query.spot is True and spot_price is None) or (query.spot is False and price is None):
            continue
        if price is None and spot_price is None:
            continue
        made.append(
            Offer(
                provider="aws",
                instance_type=kind.instance_type,
                region=region,
                zone=zone,
                gpu_model=kind.gpu_model,
                gpus=kind.gpus,
                gpu_memory_gib=kind.gpu_memory_gib,
                vcpus=kind.vcpus,
                memory_gib=kind.memory_gib,
                local_nvme_gib=kind.local_nvme_gib,
                # EFA only where the adapter knows the type's interface layout: an offer is never
                # ranked as EFA when its nodes would launch without EFA interfaces.
                fabric=Fabric.EFA if kind.efa_supported and has_efa(kind.instance_type) else Fabric.ETHERNET,
                fabric_gbps=kind.network_gbps,
                price_per_hour_usd=price,
                spot_price_per_hour_usd=spot_price,
                billing_increment_s=BILLING_INCREMENT_S,
                billing_minimum_s=BILLING_MINIMUM_S,
                egress_usd_per_gb=template.egress_usd_per_gb if template else 0,
                interruptions_per_node_hour=template.interruptions_per_node_hour if template else 0.000158,
                spot_interruptions_per_node_hour=template.spot_interruptions_per_node_hour if template else None,
                interruption_basis=template.interruption_basis if template else "documented default",
                max_nodes=(
                    template.max_nodes
                    if template and template.instance_type == kind.instance_type
                    else 64
                    if kind.efa_supported
                    else 16
                ),
                purchase=Purchase.INSTANCE,
                bootstrap=Bootstrap.CLOUD_INIT,
                network=Network.PRIVATE,
            )
        )
    return made


def block_offers(client: AWSClient, template: Offer) -> list[Offer]:
    """Capacity Blocks for ML offered for ``template``'s type, as quote-only reservation offers."""
    items: list[dict[str, Any]] = []
    for hours in PROBE_HOURS:
        try:
            items += client.describe_capacity_block_offerings(
                template.region, template.instance_type, PROBE_COUNT, hours
            )
        except ProviderAPIError as exc:
            if exc.status != 400:  # e.g. a type or region without Capacity Blocks: nothing to list
                raise
            log.info(
                "aws: no %d h Capacity Blocks for %s in %s: %s",
                hours,
                template.instance_type,
                template.region,
                exc.detail,
            )
            break
    found = (block_offer(item, template) for item in items)
    return [offer for offer in found if offer is not None]


__all__ = ["BILLING_INCREMENT_S", "BILLING_MINIMUM_S", "block_offers", "instance_offers", "on_demand_prices"]
