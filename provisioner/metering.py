"""Money after purchase: what a cluster's nodes cost, from when the provider says each was billed.

``meter(plan, usages, until)`` bills each node's span (``NodeUsage``: the provider's own launch
and termination times, or the client's when the provider reports none; the source says which)
by the offer's billing rules as the plan priced them (``BillingRule``: increment, minimum,
per-second or per-hour, local disk billed while the node exists, stopped or not, and a Capacity
Block's upfront fee) and returns exact cents per cost term, the same terms as the plan's
``CostBreakdown``. ``compare`` sets them against the plan's, term by term. docs/costs.md.

Rules, each the plan's own (provisioner.offer_table):

- a node's run time is its span in whole seconds, rounded up; billed time is that rounded up
  to ``billing_increment_s``, at least ``billing_minimum_s`` (``costs.billed_span``);
  time stopped (``stopped_s``) is not billed as compute;
- compute = price per node-hour x billed seconds / 3600, summed exactly over nodes, rounded
  once, half to even (``money.round_cents``); a Capacity Block's compute is its upfront fee,
  nodes x price x block hours, whatever ran;
- storage = the plan's checkpoint NVMe per node x the offer's disk rate x the node's whole span
  (storage is billed while the node exists, stopped too);
- a node name seen with more than one instance was replaced: every instance after the first
  is billed under ``interruption`` (the plan's interruption term is the expected cost of
  reclaims; the metered one is what the replacements cost);
- egress is not metered from instance times: ``None`` unless a billing record says.

Pure: no I/O, no clock (``until`` is passed in), no environment.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from provisioner.costs import billed_span
from provisioner.money import (
    MICRO,
    NANO,
    ceil_int,
    cents_text,
    round_cents,
    spec_decimal,
    to_micro,
    to_nano,
    usd_of_cents,
)
from provisioner.plan import COST_TERMS, Plan

_US_PER_S = 1_000_000


@dataclass(frozen=True)
class BillingRule:
    """How one node of an offer is billed (the catalog's facts the plan priced)."""

    price_micro: int
    """Per node-hour, micro-USD."""
    increment_s: int = 1
    minimum_s: int = 0
    block_hours: int = 0
    """A Capacity Block: this many hours paid upfront per node, whatever runs."""
    disk_nano: int = 0
    """Local disk, nano-USD per GiB-hour."""
    disk_gib: Decimal = Decimal(0)

    @classmethod
    def of_plan(cls, plan: Plan) -> BillingRule:
        offer = plan.option.offer
        price = offer.spot_price_per_hour_usd if plan.option.spot else offer.price_per_hour_usd
        return cls(
            price_micro=to_micro(price or 0),
            increment_s=offer.billing_increment_s,
            minimum_s=offer.billing_minimum_s,
            block_hours=offer.block_hours,
            disk_nano=to_nano(offer.disk_usd_per_gib_hour),
            disk_gib=spec_decimal(plan.spec.storage.checkpoint_nvme_gib_per_node),
        )

    def billed_seconds(self, run_s: int) -> int:
        """Seconds billed for a node that ran ``run_s`` whole seconds (the plan's rule)."""
        return int(billed_span(run_s, self.increment_s, self.minimum_s))

    def describe(self) -> str:
        if self.block_hours:
            return f"Capacity Block: {self.block_hours} h per node paid upfront"
        step = {1: "per second", 60: "per minute", 3600: "per started hour"}.get(
            self.increment_s, f"per {self.increment_s} s"
        )
        minimum = f", at least {self.minimum_s} s" if self.minimum_s else ""
        return f"{step}{minimum}"


@dataclass(frozen=True)
class NodeUsage:
    """One instance's billing span as reported. ``ended_at`` None: still billed (runs now)."""

    node_id: str
    name: str
    started_at: dt.datetime
    ended_at: dt.datetime | None = None
    stopped_s: int = 0
    source: str = "provider"
    """Who reported the times: the provider (``provider``, ``audit-events``, ...) or ``client``."""


def run_seconds(start: dt.datetime, end: dt.datetime) -> int:
    """Whole seconds from ``start`` to ``end``, rounded up (microseconds counted); 0 when end <= start."""
    span = end - start
    micros = (span.days * 86_400 + span.seconds) * _US_PER_S + span.microseconds
    return max(0, -(-micros // _US_PER_S))


@dataclass(frozen=True)
class NodeBill:
    node_id: str
    name: str
    term: str
    run_s: int
    billed_s: int
    usd: Fraction
    source: str


@dataclass(frozen=True)
class Metered:
    """Exact cents per cost term (``None``: not measured), and each node's bill."""

    terms: dict[str, int | None]
    nodes: tuple[NodeBill, ...] = ()
    rule: str = ""
    sources: tuple[str, ...] = ()

    @property
    def total_cents(self) -> int:
        return sum(value for value in self.terms.values() if value is not None)

    def as_json(self) -> dict[str, object]:
        return {
            "terms": {t: None if c is None else str(usd_of_cents(c)) for t, c in self.terms.items()},
            "total_usd": str(usd_of_cents(self.total_cents)),
            "rule": self.rule,
            "sources": list(self.sources),
            "nodes": [
                {"id": n.node_id, "name": n.name, "term": n.term, "run_s": n.run_s, "billed_s": n.billed_s}
                for n in self.nodes
            ],
        }


def meter(plan: Plan, usages: Iterable[NodeUsage], until: dt.datetime, rule: BillingRule | None = None) -> Metered:
    """What ``usages`` cost by ``plan``'s billing rules, a running node counted up to ``until``."""
    rule = rule or BillingRule.of_plan(plan)
    ordered = sorted(usages, key=lambda u: (u.name, u.started_at, u.node_id))
    seen: set[str] = set()
    bills: list[NodeBill] = []
    storage = Fraction(0)
    for usage in ordered:
        end = usage.ended_at or until
        alive_s = run_seconds(usage.started_at, end)
        run_s = max(0, alive_s - usage.stopped_s)
        term = "interruption" if usage.name in seen else "compute"
        seen.add(usage.name)
        billed_s = rule.block_hours * 3600 if rule.block_hours else rule.billed_seconds(run_s)
        usd = Fraction(rule.price_micro * billed_s, MICRO * 3600)
        if rule.block_hours and term == "interruption":
            usd = Fraction(0)  # a replacement launches into the block already paid for
        bills.append(NodeBill(usage.node_id, usage.name, term, run_s, billed_s, usd, usage.source))
        storage += Fraction(rule.disk_nano, NANO) * Fraction(rule.disk_gib) * Fraction(alive_s, 3600)
    terms: dict[str, int | None] = {
        "compute": round_cents(sum((b.usd for b in bills if b.term == "compute"), Fraction(0))),
        "storage": round_cents(storage),
        "egress": None,
        "interruption": round_cents(sum((b.usd for b in bills if b.term == "interruption"), Fraction(0))),
    }
    return Metered(
        terms=terms, nodes=tuple(bills), rule=rule.describe(), sources=tuple(sorted({u.source for u in ordered}))
    )


def planned_cents(plan: Plan) -> dict[str, int]:
    """The plan's expected cents per cost term (``move`` too in a moved run's re-plan, lifecycle/recover.py)."""
    cents = {term: int(getattr(plan.option.cost, term) * 100) for term in COST_TERMS}
    if plan.option.cost.move:
        cents["move"] = int(plan.option.cost.move * 100)
    return cents


@dataclass(frozen=True)
class TermLine:
    term: str
    planned_cents: int
    actual_cents: int | None

    @property
    def difference_cents(self) -> int | None:
        return None if self.actual_cents is None else self.actual_cents - self.planned_cents


@dataclass(frozen=True)
class Comparison:
    """Planned vs actual per cost term; an unmeasured term counts its planned amount in neither total."""

    lines: tuple[TermLine, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def planned_cents(self) -> int:
        return sum(line.planned_cents for line in self.lines)

    @property
    def actual_cents(self) -> int:
        return sum(line.actual_cents or 0 for line in self.lines)

    def render(self) -> list[str]:
        out = [f"{'term':<13}{'planned':>12}{'actual':>12}{'difference':>12}"]
        for line in self.lines:
            actual = "n/m" if line.actual_cents is None else cents_text(line.actual_cents)
            diff = line.difference_cents
            out.append(
                f"{line.term:<13}{cents_text(line.planned_cents):>12}{actual:>12}"
                f"{'-' if diff is None else _signed(diff):>12}"
            )
        diff = self.actual_cents - self.planned_cents
        out.append(
            f"{'total':<13}{cents_text(self.planned_cents):>12}{cents_text(self.actual_cents):>12}{_signed(diff):>12}"
        )
        out += [f"note: {note}" for note in self.notes]
        return out

    def as_json(self) -> dict[str, object]:
        return {
            "terms": {
                line.term: {
                    "planned_usd": str(usd_of_cents(line.planned_cents)),
                    "actual_usd": None if line.actual_cents is None else str(usd_of_cents(line.actual_cents)),
                    "difference_usd": None
                    if line.difference_cents is None
                    else str(usd_of_cents(line.difference_cents)),
                }
                for line in self.lines
            },
            "planned_usd": str(usd_of_cents(self.planned_cents)),
            "actual_usd": str(usd_of_cents(self.actual_cents)),
            "difference_usd": str(usd_of_cents(self.actual_cents - self.planned_cents)),
            "notes": list(self.notes),
        }


def _signed(cents: int) -> str:
    return f"{'+' if cents >= 0 else '-'}{cents_text(abs(cents))}"


def compare(plan: Plan, metered: Metered) -> Comparison:
    """Planned vs metered per cost term, with what was not measured named."""
    planned = planned_cents(plan)
    lines = tuple(
        TermLine(term, planned[term], metered.terms.get(term)) for term in (*COST_TERMS, "move") if term in planned
    )
    notes = []
    if "move" in planned:
        notes.append("move: the checkpoint's download and the work redone are not measured (planned amount shown)")
    if metered.terms.get("egress") is None:
        notes.append("egress is not measured from instance times (planned amount shown, not in the actual total)")
    notes.append("interruption: planned is the expected reclaim cost; actual is what replacement instances cost")
    if any("client" in source for source in metered.sources):
        notes.append("some node times are the client's own (the provider reported none)")
    return Comparison(lines, tuple(notes))


def span_end(plan: Plan, started_at: dt.datetime, expires_at: dt.datetime | None) -> dt.datetime:
    """When the cluster is planned to end: its expiry, else its start + the workload's hours."""
    if expires_at is not None:
        return expires_at
    return started_at + dt.timedelta(seconds=ceil_int(spec_decimal(plan.spec.workload.hours) * 3600))


def project(plan: Plan, usages: Sequence[NodeUsage], now: dt.datetime, end: dt.datetime) -> Metered:
    """What the cluster will have cost at ``end`` if the nodes running now run until then."""
    return meter(plan, usages, max(now, end))


def budget_deadline(plan: Plan, started_at: dt.datetime, max_cost_usd: Decimal) -> dt.datetime | None:
    """The latest time the cluster (every node from ``started_at``) stays within ``max_cost_usd``
    of compute by the plan's rules; None when even the first billed second (or the minimum, or a
    Capacity Block's fee) exceeds it. Exact: the largest whole second ``t`` whose bill fits."""
    rule = BillingRule.of_plan(plan)
    nodes = plan.option.nodes
    cap = Fraction(max_cost_usd)

    def cost(run_s: int) -> Fraction:
        billed = rule.block_hours * 3600 if rule.block_hours else rule.billed_seconds(run_s)
        return Fraction(rule.price_micro * billed * nodes, MICRO * 3600)

    if cost(1) > cap:
        return None
    if rule.block_hours:
        return None if cost(0) > cap else started_at + dt.timedelta(hours=rule.block_hours)
    low, high = 1, 1
    while cost(high) <= cap:
        low, high = high, high * 2
        if high > 10 * 366 * 86_400:
            return started_at + dt.timedelta(seconds=high)
    while high - low > 1:  # cost(low) fits, cost(high) does not
        mid = (low + high) // 2
        low, high = (mid, high) if cost(mid) <= cap else (low, mid)
    return started_at + dt.timedelta(seconds=low)


BUDGET_LEVELS = (50, 80, 100)


def budget_level(spent_cents: int, max_cost_usd: Decimal) -> int:
    """The highest of 50/80/100 % of ``max_cost_usd`` that ``spent_cents`` has reached (0: none). Exact."""
    reached = [level for level in BUDGET_LEVELS if spent_cents * 100 >= Fraction(max_cost_usd) * 100 * level]
    return max(reached, default=0)


__all__ = [
    "BUDGET_LEVELS",
    "BillingRule",
    "Comparison",
    "Metered",
    "NodeBill",
    "NodeUsage",
    "TermLine",
    "budget_deadline",
    "budget_level",
    "compare",
    "meter",
    "planned_cents",
    "project",
    "run_seconds",
    "span_end",
]
