"""What a cluster has cost so far, what it will cost, what it cost against the plan, and what the provider billed.

The shell around provisioner.metering (pure): it asks the provider for node times
(``SupportsUsage``, else the launch times ``get_nodes`` reports, else the client's own), meters
them by the plan's billing rules, writes the ledger, and, where the provider publishes its
billing (``SupportsBilling``), reconciles: metered and billed agree when they differ by at most
1 % of the metered total (``RECONCILE_TOLERANCE``); otherwise, and wherever the provider bills
otherwise than the catalog, the report names the difference.

``budget_state`` is what ``status`` (and ``watch``) call for the 50/80/100 % warnings of a
cluster brought up with ``--max-cost``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

from provisioner.errors import PlanError, ProviderError, ProvisionerError
from provisioner.lifecycle import ledger
from provisioner.lifecycle.runs import of_run
from provisioner.lifecycle.state import ClusterRecord
from provisioner.metering import (
    BillingRule,
    Comparison,
    Metered,
    NodeUsage,
    budget_deadline,
    budget_level,
    compare,
    meter,
    span_end,
)
from provisioner.money import cents_text, usd_of_cents, usd_text
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeStatus, Provider
from provisioner.providers.billing import Billed, SupportsBilling, SupportsPriceCheck, SupportsUsage, checked
from provisioner.realize.events import Emit
from provisioner.termtext import when_text

RECONCILE_TOLERANCE = Fraction(1, 100)


def usages_from_nodes(
    record: ClusterRecord, nodes: Sequence[Node], gone_at: dt.datetime | None = None
) -> list[NodeUsage]:
    """Billing spans from a listing: the provider's launch/termination times where it reports them, else
    the record's creation time and ``gone_at`` (the client's, when it saw the nodes deleted)."""
    out = []
    for node in nodes:
        start = node.launched_at or record.created_at
        end = node.ended_at
        if end is None and (gone_at is not None or node.status in (NodeStatus.TERMINATED, NodeStatus.FAILED)):
            end = gone_at
        source = (
            "client"
            if node.launched_at is None
            else "provider"
            if end is None or node.ended_at
            else "provider launch, client end"
        )
        out.append(NodeUsage(node.id, node.name, start, end, source=source))
    return out


CLOCK_SKEW = dt.timedelta(hours=1)
"""How far a provider's clock may disagree with this machine's before its node times are not believed."""


def believable(
    record: ClusterRecord, usages: Sequence[NodeUsage], now: dt.datetime
) -> tuple[list[NodeUsage], list[str]]:
    """``usages`` with every provider time outside [record created - ``CLOCK_SKEW``, ``now`` + ``CLOCK_SKEW``]
    replaced (a start by the record's creation, an end by none: still billed up to the metering's end),
    and a note for each replacement. A year-1 launch would bill millennia, a year-9999 one nothing."""
    low, high = record.created_at - CLOCK_SKEW, now + CLOCK_SKEW
    out, notes = [], []
    for usage in usages:
        start, end = usage.started_at, usage.ended_at
        if not low <= start <= high:
            notes.append(
                f"{usage.name} ({usage.node_id}): launch time {_stamp(start)} from {usage.source} is "
                f"outside the cluster's life; metered from the record's creation instead"
            )
            start = record.created_at
        if end is not None and not start <= end <= high:
            notes.append(
                f"{usage.name} ({usage.node_id}): end time {_stamp(end)} from {usage.source} is "
                f"outside the cluster's life; metered as still running"
            )
            end = None
        changed = (start, end) != (usage.started_at, usage.ended_at)
        out.append(replace(usage, started_at=start, ended_at=end, source="client") if changed else usage)
    return out, notes


def _stamp(when: dt.datetime) -> str:
    return when.isoformat(timespec="seconds")  # strftime writes year 1 as "1"


def usages_of(
    adapter: Provider,
    record: ClusterRecord,
    nodes: Sequence[Node],
    gone_at: dt.datetime | None = None,
    *,
    now: dt.datetime | None = None,
    notes: list[str] | None = None,
) -> list[NodeUsage]:
    """The provider's own spans when it reports them (``SupportsUsage``), else ``usages_from_nodes``; times
    outside the cluster's life replaced (``believable``, by ``now``, default ``gone_at`` or the clock) and
    said in ``notes`` when given."""
    found, said = believable(
        record, _reported(adapter, record, nodes, gone_at), now or gone_at or dt.datetime.now(dt.UTC)
    )
    if notes is not None:
        notes += said
    return found


def _reported(
    adapter: Provider, record: ClusterRecord, nodes: Sequence[Node], gone_at: dt.datetime | None
) -> list[NodeUsage]:
    nodes = of_run(record, nodes)
    if isinstance(adapter, SupportsUsage):
        ids = {**record.node_ids, **{n.name: n.id for n in nodes}}
        try:
            # launches follow the record's creation; an hour's margin for clocks that disagree
            found = adapter.node_usage(record.cluster_id, ids, since=record.created_at - dt.timedelta(hours=1))
        except ProviderError:
            found = []
        if found:
            return [
                u
                if u.ended_at is not None or gone_at is None
                else NodeUsage(u.node_id, u.name, u.started_at, gone_at, u.stopped_s, "client")
                for u in found
            ]
    return usages_from_nodes(record, nodes, gone_at)


@dataclass(frozen=True)
class BudgetState:
    """Where a cluster stands against its ``--max-cost``: 0, 50, 80 or 100 (% reached)."""

    level: int
    spent_cents: int
    max_cost_usd: Decimal
    on_budget: str

    @property
    def message(self) -> str | None:
        if not self.level:
            return None
        spent = f"{cents_text(self.spent_cents)} of {usd_text(self.max_cost_usd)}"
        if self.level < 100:
            return f"budget: {self.level} % reached ({spent})"
        action = (
            "the cluster is stopped at its budget (on-budget stop)"
            if self.on_budget == "stop"
            else "on-budget warn: the cluster keeps running"
        )
        return f"budget: 100 % reached ({spent}); {action}"


def budget_state(record: ClusterRecord, metered: Metered) -> BudgetState | None:
    """The budget warning for ``record`` given what it has cost so far; None without ``--max-cost``.
    For ``watch`` too: call it with each fresh ``cost_so_far``."""
    if record.max_cost_usd is None:
        return None
    return BudgetState(
        budget_level(metered.total_cents, record.max_cost_usd),
        metered.total_cents,
        record.max_cost_usd,
        getattr(record, "on_budget", "warn"),
    )


def budget_expiry(
    plan: Plan, now: dt.datetime, expires_at: dt.datetime | None, max_cost_usd: Decimal | None, on_budget: str
) -> dt.datetime | None:
    """The cluster's expiry under ``--on-budget stop``: the earlier of ``expires_at`` and the moment its
    compute reaches ``max_cost_usd`` by the plan's billing rules (enforced like ``--ttl``: the expiry tag,
    ``gc``, GCE's termination time). Unchanged under ``warn``. Raises PlanError before anything is bought
    when the budget does not cover the first billed second (or the minimum, or a Capacity Block's fee)."""
    if max_cost_usd is None or on_budget != "stop":
        return expires_at
    deadline = budget_deadline(plan, now, max_cost_usd)
    if deadline is None:
        raise PlanError(
            f"--max-cost {usd_text(max_cost_usd)} does not cover the first billed period of "
            f"{plan.option.nodes} x {plan.option.instance_type} ({BillingRule.of_plan(plan).describe()})"
        )
    return deadline if expires_at is None else min(expires_at, deadline)


@dataclass(frozen=True)
class CostNow:
    so_far: Metered
    projected: Metered
    planned_end: dt.datetime
    budget: BudgetState | None
    notes: tuple[str, ...] = ()
    """Provider times not believed (``believable``)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "so_far": self.so_far.as_json(),
            "projected": self.projected.as_json(),
            "planned_end": self.planned_end.isoformat(),
            **({"notes": list(self.notes)} if self.notes else {}),
            "budget": None
            if self.budget is None
            else {
                "level_percent": self.budget.level,
                "spent_usd": str(usd_of_cents(self.budget.spent_cents)),
                "max_cost_usd": str(self.budget.max_cost_usd),
                "on_budget": self.budget.on_budget,
                "message": self.budget.message,
            },
        }

    def lines(self) -> list[str]:
        out = [
            f"cost so far {cents_text(self.so_far.total_cents)} ({self.so_far.rule}; node times from "
            f"{', '.join(self.so_far.sources) or 'nothing'}); projected {cents_text(self.projected.total_cents)} "
            f"by {when_text(self.planned_end)}"
        ]
        if self.budget is not None and self.budget.message:
            out.append(self.budget.message)
        return out + [f"note: {note}" for note in self.notes]


def cost_so_far(adapter: Provider, record: ClusterRecord, nodes: Sequence[Node], now: dt.datetime) -> CostNow:
    """What the cluster has cost up to ``now`` and will cost by its planned end (expiry, else planned hours)."""
    notes: list[str] = []
    usages = usages_of(adapter, record, nodes, now=now, notes=notes)
    so_far = meter(record.plan, usages, now)
    end = span_end(record.plan, record.created_at, record.expires_at)
    projected = meter(record.plan, usages, max(now, end))
    return CostNow(so_far, projected, end, budget_state(record, so_far), tuple(notes))


def status_cost(adapter: Provider, record: ClusterRecord, nodes: Sequence[Node], now: dt.datetime) -> CostNow:
    """``cost_so_far`` for ``status``, noted in the ledger (a note that cannot be written is skipped:
    status only reads)."""
    cost = cost_so_far(adapter, record, nodes, now)
    with contextlib.suppress(ProvisionerError):
        ledger.note_metered(record.cluster_id, cost.so_far, now, final=False, run=record.run_id, local=record.local)
    return cost


def reconcile(metered: Metered, billed: Billed) -> tuple[bool, list[str]]:
    """Whether the billed total is within 1 % of the metered one, and every difference named."""
    diff = billed.total_cents - metered.total_cents
    within = abs(diff) <= RECONCILE_TOLERANCE * metered.total_cents if metered.total_cents else diff == 0
    notes = list(billed.differences)
    if not within:
        notes.append(
            f"billed {cents_text(billed.total_cents)} differs from metered "
            f"{cents_text(metered.total_cents)} by more than 1 %"
        )
        node_hours = Fraction(sum(b.billed_s for b in metered.nodes), 3600)
        if node_hours:  # the rate charged if the times were right: names a price that changed
            planned = sum((b.usd for b in metered.nodes), Fraction(0)) / node_hours
            notes.append(
                f"the bill implies ${_dec(Fraction(billed.total_usd) / node_hours):.4f} per node-hour "
                f"over the metered {_dec(node_hours):.2f} node-hours, the plan ${_dec(planned):.4f} "
                f"(a price changed since the catalog was read, or the provider's times differ)"
            )
    return within, notes


def _dec(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)


def settle(
    adapter: Provider, record: ClusterRecord, nodes: Sequence[Node], at: dt.datetime
) -> tuple[Comparison, dict[str, Any]]:
    """After a teardown: meter the deleted ``nodes`` (as listed before the delete) up to ``at``, compare with
    the plan, ask for the provider's billing record, append all to the ledger. Returns the comparison and
    the report as JSON. A billing API failure is reported in the result, never raised."""
    try:  # a provider that still lists terminated nodes (AWS, Fluence) says when each ended
        ended = {n.id: n for n in adapter.get_nodes(record.cluster_id) if n.ended_at is not None}
    except ProviderError:
        ended = {}
    notes: list[str] = []
    usages = usages_of(adapter, record, [ended.get(n.id, n) for n in nodes], gone_at=at, notes=notes)
    metered = meter(record.plan, usages, at)
    billed: Billed | None = None
    failure: str | None = None
    if record.local:  # a dry run's fake bills nothing real: no reconciliation to report
        failure = None
    elif isinstance(adapter, SupportsBilling | SupportsPriceCheck):
        try:
            billed = (
                adapter.billed(
                    record.cluster_id, {u.name: u.node_id for u in usages} or record.node_ids, record.created_at, at
                )
                if isinstance(adapter, SupportsBilling)
                else adapter.price_check(usages, record.plan.option.offer, record.plan.option.spot)
            )
            billed = checked(billed)
        except ProviderError as exc:
            failure = str(exc)
        except (ValueError, ArithmeticError) as exc:  # an answer with no amount of money in it
            billed, failure = None, f"{record.provider}: billing answer refused: {exc}"
    if billed is not None and "egress" in billed.terms_usd:  # measured by the bill (Vast.ai's bandwidth items)
        egress = Billed(billed.terms_usd["egress"], billed.source).total_cents
        metered = replace(
            metered, terms={**metered.terms, "egress": egress}, sources=(*metered.sources, "egress from the bill")
        )
    comparison = compare(record.plan, metered)
    ledger.note_metered(record.cluster_id, metered, at, final=True, run=record.run_id, local=record.local)
    doc: dict[str, Any] = {"metered": metered.as_json(), "planned_vs_actual": comparison.as_json()}
    if notes:
        doc["notes"] = notes
    if record.local:
        doc["local"] = True
    if failure is not None:
        doc["billed"] = {"error": failure}
    if billed is not None:
        within, notes = reconcile(metered, billed)
        ledger.note_billed(record.cluster_id, billed.total_cents, billed.source, notes, at, run=record.run_id)
        doc["billed"] = {
            "total_usd": str(usd_of_cents(billed.total_cents)),
            "source": billed.source,
            "within_1_percent": within,
            "differences": notes,
        }
    return comparison, doc


def report_lines(cluster_id: str, comparison: Comparison, doc: Mapping[str, Any]) -> list[str]:
    """``settle``'s answer for a terminal: the planned-vs-actual table, then the billing record."""
    lines = [f"cost of {cluster_id}, planned vs actual:", *comparison.render()]
    lines += [f"note: {note}" for note in doc.get("notes", ())]
    if doc.get("local"):
        lines.append("local dry run: nothing was bought or billed; actual is what these node times would cost")
    billed = doc.get("billed")
    if isinstance(billed, Mapping):
        if "error" in billed:
            lines.append(f"billing record: not read ({billed['error']})")
        else:
            lines.append(
                f"billed {usd_text(billed['total_usd'])} ({billed['source']}): "
                f"{'within' if billed['within_1_percent'] else 'NOT within'} 1 % of metered"
            )
            lines += [f"difference: {note}" for note in billed["differences"]]
    return lines


def before_teardown(
    provider_for: Callable[[str], Provider], record: ClusterRecord | None
) -> tuple[Provider, list[Node]] | None:
    """For an engine that deletes without listing (pulumi destroy): the adapter and the cluster's live nodes,
    read before the delete so ``emit_settled`` can bill them after; None without a record or a listing."""
    if record is None:
        return None
    try:
        adapter = provider_for(record.provider)
        return adapter, [
            n for n in adapter.get_nodes(record.cluster_id) if n.status in (NodeStatus.PENDING, NodeStatus.RUNNING)
        ]
    except ProvisionerError:
        return None


def emit_settled(emit: Emit, adapter: Provider, record: ClusterRecord, nodes: Sequence[Node], at: dt.datetime) -> None:
    """``settle`` and print it as one ``cost`` event (what ``down`` and the end of ``burst`` show). Never
    raises: the nodes are already deleted, and the ledger's failure is reported as an error event."""
    try:
        comparison, doc = settle(adapter, record, nodes, at)
    except ProvisionerError as exc:
        emit("error", message=f"cost of {record.cluster_id} not recorded: {exc}", cluster=record.cluster_id)
        return
    except (ValueError, ArithmeticError, TypeError) as exc:  # the nodes are gone: down must still finish
        emit(
            "error",
            message=f"cost of {record.cluster_id} not recorded: unreadable answer ({type(exc).__name__})",
            cluster=record.cluster_id,
        )
        return
    emit("cost", message="\n".join(report_lines(record.cluster_id, comparison, doc)), cluster=record.cluster_id, **doc)


__all__ = [
    "CLOCK_SKEW",
    "RECONCILE_TOLERANCE",
    "BudgetState",
    "CostNow",
    "before_teardown",
    "believable",
    "budget_expiry",
    "budget_state",
    "cost_so_far",
    "emit_settled",
    "of_run",
    "reconcile",
    "report_lines",
    "settle",
    "status_cost",
    "usages_from_nodes",
    "usages_of",
]
