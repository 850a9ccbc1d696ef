"""EC2 Capacity Blocks for ML as quote-only offers (``Purchase.RESERVATION``). Pure.

``DescribeCapacityBlockOfferings`` (shape in ../shared/provider-apis/aws/) answers offerings of
``InstanceCount`` instances of one type in one zone for ``CapacityBlockDurationHours`` from
``StartDate`` to ``EndDate`` at an ``UpfrontFee`` (USD, a decimal string). The adapter asks for
``PROBE_COUNT`` instance for each of ``PROBE_HOURS`` per type and turns each answer into an offer
priced per node-hour (fee / count / hours, half-even to micro-USD) with ``block_hours`` and
``block_start``; ``how_to_obtain`` names the offering, its dates and the purchase command. The
optimizer lists them under "Quote only" unless the spec sets ``pricing.reservations``: then they
are ranked at their upfront fee for the whole block, and ``up`` buys one (``blocks``). Nothing
here buys a block.

Families sold as Capacity Blocks (EC2 User Guide "Capacity Blocks for ML", supported instance
types; dated 2026-11-23, p6 and trn2 UNVERIFIED): ``CAPACITY_BLOCK_FAMILIES``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.offer import Offer

CAPACITY_BLOCK_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1", "trn2")
PROBE_COUNT = 1
PROBE_HOURS = (24, 72, 168, 336)
"""Block lengths asked per type at refresh: 1, 3, 7 and 14 days (a plan needs a block at least as
long as its run; the purchase asks again for the planned count and length)."""
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
    return template.model_copy(
        update={
            "zone": zone or None,
            "offer_id": offering or None,
            "purchase": Purchase.RESERVATION,
            "block_hours": hours if valid_block_hours(hours) else 0,
            "block_start": _utc(start),
            "price_per_hour_usd": per_node_hour,
            "spot_price_per_hour_usd": None,
            "min_nodes": 1,
            "max_nodes": MAX_INSTANCES_PER_BLOCK,
            "bootstrap": Bootstrap.CLOUD_INIT,
            "network": Network.PRIVATE,
            "how_to_obtain": (
                f"EC2 Capacity Block for ML {offering} in {zone}: {count} x {template.instance_type} for {hours} h "
                f"({when}), ${fee} upfront (probed for {count} instance; ask DescribeCapacityBlockOfferings for your "
                f"count and dates, then: aws ec2 purchase-capacity-block --capacity-block-offering-id <id> "
                f"--instance-platform Linux/UNIX --region {template.region}); instances launch into it with "
                "InstanceMarketOptions MarketType capacity-block"
            ),
            "source": "EC2 DescribeCapacityBlockOfferings (live)",
        }
    )


def valid_block_hours(hours: int) -> bool:
    """Whether EC2 sells a Capacity Block this long: 24 h steps up to 14 days, then 7-day steps up to
    182 days (EC2 User Guide, "Capacity Blocks for ML", dated 2026-11-23)."""
    return (24 <= hours <= 336 and hours % 24 == 0) or (336 < hours <= 4368 and hours % 168 == 0)


def _utc(value: Any) -> str | None:
    """A start date as ``Offer.block_start`` takes it (``2026-11-25T11:30:00Z``); None if unreadable."""
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def _iso(value: Any) -> str:
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text.replace("+00:00", "Z")


__all__ = [
    "CAPACITY_BLOCK_FAMILIES",
    "MAX_INSTANCES_PER_BLOCK",
    "PROBE_COUNT",
    "PROBE_HOURS",
    "block_offer",
    "sells_blocks",
    "valid_block_hours",
]
