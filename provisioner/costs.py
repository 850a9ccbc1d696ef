"""The cost model and feasibility checks, one (offer, pricing variant) at a time, in plain Python.

This is the reference implementation of ``docs/cost-model.md`` and the path small catalogs
take (no numpy import, so a cold ``provisioner plan`` stays fast). ``provisioner.offer_table``
is the vectorized twin for large tables; both produce identical ``Candidate`` rows (the
tests check it), so every arithmetic step here is written in the same order as there.

Pure: no I/O, no clock, no environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import NamedTuple

from provisioner.errors import PlanError
from provisioner.offer import EgressTier, Offer, ProviderInfo
from provisioner.spec import ClusterSpec, Fabric, PricingMode, SharedFsKind, canonical_gpu

HOURS_PER_MONTH = 730.0
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

    Stages 1-12 depend on the offer only, 13-15 on the pricing variant too. The budget
    checks come last so "too expensive" is reported only for offers that fit otherwise.
    """

    FEASIBLE = 0
    PROVIDER = 1
    REGION = 2
    GPU_MODEL = 3
    GPU_MEMORY = 4
    AVAILABLE = 5
    NODE_SPLIT = 6
    MAX_NODES = 7
    FABRIC = 8
    FABRIC_GBPS = 9
    NVME = 10
    SHARED_STORAGE = 11
    RELIABILITY = 12
    PRICING_MODE = 13
    MAX_HOURLY = 14
    MAX_TOTAL = 15


class Candidate(NamedTuple):
    """One offer bought one way, checked and priced.

    ``stage`` is 0 when feasible, else the ``Stage`` of the first failed check (the cost
    fields of a rejected candidate are not meaningful before ``PRICING_MODE``). Costs are
    whole cents; ``boot_cents`` is the part of ``compute_cents`` paid while booting.
    """

    offer_idx: int
    spot: bool
    stage: int
    nodes: int
    hourly_usd: float
    expected_interruptions: float
    compute_cents: int
    storage_cents: int
    egress_cents: int
    interruption_cents: int
    boot_cents: int

    @property
    def total_cents(self) -> int:
        return self.compute_cents + self.storage_cents + self.egress_cents + self.interruption_cents


def variants(mode: PricingMode) -> tuple[bool, ...]:
    """Pricing variants (``spot`` flags) a pricing mode considers, on-demand first."""
    return {PricingMode.ON_DEMAND: (False,), PricingMode.SPOT: (True,), PricingMode.EITHER: (False, True)}[
        PricingMode(mode)
    ]


def tiered_usd(tiers: Sequence[EgressTier], gb: float, free_gb: float = 0.0) -> float:
    """USD to send ``gb`` through cumulative ``tiers`` when the first ``free_gb`` cost nothing.

    Tier bounds are cumulative GB (``up_to_gb``; None = unbounded). The free allowance
    covers the first GB of the month, so the charge is tiered(gb) - tiered(min(gb, free_gb)).
    GB beyond the last bounded tier, with no unbounded tier, are charged at the last rate.
    """
    return _tiered(tiers, gb) - _tiered(tiers, min(gb, free_gb))


def _tiered(tiers: Sequence[EgressTier], gb: float) -> float:
    cost, floor = 0.0, 0.0
    for tier in tiers:
        ceiling = math.inf if tier.up_to_gb is None else tier.up_to_gb
        if gb > floor:
            cost += (min(gb, ceiling) - floor) * float(tier.usd_per_gb)
        floor = max(floor, ceiling)
    if tiers and gb > floor:
        cost += (gb - floor) * float(tiers[-1].usd_per_gb)
    return cost


def cents(usd: float) -> int:
    """Round USD to whole cents, half to even (as ``numpy.rint`` does)."""
    return round(usd * 100.0)


