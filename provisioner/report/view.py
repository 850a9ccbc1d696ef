"""Format-neutral pieces every human report shares: which rows to show, and how to word them.

Pure functions over a ``PlanResult``; no I/O. The renderers (terminal, markdown, html) only
lay out a ``ReportView``, so the words and numbers agree across formats. Identical offers in
several regions (same provider, type, shape and every cost) fold into one row ("3 regions").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from provisioner.plan import Option, PlanResult, RejectedOffer
from provisioner.report import facts
from provisioner.report.facts import COST_PARTS, ReportMeta, usd
from provisioner.report.rejections import Group, merge_variants, rejected_total, rejection_groups
from provisioner.termtext import counted

DEFAULT_TOP = 10
COST_FIELDS = (*COST_PARTS, "total")

# Field order of one option in JSON and CSV; the CLI's users script against it.
OPTION_FIELDS = (
    "rank",
    "provider",
    "region",
    "zone",
    "instance_type",
    "gpu_model",
    "gpus_per_node",
    "nodes",
    "spot",
    "hourly_usd",
    "usd_per_gpu_hour",
    "expected_interruptions",
    "purchase",
    "bootstrap",
    "network",
    "as_of",
)


def shown_options(result: PlanResult, top: int | None, *, default: int | None) -> list[Option]:
    """The ranked options a report lists: ``top`` of them, ``default`` when top is None.

    A ``default`` of None means every option. Raises ValueError for top < 1.
    """
    limit = default if top is None else top
    if limit is not None and limit < 1:
        raise ValueError(f"top must be at least 1, got {limit}")
    ranked = sorted(result.options, key=lambda option: option.rank)
    return ranked if limit is None else ranked[:limit]


@dataclass(frozen=True)
class Row:
    """One table row: an option, or identical options in several regions folded together."""

    rank: int
    provider: str
    regions: tuple[str, ...]
    zone: str
    instance_type: str
    gpus: str
    nodes: int
    spot: bool
    network: str
    hourly: Decimal
    per_gpu_hour: Decimal
    compute: Decimal
    storage: Decimal
    egress: Decimal
    interruption: Decimal
    total: Decimal

    @property
    def region(self) -> str:
        return self.regions[0] if len(self.regions) == 1 else f"{len(self.regions)} regions"

    @property
    def folded(self) -> bool:
        return len(self.regions) > 1

    def amount(self, part: str) -> Decimal:
        value: Decimal = getattr(self, part)
        return value


def _fold_key(option: Option) -> tuple[object, ...]:
    return (
        option.provider,
        option.instance_type,
        option.gpu_model,
        option.gpus_per_node,
        option.nodes,
        option.spot,
        facts.network(option),
        facts.hourly(option),
        *(facts.cost_part(option, part) for part in COST_FIELDS),
    )


def fold_rows(options: Sequence[Option]) -> list[Row]:
    """One row per distinct offer, in rank order; the same offer in other regions joins its row."""
    rows: dict[tuple[object, ...], list[Option]] = {}
    for option in sorted(options, key=lambda o: o.rank):
        rows.setdefault(_fold_key(option), []).append(option)
    folded = []
    for group in rows.values():
        first = group[0]
        regions = tuple(dict.fromkeys(option.region for option in group))
        folded.append(
            Row(
                rank=first.rank,
                provider=first.provider,
                regions=regions,
                zone=(first.zone or "") if len(regions) == 1 else "",
                instance_type=first.instance_type,
                gpus=gpu_label(first.gpu_model, first.gpus_per_node),
                nodes=first.nodes,
                spot=first.spot,
                network=facts.network(first),
                hourly=facts.hourly(first),
                per_gpu_hour=facts.usd_per_gpu_hour(first),
                compute=facts.cost_part(first, "compute"),
                storage=facts.cost_part(first, "storage"),
                egress=facts.cost_part(first, "egress"),
                interruption=facts.cost_part(first, "interruption"),
                total=facts.total(first),
            )
        )
    return folded


@dataclass(frozen=True)
class ReportView:
    """Everything a human report says, already worded."""

    title: str
    request: str
    assumptions: str
    catalog: str
    generated: str
    price_dates: tuple[facts.PriceDate, ...]
    warnings: tuple[str, ...]
    winner: str | None
    why: str | None
    empty_message: str
    rows: tuple[Row, ...]
    best: tuple[Row, ...]
    feasible: int
    quotes: tuple[facts.QuoteRow, ...]
    groups: tuple[Group, ...]
    rejected_count: int
    rejected: tuple[RejectedOffer, ...]
    explain: bool
    hours: float

    @property
    def ranked_title(self) -> str:
        shown = sum(len(row.regions) for row in self.rows)
        return f"Ranked options ({shown} of {self.feasible} feasible)"

    @property
    def price_dates_text(self) -> str:
        return ", ".join(f"{d.provider} {d.as_of.isoformat()}" for d in self.price_dates)


def build_view(result: PlanResult, top: int | None, *, explain: bool, meta: ReportMeta) -> ReportView:
    """The worded report for ``result``: ``top`` rows (folded), default DEFAULT_TOP."""
    limit = DEFAULT_TOP if top is None else top
    if limit < 1:
        raise ValueError(f"top must be at least 1, got {limit}")
    rows = fold_rows(result.options)[:limit]
    shown_ranks = {row.rank for row in rows}
    ranked = [option for option in result.options if option.rank in shown_ranks]
    dates = facts.price_dates(result, ranked, meta)
    winner = min(result.options, key=lambda option: option.rank) if result.options else None
    decision = facts.decision(sorted(result.options, key=lambda option: option.rank))
    return ReportView(
        title=f"Cost comparison: {result.spec.name}",
        request=request_summary(result),
        assumptions=facts.assumptions_text(result.spec),
        catalog=catalog_summary(result),
        generated=generated_text(meta),
        price_dates=tuple(dates),
        warnings=(*facts.stale_warnings(dates), *facts.access_warnings(result.spec, [o.provider for o in ranked])),
        winner=winner_summary(winner) if winner else None,
        why=decision.sentence if decision else None,
        empty_message=no_options_message(result),
        rows=tuple(rows),
        best=tuple(fold_rows(result.best_per_provider())),
        feasible=facts.feasible_count(result),
        quotes=tuple(facts.quotes(result)),
        groups=tuple(rejection_groups(result)),
        rejected_count=rejected_total(result),
        rejected=tuple(sorted_rejections(_not_ranked(merge_variants(result.rejected), result))) if explain else (),
        explain=explain,
        hours=result.spec.workload.hours,
    )


def gpu_label(model: str, count: int) -> str:
    return f"{model} x{count}"


def as_of_text(as_of: dt.date | str) -> str:
    return as_of.isoformat() if isinstance(as_of, dt.date) else str(as_of)


def pricing_label(option: Option) -> str:
    return "spot" if option.spot else "on-demand"


def request_summary(result: PlanResult) -> str:
    """``16 GPUs (H100 or H200) for 168 h`` -- what the spec asked for."""
    spec = result.spec
    models = " or ".join(spec.gpus.model) if spec.gpus.model else "any model"
    return f"{counted(spec.gpus.count, 'GPU')} ({models}) for {spec.workload.hours:g} h"


def catalog_summary(result: PlanResult) -> str:
    """Which catalog priced the result, so readers can judge how fresh the prices are."""
    return f"prices as of {as_of_text(result.catalog_as_of)} from {result.catalog_origin}"


def generated_text(meta: ReportMeta) -> str:
    when = meta.generated_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if meta.generated_at else "unknown"
    return f"generated {when} by gpu-provisioner {meta.tool_version or '(version unknown)'}"


def winner_summary(option: Option) -> str:
    """One sentence naming the cheapest option, its cost and the network its nodes use."""
    zone = f" ({option.zone})" if option.zone else ""
    nodes = f"; nodes talk over {facts.network_words(option)}" if option.nodes > 1 else ""
    return (
        f"{option.provider} {option.instance_type} in {option.region}{zone}: "
        f"{option.nodes} x {gpu_label(option.gpu_model, option.gpus_per_node)}, "
        f"{pricing_label(option)}, {usd(option.hourly_usd)}/h ({usd(facts.usd_per_gpu_hour(option))}/GPU-h), "
        f"{usd(option.cost.total)} expected total{nodes}{block_words(option)}"
    )


def block_words(option: Option) -> str:
    """For a Capacity Block: when it starts and that its fee is paid upfront, non-refundable."""
    offer = option.offer
    if not offer.block_hours:
        return ""
    start = f" from {offer.block_start}" if offer.block_start else ""
    return (
        f"; a reserved block of {offer.block_hours} h{start} ({offer.offer_id or 'offering'}): "
        f"{usd(option.cost.compute)} paid upfront for the whole block, non-refundable"
    )


def no_options_message(result: PlanResult) -> str:
    count = rejected_total(result)
    return f"No offer fits this spec ({counted(count, 'offer')} rejected)."


def examples_text(group: Group) -> str:
    names = list(dict.fromkeys(f"{item.provider} {item.instance_type}" for item in group.examples))
    more = group.count - len(group.examples)
    text = ", ".join(names)
    return f"{text} (+{more} more)" if more > 0 else text


def _not_ranked(rejected: Sequence[RejectedOffer], result: PlanResult) -> list[RejectedOffer]:
    """The rejections of offers no ranked option is bought from: under ``pricing.mode: either`` an offer
    ranked on-demand may be rejected spot (or the other way), and the reader saw it listed as both
    ranked and rejected. The JSON report keeps every (offer, variant) rejection."""
    ranked = {(o.provider, o.instance_type, o.region) for o in result.options}
    return [r for r in rejected if (r.provider, r.instance_type, r.region) not in ranked]


def sorted_rejections(rejected: Sequence[RejectedOffer]) -> list[RejectedOffer]:
    return sorted(rejected, key=lambda r: (r.provider, r.region, r.instance_type, r.reason))


__all__ = [
    "COST_FIELDS",
    "COST_PARTS",
    "DEFAULT_TOP",
    "OPTION_FIELDS",
    "ReportView",
    "Row",
    "as_of_text",
    "build_view",
    "catalog_summary",
    "examples_text",
    "fold_rows",
    "generated_text",
    "gpu_label",
    "merge_variants",
    "no_options_message",
    "pricing_label",
    "request_summary",
    "shown_options",
    "sorted_rejections",
    "usd",
    "winner_summary",
]
