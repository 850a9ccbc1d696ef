"""EC2 Capacity Blocks for ML as quote-only offers (``Purchase.RESERVATION``). Pure.

``DescribeCapacityBlockOfferings`` (shape in ../shared/provider-apis/aws/) answers offerings of
``InstanceCount`` instances of one type in one zone for ``CapacityBlockDurationHours`` from
``StartDate`` to ``EndDate`` at an ``UpfrontFee`` (USD, a decimal string). The adapter asks for
``PROBE_COUNT`` instance for ``PROBE_HOURS`` hours per type and turns each answer into an offer
priced per node-hour (fee / count / hours, exact); ``how_to_obtain`` names the offering, its
dates and the purchase command, and says the price was probed for one instance, so a buyer asks
again for their own count and dates. The optimizer never ranks reservations (quote-only): they
are listed under "Quote only" next to the options. Nothing here buys a block.

Families sold as Capacity Blocks (EC2 User Guide "Capacity Blocks for ML", supported instance
types; dated 2026-11-23, p6 and trn2 UNVERIFIED): ``CAPACITY_BLOCK_FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.offer import Offer

CAPACITY_BLOCK_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1", "trn2")
PROBE_COUNT = 1
PROBE_HOURS = 24
MAX_INSTANCES_PER_BLOCK = 64
MICRO_USD = Decimal("0.000001")


def sells_blocks(instance_type: str) -> bool:
    return instance_type.split(".", 1)[0] in CAPACITY_BLOCK_FAMILIES


def block_offer(item: Mapping[str, Any], template: Offer) -> Offer | None:
    """One offering -> a reservation offer with ``template``'s hardware facts (the same type's
    instance offer); None when the fee, count or duration is unusable or not in USD."""
    try:
        fee = Decimal(str(item["UpfrontFee"]))
        count, hours = int(item["InstanceCount"]), int(item["CapacityBlockDurationHours"])
    except (KeyError, ValueError, TypeError, InvalidOperation):
        return None
    if item.get("CurrencyCode", "USD") != "USD" or fee <= 0 or count < 1 or hours < 1:
        return None
    per_node_hour = (fee / count / hours).quantize(MICRO_USD, rounding=ROUND_HALF_EVEN)
    offering = str(item.get("CapacityBlockOfferingId", ""))
    zone = str(item.get("AvailabilityZone") or template.zone or "")
    start, end = item.get("StartDate"), item.get("EndDate")
    when = f"{_iso(start)} to {_iso(end)}" if start and end else f"{hours} h"
    return template.model_copy(update={
        "zone": zone or None, "offer_id": offering or None, "purchase": Purchase.RESERVATION,
        "price_per_hour_usd": per_node_hour, "spot_price_per_hour_usd": None, "min_nodes": 1,
        "max_nodes": MAX_INSTANCES_PER_BLOCK, "bootstrap": Bootstrap.CLOUD_INIT, "network": Network.PRIVATE,
        "how_to_obtain": (
            f"EC2 Capacity Block for ML {offering} in {zone}: {count} x {template.instance_type} for {hours} h "
            f"({when}), ${fee} upfront (probed for {count} instance; ask DescribeCapacityBlockOfferings for your "
            f"count and dates, then: aws ec2 purchase-capacity-block --capacity-block-offering-id <id> "
            f"--instance-platform Linux/UNIX --region {template.region}); instances launch into it with "
            "InstanceMarketOptions MarketType capacity-block"),
        "source": "EC2 DescribeCapacityBlockOfferings (live)",
    })


def _iso(value: Any) -> str:
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text.replace("+00:00", "Z")


__all__ = ["CAPACITY_BLOCK_FAMILIES", "MAX_INSTANCES_PER_BLOCK", "PROBE_COUNT", "PROBE_HOURS", "block_offer",
           "sells_blocks"]
