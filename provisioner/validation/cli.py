"""The ``provisioner node check`` and ``provisioner validate`` commands.

Registered by provisioner/cli.py. Both exit 0 healthy, 10 degraded, 11 failed; a usage
mistake exits 2 with one line, like every other command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

node_app = typer.Typer(help="Commands that run on a cluster node.", no_args_is_help=True)

FABRICS = ("infiniband", "roce", "efa", "ethernet")


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    if not output.parent.is_dir():
        raise typer.BadParameter(f"folder {output.parent} does not exist", param_hint="--output")
    output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {output}", err=True)


def _plan_expectations(path: Path, catalog: Path | None) -> tuple[list[str], int, str, str | None, str]:
    """(node names, GPUs per node, GPU model, fabric or None, via) from a plan or spec file."""
    from provisioner.workflow import plan_from_source

    plan = plan_from_source(path, catalog_path=catalog)
    option = plan.option
    names = [f"{plan.spec.name}-{i}" for i in range(option.nodes)]
    fabric = str(option.offer.fabric.value) if option.nodes > 1 else None
    if fabric == "ethernet":
        fabric = None
    via = {"slurm": "slurm", "kubernetes": "k8s"}.get(str(plan.spec.control_plane.value), "ssh")
    return names, option.gpus_per_node, option.gpu_model, fabric, via


@node_app.command("check")
def node_check(
    expect_gpus: Annotated[int | None, typer.Option(min=0, help="GPUs this node must have.")] = None,
    expect_model: Annotated[str | None, typer.Option(help="GPU model every GPU must be, e.g. H100.")] = None,
    expect_fabric: Annotated[str | None, typer.Option(help="infiniband | roce | efa | ethernet")] = None,
    expect_nvlink: Annotated[bool | None, typer.Option(
        "--expect-nvlink/--no-expect-nvlink", help="Require NVLink (default: on multi-GPU SXM nodes).",
        show_default=False)] = None,
    plan: Annotated[Path | None, typer.Option(help="Read the expectations from this plan (or spec) file.")] = None,
    dcgm_level: Annotated[int, typer.Option(min=0, max=4, help="dcgmi diag level when dcgmi exists (0: off).")] = 1,
    burnin: Annotated[bool, typer.Option("--burnin/--no-burnin", help="Run the GPU burn-in.")] = True,
    sustained_s: Annotated[float, typer.Option(min=1, max=3600, help="Sustained burn-in seconds.")] = 60.0,
    node: Annotated[str | None, typer.Option(help="Name to report (default: the host name).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here.")] = None,
) -> None:
    """Check this node's GPUs, kernel log, NVLink, fabric and DCGM; burn it in. Exit 0/10/11."""
    from provisioner.validation.burnin import BurnInConfig
    from provisioner.validation.node import CheckOptions, check_node
    from provisioner.validation.runner import Host
    from provisioner.validation.table import render_node

    if expect_fabric is not None and expect_fabric not in FABRICS:
        raise typer.BadParameter(f"must be one of {', '.join(FABRICS)}", param_hint="--expect-fabric")
    if plan is not None:
        _, per_node, model, fabric, _ = _plan_expectations(plan, None)
        expect_gpus = per_node if expect_gpus is None else expect_gpus
        expect_model = expect_model or model
        expect_fabric = expect_fabric or fabric
    options = CheckOptions(node=node, expect_gpus=expect_gpus, expect_model=expect_model, expect_fabric=expect_fabric,
                           expect_nvlink=expect_nvlink, dcgm_level=dcgm_level or None, burnin=burnin,
                           burnin_config=BurnInConfig(sustained_s=sustained_s))
    report = check_node(Host.local(), options)
    _write(report.to_json() if json_out else render_node(report), output)
    raise typer.Exit(report.status.exit_code)


def validate(
    source: Annotated[Path | None, typer.Argument(help="The cluster's plan (JSON) or spec (YAML).",
                                                  show_default=False)] = None,
    nodes: Annotated[str | None, typer.Option(help="Comma-separated node names (default: from the plan).")] = None,
    via: Annotated[str | None, typer.Option(help="slurm | k8s | ssh (default: the plan's control plane).")] = None,
    drain: Annotated[bool, typer.Option("--drain/--no-drain",
                                        help="Drain (Slurm) or cordon and taint (k8s) bad nodes.")] = True,
    force: Annotated[bool, typer.Option(help="Drain even the last node in service.")] = False,
    burnin: Annotated[bool, typer.Option("--burnin/--no-burnin", help="Run the GPU burn-in on each node.")] = True,
    sustained_s: Annotated[float, typer.Option(min=1, max=3600, help="Sustained burn-in seconds.")] = 60.0,
    dcgm_level: Annotated[int, typer.Option(min=0, max=4, help="dcgmi diag level (0: off).")] = 1,
    timeout_s: Annotated[float, typer.Option(min=1, help="Seconds to wait for each node.")] = 300.0,
    catalog: Annotated[Path | None, typer.Option(help="Catalog used when SOURCE is a spec.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here.")] = None,
) -> None:
    """Run `node check` on every node (srun, kubectl exec or ssh), find stragglers, drain bad nodes."""
    from provisioner.validation.actions import (
        apply_drains,
        k8s_out_of_service,
        slurm_drained,
        slurm_node_states,
        slurm_out_of_service,
    )
    from provisioner.validation.cluster import VIAS, Target, plan_cluster_drains, validate_cluster, with_actions
    from provisioner.validation.runner import run_subprocess
    from provisioner.validation.table import render_cluster

    names: list[str] = []
    per_node: int | None = None
    model = fabric = None
    if source is not None:
        names, per_node, model, fabric, plan_via = _plan_expectations(source, catalog)
        via = via or plan_via
    if nodes is not None:
        names = [name.strip() for name in nodes.split(",") if name.strip()]
    if not names:
        raise typer.BadParameter("give a plan or spec, or --nodes a,b,c", param_hint="SOURCE")
    if via is None:
        raise typer.BadParameter(f"must be one of {', '.join(VIAS)} when there is no plan", param_hint="--via")
    if via not in VIAS:
        raise typer.BadParameter(f"must be one of {', '.join(VIAS)}", param_hint="--via")
    extra = ["--dcgm-level", str(dcgm_level), "--sustained-s", f"{sustained_s:g}"]
    if not burnin:
        extra.append("--no-burnin")
    target = Target(nodes=tuple(names), via=via, expect_gpus=per_node, expect_model=model, expect_fabric=fabric,
                    check_args=tuple(extra))
    report = validate_cluster(target, run_subprocess, timeout_s=timeout_s)
    if drain and via in ("slurm", "k8s"):
        if via == "slurm":
            states = slurm_node_states(run_subprocess)
            out_of_service, drained = slurm_out_of_service(states), slurm_drained(states)
        else:
            out_of_service = drained = k8s_out_of_service(run_subprocess)
        plan = plan_cluster_drains(report, out_of_service, already_drained=drained, force=force)
        report = with_actions(report, plan, apply_drains(plan, run_subprocess, via))
    elif drain and via == "ssh" and report.status.rank > 0:
        report = report.model_copy(update={"messages": [
            *report.messages, "no scheduler to drain through over ssh; take the bad nodes out yourself"]})
    _write(report.to_json() if json_out else render_cluster(report.nodes, report.drained, report.refused,
                                                            report.messages), output)
    if json_out:
        for message in report.messages:
            typer.echo(f"note: {message}", err=True)
    raise typer.Exit(report.status.exit_code)


__all__ = ["node_app", "validate"]
