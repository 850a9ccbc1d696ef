"""``run_burst`` on the Lambda fake with a stand-in Remote: exit codes, teardown every way, watchdog.

The clock is fake (sleep advances it), so TTL and budget expiry take no real time.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import StackError, ValidationFailedError
from provisioner.lifecycle import state
from provisioner.lifecycle.burst import BurstOptions, BurstStopped, Watchdog, job_argv, run_burst
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

T0 = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")


def test_watchdog_budget_is_exact() -> None:
    dog = Watchdog(T0, hourly_usd=Decimal("24.72"), expires_at=None, max_cost_usd=Decimal("24.72"))
    just_before = T0 + dt.timedelta(seconds=3599, microseconds=999_999)
    assert dog.reason(just_before) is None
    assert dog.reason(T0 + dt.timedelta(hours=1)) is not None
    assert dog.spent_usd(T0 + dt.timedelta(minutes=30)) == Decimal("12.36")
    third = Watchdog(T0, hourly_usd=Decimal("3"), expires_at=None, max_cost_usd=Decimal("0.01"))
    assert third.reason(T0 + dt.timedelta(seconds=11, microseconds=999_999)) is None  # $0.00999...
    assert third.reason(T0 + dt.timedelta(seconds=12)) is not None  # exactly $0.01


def test_watchdog_cap_where_binary_floating_point_is_wrong() -> None:
    # $0.70/h for 3 h is exactly the $2.10 cap; in binary64 0.7 * 3 = 2.0999999999999996 < 2.1,
    # so a float watchdog would let the job run past its cap.
    dog = Watchdog(T0, hourly_usd=Decimal("0.70"), expires_at=None, max_cost_usd=Decimal("2.10"))
    assert dog.reason(T0 + dt.timedelta(hours=3) - dt.timedelta(microseconds=1)) is None
    assert dog.reason(T0 + dt.timedelta(hours=3)) is not None
    assert dog.spent_usd(T0 + dt.timedelta(hours=3)) == Decimal("2.10")


def test_watchdog_ttl() -> None:
    dog = Watchdog(T0, hourly_usd=Decimal(1), expires_at=T0 + dt.timedelta(hours=4), max_cost_usd=None)
    assert dog.reason(T0 + dt.timedelta(hours=4) - dt.timedelta(microseconds=1)) is None
    assert "TTL" in (dog.reason(T0 + dt.timedelta(hours=4)) or "")


def test_job_argv_per_control_plane(tmp_path: Path) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    assert job_argv(plan, ["srun", "-N2", "hostname"], "img") == ("srun", "-N2", "hostname")
    env = "--export=ALL,PROVISIONER_CHECKPOINT_DIR=/mnt/checkpoints,PROVISIONER_CHECKPOINT_SHARED=0"
    assert job_argv(plan, ["sbatch", "x.sh"], "img") == ("sbatch", "--wait", "--requeue", env, "x.sh")
    assert job_argv(plan, ["sbatch", "--export=NONE", "--wait", "x.sh"], "img") == (
        "sbatch",
        "--requeue",
        "--export=NONE",
        "--wait",
        "x.sh",
    )
    # No shared filesystem: a requeued job would find neither checkpoints nor output; srun as before.
    assert job_argv(plan, ["python", "t.py"], "img") == (
        "srun",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--",
        "python",
        "t.py",
    )


def test_kubernetes_job_keeps_the_command_words_and_replaces_a_lost_pod(tmp_path: Path) -> None:
    import json
    import shlex

    plan = plans_for(LAMBDA_SPEC.replace("control_plane: slurm", "control_plane: kubernetes"), tmp_path)[0]
    hostile = ["python", "-c", "print('$(reboot)'); import sys; sys.exit(4)", "it's; rm -rf /"]
    argv = job_argv(plan, hostile, "nvcr.io/nvidia/pytorch:25.01-py3")
    assert argv[:2] == ("bash", "-c")
    first = argv[2].splitlines()[0]
    quoted = shlex.split(first)[2]  # printf '%s' MANIFEST | kubectl apply -f -
    job = json.loads(quoted)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == hostile and container["image"] == "nvcr.io/nvidia/pytorch:25.01-py3"
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    ]
    assert {"name": "PROVISIONER_CHECKPOINT_DIR", "value": "/mnt/checkpoints"} in container["env"]
    assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/mnt/checkpoints"}]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert job["metadata"]["name"] == "burst-lc-lambda"

    # The script itself, run by bash against a stand-in kubectl: applies that manifest, streams the
    # logs, exits with the container's status.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(
        f"""#!{sys.executable}
import sys
args = sys.argv[1:]
if args[:3] == ["apply", "-f", "-"]:
    open({str(tmp_path / "applied.json")!r}, "w").write(sys.stdin.read())
