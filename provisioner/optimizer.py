"""Choose where to build a cluster: every offer checked, priced and ranked for one spec.

``resolve_plan(spec, catalog)`` is the public entry point. It is a thin shell around the
columnar core in ``provisioner.costs`` (``OfferTable`` + ``rank_table``): the core works on
numpy arrays and integer cents; this module turns the few rows it returns into ``Option``
and ``RejectedOffer`` models with one-line reasons. The cost model is documented, with the
source of every constant, in ``docs/cost-model.md``.

Pure: no I/O, no clock, no environment reads. numpy is imported on the first call, not at
import time, so commands that never plan do not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.errors import NoFeasibleOfferError, Rejection
from provisioner.offer import Catalog, Offer
from provisioner.plan import CostBreakdown, Option, PlanResult, RejectedOffer
from provisioner.spec import ClusterSpec, Fabric, PricingMode

if TYPE_CHECKING:
    from provisioner.costs import OfferTable, Ranking


def resolve_plan(spec: ClusterSpec, catalog: Catalog) -> PlanResult:
    """Rank every feasible (offer, pricing variant) of ``catalog`` for ``spec``.

    ``options`` are ranked 1..n by expected total cost, ties broken by cluster hourly price,
    then ``Offer.key``, then on-demand before spot. ``rejected`` holds one entry per
    rejected (offer, variant) considered by ``spec.pricing.mode``, furthest-got first.
    Deterministic for a given input. Raises NoFeasibleOfferError (with every Rejection)
    when nothing is feasible, PlanError when pricing facts the spec needs are missing.
    """
    from provisioner.costs import OfferTable, rank_table

    if not catalog.offers:
        raise NoFeasibleOfferError(f"catalog {catalog.origin} has no offers")
    table = OfferTable.from_offers(catalog.offers)
    ranking = rank_table(spec, table, catalog.providers)
    rejections = rejections_of(spec, table, ranking)
    if not len(ranking.order):
        best = rejections[0]
        raise NoFeasibleOfferError(
            f"no offer fits: {best.reason} ({best.provider} {best.instance_type} {best.region}; "
            f"{len(rejections)} rejected)",
            rejected=rejections,
        )
    options = [_option(rank, table, ranking, int(c)) for rank, c in enumerate(ranking.order.tolist(), 1)]
    return PlanResult(
        spec=spec,
        catalog_as_of=catalog.as_of,
        catalog_origin=catalog.origin,
        options=options,
        rejected=[RejectedOffer.of(r) for r in rejections],
    )


def _option(rank: int, table: OfferTable, ranking: Ranking, c: int) -> Option:
    assert table.offers is not None
    offer = table.offers[int(ranking.offer_idx[c])]
    parts = [int(ranking.compute_cents[c]), int(ranking.storage_cents[c]),
             int(ranking.egress_cents[c]), int(ranking.interruption_cents[c])]
    cost = CostBreakdown(
        compute=parts[0] / 100,
        storage=parts[1] / 100,
        egress=parts[2] / 100,
        interruption=parts[3] / 100,
        total=sum(parts) / 100,
        boot_usd=int(ranking.boot_cents[c]) / 100,
    )
    return Option(
        rank=rank,
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu_model=offer.gpu_model,
        gpus_per_node=offer.gpus,
        nodes=int(ranking.nodes[c]),
        spot=bool(ranking.spot[c]),
        hourly_usd=round(float(ranking.hourly_usd[c]), 4),
        cost=cost,
        expected_interruptions=round(float(ranking.expected_interruptions[c]), 6),
        offer=offer,
    )


def rejections_of(
    spec: ClusterSpec, table: OfferTable, ranking: Ranking, limit: int | None = None
) -> list[Rejection]:
    """Rejections for ``ranking``'s infeasible candidates, furthest stage first.

    Within a stage: cheapest total first for the budget stages, then ``Offer.key``,
    then on-demand before spot. ``limit`` caps how many are materialised (the rest stay
    codes in ``ranking.stage``). Needs a table built from offers.
    """
    import numpy as np

    from provisioner.costs import Stage

    if table.offers is None:
        raise ValueError("rejections_of needs an OfferTable built from offers")
    rejected = np.flatnonzero(ranking.stage != 0)
    stage = ranking.stage[rejected]
    cost_key = np.where(stage >= Stage.MAX_HOURLY, ranking.total_cents[rejected], 0)
    key_rank = table.key_rank[ranking.offer_idx[rejected]]
    picked = rejected[np.lexsort((ranking.spot[rejected], key_rank, cost_key, -stage.astype(np.int64)))]
    if limit is not None:
        picked = picked[:limit]
    out = []
    for c in picked.tolist():
        offer = table.offers[int(ranking.offer_idx[c])]
        spot = bool(ranking.spot[c])
        code = Stage(int(ranking.stage[c]))
        field, why = _reason(code, spec, offer, spot, ranking, c)
        out.append(Rejection(
            provider=offer.provider,
            instance_type=offer.instance_type,
            region=offer.region,
            reason=f"{'spot' if spot else 'on-demand'}: {why}",
            field=field,
            stage=int(code),
        ))
    return out


def _reason(
    code: int, spec: ClusterSpec, offer: Offer, spot: bool, ranking: Ranking, c: int
) -> tuple[str, str]:
    """(spec field to blame, one-line reason) for a candidate rejected at stage ``code``."""
    from provisioner.costs import Stage

    nodes = int(ranking.nodes[c])
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
        sold = "spot" if spot else "on-demand"
        return "pricing.mode", f"not sold {sold} (pricing.mode {PricingMode(spec.pricing.mode).value})"
    hourly = float(ranking.hourly_usd[c])
    if code == Stage.MAX_HOURLY:
        return "pricing.max_hourly_usd", (
            f"{nodes} nodes cost ${hourly:,.2f}/h, over ${spec.pricing.max_hourly_usd:,.2f}/h"
        )
    total = int(ranking.total_cents[c]) / 100
    return "pricing.max_total_usd", (
        f"expected total ${total:,.2f} is over ${spec.pricing.max_total_usd:,.2f}"
    )


__all__ = ["rejections_of", "resolve_plan"]
