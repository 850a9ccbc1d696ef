"""Issue 28, items 1, 2 and 5: what hostile answers and files now get, each defence on its own.

- Item 1: a provider body is decoded once, bounded (providers/answers.py, provisioner/untrusted.py);
  a bad one is one ProviderAPIError naming the endpoint; ``gc`` goes on with the other providers.
- Item 2: bill amounts that are no money (non-finite, absurd, negative) are refused and ``down``
  still finishes; provider launch times outside the cluster's life are replaced with a note.
- Item 5: command output is capped (a flooding ``nvidia-smi`` is killed at the cap); the ledger is
  read without following a link, long lines skipped unread, a number where a date belongs does not
  crash ``costs``; a ledger append failing after a purchase names the nodes and the down command.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from provisioner.capped import MAX_OUTPUT_BYTES, OVER_CAP, read_capped
from provisioner.cli import main
from provisioner.errors import ProviderAPIError, ProvisionerError, StackError
from provisioner.lifecycle import ledger, state
from provisioner.lifecycle.realize import bring_up
from provisioner.validation.runner import run_subprocess
from tests.hostile_proxy import served_hostile
from tests.providers.contract import load_harness
from tests.test_hostile_proxy import live_ids, up
from tests.test_http import client
from tests.test_killed_up import plan_for
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")


# ----- item 1: one bounded decode ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[" * 200_000, "nested more than 64 levels deep"),
        (b"[" * 65 + b"]" * 65, "nested more than 64 levels deep"),  # under the C decoder's own limit
        (b'{"a": "\xff"}', "not UTF-8 text"),
        (b'{"a": [1, 2', "not JSON"),
    ],
)
def test_a_bad_answer_is_one_line_naming_the_endpoint(body: bytes, said: str) -> None:
    api = client(lambda request: httpx.Response(200, content=body))
    with pytest.raises(ProviderAPIError) as caught:
        api.request("GET", "/v1/things")
    message = str(caught.value)
    assert message.startswith("demo: HTTP 200: GET /v1/things: answer refused: ") and said in message
    assert "\n" not in message


def test_a_number_that_is_none_is_read_as_absent() -> None:
    """NaN, Infinity, a float that overflows, 31 digits: None, so the model reading the field refuses that
    item alone (one offer row dropped and counted: tests/test_refresh_untrusted.py), never computes with it."""
    body = b'{"a": NaN, "b": -Infinity, "c": 1e999, "d": ' + b"9" * 31 + b', "e": ' + b"9" * 30 + b', "f": 0.1}'
    answer = client(lambda request: httpx.Response(200, content=body)).request("GET", "/v1/things")
    assert answer == {"a": None, "b": None, "c": None, "d": None, "e": int("9" * 30), "f": 0.1}


def test_the_deepest_accepted_answer_is_read() -> None:
    body = b"[" * 64 + b"]" * 64
    assert client(lambda request: httpx.Response(200, content=body)).request("GET", "/ok") == json.loads(body)


def test_an_error_body_nested_deep_still_maps_to_the_providers_error() -> None:
    api = client(lambda request: httpx.Response(403, content=b'{"error": ' + b"[" * 100_000), attempts=1)
    with pytest.raises(ProviderAPIError) as caught:
        api.request("GET", "/v1/things")
    assert caught.value.status == 403 and "\n" not in str(caught.value)


def test_gc_goes_on_with_the_other_providers_and_names_the_one_it_could_not_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lambda answers 200,000 ``[``; RunPod is honest and holds an expired node of this owner: ``gc --yes``
    deletes it and exits 4 naming Lambda. (AWS and GCP have no credentials here: never the network.)"""
    from tests.conftest import need_shared

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with (
        served_hostile("lambda", monkeypatch) as (lam, lam_proxy, _s),
        served_hostile("runpod", monkeypatch) as (pod, _p, _t),
    ):
        from tests.test_lifecycle_support import fast_provider

        spec = load_harness("runpod").node_specs(1, "n")[0]
        past = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
        (orphan,) = fast_provider("runpod").create_nodes("orphan", [spec.model_copy(update={"expires_at": past})])
        lam_proxy.mode = "deep"
        code = main(["gc", "--yes"])
        out, err = capsys.readouterr()
        assert code == 4 and "Traceback" not in out + err
        assert "FAILED to list lambda: lambda: HTTP 200: GET /api/v1/instances: answer refused: nested" in out
        assert "deleted runpod orphan" in out and orphan.id not in live_ids("runpod", "orphan")
        assert lam.validation_errors == [] and pod.validation_errors == []


# ----- item 2: money ----------------------------------------------------------------------------
def _amount(token: str) -> Any:
    """A rewrite of RunPod's billing answer: every record's ``totalAmount`` written as ``token``."""

    def rewrite(body: bytes) -> bytes:
        doc = json.loads(body)
        for record in doc.get("records", []):
            record["totalAmount"] = "__AMOUNT__"
        return json.dumps(doc).replace('"__AMOUNT__"', token).encode()

    return rewrite


