"""``burst --recover anywhere``: the Mover (lifecycle/recover.py) wired to a burst's run.

The run's limits are the burst's: its expiry and ``--max-cost`` span every cluster it moves through
(the watchdog is told of each move: ``Watchdog.moved``; its metered total is the run's). The re-plan
is the spec's own (the plan the burst started from, with its SSH sources), over the bundled or given
catalog, unless the options carry a ``planner`` (``local_planner`` for ``burst --local``: the lab's fakes only).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.errors import UsageError
from provisioner.lifecycle import state
from provisioner.lifecycle.heal import Healer
from provisioner.lifecycle.heal_rules import HealOptions
from provisioner.lifecycle.realize import Runtime
from provisioner.lifecycle.recover import MoveOptions, Mover, RunSpan
from provisioner.lifecycle.watchdog import Watchdog
from provisioner.plan import Plan
from provisioner.realize.remote import Remote
from provisioner.spec import ClusterSpec

if TYPE_CHECKING:
    from provisioner.lifecycle.burst import BurstOptions

REPLAN_KEEP = 20


def catalog_planner(catalog: Path | None = None, keep: int = REPLAN_KEEP) -> Callable[[ClusterSpec], Sequence[Plan]]:
    """Ranked plans for a spec over ``catalog`` (None: the bundled one), as ``plan`` ranks them."""
    from provisioner.workflow import choose_catalog, resolve

    def plans(spec: ClusterSpec) -> Sequence[Plan]:
        result = resolve(spec, choose_catalog(catalog), Path(f"{spec.name}.plan"), keep=keep)
        return [result.to_plan(option.rank) for option in result.options]

    return plans


def local_planner(
    lab_cluster: str, served: Sequence[str], catalog: Path | None = None
) -> Callable[[ClusterSpec], Sequence[Plan]]:
    """A move's planner for ``burst --local --recover anywhere``: the re-planned spec ranked as
    ``burst --local`` ranks (``lab.LOCAL_RANKED`` options of ``catalog``), kept to the providers the
    run's lab serves (``served``) and the purchases their fakes boot, each fitted to this machine
    (``lab.fit_to_host``). The new cluster is adopted into the lab started for ``lab_cluster``, so
    ``status``/``ssh``/``down`` of it find that lab. PlanError when no option is left."""
    from provisioner.errors import PlanError
    from provisioner.local import lab, labrecord

    ranked = catalog_planner(catalog, keep=lab.LOCAL_RANKED)
    fakes = {name: fake for name, fake in lab.backed_fakes().items() if name in served}

    def plans(spec: ClusterSpec) -> Sequence[Plan]:
        bootable = [
            plan
            for plan in ranked(spec)
            if plan.option.provider in fakes and plan.option.purchase in fakes[plan.option.provider].purchases
        ]
        if not bootable:
            raise PlanError(f"none of {spec.name}'s options boots behind the lab's {', '.join(sorted(fakes))} fakes")
        labrecord.adopt(spec.name, lab_cluster)
        return [lab.fit_to_host(plan) for plan in bootable]

    return plans


def require_remote_checkpoint(plan: Plan) -> None:
    """UsageError (one line) unless the plan's spec names ``checkpoint.remote``: a move restores the
    job's checkpoint from it."""
    if not plan.spec.checkpoint.remote:
        raise UsageError(
            "--recover anywhere restores the job's checkpoint from checkpoint.remote: set it in the spec "
            "(docs/healing.md); nothing was bought",
            option="--recover",
        )


def burst_mover(
    rt: Runtime,
    record: state.ClusterRecord,
    remote: Remote,
    watchdog: Watchdog,
    opts: BurstOptions,
    started: dt.datetime,
    expires_at: dt.datetime,
) -> Mover:
    """The burst's Mover; the watchdog follows the run onto each new cluster."""
    run = RunSpan(
        run_id=record.run_id or state.new_run_id(started),
        started_at=started,
        expires_at=expires_at,
        max_cost_usd=opts.max_cost_usd if opts.on_budget == "stop" else None,
        clusters=[record.cluster_id],
    )
    mover = Mover(
        rt,
        record.plan.spec,
        run,
        remote,
        opts.planner or catalog_planner(),
        MoveOptions(max_moves=opts.max_moves, max_tries=opts.max_tries),
        HealOptions(max_replacements=opts.max_replacements),
        local=opts.local,
    )

    def moved(healer: Healer) -> None:
        watchdog.moved(rt.now(), healer.plan.option.hourly_usd, Decimal(run.closed_cents) / 100)
        watchdog.metered = lambda now: mover.spent_cents(healer, now)

    mover.on_moved = moved
    return mover


__all__ = ["burst_mover", "catalog_planner", "local_planner", "require_remote_checkpoint"]