elif args[:1] == ["logs"]:
    print("from the job")
elif args[:2] == ["get", "pods"]:
    print("pod-a" if "metadata.name" in args[-1] else "4")
elif args[:2] == ["get", "job"]:
    print("Failed")
""",
        encoding="utf-8",
    )
    kubectl.chmod(0o755)
    done = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert done.returncode == 4 and done.stdout == "from the job\n"
    assert json.loads((tmp_path / "applied.json").read_text()) == job


@pytest.mark.parametrize("job_exit", [0, 3])
def test_exit_code_propagates_and_cluster_is_torn_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_exit: int
) -> None:
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    remote = StandInRemote(
        nodes=[n.name for n in plans[0].nodes], healthy=True, job_exit=job_exit, job_lines=("line 1", "line 2")
    )
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        code = run_burst(plans, ["srun", "-N2", "hostname"], BurstOptions(), instant_runtime(remote, events))
        assert code == job_exit
        assert app.launched == 2 and app.instance_count() == 0
        assert len(app.calls_of("delete")) >= 1
        assert state.load_record("lc-lambda") is None
    output = [e["line"] for e in events if e["event"] == "job-output"]
    assert output == ["line 1", "line 2"]
    assert [e["exit_code"] for e in events if e["event"] == "job-done"] == [job_exit]
    assert ("lc-lambda-0", ("srun", "-N2", "hostname")) in remote.calls


def test_failed_validation_refuses_the_job_and_tears_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    remote = StandInRemote(nodes=[n.name for n in plans[0].nodes], healthy=False)
    with served_fake("lambda", monkeypatch) as (app, _server):
        with pytest.raises(ValidationFailedError) as caught:
            run_burst(plans, ["srun", "hostname"], BurstOptions(), instant_runtime(remote))
        assert caught.value.exit_code == 11
        assert not [call for call in remote.calls if call[1][0] == "srun" and "hostname" in call[1]]
        assert app.launched == 2 and app.instance_count() == 0

        skip = StandInRemote(nodes=[n.name for n in plans[0].nodes], healthy=False, job_exit=0)
        assert run_burst(plans, ["srun", "hostname"], BurstOptions(skip_validation=True), instant_runtime(skip)) == 0
        assert not [call for call in skip.calls if "check" in call[1]]
        assert app.instance_count() == 0


def test_a_bring_up_that_failed_after_buying_is_torn_down_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bring-up's own teardown (destroy on failure) is the only one said: no second "deleting 0
    node(s)" and "nothing left" after it. Real SSH (no stand-in) refuses the fake's TEST-NET nodes."""
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.boots_nodes = True  # as the local lab's fake says: up buys, then finds TEST-NET nodes
        with pytest.raises(StackError, match="documentation"):
            run_burst(plans, ["srun", "hostname"], BurstOptions(), instant_runtime(None, events))
        assert app.launched == 2 and app.instance_count() == 0
    said = [(e["event"], e["message"]) for e in events if e["event"] in ("teardown", "down")]
    assert said == [
        ("teardown", "deleting 2 node(s) of lc-lambda on lambda"),
        ("down", "cluster lc-lambda is down (2 node(s) deleted)"),
    ]


@pytest.mark.parametrize("limit", ["ttl", "budget"])
def test_watchdog_deletes_the_instances_through_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    release = threading.Event()
    remote = StandInRemote(
        nodes=[n.name for n in plans[0].nodes], healthy=True, on_job=lambda: release.wait(30)
    )  # a job that runs until told
    options = (
        BurstOptions(ttl_s=4 * 3600, poll_s=600)
        if limit == "ttl"
        else BurstOptions(ttl_s=100 * 3600, max_cost_usd=Decimal("100"), poll_s=600)
    )
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        try:
            with pytest.raises(BurstStopped) as caught:
                run_burst(plans, ["srun", "sleep", "infinity"], options, instant_runtime(remote, events))
        finally:
            release.set()
        assert caught.value.exit_code == 124
        # --ttl 4h beats the spec's 2 h; the fake clock starts at 2026-11-24T00:00Z
        assert ("TTL reached at 2026-11-24 04:00:00 UTC;" if limit == "ttl" else "cost cap $100.00") in str(
            caught.value
        )
        deletes = app.calls_of("delete")
        assert deletes and app.instance_count() == 0 and state.load_record("lc-lambda") is None
    fired = [e for e in events if e["event"] == "watchdog"]
    assert len(fired) == 1
    if limit == "budget":  # 24.72 $/h: $100 is reached after 4.045 h, i.e. at the first 600 s poll past it
        assert Decimal(100) <= fired[0]["spent_usd"] < Decimal(100) + Decimal("24.72") * 600 / 3600 + 1
