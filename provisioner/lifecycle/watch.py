"""``provisioner watch CLUSTER``: the heal loop in the foreground (lifecycle/heal.py does the work).

Every ``poll_s`` it looks at the provider and the scheduler once (``Healer.step``), replaces what is
drained, gone, preempted or unreachable, and reports each look, each action with its cost and the
budget warnings (50/80/100 % of the cluster's ``--max-cost``, lifecycle/spend.py). ``--once``: one
look. Runs until Ctrl-C (exit 130) otherwise. ``burst`` runs the same ``Healer`` while its job runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.errors import UsageError
from provisioner.money import cents_text, usd_of_cents, usd_text

if TYPE_CHECKING:  # imported on use: registering the command costs nothing at start-up
    from provisioner.lifecycle.heal import Healer
    from provisioner.lifecycle.heal_rules import HealOptions
    from provisioner.lifecycle.realize import Runtime
    from provisioner.lifecycle.recover import Mover
    from provisioner.lifecycle.state import ClusterRecord
    from provisioner.plan import Plan
    from provisioner.realize.remote import Remote
    from provisioner.spec import ClusterSpec


def alternates_for(plan: Plan, catalog: Path | None, rt: Runtime) -> list[Plan]:
    """The next ranked options a replacement may fail over to (same provider and GPU layout), planned
    again from the plan's own spec; none when that cannot be planned now (said as a warning)."""
    from provisioner.errors import ProvisionerError
    from provisioner.lifecycle.heal import same_layout
    from provisioner.workflow import choose_catalog, resolve

    try:
        result = resolve(plan.spec, choose_catalog(catalog), Path(f"{plan.cluster_id}.plan"), keep=20)
        plans = [result.to_plan(option.rank) for option in result.options]
    except ProvisionerError as exc:
        rt.emit("warning", message=f"no failover options for replacements ({exc})", cluster=plan.cluster_id)
        return []
    return same_layout(plan, plans)[:2]


def run_watch(
    healer: Healer,
    *,
    poll_s: float,
    once: bool = False,
    stop: Callable[[], bool] = lambda: False,
    mover: Mover | None = None,
) -> int:
    """Look, replace, report; sleep ``poll_s`` (``healer.rt.sleep``); again until ``stop()`` or ``once``.
    With a ``mover`` (``--recover anywhere``) a cluster that cannot be healed in place is moved and the
    watch goes on with the new one (lifecycle/recover.py; raises MoveRefused when it cannot move).
    Returns 0 when the last look found every node in service, else 1."""
    from provisioner.metering import budget_level

    record = healer.record
    level = 0
    while True:
        if mover is not None:
            healer = mover.step(healer)
            replaced, record = mover.replaced, healer.record
        else:
            replaced = healer.step()
        now = healer.rt.now()
        spent = healer.spent_cents(now) + (mover.run.closed_cents if mover is not None else 0)
        bad = [name for name in healer.refused]
        healer.rt.emit(
            "look",
            message=f"{len(record.plan.nodes)} node(s); replaced {', '.join(replaced) or 'none'}; "
            f"{healer.replacements} replacement(s) so far; spent {cents_text(spent)}",
            cluster=record.cluster_id,
            replaced=replaced,
            replacements=healer.replacements,
            refused=sorted(bad),
            spent_usd=usd_of_cents(spent),
        )
        if record.max_cost_usd is not None:
            reached = budget_level(spent, record.max_cost_usd)
            if reached > level:
                level = reached
                healer.rt.emit(
                    "budget",
                    message=f"budget: {reached} % of {usd_text(record.max_cost_usd)} reached ({cents_text(spent)})",
                    cluster=record.cluster_id,
                    level_percent=reached,
                    spent_usd=usd_of_cents(spent),
                    max_cost_usd=record.max_cost_usd,
                )
        if once or stop():
            return 1 if bad else 0
        healer.rt.sleep(poll_s)


