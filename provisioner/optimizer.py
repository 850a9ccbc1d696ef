"""Choose where to build a cluster: every offer checked, priced and ranked for one spec.

``resolve_plan(spec, catalog, capabilities)`` is the public entry point, a thin shell over the
one cost model in ``provisioner.offer_table`` (columnar, integer money). This module turns its
``Ranking`` into models: the best ``keep`` ``Option``s, the quote-only products as ``Quote``s,
rejections grouped by (stage, spec field, reason) with a few examples, and every rejection
only when asked (``explain=True``); the words of each reason are ``rejection_reasons``'. Output
size does not grow with the number of rejections.
The cost model, with the source of every constant, is in ``docs/cost-model.md``.

Pure: no I/O, no clock, no environment reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from provisioner.capabilities import Capability
from provisioner.costs import Stage
from provisioner.errors import NoFeasibleOfferError, Rejection
from provisioner.money import usd_of_cents, usd_of_pico
from provisioner.offer import ProviderInfo
from provisioner.plan import CostBreakdown, Option, PlanResult, Quote, RejectedOffer, RejectionGroup, per_gpu_hour
from provisioner.rejection_reasons import rejection_reason
from provisioner.spec import ClusterSpec

if TYPE_CHECKING:
    import numpy as np

    from provisioner.columns import OfferTable
    from provisioner.offer_table import PricedColumn, Ranking
    from provisioner.relaxation import Relaxation

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
        from provisioner.relaxation import relaxations

        found_relaxed = relaxations(spec, table, ranking)
        first = blamed_group(spec, table, ranking, groups, found_relaxed)
        example = first.examples[0] if first and first.examples else None
        where = f" ({example.provider} {example.instance_type} {example.region}; " if example else " ("
        count = sum(g.count for g in groups)
        found = quotes(spec, table, ranking, provider_as_of, keep)
        why = example.reason if example else (first.reason if first else "nothing can be bought")
        if found and first is None:
            why = "only quote-only products fit"
        error = NoFeasibleOfferError(
            f"no offer fits: {why}{where}{count} rejected){quoted_note(found)}{relaxed_note(found_relaxed)}",
            rejected=[_as_rejection(r) for r in rejected],
        )
        error.rejection_groups = groups  # type: ignore[attr-defined]
        error.blamed = first  # type: ignore[attr-defined]
        error.quotes = found  # type: ignore[attr-defined]
        error.relaxations = found_relaxed  # type: ignore[attr-defined]
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
    cost = CostBreakdown(
        **terms, total=usd_of_cents(int(ranking.total_cents[c])), boot_usd=usd_of_cents(int(ranking.boot_cents[c]))
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


def quotes(
    spec: ClusterSpec, table: OfferTable, ranking: Ranking, provider_as_of: Mapping[str, dt.date], keep: int
) -> list[Quote]:
    """Quote-only products that fit, cheapest first (at most ``keep``)."""
    import numpy as np

    found = np.flatnonzero(ranking.quote)
    found = found[np.lexsort((ranking.hourly_rest[found], ranking.hourly_micro[found], ranking.total_cents[found]))][
        :keep
    ]
    out = []
    for c in found.tolist():
        offer = table.offer(ranking.offer_of(c))
        out.append(
            Quote(
                provider=offer.provider,
                instance_type=offer.instance_type,
                region=offer.region,
                gpu_model=offer.gpu_model,
                gpus_per_node=offer.gpus,
                nodes=int(ranking.nodes[c]),
                purchase=offer.purchase,
                hourly_usd=usd_of_pico(int(ranking.hourly_micro[c]), int(ranking.hourly_rest[c])),
                how_to_obtain=offer.how_to_obtain,
                as_of=offer.as_of or provider_as_of.get(offer.provider),
            )
        )
    return out


def quoted_note(found: list[Quote]) -> str:
    """What a no-fit message adds when quote-only products fit ('' when none do)."""
    if not found:
        return ""
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return (
        f"; quote-only products fit, not bought by this tool: {first.provider} {first.instance_type}"
        f"{more} (how to obtain them: the report's quotes)"
    )


def blamed_group(
    spec: ClusterSpec,
    table: OfferTable,
    ranking: Ranking,
    groups: list[RejectionGroup],
    found: list[Relaxation] | None = None,
) -> RejectionGroup | None:
    """The rejection group a no-fit blames (docs/cost-model.md, "When nothing fits"): that of the
    first field ``relaxation.relaxations`` names (the one that alone admits the most buyable
    candidates, the spec's scope last; ``found`` when computed already); with none, the furthest
    stage's group."""
    from provisioner.relaxation import relaxations

    if not groups:
        return None
    found = relaxations(spec, table, ranking) if found is None else found
    field = found[0].field if found else groups[0].field
    return next((g for g in groups if g.field == field), groups[0])


def relaxed_note(found: list[Relaxation]) -> str:
    """What a no-fit message adds for the fields that alone let an option fit ('' when none does)."""
    if not found:
        return ""
    return "; one field alone lets an option fit: " + ", ".join(item.text for item in found)


def _variant_stage(stage: int) -> bool:
    return stage >= Stage.PRICING_MODE


def rejection_groups(spec: ClusterSpec, table: OfferTable, ranking: Ranking) -> list[RejectionGroup]:
    """Rejections counted by (stage, reason sub-code): offer checks count each offer once, the
    variant checks each (offer, variant). Furthest stage first, then count; each with at most
    three examples (the cheapest first in the budget stages, else by ``Offer.key``)."""
    import numpy as np

    n = ranking.n
    first_variant = ranking.stage[:n]
    cands = np.concatenate(
        [
            np.flatnonzero((first_variant > 0) & (first_variant < Stage.PRICING_MODE)),
            np.flatnonzero(ranking.stage >= Stage.PRICING_MODE),
        ]
    )
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
    for stage, sub, count, members in zip(
        stages[starts].tolist(), subs[starts].tolist(), counts.tolist(), by_group, strict=True
    ):
        cost = ranking.total_cents if stage >= Stage.MAX_HOURLY else None
        examples = [rejected_offer(spec, table, ranking, int(c)) for c in _first(members, key_rank, n, cost).tolist()]
        field, reason = rejection_reason(Stage(stage), sub, spec, table, ranking, None)
        groups.append(
            RejectionGroup(
                stage=stage, stage_name=Stage(stage).label, field=field, reason=reason, count=count, examples=examples
            )
        )
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
    field, why = rejection_reason(stage, int(ranking.sub[c]), spec, table, ranking, c)
    row = ranking.offer_of(c)
    reason = f"{'spot' if ranking.spot_of(c) else 'on-demand'}: {why}" if _variant_stage(stage) else why
    return RejectedOffer(
        provider=table.text("provider", row) or "",
        instance_type=table.text("instance_type", row) or "",
        region=table.text("region", row) or "",
        reason=reason,
        field=field,
        stage=int(stage),
        stage_name=stage.label,
    )


def _as_rejection(item: RejectedOffer) -> Rejection:
    return Rejection(
        provider=item.provider,
        instance_type=item.instance_type,
        region=item.region,
        reason=item.reason,
        field=item.field,
        stage=item.stage,
    )


__all__ = [
    "DEFAULT_KEEP",
    "OfferSource",
    "blamed_group",
    "option",
    "quoted_note",
    "rejection_groups",
    "relaxed_note",
    "resolve_plan",
]
