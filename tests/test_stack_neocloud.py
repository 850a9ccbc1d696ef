"""The Pulumi dynamic resource for neocloud nodes, driven against the providers' fake servers.

Pulumi's engine never calls a dynamic provider's create() under mocks, so the provider
class is exercised directly against each fake that has a contract harness; the resource
itself is checked under mocks for what it records (secret user_data, a provider object
that pickles without a client or key).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dill
import pulumi
import pulumi.dynamic.dynamic as pulumi_dynamic
import pytest

from provisioner.errors import CapacityError, ProvisionerError, StackError
from provisioner.providers.http import RetryPolicy
from provisioner.stacks.neocloud import NEOCLOUDS, NeocloudNodes, NeocloudNodesProvider
from provisioner.testing.fakes.base import RunningServer, serve
from tests.providers.contract import harness_names, load_harness
from tests.providers.harness import Harness

USER_DATA = "#!/bin/bash\necho MUNGE-SECRET-CANARY-71c3\n"


@dataclass
class Rig:
    harness: Harness
    server: RunningServer
    canary_key: str
    provider: NeocloudNodesProvider

    def props(self, n: int = 2, cluster_id: str | None = None, **extra: Any) -> dict[str, Any]:
        nodes = [spec.model_dump(exclude={"user_data"}, exclude_none=True) for spec in self.harness.node_specs(n, "n")]
        for node in nodes:
            node["tags"] = dict(node.get("tags") or {})
        return {
            "provider": self.harness.name,
            "cluster_id": cluster_id or f"pu{uuid.uuid4().hex[:6]}",
            "nodes": nodes,
            "user_data": USER_DATA,
            "ready_timeout_s": 20.0,
            **extra,
        }


def _rig(name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    harness = load_harness(name)
    canary = f"CANARY{uuid.uuid4().hex}"
    harness.app.api_key = canary
    server = serve(harness.app)
    env_name = name.upper().rstrip("_")
    monkeypatch.setenv(f"PROVISIONER_{env_name}_API_URL", server.url)
    monkeypatch.setenv(f"PROVISIONER_{env_name}_API_KEY", canary)
    options = {
        "limits": harness.scaled_limits,
        "poll_interval_s": 0.02,
        "timeout_s": harness.timeout_s,
        "retry": RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.1),
    }
    try:
        yield Rig(harness, server, canary, NeocloudNodesProvider(options))
    finally:
        server.stop()
    assert harness.app.validation_errors == []


@pytest.fixture(params=[name for name in harness_names() if name in NEOCLOUDS])
def rig(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from _rig(request.param, monkeypatch)


@pytest.fixture
def runpod(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from _rig("runpod", monkeypatch)


def _no_secrets(rig: Rig, *values: Any) -> None:
    text = json.dumps(values, default=repr)
    assert rig.canary_key not in text and "MUNGE-SECRET-CANARY" not in text


# ----- create / read / delete against every fake --------------------------------------------------
def test_create_read_delete_round_trip(rig: Rig) -> None:
    # Fluence GPU VMs take no user data (they are bootstrapped over SSH): the adapter refuses
    # before buying anything, which the stack surfaces; the round trip then runs without it.
    takes_user_data = rig.harness.name != "fluence"
    props = rig.props(2)
    if not takes_user_data:
        for node in props["nodes"]:
            node["bootstrap"] = "cloud_init"
        with pytest.raises(ProvisionerError, match="accept no user data"):
            rig.provider.create(props)
        assert rig.harness.launches() == 0
        props["user_data"] = None
        for node in props["nodes"]:
            del node["bootstrap"]
    created = rig.provider.create(props)
    outs = created.outs or {}
    assert created.id == f"{rig.harness.name}/{props['cluster_id']}"
    assert outs["node_names"] == ["n0", "n1"] and len(set(outs["node_ids"])) == 2
    assert rig.harness.instances() == 2 and rig.harness.launches() == 2
    assert "user_data" not in outs and len(outs["user_data_sha256"]) == (64 if takes_user_data else 0)
    _no_secrets(rig, outs)
    again = rig.provider.create(props)  # a retried `pulumi up` adopts, never buys twice
    assert (again.outs or {})["node_ids"] == outs["node_ids"] and rig.harness.launches() == 2
    read = rig.provider.read(created.id, outs)
    assert read.id == created.id and (read.outs or {})["node_ids"] == outs["node_ids"]
    rig.provider.delete(created.id, outs)
    assert rig.harness.instances() == 0
    assert rig.provider.read(created.id, outs).id is None
    _no_secrets(rig, dill.dumps(rig.provider, recurse=True).decode("latin-1"))


def test_a_refresh_changes_nothing_and_the_next_up_replaces_nothing(runpod: Rig) -> None:
    # The engine's refresh calls read with the recorded outputs (no user_data, only its hash) and
    # records what read returns; the next `up` diffs the program's inputs against that. The real
    # engine (tests/test_pulumi_real_handrun.py) found read recording the hash of no user data, so
    # `pulumi refresh` showed an update and the next `up` replaced every node.
    props = runpod.props(1)
    created = runpod.provider.create(props)
    outs = dict(created.outs or {})
    read = runpod.provider.read(created.id, outs)
    assert read.outs == outs
    after = runpod.provider.diff(created.id, dict(read.outs or {}), props)
    assert not after.changes and not after.replaces
    runpod.provider.delete(created.id, outs)


# ----- RunPod in depth ---------------------------------------------------------------------------
def test_update_adds_and_removes_nodes(runpod: Rig) -> None:
    props = runpod.props(2)
    outs = runpod.provider.create(props).outs or {}
    news = dict(props)
    news["nodes"] = [props["nodes"][1], {**props["nodes"][0], "name": "n9"}]
    diff = runpod.provider.diff("x", outs, news)
    assert diff.changes is True and diff.replaces == []
    updated = runpod.provider.update("x", outs, news).outs or {}
    assert updated["node_names"] == ["n1", "n9"]
    assert runpod.harness.instances() == 2 and runpod.harness.launches() == 3
    runpod.provider.delete("x", updated)


def test_a_node_gone_at_the_provider_is_read_then_bought_again_in_place(runpod: Rig) -> None:
    """What ``pulumi refresh`` then ``pulumi up`` do after a node was deleted in the provider's console:
    the read keeps the user data's digest (without it the next up replaced every node) and the diff
    asks for an in-place update, which buys only the lost node (issue 25 item 2, real engine)."""
    props = runpod.props(2)
    outs = runpod.provider.create(props).outs or {}
    adapter = runpod.provider._adapter("runpod")
    adapter.delete_nodes(props["cluster_id"], [outs["node_ids"][1]])
    read = runpod.provider.read("x", outs).outs or {}
    assert read["node_names"] == ["n0"] and read["user_data_sha256"] == outs["user_data_sha256"] != ""
    diff = runpod.provider.diff("x", read, props)
    assert diff.changes is True and diff.replaces == []
    assert runpod.provider.diff("x", outs, props).changes is False  # nothing lost: no change
    updated = runpod.provider.update("x", read, props).outs or {}
    assert updated["node_names"] == ["n0", "n1"] and updated["node_ids"][0] == outs["node_ids"][0]
    assert updated["node_ids"][1] != outs["node_ids"][1] and runpod.harness.instances() == 2
    runpod.provider.delete("x", updated)


@pytest.mark.parametrize(
    ("change", "replaces"),
    [
        (lambda p: p.update(provider="lambda"), ["provider"]),
        (lambda p: p.update(cluster_id="other"), ["cluster_id"]),
        (lambda p: p["nodes"][0].update(instance_type="8x_H100-SXM_SECURE"), ["nodes"]),
        (lambda p: p["nodes"][1].update(region="EU-RO-1"), ["nodes"]),
        (lambda p: p.update(bootstrap="script", user_data="#!/bin/sh\necho new\n"), ["user_data"]),
    ],
)
def test_diff_replaces_on_identity_changes(
    runpod: Rig, change: Callable[[dict[str, Any]], None], replaces: list[str]
) -> None:
    props = runpod.props(2, cluster_id="fixed")
    olds = {
        **{k: v for k, v in props.items() if k != "user_data"},
        "user_data_sha256": hashlib.sha256(USER_DATA.encode()).hexdigest(),
    }
    news = json.loads(json.dumps(props))
    assert runpod.provider.diff("x", olds, news).changes is False
    change(news)
    diff = runpod.provider.diff("x", olds, news)
    assert diff.changes is True and diff.replaces == replaces


def test_capacity_failure_leaves_nothing(runpod: Rig) -> None:
    runpod.harness.app.faults.inject("capacity_after", route="launch", times=None, k=1, partial=True)
    with pytest.raises(CapacityError):
        runpod.provider.create(runpod.props(3))
    assert runpod.harness.instances() == 0


def test_nodes_that_never_run_are_rolled_back(runpod: Rig) -> None:
    runpod.harness.app.faults.inject("slow_boot", times=None, polls=10_000)
    with pytest.raises(StackError, match="nodes were deleted"):
        runpod.provider.create(runpod.props(2, ready_timeout_s=0.3))
    assert runpod.harness.instances() == 0


def test_check_reports_each_bad_input(runpod: Rig) -> None:
    good = runpod.props(2)
    assert runpod.provider.check({}, good).failures == []
    bad = runpod.props(2, provider="aws")
    bad["nodes"][1] = {**bad["nodes"][0], "disk_gib": "lots"}
    reasons = {f.property: f.reason for f in runpod.provider.check({}, bad).failures}
    assert set(reasons) == {"provider", "nodes", "nodes[1].disk_gib"}
    with pytest.raises(StackError, match="must not be stored"):
        NeocloudNodesProvider({"api_key": runpod.canary_key})


def test_serialized_provider_holds_no_client_or_key(runpod: Rig) -> None:
    runpod.provider.create(runpod.props(1))  # after use: nothing may have been cached on it
    encoded = pulumi_dynamic.serialize_provider(runpod.provider)
    raw = base64.b64decode(encoded)
    assert runpod.canary_key.encode() not in raw
    assert b"ApiClient" not in raw and b"httpx" not in raw and b"RunPodClient" not in raw
    restored = dill.loads(raw)
    assert type(restored).__name__ == "NeocloudNodesProvider" and set(vars(restored)) == {"adapter_options"}


# ----- the resource under Pulumi mocks -----------------------------------------------------------
class _Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.inputs: dict[str, Any] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.inputs = dict(args.inputs)
        outs = {k: v for k, v in args.inputs.items() if k not in ("__provider", "user_data")}
        outs.update(node_ids=["pod-a"], node_names=["n0"], public_ips=["198.51.100.7"], private_ips=[""])
        return f"{args.name}_id", outs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


def test_resource_records_user_data_as_secret_and_a_clean_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    monkeypatch.setenv("PROVISIONER_RUNPOD_API_KEY", canary)
    mocks = _Mocks()
    pulumi.runtime.set_mocks(mocks, project="neocloud", stack="test", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        nodes = NeocloudNodes(
            "gpu",
            provider="runpod",
            cluster_id="c1",
            nodes=[{"name": "n0", "instance_type": "1x_RTX4090_SECURE", "region": "US-KS-2"}],
            user_data=USER_DATA,
        )

        def check(values: list[Any]) -> None:
            ids, ips = values
            assert ids == ["pod-a"] and ips == ["198.51.100.7"]
            user_data = mocks.inputs["user_data"]
            assert isinstance(user_data, dict) and user_data.get("value") == USER_DATA
            assert len(user_data) == 2  # {signature: secret, value: ...}: Pulumi's secret envelope
            serialized = mocks.inputs["__provider"]
            raw = base64.b64decode(serialized["value"] if isinstance(serialized, dict) else serialized)
            assert canary.encode() not in raw and b"httpx" not in raw and USER_DATA.encode() not in raw
            assert isinstance(dill.loads(raw), NeocloudNodesProvider)
            plain = {k: v for k, v in mocks.inputs.items() if k not in ("user_data", "__provider")}
            assert "MUNGE-SECRET-CANARY" not in json.dumps(plain) and canary not in json.dumps(plain)

        return pulumi.Output.all(nodes.node_ids, nodes.public_ips).apply(check)

    program()


# ----- Fluence: failed instances stay listed ------------------------------------------------------
@pytest.fixture
def fluence(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from _rig("fluence", monkeypatch)


def test_delete_accepts_failed_instances_that_stay_listed(fluence: Rig) -> None:
    # Fluence lists a FAILED instance forever and cannot terminate it (it is not billed):
    # `pulumi destroy` must finish instead of waiting for a termination that never comes.
    created = fluence.provider.create(fluence.props(2, user_data=None))
    outs = created.outs or {}
    failed_id = outs["node_ids"][0]
    fluence.harness.app.set_status(failed_id, "FAILED")  # type: ignore[attr-defined]
    fluence.provider.delete(created.id, {**outs, "delete_timeout_s": 5.0})
    assert fluence.harness.instances() == 0
    statuses = {i: body["status"] for i, body in fluence.harness.app.instances.items()}  # type: ignore[attr-defined]
    assert statuses[failed_id] == "FAILED" and statuses[outs["node_ids"][1]] == "ENDED"


def test_another_runs_node_of_the_name_is_never_updated_away_or_deleted(rig: Rig) -> None:
    # An earlier bring-up of the cluster's name left a node alive (run A); the stack (run B) replaces
    # one of its own nodes, then is destroyed: run A's node is not the stack's to delete (issue 27).
    name = rig.harness.name
    props = rig.props(2)
    for node in props["nodes"]:
        node["run"] = "20261129-010203-0f0e0d"
    if name == "fluence":  # a GPU VM takes no user data
        props["user_data"] = None
    cid = props["cluster_id"]
    adapter = rig.provider._adapter(name)
    (spec,) = rig.harness.node_specs(1, "n")
    (theirs,) = adapter.create_nodes(cid, [spec.model_copy(update={"name": "n7", "run": "20261123-090000-0a1b2c"})])
    outs = rig.provider.create(props).outs or {}
    assert theirs.id not in outs["node_ids"] and rig.harness.instances() == 3
    news = {**props, "nodes": [props["nodes"][0]]}
    updated = rig.provider.update("x", outs, news).outs or {}
    assert updated["node_ids"] == outs["node_ids"][:1]
    live = lambda: {n.id for n in adapter.get_nodes(cid) if n.status.value in ("pending", "running")}  # noqa: E731
    assert live() == {outs["node_ids"][0], theirs.id}  # the stack's n1 went, run A's n7 stays
    rig.provider.delete("x", updated)
    assert live() == {theirs.id}
    adapter.delete_nodes(cid, [theirs.id])
