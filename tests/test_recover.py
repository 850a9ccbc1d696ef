"""Recovery anywhere (lifecycle/recover.py) on the fakes, with no node: a 2-node Slurm run on Lambda
(provider A) whose checkpoint is in S3 moves to RunPod (provider B) when a node cannot be bought again
at Lambda, or when its head is lost; a second failure during the move; the cost cap and the move limit.

Every case ends with one live cluster or none, nothing orphaned (the fakes' live instances are
counted), and an event for every action. Clocks are the fake runtime's; nothing sleeps.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle import costs_report, ledger, state
from provisioner.lifecycle.burst import BurstStopped
from provisioner.lifecycle.burst_recover import catalog_planner
from provisioner.lifecycle.heal import Healer, HealOptions, same_layout
from provisioner.lifecycle.realize import Runtime, bring_up
from provisioner.lifecycle.recover import MoveOptions, Mover, MoveRefused, RunSpan, moved_id
from provisioner.metering import compare, meter
from provisioner.plan import Plan
from provisioner.spec import ClusterSpec
from provisioner.testing.fakes.base import FakeApp
from tests.conftest import need_shared
from tests.test_heal import SchedulerRemote
from tests.test_lifecycle_support import instant_runtime, plans_for, served_fake

SPEC = """\
name: mv
gpus: {model: [H100], count: 16}
nodes: {count: 2}
control_plane: slurm
providers: {allow: [lambda, runpod]}
workload: {hours: 4, checkpoint_interval_minutes: 10, restart_overhead_minutes: 5}
lifetime: {ttl_hours: 6}
checkpoint: {remote: s3://ckpt-bucket/runs/mv, size_gb: 200}
access: {allowed_cidrs: [198.51.100.0/24]}
"""
SOLD = {("lambda", "us-west-3"), ("lambda", "us-south-2"), ("runpod", "US-KS-2")}
"""Where the fakes sell 8x H100 nodes."""
MOVE_EVENTS = ("move", "move-left", "move-failover", "move-refused", "move-failed", "restore", "moved")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")


def sold(plans: Sequence[Plan]) -> list[Plan]:
    return [p for p in plans if (p.option.provider, p.option.region) in SOLD]


@dataclass
class Run:
    lam: FakeApp
    rp: FakeApp
    rt: Runtime
    remote: SchedulerRemote
    healer: Healer
    mover: Mover
    events: list[dict[str, Any]]
    planned: list[ClusterSpec]

    def live(self) -> dict[str, int]:
        return {"lambda": self.lam.instance_count(), "runpod": self.rp.instance_count()}

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.events if e["event"] in MOVE_EVENTS]

    def lambda_ids(self) -> list[str]:
        return [
            iid
            for iid, body in self.lam.instances.items()  # type: ignore[attr-defined]
            if body["status"] in ("booting", "active")
        ]

    def on_sleep(self, hook: Callable[[int], None]) -> None:
        sleep, count = self.rt.sleep, [0]

        def hooked(seconds: float) -> None:
            count[0] += 1
            hook(count[0])
            sleep(seconds)

        self.rt.sleep = hooked


@pytest.fixture
def make_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Run]]:
    """The run up on Lambda's fake, RunPod's fake served beside it, and its Mover."""
    with contextlib.ExitStack() as stack:

        def make(max_cost_usd: Decimal | None = None, max_moves: int | None = None, spec: str = SPEC) -> Run:
            plans = sold(plans_for(spec, tmp_path, count=40))
            first = next(p for p in plans if p.option.provider == "lambda")
            remote = SchedulerRemote(nodes=[n.name for n in first.nodes], healthy=True)
            events: list[dict[str, Any]] = []
            lam, _ = stack.enter_context(served_fake("lambda", monkeypatch))
            rp, _ = stack.enter_context(served_fake("runpod", monkeypatch))
            rt = instant_runtime(remote, events)
            started = rt.now()
            record = bring_up(first, rt, expires_at=started + dt.timedelta(hours=6), max_cost_usd=max_cost_usd)
            events.clear()
            options = HealOptions(retry_s=1.0)
            healer = Healer(rt, record, remote, same_layout(first, plans), options)
            planned: list[ClusterSpec] = []

            def planner(spec: ClusterSpec) -> list[Plan]:
                planned.append(spec)
                again = sold(catalog_planner()(spec))
                remote.nodes = [n.name for n in again[0].nodes] if again else remote.nodes
                return again

            run = RunSpan(record.run_id or "", started, record.expires_at, max_cost_usd, [record.cluster_id])
            mover = Mover(rt, first.spec, run, remote, planner, MoveOptions(max_moves=max_moves), options)
            return Run(lam, rp, rt, remote, healer, mover, events, planned)

        yield make


def no_lambda_capacity(run: Run) -> None:
    for regions in run.lam.capacity.values():  # type: ignore[attr-defined]
        regions.clear()


def test_capacity_gone_at_a_after_a_reclaim_moves_the_run_to_b(make_run: Callable[..., Run]) -> None:
    run = make_run()
    assert run.live() == {"lambda": 2, "runpod": 0}
    run.rt.sleep(3600)  # an hour into the run
    no_lambda_capacity(run)
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    new = run.mover.step(run.healer)
    assert new is not run.healer and new.record.cluster_id == "mv-m1" == moved_id("mv", 1)
    assert run.live() == {"lambda": 0, "runpod": 2}  # one live cluster: the old one is gone whole
    assert run.kinds() == ["move", "move-left", "restore", "restore", "moved"]
    # Lambda was tried first at the same layout (failover), then the move re-planned the remaining 3 h.
    failed = next(e for e in run.events if e["event"] == "replace-failed")
    assert "capacity" in failed["error"].lower()
    spec = run.planned[0]
    assert spec.name == "mv-m1" and spec.workload.hours == 3.0
    assert spec.checkpoint.restore is not None and spec.checkpoint.restore.lost_minutes == 10  # 10/2 + 5
    assert spec.checkpoint.restore.from_provider == "lambda"
    move = next(e for e in run.events if e["event"] == "move")
    assert move["provider"] == "runpod" and move["run"] == run.mover.run.run_id
    assert "no capacity for mv-1 at lambda" in move["reason"]
    # RunPod's 2 x 8 H100 cluster at $47.84/h; the move term: 100 GB of AWS egress after 100 free GB
    # ($9.00) + 10 min of the new cluster's $47.84/h ($7.973333 -> $7.97) = $16.97.
    assert move["hourly_usd"] == Decimal("47.84") and move["move_usd"] == Decimal("16.97")
    # Both clusters are one run: the new record carries the old run id; the old record is gone.
    assert state.load_record("mv") is None
    assert new.record.run_id == run.mover.run.run_id and run.mover.run.clusters == ["mv", "mv-m1"]
    rows = {(row.cluster, row.run): row for row in ledger.rows(ledger.read())}  # what `costs` lists
    assert set(rows) == {("mv", run.mover.run.run_id), ("mv-m1", run.mover.run.run_id)}
    assert (rows["mv", run.mover.run.run_id].provider, rows["mv-m1", run.mover.run.run_id].provider) == (
        "lambda",
        "runpod",
    )
    # `costs` (by run, its default) sums the run's clusters on one line: both plans, the old and the re-plan.
    (line,) = costs_report.group(list(rows.values()), "run")
    assert (line["key"], line["cluster"], line["clusters"]) == (run.mover.run.run_id, "mv,mv-m1", 2)
    first_total = run.healer.plan.option.cost.total
    assert Decimal(line["planned_usd"]) == first_total + new.plan.option.cost.total
    assert new.plan.option.cost.move == Decimal("16.97")  # the re-plan's total includes the move it made
    # Planned vs actual of the new cluster names the move: planned, not measured.
    lines = {line.term: line for line in compare(new.plan, meter(new.plan, new.usages, run.rt.now())).lines}
    assert (lines["move"].planned_cents, lines["move"].actual_cents) == (1697, None)
    # No shared filesystem: each old node copied its own folder, which goes to the new node of its rank
    # (rclone copy from the store, never a sync that would delete).
    restores = {name: argv[-1] for name, argv in run.remote.calls if argv[:3] == ("sudo", "-n", "bash")}
    assert sorted(restores) == ["mv-m1-0", "mv-m1-1"]
    for new_node, old_node in (("mv-m1-0", "mv-0"), ("mv-m1-1", "mv-1")):
        assert "rclone copy " in restores[new_node] and f"ckpt:ckpt-bucket/runs/mv/{old_node} " in restores[new_node]
        assert "sync" not in restores[new_node]
    assert [e["source"] for e in run.events if e["event"] == "restore"] == [
        "s3://ckpt-bucket/runs/mv/mv-0",
        "s3://ckpt-bucket/runs/mv/mv-1",
    ]
    moved = run.events[-1]
    assert moved["event"] == "moved" and moved["from_cluster"] == "mv" and moved["spent_usd"] > 0


def test_a_lost_head_moves_the_run_even_with_capacity_left(make_run: Callable[..., Run]) -> None:
    run = make_run()
    head = next(
        iid
        for iid, body in run.lam.instances.items()  # type: ignore[attr-defined]
        if body["name"].endswith("mv-0")
    )
    run.lam.set_status(head, "preempted")  # type: ignore[attr-defined]
    new = run.mover.step(run.healer)
    assert run.kinds()[0] == "move" and "the head mv-0 is lost" in run.events[0]["reason"]
    assert not [e for e in run.events if e["event"] == "replace"]  # not replaced in place: its disk is gone
    assert sum(run.live().values()) == 2 and state.load_record("mv") is None
    assert new.record.cluster_id == "mv-m1" and state.load_record("mv-m1") is not None


def test_a_second_failure_during_the_move_tries_the_next_option_then_leaves_nothing(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    no_lambda_capacity(run)
    for gpu in run.rp.gpus:  # type: ignore[attr-defined]  # B has none either: every new option fails
        gpu["dataCenters"] = {dc: "NONE" for dc in gpu["dataCenters"]}
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    with pytest.raises(MoveRefused, match="no new option came up"):
        run.mover.step(run.healer)
    assert run.live() == {"lambda": 0, "runpod": 0}  # none live, nothing orphaned
    kinds = run.kinds()
    assert kinds[:2] == ["move", "move-left"] and kinds[-1] == "move-failed"
    assert kinds.count("move-failover") >= 1
    assert state.load_record("mv-m1") is None


def test_the_cost_cap_reached_mid_move_leaves_no_new_node(make_run: Callable[..., Run]) -> None:
    run = make_run()
    no_lambda_capacity(run)
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    run.rp.faults.inject("slow_boot", polls=5, times=None)  # type: ignore[attr-defined]
    booting = [0]

    def cap_while_b_boots(n: int) -> None:
        if run.rp.instance_count() and not booting[0]:  # type: ignore[attr-defined]
            booting[0] = n
            raise BurstStopped("burst stopped: cost cap $300.00 reached; the cluster was torn down")

    run.on_sleep(cap_while_b_boots)
    with pytest.raises(BurstStopped):
        run.mover.step(run.healer)
    assert booting[0] and run.live() == {"lambda": 0, "runpod": 0}
    assert run.kinds() == ["move", "move-left"]


def test_a_move_past_the_cost_cap_or_the_limit_is_refused_and_the_old_cluster_stays(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(max_cost_usd=Decimal("30"))
    run.rt.sleep(1200)  # 20 min of the plan's 2 x $31.92/h = $21.28; + the cheapest move ($16.97) passes $30
    no_lambda_capacity(run)
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    launched = run.rp.instance_count()
    with pytest.raises(MoveRefused, match="cost cap"):
        run.mover.step(run.healer)
    refused = next(e for e in run.events if e["event"] == "move-refused")
    assert "the cheapest move costs $16.97" in refused["message"]
    assert run.live() == {"lambda": 1, "runpod": launched}  # the old cluster (what is left of it) for the caller
    limited = make_run(max_moves=0)
    no_lambda_capacity(limited)
    limited.lam.set_status(limited.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    with pytest.raises(MoveRefused, match="limit of 0 move"):
        limited.mover.step(limited.healer)
    assert limited.kinds() == ["move-refused"]


def test_moves_stop_at_the_runs_ttl(make_run: Callable[..., Run]) -> None:
    run = make_run()
    run.rt.sleep(6 * 3600)
    run.lam.set_status(run.lambda_ids()[0], "preempted")  # type: ignore[attr-defined]  # the head
    with pytest.raises(MoveRefused, match="TTL"):
        run.mover.step(run.healer)
    assert run.kinds() == ["move-refused"] and run.live() == {"lambda": 1, "runpod": 0}


def test_watch_moves_a_cluster_it_cannot_heal_and_goes_on_with_the_new_one(make_run: Callable[..., Run]) -> None:
    from provisioner.lifecycle.watch import run_watch

    run = make_run()
    run.rt.sleep(600)
    no_lambda_capacity(run)
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    assert run_watch(run.healer, poll_s=30, once=True, mover=run.mover) == 0
    assert run.live() == {"lambda": 0, "runpod": 2}
    look = [e for e in run.events if e["event"] == "look"][-1]
    assert look["cluster"] == "mv-m1"  # the look after the move reports the new cluster
    # and the run's spend: the old cluster's 10 min at the plan's $63.84/h ($10.64) is in it
    left = next(e for e in run.events if e["event"] == "move-left")
    assert left["run_spent_usd"] == Decimal("10.64") and look["spent_usd"] >= Decimal("10.64")
