"""The controller that replaces (lifecycle/heal.py) on the Lambda fake, with no node: a 2-node Slurm
cluster is brought up, then a node is preempted, drained by its health watch or stops answering,
under provider faults (429, 5xx, a lost create answer, no capacity), a second fault during the
replacement, the replacement limit and the cost cap reached mid-replacement.

Every case pins the same invariants at the fake: exactly one live instance per node name (no
duplicate), nothing left of a replacement that did not finish (no orphan), and an event per action.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle.burst import BurstStopped
from provisioner.lifecycle.heal import Healer, HealOptions, same_layout
from provisioner.lifecycle.realize import Runtime, bring_up
from provisioner.lifecycle.watch import run_watch
from provisioner.metering import meter
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.testing.fakes.base import FakeApp
from provisioner.validation.runner import CommandResult
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

NAMES = ("lc-lambda-0", "lc-lambda-1")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")


@dataclass
class SchedulerRemote(StandInRemote):
    """The stand-in head, plus ``sinfo -N`` rows the test sets (name -> (state, reason))."""

    slurm: dict[str, tuple[str, str]] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)
    """Addresses ssh cannot reach (exit 255)."""

    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        if target.host in self.unreachable:
            self.calls.append((target.node_name, tuple(argv)))
            return CommandResult(255, "", f"ssh: connect to host {target.host} port 22: Connection timed out")
        if argv[0] == "squeue":  # job 7 runs on every node
            self.calls.append((target.node_name, tuple(argv)))
            return CommandResult(0, "7\n")
        if tuple(argv[:3]) == ("sinfo", "-h", "-N"):
            self.calls.append((target.node_name, tuple(argv)))
            rows = {name: self.slurm.get(name, ("idle", "none")) for name in self.nodes}
            return CommandResult(0, "".join(f"{n}|{s}|{r}\n" for n, (s, r) in rows.items()))
        return super().run(target, argv, timeout_s=timeout_s)


@dataclass
class Cluster:
    app: FakeApp
    rt: Runtime
    remote: SchedulerRemote
    healer: Healer
    events: list[dict[str, Any]]

    def live(self) -> list[tuple[str, str]]:
        """(node name, instance id) of every instance the fake bills now."""
        return sorted(
            (body["name"].removeprefix("lc-lambda-"), iid)  # named CLUSTER-NODE at Lambda
            for iid, body in self.app.instances.items()  # type: ignore[attr-defined]
            if body["status"] in ("booting", "active", "unhealthy")
        )

    def id_of(self, name: str) -> str:
        return next(iid for n, iid in self.live() if n == name)

    def kinds(self) -> list[str]:
        return [
            e["event"]
            for e in self.events
            if e["event"]
            in (
                "replace",
                "deleted",
                "create",
                "retry",
                "adopt",
                "failover",
                "replaced",
                "replace-lost",
                "replace-refused",
                "replace-failed",
            )
        ]

    def on_sleep(self, hook: Callable[[int], None]) -> None:
        """Run ``hook(n)`` on the n-th sleep from now on (the fake clock still advances)."""
        sleep, count = self.rt.sleep, [0]

        def hooked(seconds: float) -> None:
            count[0] += 1
            hook(count[0])
            sleep(seconds)

        self.rt.sleep = hooked


@pytest.fixture
def make_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Cluster]]:
    """A 2-node Slurm cluster up on the Lambda fake and its Healer (HealOptions from the keywords)."""
    with contextlib.ExitStack() as stack:

        def make(max_cost_usd: Decimal | None = None, spec: str = LAMBDA_SPEC, **options: Any) -> Cluster:
            plans = plans_for(spec, tmp_path)
            remote = SchedulerRemote(nodes=list(NAMES), healthy=True)
            events: list[dict[str, Any]] = []
            app, _server = stack.enter_context(served_fake("lambda", monkeypatch))
            rt = instant_runtime(remote, events)
            record = bring_up(plans[0], rt, max_cost_usd=max_cost_usd)
            events.clear()
            healer = Healer(
                rt,
                record,
                remote,
                same_layout(plans[0], plans),
                HealOptions(**{"retry_s": 1.0, "unreachable_s": 300.0, **options}),
            )
            return Cluster(app, rt, remote, healer, events)

        yield make


@pytest.fixture
def cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    return make_cluster()


def assert_whole(c: Cluster) -> None:
    """One live instance per node name, each the one the record names."""
    assert [name for name, _ in c.live()] == list(NAMES)
    assert c.healer.record.node_ids == {name: c.id_of(name) for name in NAMES}


def test_a_preempted_node_is_replaced_under_its_name_and_rejoins(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-1")
    cluster.app.set_status(old, "preempted")  # type: ignore[attr-defined]
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert_whole(cluster)
    assert cluster.id_of("lc-lambda-1") != old
    assert cluster.kinds() == ["replace", "create", "replaced"]  # a preempted instance needs no delete
    replace = cluster.events[0]
    assert "preempted" in replace["reason"] and replace["hourly_usd"] == Decimal("12.36")
    calls = [argv for _, argv in cluster.remote.calls]
    listed = calls.index(("squeue", "-h", "-w", "lc-lambda-1", "-o", "%A"))
    assert calls[listed + 1 : listed + 3] == [  # DOWN (Slurm ends its jobs at once), then the requeue
        (
            "sudo",
            "-n",
            "scontrol",
            "update",
            "NodeName=lc-lambda-1",
            "State=DOWN",
            "Reason=provisioner: being replaced",
        ),
        ("sudo", "-n", "scontrol", "requeue", "7"),
    ]
    resume = calls.index(("sudo", "-n", "scontrol", "update", "NodeName=lc-lambda-1", "State=RESUME"))
    # Resumed, the control plane lists every node ready, then the job Slurm holds ~2 min is released.
    assert calls[resume + 1][0] == "sinfo"
    assert calls[-1] == ("sudo", "-n", "scontrol", "update", "JobId=7", "StartTime=now")
    assert "ubuntu@lc-lambda-1" in cluster.remote.bootstrapped  # the SSH pass ran again (new address)
    # Money: the preempted instance ran until it was noticed; the replacement counts as interruption.
    bills = {(b.name, b.term) for b in meter(cluster.healer.plan, cluster.healer.usages, cluster.rt.now()).nodes}
    assert bills == {("lc-lambda-0", "compute"), ("lc-lambda-1", "compute"), ("lc-lambda-1", "interruption")}
    assert cluster.healer.step() == []  # healthy now: nothing more


def test_a_failed_host_is_deleted_before_its_replacement_is_bought(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-1")
    cluster.app.set_status(old, "unhealthy")  # type: ignore[attr-defined]  # Lambda: still an instance
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert cluster.kinds() == ["replace", "deleted", "create", "replaced"]
    assert "unhealthy" in cluster.events[0]["reason"]
    assert old not in [iid for _, iid in cluster.live()]
    assert_whole(cluster)


def test_a_node_drained_by_its_watch_is_deleted_and_replaced(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-0")
    cluster.remote.slurm["lc-lambda-0"] = ("drained", "provisioner-watch xid.79: XID 79 on GPU 3: fallen off the bus")
    cluster.remote.slurm["lc-lambda-1"] = ("drained", "maintenance by the admin")  # not ours: left alone
    assert cluster.healer.step() == ["lc-lambda-0"]
    assert old not in [iid for _, iid in cluster.live()]
    assert cluster.kinds() == ["replace", "deleted", "create", "replaced"]
    assert cluster.events[0]["reason"] == "drained by its health watch: xid.79"
    assert cluster.healer.record.head_address is not None and cluster.id_of("lc-lambda-0") != old
    assert_whole(cluster)


def test_a_node_not_responding_is_replaced_after_the_grace_time(cluster: Cluster) -> None:
    cluster.remote.slurm["lc-lambda-1"] = ("idle*", "Not responding")
    assert cluster.healer.step() == []  # first seen now
    cluster.rt.sleep(299)
    assert cluster.healer.step() == []
    cluster.rt.sleep(1)
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert cluster.events[0]["kind"] == "unreachable"
    assert_whole(cluster)


def test_a_head_that_does_not_answer_over_ssh_is_replaced_after_the_grace_time(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-0")
    address = cluster.healer.record.head_address
    assert address is not None
    cluster.remote.unreachable.add(address)
    assert cluster.healer.step() == []
    cluster.rt.sleep(300)
    assert cluster.healer.step() == ["lc-lambda-0"]
    assert cluster.events[0]["kind"] == "unreachable" and "head does not answer" in cluster.events[0]["reason"]
    assert cluster.id_of("lc-lambda-0") != old and cluster.healer.record.head_address != address
    assert_whole(cluster)


def test_without_a_scheduler_each_node_must_answer_over_ssh(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(spec=LAMBDA_SPEC.replace("control_plane: slurm", "control_plane: none"))
    worker = next(n for n in cluster.rt.provider("lambda").get_nodes("lc-lambda") if n.name == "lc-lambda-1")
    cluster.remote.unreachable.add(worker.public_ip or "")
    assert cluster.healer.step() == []
    cluster.rt.sleep(299)
    assert cluster.healer.step() == []
    cluster.rt.sleep(1)
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert cluster.events[0]["reason"].startswith("no answer over SSH for 300 s")
    assert_whole(cluster)


@pytest.mark.parametrize(
    ("fault", "handled_by", "purchases"),
    [
        ({"kind": "rate_limit", "retry_after_s": 2}, None, 1),  # the HTTP layer honours Retry-After
        ({"kind": "http_error", "status": 503}, "retry", 1),  # the controller re-lists (nothing), then retries
        ({"kind": "lose_answer"}, None, 1),  # processed, answer dropped: the create path adopts it
        # ... and when the listing that would adopt it fails too, the create path deletes what it made and
        # says so; the controller re-lists (nothing live) and buys once more: two purchases, one live.
        (
            {"kind": "lose_answer", "then": {"kind": "http_error", "status": 503, "route": "list", "times": 3}},
            "retry",
            2,
        ),
    ],
)
def test_create_faults_never_leave_a_duplicate(
    cluster: Cluster, fault: dict[str, Any], handled_by: str | None, purchases: int
) -> None:
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    launched = cluster.app.launched
    cluster.app.faults.inject(route="launch", times=1, **fault)
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert cluster.app.launched == launched + purchases
    assert_whole(cluster)
    kinds = cluster.kinds()
    assert kinds[-1] == "replaced" and kinds.count("create") == 1
    if handled_by is not None:
        assert handled_by in kinds


def test_no_capacity_fails_over_to_the_next_ranked_option(cluster: Cluster) -> None:
    cluster.app.capacity["gpu_4x_h100_sxm5"].discard("us-south-2")  # type: ignore[attr-defined]
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    assert cluster.healer.step() == ["lc-lambda-1"]
    failover = next(e for e in cluster.events if e["event"] == "failover")
    assert failover["next_region"] == "us-south-3"
    new = cluster.app.instances[cluster.id_of("lc-lambda-1")]  # type: ignore[attr-defined]
    assert new["region"]["name"] == "us-south-3"
    assert_whole(cluster)


def test_no_capacity_anywhere_leaves_nothing_and_reports(cluster: Cluster) -> None:
    cluster.app.capacity["gpu_4x_h100_sxm5"].clear()  # type: ignore[attr-defined]
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    assert cluster.healer.step() == []
    assert [name for name, _ in cluster.live()] == ["lc-lambda-0"]
    failed = [e for e in cluster.events if e["event"] == "replace-failed"]
    assert len(failed) == 1 and "capacity" in failed[0]["error"].lower()


def test_a_second_fault_during_the_replacement_buys_another_and_leaves_no_orphan(cluster: Cluster) -> None:
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    cluster.app.faults.inject("slow_boot", polls=3, times=None)

    def preempt_the_booting_replacement(n: int) -> None:
        if n == 1:
            booting = [
                iid
                for iid, body in cluster.app.instances.items()  # type: ignore[attr-defined]
                if body["status"] == "booting"
            ]
            assert len(booting) == 1
            cluster.app.set_status(booting[0], "preempted")  # type: ignore[attr-defined]

    cluster.on_sleep(preempt_the_booting_replacement)
    assert cluster.healer.step() == ["lc-lambda-1"]
    assert cluster.healer.replacements == 2
    assert "replace-lost" in cluster.kinds() and cluster.kinds()[-1] == "replaced"
    assert_whole(cluster)


def test_the_replacement_limit_is_reported_not_exceeded(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(max_replacements=1)
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    assert cluster.healer.step() == ["lc-lambda-1"]
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    launched = cluster.app.launched
    assert run_watch(cluster.healer, poll_s=30, once=True) == 1
    assert cluster.app.launched == launched
    refused = [e for e in cluster.events if e["event"] == "replace-refused"]
    assert len(refused) == 1 and "--max-replacements 1" in refused[0]["message"]
    look = [e for e in cluster.events if e["event"] == "look"][-1]
    assert look["refused"] == ["lc-lambda-1"]


def test_a_replacement_past_the_cost_cap_is_refused(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(max_cost_usd=Decimal("0.07"))
    # Once the nodes run at all (2 x $12.36/h, billed by the minute at Lambda) $0.41 is spent: over $0.07.
    cluster.rt.sleep(1)
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    launched = cluster.app.launched
    assert cluster.healer.step() == []
    refused = next(e for e in cluster.events if e["event"] == "replace-refused")
    assert "cost cap $0.07" in refused["message"] and refused["spent_usd"] > Decimal("0.07")
    assert "a replacement's first billed period costs $0.21" in refused["message"]  # a minute of $12.36/h
    assert cluster.app.launched == launched and [n for n, _ in cluster.live()] == ["lc-lambda-0"]


def test_the_watchdog_firing_mid_replacement_leaves_no_orphan(cluster: Cluster) -> None:
    cluster.app.set_status(cluster.id_of("lc-lambda-1"), "preempted")  # type: ignore[attr-defined]
    cluster.app.faults.inject("slow_boot", polls=5, times=None)

    def cost_cap(n: int) -> None:
        if n == 2:
            raise BurstStopped("burst stopped: cost cap $300 reached ($24.72/h); the cluster was torn down")

    cluster.on_sleep(cost_cap)
    with pytest.raises(BurstStopped):
        cluster.healer.step()
    assert [name for name, _ in cluster.live()] == ["lc-lambda-0"]  # the half-bought replacement is gone
    deleted = [e for e in cluster.events if e["event"] == "deleted"]
    assert len(deleted) == 1 and "interrupted" in deleted[0]["message"]


def test_budget_warnings_and_a_look_report_the_spend(cluster: Cluster) -> None:
    cluster.healer.record = cluster.healer.record.model_copy(update={"max_cost_usd": Decimal("1")})
    cluster.rt.sleep(146)  # 2 x $12.36/h x 146 s = $1.0025... : past 100 %
    assert run_watch(cluster.healer, poll_s=30, once=True) == 0
    budget = [e for e in cluster.events if e["event"] == "budget"]
    assert [e["level_percent"] for e in budget] == [100]
    assert cluster.events[-1]["event"] == "look" or budget


def test_watch_help_and_bad_durations(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.cli import main

    assert main(["watch", "--help"]) == 0
    assert "--max-replacements" in capsys.readouterr().out
    assert main(["watch", "c", "--poll", "soon"]) == 2
    err = capsys.readouterr().err
    assert "--poll" in err and len(err.strip().splitlines()) == 1


def test_burst_replaces_a_node_preempted_while_the_job_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from provisioner.lifecycle import state
    from provisioner.lifecycle.burst import BurstOptions, run_burst

    plans = plans_for(LAMBDA_SPEC, tmp_path)
    events: list[dict[str, Any]] = []
    replaced = threading.Event()

    with served_fake("lambda", monkeypatch) as (app, _server):

        def job_loses_a_node() -> None:  # the job runs until the controller has replaced its node
            victim = next(
                iid
                for iid, body in app.instances.items()  # type: ignore[attr-defined]
                if body["name"] == "lc-lambda-lc-lambda-1"
            )
            app.set_status(victim, "preempted")  # type: ignore[attr-defined]
            assert replaced.wait(60)

        remote = SchedulerRemote(nodes=list(NAMES), healthy=True, on_job=job_loses_a_node)
        rt = instant_runtime(remote, events)
        emit = rt.emit

        def watch_events(event: str, /, *, message: str, **fields: Any) -> None:
            emit(event, message=message, **fields)
            if event == "replaced":
                replaced.set()

        rt.emit = watch_events
        code = run_burst(plans, ["sbatch", "train.sh"], BurstOptions(heal_poll_s=5), rt)
        assert code == 0
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None
    kinds = [e["event"] for e in events]
    assert kinds.index("job") < kinds.index("replace") < kinds.index("replaced") < kinds.index("job-done")
    assert [e["node"] for e in events if e["event"] == "replaced"] == ["lc-lambda-1"]


def test_watch_cli_refuses_a_pulumi_cluster_and_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime as dt

    from provisioner.cli import main
    from provisioner.lifecycle import state

    assert main(["watch", "no-such-cluster", "--once"]) == 2  # a usage error, as status/ssh/outputs say it
    assert "no record of cluster no-such-cluster" in capsys.readouterr().err
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    state.save_record(
        state.ClusterRecord(
            cluster_id=plan.cluster_id,
            provider="lambda",
            engine="pulumi",
            plan=plan,
            created_at=dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
            status="up",
        )
    )
    assert main(["watch", plan.cluster_id, "--once"]) == 2
    err = capsys.readouterr().err
    assert "--engine pulumi" in err and len(err.strip().splitlines()) == 1


def test_another_owners_instance_under_the_node_name_is_never_deleted(cluster: Cluster) -> None:
    # A colleague's instance on the same account carries the cluster's tag and the node's name but
    # their owner mark: replacing the node deletes only this owner's instance and says what it kept.
    import copy

    from provisioner.providers.base import LEASE_TAG, OWNER_TAG

    old = cluster.id_of("lc-lambda-1")
    theirs = copy.deepcopy(cluster.app.instances[old])  # type: ignore[attr-defined]
    theirs["id"] = "0123456789abcdef0123456789abcdef"
    theirs["tags"] = [
        {"key": t["key"], "value": "bob-laptop" if t["key"] == OWNER_TAG else t["value"]}
        for t in theirs["tags"]
        if t["key"] != LEASE_TAG
    ]
    cluster.app.instances[theirs["id"]] = theirs  # type: ignore[attr-defined]
    cluster.app.set_status(old, "unhealthy")  # type: ignore[attr-defined]
    assert cluster.healer.step() == []  # the replacement is refused: the name is taken by bob's instance
    assert cluster.app.instances[theirs["id"]]["status"] == "active"  # type: ignore[attr-defined]
    assert old not in [iid for _, iid in cluster.live()]  # this owner's failed host was deleted
    kept = [e for e in cluster.events if e["event"] == "kept"]
    assert {(e["id"], e["why"]) for e in kept} == {(theirs["id"], "owned by bob-laptop")}
    (failed,) = [e for e in cluster.events if e["event"] == "replace-failed"]
    assert "owned by bob-laptop: choose another cluster name" in failed["message"]
