"""The lifecycle commands through ``provisioner.cli.main``: one-line errors and exit codes, the
pulumi engine without its CLI, status/outputs/down of a cluster on the Lambda fake, --json events."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import state
from provisioner.lifecycle.cli import parse_duration, parse_money
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


@pytest.mark.parametrize("command", [["up"], ["up", "--engine", "pulumi"], ["down"]])
def test_pulumi_engine_without_the_cli_is_one_line_and_exit_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str],
                                                              command: list[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no pulumi anywhere
    assert main([*command, str(_spec(tmp_path))]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "pulumi CLI is not installed" in err and "https://get.pulumi.com" in err and "--engine direct" in err
    assert state.list_records() == []  # nothing planned into existence


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


def test_status_outputs_down_of_a_direct_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        assert main(["status", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
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

        # down of a direct cluster uses the direct engine (from its record); --json: one event per line
        assert main(["down", "lc-lambda", "--json"]) == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [e["event"] for e in events] == ["teardown", "down"]
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None
        assert main(["down", "lc-lambda", "--engine", "direct", "--provider", "lambda"]) == 0  # idempotent


def test_down_without_record_or_provider_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["down", "nosuch", "--engine", "direct"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no record of cluster nosuch" in err