def dataset_leave_usd(spec: ClusterSpec, provider_infos: Mapping[str, ProviderInfo]) -> float:
    """USD for the dataset to leave its source provider over the internet (0 when it has none).

    Raises PlanError when there is data to move from a provider the catalog has no facts for.
    """
    dataset = spec.workload.dataset
    source, _ = dataset.source
    if not dataset.size_gb or source is None:
        return 0.0
    if source not in provider_infos:
        raise PlanError(f"workload.dataset.location: no pricing facts for {source} in the catalog")
    info = provider_infos[source]
    return tiered_usd(info.internet_egress_tiers, dataset.size_gb, info.free_egress_gb)


def price_offers(
    spec: ClusterSpec, offers: Sequence[Offer], provider_infos: Mapping[str, ProviderInfo]
) -> list[Candidate]:
    """Check and price every (offer, variant) for ``spec``, offers in order, on-demand first.

    Raises PlanError when an offer's provider, or the dataset's source provider (when
    there is data to move), has no entry in ``provider_infos``.
    """
    w = spec.workload
    hours = w.hours
    allowed = set(spec.allowed_providers())
    regions = set(spec.providers.regions)
    models = {canonical_gpu(m) for m in spec.gpus.model}
    count, per_node, node_count = spec.gpus.count, spec.nodes.gpus_per_node, spec.nodes.count
    fabric, min_gbps = Fabric(spec.interconnect.fabric), spec.interconnect.min_gbps_per_node
    nvme_gib = spec.storage.checkpoint_nvme_gib_per_node
    shared = spec.storage.shared
    managed = SharedFsKind(shared.kind) == SharedFsKind.MANAGED
    data_gb, out_gb = w.dataset.size_gb, w.results_out_gb
    source, source_region = w.dataset.source
    leave_usd = dataset_leave_usd(spec, provider_infos)
    inter_region = provider_infos[source].inter_region_usd_per_gb if data_gb and source else 0.0
    lost_h = (w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes) / 60.0
    max_hourly, max_total = spec.pricing.max_hourly_usd, spec.pricing.max_total_usd
    max_total_c = None if max_total is None else round(max_total * 100)
    modes = variants(spec.pricing.mode)
    results_tiers: dict[str, float] = {}

    out: list[Candidate] = []
    for i, o in enumerate(offers):
        info = provider_infos.get(o.provider)
        if info is None:
            raise PlanError(f"catalog has offers from {o.provider} but no pricing facts for it")
        nodes, rest = divmod(count, o.gpus)
        stage = _offer_stage(o, spec, allowed, regions, models, fabric, min_gbps, nvme_gib, info, managed,
                             max(nodes, 1), bool(rest) or (per_node is not None and o.gpus != per_node)
                             or (node_count is not None and nodes != node_count))
        nodes = max(nodes, 1)

        storage_usd = nodes * (nvme_gib * hours) * o.disk_usd_per_gib_hour
        if managed and info.shared_storage_usd_per_gib_month is not None:
            storage_usd = storage_usd + info.shared_storage_usd_per_gib_month * (
                shared.size_gib * hours / HOURS_PER_MONTH)
        egress_usd = 0.0
        if data_gb:
            egress_usd = data_gb * o.ingress_usd_per_gb
            if source is not None:
                egress_usd = leave_usd + egress_usd
                if o.provider == source:
                    egress_usd = 0.0 if o.region == source_region else data_gb * inter_region
        if out_gb:
            # The provider's tiered table (with its free allowance) when it publishes one (AWS,
            # GCP); otherwise the offer's own flat rate (a Vast.ai host's inet_up_cost).
            if info.internet_egress_tiers:
                if o.provider not in results_tiers:
                    results_tiers[o.provider] = tiered_usd(info.internet_egress_tiers, out_gb, info.free_egress_gb)
                egress_usd = egress_usd + results_tiers[o.provider]
            else:
                egress_usd = egress_usd + out_gb * o.egress_usd_per_gb
        storage_c, egress_c = cents(storage_usd), cents(egress_usd)
        boot_h = info.boot_minutes / 60.0
        increment = o.billing_increment_s
        billed_h = max(math.ceil(hours * 3600.0 / increment) * increment, o.billing_minimum_s) / 3600.0

        for spot in modes:
            price = o.spot_price_per_hour_usd if spot else o.price_per_hour_usd
            sold = price is not None
            price = price if price is not None else 0.0
            if not spot:
                rate = o.interruptions_per_node_hour
            elif o.spot_interruptions_per_node_hour is None:
                rate = max(o.interruptions_per_node_hour, SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR)
            else:
                rate = o.spot_interruptions_per_node_hour
            hourly = nodes * price
            boot_c = cents(hourly * boot_h)
            compute_c = cents(hourly * billed_h) + boot_c
            expected = rate * nodes * hours
            interruption_c = cents(expected * lost_h * hourly)
            variant_stage = stage
            if not stage:
                total_c = compute_c + storage_c + egress_c + interruption_c
                if not sold:
                    variant_stage = Stage.PRICING_MODE
                elif max_hourly is not None and hourly > max_hourly:
                    variant_stage = Stage.MAX_HOURLY
                elif max_total_c is not None and total_c > max_total_c:
                    variant_stage = Stage.MAX_TOTAL
            out.append(Candidate(i, spot, int(variant_stage), nodes, hourly, expected,
                                 compute_c, storage_c, egress_c, interruption_c, boot_c))
    return out


