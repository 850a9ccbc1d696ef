"""The neocloud dynamic provider through its real gRPC server, driven as the Pulumi engine does.

``python -m pulumi.dynamic`` is the process the engine starts for a dynamic resource: it
prints its port, then answers Configure/Check/Create/Diff/Update/Read/Delete, unpickling
the provider from the ``__provider`` property of each request. Properties travel as
protobuf Structs, so every number is a double: ``gpus: 1`` arrives as ``1.0``, which the
in-process tests never see. The provider answers against the RunPod and Lambda fake servers.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from provisioner.stacks.neocloud import NeocloudNodesProvider, normalize_props
from tests.test_stack_neocloud import USER_DATA, Rig, _rig

URN = "urn:pulumi:test::gpu-cluster::pulumi-python:dynamic/provisioner:NeocloudNodes::c-nodes"


@pytest.fixture(params=["runpod", "lambda"])
def rig(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    """A neocloud fake: RunPod (script bootstrap) and Lambda (cloud-init, tags, firewall rulesets)."""
    yield from _rig(request.param, monkeypatch)


@contextlib.contextmanager
def dynamic_provider(tmp_path: Path, env: dict[str, str]) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    """The engine's dynamic provider process (``python -m pulumi.dynamic``) with ``env`` added to its
    environment, configured, as a gRPC stub; stopped afterwards."""
    log = (tmp_path / "provider.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "pulumi.dynamic"],
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "PULUMI_PROJECT": "gpu-cluster", **env},
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        stub.Configure(provider_pb2.ConfigureRequest(args=struct_pb2.Struct()))
        yield stub
        channel.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        log.close()


@pytest.fixture
def server(rig: Rig, tmp_path: Path) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    """The engine's dynamic provider process, started with the fake's URL and key in its env."""
    with dynamic_provider(tmp_path, {}) as stub:
        yield stub


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(props)
    return out


def _dict(message: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def _props(rig: Rig, n: int) -> dict[str, Any]:
    options = {
        "limits": rig.provider.adapter_options["limits"],
        "poll_interval_s": 0.02,
        "timeout_s": rig.provider.adapter_options["timeout_s"],
    }
    props = rig.props(n, cluster_id=f"g{uuid.uuid4().hex[:6]}")
    assert all(isinstance(node["gpus"], int) for node in props["nodes"])  # ints here; doubles on the wire
    props["__provider"] = serialize_provider(NeocloudNodesProvider(options))
    return props


def test_engine_path_create_diff_update_delete(rig: Rig, server: provider_pb2_grpc.ResourceProviderStub) -> None:
    props = _props(rig, 2)
    wire = _struct(props)
    gpus = props["nodes"][0]["gpus"]
    assert wire.fields["nodes"].list_value.values[0].struct_value.fields["gpus"].number_value == float(gpus)
    assert isinstance(_dict(wire)["nodes"][0]["gpus"], float)

    checked = server.Check(provider_pb2.CheckRequest(urn=URN, olds=_struct({}), news=wire))
    assert list(checked.failures) == []
    created = server.Create(provider_pb2.CreateRequest(urn=URN, properties=checked.inputs))
    state = _dict(created.properties)
    assert created.id == f"{rig.harness.name}/{props['cluster_id']}"
    assert state["node_names"] == ["n0", "n1"] and len(set(state["node_ids"])) == 2
    assert "user_data" not in state and USER_DATA not in str(state)
    assert rig.harness.instances() == 2 and rig.harness.launches() == 2
    assert rig.harness.app.validation_errors == []  # every request the adapter sent matched the API

    same = server.Diff(provider_pb2.DiffRequest(id=created.id, urn=URN, olds=created.properties, news=checked.inputs))
    assert same.changes == provider_pb2.DiffResponse.DIFF_NONE and list(same.replaces) == []

    grown = _props(rig, 3)
    grown.update(cluster_id=props["cluster_id"], __provider=props["__provider"])
    grown_in = server.Check(provider_pb2.CheckRequest(urn=URN, olds=checked.inputs, news=_struct(grown))).inputs
    diff = server.Diff(provider_pb2.DiffRequest(id=created.id, urn=URN, olds=created.properties, news=grown_in))
    assert diff.changes == provider_pb2.DiffResponse.DIFF_SOME and list(diff.replaces) == []
    updated = server.Update(provider_pb2.UpdateRequest(id=created.id, urn=URN, olds=created.properties, news=grown_in))
    assert _dict(updated.properties)["node_names"] == ["n0", "n1", "n2"]
    assert rig.harness.instances() == 3 and rig.harness.launches() == 3

    read = server.Read(provider_pb2.ReadRequest(id=created.id, urn=URN, properties=updated.properties))
    assert read.id == created.id and _dict(read.properties)["node_ids"] == _dict(updated.properties)["node_ids"]

    server.Delete(provider_pb2.DeleteRequest(id=created.id, urn=URN, properties=updated.properties))
    assert rig.harness.instances() == 0


def test_engine_path_reports_bad_input_as_check_failures(
    rig: Rig, server: provider_pb2_grpc.ResourceProviderStub
) -> None:
    props = _props(rig, 2)
    props["nodes"][1]["gpus"] = 1.5  # not a whole number: a failure, never silently truncated
    checked = server.Check(provider_pb2.CheckRequest(urn=URN, olds=_struct({}), news=_struct(props)))
    assert [(f.property, "integer" in f.reason) for f in checked.failures] == [("nodes[1].gpus", True)]
    with pytest.raises(grpc.RpcError) as failed:
        server.Create(provider_pb2.CreateRequest(urn=URN, properties=_struct(props)))
    assert failed.value.code() == grpc.StatusCode.UNKNOWN
    assert rig.harness.launches() == 0


def test_normalize_props_turns_whole_doubles_back_into_ints() -> None:
    props = {
        "provider": "runpod",
        "ready_timeout_s": 20.0,
        "nodes": [{"name": "n0", "gpus": 8.0, "disk_gib": 100.0, "bid_usd_per_hour": 1.0}, "junk"],
    }
    out = normalize_props(props)
    node = out["nodes"][0]
    assert (node["gpus"], type(node["gpus"]), node["disk_gib"], type(node["disk_gib"])) == (8, int, 100, int)
    assert isinstance(node["bid_usd_per_hour"], float) and out["ready_timeout_s"] == 20.0
    assert out["nodes"][1] == "junk" and normalize_props(out) == out
    assert props["nodes"][0]["gpus"] == 8.0 and isinstance(props["nodes"][0]["gpus"], float)  # input untouched


def test_wire_doubles_become_ints_in_what_the_provider_records(rig: Rig) -> None:
    # What the server hands the provider: the Struct deserialized as python.dynamic does it.
    props = _props(rig, 2)
    wire = rpc.deserialize_properties(_struct({k: v for k, v in props.items() if k != "__provider"}))
    assert isinstance(wire["nodes"][0]["gpus"], float)
    checked = rig.provider.check({}, wire)
    assert checked.failures == [] and isinstance(checked.inputs["nodes"][0]["gpus"], int)
    outs = rig.provider.create(wire).outs or {}
    assert [(n["gpus"], type(n["gpus"])) for n in outs["nodes"]] == [(p["gpus"], int) for p in props["nodes"]]
    assert [type(n["disk_gib"]) for n in outs["nodes"]] == [int, int]
    rig.provider.delete("x", outs)
    assert rig.harness.instances() == 0
