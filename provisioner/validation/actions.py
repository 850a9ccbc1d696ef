"""Take bad nodes out of service: a Slurm drain with a reason, or a Kubernetes cordon plus taint.

``plan_drains`` is pure: which nodes to take out, and which it refuses to. It never takes out
the last node still in service: when every node that is up would go, the least bad one stays
(a degraded straggler before a failed node) and the refusal is reported, unless ``force``.
``apply_drains`` runs the commands through the runner and reports each outcome; it does not
raise for a refused command (the report says so, and the exit code already says failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.validation.runner import CommandResult, Runner

TAINT_KEY = "provisioner.io/node-check"


@dataclass(frozen=True)
class Candidate:
    """A node validation wants out of service, with why and how bad (2 degraded, 3 failed)."""

    node: str
    reason: str
    badness: int


@dataclass(frozen=True)
class DrainPlan:
    drain: tuple[Candidate, ...]
    refused: tuple[Candidate, ...]

    def refusal_message(self) -> str | None:
        if not self.refused:
            return None
        names = ", ".join(c.node for c in self.refused)
        return f"refused to drain {names}: it is the last node in service; drain it yourself or pass --force"


def plan_drains(
    candidates: Sequence[Candidate],
    all_nodes: Sequence[str],
    out_of_service: Sequence[str] = (),
    *,
    already_drained: Sequence[str] = (),
    force: bool = False,
) -> DrainPlan:
    """Which candidates to drain.

    ``out_of_service``: nodes the scheduler will not use now (drained, down, not responding);
    they do not count as the nodes left in service. ``already_drained`` are not drained again.
    A down node that validation flags is still drained, so it stays out when it comes back.
    """
    unavailable = set(out_of_service) | set(already_drained)
    wanted = [c for c in candidates if c.node not in set(already_drained)]
    remaining = [n for n in all_nodes if n not in unavailable and n not in {c.node for c in wanted}]
    if remaining or force or not wanted:
        return DrainPlan(tuple(wanted), ())
    in_service = [c for c in wanted if c.node not in unavailable]
    if not in_service:  # nothing that serves now would be taken out
        return DrainPlan(tuple(wanted), ())
    keep = min(in_service, key=lambda c: (c.badness, c.node))
    return DrainPlan(tuple(c for c in wanted if c is not keep), (keep,))


def slurm_drain_commands(node: str, reason: str) -> list[tuple[str, ...]]:
    return [("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")]


def k8s_cordon_commands(node: str, reason: str) -> list[tuple[str, ...]]:
    # Taint values must be label-like (no spaces), so the full reason goes in an annotation.
    return [
        ("kubectl", "cordon", node),
        ("kubectl", "taint", "nodes", node, f"{TAINT_KEY}=failed:NoSchedule", "--overwrite"),
        ("kubectl", "annotate", "node", node, f"{TAINT_KEY}-reason={reason}", "--overwrite"),
    ]


def slurm_node_states(run: Runner) -> dict[str, str]:
    """Node name -> Slurm state (``IDLE``, ``IDLE+DRAIN``, ``DOWN*``...) from ``scontrol show node -o``."""
    result = run(("scontrol", "show", "node", "-o"), timeout_s=30)
    states = {}
    for line in result.stdout.splitlines() if result.ok else []:
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("NodeName"):
            states[fields["NodeName"]] = fields.get("State", "").upper()
    return states


def slurm_drained(states: dict[str, str]) -> list[str]:
    return [node for node, state in states.items() if "DRAIN" in state]


def slurm_out_of_service(states: dict[str, str]) -> list[str]:
    """Nodes Slurm will not schedule on: drained, draining, down, failed or not responding (``*``)."""
    words = ("DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "*")
    return [node for node, state in states.items() if any(word in state for word in words)]


def k8s_out_of_service(run: Runner) -> list[str]:
    """Nodes marked unschedulable (cordoned)."""
    result = run(
        (
            "kubectl",
            "get",
            "nodes",
            "-o",
            'jsonpath={range .items[?(@.spec.unschedulable==true)]}{.metadata.name}{"\\n"}{end}',
        ),
        timeout_s=30,
    )
    return [line.strip() for line in result.stdout.splitlines() if line.strip()] if result.ok else []


@dataclass(frozen=True)
class ActionOutcome:
    node: str
    command: tuple[str, ...]
    result: CommandResult


def apply_drains(plan: DrainPlan, run: Runner, via: str) -> list[ActionOutcome]:
    """Run the drain (``via="slurm"``) or cordon+taint (``via="k8s"``) commands for ``plan.drain``."""
    build = slurm_drain_commands if via == "slurm" else k8s_cordon_commands
    outcomes = []
    for candidate in plan.drain:
        for command in build(candidate.node, f"provisioner validate: {candidate.reason}"[:200]):
            outcomes.append(ActionOutcome(candidate.node, command, run(command, timeout_s=30)))
    return outcomes


__all__ = [
    "TAINT_KEY",
    "ActionOutcome",
    "Candidate",
    "DrainPlan",
    "apply_drains",
    "k8s_cordon_commands",
    "k8s_out_of_service",
    "plan_drains",
    "slurm_drain_commands",
    "slurm_drained",
    "slurm_node_states",
    "slurm_out_of_service",
]
