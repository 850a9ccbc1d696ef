"""Recovery anywhere: a run whose cluster cannot be healed where it is moves to the next-best option anywhere.

``Mover.step(healer)`` looks once through the heal loop (lifecycle/heal.py) and moves the run when

* a lost node cannot be bought again: no capacity for the same offer nor for any same-provider,
  same-layout option it may fail over to (``Healer.no_capacity``); or
* the head is lost (gone at its provider, or not answering for ``unreachable_s``): with it goes the
  shared filesystem, so a replacement in place would start from nothing.

A move (``move``): the run is re-planned for its remaining hours from its spec, the spec carrying
``checkpoint.restore`` so every candidate pays the checkpoint's download and the work lost since its
last copy (``cost_terms.move_term``); the options that just had no capacity are left out. The old
cluster is torn down (``tear_down``: only this owner's nodes), the first new option with capacity is
brought up (``NAME-mN``, same run id, the run's expiry, the cost cap less what the run has spent),
the checkpoint is copied into it from the store (``render.checkpoint_sync.restore_script``), and a
new ``Healer`` takes over. The caller (``burst``) starts the job again there.

Limits span the run, not a cluster: at most ``checkpoint.max_moves`` (or ``--max-moves``) moves; no
move once the run's TTL has passed; none when the spend of every cluster of the run so far plus the
cheapest option's move term would pass the cost cap. A refused or failed move is an event
(``move-refused`` / ``move-failed``) and raises ``MoveRefused`` with nothing of the new cluster left;
the caller tears down what remains. Every step is an event with its cost.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from provisioner.errors import ProvisionerError
from provisioner.lifecycle import resume, state
from provisioner.lifecycle.faults import Fault
from provisioner.lifecycle.heal import Healer
from provisioner.lifecycle.heal_rules import HealOptions
from provisioner.lifecycle.realize import Runtime, bring_up, cluster_secrets, head_target, live, tear_down
from provisioner.lifecycle.watchdog import BurstStopped
from provisioner.money import cents_text, usd_of_cents, usd_text
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeStatus
from provisioner.realize.remote import CLUSTER_USER, Remote, other_cluster, ssh_target
from provisioner.render.checkpoint_sync import restore_script
from provisioner.spec import ClusterSpec
from provisioner.spec_checkpoint import RestoreSpec

HEAD_LOST = frozenset({"gone", "unreachable"})
MIN_HOURS = 1 / 60
"""A run past its expected hours is re-planned for a minute at least (the term prices what it lasts)."""


class MoveRefused(ProvisionerError):
    """The run could not move (a limit, or no option could be brought up); the event says why."""


@dataclass(frozen=True)
class MoveOptions:
    max_moves: int | None = None
    """None: the spec's ``checkpoint.max_moves``."""
    max_tries: int = 3
    """New options tried per move (each one brought up, its capacity found or not)."""
    lost_minutes: float | None = None
    """Work lost since the checkpoint's last copy; None: half the spec's checkpoint interval plus its
    restart overhead (the interruption term's own assumption, docs/cost-model.md)."""


@dataclass
class RunSpan:
    """One run across its clusters: the limits that span them and the money of the clusters left behind."""

    run_id: str
    started_at: dt.datetime
    expires_at: dt.datetime | None
    max_cost_usd: Decimal | None
    clusters: list[str] = field(default_factory=list)
    closed_cents: int = 0
    """What the clusters torn down by moves cost (metered over every instance, replacements included)."""
    moves: int = 0


def moved_id(name: str, move: int) -> str:
    """The cluster id of the run's ``move``-th new cluster: ``NAME-mN``, within the 40 characters of a name."""
    suffix = f"-m{move}"
    return name[: 40 - len(suffix)].rstrip("-") + suffix


