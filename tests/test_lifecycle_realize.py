"""The direct engine on the fakes: bring_up / status / tear_down round trips, failover, failures.

Each test serves a fake provider on 127.0.0.1 and points the adapter at it through the
environment; SSH is replaced by a stand-in Remote (tests/test_lifecycle_support.py).
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import CapacityError, ProviderError, StackError
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up, bring_up_first, cluster_nodes, tear_down
from provisioner.providers.base import CLUSTER_TAG, EXPIRES_TAG, OWNER_TAG, NodeStatus
from provisioner.realize.readiness import NotReadyError, k8s_ready, slurm_ready
from tests.conftest import need_shared
from tests.test_lifecycle_support import (
    FLUENCE_SPEC,
    LAMBDA_SPEC,
    StandInRemote,
    instant_runtime,
    plans_for,
    runpod_plan,
    served_fake,
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


def test_slurm_and_k8s_readiness_parsing() -> None:
    out = "a-0|idle\na-1|mix\na-2|idle*\na-3|down\na-4|drain\na-5|alloc\na-6|idle~\n"
    assert slurm_ready(out) == {"a-0", "a-1", "a-5"}
    assert k8s_ready("a-0|True\na-1|False\na-2|Unknown\n") == {"a-0"}


def test_lambda_up_status_down_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[node.name for node in plan.nodes], not_ready_polls=2)
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        record = bring_up(plan, instant_runtime(remote, events))
        assert record.status == "up"
        assert sorted(record.node_ids) == ["lc-lambda-0", "lc-lambda-1"]
        assert app.instance_count() == 2
        # Saved before and after the purchase; 0600; secrets beside it, 0600.
        saved = state.load_record("lc-lambda")
        assert saved is not None and saved.status == "up" and saved.node_ids == record.node_ids
        for path in (state.record_path("lc-lambda"), state.secrets_path("lc-lambda")):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert record.expires_at is not None and record.head_address
        # Every instance carries the tool's tags and the head's cloud-init document.
        bought = list(app.bought.values())
        assert len(bought) == 2
        for item in bought:
            tags = dict(item.tags) if isinstance(item.tags, dict) else dict(item.tags or {})
            assert tags.get(CLUSTER_TAG) == "lc-lambda"
            assert OWNER_TAG in tags and EXPIRES_TAG in tags
            assert item.boot.startswith("#cloud-config")
        # The control plane was asked on the head until every node was ready.
        sinfo_calls = [call for call in remote.calls if call[1][0] == "sinfo"]
        assert len(sinfo_calls) == 3 and {call[0] for call in sinfo_calls} == {"lc-lambda-0"}
        assert [e["event"] for e in events][:1] == ["create"] and events[-1]["event"] == "up"

        again = bring_up(plan, instant_runtime(remote))  # idempotent: adopts, buys nothing
        assert again.node_ids == record.node_ids and app.launched == 2

        rec, nodes = cluster_nodes("lc-lambda", instant_runtime(remote))
        assert rec.cluster_id == "lc-lambda" and {n.status for n in nodes} == {NodeStatus.RUNNING}

        deleted = tear_down("lc-lambda", instant_runtime(remote))
        assert sorted(deleted) == sorted(record.node_ids.values())
        assert app.instance_count() == 0
        assert state.load_record("lc-lambda") is None and not state.secrets_path("lc-lambda").exists()
        assert tear_down("lc-lambda", instant_runtime(remote), provider="lambda") == []  # idempotent


def test_runpod_up_down_round_trip_with_script_entrypoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    plan = runpod_plan(tmp_path)
    assert plan.option.bootstrap.value == "script"
    remote = StandInRemote(nodes=["lc-runpod-0"])
    with served_fake("runpod", monkeypatch) as (app, _server):
        record = bring_up(plan, instant_runtime(remote))
        assert record.status == "up" and app.instance_count() == 1
        (bought,) = app.bought.values()
        encoded = [line for line in bought.boot.splitlines() if line.startswith("IyE")]  # base64 of "#!"
        script = base64.b64decode(encoded[0]).decode()
        assert script.startswith("#!") and 'PROVISIONER_NODE_NAME="${PROVISIONER_NODE_NAME:-lc-runpod-0}"' in script
        tear_down("lc-runpod", instant_runtime(remote))
        assert app.instance_count() == 0 and state.load_record("lc-runpod") is None


def test_fluence_node_is_bootstrapped_over_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "fluence")
    plan = next(p for p in plans_for(FLUENCE_SPEC, tmp_path, count=10) if p.option.region == "dulles-usa-1")
    assert plan.option.bootstrap.value == "ssh"
    remote = StandInRemote(nodes=["lc-fluence-0"])
    with served_fake("fluence", monkeypatch) as (app, _server):
        record = bring_up(plan, instant_runtime(remote))
        assert record.status == "up" and app.instance_count() == 1
        assert remote.bootstrapped == ["ubuntu@lc-fluence-0"]  # the rendered head script, as the login user
        (bought,) = app.bought.values()
        assert "#cloud-config" not in bought.boot  # a GPU VM takes no user data
        tear_down("lc-fluence", instant_runtime(remote))
        assert app.instance_count() == 0


def test_capacity_error_on_first_option_fails_over_to_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    assert len(plans) >= 2 and plans[0].option.region != plans[1].option.region
    remote = StandInRemote(nodes=[node.name for node in plans[0].nodes])
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.capacity[plans[0].option.instance_type].discard(plans[0].option.region)  # type: ignore[attr-defined]
        record = bring_up_first(plans, instant_runtime(remote, events))
        assert record.plan.option.region == plans[1].option.region
        failovers = [e for e in events if e["event"] == "failover"]
        assert len(failovers) == 1 and failovers[0]["attempt"] == 1
        assert failovers[0]["next_region"] == plans[1].option.region
        instances = list(app.instances.values())  # type: ignore[attr-defined]
        failed_region = [i for i in instances if i["region"]["name"] == plans[0].option.region]
        assert failed_region == []  # the failed option holds zero instances
        assert {i["region"]["name"] for i in instances} == {plans[1].option.region}
        assert app.instance_count() == 2
        tear_down("lc-lambda", instant_runtime(remote))
        assert app.instance_count() == 0


def test_failover_gives_up_after_the_last_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.capacity[plans[0].option.instance_type].clear()  # type: ignore[attr-defined]
        with pytest.raises(CapacityError):
            bring_up_first(plans, instant_runtime(StandInRemote()))
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None


def test_create_that_fails_closed_keeps_the_record_for_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    with served_fake("lambda", monkeypatch) as (app, _server):
        # The launch happens but its answer is lost, and every listing after it fails.
        app.faults.inject("lose_answer", route="launch")
        app.faults.inject("http_error", route="list_instances", times=None, after=1, status=500)
        with pytest.raises(ProviderError) as caught:
            bring_up_first(plans, instant_runtime(StandInRemote()))
        assert "provisioner gc" in str(caught.value)  # the adapter says instances may exist, and how
        saved = state.load_record("lc-lambda")
        assert saved is not None and saved.status == "failed"  # kept: down / gc find the nodes
        regions = {i["region"]["name"] for i in app.instances.values()}  # type: ignore[attr-defined]
        assert app.launched >= 1 and regions == {plans[0].option.region}  # no other option bought meanwhile
        app.faults.clear()
        tear_down("lc-lambda", instant_runtime(StandInRemote()))
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None


def test_not_ready_names_the_nodes_and_what_remains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=["lc-lambda-0"])  # the worker never joins
    with served_fake("lambda", monkeypatch) as (app, _server):
        with pytest.raises(StackError) as caught:
            bring_up(plan, instant_runtime(remote))
        message = str(caught.value)
        assert "lc-lambda-1" in message and "provisioner down lc-lambda" in message
        assert caught.value.exit_code == 5 and isinstance(caught.value.__cause__, NotReadyError)
        saved = state.load_record("lc-lambda")
        assert saved is not None and saved.status == "failed" and app.instance_count() == 2
        tear_down("lc-lambda", instant_runtime(remote))
        assert app.instance_count() == 0


def test_destroy_on_failure_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        with pytest.raises(NotReadyError):
            bring_up(plan, instant_runtime(StandInRemote(nodes=[])), destroy_on_failure=True)
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None
