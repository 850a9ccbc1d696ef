"""Choose where to build a cluster: every offer checked, priced and ranked for one spec.

``resolve_plan(spec, catalog, capabilities)`` is the public entry point, a thin shell over the
one cost model in ``provisioner.offer_table`` (columnar, integer money). This module turns its
``Ranking`` into models: the best ``keep`` ``Option``s, the quote-only products as ``Quote``s,
rejections grouped by (stage, spec field, reason) with a few examples, and every rejection
only when asked (``explain=True``). Output size does not grow with the number of rejections.
The cost model, with the source of every constant, is in ``docs/cost-model.md``.

Pure: no I/O, no clock, no environment reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol, cast

from provisioner.capabilities import Capability
from provisioner.costs import FABRICS, Stage
from provisioner.errors import NoFeasibleOfferError, Rejection
from provisioner.money import usd_of_cents, usd_of_pico
from provisioner.offer import ProviderInfo
from provisioner.plan import CostBreakdown, Option, PlanResult, Quote, RejectedOffer, RejectionGroup, per_gpu_hour
from provisioner.spec import ClusterSpec, Fabric, PricingMode
from provisioner.termtext import counted

if TYPE_CHECKING:
    import numpy as np

    from provisioner.columns import OfferTable
    from provisioner.offer_table import PricedColumn, Ranking
    from provisioner.variant_checks import VariantSetup

EXAMPLES_PER_GROUP = 3
DEFAULT_KEEP = 50


class OfferSource(Protocol):
    """What resolve_plan reads from a catalog: a JSON ``Catalog`` or a columnar ``TableCatalog``."""

    @property
    def as_of(self) -> dt.date: ...
    @property
    def origin(self) -> str: ...
    @property
    def providers(self) -> Mapping[str, ProviderInfo]: ...
    def offer_table(self) -> OfferTable: ...


def resolve_plan(
    spec: ClusterSpec,
    catalog: OfferSource,
    capabilities: Mapping[str, frozenset[Capability]] | None = None,
    *,
    keep: int = DEFAULT_KEEP,
    explain: bool = False,
) -> PlanResult:
    """Rank every buyable (offer, pricing variant) of ``catalog`` for ``spec``; keep the best ``keep``.

    ``capabilities`` is what each provider's adapter can create (``registry.capabilities()``,
    passed by the shell); a provider absent from it can create nothing. None skips the adapter
    gate (what-if pricing only). Options are ranked by expected total, then cluster hourly
    price, then ``Offer.key``, then on-demand before spot. Deterministic. Raises
    NoFeasibleOfferError (carrying the rejection groups, the quotes, the blamed group, and every
    rejection when ``explain``) when nothing can be ranked, CatalogError when pricing facts are missing.
    """
    from provisioner.offer_table import rank_table

    table = catalog.offer_table()
    if not len(table):
        raise NoFeasibleOfferError(f"catalog {catalog.origin} has no offers")
    ranking = rank_table(spec, table, catalog.providers, capabilities, keep=keep)
    provider_as_of = {name: catalog.providers[name].as_of or catalog.as_of for name in table.dictionary("provider")}
    groups = rejection_groups(spec, table, ranking)
    rejected = every_rejection(spec, table, ranking) if explain else []
    if not len(ranking.order):
        first = blamed_group(spec, table, ranking, groups)
        example = first.examples[0] if first and first.examples else None
        where = f" ({example.provider} {example.instance_type} {example.region}; " if example else " ("
        count = sum(g.count for g in groups)
        found = quotes(spec, table, ranking, provider_as_of, keep)
        why = example.reason if example else (first.reason if first else "nothing can be bought")
        if found and first is None:
            why = "only quote-only products fit"
        error = NoFeasibleOfferError(f"no offer fits: {why}{where}{count} rejected){quoted_note(found)}",
                                     rejected=[_as_rejection(r) for r in rejected])
        error.rejection_groups = groups  # type: ignore[attr-defined]
        error.blamed = first  # type: ignore[attr-defined]
        error.quotes = found  # type: ignore[attr-defined]
        raise error
    options = [option(rank, table, ranking, int(c), provider_as_of) for rank, c in enumerate(ranking.order, 1)]
    return PlanResult(
        spec=spec,
        catalog_as_of=catalog.as_of,
        catalog_origin=catalog.origin,
        provider_as_of=provider_as_of,
        options=options,
        feasible_count=ranking.feasible_count,
        quotes=quotes(spec, table, ranking, provider_as_of, keep),
        rejection_groups=groups,
        rejected=rejected,
    )


def option(rank: int, table: OfferTable, ranking: Ranking, c: int, provider_as_of: Mapping[str, dt.date]) -> Option:
    """The ``Option`` model for a ranked candidate."""
    offer = table.offer(ranking.offer_of(c))
    hourly = usd_of_pico(int(ranking.hourly_micro[c]), int(ranking.hourly_rest[c]))
    terms = {name: usd_of_cents(int(cents[c])) for name, cents in ranking.terms.items()}
    cost = CostBreakdown(**terms, total=usd_of_cents(int(ranking.total_cents[c])),
                         boot_usd=usd_of_cents(int(ranking.boot_cents[c])))
    return Option(
        rank=rank,
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu_model=offer.gpu_model,
        gpus_per_node=offer.gpus,
        nodes=int(ranking.nodes[c]),
        spot=ranking.spot_of(c),
        purchase=offer.purchase,
        bootstrap=offer.bootstrap,
        network=offer.network,
        hourly_usd=hourly,
        usd_per_gpu_hour=per_gpu_hour(hourly, offer.gpus * int(ranking.nodes[c])),
        cost=cost,
        expected_interruptions=round(float(ranking.expected_interruptions[c]), 6),
        as_of=offer.as_of or provider_as_of.get(offer.provider),
        offer=offer,
    )


def quotes(spec: ClusterSpec, table: OfferTable, ranking: Ranking, provider_as_of: Mapping[str, dt.date],
           keep: int) -> list[Quote]:
    """Quote-only products that fit, cheapest first (at most ``keep``)."""
    import numpy as np

    found = np.flatnonzero(ranking.quote)
    found = found[np.lexsort((ranking.hourly_rest[found], ranking.hourly_micro[found], ranking.total_cents[found]))][
        :keep]
    out = []
    for c in found.tolist():
        offer = table.offer(ranking.offer_of(c))
        out.append(Quote(provider=offer.provider, instance_type=offer.instance_type, region=offer.region,
                         gpu_model=offer.gpu_model, gpus_per_node=offer.gpus, nodes=int(ranking.nodes[c]),
                         purchase=offer.purchase,
                         hourly_usd=usd_of_pico(int(ranking.hourly_micro[c]), int(ranking.hourly_rest[c])),
                         how_to_obtain=offer.how_to_obtain,
                         as_of=offer.as_of or provider_as_of.get(offer.provider)))
    return out


def quoted_note(found: list[Quote]) -> str:
    """What a no-fit message adds when quote-only products fit ('' when none do)."""
    if not found:
        return ""
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return (f"; quote-only products fit, not bought by this tool: {first.provider} {first.instance_type}"
            f"{more} (how to obtain them: the report's quotes)")


def blamed_group(spec: ClusterSpec, table: OfferTable, ranking: Ranking,
                 groups: list[RejectionGroup]) -> RejectionGroup | None:
    """The rejection group a no-fit blames (docs/cost-model.md, "When nothing fits"): the spec
    field that alone keeps out the most buyable candidates, i.e. candidates (not quote-only) that
    fail exactly one of the 20 checks, every check evaluated on its own; a tie goes to the field
    of the higher stage; with no such candidate, the furthest stage's group. Returns that
    field's furthest group."""
    import numpy as np

    from provisioner.variant_checks import variant_checks

    if not groups:
        return None
    n, setup = ranking.n, cast("VariantSetup", ranking.extra["setup"])
    quote_only = cast("np.ndarray", ranking.extra["quote_only"])
    offer_failures = cast("np.ndarray", ranking.extra["offer_failures"])
    late_failures = cast("np.ndarray", ranking.extra["late_failures"])
    keys: list[np.ndarray] = []
    # Offers failing one offer check: the variant checks decide whether that check alone keeps them out.
    first = ranking.stage[:n]
    lone = np.flatnonzero((first > 0) & (first < Stage.PRICING_MODE) & (offer_failures == 1) & ~quote_only)
    for k, spot in enumerate(ranking.spots):
        if len(lone):
            fits = lone[variant_checks(setup, lone, k, spot).failures == 0]
            keys.append(ranking.stage[fits].astype(np.int64) * 65_536 + ranking.sub[fits])
    # Offers passing every offer check that fail exactly one variant check.
    one_late = np.flatnonzero((late_failures == 1) & ~np.tile(quote_only, len(ranking.spots)))
    keys.append(ranking.stage[one_late].astype(np.int64) * 65_536 + ranking.sub[one_late])
    found, counts = np.unique(np.concatenate(keys), return_counts=True)
    if not len(found):
        return groups[0]
    score: dict[str, tuple[int, int]] = {}
    for key, count in zip(found.tolist(), counts.tolist(), strict=True):
        stage, sub = divmod(key, 65_536)
        field, _ = _reason(Stage(stage), sub, spec, table, ranking, None)
        had, deepest = score.get(field, (0, 0))
        score[field] = (had + count, max(deepest, stage))
    field = max(score, key=lambda f: score[f])
    return next(g for g in groups if g.field == field)


