"""The lifecycle commands through ``provisioner.cli.main``: one-line errors and exit codes, the
pulumi engine without its CLI, status/outputs/down of a cluster on the Lambda fake, --json events."""

from __future__ import annotations

import json
import re
import shlex
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support, state
from provisioner.lifecycle.command_support import default_engine, parse_duration, parse_money
from provisioner.lifecycle.realize import bring_up
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "lc.yaml"
    path.write_text(LAMBDA_SPEC, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["up", "--engine", "pulumi"], ["down", "--engine", "pulumi"]])
def test_pulumi_engine_without_the_cli_is_one_line_and_exit_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no pulumi anywhere
    assert main([*command, str(_spec(tmp_path))]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "pulumi CLI is not installed" in err and "https://get.pulumi.com" in err and "--engine direct" in err
    assert state.list_records() == []  # nothing planned into existence


def test_pulumi_engine_without_its_python_sdk_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake_pulumi: Path
) -> None:
    """The pulumi CLI on PATH but a plain install (no [cloud] extra): one line before anything is planned
    or recorded (it left a 'failed' pulumi record that down then refused to remove the same way)."""
    import sys

    monkeypatch.setitem(sys.modules, "pulumi", None)  # not installed
    assert main(["up", str(_spec(tmp_path))]) == 5
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "error: the pulumi Python SDK is not installed: pip install 'gpu-provisioner[cloud]', or run "
        "with --engine direct"
    )
    assert state.list_records() == []


def test_the_default_engine_is_pulumi_only_where_its_cli_is() -> None:
    assert default_engine(lambda _name: None)[0] == "direct"
    assert default_engine(lambda name: f"/opt/bin/{name}") == (
        "pulumi",
        "the pulumi CLI is on PATH (/opt/bin/pulumi); --engine direct calls the adapters instead",
    )


def test_up_without_the_pulumi_cli_uses_the_direct_engine_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # a new user's machine: no pulumi anywhere
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[n.name for n in plan.nodes])
    # The CLI's runtime with SSH played by a stand-in and a clock that does not wait; all else as users run it.
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    with served_fake("lambda", monkeypatch) as (app, _server):
        assert main(["up", str(_spec(tmp_path)), "--json"]) == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert events[0]["event"] == "engine" and events[0]["engine"] == "direct"
        assert "no pulumi CLI on PATH" in events[0]["message"] and events[-1]["event"] == "up"
        record = state.load_record("lc-lambda")
        assert record is not None and record.engine == "direct" and app.instance_count() == 2
        assert main(["down", "lc-lambda"]) == 0  # the engine the record names; no pulumi asked for
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None
    capsys.readouterr()
    assert main(["up", str(_spec(tmp_path))]) != 0  # the fake is gone: the purchase fails after the first line
    assert capsys.readouterr().err.splitlines()[0].startswith("engine: direct (no pulumi CLI on PATH")


def test_up_without_an_api_key_leaves_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new user's first ``up`` without LAMBDA_API_KEY: one line naming the variable, exit 4, and no
    cluster left "creating" in status forever (the record was saved before the adapter was built)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert main(["up", str(_spec(tmp_path))]) == 4
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: lambda: no API key: set ")
    assert state.list_records() == [] and main(["status"]) == 0
    assert "no clusters" in capsys.readouterr().out


