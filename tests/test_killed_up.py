"""Issue 16's attacks, repeated as tests on each neocloud fake (served on 127.0.0.1).

- ``up`` (the direct engine's ``bring_up``, in a real child process) is SIGKILLed at seeded random
  points: while the fake reports a launch in flight (a random one of the plan's launches, a random
  moment within it), and once every node is bought and the child polls for them to run. The
  fake's launch count is asserted, then ``gc --yes`` (the CLI) must leave zero instances, TTL or
  not (the Lambda plan has one, the others none).
- Two ``up`` of one plan at once: from one state dir (two terminals) the second is refused with
  one line naming the holder; from two state dirs sharing the owner (two machines, one account)
  exactly the planned nodes remain, all the winner's.
- ``gc``/``down`` run as another owner, or without a record, leave other owners' and unmarked
  instances (a user's ``research/notebook`` on Vast, ``research-box`` on Fluence) untouched.

The seed is ``PROVISIONER_TEST_SEED`` (default 16); a failure names it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import state
from provisioner.plan import Plan, save_plan
from provisioner.providers.ownership import LeaseMark
from provisioner.testing.fakes.base import FakeApp
from tests.conftest import ROOT, need_shared
from tests.providers.contract import load_harness
from tests.test_lifecycle_support import (
    API_KEYS,
    FLUENCE_SPEC,
    LAMBDA_SPEC,
    fast_provider,
    plans_for,
    runpod_plan,
    served_fake,
)
from tests.test_ownership import strip_owner

NEOCLOUDS = ("lambda", "runpod", "vastai", "fluence")
SEED = int(os.environ.get("PROVISIONER_TEST_SEED", "16"))
SPEC_FILES = {
    "lambda": "openapi-1.10.0.json",
    "runpod": "openapi-rest-v2.json",
    "vastai": "openapi.yaml",
    "fluence": "fluence-openapi-original.yml",
}
VAST_SPEC = """\
name: lc-vast
gpus: {model: [RTX4090], count: 1}
nodes: {count: 1}
control_plane: slurm
providers: {allow: [vastai]}
workload: {hours: 1}
"""

CHILD = r"""
import sys, time
from pathlib import Path
from provisioner.errors import ProvisionerError
from provisioner.realize.events import JsonLines
from provisioner.lifecycle.realize import Runtime, Timeouts, bring_up
from provisioner.plan import load_plan
from tests.test_lifecycle_support import StandInRemote, fast_provider

plan = load_plan(Path(sys.argv[1]))
go = Path(sys.argv[2])
Path(sys.argv[3]).touch()  # imports done
while not go.exists():
    time.sleep(0.01)
runtime = Runtime(remote=StandInRemote(nodes=[n.name for n in plan.nodes]), emit=JsonLines(),
                  provider_for=fast_provider,
                  timeouts=Timeouts(running_s=120, ready_s=60, deleted_s=60, interval_s=0.1, max_interval_s=0.2))
try:
    bring_up(plan, runtime)
except ProvisionerError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def plan_for(name: str, tmp_path: Path) -> Plan:
    """A plan the fake sells (instance type and region)."""
    if name == "lambda":
        return plans_for(LAMBDA_SPEC, tmp_path)[0]
    if name == "runpod":
        return runpod_plan(tmp_path)
    if name == "vastai":
        return next(p for p in plans_for(VAST_SPEC, tmp_path, count=20) if p.option.region == "US")
    return next(p for p in plans_for(FLUENCE_SPEC, tmp_path, count=10) if p.option.region == "dulles-usa-1")


class Up:
    """``bring_up`` in a child process, started on ``go()`` (after its imports, so two start together)."""

    def __init__(self, plan: Plan, folder: Path, env: dict[str, str] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        plan_path = folder / "plan.json"
        save_plan(plan, plan_path)
        self.go_path, self.ready = folder / "go", folder / "ready"
        with (folder / "stdout").open("w") as out, (folder / "stderr").open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(plan_path), str(self.go_path), str(self.ready)],
                cwd=ROOT,
                stdout=out,
                stderr=err,
                env={**os.environ, **(env or {})},
            )

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.ready.exists():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log()
            time.sleep(0.02)

    def go(self) -> None:
        self.wait_ready()
        self.go_path.touch()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL

    def wait(self, timeout_s: float = 180) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"child still running after {timeout_s}s: {self.log()}") from None

    def log(self) -> str:
        return (self.folder / "stderr").read_text(errors="replace")[-3000:]