def _runpod_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str, capsys: Any) -> tuple[int, str, str]:
    from tests.conftest import need_shared

    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    plan = plan_for("runpod", tmp_path)
    with served_hostile("runpod", monkeypatch) as (app, proxy, _server):
        up(plan)
        cid = plan.cluster_id
        state.ssh_dir(cid).mkdir(parents=True)
        (state.ssh_dir(cid) / "id_ed25519").write_text("key material", encoding="utf-8")
        assert state.secrets_path(cid).exists()
        capsys.readouterr()
        proxy.mode, proxy.path, proxy.custom = "custom", "/v2/billing/pods", _amount(token)
        code = main(["down", cid])
        out, err = capsys.readouterr()
        proxy.mode = None
        assert not live_ids("runpod", cid), "the pods are gone"
        assert state.load_record(cid) is None and not state.secrets_path(cid).exists()
        assert not state.ssh_dir(cid).exists()
        assert app.validation_errors == []
    return code, out, err


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("Infinity", "unexpected"),  # decoded as None: RunPod's model wants a number there
        ("NaN", "unexpected"),
        ("1e999", "unexpected"),
        ("1e300", "an amount out of range (1e+300)"),
        ('"Infinity"', "an amount out of range (inf)"),  # pydantic reads the string as a float: usd() refuses it
        ("-2001.00", "a negative total ($-2001.0) is no cost; not recorded"),  # RunPod sends doubles
        ("100000001", "an amount out of range (100000001"),
    ],
)
def test_down_finishes_when_the_bill_is_no_amount_of_money(
    token: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _runpod_down(tmp_path, monkeypatch, token, capsys)
    assert code == 0 and "Traceback" not in err
    said = [line for line in err.splitlines() if line.startswith("billing record: not read (")]
    assert len(said) == 1 and why in said[0], err
    assert "runpod" in said[0]
    cid = plan_for("runpod", tmp_path).cluster_id
    assert not [e for e in ledger.read() if e["cluster"] == cid and e.get("kind") == "billed"]
    assert "is down" in err


def test_a_bill_float_would_round_wrong_is_recorded_to_the_cent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.675 as a binary float is 2.67499...: rounded from the float, $2.67; from the decimal written, $2.68."""
    code, _out, err = _runpod_down(tmp_path, monkeypatch, "2.675", capsys)
    assert code == 0 and "billed $2.68 (runpod GET /v2/billing/pods)" in err
    cid = plan_for("runpod", tmp_path).cluster_id
    (billed,) = [e for e in ledger.read() if e["cluster"] == cid and e.get("kind") == "billed"]
    assert billed["total_cents"] == 268


def _created_at(value: str) -> Any:
    def rewrite(body: bytes) -> bytes:
        doc = json.loads(body)
        for pod in doc if isinstance(doc, list) else doc.get("pods", [doc]):
            if isinstance(pod, dict) and "createdAt" in pod:
                pod["createdAt"] = value
        return json.dumps(doc).encode()

    return rewrite


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_a_launch_time_outside_the_clusters_life_is_replaced_with_a_note(
    when: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Year 1 billed millennia ($15,627,696.07 and the 100 % alarm in the audit), year 9999 nothing."""
    from tests.conftest import need_shared

    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    plan = plan_for("runpod", tmp_path)
    with served_hostile("runpod", monkeypatch) as (_app, proxy, _server):
        up(plan)
        capsys.readouterr()
        proxy.mode, proxy.path, proxy.custom = "custom", "/v2/pods", _created_at(when)
        assert main(["status", plan.cluster_id, "--json"]) == 0
        proxy.mode = None
        doc = json.loads(capsys.readouterr().out)
        assert main(["down", plan.cluster_id]) == 0
    cost = doc["cost"]
    (note,) = cost["notes"]
    assert f"launch time {when[:10]}" in note and "metered from the record's creation instead" in note
    assert cost["so_far"]["total_usd"] in ("0.00", "0.01")  # seconds since up, at $0.69/h
    assert cost["so_far"]["sources"] == ["client"]


# ----- item 5: bounded reads --------------------------------------------------------------------
def _flooding_tool(folder: Path, name: str, pid_file: Path) -> None:
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec yes flooding-output\n", encoding="utf-8")
    script.chmod(0o755)


def test_a_flooding_command_is_killed_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the cap the output would grow until the 600 s timeout (~300 MB/s in the audit)."""
    pid_file = tmp_path / "pid"
    _flooding_tool(tmp_path / "bin", "nvidia-smi", pid_file)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = run_subprocess(("nvidia-smi", "-q", "-x"), timeout_s=600)
    assert result.returncode == OVER_CAP == 125
    assert len(result.stdout) == MAX_OUTPUT_BYTES and result.stdout.startswith("flooding-output\n")
    assert result.stderr == f"nvidia-smi: printed more than {MAX_OUTPUT_BYTES // 1024} KiB; stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # killed and reaped


def test_node_check_with_a_flooding_nvidia_smi_is_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _flooding_tool(tmp_path / "bin", "nvidia-smi", tmp_path / "pid")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code = main(["node", "check", "--json", "--no-burnin"])
    out, err = capsys.readouterr()
    assert code == 11 and "Traceback" not in err
    found = [f for f in json.loads(out)["findings"] if "nvidia-smi failed" in f["message"]]
    assert found and "printed more than 8192 KiB; stopped" in found[0]["message"]


def test_costs_refuses_a_symlinked_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "passwd"
    secret.write_text('{"cluster": "root:x:0:0", "kind": "cluster"}\n', encoding="utf-8")
    ledger.ledger_path().parent.mkdir(parents=True)
    ledger.ledger_path().symlink_to(secret)
    assert main(["costs"]) == 1
    out, err = capsys.readouterr()
    assert "root:x" not in out + err
    why = "a symbolic link; refused (the ledger is read only as a regular file)"
    assert err == f"error: cannot read the ledger {ledger.ledger_path()}: {why}\n"


def test_a_huge_ledger_line_is_skipped_unread_and_a_number_for_a_date_does_not_crash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    good = {"v": 1, "kind": "cluster", "cluster": "c1", "provider": "lambda", "created_at": "2026-11-20T00:00:00+00:00"}
    bad_date = {"v": 1, "kind": "cluster", "cluster": "c2", "provider": "runpod", "created_at": 5, "at": 7}
    with path.open("wb") as handle:
        handle.write(json.dumps(good).encode() + b"\n")
        handle.write(b'{"cluster": "' + b"x" * (ledger.MAX_LINE_BYTES + 10) + b'"}\n')
        handle.write(json.dumps(bad_date).encode() + b"\n")
        handle.write(b"[" * 100_000 + b"\n")
    skipped: list[int] = []
    assert [e["cluster"] for e in ledger.read(skipped=skipped)] == ["c1", "c2"]
    assert skipped == [2, 4]
    assert main(["costs", "--since", "3650d", "--by", "cluster", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    assert [row["key"] for row in json.loads(out)["rows"]] == ["c1"]  # c2 has no date to keep it by
    assert "skipped 2 unreadable lines (2, 4)" in err


def test_a_record_behind_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("{}", encoding="utf-8")
    state.clusters_dir().mkdir(parents=True)
    state.record_path("c1").symlink_to(target)
    with pytest.raises(ProvisionerError, match="a symbolic link; refused"):
        state.load_record("c1")
    with pytest.raises(OSError, match="larger than"):
        read_capped(target, 1)


def test_a_ledger_append_failing_after_the_purchase_names_the_nodes_and_the_down_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import need_shared

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    real = ledger.append

    def full_disk(entry: Any, path: Path | None = None) -> None:
        if entry.get("node_ids"):
            raise ProvisionerError(f"cannot append to the ledger {ledger.ledger_path()}: No space left on device")
        real(entry, path)

    monkeypatch.setattr(ledger, "append", full_disk)
    with served_fake("lambda", monkeypatch) as (app, _server):
        with pytest.raises(StackError) as caught:
            bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        message = str(caught.value)
        assert app.instance_count() == 2 and "\n" not in message
        assert "No space left on device" in message
        for node_id in app.instances:  # type: ignore[attr-defined]
            assert node_id in message
        assert "lc-lambda-0" in message and "lc-lambda-1" in message
        assert message.endswith("remove with: provisioner down lc-lambda --engine direct")
        record = state.load_record("lc-lambda")
        assert record is not None and sorted(record.node_ids) == ["lc-lambda-0", "lc-lambda-1"]
        monkeypatch.setattr(ledger, "append", real)
        assert main(["down", "lc-lambda"]) == 0 and app.instance_count() == 0


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="O_NOFOLLOW and the process checks are Linux behaviour")


# ----- item 1: every other reader of JSON nobody here wrote --------------------------------------
DEEP = "[" * 200_000


def test_every_local_json_reader_takes_a_deep_document(tmp_path: Path) -> None:
    """Node reports over srun, dcgmi's output, the watch's state file, a cluster's lock file, kubectl's
    answer and a spec-or-plan file: before, each gave a RecursionError (none caught it)."""
    from provisioner.lifecycle import lease
    from provisioner.lifecycle.faults import _k8s_states
    from provisioner.plan import _looks_like_a_spec
    from provisioner.validation.fabric import check_dcgm
    from provisioner.validation.model import NodeReport
    from provisioner.validation.runner import CommandResult
    from provisioner.validation.watch import WatchState

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP, encoding="utf-8")
    with pytest.raises(ValueError, match="nested more than 64 levels deep"):
        NodeReport.from_json(DEEP)
    assert [f.code for f in check_dcgm(CommandResult(0, DEEP), 1)] == ["dcgm.error"]
    assert WatchState.load(deep) == WatchState()
    assert _k8s_states(DEEP) == {}
    assert _looks_like_a_spec(deep) is False
    state.clusters_dir().mkdir(parents=True)
    Path(lease.lock_path("c1")).write_text(DEEP, encoding="utf-8")
    assert lease.read_lease("c1") is None
