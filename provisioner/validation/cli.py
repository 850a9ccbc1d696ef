"""The ``provisioner node check`` and ``provisioner validate`` commands.

Registered by provisioner/cli.py. Both exit 0 healthy, 10 degraded, 11 failed; a usage
mistake exits 2 with one line, like every other command.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner import cliargs
from provisioner.errors import UsageError
from provisioner.termtext import say

if TYPE_CHECKING:
    from provisioner.validation.runner import CommandResult, Runner

FABRICS = ("infiniband", "roce", "efa", "ethernet")


def _write(text: str, output: Path | None) -> None:
    if output is None:
        say(text, end="")  # what nodes report never drives the terminal
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:  # the folder was checked as the command line was read (cliargs.output_file)
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}", option="--output") from None
    say(f"wrote {output}", err=True)


def _plan_expectations(source: str | Path, catalog: Path | None) -> tuple[list[str], int, str, str | None, str, str]:
    """(node names, GPUs per node, GPU model, fabric or None, via, cluster id) from a plan or spec file,
    or from the local record of the cluster ``source`` names (as ``watch``, ``ssh`` and ``down`` take)."""
    plan = _plan_of(str(source), catalog)
    option = plan.option
    names = [f"{plan.spec.name}-{i}" for i in range(option.nodes)]
    fabric = str(option.offer.fabric.value) if option.nodes > 1 else None
    if fabric == "ethernet":
        fabric = None
    via = {"slurm": "slurm", "kubernetes": "k8s"}.get(str(plan.spec.control_plane.value), "ssh")
    return names, option.gpus_per_node, option.gpu_model, fabric, via, plan.cluster_id


def _plan_of(source: str, catalog: Path | None) -> Any:
    """The plan of a plan (JSON) or spec (YAML) file, else of the cluster named ``source`` brought up
    from here. UsageError (exit 2) for a name with no record; a missing file keeps the spec's error."""
    from provisioner.workflow import plan_from_source

    path = Path(source)
    if path.suffix.lower() in (".json", ".yaml", ".yml") or path.is_file() or "/" in source:
        return plan_from_source(path, catalog_path=catalog)
    from provisioner.lifecycle import state

    record = state.load_record(cliargs.cluster_name(source, option="CLUSTER_OR_FILE", file_too=True))
    if record is None:
        raise UsageError(f"no record of cluster {source} here (see provisioner status)")
    return record.plan


def _scheduler_runner(names: list[str], via: str, cluster_id: str | None, source: str | None) -> Runner:
    """Where ``srun``/``scontrol`` (or ``kubectl``) reach the cluster's scheduler: here when this machine's
    lists every node (the head, or a login node of that cluster); else on the cluster's head over SSH
    with the cluster key, when this machine brought the cluster up (its local record, as ``provisioner
    ssh`` uses); else UsageError (exit 2) saying where to run it. The local scheduler of another
    cluster, or none, was asked to run the checks: every node came back unreachable (exit 11)."""
    from provisioner.validation.runner import run_subprocess

    known = _listed_nodes(via)
    missing = [name for name in names if name not in known]
    if not missing:
        return run_subprocess
    from provisioner.lifecycle import state

    record = state.load_record(cluster_id) if cluster_id else None
    if record is None:
        what = "Slurm" if via == "slurm" else "Kubernetes (kubectl)"
        why = (
            f"its {what} does not list {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"
            if known
            else f"no {what} answers here"
        )
        cluster = f"cluster {cluster_id}" if cluster_id else "their cluster"
        again = (
            f"provisioner validate {source}"
            if source
            else f"provisioner validate --nodes {','.join(names)} --via {via}"
        )
        raise UsageError(
            f"this machine is not the head of {cluster} ({why}) and has no record of it: run "
            f"'{again}' on the head, or here with --via ssh if this machine reaches the nodes"
        )
    return _on_head(record.cluster_id)


def _listed_nodes(via: str) -> set[str]:
    """The nodes this machine's scheduler lists (none when it has none or it does not answer)."""
    from provisioner.validation.actions import slurm_node_states
    from provisioner.validation.runner import run_subprocess

    if via == "slurm":
        return set(slurm_node_states(run_subprocess))
    result = run_subprocess(("kubectl", "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"), timeout_s=30)
    return set(result.stdout.split()) if result.ok else set()


