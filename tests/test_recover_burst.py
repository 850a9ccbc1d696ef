"""``burst --recover anywhere`` on the fakes, with no node: the job runs on Lambda, loses a node that
Lambda can no longer sell, and runs again on RunPod after the move; the watchdog's cost cap spans
both clusters; a spec without checkpoint.remote is refused before anything is bought."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import UsageError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import state
from provisioner.lifecycle.burst import BurstOptions, BurstStopped, run_burst
from provisioner.lifecycle.burst_recover import catalog_planner
from provisioner.lifecycle.realize import cluster_secrets
from provisioner.plan import Plan
from provisioner.realize.bootstrap_ssh import BootstrapError, SshTarget
from provisioner.secrets import ClusterSecrets
from provisioner.spec import ClusterSpec
from provisioner.validation.runner import CommandResult
from tests.test_heal import SchedulerRemote
from tests.test_lifecycle_support import instant_runtime, plans_for, served_fake
from tests.test_recover import SPEC, sold


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))


HELD: list[object] = []


@dataclasses.dataclass
class KeyedRemote(SchedulerRemote):
    """The stand-in holding one cluster's key: a node of another cluster refuses it, as its sshd would (a
    moved run's new cluster is launched with its own key, ``lifecycle.realize.cluster_secrets``)."""

    cluster: str = "mv"
    rekeyed: list[str] = dataclasses.field(default_factory=list)
    """The clusters this remote (or a copy) was rekeyed for; shared by every copy."""

    def _refused(self, target: SshTarget) -> str | None:
        if re.fullmatch(rf"{re.escape(self.cluster)}-\d+", target.node_name):
            return None
        self.calls.append((target.node_name, ("refused",)))
        return f"ml@{target.host}: Permission denied (publickey)."

    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        refused = self._refused(target)
        return CommandResult(255, "", refused) if refused else super().run(target, argv, timeout_s=timeout_s)

    def stream(
        self, target: SshTarget, argv: Sequence[str], on_line: Callable[[str], None], *, timeout_s: float | None = None
    ) -> int:
        refused = self._refused(target)
        if refused:
            on_line(refused)
            return 255
        return super().stream(target, argv, on_line, timeout_s=timeout_s)

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        refused = self._refused(target)
        if refused:
            raise BootstrapError(refused)
        super().bootstrap(target, script, timeout_s=timeout_s)

    def for_other_cluster(self, plan: Plan, secrets: ClusterSecrets, folder: Path) -> KeyedRemote:
        assert secrets == cluster_secrets(plan.cluster_id) and folder == state.ssh_dir(plan.cluster_id)
        self.rekeyed.append(plan.cluster_id)
        return dataclasses.replace(self, cluster=plan.cluster_id)


def lambda_first(tmp_path: Path, spec: str = SPEC) -> list[Plan]:
    plans = sold(plans_for(spec, tmp_path, count=40))
    return [p for p in plans if p.option.provider == "lambda"]


def burst_that_loses_lambda(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    opts: BurstOptions,
    hang_after_move: bool = False,
    remote_class: Callable[..., SchedulerRemote] = SchedulerRemote,
) -> tuple[int | BaseException, list[dict[str, Any]], list[int]]:
    """Run a burst whose first job run loses a node Lambda cannot sell again. Returns the outcome, the
    events (each with the fake clock's ``at``) and the live instances left at (Lambda, RunPod)."""
    events: list[dict[str, Any]] = []
    runs = [0]
    gone = threading.Event()
    plans = lambda_first(tmp_path)
    with served_fake("lambda", monkeypatch) as (lam, _), served_fake("runpod", monkeypatch) as (rp, _):

        def job() -> None:
            runs[0] += 1
            if runs[0] == 1:  # the first run: Lambda sells no more H100s and reclaims a node; the job hangs
                for regions in lam.capacity.values():  # type: ignore[attr-defined]
                    regions.clear()
                victim = next(
                    iid
                    for iid, body in lam.instances.items()  # type: ignore[attr-defined]
                    if body["name"].endswith("mv-1")
                )
                lam.set_status(victim, "preempted")  # type: ignore[attr-defined]
                gone.wait(60)  # requeued by Slurm, pending; the old cluster's stream ends with its head
            else:
                HELD.append(cluster_lease.holder("mv-m1"))  # the new cluster's lease, renewed while the job runs
                if hang_after_move:
                    stopped.wait(60)

        stopped = threading.Event()
        remote = remote_class(nodes=["mv-0", "mv-1"], healthy=True, on_job=job)

        def planner(spec: ClusterSpec) -> list[Plan]:
            again = sold(catalog_planner()(spec))
            remote.nodes = [n.name for n in again[0].nodes]
            return again

        rt = instant_runtime(remote, events)
        emit = rt.emit

        def on_event(event: str, /, *, message: str, **fields: Any) -> None:
            emit(event, message=message, at=rt.now(), **fields)
            if event in ("move-left", "watchdog"):
                gone.set()
            if event == "watchdog":
                stopped.set()

        rt.emit = on_event
        try:
            outcome: int | BaseException = run_burst(
                plans, ["sbatch", "train.sh"], dataclasses.replace(opts, planner=planner), rt
            )
        except BurstStopped as exc:
            outcome = exc
        finally:
            gone.set()
            stopped.set()
        counts = [lam.instance_count(), rp.instance_count()]
    return outcome, events, counts


