"""Faults under the real Pulumi engine (issue 25 item 4), through the installed CLI on the Lambda fake.

- SIGKILL of ``provisioner up`` or of its ``pulumi`` process at a seeded point of the create (a
  launch of the two nodes in flight, or every node bought and the engine polling for them to run),
  then the next ``up``, ``down`` or ``gc --yes``: exactly the planned nodes, all of them in the stack
  (no pending operation left, no dynamic-provider server of the dead engine still running), or zero
  nodes and no stack. Never an instance the stack does not hold.
- Two terminals on one cluster: the second ``up`` (and ``down``) gets one line naming the holder and
  how to wait.
- Ctrl-C (SIGINT to the terminal's process group): pulumi cancels, ``up`` exits 130 saying how to
  remove what is left, ``down`` then leaves nothing.
- A provider refusing capacity mid-create: the pulumi engine rolls back as the direct engine does
  (no node left, the same exit code).

The seed is ``PROVISIONER_TEST_SEED`` (default 25); a failure names it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.plan import Plan, save_plan
from provisioner.testing.fakes.base import FakeApp
from tests.pulumi_lab import Machine, engine_dir, group_pids, plan_of, wait_for
from tests.test_lifecycle_support import served_fake

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
SEED = int(os.environ.get("PROVISIONER_TEST_SEED", "25"))
NAME = "lambda"  # two nodes, each its own launch request


@pytest.fixture
def engine() -> Path:
    return engine_dir()


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    made: list[Machine] = []
    yield made
    for machine in made:
        machine.close()


def _machine(plan: Plan, folder: Path, engine: Path, url: str, made: list[Machine]) -> Machine:
    prefix = f"PROVISIONER_{NAME.upper()}"
    machine = Machine(
        folder=folder,
        bin_dir=engine,
        fake_env={f"{prefix}_API_URL": url, f"{prefix}_API_KEY": os.environ[f"{prefix}_API_KEY"]},
        nodes=[node.name for node in plan.nodes],
    )
    made.append(machine)
    return machine


def _plan(tmp_path: Path) -> tuple[Plan, Path]:
    plan = plan_of(NAME, tmp_path)
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    return plan, path


def in_flight(app: FakeApp, kind: str = "launch") -> int:
    return app.requests_in_flight.get(kind, 0)


def stack_ids(user: Machine, cluster: str) -> tuple[list[str], list[object]]:
    """(the node ids the stack's NeocloudNodes holds, its pending operations)."""
    done = user.pulumi("stack", "export", "--stack", cluster)
    assert done.code == 0, done.err
    deployment = json.loads(done.out)["deployment"]
    ids = [
        node_id
        for r in deployment.get("resources") or []
        if r["type"].endswith("NeocloudNodes")
        for node_id in (r.get("outputs") or {}).get("node_ids") or []
    ]
    return ids, list(deployment.get("pending_operations") or [])


def live_ids(app: FakeApp) -> list[str]:
    from provisioner.providers import registry

    return sorted(n.id for n in registry.get_provider(NAME).get_nodes("lc-lambda") if n.status.value != "terminated")


def no_stack(user: Machine) -> bool:
    done = user.pulumi("stack", "ls", "--json", "--all")
    return done.code == 0 and json.loads(done.out or "[]") == []


@pytest.mark.parametrize(("victim", "then"), [("pulumi", "up"), ("pulumi", "down"), ("provisioner", "gc")])
def test_sigkill_mid_create_then_up_down_or_gc(
    victim: str, then: str, engine: Path, machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(f"{SEED}:{victim}:{then}")
    phase = rng.choice(["launch", "wait-running"])
    nth, pause = rng.randint(1, 2), rng.uniform(0.0, 0.4)
    where = f"seed {SEED}: SIGKILL {victim} during {phase} (launch {nth}) after {pause:.2f}s, then {then}"
    plan, plan_file = _plan(tmp_path)
    with served_fake(NAME, monkeypatch) as (app, server):
        user = _machine(plan, tmp_path / "alice", engine, server.url, machines)
        app.latency_s = {"launch": 1.5} if phase == "launch" else {"list": 0.6}
        app.sleep = (killed := threading.Event()).wait  # the latency, cut short once the victim is dead
        child = user.start("up", str(plan_file), "--json")
        if phase == "launch":
            point = app.wait_for(lambda a: in_flight(a) > 0 and a.requests_started["launch"] >= nth, 600)
        else:
            point = app.wait_for(lambda a: a.launched == 2 and in_flight(a) == 0 and in_flight(a, "list") > 0, 600)
        assert point, f"{where}: never reached; {child.stderr.read() if child.poll() is not None else ''}"
        time.sleep(pause)
        (pulumi,) = group_pids(child.pid, "pulumi")
        os.kill(pulumi if victim == "pulumi" else child.pid, signal.SIGKILL)
        killed.set()
        if victim == "pulumi":
            _out, err = child.communicate(timeout=300)
            assert child.returncode == 5 and err.count("\n") == 1 and "Traceback" not in err, (where, err)
            assert "remove with: provisioner down lc-lambda" in err, err
        else:  # the engine outlives its killed client: it ends its step, records it and lets the lock go
            assert child.wait(timeout=60) == -signal.SIGKILL
            wait_for(lambda: not group_pids(child.pid, "pulumi"), 600, f"{where}: the orphaned engine to end")
        app.latency_s = {}
        assert app.wait_for(lambda a: in_flight(a) == 0, 60), where
        assert 1 <= app.launched <= 2, where
        done = user.cli(
            *{"up": ["up", str(plan_file)], "down": ["down", "lc-lambda"]}.get(
                then, ["gc", "--provider", NAME, "--yes"]
            )
        )
        assert done.code == 0, f"{where}: {done.out[-2000:]}{done.err[-3000:]}"
        if then == "up":
            ids, pending = stack_ids(user, "lc-lambda")
            assert pending == [] and sorted(ids) == live_ids(app) and len(ids) == 2, where  # all held, none twice
            assert app.instance_count() == 2, where
            assert user.cli("down", "lc-lambda").code == 0
        assert app.instance_count() == 0, where
        assert no_stack(user), where
        assert not (user.state / "clusters" / "lc-lambda.json").exists(), where


def test_two_terminals_on_one_cluster_the_second_is_told_who_holds_it(
    engine: Path, machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, plan_file = _plan(tmp_path)
    with served_fake(NAME, monkeypatch) as (app, server):
        user = _machine(plan, tmp_path / "alice", engine, server.url, machines)
        app.latency_s = {"launch": 900.0}  # the first launch is held until both refusals are seen
        app.sleep = (release := threading.Event()).wait
        first = user.start("up", str(plan_file), "--json")
        assert app.wait_for(lambda a: in_flight(a) > 0, 600)
        for argv in (["up", str(plan_file)], ["down", "lc-lambda"]):
            second = user.cli(*argv)
            line = second.err.strip().splitlines()[-1]  # after up's first progress line: the error, one line
            assert second.code == 6 and line.startswith("error: cluster lc-lambda is held by up"), second.err
            assert f"(pid {first.pid} on " in line and "wait for it to end (or stop that process)" in line, line
        app.latency_s = {}
        release.set()
        _out, err = first.communicate(timeout=600)
        assert first.returncode == 0, err[-3000:]
        assert app.instance_count() == 2
        assert user.cli("down", "lc-lambda").code == 0 and app.instance_count() == 0 and no_stack(user)


def test_ctrl_c_cancels_and_down_leaves_nothing(
    engine: Path, machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, plan_file = _plan(tmp_path)
    with served_fake(NAME, monkeypatch) as (app, server):
        user = _machine(plan, tmp_path / "alice", engine, server.url, machines)
        app.latency_s = {"launch": 2.0}
        child = user.start("up", str(plan_file))
        assert app.wait_for(lambda a: in_flight(a) > 0, 600)
        os.killpg(child.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
        _out, err = child.communicate(timeout=600)
        assert child.returncode == 130, err[-3000:]
        assert "Traceback" not in err and "^C received; cancelling" in err, err[-3000:]  # pulumi's own cancel
        assert "interrupted: pulumi cancelled the update of lc-lambda" in err, err[-3000:]
        assert "remove them with: provisioner down lc-lambda" in err, err[-3000:]
        assert not group_pids(child.pid), "a process of the cancelled up still runs"
        app.latency_s = {}
        assert app.wait_for(lambda a: in_flight(a) == 0, 60)
        _ids, pending = stack_ids(user, "lc-lambda")  # the lock is gone: the state is readable
        assert pending == [], "pulumi's cancel recorded what it had done"
        down = user.cli("down", "lc-lambda")
        assert down.code == 0, down.err[-3000:]
        assert app.instance_count() == 0 and no_stack(user)


def test_capacity_refused_mid_create_rolls_back_like_the_direct_engine(
    engine: Path, machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, plan_file = _plan(tmp_path)
    results = {}
    for chosen in ("direct", "pulumi"):
        with served_fake(NAME, monkeypatch) as (app, server):
            user = _machine(plan, tmp_path / chosen, engine, server.url, machines)
            app.faults.inject("capacity_after", route="launch", times=None, k=1, partial=True)
            done = user.cli("up", str(plan_file), "--engine", chosen)
            line = done.err.strip().splitlines()[-1]  # the error (pulumi's progress above it shows the adapter's)
            assert done.code == 4 and line.startswith("error: lambda: Not enough capacity"), done.err[-3000:]
            results[chosen] = (done.code, app.launched, app.instance_count())
            assert app.instance_count() == 0, (chosen, done.err[-2000:])  # the bought node was deleted
            assert not (user.state / "clusters" / "lc-lambda.json").exists()
            if chosen == "pulumi":
                assert no_stack(user)  # destroyed as the failover destroys a failed try's stack
    assert results["pulumi"] == results["direct"], results