def _on_head(cluster_id: str) -> Runner:
    """A Runner that runs each command on the cluster's head over SSH (the cluster key, pinned host keys)."""
    from provisioner.lifecycle import command_support
    from provisioner.lifecycle.realize import (
        cluster_nodes,
        cluster_secrets,
        default_remote,
        head_target,
        live,
        refuse_unanswerable,
    )
    from provisioner.realize.events import no_events

    command_support.require_lab(cluster_id, command_support.enter_lab(cluster_id))  # a dry run: its lab only
    runtime = command_support.runtime(no_events, interrupts=False)
    record, nodes = cluster_nodes(cluster_id, runtime, this_run=True)  # never another run's head
    head = head_target(record, nodes)
    # A fake provider's head (TEST-NET): one line at once, as up and watch say, not minutes of SSH waits.
    refuse_unanswerable(runtime, record.plan, [node for node in live(nodes) if node.name == head.node_name])
    remote = runtime.remote or default_remote(record.plan, cluster_secrets(cluster_id))
    say(
        f"note: this machine is not the head of {cluster_id}: running the checks there ({head.node_name}, "
        f"{head.host}) over SSH",
        err=True,
    )

    def run(args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        return remote.run(head, args, timeout_s=timeout_s)

    return run


def node_check(
    expect_gpus: int | None = None,
    expect_model: str | None = None,
    expect_fabric: str | None = None,
    expect_nvlink: bool | None = None,
    plan: Path | None = None,
    dcgm_level: int = 1,
    burnin: bool = True,
    sustained_s: float = 60.0,
    node: str | None = None,
    json_out: bool = False,
    output: Path | None = None,
    allow_unjudged: bool = False,
) -> int:
    """Check this node's GPUs, kernel log, NVLink, fabric and DCGM; burn it in. Exit 0/10/11."""
    from provisioner.validation.burnin import BurnInConfig
    from provisioner.validation.node import CheckOptions, check_node
    from provisioner.validation.runner import Host
    from provisioner.validation.table import render_node

    if plan is not None:
        _, per_node, model, fabric, _, _ = _plan_expectations(plan, None)
        expect_gpus = per_node if expect_gpus is None else expect_gpus
        expect_model = expect_model or model
        expect_fabric = expect_fabric or fabric
    options = CheckOptions(
        node=node,
        expect_gpus=expect_gpus,
        expect_model=expect_model,
        expect_fabric=expect_fabric,
        expect_nvlink=expect_nvlink,
        dcgm_level=dcgm_level or None,
        burnin=burnin,
        allow_unjudged=allow_unjudged,
        burnin_config=BurnInConfig(sustained_s=sustained_s),
    )
    report = check_node(Host.local(), options)
    _write(report.to_json() if json_out else render_node(report), output)
    return report.status.exit_code


def validate(
    source: str | None = None,
    nodes: str | None = None,
    via: str | None = None,
    drain: bool = True,
    force: bool = False,
    burnin: bool = True,
    sustained_s: float = 60.0,
    dcgm_level: int = 1,
    timeout_s: float = 300.0,
    catalog: Path | None = None,
    json_out: bool = False,
    output: Path | None = None,
    allow_unjudged: bool = False,
) -> int:
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
    model = fabric = cluster_id = None
    if source is not None:
        names, per_node, model, fabric, plan_via, cluster_id = _plan_expectations(source, catalog)
        via = via or plan_via
    if nodes is not None:
        names = [name.strip() for name in nodes.split(",") if name.strip()]
    if not names:
        raise UsageError("give a cluster, its plan or spec, or --nodes a,b,c", option="CLUSTER_OR_FILE")
    if via is None:
        raise UsageError(f"must be one of {', '.join(VIAS)} when there is no plan", option="--via")
    if via not in VIAS:
        raise UsageError(f"must be one of {', '.join(VIAS)}", option="--via")
    extra = ["--dcgm-level", str(dcgm_level), "--sustained-s", f"{sustained_s:g}"]
    if not burnin:
        extra.append("--no-burnin")
    if allow_unjudged:
        extra.append("--allow-unjudged")
    target = Target(
        nodes=tuple(names),
        via=via,
        expect_gpus=per_node,
        expect_model=model,
        expect_fabric=fabric,
        check_args=tuple(extra),
    )
    run = _scheduler_runner(names, via, cluster_id, source) if via in ("slurm", "k8s") else run_subprocess
    report = validate_cluster(target, run, timeout_s=timeout_s)
    if drain and via in ("slurm", "k8s"):
        if via == "slurm":
            states = slurm_node_states(run)
            out_of_service, drained = slurm_out_of_service(states), slurm_drained(states)
        else:
            out_of_service = drained = k8s_out_of_service(run)
        plan = plan_cluster_drains(report, out_of_service, already_drained=drained, force=force)
        report = with_actions(report, plan, apply_drains(plan, run, via))
    elif drain and via == "ssh" and report.status.rank > 0:
        report = report.model_copy(
            update={
                "messages": [
                    *report.messages,
                    "no scheduler to drain through over ssh; take the bad nodes out yourself",
                ]
            }
        )
    _write(
        report.to_json() if json_out else render_cluster(report.nodes, report.drained, report.refused, report.messages),
        output,
    )
    if json_out:
        for message in report.messages:
            say(f"note: {message}", err=True)
    return report.status.exit_code


def _burnin_options(cmd: Any, burnin_help: str) -> None:
    cliargs.flag(cmd, "--burnin", burnin_help, default=True)
    cmd.add_argument(
        "--sustained-s",
        type=cliargs.float_range(1, 3600),
        default=60.0,
        help="Sustained burn-in seconds (1-3600, default 60).",
    )
    cliargs.flag(
        cmd,
        "--allow-unjudged",
        "Accept a GPU model with no reference or datasheet figures (burnin.unjudged becomes info instead of degraded).",
        negatable=False,
    )


def _report_options(cmd: Any) -> None:
    cliargs.flag(cmd, "--json", "Print the report as JSON.", negatable=False, dest="json_out")
    cmd.add_argument(
        "--output",
        "-o",
        type=cliargs.output_file("--output", "report.json"),
        help="Write the report here (a file; its folder must exist).",
    )


def add_node_commands(group: cliargs.Commands) -> None:
    """Add ``node check`` (the commands that run on a cluster node) to the top-level command group."""
    from provisioner.validation.watch_cli import add_node_watch

    node = group.add("node", "Commands that run on a cluster node.")
    node_commands = cliargs.commands(node)
    cmd = cliargs.command(node_commands, "check", node_check)
    cmd.add_argument("--expect-gpus", type=cliargs.int_range(0), help="GPUs this node must have.")
    cmd.add_argument("--expect-model", help="GPU model every GPU must be, e.g. H100.")
    cmd.add_argument("--expect-fabric", choices=FABRICS, help="Fabric this node must have.")
    cliargs.flag(cmd, "--expect-nvlink", "Require NVLink (default: on multi-GPU SXM nodes).", default=None)
    cmd.add_argument("--plan", type=Path, help="Read the expectations from this plan (or spec) file.")
    cmd.add_argument(
        "--dcgm-level",
        type=cliargs.int_range(0, 4),
        default=1,
        help="dcgmi diag level when dcgmi exists (0: off; default 1).",
    )
    _burnin_options(cmd, "Run the GPU burn-in.")
    cmd.add_argument("--node", help="Name to report (default: the host name).")
    _report_options(cmd)
    add_node_watch(node_commands)


def add_validate(group: cliargs.Commands) -> None:
    """Add ``validate`` (check every node of a cluster and drain bad ones) to the top-level command group."""
    cmd = cliargs.command(group, "validate", validate)
    cmd.add_argument(
        "source",
        nargs="?",
        metavar="CLUSTER_OR_FILE",
        help="A cluster brought up from here, its plan (JSON) or spec (YAML).",
    )
    cmd.add_argument("--nodes", help="Comma-separated node names (default: from the plan).")
    cmd.add_argument("--via", help="slurm | k8s | ssh (default: the plan's control plane).")
    cliargs.flag(cmd, "--drain", "Drain (Slurm) or cordon and taint (k8s) bad nodes.", default=True)
    cliargs.flag(cmd, "--force", "Drain even the last node in service.")
    _burnin_options(cmd, "Run the GPU burn-in on each node.")
    cmd.add_argument("--dcgm-level", type=cliargs.int_range(0, 4), default=1, help="dcgmi diag level (0: off).")
    cmd.add_argument("--timeout-s", type=cliargs.float_range(1), default=300.0, help="Seconds to wait for each node.")
    cmd.add_argument("--catalog", type=Path, help="Catalog used when SOURCE is a spec.")
    _report_options(cmd)


__all__ = ["add_node_commands", "add_validate", "node_check", "validate"]
