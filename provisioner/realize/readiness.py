"""When is a cluster ready: its control plane, asked on the head, lists every planned node usable.

- Slurm: ``sinfo --noheader --Node --format=%N|%t`` on the head; a node is ready when its
  state is idle, mixed, allocated or completing with no flag (``*`` not responding, ``~``
  powered off, ``#``/``!``/``%`` powering, ``$`` maintenance, ``@`` pending reboot, ``^``/``-``
  rebooting or planned); down, drained and failing states are not.
- Kubernetes: ``kubectl get nodes`` on the head; a node is ready when its Ready condition is True.
- ``control_plane: none``: every node answers ``true`` over SSH.

Pure parsing (``slurm_ready``/``k8s_ready``) is separate from the polling (``wait_ready``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from provisioner.errors import ProvisionerError
from provisioner.plan import Plan
from provisioner.providers.base import Node
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.remote import CLUSTER_USER, Remote, ssh_target

if TYPE_CHECKING:
    from provisioner.realize.runtime import Runtime

SINFO = ("sinfo", "--noheader", "--Node", "--format=%N|%t")
KUBECTL_NODES = (
    "kubectl",
    "get",
    "nodes",
    "-o",
    'jsonpath={range .items[*]}{.metadata.name}|{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
)
_READY_SLURM = frozenset({"idle", "mix", "mixed", "alloc", "allocated", "comp", "completing"})


class NotReadyError(ProvisionerError):
    """The control plane did not list every node ready in time (names the ones missing)."""


def slurm_ready(sinfo_output: str) -> set[str]:
    """Node names sinfo reports usable (no state flag). Pure."""
    ready = set()
    for line in sinfo_output.splitlines():
        name, sep, node_state = line.strip().partition("|")
        if sep and node_state.strip().lower() in _READY_SLURM:
            ready.add(name.strip())
    return ready


def k8s_ready(kubectl_output: str) -> set[str]:
    """Node names whose Ready condition is True. Pure."""
    ready = set()
    for line in kubectl_output.splitlines():
        name, sep, status = line.strip().partition("|")
        if sep and status.strip() == "True":
            ready.add(name.strip())
    return ready


def ready_nodes(plan: Plan, remote: Remote, targets: Mapping[str, SshTarget]) -> tuple[set[str], str]:
    """(ready node names, last problem) asked once. ``targets`` maps node name -> where SSH reaches it."""
    head = plan.head.name
    control_plane = plan.spec.control_plane.value
    if control_plane in ("slurm", "kubernetes"):
        target = targets[head]
        argv = SINFO if control_plane == "slurm" else KUBECTL_NODES
        result = remote.run(target, argv, timeout_s=60)
        if not result.ok:
            return set(), f"{argv[0]} on {head}: {result.brief()}"
        found = slurm_ready(result.stdout) if control_plane == "slurm" else k8s_ready(result.stdout)
        return found, ""
    ready, problem = set(), ""
    for node in plan.nodes:
        result = remote.run(targets[node.name], ("true",), timeout_s=60)
        if result.ok:
            ready.add(node.name)
        else:
            problem = f"{node.name}: {result.brief()}"
    return ready, problem


def wait_ready(plan: Plan, remote: Remote, nodes: Mapping[str, Node], runtime: Runtime) -> set[str]:
    """Poll ``ready_nodes`` until every planned node is ready. NotReadyError names the missing ones."""
    from provisioner.waiting import WaitTimeout, wait_until

    targets: dict[str, SshTarget] = {}
    for planned in plan.nodes:
        target = ssh_target(nodes[planned.name], CLUSTER_USER) if planned.name in nodes else None
        if target is not None:
            targets[planned.name] = target
    missing_address = [node.name for node in plan.nodes if node.name not in targets]
    if missing_address:
        raise NotReadyError(f"node(s) without an address: {', '.join(missing_address)}")
    wanted = {node.name for node in plan.nodes}
    last: list[tuple[set[str], str]] = [(set(), "")]

    def poll() -> set[str]:
        found, problem = ready_nodes(plan, remote, targets)
        last[0] = (found, problem)
        return found

    try:
        return wait_until(
            poll,
            lambda found: wanted <= found,
            timeout_s=runtime.timeouts.ready_s,
            interval_s=runtime.timeouts.interval_s,
            max_interval_s=runtime.timeouts.max_interval_s,
            what="the control plane",
            clock=runtime.clock,
            sleep=runtime.sleep,
        )
    except WaitTimeout:
        found, problem = last[0]
        missing = ", ".join(sorted(wanted - found))
        raise NotReadyError(
            f"{plan.cluster_id}: not ready after {runtime.timeouts.ready_s:g} s: {missing}"
            + (f" ({problem})" if problem else "")
        ) from None


__all__ = ["KUBECTL_NODES", "SINFO", "NotReadyError", "k8s_ready", "ready_nodes", "slurm_ready", "wait_ready"]