def test_the_job_runs_again_on_the_new_cluster_and_everything_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = BurstOptions(heal_poll_s=5, recover="anywhere", skip_validation=True)
    code, events, counts = burst_that_loses_lambda(tmp_path, monkeypatch, opts)
    assert code == 0 and counts == [0, 0]  # the job's second run finished; both clusters are gone
    kinds = [e["event"] for e in events]
    jobs = [e for e in events if e["event"] == "job"]
    assert [e["cluster"] for e in jobs] == ["mv", "mv-m1"]  # the same job, started again after the move
    assert kinds.index("move") < kinds.index("moved") < len(kinds) - 1 - kinds[::-1].index("job")
    assert kinds.count("job-done") == 1
    assert HELD and getattr(HELD[-1], "what", None) == "burst"
    assert state.load_record("mv") is None and state.load_record("mv-m1") is None
    creates = [e for e in events if e["event"] == "create" and "run" in e]
    assert len({e["run"] for e in creates}) == 1 and [e["cluster"] for e in creates] == ["mv", "mv-m1"]


def test_each_cluster_of_the_run_is_reached_with_its_own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new cluster's nodes accept only its key: its SSH pass, the restore and the job's second run go
    through the remote rekeyed for it; the first cluster's key would be refused there (exit 255)."""
    opts = BurstOptions(heal_poll_s=5, recover="anywhere", skip_validation=True)
    made: list[KeyedRemote] = []

    def keyed(**fields: Any) -> KeyedRemote:
        made.append(KeyedRemote(**fields))
        return made[-1]

    code, events, counts = burst_that_loses_lambda(tmp_path, monkeypatch, opts, remote_class=keyed)
    first = made[0]
    print(first.bootstrapped)
    assert code == 0 and counts == [0, 0], [e["message"] for e in events][-8:]
    assert first.rekeyed == ["mv-m1"] and ("refused",) not in {argv for _, argv in first.calls}
    restored = [name for name, argv in first.calls if argv[:3] == ("sudo", "-n", "bash")]
    assert restored == ["mv-m1-0", "mv-m1-1"]  # the calls list is shared by the rekeyed copy
    jobs = [e["cluster"] for e in events if e["event"] == "job"]
    assert jobs == ["mv", "mv-m1"] and [e["exit_code"] for e in events if e["event"] == "job-done"] == [0]


def test_the_cost_cap_spans_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Decimal("20")  # past the spend before the move ($1.06) plus the cheapest move ($16.97)
    opts = BurstOptions(poll_s=30, heal_poll_s=30, recover="anywhere", skip_validation=True, max_cost_usd=cap)
    outcome, events, counts = burst_that_loses_lambda(tmp_path, monkeypatch, opts, hang_after_move=True)
    assert isinstance(outcome, BurstStopped) and counts == [0, 0]
    left = next(e for e in events if e["event"] == "move-left")
    moved = next(e for e in events if e["event"] == "moved")
    fired = next(e for e in events if e["event"] == "watchdog")
    assert fired["spent_usd"] >= cap and "cost cap $20.00" in fired["reason"]
    # The new cluster alone had not reached $20 when the watchdog stopped it: the old cluster's money counted
    # (within one 30 s look of the new cluster's $47.84/h, $0.40).
    alone = moved["hourly_usd"] * Decimal((fired["at"] - moved["at"]).total_seconds()) / 3600
    assert left["run_spent_usd"] == Decimal("1.06")
    assert alone < cap <= alone + left["run_spent_usd"] + Decimal("0.40")


def test_recover_anywhere_needs_a_remote_checkpoint(tmp_path: Path) -> None:
    plans = lambda_first(tmp_path, SPEC.replace("checkpoint: {remote: s3://ckpt-bucket/runs/mv, size_gb: 200}\n", ""))
    with pytest.raises(UsageError, match=r"checkpoint\.remote"):
        run_burst(plans, ["sbatch", "train.sh"], BurstOptions(recover="anywhere"), instant_runtime(None))
