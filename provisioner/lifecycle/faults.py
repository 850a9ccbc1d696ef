"""Noticing bad nodes: one look at the provider and the scheduler (the heal loop's eyes, lifecycle/heal.py).

A node is at fault when

* its health watch drained it (Slurm ``DRAIN`` / a cordoned k8s node whose reason starts with
  ``provisioner-watch``: the finding's code is in the fault's reason); a node drained by someone
  else is left alone;
* the provider lists it gone, preempted (Lambda ``preempted``, a spot reclaim) or failed, or no
  longer lists it at all;
* it has not answered for ``unreachable_s`` in a row: the scheduler reports it not responding,
  the head does not answer over SSH, or (no scheduler) the node does not answer an SSH ``true``.

Only this run's nodes are looked at (lifecycle.runs.healed_by_run: the record's run mark; unmarked,
the record's ids and the replacements the heal bought): an instance another run of the name left
under a node's name is not that node. A listing that fails finds nothing (a warning event; the next
look tries again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.errors import ProviderError
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import Runtime, head_target, live
from provisioner.lifecycle.runs import healed_by_run
from provisioner.providers.base import Node, NodeStatus, owner_id
from provisioner.realize.remote import CLUSTER_USER, Remote, ssh_target
from provisioner.untrusted import loads_bounded
from provisioner.validation.actions import TAINT_KEY
from provisioner.validation.watch import code_of_reason

SSH_FAILED = 255
"""ssh's own exit status when it could not reach the node (a remote command's is passed through)."""


@dataclass(frozen=True)
class Fault:
    node: str
    kind: str  # drained | gone | unreachable
    reason: str


@dataclass
class FaultFinder:
    """Looks at a cluster; remembers since when each node has not answered."""

    rt: Runtime
    remote: Remote
    unreachable_s: float = 300.0
    unreachable_since: dict[str, float] = field(default_factory=dict)
    bought: set[str] = field(default_factory=set)
    """Ids of the replacements the heal bought (shared with its Healer): this run's though unmarked."""

    def find(self, record: state.ClusterRecord) -> list[Fault]:
        """One look at the provider and the scheduler. A listing that fails finds nothing (next look)."""
        try:
            nodes = self.rt.provider(record.provider).get_nodes(record.cluster_id)
        except ProviderError as exc:
            self.rt.emit(
                "warning", message=f"watch: cannot list the nodes ({exc}); next look", cluster=record.cluster_id
            )
            return []
        me = owner_id()  # another owner's instance under a node's name is not that node (nor is an unmarked one),
        nodes = [n for n in healed_by_run(record, nodes, self.bought) if n.owner == me]  # nor another run's
        faults: dict[str, Fault] = {}
        running = {n.name: n for n in nodes if n.status is NodeStatus.RUNNING}
        pending = {n.name for n in live(nodes)}
        for planned in record.plan.nodes:
            if planned.name not in pending:
                seen = [n for n in nodes if n.name == planned.name]
                state_text = (seen[-1].provider_state or seen[-1].status.value) if seen else "not listed"
                faults[planned.name] = Fault(planned.name, "gone", f"the provider reports it {state_text}")
        for fault in self._scheduler_faults(record, running):
            faults.setdefault(fault.node, fault)
        return [faults[n.name] for n in record.plan.nodes if n.name in faults]

    def _reachable(self, name: str, answers: bool, what: str) -> Fault | None:
        """A fault once ``name`` has not answered for ``unreachable_s`` in a row."""
        now = self.rt.clock()
        if answers:
            self.unreachable_since.pop(name, None)
            return None
        since = self.unreachable_since.setdefault(name, now)
        if now - since < self.unreachable_s:
            return None
        return Fault(name, "unreachable", f"{what} for {now - since:.0f} s")

    def _scheduler_faults(self, record: state.ClusterRecord, running: dict[str, Node]) -> list[Fault]:
        control_plane = record.plan.spec.control_plane.value
        planned = {n.name for n in record.plan.nodes}
        if control_plane not in ("slurm", "kubernetes"):  # no scheduler: each node must answer over SSH
            found = []
            for name, node in running.items():
                target = ssh_target(node, CLUSTER_USER, name) if name in planned else None
                if target is not None:
                    answer = self.remote.run(target, ("true",), timeout_s=30)
                    fault = self._reachable(name, answer.returncode != SSH_FAILED, "no answer over SSH")
                    found += [fault] if fault else []
            return found
        if record.plan.head.name not in running:
            return []
        head = head_target(record, list(running.values()))
        if control_plane == "slurm":
            result = self.remote.run(head, ("sinfo", "-h", "-N", "-o", "%N|%T|%E"), timeout_s=30)
            rows = [line.split("|", 2) for line in result.stdout.splitlines() if line.count("|") >= 2]
            states = {name: (st.lower(), reason) for name, st, reason in rows} if result.ok else {}
        else:
            result = self.remote.run(head, ("kubectl", "get", "nodes", "-o", "json"), timeout_s=30)
            states = _k8s_states(result.stdout) if result.ok else {}
        head_fault = self._reachable(
            record.plan.head.name, result.returncode != SSH_FAILED, "the head does not answer over SSH"
        )
        faults = [head_fault] if head_fault else []
        for name, (node_state, reason) in states.items():
            if name not in planned:
                continue
            code = code_of_reason(reason)
            if "drain" in node_state and code is not None:
                faults.append(Fault(name, "drained", f"drained by its health watch: {code}"))
                continue
            down = node_state.endswith("*") or "down" in node_state or "not_responding" in node_state
            fault = self._reachable(name, not down, f"not responding ({node_state})")
            faults += [fault] if fault else []
        return faults


def _k8s_states(text: str) -> dict[str, tuple[str, str]]:
    """Node name -> (state words, the watch's reason annotation) from ``kubectl get nodes -o json``."""
    try:
        items = loads_bounded(text).get("items", [])
    except (ValueError, AttributeError):
        return {}
    out = {}
    for item in items:
        name = item.get("metadata", {}).get("name", "")
        reason = item.get("metadata", {}).get("annotations", {}).get(f"{TAINT_KEY}-reason", "")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in item.get("status", {}).get("conditions", [])
        )
        cordoned = "drain " if item.get("spec", {}).get("unschedulable") else ""
        words = cordoned + ("ready" if ready else "not_responding")
        out[name] = (words, reason)
    return out


__all__ = ["SSH_FAILED", "Fault", "FaultFinder"]
