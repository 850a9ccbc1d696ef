"""What the reports say about the rejected offers of a PlanResult: the rejection groups (the core's,
else grouped here from the rejections) and the ``--explain`` list with each offer turned down the same
way on-demand and spot merged into one entry. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.plan import PlanResult, RejectedOffer

EXAMPLES_PER_GROUP = 3


@dataclass(frozen=True)
class Group:
    """Rejections sharing one reason at one stage: how many, the spec field, a few examples."""

    stage: int
    stage_name: str
    field: str
    reason: str
    count: int
    examples: tuple[RejectedOffer, ...] = ()

    @property
    def stage_label(self) -> str:
        return self.stage_name or (str(self.stage) if self.stage else "-")


_VARIANT_PREFIXES = ("on-demand: ", "spot: ")


def _split_variant(reason: str) -> tuple[str, str]:
    for prefix in _VARIANT_PREFIXES:
        if reason.startswith(prefix):
            return prefix, reason[len(prefix) :]
    return "", reason


def merge_variants(rejected: Sequence[RejectedOffer]) -> list[RejectedOffer]:
    """What the human reports list under --explain: one entry per offer and reason.

    With ``pricing.mode: either`` every offer is judged twice (on-demand and spot); when both
    are turned down for the same reason the pair becomes one entry without the
    ``on-demand:``/``spot:`` prefix. Reasons that differ by variant stay as they are. Order is
    kept. The JSON report keeps the full per-variant list.
    """
    pending: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for item in rejected:
        prefix, rest = _split_variant(item.reason)
        counts = pending.setdefault((item.provider, item.instance_type, item.region, rest), {})
        counts[prefix] = counts.get(prefix, 0) + 1
    pairs = {key: min(c.get(p, 0) for p in _VARIANT_PREFIXES) for key, c in pending.items()}
    on_demand_left = dict(pairs)
    spot_kept = {key: c.get(_VARIANT_PREFIXES[1], 0) - pairs[key] for key, c in pending.items()}
    merged: list[RejectedOffer] = []
    for item in rejected:
        prefix, rest = _split_variant(item.reason)
        key = (item.provider, item.instance_type, item.region, rest)
        if prefix == _VARIANT_PREFIXES[0] and on_demand_left[key]:
            merged.append(item.model_copy(update={"reason": rest}))
            on_demand_left[key] -= 1
        elif prefix == _VARIANT_PREFIXES[1] and pairs[key]:
            if spot_kept[key]:
                merged.append(item)
                spot_kept[key] -= 1
        else:
            merged.append(item)
    return merged


def rejection_groups(result: PlanResult) -> list[Group]:
    """The core's ``rejection_groups`` (furthest stage first, then count), else grouped here (an offer
    turned down for the same reason on-demand and spot counts once)."""
    given = getattr(result, "rejection_groups", None)
    if given:
        return [
            Group(
                stage=g.stage,
                stage_name=g.stage_name,
                field=g.field,
                reason=g.reason,
                count=g.count,
                examples=tuple(g.examples)[:EXAMPLES_PER_GROUP],
            )
            for g in given
        ]
    members: dict[tuple[int, str, str], list[RejectedOffer]] = {}
    for item in merge_variants(result.rejected):
        stage = int(getattr(item, "stage", 0) or 0)
        members.setdefault((stage, item.field, item.reason), []).append(item)
    groups = [
        Group(
            stage=stage,
            stage_name=str(getattr(items[0], "stage_name", "") or ""),
            field=field_path,
            reason=reason,
            count=len(items),
            examples=tuple(items[:EXAMPLES_PER_GROUP]),
        )
        for (stage, field_path, reason), items in members.items()
    ]
    return sorted(groups, key=lambda g: (-g.stage, -g.count, g.reason))


def rejected_total(result: PlanResult) -> int:
    return sum(group.count for group in rejection_groups(result))


__all__ = ["EXAMPLES_PER_GROUP", "Group", "merge_variants", "rejected_total", "rejection_groups"]
