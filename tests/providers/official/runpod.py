"""Witness: RunPod's official SDK ``runpod`` 1.11.0 against the RunPod fake on 127.0.0.1, and the
adapter's requests compared with the SDK's.

The SDK speaks GraphQL only (``runpod/api/ctl_commands.py``: ``get_gpus``, ``get_gpu``,
``create_pod``, ``get_pods``, ``get_pod``, ``terminate_pod``, ``get_user``,
``update_user_settings``); the adapter speaks REST v2 for pods, catalog, SSH keys and billing and
GraphQL for spot prices and spot pods. Both reach one store in the fake, so each test buys or
changes something through one API and reads it back through the other. The SDK has no billing
call and no spot call: billing is witnessed by the v2 spec alone, the spot mutation is sent
through the SDK's own transport (``run_graphql_query``) written inline as the SDK writes its
mutations. docs/providers.md has the table.

The SDK reads ``RUNPOD_API_BASE_URL`` at each call and a key file under ``~`` at import: HOME is a
temporary folder and the key is given explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import FieldNode, parse, validate, visit
from graphql.language import Visitor
from pydantic import SecretStr

from provisioner.providers.base import OfferQuery
from provisioner.providers.runpod import client as rp_client
from provisioner.providers.runpod.client import RunPodClient
from provisioner.providers.runpod.provider import RunPodProvider
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.testing.fakes.runpod import NO_CAPACITY, RunPodFake
from provisioner.testing.fakes.runpod_schema import schema
from tests.conftest import ROOT, need_shared
from tests.providers.official.support import need_client

RUNPOD_VERSION = "1.11.0"
KEY = "rp-witness-key-0123456789"
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIWitnessKeyA0000000000000000000000000000 a@test"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIWitnessKeyB0000000000000000000000000000 b@test"


@pytest.fixture
def runpod_fake(serve_fake: Callable[[FakeApp], RunningServer]) -> tuple[RunPodFake, str]:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=KEY, boot_polls=0)  # a pod runs from its first poll
    return app, serve_fake(app).url


@pytest.fixture
def runpod_sdk(runpod_fake: tuple[RunPodFake, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    need_client("runpod", RUNPOD_VERSION)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUNPOD_API_BASE_URL", runpod_fake[1])
    import runpod

    monkeypatch.setattr(runpod, "api_key", KEY)  # the SDK's documented way to give the key
    yield runpod


def runpod_adapter(url: str) -> RunPodProvider:
    return RunPodProvider(KEY, base_url=url)  # type: ignore[arg-type]


def runpod_client(url: str) -> RunPodClient:
    return RunPodClient(SecretStr(KEY), base_url=url)


def selected(document: str, under: str) -> set[str]:
    """Every field name selected anywhere below the field ``under`` of a GraphQL document."""
    names: set[str] = set()
    depth = [0]

    class Collect(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            if depth[0]:
                names.add(node.name.value)
            if node.name.value == under:
                depth[0] += 1

        def leave_field(self, node: FieldNode, *_: Any) -> None:
            if node.name.value == under:
                depth[0] -= 1

    visit(parse(document), Collect())
    return names


def top_fields(document: str, under: str) -> set[str]:
    """The field names selected directly under the first field ``under`` of a GraphQL document."""
    found: list[set[str]] = []

    class Find(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            if node.name.value == under and not found and node.selection_set:
                found.append({f.name.value for f in node.selection_set.selections if isinstance(f, FieldNode)})

    visit(parse(document), Find())
    return found[0]


# ----- offers --------------------------------------------------------------------------------------
def test_runpod_sdk_get_gpu_honours_the_id_and_answers_every_field(runpod_sdk: Any) -> None:
    from runpod.api.queries.gpus import generate_gpu_query

    listed = runpod_sdk.get_gpus()
    assert [(g["id"], g["memoryInGb"]) for g in listed] == [
        ("NVIDIA H100 80GB HBM3", 80),
        ("NVIDIA H200", 141),
        ("NVIDIA A100-SXM4-80GB", 80),
        ("NVIDIA GeForce RTX 4090", 24),
    ]
    h200 = runpod_sdk.get_gpu("NVIDIA H200")  # the fake once answered H100 here
    assert set(h200) == top_fields(generate_gpu_query("x"), "gpuTypes")
    assert (h200["id"], h200["displayName"], h200["securePrice"], h200["secureSpotPrice"]) == (
        "NVIDIA H200",
        "H200 SXM",
        3.99,
        2.29,
    )
    assert (h200["communityCloud"], h200["communitySpotPrice"], h200["maxGpuCount"]) == (False, None, 8)
    assert h200["lowestPrice"] == {"minimumBidPrice": 2.29, "uninterruptablePrice": 3.99}
    # RTX 4090: community is cheaper (0.34, spot 0.20) but offers at most 4 per pod; 8 is secure only.
    assert runpod_sdk.get_gpu("NVIDIA GeForce RTX 4090", 2)["lowestPrice"] == {
        "minimumBidPrice": 0.2,
        "uninterruptablePrice": 0.34,
    }
    assert runpod_sdk.get_gpu("NVIDIA GeForce RTX 4090", 8)["lowestPrice"] == {
        "minimumBidPrice": 0.44,
        "uninterruptablePrice": 0.69,
    }
    with pytest.raises(ValueError, match="No GPU found"):
        runpod_sdk.get_gpu("NVIDIA B300")


def test_runpod_adapter_spot_query_asks_only_what_the_sdk_asks(runpod_sdk: Any, runpod_fake: Any) -> None:
    from runpod.api.queries.gpus import generate_gpu_query

    ours = selected(rp_client._GPU_PRICES_QUERY, "gpuTypes")
    assert ours == {"id", "secureSpotPrice", "communitySpotPrice"}
    assert ours <= selected(generate_gpu_query("x"), "gpuTypes")
    assert validate(schema(), parse(rp_client._GPU_PRICES_QUERY)) == []
    assert validate(schema(), parse(rp_client._RENT_SPOT_MUTATION)) == []
    offers = runpod_adapter(runpod_fake[1]).list_offers(OfferQuery(gpu_models=("H200",), spot=True))
    assert sorted((o.gpus, o.spot_price_per_hour_usd) for o in offers) == [
        (1, Decimal("2.29")),
        (2, Decimal("4.58")),
        (4, Decimal("9.16")),
        (8, Decimal("18.32")),
    ]


# ----- pods: create, list, get, delete --------------------------------------------------------------
def test_runpod_sdk_pod_lifecycle_is_seen_by_the_adapter(runpod_sdk: Any, runpod_fake: Any) -> None:
    app, url = runpod_fake
    created = runpod_sdk.create_pod(
        "witness-0",
        "runpod/base:0.6.2",
        "NVIDIA H200",
        cloud_type="SECURE",
        gpu_count=2,
        ports="22/tcp, 8888/http",
        env={"ROLE": "head", "RANK": "0"},
        docker_args="sleep infinity",
    )
    pod_id = created["id"]
    assert created["imageName"] == "runpod/base:0.6.2"
    assert created["env"] == ["ROLE=head", "RANK=0"]
    assert created["machine"]["podHostId"].startswith(f"{pod_id}-")
    # The inline mutation reached the fake whole: the adapter's REST view has every field.
    rest = runpod_client(url).get_pod(pod_id)
    assert (rest.name, rest.gpu.id if rest.gpu else None, rest.gpu.count if rest.gpu else None) == (
        "witness-0",
        "NVIDIA H200",
        2,
    )
    assert app.pods[pod_id]["ports"] == ["22/tcp", "8888/http"]
    assert app.pods[pod_id]["args"] == "sleep infinity" and app.pods[pod_id]["cost"] == 7.98

    from runpod.api.queries.pods import QUERY_POD, generate_pod_query

    listed = runpod_sdk.get_pods()
    assert set(listed[0]) == top_fields(QUERY_POD, "pods")  # every field the SDK asks for, answered
    assert [(p["id"], p["gpuCount"], p["costPerHr"], p["podType"]) for p in listed] == [(pod_id, 2, 7.98, "RESERVED")]
    assert listed[0]["machine"] == {"gpuDisplayName": "H200 SXM"}
    shown = runpod_sdk.get_pod(pod_id)
    assert set(shown) == top_fields(generate_pod_query(pod_id), "pod")
    assert shown["desiredStatus"] == "RUNNING" and shown["ports"] == "22/tcp,8888/http"
    assert [p["privatePort"] for p in shown["runtime"]["ports"]] == [22]

    runpod_sdk.terminate_pod(pod_id)
    assert runpod_sdk.get_pod(pod_id) is None
    assert runpod_client(url).list_pods() == []


def test_runpod_adapter_pod_is_seen_and_deleted_by_the_sdk(runpod_sdk: Any, runpod_fake: Any) -> None:
    app, url = runpod_fake
    pod = runpod_client(url).create_pod(
        {"name": "ours-0", "image": "runpod/base:0.6.2", "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1}}
    )
    assert [p["id"] for p in runpod_sdk.get_pods()] == [pod.id]
    assert runpod_sdk.get_pod(pod.id)["costPerHr"] == 0.69
    runpod_sdk.terminate_pod(pod.id)
    assert app.instance_count() == 0


def test_runpod_node_teardown_document_deletes_a_pod(runpod_sdk: Any, runpod_fake: Any) -> None:
    """The GraphQL fallback of templates/cloud-init/teardown.sh.j2 (its text as
    tests/test_bootstrap_teardown.py pins it, the SDK's ``podTerminate`` form) deletes the pod."""
    from runpod.api.graphql import run_graphql_query

    app, url = runpod_fake
    pod = runpod_client(url).create_pod({"name": "self", "image": "i", "gpu": {"id": "NVIDIA H200", "count": 1}})
    answer = run_graphql_query(f'mutation {{ podTerminate(input: {{podId: "{pod.id}"}}) }}')
    assert answer == {"data": {"podTerminate": None}} and app.instance_count() == 0


def test_runpod_sdk_sees_the_no_capacity_refusal(runpod_sdk: Any, runpod_fake: Any) -> None:
    from runpod.error import QueryError

    with pytest.raises(QueryError, match="no longer any instances"):
        runpod_sdk.create_pod("full", "runpod/base", "NVIDIA A100-SXM4-80GB", data_center_id="CA-MTL-1")
    assert NO_CAPACITY.startswith("There are no longer")
    assert runpod_fake[0].instance_count() == 0


def test_runpod_spot_mutation_inline_as_the_sdk_writes_mutations(runpod_sdk: Any, runpod_fake: Any) -> None:
    from runpod.api.graphql import run_graphql_query

    inline = """
    mutation {
      podRentInterruptable(input: {
        name: "spot-0", imageName: "runpod/base:0.6.2", gpuTypeId: "NVIDIA H100 80GB HBM3",
        cloudType: COMMUNITY, gpuCount: 2, bidPerGpu: 1.5, startSsh: true, dataCenterId: null,
        env: [{ key: "ROLE", value: "worker" }], ports: "22/tcp"
      }) { id podType costPerHr machine { podHostId } }
    }
    """
    answer = run_graphql_query(inline)["data"]["podRentInterruptable"]
    app = runpod_fake[0]
    assert (answer["podType"], answer["costPerHr"]) == ("INTERRUPTABLE", 5.38)
    assert app.bids[answer["id"]] == 1.5 and app.pods[answer["id"]]["env"] == {"ROLE": "worker"}


def test_runpod_sdk_without_the_key_is_refused(runpod_sdk: Any) -> None:
    from runpod.error import AuthenticationError

    with pytest.raises(AuthenticationError):
        runpod_sdk.get_gpus(api_key="not-the-key")


# ----- SSH keys --------------------------------------------------------------------------------------
def test_runpod_ssh_keys_agree_between_sdk_and_adapter(runpod_sdk: Any, runpod_fake: Any) -> None:
    client = runpod_client(runpod_fake[1])
    assert runpod_sdk.update_user_settings(f"{KEY_A}\n{KEY_B}")["pubKey"] == f"{KEY_A}\n{KEY_B}"
    assert client.get_ssh_keys() == [KEY_A, KEY_B]
    client.put_ssh_keys([KEY_B])
    assert runpod_sdk.get_user()["pubKey"] == KEY_B
    assert runpod_sdk.get_user()["networkVolumes"] == []


# ----- the fake's own answers pass its own checks ----------------------------------------------------
RUNPOD_REFUSED = (
    ("GET", "/v2/pods/nopod0000000000", None),
    ("DELETE", "/v2/pods/nopod0000000000", None),
    ("POST", "/v2/pods", {"name": "x", "image": "runpod/base", "gpu": {"id": "NVIDIA B300", "count": 1}}),
    (
        "POST",
        "/v2/pods",
        {"name": "x", "image": "i", "gpu": {"id": "NVIDIA A100-SXM4-80GB", "count": 1}, "dataCenterIds": ["CA-MTL-1"]},
    ),
    ("GET", "/v2/clusters/nocluster000", None),
    ("DELETE", "/v2/clusters/nocluster000", None),
    ("GET", "/v2/billing/pods?bucketSize=day", None),
    ("POST", "/graphql", {"query": 'mutation { podTerminate(input: {podId: "nopod0000000000"}) }'}),
    ("POST", "/graphql", {"query": '{ pod(input: {podId: "nopod0000000000"}) { id } }'}),
)


def test_runpod_fake_refusals_pass_its_own_checks() -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=KEY)
    answers = []
    for header in (f"Bearer {KEY}", "Bearer not-the-key"):
        with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://runpod.fake") as client:
            for method, path, body in RUNPOD_REFUSED:
                answers.append(client.request(method, path, json=body, headers={"Authorization": header}))
    ok, wrong_key = answers[: len(RUNPOD_REFUSED)], answers[len(RUNPOD_REFUSED) :]
    assert [a.status_code for a in ok] == [404, 404, 400, 400, 404, 404, 200, 200, 200]
    assert ok[7].json() == {
        "data": {"podTerminate": None},
        "errors": [
            {
                "message": "pod not found",
                "locations": [{"line": 1, "column": 12}],
                "path": ["podTerminate"],
                "extensions": {"code": "BAD_REQUEST"},
            }
        ],
    }
    assert ok[8].json() == {"data": {"pod": None}}
    assert [a.status_code for a in wrong_key] == [401] * len(RUNPOD_REFUSED)
    assert app.validation_errors == []


def test_runpod_docs_name_every_witnessed_call() -> None:
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    section = text[text.index("## RunPod") : text.index("## Lambda")]
    named = (
        *("gpuTypes", "lowestPrice", "podFindAndDeployOnDemand", "podRentInterruptable", "podTerminate"),
        *("updateUserSettings", "myself { pods", "pod(input: {podId})", f"`runpod` {RUNPOD_VERSION}"),
        *("GET /v2/catalog/gpus", "POST /v2/pods", "GET /v2/pods", "DELETE /v2/pods/{id}", "/v2/account/ssh-keys"),
        *("GET /v2/billing/pods", "/v2/clusters", "SpotPrices"),
    )
    assert [name for name in named if name not in section] == []
