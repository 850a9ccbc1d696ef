"""``provisioner node watch``: the command the bootstrap's health unit runs (validation/watch.py)."""

from __future__ import annotations

import socket
from pathlib import Path

from provisioner import cliargs
from provisioner.errors import UsageError

VIAS = ("slurm", "k8s", "none")


def _spot_choices() -> tuple[str, ...]:
    """The providers whose reclaim notice a node can poll (their ``FACTS.metadata``), then none."""
    from provisioner.providers.registry import facts

    return (*(name for name, found in facts().items() if found.metadata), "none")


def node_watch(
    via: str = "slurm",
    interval_s: float = 30.0,
    spot: str = "none",
    spot_poll_s: float = 5.0,
    metadata_url: str | None = None,
    expect_gpus: int | None = None,
    expect_model: str | None = None,
    node: str | None = None,
    report_dir: Path = Path("/var/lib/provisioner/health"),
    once: bool = False,
) -> int:
    """Watch this node's health every INTERVAL seconds (node check --no-burnin's checks, without DCGM).

    On a failed finding, drain (Slurm) or cordon and taint (k8s) this node with the finding's code,
    unless it is the last node in service (then say so, loudly). On a spot reclaim notice (AWS, GCP),
    tell the jobs here to checkpoint now (SIGUSR1 to Slurm job steps, and /run/provisioner/checkpoint-now)
    and drain. Each look writes REPORT_DIR/NODE.json. With --once: one look, exit 0/10/11 as node check.
    """
    from provisioner.validation.runner import Host
    from provisioner.validation.watch import WatchConfig, run_watch

    if via not in VIAS:
        raise UsageError(f"must be one of {', '.join(VIAS)}", option="--via")
    if spot not in (choices := _spot_choices()):
        raise UsageError(f"must be one of {', '.join(choices)}", option="--spot")
    config = WatchConfig(
        node=node or socket.gethostname().split(".")[0],
        via=via,
        expect_gpus=expect_gpus,
        expect_model=expect_model,
        spot=None if spot == "none" else spot,
        metadata_url=metadata_url,
        report_dir=report_dir,
        interval_s=interval_s,
        spot_poll_s=spot_poll_s,
    )
    return run_watch(Host.local(), config, once=once)


def add_node_watch(node_commands: cliargs.Commands) -> None:
    cmd = cliargs.command(node_commands, "watch", node_watch)
    cmd.add_argument("--via", default="slurm", help="slurm | k8s | none: how to take this node out of service.")
    cmd.add_argument(
        "--interval-s",
        type=cliargs.float_range(1, 3600),
        default=30.0,
        help="Seconds between health looks (default 30).",
    )
    cmd.add_argument(
        "--spot", default="none", help=f"{' | '.join(_spot_choices())}: poll this provider's reclaim notice."
    )
    cmd.add_argument(
        "--spot-poll-s",
        type=cliargs.float_range(1, 60),
        default=5.0,
        help="Seconds between reclaim-notice polls (default 5).",
    )
    cmd.add_argument("--metadata-url", help="Base URL of the instance metadata service (default: the provider's).")
    cmd.add_argument("--expect-gpus", type=cliargs.int_range(0), help="GPUs this node must have.")
    cmd.add_argument("--expect-model", help="GPU model every GPU must be, e.g. H100.")
    cmd.add_argument("--node", help="This node's name in the scheduler (default: the host name).")
    cmd.add_argument(
        "--report-dir",
        type=cliargs.output_dir("--report-dir"),
        default=Path("/var/lib/provisioner/health"),
        help="Where each look's report (NODE.json) and the watch state go.",
    )
    cliargs.flag(cmd, "--once", "One look, then exit with its status.", negatable=False)


__all__ = ["add_node_watch", "node_watch"]
