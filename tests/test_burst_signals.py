"""``burst`` interrupted at every step, in a real child process, against the Lambda fake on 127.0.0.1.

The child runs the same ``run_burst`` the CLI runs (signal handlers installed the same way), with
a stand-in Remote that holds the step under test open. The test waits for the step's event on
the child's ``--json`` stream, sends the signal, and checks the fake holds zero live instances.
SIGKILL leaves the instances (nothing can run in the child); ``gc --yes`` then removes them:
the child's record held a lease on its pid, which is gone.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle import state
from tests.conftest import ROOT, need_shared
from tests.test_lifecycle_support import API_KEYS, served_fake

CHILD = r"""
import json, sys, threading
from pathlib import Path
from provisioner.lifecycle.burst import BurstOptions, run_burst
from provisioner.realize.events import JsonLines
from provisioner.realize.interrupts import Interrupts
from provisioner.lifecycle.realize import Runtime, Timeouts
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, fast_provider, plans_for

step, folder = sys.argv[1], Path(sys.argv[2])
plans = plans_for(LAMBDA_SPEC, folder)
never = threading.Event()

class Remote(StandInRemote):
    def run(self, target, argv, *, timeout_s=60.0):
        if step == "validate" and argv[0] == "srun" and "check" in argv:
            signalled = folder / "signalled"  # a node check still running when the signal comes
            for _ in range(6000):
                if signalled.exists():
                    break
                never.wait(0.01)
        return super().run(target, argv, timeout_s=timeout_s)

remote = Remote(nodes=[n.name for n in plans[0].nodes], healthy=True,
                not_ready_polls=10**6 if step == "wait-ready" else 0,
                on_job=(lambda: never.wait(600)) if step in ("job", "kill") else None)
runtime = Runtime(remote=remote, emit=JsonLines(), provider_for=fast_provider,
                  timeouts=Timeouts(running_s=120, ready_s=120, deleted_s=60, interval_s=0.2, max_interval_s=0.2),
                  interrupts=Interrupts().install())
try:
    code = run_burst(plans, ["srun", "hostname"], BurstOptions(poll_s=0.2), runtime)
except KeyboardInterrupt:
    sys.exit(130)
sys.exit(code)
"""


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))


class Child:
    def __init__(self, step: str, tmp_path: Path) -> None:
        self.stderr_path = tmp_path / f"child-{step}.stderr"
        with self.stderr_path.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, step, str(tmp_path)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=dict(os.environ),
            )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def wait_for(self, event: str, timeout_s: float = 60) -> dict[str, Any]:
        """The first ``event`` the child writes; fails (with its stderr) if it exits or stalls first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                got = self.events.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and not self.reader.is_alive() and self.events.empty():
                    break
                continue
            self.seen.append(got["event"])
            if got["event"] == event:
                return got
        self.proc.kill()
        self.proc.wait()
        raise AssertionError(f"no {event!r} event; saw {self.seen}; stderr: {self.stderr[-1500:]}")

    def finish(self, timeout_s: float = 90) -> int:
        """Wait for the child; every event it wrote is in ``seen`` afterwards."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.reader.join(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        while not self.events.empty():
            self.seen.append(self.events.get()["event"])
        return code

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


# (step whose event is awaited, fake set-up that keeps that step open)
STEPS = {
    "create": "launch latency",
    "wait-running": "slow boot",
    "wait-ready": "never ready",
    "validate": "slow node check",
    "job": "job runs until killed",
    "teardown": "slow delete",
}


@pytest.mark.parametrize("step", list(STEPS))
def test_sigint_at_each_step_leaves_zero_instances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.sleep = (signalled := threading.Event()).wait  # the latencies below end once the signal is sent
        if step == "create":
            app.latency_s = {"launch": 4.0}  # under the child's 5 s client timeout
        elif step == "wait-running":
            app.faults.inject("slow_boot", times=None, seconds=120)
        elif step == "teardown":
            app.latency_s = {"delete": 1.0}
        child = Child(step, tmp_path)
        child.wait_for(step)
        if step == "create":  # the signal must land during a purchase, not before it
            assert app.wait_for(lambda a: a.requests_in_flight.get("launch", 0) > 0, 60), child.stderr[-2000:]
        launching = app.requests_in_flight.get("launch", 0)
        child.proc.send_signal(signal.SIGINT)
        signalled.set()
        (tmp_path / "signalled").touch()  # the held node check ends too
        code = child.finish()
        assert code == (0 if step == "teardown" else 130), (child.seen, child.stderr[-2000:])
        assert (launching > 0) == (step == "create")
        assert app.instance_count() == 0
        assert app.launched == 2  # create: the held purchase finished both nodes, then the teardown ran
        assert state.load_record("lc-lambda") is None
        assert "teardown" in child.seen and "traceback" not in child.stderr.lower()


def test_sigterm_while_the_job_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with served_fake("lambda", monkeypatch) as (app, _server):
        child = Child("job", tmp_path)
        child.wait_for("job")
        child.proc.send_signal(signal.SIGTERM)
        assert child.finish() == 130
        assert app.launched == 2 and app.instance_count() == 0


def test_sigkill_then_gc_yes_leaves_zero_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from provisioner.cli import main

    with served_fake("lambda", monkeypatch) as (app, _server):
        child = Child("kill", tmp_path)
        child.wait_for("job")
        child.proc.send_signal(signal.SIGKILL)
        assert child.finish() == -signal.SIGKILL
        assert app.instance_count() == 2  # nothing ran after the kill
        record = state.load_record("lc-lambda")
        assert record is not None and record.lease_lost() and record.lease_pid == child.proc.pid
        capsys.readouterr()
        assert main(["gc", "--provider", "lambda"]) == 0  # listing deletes nothing
        assert app.instance_count() == 2 and "lc-lambda-0" in capsys.readouterr().out
        assert main(["gc", "--provider", "lambda", "--yes"]) == 0
        assert app.instance_count() == 0 and len(app.calls_of("delete")) >= 1
        assert state.load_record("lc-lambda") is None
        assert API_KEYS["lambda"] not in capsys.readouterr().out