@pytest.fixture(autouse=True)
def _env(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", name, SPEC_FILES[name])
    monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")
    monkeypatch.setenv("PROVISIONER_OWNER", "alice")


def in_flight(app: FakeApp, kind: str = "launch") -> int:
    return app.requests_in_flight.get(kind, 0)


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_sigkill_of_up_at_seeded_random_points_then_gc_yes_leaves_zero(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"{SEED}:{name}")
    plan = plan_for(name, tmp_path)
    nodes = len(plan.nodes)
    phases = ["launch", "wait-running"]
    rng.shuffle(phases)
    for run, phase in enumerate(phases):
        pause = rng.uniform(0.0, 0.4)
        nth = rng.randint(1, nodes)  # which launch request the kill lands in (one per node in these plans)
        where = f"seed {SEED}, {name}, run {run}: kill during {phase} (launch {nth}) after {pause:.2f}s"
        monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / f"state{run}"))
        with served_fake(name, monkeypatch) as (app, _server):
            app.latency_s = {"launch": 1.5} if phase == "launch" else {"list": 0.6}
            app.sleep = (killed := threading.Event()).wait  # the latency, cut short once the child is dead
            child = Up(plan, tmp_path / f"run{run}")
            child.go()
            if phase == "launch":
                assert app.wait_for(lambda a, n=nth: in_flight(a) > 0 and a.requests_started["launch"] >= n, 120), (
                    f"{where}: no launch came; {child.log()}"
                )
            else:
                assert app.wait_for(
                    lambda a: a.launched == nodes and in_flight(a) == 0 and in_flight(a, "list") > 0, 120
                ), f"{where}: never polled for the bought nodes; {child.log()}"
            time.sleep(pause)
            launching = in_flight(app)
            child.kill()
            killed.set()
            assert app.wait_for(lambda a: in_flight(a) == 0, 30)
            assert (launching > 0) == (phase == "launch"), f"{where}: the signal did not land where named"
            # Every launch request the fake received bought one instance (these plans' batches are of one:
            # Lambda's head and worker differ in user data) and the dead client deleted none.
            assert 1 <= app.requests_started["launch"] == app.launched == app.instance_count() <= nodes, where
            if phase == "wait-running":
                assert app.launched == nodes, where
            record = state.load_record(plan.cluster_id)
            assert record is not None and record.status == "creating"
            assert (record.expires_at is None) == (name != "lambda")
            app.latency_s = {}
            capsys.readouterr()
            assert main(["gc", "--provider", name, "--yes"]) == 0, capsys.readouterr().out
            out = capsys.readouterr().out
            assert "its up died while creating" in out, out
            assert app.instance_count() == 0, f"{where}: {out}"
            assert state.load_record(plan.cluster_id) is None


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_a_second_up_from_the_same_place_is_refused_naming_the_first(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_for(name, tmp_path)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    with served_fake(name, monkeypatch) as (app, _server):
        app.latency_s = {"launch": 4.0}  # held until the second up is refused (under the 5 s client timeout)
        app.sleep = (refused := threading.Event()).wait
        first, second = Up(plan, tmp_path / "first"), Up(plan, tmp_path / "second")
        first.go()
        assert app.wait_for(lambda a: in_flight(a) > 0, 120), first.log()
        second.go()
        assert second.wait() == 6, second.log()
        refused.set()
        lines = [line for line in second.log().splitlines() if line.strip()]
        assert len(lines) == 1 and f"cluster {plan.cluster_id} is held by up (pid {first.proc.pid} on " in lines[0]
        assert first.wait() == 0, first.log()
        assert app.launched == len(plan.nodes) and app.instance_count() == len(plan.nodes)
        assert main(["down", plan.cluster_id, "--engine", "direct"]) == 0
        assert app.instance_count() == 0


@pytest.mark.parametrize("name", ["lambda", "runpod", "vastai"])  # Fluence names have no room for a lease mark
def test_two_machines_one_owner_up_at_once_make_exactly_the_planned_nodes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_for(name, tmp_path)
    with served_fake(name, monkeypatch) as (app, _server):
        app.latency_s = {"launch": 1.0}
        ups = [
            Up(plan, tmp_path / f"m{i}", {"PROVISIONER_STATE_DIR": str(tmp_path / f"m{i}" / "state")}) for i in (0, 1)
        ]
        for up in ups:
            up.wait_ready()
        for up in ups:
            up.go_path.touch()
        codes = [up.wait() for up in ups]
        # The loser yields to the winner's lease (6), or on Vast may first find the planned ask rented by
        # the winner (4, nothing bought); either way its cleanup must not touch the winner's instance.
        assert sorted(codes) in ([0, 6], [0, 4] if name == "vastai" else [0, 6]), [up.log() for up in ups]
        winner = ups[codes.index(0)]
        monkeypatch.setenv("PROVISIONER_STATE_DIR", str(winner.folder / "state"))
        record = state.load_record(plan.cluster_id)
        assert record is not None and record.status == "up" and LeaseMark.parse(record.lease_id) is not None
        live = [n for n in fast_provider(name).get_nodes(plan.cluster_id) if n.status.value in ("pending", "running")]
        assert sorted(n.id for n in live) == sorted(record.node_ids.values()), "the winner's nodes, untouched"
        assert {n.lease for n in live} == {record.lease_id} and app.instance_count() == len(plan.nodes)
        assert main(["down", plan.cluster_id, "--engine", "direct"]) == 0
        assert app.instance_count() == 0


def plant(name: str, app: FakeApp, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """As alice: one node of cluster ``shared``; a node of ``shared`` without an owner mark (the
    tool's older version, or a hand-made copy); the user's own instance (``research/notebook`` on
    Vast, ``research-box`` on Fluence). Returns {what: instance id}."""
    harness = load_harness(name)
    adapter = fast_provider(name)
    (mine,) = adapter.create_nodes("shared", harness.node_specs(1, "n"))
    planted = {"alice": mine.id}
    if name in ("lambda", "runpod"):
        (bare,) = adapter.create_nodes("shared", harness.node_specs(2, "n"))[1:]
        strip_owner(name, app, bare.id)
        planted["unmarked"] = bare.id
    (own,) = adapter.create_nodes("research", harness.node_specs(1, "notebook"))
    if name == "vastai":
        app.instances[int(own.id)]["label"] = "research/notebook"  # type: ignore[attr-defined]
    elif name == "fluence":
        app.instances[own.id]["name"] = "research-box"  # type: ignore[attr-defined]
    else:
        strip_owner(name, app, own.id)
    planted["users-own"] = own.id
    return planted


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_gc_and_down_leave_other_owners_and_unmarked_instances_untouched(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    with served_fake(name, monkeypatch) as (app, _server):
        planted = plant(name, app, monkeypatch)
        alive = app.instance_count()
        assert alive == len(planted)
        monkeypatch.setenv("PROVISIONER_OWNER", "bob")  # a colleague, or this user on another machine
        for argv in (
            ["gc", "--provider", name, "--yes"],
            ["gc", "--provider", name, "--cluster", "shared", "--yes"],
            ["gc", "--provider", name, "--cluster", "research", "--yes"],
            ["down", "shared", "--provider", name, "--engine", "direct"],
            ["down", "research", "--provider", name, "--engine", "direct"],
        ):
            code = main(argv)
            assert code == 0 and app.instance_count() == alive, (argv, capsys.readouterr())
        if "unmarked" in planted:
            assert main(["gc", "--provider", name, "--cluster", "shared", "--force-unowned", "--yes"]) == 0
            assert app.instance_count() == alive - 1, "only the unmarked node went; alice's stayed"
            alive -= 1
        monkeypatch.setenv("PROVISIONER_OWNER", "alice")
        assert main(["down", "shared", "--provider", name, "--engine", "direct"]) == 0
        assert app.instance_count() == alive - 1, "alice's own down removes hers"
        live = {n.id for n in fast_provider(name).get_nodes("research") if n.status.value in ("pending", "running")}
        if name not in ("fluence",):
            assert planted["users-own"] in live
        capsys.readouterr()