def _variant_stage(stage: int) -> bool:
    return stage >= Stage.PRICING_MODE


def rejection_groups(spec: ClusterSpec, table: OfferTable, ranking: Ranking) -> list[RejectionGroup]:
    """Rejections counted by (stage, reason sub-code): offer checks count each offer once, the
    variant checks each (offer, variant). Furthest stage first, then count; each with at most
    three examples (the cheapest first in the budget stages, else by ``Offer.key``)."""
    import numpy as np

    n = ranking.n
    first_variant = ranking.stage[:n]
    cands = np.concatenate([
        np.flatnonzero((first_variant > 0) & (first_variant < Stage.PRICING_MODE)),
        np.flatnonzero(ranking.stage >= Stage.PRICING_MODE),
    ])
    if not len(cands):
        return []
    stages, subs = ranking.stage[cands], ranking.sub[cands]
    order = np.lexsort((subs, stages))  # stable: each group's members stay in candidate order
    stages, subs = stages[order], subs[order]
    starts = np.flatnonzero(np.r_[True, (stages[1:] != stages[:-1]) | (subs[1:] != subs[:-1])])
    counts = np.diff(np.r_[starts, len(cands)])
    key_rank = table["key_rank"]
    by_group = np.split(cands[order], starts[1:])
    groups = []
    for stage, sub, count, members in zip(stages[starts].tolist(), subs[starts].tolist(), counts.tolist(), by_group,
                                          strict=True):
        cost = ranking.total_cents if stage >= Stage.MAX_HOURLY else None
        examples = [rejected_offer(spec, table, ranking, int(c)) for c in _first(members, key_rank, n, cost).tolist()]
        field, reason = _reason(Stage(stage), sub, spec, table, ranking, None)
        groups.append(RejectionGroup(stage=stage, stage_name=Stage(stage).label, field=field, reason=reason,
                                     count=count, examples=examples))
    return sorted(groups, key=lambda g: (-g.stage, -g.count, g.reason))