def test_up_of_a_cluster_that_exists_on_another_offer_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 naming the cluster and its down command (it was exit 1, which the README keeps for file I/O)."""
    import datetime as dt

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    first, other = plans_for(LAMBDA_SPEC, tmp_path)[:2]
    assert other.option != first.option
    state.save_record(
        state.ClusterRecord(
            cluster_id=other.cluster_id,
            provider=other.option.provider,
            engine="direct",
            plan=other,
            status="up",
            created_at=dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
        )
    )
    assert main(["up", str(_spec(tmp_path))]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: cluster lc-lambda already exists on ") and line.endswith(
        "run: provisioner down lc-lambda"
    ), line


def test_up_with_a_rejected_api_key_leaves_no_record_and_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong key: the provider refuses it before anything is bought, so no 'failed' record (that
    status showed with the planned nodes until down with a good key) and one line naming what to set."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with served_fake("lambda", monkeypatch) as (app, _server):
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", "not-the-key")
        assert main(["up", str(_spec(tmp_path))]) == 4
        assert app.launched == 0 and [call.method for call in app.calls] == ["GET"]  # one look, nothing bought
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: lambda: ") and "Traceback" not in line
    assert line.endswith(
        "; nothing was bought: set LAMBDA_API_KEY (or PROVISIONER_LAMBDA_API_KEY) to a valid key "
        "and run the command again"
    )
    assert state.list_records() == [] and main(["status"]) == 0
    assert "no clusters" in capsys.readouterr().out


def test_pulumi_up_with_a_rejected_api_key_leaves_no_record_and_runs_no_stack(
    tmp_path: Path, fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pulumi engine asks the same adapter its stack would use (the neoclouds' NeocloudNodes), at the
    endpoint it is configured with, before any record is saved or the stack touched (it left 'failed')."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    with served_fake("lambda", monkeypatch) as (app, _server):
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", "not-the-key")
        assert main(["up", str(_spec(tmp_path)), "--engine", "pulumi"]) == 4
        assert app.launched == 0 and [call.method for call in app.calls] == ["GET"]  # one look, nothing bought
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: lambda: ") and line.endswith(
        "; nothing was bought: set LAMBDA_API_KEY (or PROVISIONER_LAMBDA_API_KEY) to a valid key and run the "
        "command again"
    ), line
    assert state.list_records() == []
    assert not fake_pulumi.exists() or not any(call[:1] == ["up"] for call in _pulumi_calls(fake_pulumi))


def test_usage_mistakes_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(_spec(tmp_path))
    assert main(["up", spec, "--engine", "terraform"]) == 2
    assert main(["burst", spec, "--ttl", "soon", "--", "true"]) == 2
    assert main(["burst", spec, "--max-cost", "-5", "--", "true"]) == 2
    assert main(["burst", spec, "--engine", "pulumi", "--", "true"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("error: ") for line in lines)


def test_durations_and_money() -> None:
    assert parse_duration("4h") == 14400 and parse_duration("30m") == 1800 and parse_duration("2d") == 172800
    assert parse_duration("90s") == 90 and parse_duration("1.5") == 5400
    assert parse_money("300") == Decimal(300) and parse_money("0.10") == Decimal("0.10")
    assert parse_duration("87600h") == 87_600 * 3600 and parse_money("1e9") == Decimal(10) ** 9


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--ttl", "99999999999d"],
        ["up", "--max-cost", "1e400"],
        ["burst", "--ttl", "3651d"],
        ["costs", "--since", "99999999999d"],
    ],
)
def test_a_huge_duration_or_amount_is_one_usage_line(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once an OverflowError traceback from the expiry arithmetic (--ttl), or a cost cap no sum reaches."""
    spec = str(_spec(tmp_path))
    target = [spec] if args[0] != "costs" else []
    argv = [args[0], *target, *args[1:], *(["--", "true"] if args[0] == "burst" else [])]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: Invalid value for {args[1]}: '{args[2]}' is "), line


def test_watch_spends_what_status_meters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """watch's "spent" and status's "cost so far" read the same node spans (the provider's): watch
    billed every node from the record's creation, so a record made an hour before the launch (a
    re-up) showed an extra hour."""
    import datetime as dt

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[n.name for n in plan.nodes])
    looked_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90)  # both commands look at the same moment
    monkeypatch.setattr(
        command_support,
        "runtime",
        lambda emit, interrupts=True: instant_runtime(remote, emit=emit, now=lambda: looked_at),
    )
    with served_fake("lambda", monkeypatch):
        record = bring_up(plan, instant_runtime(remote))
        state.save_record(record.model_copy(update={"created_at": record.created_at - dt.timedelta(hours=1)}))
        capsys.readouterr()
        assert main(["watch", "lc-lambda", "--once", "--json"]) == 0
        (look,) = [e for e in map(json.loads, capsys.readouterr().out.splitlines()) if e["event"] == "look"]
        assert main(["status", "lc-lambda", "--json"]) == 0
        so_far = json.loads(capsys.readouterr().out)["cost"]["so_far"]
        assert so_far["sources"] == ["lambda audit-events, 1.10.0 shape"]
        # two nodes, each billed 2 or 3 whole minutes at $12.36/h: not an extra hour each
        assert Decimal(look["spent_usd"]) == Decimal(so_far["total_usd"]) <= Decimal("1.24")
        assert main(["down", "lc-lambda"]) == 0


