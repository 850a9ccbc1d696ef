"""The cost model's vocabulary and its pure scalar helpers: stages, fabrics, variants, tiered egress.

The cost model itself (every check and every cost term, over columns) is one implementation,
``provisioner.offer_table``. What lives here is what does not need numpy: the stage order, the
fabric rules, which pricing variants a mode considers, and the exact per-provider amounts
(tiered egress) the columnar terms look up. docs/cost-model.md is the specification.

Pure: no I/O, no clock, no environment, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from enum import IntEnum
from fractions import Fraction
from typing import Any

from provisioner.errors import CatalogError
from provisioner.money import spec_decimal
from provisioner.offer import EgressTier, ProviderInfo
from provisioner.spec import ClusterSpec, Fabric, PricingMode

HOURS_PER_MONTH = 730
"""Hours in a billing month, the convention AWS, GCP and Lambda use for monthly prices."""

SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR = 0.25 / HOURS_PER_MONTH
"""Reclaim rate assumed for a spot price whose offer gives no spot rate: AWS Spot Advisor's
worst band (">20%" of capacity reclaimed per month, taken as 25%), per node-hour, or the
offer's on-demand rate if that is higher."""

FABRICS: tuple[Fabric, ...] = (Fabric.ETHERNET, Fabric.ROCE, Fabric.INFINIBAND, Fabric.EFA, Fabric.ANY)

_ACCEPTS: dict[Fabric, frozenset[Fabric]] = {
    Fabric.ANY: frozenset(FABRICS),
    Fabric.ETHERNET: frozenset(FABRICS),
    Fabric.ROCE: frozenset({Fabric.ROCE, Fabric.INFINIBAND}),
    Fabric.INFINIBAND: frozenset({Fabric.INFINIBAND}),
    Fabric.EFA: frozenset({Fabric.EFA}),
}


def fabric_accepts(wanted: Fabric, offered: Fabric) -> bool:
    """Whether an offer's fabric satisfies ``interconnect.fabric``."""
    return Fabric(offered) in _ACCEPTS[Fabric(wanted)]


class Stage(IntEnum):
    """Checks in the order they run; a higher stage means the candidate got further.

    Stages 1-14 depend on the offer only, 15-20 on the pricing variant too. What an offer
    *is* comes first, then whether this installation can buy it (ADAPTER), then what it
    costs: "too expensive" is reported only for options that could otherwise be bought.
    """

    FEASIBLE = 0
    PROVIDER = 1
    REGION = 2
    GPU_MODEL = 3
    GPU_MEMORY = 4
    AVAILABLE = 5
    NODE_SPLIT = 6
    MIN_NODES = 7
    MAX_NODES = 8
    FABRIC = 9
    FABRIC_GBPS = 10
    PRIVATE_NETWORK = 11
    NVME = 12
    SHARED_STORAGE = 13
    RELIABILITY = 14
    PRICING_MODE = 15
    ADAPTER = 16
    MAX_HOURLY = 17
    MAX_TOTAL = 18
    QUOTA = 19
    """Last, out of order, so the numbers of the stages above stay what plan files say: an option
    within every budget that needs more of an account quota than ``catalog refresh`` found left."""
    BLOCK_HOURS = 20
    """Appended like QUOTA: a reservation bought as one block (``Offer.block_hours``, ranked only under
    ``pricing.reservations``) that ends before the run and the nodes' boot do."""

    @property
    def label(self) -> str:
        """The stage's name as reports print it (``max_total``)."""
        return self.name.lower()


def billed_span(run_s: Any, increment_s: Any, minimum_s: Any) -> Any:
    """Whole seconds run -> seconds billed: up to the billing increment, at least the minimum. Elementwise
    on int64 columns (provisioner.cost_terms), and on plain ints (provisioner.metering bills each node's
    real run with it). Plain arithmetic, no numpy call, so metering (and `status`, `down`) need no numpy."""
    billed = -(-run_s // increment_s) * increment_s
    return billed + (minimum_s - billed) * (billed < minimum_s)


def variants(mode: PricingMode) -> tuple[bool, ...]:
    """Pricing variants (``spot`` flags) a pricing mode considers, on-demand first."""
    return {PricingMode.ON_DEMAND: (False,), PricingMode.SPOT: (True,), PricingMode.EITHER: (False, True)}[
        PricingMode(mode)
    ]


def tiered_usd(tiers: Sequence[EgressTier], gb: Decimal | float, free_gb: Decimal | float = 0) -> Fraction:
    """Exact USD to send ``gb`` through cumulative ``tiers`` when the first ``free_gb`` cost nothing.

    Tier bounds are cumulative GB (``up_to_gb``; None = unbounded). The free allowance
    covers the first GB of the month, so the charge is tiered(gb) - tiered(min(gb, free_gb)).
    GB beyond the last bounded tier, with no unbounded tier, are charged at the last rate.
    """
    amount, free = Fraction(spec_decimal(gb)), Fraction(spec_decimal(free_gb))
    return _tiered(tiers, amount) - _tiered(tiers, min(amount, free))


def _tiered(tiers: Sequence[EgressTier], gb: Fraction) -> Fraction:
    cost, floor = Fraction(0), Fraction(0)
    for tier in tiers:
        if tier.up_to_gb is None:
            return cost + max(gb - floor, Fraction(0)) * Fraction(tier.usd_per_gb)
        ceiling = Fraction(spec_decimal(tier.up_to_gb))
        if gb > floor:
            cost += (min(gb, ceiling) - floor) * Fraction(tier.usd_per_gb)
        floor = max(floor, ceiling)
    if tiers and gb > floor:
        cost += (gb - floor) * Fraction(tiers[-1].usd_per_gb)
    return cost


def dataset_leave_usd(spec: ClusterSpec, provider_infos: Mapping[str, ProviderInfo]) -> Fraction:
    """Exact USD for the dataset to leave its source provider over the internet (0 when it has none).

    Raises CatalogError (exit 2: the catalog lacks what planning needs, not a spec nothing fits)
    when there is data to move from a provider the catalog has no facts for.
    """
    dataset = spec.workload.dataset
    source, _ = dataset.source
    if not dataset.size_gb or source is None:
        return Fraction(0)
    if source not in provider_infos:
        raise CatalogError(f"workload.dataset.location: no pricing facts for {source} in the catalog")
    info = provider_infos[source]
    return tiered_usd(info.internet_egress_tiers, dataset.size_gb, info.free_egress_gb)


__all__ = [
    "FABRICS",
    "HOURS_PER_MONTH",
    "SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR",
    "Stage",
    "billed_span",
    "dataset_leave_usd",
    "fabric_accepts",
    "tiered_usd",
    "variants",
]