def watch(
    target: str,
    max_replacements: int = 3,
    unreachable_after: str = "5m",
    poll: str = "30s",
    once: bool = False,
    catalog: Path | None = None,
    json_out: bool = False,
    recover: str = "same",
    max_moves: int | None = None,
) -> int:
    """Watch a running cluster and replace its bad nodes: drained by their health watch, gone or preempted
    at the provider, or unreachable. Each replacement keeps the node's name, offer and expiry; on a
    capacity error the next ranked option of the same provider is tried. Every action is reported with
    its cost. Runs until Ctrl-C (--once: one look; exit 1 when a node could not be replaced)."""
    from provisioner.lifecycle import command_support, state
    from provisioner.lifecycle.command_support import cluster_id_of, emitter, enter_lab, require_lab
    from provisioner.lifecycle.heal import Healer, HealOptions
    from provisioner.lifecycle.realize import cluster_secrets, default_remote, live, refuse_unanswerable
    from provisioner.lifecycle.runs import healed_by_run
    from provisioner.lifecycle.spend import usages_of
    from provisioner.realize.store_credentials import require_store_credentials

    unreachable_s, poll_s = _duration(unreachable_after, "--unreachable-after"), _duration(poll, "--poll")
    emit = emitter(json_out)
    runtime = command_support.runtime(emit)
    try:
        cluster_id = cluster_id_of(target, catalog)
        require_lab(cluster_id, enter_lab(cluster_id))  # a dry run is watched through its lab only
        record = state.load_record(cluster_id)
        if record is None:
            raise UsageError(f"no record of cluster {cluster_id} here (see provisioner status)")  # exit 2, as status
        if record.engine != "direct":
            raise UsageError(
                f"cluster {record.cluster_id} was brought up with --engine {record.engine}: its "
                "stack owns its nodes, so watch would fight it; replace nodes there (pulumi up)"
            )
        require_store_credentials(record.plan.spec.checkpoint, runtime.environ)  # a replacement gets them over SSH
        # The spans the provider reports (as status and costs meter them), not the record's creation
        # time for every node, which made watch's "spent" larger than status's "cost so far".
        adapter = runtime.provider(record.provider)
        nodes = healed_by_run(record, adapter.get_nodes(record.cluster_id))  # never another run's of the name
        refuse_unanswerable(runtime, record.plan, live(nodes))  # a fake's nodes: say so, not wait on SSH
        usages = usages_of(adapter, record, nodes)
        remote = runtime.remote or default_remote(record.plan, cluster_secrets(record.cluster_id))
        healer = Healer(
            runtime,
            record,
            remote,
            alternates_for(record.plan, catalog, runtime),
            HealOptions(max_replacements=max_replacements, unreachable_s=unreachable_s),
            usages=usages,
        )
        emit(
            "watch",
            message=f"watching {record.cluster_id} on {record.provider} ({len(record.plan.nodes)} node(s), "
            f"{usd_text(record.plan.option.hourly_usd)}/h, at most {max_replacements} replacement(s))",
            cluster=record.cluster_id,
            hourly_usd=record.plan.option.hourly_usd,
            max_replacements=max_replacements,
        )
        mover = _mover(runtime, record, remote, catalog, max_moves, healer.options) if recover == "anywhere" else None
        return run_watch(healer, poll_s=poll_s, once=once, mover=mover)
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()


def _mover(
    rt: Runtime,
    record: ClusterRecord,
    remote: Remote,
    catalog: Path | None,
    max_moves: int | None,
    options: HealOptions,
) -> Mover:
    """``--recover anywhere``: the Mover for a watched cluster (the run's limits from its record)."""
    from provisioner.lifecycle.burst_recover import catalog_planner
    from provisioner.lifecycle.recover import MoveOptions, Mover, RunSpan

    if not record.plan.spec.checkpoint.remote:
        raise UsageError(
            f"cluster {record.cluster_id} has no checkpoint.remote to restore from after a move", option="--recover"
        )
    run = RunSpan(record.run_id or "", record.created_at, record.expires_at, record.max_cost_usd, [record.cluster_id])
    return Mover(
        rt,
        record.plan.spec,
        run,
        remote,
        _local_planner(record, catalog) if record.local else catalog_planner(catalog),
        MoveOptions(max_moves=max_moves),
        options,
        local=record.local,
    )


def _local_planner(record: ClusterRecord, catalog: Path | None) -> Callable[[ClusterSpec], Sequence[Plan]]:
    """A local cluster moves within its lab: the options of the fakes that lab serves, fitted to this
    machine (as ``burst --local --recover anywhere`` plans them). UsageError when its lab is not running."""
    from provisioner.lifecycle.burst_recover import local_planner
    from provisioner.local import labrecord

    running = labrecord.lab_for(record.cluster_id)
    if running is None:
        raise UsageError(
            f"cluster {record.cluster_id} is a local dry run whose lab is not running: nothing to move it to",
            option="--recover",
        )
    return local_planner(str(running["cluster"]), sorted(labrecord.fakes_of(running)), catalog)


def _duration(text: str, option: str) -> float:
    from provisioner.lifecycle.command_support import parse_duration

    try:
        return parse_duration(text)
    except UsageError:
        raise UsageError(f"{text!r} is not a duration like 30s, 5m or 1h", option=option) from None


def add_watch(group: object, common: Callable[..., None]) -> None:
    from provisioner import cliargs

    cmd = cliargs.command(group, "watch", watch)  # type: ignore[arg-type]
    cmd.add_argument("target", metavar="CLUSTER_OR_FILE", help="Cluster id, spec or plan.")
    cmd.add_argument(
        "--max-replacements",
        type=cliargs.int_range(0, 100),
        default=3,
        help="Replacements at most (default 3); a node past the limit is reported, not replaced.",
    )
    cmd.add_argument(
        "--unreachable-after",
        default="5m",
        help="Replace a node the scheduler reports not responding this long (default 5m).",
    )
    cmd.add_argument("--poll", default="30s", help="Time between looks (default 30s).")
    cliargs.flag(cmd, "--once", "One look (and its replacements), then exit.", negatable=False)
    cliargs.recover_options(
        cmd,
        "anywhere: when a lost node cannot be bought again or the head is lost, move the cluster to the "
        "next-best option anywhere and restore its checkpoint.remote there (docs/healing.md).",
    )
    common(cmd)


__all__: Sequence[str] = ["add_watch", "alternates_for", "run_watch", "watch"]
