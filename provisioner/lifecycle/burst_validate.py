"""``burst``'s node validation before the job (a failed validation refuses it, exit 11): through the
control plane from the head, or with no control plane by ``node check`` on each node over SSH."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.lifecycle import state
from provisioner.lifecycle.realize import Runtime, head_target
from provisioner.providers.base import Node
from provisioner.realize.remote import CLUSTER_USER, Remote, ssh_target
from provisioner.validation.cluster import ClusterReport, Target
from provisioner.validation.runner import CommandResult

if TYPE_CHECKING:
    from provisioner.lifecycle.burst import BurstOptions


def validate(rt: Runtime, record: state.ClusterRecord, remote: Remote, nodes: list[Node], opts: BurstOptions) -> None:
    from provisioner.validation.cluster import require_healthy, validate_cluster

    plan = record.plan
    via = {"slurm": "slurm", "kubernetes": "k8s"}.get(plan.spec.control_plane.value)
    names = tuple(node.name for node in plan.nodes)
    target = Target(
        nodes=names,
        via=via or "ssh",
        expect_gpus=plan.option.gpus_per_node,
        expect_model=plan.option.gpu_model,
        check_args=opts.validation_args,
    )
    rt.emit("validate", message=f"validating {len(names)} node(s) via {target.via}", cluster=record.cluster_id)
    head = head_target(record, nodes)
    if via is not None:

        def run(args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
            return remote.run(head, args, timeout_s=timeout_s)

        report = validate_cluster(target, run)
    else:
        report = _validate_each(record, remote, nodes, target)
    rt.emit(
        "validated", message=f"validation: {report.status.value}", cluster=record.cluster_id, status=report.status.value
    )
    require_healthy(report)


def _validate_each(record: state.ClusterRecord, remote: Remote, nodes: list[Node], target: Target) -> ClusterReport:
    """No control plane: the node check runs on each node directly over SSH."""
    from provisioner.realize.bootstrap_ssh import SshTarget
    from provisioner.validation.cluster import mark_stragglers, node_check_argv, report_of

    by_name = {node.name: node for node in nodes}
    reports = []
    for name in target.nodes:
        node = by_name.get(name)
        ssh = ssh_target(node, CLUSTER_USER, name) if node else None
        result = remote.run(
            ssh or SshTarget(host="0.0.0.0", node_name=name, user=CLUSTER_USER), node_check_argv(target), timeout_s=600
        )
        reports.append(report_of(name, result))
    return ClusterReport(nodes=mark_stragglers(reports))


__all__ = ["validate"]