def test_watch_on_a_fakes_nodes_says_so_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster on a fake provider (TEST-NET addresses, as ``up`` refuses): watch said nothing for
    ~35 s a look while its SSH waited on addresses no machine answers; now one line, exit 5."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        assert main(["watch", "lc-lambda", "--once"]) == 5
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert (
            line.startswith("error: node(s) lc-lambda-0 (198.51.100.")
            and "no machine will ever answer SSH: is PROVISIONER_LAMBDA_API_URL a fake provider without nodes?" in line
        )
        assert main(["down", "lc-lambda"]) == 0


def test_status_outputs_down_of_a_direct_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        assert main(["status", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)  # one document, as its --help says (not event lines)
        for command in ("status", "outputs"):
            assert main([command, "--help"]) == 0
            assert "Print the answer as one JSON document on stdout." in " ".join(capsys.readouterr().out.split())
        assert row["cluster"] == "lc-lambda" and row["status"] == "up" and row["engine"] == "direct"
        assert row["hourly_usd"] == str(plan.option.hourly_usd)
        assert main(["status", "lc-lambda", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert sorted(node["name"] for node in doc["live"]) == ["lc-lambda-0", "lc-lambda-1"]
        assert {node["status"] for node in doc["live"]} == {"running"}
        assert main(["outputs", str(_spec(tmp_path)), "--json"]) == 0  # a spec names its cluster
        out = json.loads(capsys.readouterr().out)
        assert out["ssh_command"] == "provisioner ssh lc-lambda" and len(out["nodes"]) == 2
        assert main(["ssh", "lc-lambda", "--print", "--", "sinfo"]) == 0
        printed = capsys.readouterr().out
        assert f"ml@{doc['head_address']}" in printed and printed.rstrip().endswith("sinfo")
        assert "PRIVATE KEY" not in printed
        # COMMAND as ssh reads it: the words joined by spaces, one line for the node's shell
        for words, line in (
            (["sinfo -N"], "sinfo -N"),
            (["sinfo", "-N", "-l"], "sinfo -N -l"),
            (["a b", "c"], "a b c"),
        ):
            assert main(["ssh", "lc-lambda", "--print", "--", *words]) == 0
            assert shlex.split(capsys.readouterr().out)[-1] == line, words

        # down of a direct cluster uses the direct engine (from its record); --json: one event per line
        assert main(["down", "lc-lambda", "--json"]) == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [e["event"] for e in events] == ["teardown", "cost", "down"]  # planned vs actual (docs/costs.md)
        assert set(events[1]["planned_vs_actual"]["terms"]) == {"compute", "storage", "egress", "interruption"}
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None
        assert main(["down", "lc-lambda", "--engine", "direct", "--provider", "lambda"]) == 0  # idempotent


@pytest.mark.parametrize(
    ("command", "code", "error", "message"),
    [
        (
            ["up", "nosuch.yaml", "--json"],
            2,
            "SpecError",
            "nosuch.yaml:1:1: cannot read spec: No such file or directory",
        ),
        (["down", "nosuch", "--json"], 2, "UsageError", "no record of cluster nosuch here: name its provider"),
        (["watch", "nosuch", "--once", "--json"], 2, "UsageError", "no record of cluster nosuch here (see provisioner"),
        (
            ["up", "x.yaml", "--json", "--bogus"],
            2,
            "UsageError",
            "unrecognized arguments: --bogus (see 'provisioner up",
        ),
        (["burst", "nosuch.yaml", "--json", "--", "hostname"], 2, "SpecError", "nosuch.yaml:1:1: cannot read spec"),
    ],
)
def test_with_json_an_error_is_an_event_on_stdout(
    command: list[str], code: int, error: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader of --json parses stdout: the error was plain text on stderr only. Now also the last JSON
    line, as every other event is (the person still gets the one line on stderr)."""
    assert main(command) == code
    out, err = capsys.readouterr()
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert (event["event"], event["exit_code"], event["error"]) == ("error", code, error)
    assert event["message"].startswith(message) and err.count("\n") == 1, (event, err)
    assert message in err and set(event) == {"event", "time", "message", "exit_code", "error"}


def test_a_missing_record_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (
        ["down", "nosuch", "--engine", "direct"],
        ["down", "nosuch"],
        ["status", "nosuch"],
        ["outputs", "nosuch"],
        ["ssh", "nosuch", "--print"],
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no record of cluster nosuch" in err, command
        assert "Invalid value" not in err, err  # no option was given to blame (down said --provider)


@pytest.mark.parametrize("name", ["../../escape", "a" * 300, "Ünï", "UPPER"])
def test_a_cluster_argument_is_a_file_or_a_cluster_name(
    name: str, tmp_path: Path, _state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster id names files in the state dir: '../../escape' made a lock file outside it, 300
    characters ended in 'File name too long' (exit 1). Now one usage line, and nothing written."""
    for command in (
        ["down", name, "--provider", "lambda"],
        ["status", name],
        ["outputs", name],
        ["ssh", name, "--print"],
        ["watch", name, "--once"],
        ["gc", "--cluster", name],
    ):
        assert main(command) == 2, command
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert " is neither a spec/plan file nor a cluster name (2-40 lowercase" in line or (
            command[0] == "gc" and " is not a cluster name (2-40 lowercase" in line
        ), line
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []


def test_down_twice_is_idempotent_and_outputs_print_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    spec = str(_spec(tmp_path))
    with served_fake("lambda", monkeypatch) as (app, _server):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        assert main(["outputs", "lc-lambda"]) == 0
        out = capsys.readouterr().out
        assert "{" not in out and "'" not in out and "[" not in out  # values, not Python reprs
        assert "nodes:\n  lc-lambda-0: " in out and "ssh_command: provisioner ssh lc-lambda" in out
        assert main(["down", spec]) == 0 and app.instance_count() == 0
        capsys.readouterr()
        assert main(["down", spec, "--json"]) == 0  # again: the spec names the provider, nothing is left
        (event,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()][-1:]
        assert event["event"] == "down" and event["message"] == "nothing left of cluster lc-lambda on lambda"
        assert main(["down", "lc-lambda", "--provider", "lambda"]) == 0
        capsys.readouterr()
        assert main(["down", "lc-lambda"]) == 0  # by name alone: the ledger says where it lived
        assert capsys.readouterr().err.strip().splitlines()[-1] == "nothing left of cluster lc-lambda on lambda"


def test_an_interrupted_up_leaves_a_record_that_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    class Interrupted(StandInRemote):
        def run(self, target: Any, argv: Any, *, timeout_s: float = 60.0) -> Any:
            raise KeyboardInterrupt  # Ctrl-C while up waits for the control plane

    remote = Interrupted(nodes=["lc-lambda-0", "lc-lambda-1"])
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    with served_fake("lambda", monkeypatch) as (app, _server):
        assert main(["up", str(_spec(tmp_path))]) == 130
        record = state.load_record("lc-lambda")
        assert record is not None and record.status == "interrupted" and len(record.node_ids) == 2
        assert main(["down", "lc-lambda"]) == 0 and app.instance_count() == 0


FAKE_PULUMI = """#!{python}
import json, os, sys
args = [a for a in sys.argv[1:] if a != "--non-interactive"]
with open(os.environ["FAKE_PULUMI_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:1] == ["version"]:
    print("v3.190.0")
elif args[:1] == ["up"] and os.environ.get("FAKE_PULUMI_UP") == "fail":
    sys.stderr.write("error: update failed: lambda: no capacity for gpu_4x_h100_sxm5\\n")
    sys.exit(255)
elif args[:2] == ["stack", "select"] and os.environ.get("FAKE_PULUMI_STACKS") and not os.path.exists(args[-1]):
    sys.stderr.write("error: no stack named '" + args[-1] + "' found\\n")  # with FAKE_PULUMI_STACKS, as pulumi
    sys.exit(255)
elif args[:2] == ["stack", "init"]:  # the stack, a file in the workspace
    open(args[2], "w").close()
elif args[:2] == ["config", "set-all"]:  # the stack's config file, as pulumi keeps it in the workspace
    keys = [a.split("=", 1)[0] for a in args[2:] if "=" in a and not a.startswith("-")]
    with open("Pulumi." + args[args.index("--stack") + 1] + ".yaml", "w") as kept:
        kept.write(json.dumps({{"config": {{key: "set" for key in keys}}}}))
elif args[:2] == ["stack", "output"]:
    print(json.dumps({{"headAddress": "198.51.100.7"}}))
elif args[:2] == ["stack", "history"]:
    print(json.dumps([{{"version": 1, "kind": "update", "startTime": "2026-11-24T00:00:00.000Z", "message": "",
                       "environment": {{}}, "config": {{}}, "result": "succeeded",
                       "endTime": "2026-11-24T00:01:00.000Z", "resourceChanges": {{"create": 3}}}}]))
elif args[:2] == ["stack", "export"]:
    print(json.dumps({{"version": 3, "deployment": {{"resources": [
        {{"urn": "urn:pulumi:lc-lambda::provisioner::pulumi:pulumi:Stack::provisioner-lc-lambda",
          "type": "pulumi:pulumi:Stack"}},
        {{"urn": "urn:pulumi:lc-lambda::provisioner::provisioner:index:GpuCluster::lc-lambda",
          "type": "provisioner:index:GpuCluster"}},
        {{"urn": "urn:pulumi:lc-lambda::provisioner::pulumi-python:dynamic:Resource::lc-lambda-nodes",
          "type": "pulumi-python:dynamic:Resource"}}]}}}}))
"""


def _pulumi_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_pulumi_stack_failure_is_exit_5_naming_what_remains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_pulumi: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_PULUMI_UP", "fail")
    assert main(["up", str(_spec(tmp_path)), "--json"]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "pulumi up of lc-lambda failed: error: update failed: lambda: no capacity" in err
    assert "provisioner:index:GpuCluster lc-lambda" in err and "pulumi-python:dynamic:Resource lc-lambda-nodes" in err
    assert "remove with: provisioner down lc-lambda --engine pulumi" in err
    calls = _pulumi_calls(fake_pulumi)
    config = next(call for call in calls if call[:2] == ["config", "set-all"])
    assert any(word.startswith("provisioner:plan=") for word in config)
    assert f"provisioner:secretsFile={state.secrets_path('lc-lambda')}" in config
    assert any(word.startswith("provisioner:owner=") for word in config)
    expiry = next(word.partition("=")[2] for word in config if word.startswith("provisioner:expiresAt="))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", expiry)  # the spec's 2 h TTL, pinned
    # No secret value ever reaches pulumi's command line.
    from provisioner.secrets import load_secrets

    secrets = load_secrets(state.secrets_path("lc-lambda"))
    text = fake_pulumi.read_text(encoding="utf-8")
    assert all(value[:40] not in text for value in secrets.values())
    record = state.load_record("lc-lambda")  # what down needs: the engine that made it, and that it failed
    assert record is not None and (record.engine, record.status) == ("pulumi", "failed")


def test_pulumi_up_then_down(
    tmp_path: Path, fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    from provisioner.realize.nodes import node_specs
    from provisioner.render import render_cluster
    from provisioner.secrets import ClusterSecrets

    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[n.name for n in plan.nodes])
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    with served_fake("lambda", monkeypatch) as (_app, _server):
        # What the stand-in pulumi's up stands for: the stack's NeocloudNodes bought the plan's nodes.
        secrets = ClusterSecrets.generate("lc-lambda")
        specs = node_specs(plan, render_cluster(plan, secrets), ssh_public_key=secrets.ssh_public_key, expires_at=None)
        instant_runtime(remote).provider("lambda").create_nodes(plan.cluster_id, specs)
        assert main(["up", str(_spec(tmp_path)), "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[-1]["event"] == "up" and events[-1]["outputs"] == {"headAddress": "198.51.100.7"}
    # up returned once the control plane answered; the SSH pass is the stack's own (its ClusterTopology
    # step, inside pulumi up: tests/test_engine_matrix.py), so up runs none of its own after pulumi up
    kinds = [e["event"] for e in events]
    assert kinds.index("pulumi") < kinds.index("wait-running") < kinds.index("wait-ready") < kinds.index("up")
    assert remote.bootstrapped == [] and "bootstrap" not in kinds
    assert [call[0] for call in remote.calls if call[1][0] == "sinfo"] == ["lc-lambda-0"]
    record = state.load_record("lc-lambda")
    assert record is not None and record.engine == "pulumi" and record.status == "up"
    assert (state.state_dir() / "pulumi" / "passphrase").stat().st_mode & 0o077 == 0
    assert main(["down", "lc-lambda"]) == 0  # the record says pulumi
    calls = _pulumi_calls(fake_pulumi)
    assert any(call[:1] == ["destroy"] for call in calls) and any(call[:2] == ["stack", "rm"] for call in calls)
    assert state.load_record("lc-lambda") is None
    select = next(call for call in calls if call[:2] == ["stack", "select"])
    assert select[-1] == "lc-lambda"  # one stack per cluster


def test_progress_lines_for_people_and_json_lines_for_machines(capsys: pytest.CaptureFixture[str]) -> None:
    import datetime as dt

    from provisioner.realize.events import JsonLines, RichLines

    people = RichLines()
    people("wait-ready", message="waiting for [the] control plane")  # not a terminal: a plain line
    people("job-output", message="x", line="step 1 [loss 0.5]")
    people("failover", message="try 1 of 3: no capacity", attempt=1)
    out, err = capsys.readouterr()
    assert out == "step 1 [loss 0.5]\n"
    assert err.splitlines() == ["waiting for [the] control plane", "try 1 of 3: no capacity"]
    machines = JsonLines(clock=lambda: dt.datetime(2026, 11, 24, tzinfo=dt.UTC))
    machines("up", message="cluster lc is up", hourly_usd=Decimal("24.72"), nodes=2)
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {
        "event": "up",
        "time": "2026-11-24T00:00:00+00:00",
        "message": "cluster lc is up",
        "hourly_usd": "24.72",
        "nodes": 2,
    }


def test_up_on_a_fake_without_nodes_says_at_once_that_nothing_will_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    # The CLI's own runtime (real SSH: no stand-in remote) on a clock that only moves when slept on: the
    # refusal must come before any SSH wait, or this test would sleep out the SSH timeouts.
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(None, emit=emit))
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.boots_nodes = True  # past up's question to the fake (tests/test_local_sealed.py): the backstop after buying
        assert main(["up", str(_spec(tmp_path))]) == 5
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "lc-lambda-0 (198.51.100." in err and "no machine will ever answer SSH" in err
        assert "PROVISIONER_LAMBDA_API_URL a fake provider without nodes" in err
        assert "remove with: provisioner down lc-lambda" in err  # what was bought on it stays named
        record = state.load_record("lc-lambda")
        assert record is not None and record.status == "failed" and app.instance_count() == 2
        assert main(["down", "lc-lambda"]) == 0 and app.instance_count() == 0


def test_up_of_a_live_unchanged_cluster_has_nothing_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second up of a cluster that is up as planned said 'creating ...' and ran the bootstrap again
    over SSH; now it says there is nothing to do, and buys, bootstraps and asks nothing of the nodes."""
    from provisioner.lifecycle.realize import tear_down

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    names = [n.name for n in plan.nodes]
    with served_fake("lambda", monkeypatch) as (app, _server):
        first = bring_up(plan, instant_runtime(StandInRemote(nodes=names)))
        count = app.instance_count()
        again, events = StandInRemote(nodes=names), []  # type: ignore[var-annotated]
        record = bring_up(plan, instant_runtime(again, events))
        assert [(e["event"], e["message"]) for e in events] == [
            ("up", "cluster lc-lambda is up as planned: nothing to do")
        ]
        assert (again.bootstrapped, again.calls, app.instance_count()) == ([], [], count)
        assert (record.run_id, record.status) == (first.run_id, "up")
        tear_down("lc-lambda", instant_runtime(StandInRemote()))


def test_a_dead_creating_record_is_shown_dead_and_listed_by_gc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An up killed before it bought anything leaves its record 'creating' with nothing at the provider:
    status showed it as if the up were at work, gc said nothing of it. Now status says dead and why,
    gc lists it, and gc --yes forgets it."""
    import datetime as dt

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    at = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
    state.save_record(state.ClusterRecord(cluster_id="lc-lambda", provider="lambda", plan=plan, created_at=at))
    assert main(["status"]) == 0
    line = capsys.readouterr().out.strip()
    assert "  lambda  direct  dead  2 node(s)" in line, line
    assert line.endswith("(its up died while creating (no process holds the cluster's lock); provisioner gc lists it)")
    assert main(["status", "--json"]) == 0
    assert [row["status"] for row in json.loads(capsys.readouterr().out)] == ["dead"]
    with served_fake("lambda", monkeypatch):
        assert main(["gc", "--provider", "lambda"]) == 0
        out = capsys.readouterr().out
        assert (
            "dead record lc-lambda (lambda): its up died while creating (no process holds the cluster's lock); "
            "nothing of it at the provider" in out
        ), out
        assert state.load_record("lc-lambda") is not None  # listing forgets nothing
        assert main(["gc", "--provider", "lambda", "--yes"]) == 0
        assert "forgot dead record lc-lambda (lambda)" in capsys.readouterr().out
    assert state.load_record("lc-lambda") is None
