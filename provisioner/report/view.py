"""Format-neutral pieces every report shares: which options to show, how to word them.

Pure functions over a ``PlanResult``; no I/O. The renderers (terminal, tabular, html)
only lay these values out, so the words and numbers agree across formats.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.plan import Option, PlanResult, RejectedOffer

DEFAULT_TOP = 10
EXAMPLES_PER_REASON = 3

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
    "expected_interruptions",
)
COST_PARTS = ("compute", "storage", "egress", "interruption")
COST_FIELDS = (*COST_PARTS, "total")


def shown_options(result: PlanResult, top: int | None, *, default: int | None) -> list[Option]:
    """The ranked options a report lists: ``top`` of them, ``default`` when top is None.

    A ``default`` of None means every option. Raises ValueError for top < 1.
    """
    limit = default if top is None else top
    if limit is not None and limit < 1:
        raise ValueError(f"top must be at least 1, got {limit}")
    ranked = sorted(result.options, key=lambda option: option.rank)
    return ranked if limit is None else ranked[:limit]


def usd(amount_usd: float) -> str:
    """``$1,234.56``; amounts under a cent but above zero keep three decimals."""
    if 0 < abs(amount_usd) < 0.01:
        return f"${amount_usd:,.3f}"
    return f"${amount_usd:,.2f}"


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
    return f"{spec.gpus.count} GPUs ({models}) for {spec.workload.hours:g} h"


def catalog_summary(result: PlanResult) -> str:
    """Which catalog priced the result, so readers can judge how fresh the prices are."""
    return f"prices as of {as_of_text(result.catalog_as_of)} from {result.catalog_origin}"


def winner_summary(option: Option) -> str:
    """One sentence naming the cheapest option and its cost."""
    zone = f" ({option.zone})" if option.zone else ""
    return (
        f"{option.provider} {option.instance_type} in {option.region}{zone}: "
        f"{option.nodes} x {gpu_label(option.gpu_model, option.gpus_per_node)}, "
        f"{pricing_label(option)}, {usd(option.hourly_usd)}/h, "
        f"{usd(option.cost.total)} expected total"
    )


def no_options_message(result: PlanResult) -> str:
    count = len(result.rejected)
    return f"No offer fits this spec ({count} offer{'s' if count != 1 else ''} rejected)."


@dataclass(frozen=True)
class RejectGroup:
    """Every rejection sharing one reason: how many, and a few example offers."""

    reason: str
    count: int
    examples: tuple[str, ...]


_VARIANT_PREFIXES = ("on-demand: ", "spot: ")


def _split_variant(reason: str) -> tuple[str, str]:
    for prefix in _VARIANT_PREFIXES:
        if reason.startswith(prefix):
            return prefix, reason[len(prefix):]
    return "", reason


def merge_variants(rejected: Sequence[RejectedOffer]) -> list[RejectedOffer]:
    """What the human reports list: one entry per offer and reason.

    With ``pricing.mode: either`` every offer is judged twice (on-demand and spot); when both
    are turned down for the same reason (a wrong GPU, too little NVMe, ...) the pair becomes
    one entry without the ``on-demand:``/``spot:`` prefix. Reasons that differ by variant
    (no spot price, over budget at one price) stay as they are. Order is kept. The machine
    formats (JSON, CSV) keep the full per-variant list.
    """
    pending: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for item in rejected:
        prefix, rest = _split_variant(item.reason)
        counts = pending.setdefault((item.provider, item.instance_type, item.region, rest), {})
        counts[prefix] = counts.get(prefix, 0) + 1
    pairs = {key: min(c.get(p, 0) for p in _VARIANT_PREFIXES) for key, c in pending.items()}
    on_demand_left = dict(pairs)  # on-demand halves still to emit as merged entries
    spot_kept = {key: c.get(_VARIANT_PREFIXES[1], 0) - pairs[key] for key, c in pending.items()}
    merged: list[RejectedOffer] = []
    for item in rejected:
        prefix, rest = _split_variant(item.reason)
        key = (item.provider, item.instance_type, item.region, rest)
        if prefix == _VARIANT_PREFIXES[0] and on_demand_left[key]:
            merged.append(item.model_copy(update={"reason": rest}))
            on_demand_left[key] -= 1
        elif prefix == _VARIANT_PREFIXES[1] and pairs[key]:
            if spot_kept[key]:  # more spot than on-demand entries: keep the surplus
                merged.append(item)
                spot_kept[key] -= 1
        else:
            merged.append(item)
    return merged


def group_rejections(
    rejected: Sequence[RejectedOffer], examples: int = EXAMPLES_PER_REASON
) -> list[RejectGroup]:
    """Group by exact reason text, most frequent first (ties by reason, so output is stable)."""
    members: dict[str, list[str]] = {}
    for item in rejected:
        label = f"{item.provider} {item.instance_type}"
        names = members.setdefault(item.reason, [])
        names.append(label)
    groups = []
    for reason, names in members.items():
        distinct = list(dict.fromkeys(names))
        groups.append(RejectGroup(reason=reason, count=len(names), examples=tuple(distinct[:examples])))
    return sorted(groups, key=lambda group: (-group.count, group.reason))


def examples_text(group: RejectGroup) -> str:
    more = group.count - len(group.examples)
    text = ", ".join(group.examples)
    return f"{text} (+{more} more)" if more > 0 else text


def sorted_rejections(rejected: Sequence[RejectedOffer]) -> list[RejectedOffer]:
    return sorted(rejected, key=lambda r: (r.provider, r.region, r.instance_type, r.reason))


__all__ = [
    "COST_FIELDS",
    "COST_PARTS",
    "DEFAULT_TOP",
    "OPTION_FIELDS",
    "RejectGroup",
    "as_of_text",
    "catalog_summary",
    "examples_text",
    "gpu_label",
    "group_rejections",
    "merge_variants",
    "no_options_message",
    "pricing_label",
    "request_summary",
    "shown_options",
    "sorted_rejections",
    "usd",
    "winner_summary",
]