def _offer_stage(
    o: Offer, spec: ClusterSpec, allowed: set[str], regions: set[str], models: set[str], fabric: Fabric,
    min_gbps: float, nvme_gib: float, info: ProviderInfo, managed: bool, nodes: int, split_bad: bool,
) -> int:
    """The first variant-independent check ``o`` fails (0 when it passes them all)."""
    if o.provider not in allowed:
        return Stage.PROVIDER
    if regions and o.region not in regions:
        return Stage.REGION
    if models and canonical_gpu(o.gpu_model) not in models:
        return Stage.GPU_MODEL
    if o.gpu_memory_gib < spec.gpus.min_memory_gib:
        return Stage.GPU_MEMORY
    if not o.available:
        return Stage.AVAILABLE
    if split_bad:
        return Stage.NODE_SPLIT
    if nodes > o.max_nodes:
        return Stage.MAX_NODES
    if not fabric_accepts(fabric, o.fabric):
        return Stage.FABRIC
    if nodes > 1 and o.fabric_gbps < min_gbps:
        return Stage.FABRIC_GBPS
    if o.local_nvme_gib < nvme_gib:
        return Stage.NVME
    if managed and info.shared_storage_usd_per_gib_month is None:
        return Stage.SHARED_STORAGE
    if o.reliability < spec.reliability.min_score:
        return Stage.RELIABILITY
    return Stage.FEASIBLE


def ranked(candidates: Sequence[Candidate], offers: Sequence[Offer]) -> list[Candidate]:
    """Feasible candidates best first: total, cluster hourly price, ``Offer.key``, on-demand first."""
    feasible = [c for c in candidates if not c.stage]
    return sorted(feasible, key=lambda c: (c.total_cents, c.hourly_usd, offers[c.offer_idx].key, c.spot))


def rejected(candidates: Sequence[Candidate], offers: Sequence[Offer]) -> list[Candidate]:
    """Rejected candidates, furthest stage first; cheapest first within the budget stages."""

    def order(c: Candidate) -> tuple[int, int, tuple[str, ...], bool]:
        cost = c.total_cents if c.stage >= Stage.MAX_HOURLY else 0
        return (-c.stage, cost, offers[c.offer_idx].key, c.spot)

    return sorted((c for c in candidates if c.stage), key=order)


__all__ = [
    "FABRICS",
    "HOURS_PER_MONTH",
    "SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR",
    "Candidate",
    "Stage",
    "cents",
    "dataset_leave_usd",
    "fabric_accepts",
    "price_offers",
    "ranked",
    "rejected",
    "tiered_usd",
    "variants",
]
