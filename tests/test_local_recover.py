"""``burst --local --recover anywhere`` without nodes (issue 30): the lab that serves every node-backed
fake (its record, ``enter``, and the seal that lets each served provider through at its lab URL and
refuses every other), the moved cluster (``NAME-m1``) that finds the run's lab, ``down`` that keeps
the lab while the run's other cluster is up, the move's planner for a local run, and the CLI: the
burst moves from the Lambda fake to the RunPod fake inside one lab and leaves nothing; a spec
without ``checkpoint.remote`` is refused in one line before any lab starts.

The lab here is in process (no boot), as in tests/test_local_sealed.py: its record names fakes served
on 127.0.0.1 that say their nodes boot, and a process of ours as its pid."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import PlanError, UsageError
from provisioner.lifecycle import command_support, state
from provisioner.lifecycle.burst_recover import catalog_planner, local_planner
from provisioner.lifecycle.recover import replan_spec, same_option
from provisioner.loader import load_spec
from provisioner.local import lab, labrecord
from provisioner.providers import registry, seal
from provisioner.testing.fakes import make_fake, serve
from tests.conftest import need_shared
from tests.fast_limits import fast_limits
from tests.test_heal import SchedulerRemote
from tests.test_lifecycle_support import instant_runtime
from tests.test_local_sealed import _run, trap  # noqa: F401  (a fixture)
from tests.test_recover import SOLD, SPEC

CLUSTER = "mv"  # tests/test_recover.py's spec: 2 nodes of 8x H100 on lambda or runpod, checkpoint in S3
SERVED = ("fluence", "lambda", "runpod")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    need_shared("provider-apis", "fluence")


class RunLab:
    """A lab as ``burst --local --recover anywhere`` finds one running: one record naming a fake per
    node-backed provider on 127.0.0.1 (each says its nodes boot) and a process of ours as its pid."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from provisioner.local import nodes

        monkeypatch.setattr(registry, "get_provider", fast_limits(registry.get_provider))
        monkeypatch.setattr(nodes, "join_netns", lambda where: None)  # no namespace in process
        monkeypatch.setattr(lab, "require_host", lambda: None)  # nothing boots
        for name in SERVED:  # lab.enter sets them; restored after the test
            for suffix in ("API_URL", "API_KEY"):
                variable = f"PROVISIONER_{name.upper()}_{suffix}"
                monkeypatch.setenv(variable, os.environ.get(variable, ""))
        self.apps = {name: make_fake(name, api_key=lab.API_KEY) for name in SERVED}
        for app in self.apps.values():
            app.boots_nodes = True
        self.servers = {name: serve(app) for name, app in self.apps.items()}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def urls(self) -> dict[str, str]:
        return {name: server.url for name, server in self.servers.items()}

    def start(self) -> None:
        self.proc = subprocess.Popen(["sleep", "600"])
        threading.Thread(target=self.proc.wait, daemon=True).start()  # reaped the moment it is stopped
        record = {"pid": self.proc.pid, "netns": "pvl-run", "url": self.urls["lambda"], "provider": "lambda"}
        labrecord.write(CLUSTER, {**record, "fakes": self.urls, "cluster": CLUSTER, "network": lab.NETWORK})

    def running(self) -> bool:
        """The lab's process exists and has not exited (a zombie waiting for the reaper has). Not
        ``proc.poll()``: while the reaper thread is in ``wait()``, ``poll()`` answers None."""
        if self.proc is None:
            return False
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def close(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()
        for server in self.servers.values():
            server.stop()


@pytest.fixture
def run_lab(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunLab]:
    found = RunLab(monkeypatch)
    try:
        yield found
    finally:
        seal.unseal()
        found.close()
    assert [e for app in found.apps.values() for e in app.validation_errors] == []


def test_a_lab_of_every_fake_points_each_served_provider_at_its_fake_and_refuses_the_rest(
    trap: list[str],  # noqa: F811
    run_lab: RunLab,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_lab.start()
    assert lab.enter(CLUSTER)
    for name, url in run_lab.urls.items():
        prefix = f"PROVISIONER_{name.upper()}"
        assert (os.environ[f"{prefix}_API_URL"], os.environ[f"{prefix}_API_KEY"]) == (url, lab.API_KEY)
        monkeypatch.setenv(f"{prefix}_API_URL", "http://127.0.0.1:9/")  # set after: the seal wins
        adapter: Any = registry.get_provider(name)
        assert adapter.base_url == url
    assert len(set(run_lab.urls.values())) == len(SERVED)  # each fake on its own port
    for name in ("aws", "gcp", "vastai"):
        with pytest.raises(UsageError) as refused:
            registry.get_provider(name)
        assert str(refused.value) == (
            "cluster mv is a local dry run: no real provider is asked (its lab's fluence, lambda and runpod fakes only)"
        )
    assert trap == []


def test_a_single_provider_seal_still_says_its_one_fake() -> None:
    try:
        seal.seal_to("lc", {"lambda": "http://127.0.0.1:1"})
        assert seal.check("lambda") == "http://127.0.0.1:1"
        with pytest.raises(
            seal.SealedError, match=r"^cluster lc is a local dry run: .*\(its lab's lambda fake only\)$"
        ):
            seal.check("runpod")
        seal.seal_to("lc")
        with pytest.raises(seal.SealedError, match="its lab is not running here, so nothing is"):
            seal.check("lambda")
    finally:
        seal.unseal()


def test_a_moved_cluster_finds_the_runs_lab_and_the_lab_stops_once_nothing_of_the_run_is_left(
    run_lab: RunLab,
) -> None:
    run_lab.start()
    labrecord.adopt("mv-m1", CLUSTER)
    assert labrecord.served(CLUSTER) == [CLUSTER, "mv-m1"]
    assert lab.lab_for("mv-m1") == lab.lab_for(CLUSTER) is not None
    assert lab.enter("mv-m1")
    sealed = seal.sealed()
    assert sealed is not None and (sealed.cluster, dict(sealed.urls)) == ("mv-m1", run_lab.urls)

    # ``down mv`` while mv-m1 is up: the lab keeps running, mv-m1 still finds it
    assert lab.release(CLUSTER, in_use=lambda cluster: cluster == "mv-m1") is False
    assert run_lab.running() and lab.lab_for("mv-m1") is not None
    # ``down mv-m1`` with nothing else of the run up: the lab stops, its record and the alias go
    assert lab.release("mv-m1", in_use=lambda cluster: False) is True
    assert not run_lab.running()
    assert sorted(p.name for p in labrecord.labs_dir().glob("*.json")) == []
    assert lab.lab_for("mv-m1") is None and lab.release("mv-m1", in_use=lambda cluster: False) is True


def test_an_alias_of_a_stopped_lab_is_dropped(run_lab: RunLab) -> None:
    run_lab.start()
    labrecord.adopt("mv-m2", CLUSTER)
    run_lab.close()  # the lab died (killed, or the machine restarted)
    assert lab.lab_for("mv-m2") is None and not labrecord.record_path("mv-m2").exists()


def test_the_local_planner_keeps_the_labs_fakes_fits_to_the_host_and_adopts_the_new_cluster(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.yaml")
    moved = replan_spec(spec, "mv-m1", 3.5, 15.0, "lambda")
    raw = list(catalog_planner(keep=lab.LOCAL_RANKED)(moved))
    assert {p.option.provider for p in raw} == {"lambda", "runpod"}  # the spec allows both

    planned = list(local_planner(CLUSTER, ["runpod"])(moved))
    assert planned and {p.option.provider for p in planned} == {"runpod"}  # lambda is not served
    assert [p.option.instance_type for p in planned] == [
        p.option.instance_type for p in raw if p.option.provider == "runpod"
    ]
    kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line)
    for plan in planned:
        assert plan.cluster_id == "mv-m1" and plan.spec.checkpoint.restore is not None
        offer = plan.option.offer
        assert (offer.vcpus, offer.memory_gib, offer.local_nvme_gib) == (os.cpu_count(), kib // 1024**2, 0)
        assert plan.spec.access.allowed_cidrs == ["10.80.0.254/32"]  # SSH from the lab only
    assert json.loads(labrecord.record_path("mv-m1").read_text()) == {"lab": CLUSTER}

    # The Mover leaves out the options that had no capacity by their offer: a fitted plan is still
    # the same option as the plan that failed, so it is left out.
    both = list(local_planner(CLUSTER, ["lambda", "runpod"])(moved))
    failed = next(p for p in raw if p.option.provider == "lambda")
    kept = [p for p in both if not same_option(p, failed)]
    assert len(kept) == len(both) - 1 and all(not same_option(p, failed) for p in kept)


def test_the_local_planner_says_when_no_option_boots_behind_the_labs_fakes(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    moved = replan_spec(load_spec(tmp_path / "spec.yaml"), "mv-m1", 3.5, 15.0, "lambda")
    with pytest.raises(PlanError, match="none of mv-m1's options boots behind the lab's fluence fakes"):
        local_planner(CLUSTER, ["fluence"])(moved)
    assert not labrecord.record_path("mv-m1").exists()


def sold_catalog(path: Path) -> Path:
    """The bundled catalog's 8x H100 offers where the fakes sell them (tests/test_recover.py), RunPod's
    Instant Cluster priced above Lambda so the run starts on Lambda."""
    doc = json.loads((Path(lab.__file__).parents[1] / "data" / "catalog.json").read_text())
    doc["offers"] = [o for o in doc["offers"] if (o["provider"], o["region"]) in SOLD and o["gpus"] == 8]
    for offer in doc["offers"]:
        if offer["provider"] == "runpod":
            offer["price_per_hour_usd"] = 33.0
    path.write_text(json.dumps(doc))
    return path


def test_burst_local_recover_anywhere_moves_the_run_to_another_fake_in_the_same_lab(
    trap: list[str],  # noqa: F811
    run_lab: RunLab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_lab.start()
    lam, rp = run_lab.apps["lambda"], run_lab.apps["runpod"]
    (tmp_path / "spec.yaml").write_text(SPEC)
    catalog = sold_catalog(tmp_path / "catalog.json")
    runs = [0]
    gone = threading.Event()
    seen: list[str] = []
    found: list[tuple[list[str], bool, bool]] = []

    def job() -> None:
        runs[0] += 1
        if runs[0] == 1:  # Lambda sells no more H100s and reclaims a node; the job hangs until the move
            for regions in lam.capacity.values():  # type: ignore[attr-defined]
                regions.clear()
            victim = next(iid for iid, body in lam.instances.items() if body["name"].endswith("mv-1"))  # type: ignore[attr-defined]
            lam.set_status(victim, "preempted")  # type: ignore[attr-defined]
            gone.wait(60)

    remote = SchedulerRemote(nodes=["mv-0", "mv-1"], healthy=True, on_job=job)

    def runtime(emit: Any, interrupts: bool = True) -> Any:
        def on_event(event: str, /, *, message: str, **fields: Any) -> None:
            emit(event, message=message, **fields)
            seen.append(event)
            if event == "move":  # the new cluster's nodes answer sinfo from now on
                remote.nodes = [f"{fields['to_cluster']}-0", f"{fields['to_cluster']}-1"]
            if event == "move-left":
                gone.set()
            if event == "moved":  # the new cluster: planned for the lab (fitted to this host) and found in it
                record = state.load_record(fields["cluster"])
                assert record is not None and record.local
                fitted = record.plan.option.offer.vcpus == os.cpu_count()
                found.append(
                    (record.plan.spec.access.allowed_cidrs, fitted, lab.lab_for(fields["cluster"]) is not None)
                )

        return instant_runtime(remote, emit=on_event)

    monkeypatch.setattr(command_support, "runtime", runtime)
    starts: list[Any] = []
    real_start = lab.start
    monkeypatch.setattr(lab, "start", lambda *args, **kwargs: starts.append(args[1]) or real_start(*args, **kwargs))
    argv = ("burst", str(tmp_path / "spec.yaml"), "--local", "--recover", "anywhere", "--catalog", str(catalog))
    code, out, err = _run(capsys, *argv, "--skip-validation", "--json", "--", "sbatch", "train.sh")
    gone.set()
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    (move,) = [e for e in events if e["event"] == "move"]
    (moved,) = [e for e in events if e["event"] == "moved"]
    assert (move["cluster"], move["to_cluster"], move["provider"]) == ("mv", "mv-m1", "runpod")
    assert (moved["cluster"], moved["provider"]) == ("mv-m1", "runpod")
    assert [e["cluster"] for e in events if e["event"] == "job"] == ["mv", "mv-m1"]
    assert found == [([f"{lab.OPERATOR}/32"], True, True)]
    assert starts == [sorted(SERVED)]  # the lab serves every node-backed fake, not only the first option's
    assert lam.launched == 2 and rp.instance_count() == 0 and lam.instance_count() == 0  # type: ignore[attr-defined]
    assert not run_lab.running() and list(labrecord.labs_dir().glob("*.json")) == []  # lab and alias gone
    assert state.load_record("mv") is None and state.load_record("mv-m1") is None
    assert trap == []


def test_recover_anywhere_without_a_remote_checkpoint_is_refused_before_the_lab_starts(
    run_lab: RunLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[str] = []
    monkeypatch.setattr(lab, "start", lambda *args, **kwargs: started.append("lab"))
    (tmp_path / "spec.yaml").write_text(
        SPEC.replace("checkpoint: {remote: s3://ckpt-bucket/runs/mv, size_gb: 200}\n", "")
    )
    argv = ("burst", str(tmp_path / "spec.yaml"), "--local", "--recover", "anywhere", "--", "sbatch", "train.sh")
    code, _out, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1, err
    assert "--recover" in err and "checkpoint.remote" in err and "nothing was bought" in err
    assert started == []


def test_a_running_lab_without_a_fake_the_run_needs_is_refused_in_one_line(run_lab: RunLab) -> None:
    run_lab.start()
    record = {**labrecord._read(labrecord.record_path(CLUSTER)), "fakes": {"lambda": run_lab.urls["lambda"]}}  # type: ignore[dict-item]
    labrecord.write(CLUSTER, record)  # as up --local (one provider) left it running
    assert lab.start(CLUSTER, "lambda")["pid"] == record["pid"]
    with pytest.raises(
        UsageError,
        match="the local lab of mv runs without a fake for fluence, runpod: provisioner down mv stops it, then run",
    ):
        lab.start(CLUSTER, ["lambda", "runpod", "fluence"])


def test_status_gc_and_down_of_a_moved_cluster_go_through_the_runs_lab_only(
    trap: list[str],  # noqa: F811
    run_lab: RunLab,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import datetime as dt

    run_lab.start()
    (tmp_path / "spec.yaml").write_text(SPEC)
    moved = replan_spec(load_spec(tmp_path / "spec.yaml"), "mv-m1", 3.5, 15.0, "lambda")
    plan = local_planner(CLUSTER, list(SERVED))(moved)[0]
    now = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    state.save_record(
        state.ClusterRecord(
            cluster_id="mv-m1", provider=plan.option.provider, engine="direct", plan=plan, created_at=now, local=True
        )
    )
    code, out, _ = _run(capsys, "status", "mv-m1", "--json")
    assert code == 0 and json.loads(out)["local"] is True
    code, out, _ = _run(capsys, "gc", "--cluster", "mv-m1")
    assert code == 0 and out.splitlines()[0] == "checked: fluence, lambda, runpod", out  # the lab's fakes, no other
    assert all(app.exchanges for app in run_lab.apps.values())
    code, out, err = _run(capsys, "down", "mv-m1")
    assert code == 0 and "local: the lab of mv-m1 is stopped" in out + err, out + err
    assert (
        not run_lab.running() and list(labrecord.labs_dir().glob("*.json")) == []
    )  # mv has no record: the run is over
    assert trap == []


def test_a_backed_lambda_fake_reclaims_an_instance_through_its_control_route(tmp_path: Path) -> None:
    from werkzeug.test import Client

    from provisioner.local.backed import BackedLambdaFake, Machines

    class NoBoot(Machines):
        def stop(self, instance_id: str) -> None:
            self.stopped_ids.append(instance_id)

    machines = NoBoot(tmp_path, tmp_path, None)  # type: ignore[arg-type]
    machines.stopped_ids = []  # type: ignore[attr-defined]
    app = BackedLambdaFake(machines, api_key=lab.API_KEY)
    app.instances["i-0123"] = {"id": "i-0123", "status": "active", "name": "mv-mv-1"}  # type: ignore[attr-defined]
    client = Client(app)
    answer = client.post("/_fake/reclaim", json={"instance_id": "i-0123"})
    assert (answer.status_code, answer.json) == (200, {"ok": True, "instance_id": "i-0123"})
    assert app.instances["i-0123"]["status"] == "preempted" and machines.stopped_ids == ["i-0123"]  # type: ignore[attr-defined]
    assert client.post("/_fake/reclaim", json={"instance_id": "i-nope"}).status_code == 404
    assert client.get("/_fake/about").json["boots_nodes"] is True  # every other control route as before


def test_a_lab_this_process_started_is_reaped_when_stopped() -> None:
    # burst --local starts its lab and stops it: the exited lab stays this process's zombie, which
    # signal 0 still finds; stop reaps it instead of waiting out its timeout ("did not stop", exit 5).
    proc = subprocess.Popen(["sleep", "600"])  # no reaper: as lab.start leaves its child
    try:
        labrecord.write(CLUSTER, {"pid": proc.pid, "netns": "pvl-x", "cluster": CLUSTER, "fakes": {"lambda": "x"}})
        assert lab.stop(CLUSTER, timeout_s=5) is True
        assert not Path(f"/proc/{proc.pid}").exists() and lab.lab_for(CLUSTER) is None
    finally:
        if Path(f"/proc/{proc.pid}").exists():
            proc.kill()
        proc.poll()  # reaped by stop: Popen learns it (ECHILD) and does not warn of a running child


def test_watch_moves_a_local_cluster_within_its_lab_only(run_lab: RunLab, tmp_path: Path) -> None:
    """``watch CLUSTER --recover anywhere`` on a local dry run: the move is planned over the fakes its
    lab serves, fitted to this machine, and the new cluster is local too (was: the whole catalog)."""
    from provisioner.lifecycle.heal_rules import HealOptions
    from provisioner.lifecycle.realize import bring_up
    from provisioner.lifecycle.watch import _mover

    run_lab.start()
    assert lab.enter(CLUSTER)
    (tmp_path / "spec.yaml").write_text(SPEC)
    catalog = sold_catalog(tmp_path / "catalog.json")
    first = next(
        p for p in catalog_planner(catalog)(load_spec(tmp_path / "spec.yaml")) if p.option.provider == "lambda"
    )
    remote = SchedulerRemote(nodes=[n.name for n in first.nodes], healthy=True)
    rt = instant_runtime(remote)
    record = bring_up(lab.fit_to_host(first), rt, local=True)
    mover = _mover(rt, record, remote, catalog, None, HealOptions())
    assert mover.local
    moved = replan_spec(record.plan.spec, "mv-m1", 3.0, 15.0, "lambda")
    planned = list(mover.planner(moved))
    assert {p.option.provider for p in planned} == {"lambda", "runpod"}  # what the lab serves and the spec allows
    assert all(
        p.option.offer.vcpus == os.cpu_count() and p.spec.access.allowed_cidrs == [f"{lab.OPERATOR}/32"]
        for p in planned
    )
    assert json.loads(labrecord.record_path("mv-m1").read_text()) == {"lab": CLUSTER}

    run_lab.close()  # its lab stopped: nothing to move to
    with pytest.raises(UsageError, match="is a local dry run whose lab is not running"):
        _mover(rt, record, remote, catalog, None, HealOptions())
