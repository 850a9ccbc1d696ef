"""Choose where to build a cluster: every offer checked, priced and ranked for one spec.

``resolve_plan(spec, catalog)`` is the public entry point, a thin shell over the core:
``provisioner.costs`` prices each (offer, variant) in plain Python (small catalogs; no
numpy import, so a cold ``provisioner plan`` starts fast) and ``provisioner.offer_table``
does the same columnar with numpy (large catalogs, 10^6 offers in well under a second).
Both yield identical ``Candidate`` rows in integer cents; this module ranks them and turns
them into ``Option`` and ``RejectedOffer`` models with one-line reasons. The cost model,
with the source of every constant, is in ``docs/cost-model.md``.

Pure: no I/O, no clock, no environment reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from provisioner.costs import Candidate, Stage, ranked, rejected
from provisioner.errors import NoFeasibleOfferError, Rejection
from provisioner.offer import Catalog, Offer
from provisioner.plan import CostBreakdown, Option, PlanResult, RejectedOffer
from provisioner.spec import ClusterSpec, Fabric, PricingMode

NUMPY_MIN_OFFERS = 10_000
"""From this many offers on, the vectorized core pays back numpy's import time."""


def resolve_plan(spec: ClusterSpec, catalog: Catalog) -> PlanResult:
    """Rank every feasible (offer, pricing variant) of ``catalog`` for ``spec``.

    ``options`` are ranked 1..n by expected total cost, ties broken by cluster hourly price,
    then ``Offer.key``, then on-demand before spot. ``rejected`` holds one entry per
    rejected (offer, variant) that ``spec.pricing.mode`` considers, furthest-got first.
    Deterministic for a given input. Raises NoFeasibleOfferError (carrying every
    Rejection) when nothing is feasible, PlanError when pricing facts the spec needs
    are missing from the catalog.
    """
    offers = catalog.offers
    if not offers:
        raise NoFeasibleOfferError(f"catalog {catalog.origin} has no offers")
    candidates = price_candidates(spec, offers, catalog)
    rejections = [rejection(spec, offers[c.offer_idx], c) for c in rejected(candidates, offers)]
    best = ranked(candidates, offers)
    if not best:
        first = rejections[0]
        raise NoFeasibleOfferError(
            f"no offer fits: {first.reason} ({first.provider} {first.instance_type} {first.region}; "
            f"{len(rejections)} rejected)",
            rejected=rejections,
        )
    return PlanResult(
        spec=spec,
        catalog_as_of=catalog.as_of,
        catalog_origin=catalog.origin,
        options=[option(rank, offers[c.offer_idx], c) for rank, c in enumerate(best, 1)],
        rejected=[RejectedOffer.of(r) for r in rejections],
    )


def price_candidates(
    spec: ClusterSpec, offers: Sequence[Offer], catalog: Catalog, numpy_min_offers: int = NUMPY_MIN_OFFERS
) -> list[Candidate]:
    """``costs.price_offers``, or its vectorized twin when there are ``numpy_min_offers`` or more."""
    from provisioner.offer_table import OfferTable, rank_table

    return rank_table(spec, OfferTable.from_offers(offers), catalog.providers).candidates()


def option(rank: int, offer: Offer, c: Candidate) -> Option:
    """The ``Option`` model for a feasible candidate."""
    cost = CostBreakdown(
        compute=Decimal(c.compute_cents) / 100,
        storage=Decimal(c.storage_cents) / 100,
        egress=Decimal(c.egress_cents) / 100,
        interruption=Decimal(c.interruption_cents) / 100,
        total=Decimal(c.total_cents) / 100,
        boot_usd=Decimal(c.boot_cents) / 100,
    )
    price = offer.spot_price_per_hour_usd if c.spot else offer.price_per_hour_usd
    hourly = c.nodes * (price or Decimal(0))
    return Option(
        rank=rank,
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu_model=offer.gpu_model,
        gpus_per_node=offer.gpus,
        nodes=c.nodes,
        spot=c.spot,
        purchase=offer.purchase,
        bootstrap=offer.bootstrap,
        network=offer.network,
        hourly_usd=hourly,
        usd_per_gpu_hour=(hourly / (c.nodes * offer.gpus)).quantize(Decimal("0.000001")),
        as_of=offer.as_of,
        cost=cost,
        expected_interruptions=round(c.expected_interruptions, 6),
        offer=offer,
    )


