"""The local twin is sealed (issue 27 items 2 and 3): a cluster brought up with ``up --local`` is marked
local in its record and the ledger, and ``down`` (twice), ``status``, ``watch``, ``validate``, ``ssh``,
``gc`` and ``costs`` on it never ask a real provider, whatever keys and URLs are set: every provider's
URL points at a trap on 127.0.0.1 that counts what reaches it. An ``up`` against a plain fake refuses
before buying.

The lab here is in process (no boot): its record names a fake served on 127.0.0.1 that says its nodes
boot, and a process of ours as its pid; the commands run through ``main`` with the stand-in remote.
Booting real nodes: tests/boot/test_boot_local.py."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support, ledger, state
from provisioner.local import lab
from provisioner.testing.fakes import make_fake, serve
from tests.conftest import need_shared
from tests.fast_limits import fast_limits
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, served_fake

CLUSTER = "lc-twin"
SPEC = LAMBDA_SPEC.replace("lc-lambda", CLUSTER)
PROVIDERS = ("aws", "gcp", "lambda", "runpod", "vastai", "fluence")
REAL_LOOKING_KEYS = {
    "LAMBDA_API_KEY": "secret_lambda_0123456789abcdef0123456789abcdef",
    "RUNPOD_API_KEY": "rpa_0123456789ABCDEF0123456789ABCDEF01234567",
    "VAST_API_KEY": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "FLUENCE_API_KEY": "fl_0123456789abcdef0123456789abcdef",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_GCE_CHECK": "True",
}


class _Trap(BaseHTTPRequestHandler):
    hits: list[str] = []

    def _any(self) -> None:
        type(self).hits.append(f"{self.command} {self.path}")
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def trap(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Real-looking keys for every provider and every provider's URL at a trap that counts requests."""
    _Trap.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trap)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for name, value in REAL_LOOKING_KEYS.items():
        monkeypatch.setenv(name, value)
    for name in PROVIDERS:
        monkeypatch.setenv(f"PROVISIONER_{name.upper()}_API_URL", url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("GCE_METADATA_HOST", url.removeprefix("http://"))
    try:
        yield _Trap.hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    return tmp_path / "state"


class InProcessLab:
    """A lab as ``up --local`` finds one running: its record names a lambda fake on 127.0.0.1 whose
    nodes (it says) boot, and a process of ours (``sleep``, reaped here once the lab is stopped)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from provisioner.local import nodes
        from provisioner.providers import registry

        monkeypatch.setattr(registry, "get_provider", fast_limits(registry.get_provider))
        monkeypatch.setattr(nodes, "join_netns", lambda where: None)  # no namespace in process
        monkeypatch.setattr(lab, "require_host", lambda: None)  # no systemd-nspawn needed: nothing boots
        for variable in ("PROVISIONER_LAMBDA_API_URL", "PROVISIONER_LAMBDA_API_KEY"):  # lab.enter sets them
            monkeypatch.setenv(variable, os.environ.get(variable, ""))  # restored after the test
        self.app = make_fake("lambda", api_key=lab.API_KEY)
        self.app.boots_nodes = True
        self.server = serve(self.app)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["sleep", "600"])
        self.reaper = threading.Thread(target=self.proc.wait, daemon=True)  # reaped the moment it is stopped
        self.reaper.start()
        path = lab._record_path(CLUSTER)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"pid": self.proc.pid, "netns": "pvl-twin", "url": self.server.url, "provider": "lambda"}
        path.write_text(json.dumps({**record, "cluster": CLUSTER, "network": lab.NETWORK, "workdir": "/nonexistent"}))

    def stopped(self) -> bool:
        """Whether the lab process has ended. Not ``proc.poll()``: while the reaper thread is in
        ``wait()`` (or has just learnt that ``lab.stop`` reaped it), ``poll()`` answers None."""
        self.reaper.join(timeout=10)
        return self.proc is not None and not self.reaper.is_alive()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        self.server.stop()


@pytest.fixture
def twin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[InProcessLab]:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    twin = InProcessLab(monkeypatch)
    runtimes: list[Any] = []

    def runtime(emit: Any, interrupts: bool = True) -> Any:
        rt = instant_runtime(StandInRemote(nodes=[f"{CLUSTER}-0", f"{CLUSTER}-1"]), emit=emit)
        runtimes.append(rt)
        return rt

    monkeypatch.setattr(command_support, "runtime", runtime)
    (tmp_path / "spec.yaml").write_text(SPEC)
    try:
        yield twin
    finally:
        twin.close()
    assert twin.app.validation_errors == []


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return code, out, err


def test_the_newcomer_journey_on_the_local_twin_never_reaches_a_real_provider(
    trap: list[str], twin: InProcessLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin.start()
    spec = str(tmp_path / "spec.yaml")
    code, out, err = _run(capsys, "up", spec, "--local", "--json")
    assert code == 0, err
    record = state.load_record(CLUSTER)
    assert record is not None and record.local and record.run_id is not None
    (entry,) = [e for e in ledger.read() if e["kind"] == "cluster" and e.get("status") == "up"]
    assert (entry["local"], entry["run"]) == (True, record.run_id)
    assert twin.app.launched == 2  # bought at the lab's fake, nowhere else

    code, out, _ = _run(capsys, "status", CLUSTER, "--json")
    assert code == 0 and json.loads(out)["local"] is True
    assert _run(capsys, "watch", CLUSTER, "--once")[0] == 0
    assert _run(capsys, "validate", CLUSTER, "--no-burnin")[0] in (0, 10, 11)  # the stand-in's answers
    code, out, _ = _run(capsys, "ssh", CLUSTER, "--print")  # runs from the host: into the lab's namespace
    assert code == 0 and out.startswith("ip netns exec pvl-twin ssh ") and " ml@" in out, out
    code, out, _ = _run(capsys, "gc", "--cluster", CLUSTER)
    assert code == 0, out

    code, out, err = _run(capsys, "down", CLUSTER, "--json")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    (cost,) = [e for e in events if e["event"] == "cost"]
    assert "billed" not in cost and cost["local"] is True and "NOT within" not in cost["message"]
    assert twin.app.instance_count() == 0 and twin.stopped()  # lab stopped
    code, out, err = _run(capsys, "down", CLUSTER)  # again: the lab is gone, nothing is asked of anyone
    assert code == 0 and "nothing left of cluster lc-twin (a local dry run" in out + err, out + err

    code, out, _ = _run(capsys, "costs", "-f", "json")
    (row,) = json.loads(out)["rows"]
    assert (row["key"], row["cluster"], row["local"], row["status"]) == (record.run_id, CLUSTER, True, "removed")
    code, out, _ = _run(capsys, "costs")
    head, spending = out.splitlines()[0], out.split("dry runs")[0]
    assert head.split()[:2] == ["run", "cluster"] and CLUSTER not in spending and "dry runs (up --local" in out
    assert trap == []


def test_a_local_cluster_whose_lab_died_is_answered_here_and_never_asked_of_a_provider(
    trap: list[str], twin: InProcessLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin.start()
    assert _run(capsys, "up", str(tmp_path / "spec.yaml"), "--local")[0] == 0
    twin.kill()  # the lab is gone (killed, or the machine restarted): its nodes went with it

    code, out, _ = _run(capsys, "status", CLUSTER)
    assert code == 0 and "local dry run" in out and "lab is not running" in out
    for argv in (("watch", CLUSTER, "--once"), ("validate", CLUSTER), ("ssh", CLUSTER, "--print")):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "local dry run and its lab is not running" in err, (argv, err)
    code, out, _ = _run(capsys, "gc", "--cluster", CLUSTER)
    assert code == 0 and "nothing of it exists at any provider" in out and state.load_record(CLUSTER) is not None
    code, out, err = _run(capsys, "down", CLUSTER)
    assert code == 0 and "(local dry run) is down" in out + err and state.load_record(CLUSTER) is None
    assert _run(capsys, "down", CLUSTER)[0] == 0
    assert trap == []


def test_up_against_a_plain_fake_refuses_before_buying(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    (tmp_path / "spec.yaml").write_text(LAMBDA_SPEC)
    with served_fake("lambda", monkeypatch) as (app, server):
        code, _out, err = _run(capsys, "up", str(tmp_path / "spec.yaml"), "--engine", "direct")
        assert code == 2 and err.splitlines()[0].startswith("engine: direct") and err.count("\n") == 2, err
        assert f"PROVISIONER_LAMBDA_API_URL ({server.url}) is the tool's fake lambda provider" in err
        assert "nothing was bought" in err and "provisioner up SPEC --local" in err
        assert app.launched == 0 and state.load_record("lc-lambda") is None
        app.boots_nodes = True  # a node-backed fake (the lab's, the boot tests'): up goes on to buy
        code, _out, err = _run(capsys, "up", str(tmp_path / "spec.yaml"), "--engine", "direct")
        assert app.launched == 2 and "documentation (TEST-NET)" in err  # its nodes here are still TEST-NET
        assert _run(capsys, "down", "lc-lambda")[0] == 0


def test_the_seal_refuses_every_other_provider_and_pins_the_labs_url(
    trap: list[str], twin: InProcessLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.errors import UsageError
    from provisioner.providers import registry, seal

    twin.start()
    try:
        assert lab.enter(CLUSTER)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", "http://127.0.0.1:9/")  # set after: the seal wins
        adapter: Any = registry.get_provider("lambda")
        assert adapter.base_url == twin.server.url
        for name in ("aws", "gcp", "runpod", "vastai", "fluence"):
            with pytest.raises(UsageError, match=f"cluster {CLUSTER} is a local dry run: no real provider is asked"):
                registry.get_provider(name)
        seal.seal_to(CLUSTER)  # a dry run whose lab is gone: not even its own provider
        with pytest.raises(UsageError, match="its lab is not running here"):
            registry.get_provider("lambda")
    finally:
        seal.unseal()
    assert trap == []


def test_burst_local_runs_the_job_on_the_labs_nodes_and_leaves_nothing(
    trap: list[str], twin: InProcessLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin.start()
    code, out, err = _run(
        capsys, "burst", str(tmp_path / "spec.yaml"), "--local", "--skip-validation", "--", "hostname"
    )
    assert code == 0, err
    assert "hello from the job" in out + err  # the stand-in's job output, streamed
    assert twin.app.launched == 2 and twin.app.instance_count() == 0  # bought at the lab's fake, all deleted
    assert twin.stopped()  # the lab is stopped with the job
    (row,) = ledger.rows(ledger.read())
    assert (row.cluster, row.local, row.status) == (CLUSTER, True, "removed") and row.run is not None
    assert state.load_record(CLUSTER) is None and trap == []


def test_ssh_from_is_the_one_flag_a_spec_without_allowed_cidrs_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    closed = tmp_path / "closed.yaml"
    closed.write_text(LAMBDA_SPEC.replace("access: {allowed_cidrs: [198.51.100.0/24]}\n", ""))
    assert "allowed_cidrs" not in closed.read_text()
    code, _out, err = _run(capsys, "up", str(closed), "--engine", "direct")  # the secure default: refused
    assert code == 2 and "access.allowed_cidrs: not set" in err and "--ssh-from 203.0.113.7/32" in err, err
    code, _out, err = _run(capsys, "up", str(closed), "--engine", "direct", "--ssh-from", "not-a-cidr")
    assert code == 2 and "--ssh-from" in err and "'not-a-cidr' is not an address or CIDR" in err, err
    remote = StandInRemote(nodes=["lc-lambda-0", "lc-lambda-1"], healthy=True)
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.boots_nodes = True  # as the lab's fake: up's question to it lets the purchase through
        argv = ("burst", str(closed), "--ssh-from", "192.0.2.7", "--skip-validation", "--", "hostname")
        code, _out, err = _run(capsys, *argv)
        assert code == 0, err
        sent = [e.texts()[0] for e in app.exchanges if e.method == "POST" and "firewall-rulesets" in e.path]
        assert sent and all('"192.0.2.7/32"' in body for body in sent), sent  # the provider's firewall admits it
        assert app.instance_count() == 0


EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_every_example_has_options_a_local_dry_run_boots(example: Path, tmp_path: Path) -> None:
    from tests.test_lifecycle_support import plans_for

    ranked = plans_for(example.read_text(), tmp_path, count=lab.LOCAL_RANKED)
    chosen = lab.local_options(ranked, 3)
    fakes = lab.backed_fakes()
    assert chosen and all(p.option.purchase in fakes[p.option.provider].purchases for p in chosen)
    fitted = lab.fit_to_host(chosen[0])
    assert fitted.spec.access.allowed_cidrs == [f"{lab.OPERATOR}/32"]  # SSH from the lab only, whatever the spec


def test_the_lab_relays_its_steps_and_the_image_build_says_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import provisioner.local.image as image

    log = tmp_path / "lab.log"
    log.write_bytes(b"lab x: node image: building\nlab x: half a li")
    offset, lines = lab.relay(log, 0)
    assert lines == ["lab x: node image: building"] and offset == len(b"lab x: node image: building\n")
    with log.open("ab") as handle:
        handle.write(b"ne\n\n" + b"y" * 300 + b"\n")
    offset, lines = lab.relay(log, offset)
    assert lines == ["lab x: half a line", "y" * 200] and offset == log.stat().st_size
    assert lab.relay(log, offset) == (offset, [])

    def no_mmdebstrap(argv: list[str], **_: Any) -> None:
        raise subprocess.CalledProcessError(1, argv)

    monkeypatch.setattr(image.subprocess, "run", no_mmdebstrap)
    said: list[str] = []
    with pytest.raises(subprocess.CalledProcessError):
        image.build_image(tmp_path / "images", say=said.append)
    count = len(image.IMAGE_PACKAGES)
    assert said == [
        f"node image: building Debian {image.SUITE} with {count} packages (mmdebstrap; minutes the first time)"
    ]  # said before the minutes-long step, so up --local shows it at once
