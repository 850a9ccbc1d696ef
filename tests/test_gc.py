"""``provisioner gc`` against the fakes: what is collected, what is kept, exit codes, skipped providers.

The adapters talk to the fakes in process (``FakeTransport``); the CLI test serves the Lambda
fake on 127.0.0.1 and finds it through ``PROVISIONER_LAMBDA_API_URL``. Local records are
built in memory (gc takes them as an argument) except where the state dir is the point.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import state
from provisioner.lifecycle.gc import collect_garbage
from provisioner.lifecycle.state import ClusterRecord
from provisioner.providers import registry
from provisioner.providers.base import Provider
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.ownership import LeaseMark, host_slug, place_slug
from provisioner.testing.fakes.base import FakeApp, FakeTransport, serve
from tests.providers.contract import load_harness, neocloud_names
from tests.providers.harness import Harness

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
FAST = RetryPolicy(attempts=3, base_delay_s=0.0, max_delay_s=0.0, sleep=lambda _: None)
UNLIMITED = RateLimits(1e6, 1e6, 1e6, 1e6)
NEOCLOUD_KEYS = ("LAMBDA_API_KEY", "RUNPOD_API_KEY", "VAST_API_KEY", "FLUENCE_API_KEY")


@dataclass
class Rig:
    harness: Harness
    provider: Provider

    @property
    def fake(self) -> FakeApp:
        return self.harness.app


def rig_for(name: str) -> Rig:
    harness = load_harness(name)
    provider = harness.make_provider(
        api_key=harness.api_key,
        base_url=f"http://{name}.test",
        transport=FakeTransport(harness.app),
        limits=UNLIMITED,
        timeout_s=5.0,
        retry=FAST,
    )
    return Rig(harness, provider)


DEAD_PID = 2**22 + 12345  # above the default pid_max: no such process


def gone_here(specs: list[Any], pid: int = DEAD_PID, place: str | None = None) -> list[Any]:
    """``specs`` launched under the lease of an ``up`` from this host and state dir whose process is
    gone (``place``: another state dir's instead): what gc may collect without a record."""
    mark = LeaseMark(host_slug(), pid, NOW, place or place_slug(state.state_dir()))
    return [spec.model_copy(update={"lease": mark.token()}) for spec in specs]


def record(cluster_id: str, provider: str, expires_at: dt.datetime | None = None) -> ClusterRecord:
    """A record without a plan (gc reads only the cluster, provider and expiry)."""
    return ClusterRecord.model_construct(
        cluster_id=cluster_id,
        provider=provider,
        expires_at=expires_at,
        created_at=NOW - dt.timedelta(hours=1),
        node_ids={},
        status="up",
    )


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    yield tmp_path / "state"


@pytest.mark.parametrize("name", ["lambda", "runpod", "vastai"])
def test_unrecorded_nodes_are_listed_then_deleted(name: str) -> None:
    rig = rig_for(name)
    rig.provider.create_nodes("orphan", gone_here(rig.harness.node_specs(2, "n")))
    rig.provider.create_nodes("alive", gone_here(rig.harness.node_specs(1, "a")))
    records = [record("alive", name, NOW + dt.timedelta(hours=1))]
    adapters = {name: rig.provider}

    listed = collect_garbage(adapters=adapters, records=records, now=lambda: NOW)
    gone = (
        f"no local record, and its up (pid {DEAD_PID} on {host_slug()} since 2026-11-24T12:00:00Z, "
        "this state dir) is gone"
    )
    assert sorted((x.cluster_id, x.name, x.why) for x in listed.leftovers) == [
        ("orphan", "n0", gone),
        ("orphan", "n1", gone),
    ]
    assert listed.deleted == [] and rig.harness.instances() == 3 and listed.exit_code == 0
    assert (name, "alive", "recorded and not expired") in listed.kept

    done = collect_garbage(adapters=adapters, records=records, delete=True, now=lambda: NOW)
    assert sorted(x.name for x in done.deleted) == ["n0", "n1"] and done.failed == [] and done.exit_code == 0
    assert rig.harness.instances() == 1
    assert [n.name for n in rig.provider.get_nodes("alive")] == ["a0"]


@pytest.mark.parametrize("name", neocloud_names())
def test_expired_record_is_collected_and_forgotten(name: str) -> None:
    rig = rig_for(name)
    rig.provider.create_nodes("old", rig.harness.node_specs(1, "n"))
    expired = record("old", name, NOW - dt.timedelta(minutes=1))
    state.save_record(expired)  # gc forgets it once the cluster is gone
    assert state.record_path("old").exists()
    report = collect_garbage(adapters={name: rig.provider}, records=[expired], delete=True, now=lambda: NOW)
    assert [(x.cluster_id, x.why) for x in report.deleted] == [
        ("old", "expired at 2026-11-24T11:59:00Z (local record)")
    ]
    assert rig.harness.instances() == 0 and report.records_removed == ["old"]
    assert not state.record_path("old").exists()


def test_a_burst_whose_process_died_is_collected_at_once() -> None:
    rig = rig_for("runpod")
    rig.provider.create_nodes("killed", rig.harness.node_specs(1, "n"))
    dead = record("killed", "runpod", NOW + dt.timedelta(hours=4)).model_copy(
        update={"lease_pid": 2**22 + 12345, "lease_host": socket.gethostname()}
    )  # no such pid (above pid_max)
    report = collect_garbage(adapters={"runpod": rig.provider}, records=[dead], delete=True, now=lambda: NOW)
    assert [x.why for x in report.deleted] == [f"its burst process (pid {2**22 + 12345}) is gone"]
    assert rig.harness.instances() == 0


def test_fluence_names_alone_are_never_claimed() -> None:
    # A Fluence name cannot be told from one the user chose: no record, no --cluster, no delete.
    rig = rig_for("fluence")
    rig.provider.create_nodes("mine", rig.harness.node_specs(1, "n"))
    report = collect_garbage(adapters={"fluence": rig.provider}, records=[], delete=True, now=lambda: NOW)
    assert report.leftovers == [] and rig.harness.instances() == 1
    named = collect_garbage(
        adapters={"fluence": rig.provider}, records=[], cluster_id="mine", delete=True, now=lambda: NOW
    )
    assert [x.why for x in named.deleted] == ["named with --cluster"] and rig.harness.instances() == 0


def test_expiry_tag_wins_over_a_live_record() -> None:
    rig = rig_for("lambda")
    specs = [s.model_copy(update={"expires_at": NOW - dt.timedelta(seconds=1)}) for s in rig.harness.node_specs(1, "n")]
    rig.provider.create_nodes("c1", specs)
    live = record("c1", "lambda", NOW + dt.timedelta(days=1))
    report = collect_garbage(adapters={"lambda": rig.provider}, records=[live], now=lambda: NOW)
    assert [x.why for x in report.leftovers] == ["expired at 2026-11-24T11:59:59Z"]
    later = collect_garbage(adapters={"lambda": rig.provider}, records=[live], now=lambda: NOW - dt.timedelta(hours=1))
    assert later.leftovers == [], "a tag expiry still in the future collected the node"


def test_named_cluster_is_collected_whatever_its_record_says() -> None:
    rig = rig_for("runpod")
    rig.provider.create_nodes("c1", rig.harness.node_specs(2, "n"))
    rig.provider.create_nodes("c2", rig.harness.node_specs(1, "n"))
    live = [record("c1", "runpod", NOW + dt.timedelta(days=1)), record("c2", "runpod", None)]
    report = collect_garbage(
        provider="runpod",
        cluster_id="c1",
        adapters={"runpod": rig.provider},
        records=live,
        delete=True,
        now=lambda: NOW,
    )
    assert sorted(x.name for x in report.deleted) == ["n0", "n1"] and {x.cluster_id for x in report.deleted} == {"c1"}
    assert rig.harness.instances() == 1 and [n.name for n in rig.provider.get_nodes("c2")] == ["n0"]


@pytest.mark.parametrize("name", ["lambda", "runpod"])
def test_another_owners_nodes_are_kept(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = rig_for(name)
    monkeypatch.setenv("PROVISIONER_OWNER", "colleague")
    rig.provider.create_nodes("theirs", rig.harness.node_specs(1, "n"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    report = collect_garbage(adapters={name: rig.provider}, records=[], delete=True, now=lambda: NOW)
    assert report.leftovers == [] and (name, "theirs", "owned by colleague") in report.kept
    assert rig.harness.instances() == 1


def test_a_node_that_cannot_be_deleted_is_named_and_exits_nonzero() -> None:
    rig = rig_for("runpod")
    (node,) = rig.provider.create_nodes("stuck", gone_here(rig.harness.node_specs(1, "n")))
    rig.fake.faults.inject("http_error", route="deletePod", times=None, status=500)
    report = collect_garbage(adapters={"runpod": rig.provider}, records=[], delete=True, now=lambda: NOW)
    assert report.exit_code == 4 and [(x.node_id, x.cluster_id) for x, _ in report.failed] == [(node.id, "stuck")]
    assert f"NOT deleted runpod stuck n0 ({node.id})" in report.render()
    assert rig.harness.instances() == 1


def test_a_provider_that_cannot_be_listed_exits_nonzero() -> None:
    rig = rig_for("lambda")
    rig.fake.faults.inject("http_error", route="list_instances", times=None, status=503)
    report = collect_garbage(adapters={"lambda": rig.provider}, records=[], delete=True, now=lambda: NOW)
    assert report.exit_code == 4 and "lambda" in report.unlisted and report.checked == []
    assert report.render().splitlines()[-2:] == [
        "FAILED to list lambda: lambda: HTTP 503: An internal server error occurred. Try again later. Contact "
        "Support if the problem persists. [global/internal-error]",
        "nothing checked: no provider could be listed, so what the tool left there is unknown",
    ]  # not "nothing
    # to collect", which read as "nothing of yours is running" when nothing had been looked at


def test_providers_without_credentials_are_skipped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        *NEOCLOUD_KEYS,
        "PROVISIONER_LAMBDA_API_KEY",
        "PROVISIONER_RUNPOD_API_KEY",
        "PROVISIONER_VASTAI_API_KEY",
        "PROVISIONER_FLUENCE_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        *(f"PROVISIONER_{name.upper()}_API_KEY" for name in registry.REGISTRY),
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent-home/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent-home/config")
    monkeypatch.setenv("CLOUDSDK_CONFIG", "/nonexistent-home/gcloud")
    report = collect_garbage(now=lambda: NOW)
    assert report.checked == [] and report.exit_code == 0
    assert {"aws", "fluence", "gcp", "lambda", "runpod", "vastai"} <= set(report.skipped) == set(registry.REGISTRY)
    assert "LAMBDA_API_KEY" in report.skipped["lambda"] and "AWS_ACCESS_KEY_ID" in report.skipped["aws"]
    named = collect_garbage(provider="vastai", now=lambda: NOW)
    assert named.exit_code == 4 and "VAST_API_KEY" in named.unlisted["vastai"] and named.skipped == {}
    with pytest.raises(ValueError, match="unknown provider"):
        collect_garbage(provider="nocloud")


def test_cli_lists_then_deletes_on_a_served_fake(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = load_harness("lambda")
    real_get_provider = registry.get_provider

    def fast_get_provider(name: str, **kwargs: Any) -> Provider:
        # The CLI builds its adapters at the published limits (Lambda: 1 request/s) with the default
        # back-off; the limits and retries have their own contract tests, this one is about gc's CLI.
        return real_get_provider(name, **{"limits": UNLIMITED, "retry": FAST, **kwargs})

    monkeypatch.setattr(registry, "get_provider", fast_get_provider)
    with serve(harness.app) as server:
        for var in NEOCLOUD_KEYS:
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", server.url)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", harness.api_key)
        provider = harness.make_provider(api_key=harness.api_key, base_url=server.url, limits=UNLIMITED, retry=FAST)
        provider.create_nodes("lost1", gone_here(harness.node_specs(1, "n")))
        assert main(["gc", "--provider", "lambda"]) == 0
        out = capsys.readouterr().out
        assert "would delete lambda lost1 n0" in out and "--yes" in out and harness.instances() == 1
        assert main(["gc", "--provider", "lambda", "--cluster", "lost1", "--yes"]) == 0
        out = capsys.readouterr().out
        assert "deleted lambda lost1 n0" in out and harness.instances() == 0
        assert harness.api_key not in out
        harness.app.faults.inject("http_error", route="list_instances", times=None, status=503)
        assert main(["gc", "--provider", "lambda"]) == 4
        assert "FAILED to list lambda" in capsys.readouterr().out


def test_a_stopped_gcp_vm_still_bills_and_is_collected() -> None:
    harness = load_harness("gcp")
    with serve(harness.app) as server:
        provider = harness.make_provider(api_key=harness.api_key, base_url=server.url, retry=FAST)
        (node,) = provider.create_nodes("stopped", gone_here(harness.node_specs(1, "n")))
        harness.app.instances[("us-central1-a", node.id)]["status"] = "TERMINATED"  # type: ignore[attr-defined]
        report = collect_garbage(adapters={"gcp": provider}, records=[], delete=True, now=lambda: NOW)
        assert [(x.name, x.why.split(",")[0]) for x in report.deleted] == [("n0", "no local record")]
        polls = [provider.get_nodes("stopped") for _ in range(3)]
        assert polls[-1] == [], "the stopped VM (and its disks) was left"
        assert harness.app.validation_errors == []


def test_gc_of_a_named_cluster_removes_its_local_key_material(state_dir: Path) -> None:
    from provisioner.lifecycle import state
    from provisioner.secrets import load_or_create_secrets

    rig = rig_for("runpod")
    rig.provider.create_nodes("killed", rig.harness.node_specs(1, "n"))
    load_or_create_secrets(state.secrets_path("killed"))  # what a killed `up` leaves: secrets, key copy
    state.ssh_dir("killed").mkdir(parents=True)
    (state.ssh_dir("killed") / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    listed = collect_garbage(cluster_id="killed", adapters={"runpod": rig.provider}, records=[], now=lambda: NOW)
    assert state.secrets_path("killed").exists()  # listing forgets nothing
    report = collect_garbage(
        cluster_id="killed", adapters={"runpod": rig.provider}, records=[], delete=True, now=lambda: NOW
    )
    assert [x.name for x in listed.leftovers] == [x.name for x in report.deleted] == ["n0"]
    assert not state.secrets_path("killed").exists() and not state.ssh_dir("killed").exists()
    assert report.records_removed == ["killed"]


def test_configured_reads_key_variables_and_sdk_credential_places_without_a_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.lifecycle.gc import configured

    monkeypatch.setenv("HOME", str(tmp_path))
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "CLOUDSDK_CONFIG",
        "VAST_API_KEY",
        "PROVISIONER_VASTAI_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    assert configured("vastai") == "no API key (set PROVISIONER_VASTAI_API_KEY or VAST_API_KEY)"
    assert configured("aws") == "no AWS credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE or ~/.aws/credentials)"
    assert (configured("gcp") or "").startswith("no Google credentials")
    monkeypatch.setenv("VAST_API_KEY", "k")
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text("[default]\n")
    gcloud = tmp_path / "elsewhere"
    gcloud.mkdir()
    (gcloud / "application_default_credentials.json").write_text("{}")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(gcloud))
    assert configured("vastai") is None and configured("aws") is None and configured("gcp") is None


def test_gc_escapes_what_a_provider_names(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # An instance name carrying OSC/CSI sequences (retitle the window, clear the screen) reaches gc's
    # report as text: every control character is shown as an escape, none reaches the terminal.
    harness = load_harness("lambda")
    real_get_provider = registry.get_provider
    monkeypatch.setattr(
        registry,
        "get_provider",
        lambda name, **kw: real_get_provider(name, **{"limits": UNLIMITED, "retry": FAST, **kw}),
    )
    with serve(harness.app) as server:
        for var in NEOCLOUD_KEYS:
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", server.url)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", harness.api_key)
        provider = harness.make_provider(api_key=harness.api_key, base_url=server.url, limits=UNLIMITED, retry=FAST)
        (node,) = provider.create_nodes("hostile", harness.node_specs(1, "n"))
        body = harness.app.instances[node.id]  # type: ignore[attr-defined]
        body["name"] = "hostile-n0\x1b]0;owned\x07\x1b[2J\u202e"
        assert main(["gc", "--provider", "lambda", "--cluster", "hostile"]) == 0
        out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07\\x1b[2J\\u202e" in out


@pytest.mark.parametrize("name", ["lambda", "runpod", "vastai"])
def test_without_a_record_only_the_provably_abandoned_is_collected(name: str) -> None:
    # gc --yes with no local record: a node is deleted only when its lease names this host and this
    # state dir and that process is gone. Another machine's cluster (its lease however old: days),
    # another state dir's on this host (its up exited), a live up here and a node with no lease mark
    # are kept, each with the command that removes it when it is indeed abandoned.
    rig = rig_for(name)
    days_ago = NOW - dt.timedelta(days=3)
    other_machine = LeaseMark("build-box-7", 4242, days_ago, "a1b2c3").token()
    rig.provider.create_nodes(
        "theirs", [s.model_copy(update={"lease": other_machine}) for s in rig.harness.node_specs(1, "t")]
    )
    rig.provider.create_nodes("sibling", gone_here(rig.harness.node_specs(1, "s"), place="0badc0"))
    rig.provider.create_nodes("building", gone_here(rig.harness.node_specs(1, "b"), pid=os.getppid()))
    rig.provider.create_nodes("nomark", rig.harness.node_specs(1, "m"))
    rig.provider.create_nodes("dead", gone_here(rig.harness.node_specs(1, "d")))
    later = NOW + dt.timedelta(days=30)  # leases' age never turns a keep into a delete
    report = collect_garbage(adapters={name: rig.provider}, records=[], delete=True, now=lambda: later)
    assert [(x.cluster_id, x.name) for x in report.deleted] == [("dead", "d0")] and report.exit_code == 0
    kept = {cluster: why for _, cluster, why in report.kept}
    assert sorted(kept) == ["building", "nomark", "sibling", "theirs"]
    assert kept["theirs"] == (
        "no local record; its lease (pid 4242 on build-box-7 since 2026-11-21T12:00:00Z) names another machine, "
        "which may hold its record and be using it; remove it with: provisioner gc --cluster theirs --yes"
    )
    assert kept["sibling"].startswith("no record in this state dir; its lease (pid ")
    assert "another state dir on this host" in kept["sibling"]
    assert kept["building"].startswith(f"being created by pid {os.getppid()} on {host_slug()}")
    assert kept["nomark"].startswith("no local record and no lease mark of this tool")
    assert rig.harness.instances() == 4
    named = collect_garbage(
        adapters={name: rig.provider}, records=[], cluster_id="theirs", delete=True, now=lambda: NOW
    )
    assert [x.why for x in named.deleted] == ["named with --cluster"] and rig.harness.instances() == 3


def test_a_second_state_dir_keeps_its_cluster_after_its_up_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two state dirs on one host, one owner: A's up brought a cluster up and exited (its pid is gone,
    # its record is in A's dir). gc --yes from B has no record of it and must not delete it; gc
    # from A keeps it as recorded; with A's record deleted by hand, gc from A collects it.
    rig = rig_for("runpod")
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(dir_a))
    rig.provider.create_nodes("train", gone_here(rig.harness.node_specs(2, "n")))
    in_a = record("train", "runpod", NOW + dt.timedelta(hours=1))  # A's record (B's dir has none)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(dir_b))
    from_b = collect_garbage(adapters={"runpod": rig.provider}, delete=True, now=lambda: NOW)
    assert from_b.deleted == [] and rig.harness.instances() == 2
    assert [c for _, c, _ in from_b.kept] == ["train", "train"]
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(dir_a))
    from_a = collect_garbage(adapters={"runpod": rig.provider}, records=[in_a], delete=True, now=lambda: NOW)
    assert from_a.deleted == [] and ("runpod", "train", "recorded and not expired") in from_a.kept
    forgotten = collect_garbage(adapters={"runpod": rig.provider}, records=[], delete=True, now=lambda: NOW)
    assert sorted(x.name for x in forgotten.deleted) == ["n0", "n1"] and rig.harness.instances() == 0


def test_the_lease_mark_names_its_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.lifecycle.lease import hold

    marks = []
    for folder in ("a", "b"):
        monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / folder))
        with hold("c1", "up") as mark:
            marks.append(mark)
    assert [m.place for m in marks] == [place_slug(tmp_path / "a"), place_slug(tmp_path / "b")]
    assert marks[0].place != marks[1].place and all(len(m.token()) <= 63 for m in marks)
    assert LeaseMark.parse(marks[0].token()) == marks[0]
    longest = LeaseMark("h" * 30, 4194304, NOW, "abcdef")  # the longest host slug and pid
    assert len(longest.token()) <= 63 and LeaseMark.parse(longest.token()) == longest
