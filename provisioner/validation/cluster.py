"""``provisioner validate``: run the node check everywhere, compare nodes, act on the bad ones.

The check runs on each node through Slurm (``srun -w NODE``), Kubernetes (``kubectl exec``
into the node-check pod on that node) or SSH, all through one runner, concurrently. Each
node answers with its JSON report (whatever its exit code); a node that answers nothing
parseable is failed as ``node.unreachable``. Nodes are then compared with each other
(straggler.py) on the slowest GPU's figures, since the slowest GPU sets a synchronous
step's time, and stragglers become ``degraded``.

``require_healthy`` is the gate ``burst`` calls before starting a job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from provisioner.errors import ProvisionerError, ValidationFailedError
from provisioner.validation.actions import ActionOutcome, Candidate, DrainPlan, plan_drains
from provisioner.validation.model import Action, Finding, NodeReport, Severity, Status
from provisioner.validation.runner import CommandResult, Runner
from provisioner.validation.straggler import find_stragglers

VIAS = ("slurm", "k8s", "ssh")
K8S_SELECTOR = "app.kubernetes.io/name=provisioner-node-check"
NODE_METRICS = {  # metric -> (label, unit)
    "matmul_burst_tflops": ("slowest GPU bf16 matmul burst", "TFLOP/s"),
    "matmul_sustained_tflops": ("slowest GPU bf16 matmul sustained", "TFLOP/s"),
    "hbm_copy_tbps": ("slowest GPU HBM copy", "TB/s"),
    "nccl_busbw_gbps": ("NCCL all-reduce bus bandwidth", "GB/s"),
}


@dataclass(frozen=True)
class Target:
    """Where and how to run the check, and what every node should have."""

    nodes: tuple[str, ...]
    via: str
    expect_gpus: int | None = None
    expect_model: str | None = None
    expect_fabric: str | None = None
    check_args: tuple[str, ...] = field(default_factory=tuple)
    command: tuple[str, ...] = ("provisioner", "node", "check")


class ClusterReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "provisioner.cluster-report"
    nodes: list[NodeReport]
    drained: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)
    messages: list[str] = Field(default_factory=list)

    @property
    def status(self) -> Status:
        return max((node.status for node in self.nodes), key=lambda s: s.rank, default=Status.FAILED)

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["status"] = self.status.value
        for node, dumped in zip(self.nodes, data["nodes"], strict=True):
            dumped["status"] = node.status.value
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def node_check_argv(target: Target) -> tuple[str, ...]:
    argv = [*target.command, "--json"]
    if target.expect_gpus is not None:
        argv += ["--expect-gpus", str(target.expect_gpus)]
    if target.expect_model:
        argv += ["--expect-model", target.expect_model]
    if target.expect_fabric:
        argv += ["--expect-fabric", target.expect_fabric]
    return (*argv, *target.check_args)


def remote_argv(node: str, target: Target, run: Runner) -> tuple[str, ...] | CommandResult:
    """The argv that runs the check on ``node``, or why there is none (no node-check pod)."""
    check = node_check_argv(target)
    if target.via == "slurm":
        gres = [f"--gres=gpu:{target.expect_gpus}"] if target.expect_gpus else []
        # --immediate: a node that is down or busy answers within a minute instead of queueing.
        return (
            "srun",
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={node}",
            "--exclusive",
            "--job-name=node-check",
            "--immediate=60",
            *gres,
            *check,
        )
    if target.via == "k8s":
        found = run(
            (
                "kubectl",
                "get",
                "pods",
                "--all-namespaces",
                "-l",
                K8S_SELECTOR,
                "--field-selector",
                f"spec.nodeName={node}",
                "-o",
                "jsonpath={.items[0].metadata.namespace} {.items[0].metadata.name}",
            ),
            timeout_s=30,
        )
        parts = found.stdout.split()
        if not found.ok or len(parts) != 2:
            return CommandResult(
                found.returncode or 1, "", f"no pod labelled {K8S_SELECTOR} on {node}: {found.brief()}"
            )
        return ("kubectl", "exec", "-n", parts[0], parts[1], "--", *check)
    if target.via == "ssh":
        return ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", node, *check)
    raise ProvisionerError(f"unknown --via {target.via!r}; one of {', '.join(VIAS)}")


def check_remote(node: str, target: Target, run: Runner, timeout_s: float = 300) -> NodeReport:
    """One node's report; failed as ``node.unreachable`` when it gave no parseable report."""
    argv = remote_argv(node, target, run)
    result = argv if isinstance(argv, CommandResult) else run(argv, timeout_s=timeout_s)
    return report_of(node, result, f" via {target.via}")


def report_of(node: str, result: CommandResult, via: str = "") -> NodeReport:
    """The node check's report in ``result``, named ``node``; failed as ``node.unreachable`` (drain)
    when it holds no parseable report."""
    try:
        report = NodeReport.from_json(result.stdout)
    except ValueError:
        return NodeReport(
            node=node,
            findings=[
                Finding(
                    code="node.unreachable",
                    severity=Severity.FAILED,
                    action=Action.DRAIN,
                    message=f"no report from {node}{via} (exit {result.returncode}: {result.brief()})",
                )
            ],
        )
    return report.model_copy(update={"node": node})