def replan_spec(
    spec: ClusterSpec, cluster_id: str, hours: float, lost_minutes: float, from_provider: str
) -> ClusterSpec:
    """The run's spec re-planned as a move: the new cluster's name, the remaining hours, the restore."""
    restore = RestoreSpec(lost_minutes=round(lost_minutes, 6), from_provider=from_provider)
    data = spec.model_dump(mode="python")
    data["name"] = cluster_id
    data["workload"]["hours"] = float(round(max(hours, MIN_HOURS), 6))
    data["checkpoint"] = {**spec.checkpoint.model_dump(mode="python"), "restore": restore}
    return ClusterSpec.model_validate(data)


def same_option(a: Plan, b: Plan) -> bool:
    x, y = a.option, b.option
    return (x.provider, x.region, x.zone, x.instance_type, x.spot) == (
        y.provider,
        y.region,
        y.zone,
        y.instance_type,
        y.spot,
    )


@dataclass
class Mover:
    rt: Runtime
    spec: ClusterSpec
    """The run's spec as first planned (its name is the first cluster's id)."""
    run: RunSpan
    remote: Remote
    planner: Callable[[ClusterSpec], Sequence[Plan]]
    """Ranked plans for a spec (``workflow.resolve`` over the catalog; injectable for tests)."""
    options: MoveOptions = field(default_factory=MoveOptions)
    heal_options: HealOptions = field(default_factory=HealOptions)
    local: bool = False
    on_moved: Callable[[Healer], None] | None = None
    """Told of each new cluster's Healer as soon as it runs (burst's watchdog meters it)."""
    hold_cluster: Callable[[str], object] | None = None
    """Takes the new cluster's lock and lease before its bring-up (burst: held, renewed, to the run's end)."""
    replaced: list[str] = field(default_factory=list)
    """The nodes the last ``step`` replaced in place."""

    @property
    def max_moves(self) -> int:
        return self.spec.checkpoint.max_moves if self.options.max_moves is None else self.options.max_moves

    def spent_cents(self, healer: Healer, now: dt.datetime) -> int:
        """The run's spend: the clusters left behind plus the current one's, metered."""
        return self.run.closed_cents + healer.spent_cents(now)

    def step(self, healer: Healer) -> Healer:
        """One look; heal in place, or move. Returns the Healer of the run's cluster after the look (a new
        one after a move). Raises MoveRefused (after a ``move-refused``/``move-failed`` event)."""
        self.replaced = []
        faults = healer.find_faults()
        head = healer.plan.head.name
        lost = lost_head(faults, head)
        if lost is not None:
            return self.move(healer, f"the head {head} is lost ({lost.kind}: {lost.reason})", exclude=())
        self.replaced = healer.step(faults)
        if healer.no_capacity:
            node, why = next(iter(healer.no_capacity.items()))
            tried = [healer.plan, *healer.alternates]
            return self.move(
                healer,
                f"no capacity for {node} at {healer.plan.option.provider} ({len(tried)} option(s) tried): {why}",
                exclude=tried,
            )
        return healer

    def lost_minutes(self) -> float:
        if self.options.lost_minutes is not None:
            return self.options.lost_minutes
        w = self.spec.workload
        return w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes

    def _refuse(self, event: str, healer: Healer, why: str) -> MoveRefused:
        spent = self.spent_cents(healer, self.rt.now())
        self.rt.emit(
            event,
            message=f"not moving run {self.run.run_id} off {healer.record.cluster_id}: {why}; "
            f"spent {cents_text(spent)}",
            cluster=healer.record.cluster_id,
            run=self.run.run_id,
            reason=why,
            spent_usd=usd_of_cents(spent),
        )
        return MoveRefused(f"run {self.run.run_id} could not move: {why}")

    def _check_limits(self, healer: Healer, now: dt.datetime) -> None:
        if self.run.moves >= self.max_moves:
            raise self._refuse("move-refused", healer, f"the limit of {self.max_moves} move(s) is reached")
        if self.run.expires_at is not None and now >= self.run.expires_at:
            raise self._refuse("move-refused", healer, "the run's TTL has passed")

    def move(self, healer: Healer, reason: str, exclude: Sequence[Plan]) -> Healer:
        """Re-plan, tear the old cluster down, bring the new one up, restore the checkpoint. Blocks."""
        started, now = self.rt.clock(), self.rt.now()
        old = healer.record
        self._check_limits(healer, now)
        spent = self.spent_cents(healer, now)
        elapsed_h = (now - self.run.started_at).total_seconds() / 3600
        cluster_id = moved_id(self.spec.name, self.run.moves + 1)
        lost = self.lost_minutes()
        spec = replan_spec(self.spec, cluster_id, self.spec.workload.hours - elapsed_h, lost, old.provider)
        try:
            ranked = [p for p in self.planner(spec) if not any(same_option(p, x) for x in exclude)]
        except ProvisionerError as exc:
            raise self._refuse("move-failed", healer, f"re-planning found no option ({exc})") from None
        if not ranked:
            raise self._refuse("move-failed", healer, "re-planning found no option but the ones without capacity")
        if self.run.max_cost_usd is not None:
            cheapest = min(p.option.cost.move for p in ranked)
            if Decimal(spent) / 100 + cheapest > self.run.max_cost_usd:
                raise self._refuse(
                    "move-refused",
                    healer,
                    f"cost cap {usd_text(self.run.max_cost_usd)}: spent {cents_text(spent)}, "
                    f"the cheapest move costs {usd_text(cheapest)}",
                )
        self.run.moves += 1
        best = ranked[0].option
        self.rt.emit(
            "move",
            message=f"moving run {self.run.run_id} off {old.cluster_id} ({reason}); re-planned "
            f"{spec.workload.hours:g} h left: best {best.provider} {best.region} {best.instance_type} "
            f"{usd_text(best.hourly_usd)}/h, move {usd_text(best.cost.move)} (checkpoint download and "
            f"{lost:g} min lost), {usd_text(best.cost.total)} in all; spent so far {cents_text(spent)}",
            cluster=old.cluster_id,
            run=self.run.run_id,
            to_cluster=cluster_id,
            reason=reason,
            move=self.run.moves,
            provider=best.provider,
            region=best.region,
            instance_type=best.instance_type,
            hourly_usd=best.hourly_usd,
            move_usd=best.cost.move,
            planned_usd=best.cost.total,
            spent_usd=usd_of_cents(spent),
        )
        self._leave(healer)
        record = self._bring_up(healer, ranked[: self.options.max_tries])
        rt = replace(self.rt, remote=self.remote) if self.rt.remote is not None else self.rt
        new = Healer(rt, record, self.remote, [p for p in ranked if p is not record.plan], self.heal_options)
        if self.on_moved is not None:
            self.on_moved(new)
        self._restore(record, old.plan)
        spent = self.spent_cents(new, self.rt.now())
        self.rt.emit(
            "moved",
            message=f"run {self.run.run_id} moved to {record.cluster_id} on {record.provider} "
            f"({usd_text(record.plan.option.hourly_usd)}/h) in {self.rt.clock() - started:.0f} s; "
            f"checkpoint restored; spent so far {cents_text(spent)}",
            cluster=record.cluster_id,
            run=self.run.run_id,
            from_cluster=old.cluster_id,
            provider=record.provider,
            hourly_usd=record.plan.option.hourly_usd,
            seconds=round(self.rt.clock() - started, 1),
            spent_usd=usd_of_cents(spent),
        )
        return new

    def _leave(self, healer: Healer) -> None:
        """Tear the old cluster down (this owner's nodes only) and close its money."""
        old = healer.record
        tear_down(old.cluster_id, self.rt, provider=old.provider)
        closed = healer.spent_cents(self.rt.now())
        self.run.closed_cents += closed
        self.rt.emit(
            "move-left",
            message=f"{old.cluster_id} torn down after {cents_text(closed)}; the run has spent "
            f"{cents_text(self.run.closed_cents)}",
            cluster=old.cluster_id,
            run=self.run.run_id,
            spent_usd=usd_of_cents(closed),
            run_spent_usd=usd_of_cents(self.run.closed_cents),
        )

    def _bring_up(self, healer: Healer, plans: Sequence[Plan]) -> state.ClusterRecord:
        left = None
        if self.run.max_cost_usd is not None:
            left = max(self.run.max_cost_usd - Decimal(self.run.closed_cents) / 100, Decimal(0))
        errors: list[str] = []
        if self.hold_cluster is not None and plans:
            self.hold_cluster(plans[0].cluster_id)  # every option of a move has the same new cluster id
        for plan in plans:
            if plan.cluster_id not in self.run.clusters:
                self.run.clusters.append(plan.cluster_id)
            # The new cluster has its own key: reach its nodes with it (its SSH pass, the restore, the job).
            remote = other_cluster(self.remote, plan, cluster_secrets(plan.cluster_id), state.ssh_dir(plan.cluster_id))
            rt = replace(self.rt, remote=remote) if self.rt.remote is not None else self.rt
            try:
                record = bring_up(
                    plan,
                    rt,
                    expires_at=self.run.expires_at,
                    max_cost_usd=left,
                    on_budget="stop" if left is not None else "warn",
                    destroy_on_failure=True,
                    lease=True,
                    local=self.local,
                    run_id=self.run.run_id,
                )
                self.remote = remote
                return record
            except BurstStopped:
                raise  # the run's TTL or cap: bring_up tore its cluster down; the caller ends the run
            except ProvisionerError as exc:  # capacity, or a second fault while it booted: nothing left
                errors.append(f"{plan.option.provider} {plan.option.region}: {exc}")
            self.rt.emit(
                "move-failover",
                message=f"{plan.cluster_id} could not come up on {plan.option.provider} {plan.option.region}: "
                f"{errors[-1]}; nothing of it is left",
                cluster=plan.cluster_id,
                run=self.run.run_id,
                error=errors[-1],
            )
        raise self._refuse("move-failed", healer, f"no new option came up ({'; '.join(errors)})")

    def _restore(self, record: state.ClusterRecord, old: Plan) -> None:
        """Copy the checkpoint from the store into the new cluster: the shared folder on the head, or each
        node's folder from the old node of the same index."""
        plan = record.plan
        remote_url = plan.spec.checkpoint.remote
        assert remote_url is not None
        nodes = {n.name: n for n in live(self.rt.provider(record.provider).get_nodes(record.cluster_id))}
        dest = resume.checkpoint_dir(plan)
        if resume.shared_fs(plan):
            pairs: list[tuple[str, str | None]] = [(plan.head.name, None)]
        else:
            olds = [n.name for n in old.nodes]
            pairs = [(n.name, olds[i]) for i, n in enumerate(plan.nodes) if i < len(olds)]
        for name, from_node in pairs:
            script = restore_script(dest, remote_url, from_node=from_node)
            target = self._target(record, nodes, name)
            self.rt.emit(
                "restore",
                message=f"restoring the checkpoint on {name}: {remote_url}{'/' + from_node if from_node else ''} "
                f"-> {dest}",
                cluster=record.cluster_id,
                node=name,
                source=remote_url + (f"/{from_node}" if from_node else ""),
                dest=dest,
            )
            result = self.remote.run(target, ("sudo", "-n", "bash", "-c", script), timeout_s=3600)
            if not result.ok:
                raise MoveRefused(f"restoring the checkpoint on {name} failed: {result.brief()}")

    def _target(self, record: state.ClusterRecord, nodes: dict[str, Node], name: str):  # type: ignore[no-untyped-def]
        if name == record.plan.head.name:
            return head_target(record, list(nodes.values()))
        node = nodes.get(name)
        target = (
            ssh_target(node, CLUSTER_USER, name) if node is not None and node.status is NodeStatus.RUNNING else None
        )
        if target is None:
            raise MoveRefused(f"{name} of {record.cluster_id} has no address to restore the checkpoint on")
        return target


def lost_head(faults: Sequence[Fault], head: str) -> Fault | None:
    return next((f for f in faults if f.node == head and f.kind in HEAD_LOST), None)


__all__ = ["MoveOptions", "MoveRefused", "Mover", "RunSpan", "moved_id", "replan_spec"]
