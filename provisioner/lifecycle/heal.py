"""The controller that replaces: notice bad or lost nodes, delete them, buy replacements under the same names.

``Healer.step()`` looks once (lifecycle/faults.py: a node drained by its health watch, gone or
preempted at the provider, or not answering for ``unreachable_s``) and replaces what it found;
``provisioner watch`` (lifecycle/watch.py) and ``burst`` call it in a loop.

A replacement (``replace``): the jobs on the node are requeued (Slurm), the old instance is deleted
and waited for (the bill stops; a k8s Node and its k3s password secret go too, so the new machine
can register under the name), then the node's ``NodeSpec`` is created again through the adapter:
same offer, same name, same expiry (the TTL covers replacements); a CapacityError moves to the next
ranked option of the same provider and GPU layout (``alternates``), as ``bring_up_first`` does. The
purchase (lifecycle/heal_buy.py) retries a rate limit, a 5xx or a lost answer and adopts what a lost
answer bought, never buying twice; the node carries the lease of the hold it was bought under, renewed
like ``up``'s (lifecycle.lease_renewal). Then it waits for the node to run, runs the SSH pass (every
node learns the new address), waits for the control plane and resumes the node (``scontrol update
State=RESUME`` / uncordon).

Limits: ``max_replacements``; a replacement is refused once the TTL has passed or when the cluster's
spend so far plus the replacement's first billed period would exceed ``max_cost_usd`` (the spend is
metered by provisioner.metering over every instance, replaced ones included). Anything that stops a
replacement half way (an error, the burst's watchdog, Ctrl-C) deletes the instance it was buying
before it propagates: no orphan. Every action is an event with its cost.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from provisioner.errors import CapacityError, ClusterBusyError, ProviderError, StackError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import lease_renewal, state
from provisioner.lifecycle.faults import Fault, FaultFinder
from provisioner.lifecycle.heal_buy import buy_replacement
from provisioner.lifecycle.heal_rules import BILLING, HealLimit, HealOptions, ReplacementLost, node_hourly, same_layout
from provisioner.lifecycle.realize import Runtime, cluster_secrets, head_target, node_address, ssh_pass
from provisioner.lifecycle.runs import healed_by_run, name_taken
from provisioner.lifecycle.teardown import report_kept
from provisioner.metering import BillingRule, NodeUsage, meter
from provisioner.money import cents_text, round_cents, usd_of_cents, usd_text
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeStatus, Provider, owner_id
from provisioner.providers.ownership import Deletion, delete_owned
from provisioner.realize import readiness
from provisioner.realize.bootstrap_ssh import BootstrapError
from provisioner.realize.inputs import RunFacts, realize_input
from provisioner.realize.remote import Remote
from provisioner.termtext import when_text
from provisioner.validation.actions import TAINT_KEY
from provisioner.validation.runner import CommandResult
from provisioner.waiting import WaitTimeout


@dataclass
class Healer:
    rt: Runtime
    record: state.ClusterRecord
    remote: Remote
    alternates: Sequence[Plan] = ()
    options: HealOptions = field(default_factory=HealOptions)
    usages: list[NodeUsage] = field(default_factory=list)
    replacements: int = 0
    finder: FaultFinder = field(init=False)
    refused: set[str] = field(default_factory=set)
    requeued: list[str] = field(default_factory=list)
    no_capacity: dict[str, str] = field(default_factory=dict)
    """Nodes the last ``step`` could not buy anywhere it may fail over to, and why (lifecycle/recover.py moves)."""
    bought: set[str] = field(default_factory=set)
    """Ids of the replacements this heal bought: this run's even where the provider has no run mark."""

    def __post_init__(self) -> None:
        self.finder = FaultFinder(self.rt, self.remote, self.options.unreachable_s, bought=self.bought)
        if not self.usages:
            self.usages = [
                NodeUsage(node_id, name, self.record.created_at, None, source="client")
                for name, node_id in self.record.node_ids.items()
            ]

    @property
    def plan(self) -> Plan:
        return self.record.plan

    @property
    def provider(self) -> Provider:
        return self.rt.provider(self.record.provider)

    def listed(self) -> list[Node]:
        """The cluster's nodes the provider lists now that are this run's (lifecycle.runs.healed_by_run):
        an instance another run of the name left is never healed, replaced, metered or reached."""
        return healed_by_run(self.record, self.provider.get_nodes(self.record.cluster_id), self.bought)

    def spent_cents(self, now: dt.datetime) -> int:
        """Every instance's billed span by the plan's rules (replaced ones under ``interruption``)."""
        return meter(self.plan, self.usages, now).total_cents

    # --- noticing --------------------------------------------------------------------------------

    def find_faults(self) -> list[Fault]:
        """One look (lifecycle/faults.py)."""
        return self.finder.find(self.record)

    # --- replacing -------------------------------------------------------------------------------

    def step(self, faults: Sequence[Fault] | None = None) -> list[str]:
        """Look once (or take ``faults``), replace what is bad. Returns the names replaced. Raises what a
        replacement raises after its cleanup (HealLimit is reported, not raised)."""
        done: list[str] = []
        self.no_capacity = {}
        for fault in self.find_faults() if faults is None else faults:
            if fault.node in self.refused:
                continue
            try:
                self.replace(fault)
            except HealLimit as exc:
                self.refused.add(fault.node)
                self.rt.emit(
                    "replace-refused",
                    message=f"not replacing {fault.node}: {exc}",
                    cluster=self.record.cluster_id,
                    node=fault.node,
                    reason=fault.reason,
                    spent_usd=usd_of_cents(self.spent_cents(self.rt.now())),
                )
                continue
            except (ProviderError, StackError, WaitTimeout, BootstrapError, ReplacementLost, ClusterBusyError) as exc:
                # Nothing half-bought is left (the replacement cleans up; a create refused for another
                # owner's instance under the name bought nothing); the next look tries again.
                if isinstance(exc, CapacityError):
                    self.no_capacity[fault.node] = str(exc)
                self.rt.emit(
                    "replace-failed",
                    message=f"replacing {fault.node} failed: {exc}; nothing of it is left",
                    cluster=self.record.cluster_id,
                    node=fault.node,
                    error=str(exc),
                    spent_usd=usd_of_cents(self.spent_cents(self.rt.now())),
                )
                continue
            done.append(fault.node)
        return done

    def _check_limits(self, fault: Fault) -> None:
        now = self.rt.now()
        if self.replacements >= self.options.max_replacements:
            raise HealLimit(f"--max-replacements {self.options.max_replacements} reached ({fault.reason})")
        if self.record.expires_at is not None and now >= self.record.expires_at:
            raise HealLimit(f"the cluster's TTL ended at {when_text(self.record.expires_at)}")
        if self.record.max_cost_usd is not None:
            rule = BillingRule.of_plan(self.plan)
            first = Fraction(rule.price_micro * rule.billed_seconds(1), 1_000_000 * 3600)
            spent = self.spent_cents(now)
            if Fraction(spent, 100) + first > Fraction(self.record.max_cost_usd):
                raise HealLimit(
                    f"cost cap {usd_text(self.record.max_cost_usd)}: spent {cents_text(spent)}, a replacement's "
                    f"first billed period costs {cents_text(round_cents(first))}"
                )

    def replace(self, fault: Fault) -> Node:
        """Delete ``fault.node``'s instance and buy, boot and join its replacement. Blocks."""
        self._check_limits(fault)
        cluster, name = self.record.cluster_id, fault.node
        started = self.rt.clock()
        self.replacements += 1
        self.rt.emit(
            "replace",
            message=f"replacing {name} ({fault.kind}: {fault.reason}); {usd_text(node_hourly(self.plan))}/h per node",
            cluster=cluster,
            node=name,
            kind=fault.kind,
            reason=fault.reason,
            attempt=self.replacements,
            hourly_usd=node_hourly(self.plan),
        )
        self._requeue_jobs(name)
        self._delete(name)
        while True:
            try:
                node = self._create(name)  # deletes what it bought on any failure
                break
            except ReplacementLost as exc:
                self.rt.emit(
                    "replace-lost",
                    message=f"{name}: {exc}; buying another",
                    cluster=cluster,
                    node=name,
                    reason=str(exc),
                )
                self._check_limits(Fault(name, "gone", str(exc)))
                self.replacements += 1
        try:
            self._join(name, node)
        except BaseException:
            self._delete(name, why="the replacement did not join")
            raise
        spent = self.spent_cents(self.rt.now())
        self.rt.emit(
            "replaced",
            message=f"{name} replaced by {node.id} in {self.rt.clock() - started:.0f} s; "
            f"spent so far {cents_text(spent)}",
            cluster=cluster,
            node=name,
            id=node.id,
            seconds=round(self.rt.clock() - started, 1),
            spent_usd=usd_of_cents(spent),
        )
        return node

    def _head(self) -> tuple[Node, ...] | None:
        try:
            nodes = self.listed()
        except ProviderError:
            return None
        return tuple(n for n in nodes if n.status is NodeStatus.RUNNING)

    def _on_head(self, argv: Sequence[str]) -> CommandResult | None:
        """Run ``argv`` on the head as the cluster user (admin commands through ``sudo -n``: the
        user has passwordless sudo); None when the head does not run."""
        running = self._head()
        if running is None or self.plan.head.name not in {n.name for n in running}:
            return None
        return self.remote.run(head_target(self.record, list(running)), argv, timeout_s=60)

    def _requeue_jobs(self, name: str) -> None:
        control_plane = self.plan.spec.control_plane.value
        if control_plane == "slurm":
            # Back to pending (held off the drained node); they run again once it is back.
            listed = self._on_head(("squeue", "-h", "-w", name, "-o", "%A"))
            jobs = sorted({w for w in listed.stdout.split() if w.isdigit()}) if listed is not None and listed.ok else []
            # DOWN first: Slurm then ends the jobs there at once instead of waiting for a dead slurmd to
            # confirm (a requeued job stays "completing" until then); the replacement's slurmd returns it.
            self._on_head(
                (
                    "sudo",
                    "-n",
                    "scontrol",
                    "update",
                    f"NodeName={name}",
                    "State=DOWN",
                    "Reason=provisioner: being replaced",
                )
            )
            for job in jobs:
                self._on_head(("sudo", "-n", "scontrol", "requeue", job))
            self.requeued = [*self.requeued, *jobs]
        elif control_plane == "kubernetes":
            # The new machine registers under the same name: the old Node and its k3s password must go.
            self._on_head(
                (
                    "sh",
                    "-c",
                    f"sudo -n kubectl delete node {name} --wait=false; "
                    f"sudo -n kubectl -n kube-system delete secret {name}.node-password.k3s",
                )
            )

    def _delete(self, name: str, why: str = "") -> None:
        """Delete every instance named ``name`` that may still bill (pending, running or failed: a failed
        host is still an instance) and wait until none is left; note their spans' end."""
        cluster = self.record.cluster_id

        def billing(nodes: Sequence[Node]) -> list[Node]:
            return [n for n in nodes if n.name == name and n.status in BILLING]

        named = [n.id for n in billing(self.listed())]
        # Only this owner's instances of the name (providers.ownership): never another owner's or an unmarked one.
        deletion = delete_owned(self.provider, cluster, named) if named else Deletion()
        doomed = list(deletion.deleted)
        report_kept(self.rt, cluster, deletion)
        if doomed:
            gone = {d.id for d in doomed}
            self.rt.wait(
                self.listed,
                lambda nodes: not any(n.id in gone for n in billing(nodes)),
                timeout_s=self.rt.timeouts.deleted_s,
                what=f"{name} of {cluster} to be deleted",
            )
        now = self.rt.now()
        ids = {n.id for n in doomed}
        self.usages = [
            NodeUsage(u.node_id, u.name, u.started_at, now, u.stopped_s, u.source)
            if u.ended_at is None and (u.node_id in ids or (u.name == name and not doomed))
            else u
            for u in self.usages
        ]
        if doomed:
            self.rt.emit(
                "deleted",
                message=f"deleted {name} ({', '.join(sorted(ids))}){': ' + why if why else ''}; "
                f"spent so far {cents_text(self.spent_cents(now))}",
                cluster=cluster,
                node=name,
                ids=sorted(ids),
                spent_usd=usd_of_cents(self.spent_cents(now)),
            )

    def _create(self, name: str) -> Node:
        """Buy ``name`` again: same offer, then the alternates on a CapacityError. Cleans up on any exit.
        Holds the cluster's lock and a lease while it buys, as ``up`` does (lifecycle.lease): inside a
        burst, the burst's (its renewal covers the new node); else (``watch``) its own, renewed while
        held and released once the node runs (lifecycle.lease_renewal)."""
        cluster = self.record.cluster_id
        outermost = cluster_lease.held_mark(cluster) is None
        with cluster_lease.hold(cluster, "replace", now=self.rt.now) as mark:
            node = self._create_held(name, mark.token())
            if outermost:  # bought: the record is to hold it, as up's release says
                lease_renewal.release(cluster)
            return node

    def _create_held(self, name: str, lease: str) -> Node:
        cluster = self.record.cluster_id
        secrets = cluster_secrets(cluster)
        tries = [self.plan, *self.alternates]
        run = RunFacts(owner_id(), self.record.expires_at, lease=lease, run=self.record.run_id)
        taken = name_taken(self.record, self.provider.get_nodes(cluster), name, self.bought)
        if taken is not None:  # never adopted as the replacement, never deleted: another run's
            raise ClusterBusyError(taken)
        for index, plan in enumerate(tries):
            spec = realize_input(plan, secrets, run).spec(name)  # what up built the node from
            try:
                node = buy_replacement(self.rt, self.provider, spec, plan, self.options, self.bought)
            except CapacityError as exc:
                self._delete(name, why="capacity error")
                if index + 1 == len(tries):
                    raise
                nxt = tries[index + 1].option
                self.rt.emit(
                    "failover",
                    message=f"no capacity for {name} on {plan.option.instance_type} in "
                    f"{plan.option.region} ({exc}); trying {nxt.instance_type} in {nxt.region} "
                    f"({usd_text(node_hourly(tries[index + 1]))}/h per node)",
                    cluster=cluster,
                    node=name,
                    error=str(exc),
                    next_instance_type=nxt.instance_type,
                    next_region=nxt.region,
                )
                continue
            except BaseException:
                self._delete(name, why="the replacement was interrupted")
                raise
            self.usages.append(NodeUsage(node.id, name, self.rt.now(), None, source="client"))
            return node
        raise AssertionError("unreachable")  # pragma: no cover

    def _join(self, name: str, node: Node) -> None:
        cluster = self.record.cluster_id
        nodes = {n.name: n for n in self.listed() if n.status is NodeStatus.RUNNING}
        ids = {**self.record.node_ids, name: node.id}
        update: dict[str, object] = {"node_ids": ids}
        if name == self.plan.head.name:
            update["head_address"] = node_address(node)
        self.record = self.record.model_copy(update=update)
        state.save_record(self.record)
        secrets = cluster_secrets(cluster)
        ssh_pass(self.rt, self.remote, self.provider, self.plan, secrets, nodes)
        # Take the drain off first: a drained node never counts as ready (its slurmd registers either way).
        control_plane = self.plan.spec.control_plane.value
        if control_plane == "slurm":
            self._on_head(("sudo", "-n", "scontrol", "update", f"NodeName={name}", "State=RESUME"))
        elif control_plane == "kubernetes":
            self._on_head(
                (
                    "sh",
                    "-c",
                    f"sudo -n kubectl uncordon {name}; sudo -n kubectl taint nodes {name} {TAINT_KEY}- || true",
                )
            )
        readiness.wait_ready(self.plan, self.remote, nodes, self.rt)
        # Slurm holds a requeued job back (its begin time moves ~2 min ahead); every node is back now.
        for job in self.requeued:
            self._on_head(("sudo", "-n", "scontrol", "update", f"JobId={job}", "StartTime=now"))
        self.requeued = []


__all__ = ["Fault", "HealLimit", "HealOptions", "Healer", "ReplacementLost", "same_layout"]