def node_figures(report: NodeReport) -> dict[str, float]:
    """The node's comparable figures: the slowest GPU's for per-GPU metrics."""
    figures: dict[str, float] = {}
    if report.burnin is None or report.burnin.skipped:
        return figures
    for metric in ("matmul_burst_tflops", "matmul_sustained_tflops", "hbm_copy_tbps"):
        values = [getattr(g, metric) for g in report.burnin.gpus if getattr(g, metric) is not None]
        if values:
            figures[metric] = min(values)
    if report.burnin.nccl_busbw_gbps is not None:
        figures["nccl_busbw_gbps"] = report.burnin.nccl_busbw_gbps
    return figures


def mark_stragglers(reports: Sequence[NodeReport]) -> list[NodeReport]:
    """Each node that is a robust low outlier on a metric gains a degraded ``straggler.node.*`` finding.

    Nodes of one GPU model are compared with each other only.
    """
    extra: dict[str, list[Finding]] = {r.node: [] for r in reports}
    figures = {r.node: node_figures(r) for r in reports}
    models = {r.gpu_model for r in reports}
    for model in models:
        peers = [r.node for r in reports if r.gpu_model == model]
        for metric, (label, unit) in NODE_METRICS.items():
            values = {node: figures[node][metric] for node in peers if metric in figures[node]}
            for straggler in find_stragglers(values):
                extra[straggler.name].append(
                    Finding(
                        code=f"straggler.node.{metric.rsplit('_', 1)[0]}",
                        severity=Severity.DEGRADED,
                        action=Action.DRAIN,
                        value=round(straggler.value, 3),
                        threshold=round(straggler.median, 3),
                        message=straggler.describe(label, unit) + " (other nodes)",
                    )
                )
    return [r.with_findings(extra[r.node]) if extra[r.node] else r for r in reports]


def drain_candidates(reports: Sequence[NodeReport]) -> list[Candidate]:
    candidates = []
    for report in reports:
        problems = report.problems()
        if problems:
            reason = "; ".join(f.code for f in problems[:4])
            candidates.append(Candidate(report.node, f"{report.status.value}: {reason}", int(problems[0].severity)))
    return candidates


def validate_cluster(target: Target, run: Runner, *, timeout_s: float = 300, max_parallel: int = 32) -> ClusterReport:
    """Check every node (concurrently), then mark stragglers. Blocks until every node answered."""
    if not target.nodes:
        raise ProvisionerError("no nodes to validate")
    if target.via not in VIAS:
        raise ProvisionerError(f"unknown --via {target.via!r}; one of {', '.join(VIAS)}")
    with ThreadPoolExecutor(max_workers=max(1, min(max_parallel, len(target.nodes)))) as pool:
        reports = list(pool.map(lambda node: check_remote(node, target, run, timeout_s), target.nodes))
    return ClusterReport(nodes=mark_stragglers(reports))


def with_actions(report: ClusterReport, plan: DrainPlan, outcomes: Sequence[ActionOutcome]) -> ClusterReport:
    failed = {o.node: o.result for o in outcomes if not o.result.ok}
    messages = [f"could not take {node} out of service: {result.brief()}" for node, result in failed.items()]
    refusal = plan.refusal_message()
    if refusal:
        messages.append(refusal)
    return report.model_copy(
        update={
            "drained": [c.node for c in plan.drain if c.node not in failed],
            "refused": [c.node for c in plan.refused],
            "messages": [*report.messages, *messages],
        }
    )


def plan_cluster_drains(
    report: ClusterReport, out_of_service: Sequence[str], *, already_drained: Sequence[str] = (), force: bool
) -> DrainPlan:
    return plan_drains(
        drain_candidates(report.nodes),
        [n.node for n in report.nodes],
        out_of_service,
        already_drained=already_drained,
        force=force,
    )


def require_healthy(report: ClusterReport | NodeReport, *, force: bool = False, allow_degraded: bool = True) -> None:
    """The gate before a job: raise ValidationFailedError when validation failed, unless ``force``.

    Degraded (stragglers, a slow link) passes unless ``allow_degraded`` is False.
    """
    if force:
        return
    nodes = report.nodes if isinstance(report, ClusterReport) else [report]
    bad = [n for n in nodes if n.status is Status.FAILED or (not allow_degraded and n.status is Status.DEGRADED)]
    if not bad:
        return
    described = ", ".join(f"{n.node} ({', '.join(sorted(n.problem_codes())[:3])})" for n in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise ValidationFailedError(f"validation failed on {described}{more}; fix or drain them, or pass --force")


__all__ = [
    "VIAS",
    "ClusterReport",
    "Target",
    "check_remote",
    "drain_candidates",
    "mark_stragglers",
    "node_check_argv",
    "node_figures",
    "plan_cluster_drains",
    "remote_argv",
    "require_healthy",
    "validate_cluster",
    "with_actions",
]
