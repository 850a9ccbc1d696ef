"""``provisioner up|down|status|outputs|ssh|burst``: the lifecycle commands (registered by provisioner/cli.py).

TARGET is a spec (YAML), a saved plan (JSON) or, for the commands that act on an existing
cluster, its id. ``--engine pulumi`` drives the ``stacks/`` program through the Automation API;
``--engine direct`` calls the adapters itself (``lifecycle.realize``). Without ``--engine``,
``up`` uses pulumi when the ``pulumi`` CLI is on PATH, else direct (``default_engine``), and says
which in its first progress line; ``down`` uses the engine the local record names (else pulumi
when a pulumi ``up`` kept its plan here, else direct). Progress goes to stderr through rich; ``--json`` prints one JSON
event per line on stdout instead. Errors are one line and the error tree's exit code
(5: a stack failure, naming what remains and the command that removes it); ``burst`` exits
with the job's status (124 when its TTL or cost cap stopped it, 130 on Ctrl-C).

The commands live in up_command (up), burst_command (burst), down_command (down) and look_commands (status,
outputs, ssh); what they share (option parsing, the engine choice, planning a target, the
runtime) is the public module command_support; this module only registers them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provisioner import cliargs
from provisioner.lifecycle.command_support import BACKEND_HELP, ENGINE_HELP, ON_BUDGET


def ssh_from(cmd: Any) -> None:
    cmd.add_argument(
        "--ssh-from",
        action="append",
        metavar="CIDR",
        help="Admit SSH from this address block for this bring-up (e.g. your address, 203.0.113.7/32; "
        "repeatable), instead of the spec's access.allowed_cidrs; without either, nothing outside the "
        "cluster may connect and up refuses.",
    )


def add_commands(group: cliargs.Commands) -> None:
    """Add up, down, status, outputs, ssh, burst and costs to the top-level command group."""

    def target_file(cmd: Any) -> None:
        cmd.add_argument("target", type=Path, metavar="SPEC_OR_PLAN", help="A spec (YAML) or a saved plan (JSON).")

    def cluster(cmd: Any, nargs: str | None = None) -> None:
        cmd.add_argument("target", nargs=nargs, metavar="CLUSTER_OR_FILE", help="Cluster id, spec or plan.")

    def common(cmd: Any, *, backend: bool = False, json_out: bool = True, document: bool = False) -> None:
        if backend:
            cmd.add_argument("--backend", help=BACKEND_HELP)
        cmd.add_argument("--catalog", type=Path, help="Catalog used when the target is a spec.")
        if json_out:  # status and outputs answer with one document; the others stream their events
            cliargs.flag(
                cmd,
                "--json",
                "Print the answer as one JSON document on stdout."
                if document
                else "One JSON event per line on stdout.",
                negatable=False,
                dest="json_out",
            )

    from provisioner.lifecycle.burst_command import burst
    from provisioner.lifecycle.down_command import down
    from provisioner.lifecycle.look_commands import outputs, ssh, status
    from provisioner.lifecycle.up_command import up

    cmd = cliargs.command(group, "up", up)
    target_file(cmd)
    cmd.add_argument("--engine", help=ENGINE_HELP + " Default: pulumi when its CLI is on PATH, else direct.")
    cliargs.flag(
        cmd,
        "--wait",
        "Return only when the control plane lists every node ready (default); "
        "--no-wait (pulumi engine): once pulumi up is done.",
        default=True,
    )
    common(cmd, backend=True)
    cmd.add_argument("--ttl", help="Expire after this long (30m, 4h, 2d); default: the spec's.")
    cmd.add_argument(
        "--max-tries",
        type=cliargs.int_range(1, 3),
        default=3,
        help="Options tried on capacity errors (either engine; 1-3, default 3).",
    )
    cmd.add_argument("--max-cost", help="Budget in USD: status warns at 50/80/100 %%.")
    cmd.add_argument(
        "--on-budget",
        choices=ON_BUDGET,
        default="warn",
        help="At 100 %% of --max-cost: stop (the budget becomes the expiry) or warn (default).",
    )
    cliargs.flag(
        cmd,
        "--local",
        "Dry run on this machine (root, Linux, systemd-nspawn): the plan's nodes boot "
        "as local containers behind the provider's fake (direct engine unless --engine pulumi); "
        "down removes them.",
        negatable=False,
    )
    ssh_from(cmd)

    cmd = cliargs.command(group, "down", down)
    cluster(cmd)
    cmd.add_argument(
        "--engine",
        help="pulumi | direct (default: how it was brought up, as the local record "
        "says; without one, pulumi if a pulumi up kept its plan here, else direct).",
    )
    cmd.add_argument(
        "--provider",
        type=cliargs.provider_name,
        help="Where the cluster lives when there is no local record (direct); with "
        "pulumi, the provider asked which paid reservations (Capacity Blocks) remain.",
    )
    cliargs.flag(
        cmd,
        "--force-unowned",
        "Also delete the cluster's nodes that carry no owner mark (direct; never another owner's).",
        negatable=False,
    )
    common(cmd, backend=True)

    cmd = cliargs.command(group, "status", status)
    cluster(cmd, "?")
    common(cmd, backend=True, document=True)

    cmd = cliargs.command(group, "outputs", outputs)
    cluster(cmd)
    common(cmd, backend=True, document=True)

    cmd = cliargs.command(group, "ssh", ssh)
    cluster(cmd)
    cmd.add_argument("command", nargs="*", metavar="COMMAND", help="Run this instead of a login shell (after --).")
    cmd.add_argument("--node", help="Node name (default: the head).")
    cliargs.flag(cmd, "--print", "Print the ssh command instead of running it.", negatable=False, dest="print_only")
    common(cmd, json_out=False)

    cmd = cliargs.command(group, "burst", burst)
    target_file(cmd)
    cmd.add_argument("command", nargs="*", metavar="COMMAND", help="The job, after --.")
    cmd.add_argument("--ttl", help="Tear down after this long (30m, 4h); default: the spec's.")
    cmd.add_argument("--max-cost", help="Tear down once hourly cost x elapsed reaches this USD.")
    cmd.add_argument(
        "--on-budget",
        choices=ON_BUDGET,
        default="stop",
        help="At 100 %% of --max-cost: stop (default: tear down) or warn (the job goes on).",
    )
    cmd.add_argument("--engine", default="direct", help="direct (a burst cluster lives as long as this command).")
    cliargs.flag(cmd, "--skip-validation", "Start the job even if node validation failed.")
    cmd.add_argument(
        "--max-tries",
        type=cliargs.int_range(1, 3),
        default=3,
        help="Options tried on capacity errors (1-3, default 3).",
    )
    cmd.add_argument("--image", default="ubuntu:24.04", help="Container image of the Kubernetes Job.")
    cmd.add_argument(
        "--max-replacements",
        type=cliargs.int_range(0, 100),
        default=3,
        help="Nodes replaced at most while the job runs (drained, preempted, lost; 0: none).",
    )
    cliargs.recover_options(
        cmd,
        "same: replace lost nodes in place only (default); anywhere: when that fails (no capacity, or "
        "the head is lost) move the run to the next-best option anywhere and resume it from "
        "checkpoint.remote (docs/healing.md).",
    )
    cliargs.flag(
        cmd,
        "--local",
        "Dry run on this machine (root, Linux, systemd-nspawn): the job runs on the plan's nodes "
        "booted as local containers behind the provider's fake (with --recover anywhere: behind every "
        "node-backed fake, so a move can be rehearsed); all of it is removed at the end.",
        negatable=False,
    )
    ssh_from(cmd)
    common(cmd)

    from provisioner.lifecycle.costs_report import add_command

    add_command(group)

    from provisioner.lifecycle.watch import add_watch

    add_watch(group, common)


__all__ = ["add_commands"]
