"""Closed by default (issue 16, item 4): who may reach a cluster's nodes.

- No 0.0.0.0/0 default: a spec without ``access.allowed_cidrs`` plans (the report says SSH is
  closed) but ``up`` and ``burst`` refuse it in one line before anything is bought.
- The direct engine makes the provider's own firewall as the stack does: on Lambda, the cluster's
  ruleset (SSH only from allowed_cidrs) exists before the launch, every instance is launched with
  it, and ``down`` removes it after the instances.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up, tear_down
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

CLOSED_SPEC = LAMBDA_SPEC.replace("access: {allowed_cidrs: [198.51.100.0/24]}\n", "")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


def test_the_spec_default_opens_nothing(tmp_path: Path) -> None:
    assert "allowed_cidrs" not in CLOSED_SPEC
    (plan,) = plans_for(CLOSED_SPEC, tmp_path, count=1)
    assert plan.spec.access.allowed_cidrs == []


@pytest.mark.parametrize("command", [["up", "--engine", "direct"], ["burst"]])
def test_up_and_burst_refuse_a_spec_without_allowed_cidrs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    spec = tmp_path / "closed.yaml"
    spec.write_text(CLOSED_SPEC)
    with served_fake("lambda", monkeypatch) as (app, _server):
        job = ["--", "true"] if command == ["burst"] else []
        assert main([command[0], str(spec), *command[1:], *job]) == 2
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]  # after up's "engine: ..." note, one error line
        assert last.startswith(f"{spec}:1:1: access.allowed_cidrs: not set") and "Traceback" not in err
        assert sum(line.count("access.allowed_cidrs") for line in err.splitlines()) == 1
        assert app.launched == 0 and state.list_records() == []


def test_the_plan_says_ssh_is_closed_or_open_to_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    closed, open_to_all = tmp_path / "closed.yaml", tmp_path / "open.yaml"
    closed.write_text(CLOSED_SPEC)
    open_to_all.write_text(CLOSED_SPEC + "access: {allowed_cidrs: [0.0.0.0/0]}\n")
    assert main(["plan", str(closed)]) == 0
    assert "SSH: access.allowed_cidrs is not set, so nothing outside the cluster reaches the nodes" in " ".join(
        capsys.readouterr().out.split()
    )
    assert main(["plan", str(open_to_all)]) == 0
    assert "SSH: open to every address" in capsys.readouterr().out


def test_the_direct_engine_makes_and_removes_the_lambda_firewall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        (ruleset,) = app.firewall.rulesets.values()
        assert ruleset["region"]["name"] == plan.option.region
        assert [(r["protocol"], r["port_range"], r["source_network"]) for r in ruleset["rules"]] == [
            ("tcp", [22, 22], "198.51.100.0/24")
        ]
        assert sorted(app.firewall.users(ruleset["id"])) == sorted(app.bought)  # every launch attached it
        assert len(app.bought) == 2
        tear_down(plan.cluster_id, instant_runtime(StandInRemote()))
        assert app.instance_count() == 0 and app.firewall.rulesets == {}