def rejection(spec: ClusterSpec, offer: Offer, c: Candidate) -> Rejection:
    """The ``Rejection`` for a rejected candidate: the spec field to blame and a one-line reason."""
    field, why = _reason(Stage(c.stage), spec, offer, c)
    return Rejection(
        provider=offer.provider,
        instance_type=offer.instance_type,
        region=offer.region,
        reason=f"{'spot' if c.spot else 'on-demand'}: {why}",
        field=field,
        stage=c.stage,
    )


def _reason(code: Stage, spec: ClusterSpec, offer: Offer, c: Candidate) -> tuple[str, str]:
    """(spec field to blame, one-line reason) for a candidate rejected at stage ``code``."""
    nodes = c.nodes
    count = spec.gpus.count
    if code == Stage.PROVIDER:
        if offer.provider in spec.providers.deny:
            return "providers.deny", f"provider {offer.provider} is denied"
        return "providers.allow", f"provider {offer.provider} is not in providers.allow"
    if code == Stage.REGION:
        return "providers.regions", f"region {offer.region} is not in providers.regions"
    if code == Stage.GPU_MODEL:
        return "gpus.model", f"GPU {offer.gpu_model} is not one of {', '.join(spec.gpus.model)}"
    if code == Stage.GPU_MEMORY:
        return "gpus.min_memory_gib", (
            f"{offer.gpu_memory_gib:g} GiB per GPU is below {spec.gpus.min_memory_gib:g} GiB"
        )
    if code == Stage.AVAILABLE:
        return "gpus.model", f"{offer.gpu_model} offer is not available now"
    if code == Stage.NODE_SPLIT:
        per_node, node_count = spec.nodes.gpus_per_node, spec.nodes.count
        if per_node is not None and offer.gpus != per_node:
            return "nodes.gpus_per_node", f"nodes have {offer.gpus} GPUs, not {per_node}"
        if count % offer.gpus:
            return "gpus.count", f"{count} GPUs do not split into nodes of {offer.gpus}"
        return "nodes.count", f"{count} GPUs in nodes of {offer.gpus} make {nodes} nodes, not {node_count}"
    if code == Stage.MAX_NODES:
        field = "nodes.count" if spec.nodes.count is not None else "gpus.count"
        return field, f"needs {nodes} nodes; at most {offer.max_nodes} can be placed together"
    if code == Stage.FABRIC:
        wanted = Fabric(spec.interconnect.fabric)
        return "interconnect.fabric", f"fabric {offer.fabric.value} does not provide {wanted.value}"
    if code == Stage.FABRIC_GBPS:
        return "interconnect.min_gbps_per_node", (
            f"{offer.fabric_gbps:g} Gbps per node is below {spec.interconnect.min_gbps_per_node:g}"
        )
    if code == Stage.NVME:
        return "storage.checkpoint_nvme_gib_per_node", (
            f"{offer.local_nvme_gib:g} GiB local NVMe is below {spec.storage.checkpoint_nvme_gib_per_node:g} GiB"
        )
    if code == Stage.SHARED_STORAGE:
        return "storage.shared.kind", f"{offer.provider} has no managed shared filesystem"
    if code == Stage.RELIABILITY:
        return "reliability.min_score", (
            f"reliability {offer.reliability:g} is below {spec.reliability.min_score:g}"
        )
    if code == Stage.PRICING_MODE:
        sold = "spot" if c.spot else "on-demand"
        return "pricing.mode", f"not sold {sold} (pricing.mode {PricingMode(spec.pricing.mode).value})"
    hourly = c.hourly_usd
    if code == Stage.MAX_HOURLY:
        return "pricing.max_hourly_usd", (
            f"{nodes} nodes cost ${hourly:,.2f}/h, over ${spec.pricing.max_hourly_usd:,.2f}/h"
        )
    total = c.total_cents / 100
    return "pricing.max_total_usd", (
        f"expected total ${total:,.2f} is over ${spec.pricing.max_total_usd:,.2f}"
    )


__all__ = ["NUMPY_MIN_OFFERS", "option", "price_candidates", "rejection", "resolve_plan"]