def _first(members: np.ndarray, key_rank: np.ndarray, n: int, cost: PricedColumn | None) -> np.ndarray:
    """The EXAMPLES_PER_GROUP candidates of ``members`` that sort first by (cost, key_rank) (key_rank of
    their offer alone without ``cost``), without sorting the whole group: only members at or under
    the k-th smallest primary value can be among them."""
    import numpy as np

    primary = key_rank[_offers(members, n)] if cost is None else cost[members]
    if len(members) > EXAMPLES_PER_GROUP:
        kth = np.partition(primary, EXAMPLES_PER_GROUP - 1)[EXAMPLES_PER_GROUP - 1]
        members = members[primary <= kth]
    ranks = key_rank[_offers(members, n)]
    order = np.lexsort((ranks,) if cost is None else (ranks, cost[members]))
    return members[order][:EXAMPLES_PER_GROUP]


def _offers(members: np.ndarray, n: int) -> np.ndarray:
    """The offer row of each candidate in ``members`` (ascending): themselves when all are first-variant."""
    return members if not len(members) or members[-1] < n else members % n


def every_rejection(spec: ClusterSpec, table: OfferTable, ranking: Ranking) -> list[RejectedOffer]:
    """Every rejected (offer, variant), furthest stage first; cheapest first in the budget stages."""
    import numpy as np

    rejected = np.flatnonzero(ranking.stage > 0)
    cost = np.where(ranking.stage[rejected] >= Stage.MAX_HOURLY, ranking.total_cents[rejected], 0)
    rank = table["key_rank"][rejected % ranking.n]
    order = rejected[np.lexsort((rejected // ranking.n, rank, cost, -ranking.stage[rejected].astype(np.int64)))]
    return [rejected_offer(spec, table, ranking, int(c)) for c in order.tolist()]


def rejected_offer(spec: ClusterSpec, table: OfferTable, ranking: Ranking, c: int) -> RejectedOffer:
    """One rejected candidate with its own figures in the reason."""
    stage = Stage(int(ranking.stage[c]))
    field, why = _reason(stage, int(ranking.sub[c]), spec, table, ranking, c)
    row = ranking.offer_of(c)
    reason = f"{'spot' if ranking.spot_of(c) else 'on-demand'}: {why}" if _variant_stage(stage) else why
    return RejectedOffer(provider=table.text("provider", row) or "", instance_type=table.text("instance_type", row)
                         or "", region=table.text("region", row) or "", reason=reason, field=field,
                         stage=int(stage), stage_name=stage.label)


def _as_rejection(item: RejectedOffer) -> Rejection:
    return Rejection(provider=item.provider, instance_type=item.instance_type, region=item.region,
                     reason=item.reason, field=item.field, stage=item.stage)


def _reason(code: Stage, sub: int, spec: ClusterSpec, table: OfferTable, ranking: Ranking,
            c: int | None) -> tuple[str, str]:
    """(spec field to blame, one-line reason) for stage ``code`` and reason ``sub``; with a candidate
    ``c`` the reason carries its own figures, without one it is the group's shared wording."""
    row = None if c is None else ranking.offer_of(c)

    def text(name: str) -> str:
        return "" if row is None else table.text(name, row) or ""

    def num(name: str) -> float:
        return float(table[name][row]) if row is not None else 0.0

    offer = f"{text('provider')} {text('instance_type')}" if row is not None else "the offer"
    count = spec.gpus.count
    nodes = int(ranking.nodes[c]) if c is not None else 0
    nodes_field = "nodes.count" if spec.nodes.count is not None else "gpus.count"
    if code == Stage.PROVIDER:
        name = text("provider") or "provider"
        if sub == 0:
            return "providers.deny", f"provider {name} is denied" if row is not None else "provider is denied"
        return "providers.allow", (f"provider {name} is not in providers.allow" if row is not None
                                   else "provider is not in providers.allow")
    if code == Stage.REGION:
        return "providers.regions", f"region {text('region') or ''} is not in providers.regions".replace("  ", " ")
    if code == Stage.GPU_MODEL:
        return "gpus.model", f"GPU {text('gpu_model')} is not one of {', '.join(spec.gpus.model)}".replace("  ", " ")
    if code == Stage.GPU_MEMORY:
        have = f"{num('gpu_memory_gib'):g} GiB per GPU" if row is not None else "GPU memory"
        return "gpus.min_memory_gib", f"{have} is below {spec.gpus.min_memory_gib:g} GiB"
    if code == Stage.AVAILABLE:
        return "gpus.model", f"{text('gpu_model') or 'the'} offer is not available now".replace("the offer", "offer")
    if code == Stage.NODE_SPLIT:
        gpus, all_gpus = int(num("gpus")), counted(count, "GPU")
        if sub == 0:
            per_node = spec.nodes.gpus_per_node
            return "nodes.gpus_per_node", (f"nodes have {counted(gpus, 'GPU')}, not {per_node}" if row is not None
                                           else f"nodes do not have {counted(per_node, 'GPU')}")
        if sub == 1:
            return "gpus.count", (f"{all_gpus} do not split into nodes of {gpus}" if row is not None
                                  else f"{all_gpus} do not split into whole nodes")
        return "nodes.count", (f"{all_gpus} in nodes of {gpus} make {counted(nodes, 'node')}, not {spec.nodes.count}"
                               if row is not None else f"{all_gpus} do not make {counted(spec.nodes.count, 'node')}")
    if code == Stage.MIN_NODES:
        return nodes_field, (f"needs {counted(nodes, 'node')}; {offer} is sold as at least {int(num('min_nodes'))}"
                             if row is not None else "needs fewer nodes than the product is sold as")
    if code == Stage.MAX_NODES:
        return nodes_field, (f"needs {nodes} nodes; at most {int(num('max_nodes'))} can be placed together"
                             if row is not None else "needs more nodes than can be placed together")
    if code == Stage.FABRIC:
        wanted = Fabric(spec.interconnect.fabric)
        return "interconnect.fabric", f"fabric {FABRICS[sub].value} does not provide {wanted.value}"
    if code == Stage.FABRIC_GBPS:
        have = f"{num('fabric_gbps'):g} Gbps per node" if row is not None else "fabric bandwidth"
        return "interconnect.min_gbps_per_node", f"{have} is below {spec.interconnect.min_gbps_per_node:g}"
    if code == Stage.PRIVATE_NETWORK:
        return "interconnect.fabric", (
            f"nodes of {offer} cannot reach each other privately (network: none); a multi-node cluster "
            f"with a control plane or a fabric needs a private network")
    if code == Stage.NVME:
        have = f"{num('local_nvme_gib'):g} GiB local NVMe" if row is not None else "local NVMe"
        return "storage.checkpoint_nvme_gib_per_node", (
            f"{have} is below {spec.storage.checkpoint_nvme_gib_per_node:g} GiB")
    if code == Stage.SHARED_STORAGE:
        return "storage.shared.kind", f"{table.dictionary('provider')[sub]} has no managed shared filesystem"
    if code == Stage.RELIABILITY:
        have = f"reliability {num('reliability'):g}" if row is not None else "reliability"
        return "reliability.min_score", f"{have} is below {spec.reliability.min_score:g}"
    if code == Stage.PRICING_MODE:
        sold = "spot" if sub else "on-demand"
        return "pricing.mode", f"not sold {sold} (pricing.mode {PricingMode(spec.pricing.mode).value})"
    if code == Stage.ADAPTER:
        return _adapter_reason(sub, table)
    if code == Stage.QUOTA:
        return nodes_field, _quota_reason(sub, table, ranking, c)
    if code == Stage.BLOCK_HOURS:
        run = f"the {spec.workload.hours:g} h run plus the nodes' boot"
        if row is None:
            return "workload.hours", f"the reservation's block ends before {run}"
        return "workload.hours", (f"the {int(num('block_hours'))} h {offer} block (paid upfront in full) ends "
                                  f"before {run}")
    if code == Stage.MAX_HOURLY:
        budget = f"{usd_text(spec.pricing.max_hourly_usd)}/h"
        if c is None:
            return "pricing.max_hourly_usd", f"cluster hourly price is over {budget}"
        hourly = usd_text(usd_of_pico(int(ranking.hourly_micro[c]), int(ranking.hourly_rest[c])))
        return "pricing.max_hourly_usd", (
            f"{counted(nodes, 'node')} cost{'s' if nodes == 1 else ''} {hourly}/h, over {budget}")
    budget = usd_text(spec.pricing.max_total_usd)
    if c is None:
        return "pricing.max_total_usd", f"expected total is over {budget}"
    return "pricing.max_total_usd", f"expected total ${usd_of_cents(int(ranking.total_cents[c])):,} is over {budget}"


def usd_text(amount: Decimal | None) -> str:
    """``$1,234.56``, exact: every decimal kept past the cents (``$4.355``), never rounded away, and
    never in exponent form (a budget of 0.000000001 is ``$0.000000001``, not ``$1E-9``)."""
    value = Decimal(amount or 0)
    shown = value.quantize(Decimal("0.01")) if value == value.quantize(Decimal("0.01")) else value.normalize()
    return f"${shown:,f}"


def _adapter_reason(sub: int, table: OfferTable) -> tuple[str, str]:
    from provisioner.variant_checks import NEEDED, NO_ADAPTER

    code, lacking = divmod(sub, 32)
    provider = table.dictionary("provider")[code]
    if lacking == NO_ADAPTER:
        return "providers.allow", f"no {provider} adapter in this installation yet"
    need = NEEDED[lacking]
    field = {Capability.SPOT: "pricing.mode", Capability.ON_DEMAND: "pricing.mode",
             Capability.FABRIC_IB: "interconnect.fabric", Capability.FABRIC_EFA: "interconnect.fabric",
             Capability.FABRIC_ROCE: "interconnect.fabric"}.get(need, "providers.allow")
    return field, f"the {provider} adapter cannot create {_WHAT[need]}"


def _quota_reason(sub: int, table: OfferTable, ranking: Ranking, c: int | None) -> str:
    from provisioner.variant_checks import QUOTA_SLOTS

    p, q = divmod(sub, QUOTA_SLOTS)
    quota = ranking.extra["quotas"][p][q]  # type: ignore[index]
    name = f" ({quota.name})" if quota.name else ""
    ask = f"; ask for more: {quota.how_to_request}" if quota.how_to_request else ""
    left = f"{quota.available} {quota.unit} left of {quota.limit}"
    if c is None:
        return f"over the {table.dictionary('provider')[p]} quota {quota.code}{name} in {quota.region}: {left}{ask}"
    row = ranking.offer_of(c)
    per_node = int(table["vcpus" if quota.unit == "vcpus" else "gpus"][row])
    nodes = int(ranking.nodes[c])
    return (f"{nodes} x {table.text('instance_type', row)} need {nodes * per_node} {quota.unit}, over the quota "
            f"{quota.code}{name} in {quota.region}: {left}{ask}")


_WHAT = {
    Capability.ON_DEMAND: "on-demand nodes", Capability.SPOT: "spot nodes",
    Capability.MULTI_NODE: "multi-node clusters", Capability.PRIVATE_NETWORK: "nodes on a private network",
    Capability.CLUSTER_PRODUCT: "cluster products", Capability.USER_DATA: "nodes booted from cloud-init",
    Capability.SCRIPT_BOOTSTRAP: "nodes bootstrapped by a start script",
    Capability.SSH_BOOTSTRAP: "nodes bootstrapped over SSH", Capability.FABRIC_IB: "InfiniBand clusters",
    Capability.FABRIC_EFA: "EFA clusters", Capability.FABRIC_ROCE: "RoCE clusters",
}


__all__ = ["DEFAULT_KEEP", "OfferSource", "blamed_group", "option", "quoted_note", "rejection_groups", "resolve_plan"]
