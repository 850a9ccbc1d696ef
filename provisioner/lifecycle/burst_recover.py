"""``burst --recover anywhere``: the Mover (lifecycle/recover.py) wired to a burst's run.

The run's limits are the burst's: its expiry and ``--max-cost`` span every cluster it moves through
(the watchdog is told of each move: ``Watchdog.moved``; its metered total is the run's). The re-plan
is the spec's own (the plan the burst started from, with its SSH sources), over the bundled or given
catalog, unless the options carry a ``planner``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

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


def catalog_planner(catalog: Path | None = None) -> Callable[[ClusterSpec], Sequence[Plan]]:
    """Ranked plans for a spec over ``catalog`` (None: the bundled one), as ``plan`` ranks them."""
    from provisioner.workflow import choose_catalog, resolve

    def plans(spec: ClusterSpec) -> Sequence[Plan]:
        result = resolve(spec, choose_catalog(catalog), Path(f"{spec.name}.plan"), keep=REPLAN_KEEP)
        return [result.to_plan(option.rank) for option in result.options]

    return plans


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


__all__ = ["burst_mover", "catalog_planner"]
