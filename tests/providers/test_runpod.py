"""RunPod-specific behaviour of the adapter and its fake (the shared contract is in test_contract.py)."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from provisioner.errors import (
    CapacityError,
    CredentialsError,
    PlanError,
    ProviderAPIError,
    QuotaError,
    RateLimitError,
)
from provisioner.providers.base import NodeSpec, NodeStatus, OfferQuery
from provisioner.providers.http import RetryPolicy
from provisioner.providers.runpod.client import RATE_LIMITS, _graphql_error, map_error
from provisioner.providers.runpod.provider import CLUSTER_ENV, USER_DATA_ENV, RunPodProvider
from provisioner.testing.fakes.base import FakeApp
from provisioner.testing.fakes.runpod import DEFAULT_GPUS, NO_CAPACITY, RunPodFake
from tests.conftest import need_shared

KEY = "rp-test-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ me@laptop"
FAST = RetryPolicy(attempts=3, base_delay_s=0.001, max_delay_s=0.01)


@pytest.fixture
def fake() -> Iterator[RunPodFake]:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=KEY)
    yield app
    assert app.validation_errors == []


def adapter(app: FakeApp, **kwargs: object) -> RunPodProvider:
    """The adapter talking to ``app`` in process (no socket)."""
    return RunPodProvider(
        KEY, base_url="http://runpod.fake", transport=httpx.WSGITransport(app=app), retry=FAST, **kwargs
    )  # type: ignore[arg-type]


def spec(name: str, **overrides: object) -> NodeSpec:
    values: dict[str, object] = {"name": name, "instance_type": "1x_RTX4090_SECURE", "region": "US-KS-2"}
    values.update(overrides)
    return NodeSpec(**values)  # type: ignore[arg-type]


# ----- offers ------------------------------------------------------------------------------------
def test_offers_carry_catalog_prices_regions_and_spot_floors(fake: RunPodFake) -> None:
    offers = adapter(fake).list_offers(OfferQuery())
    by_key = {(o.instance_type, o.region): o for o in offers}
    rtx = by_key[("1x_RTX4090_SECURE", "US-KS-2")]
    assert (rtx.gpu_model, rtx.gpus, rtx.gpu_memory_gib) == ("RTX4090", 1, 24.0)
    assert float(rtx.price_per_hour_usd) == pytest.approx(0.69)
    assert float(rtx.spot_price_per_hour_usd) == pytest.approx(0.44)
    assert rtx.offer_id == "NVIDIA+GeForce+RTX+4090"  # SAFE_ID has no spaces; _resolve reads + as a space
    assert (rtx.egress_usd_per_gb, rtx.billing_increment_s, rtx.reliability) == (0.0, 1, 0.99)
    h100 = by_key[("8x_H100-SXM_SECURE", "US-KS-2")]
    assert float(h100.price_per_hour_usd) == pytest.approx(8 * 2.99)
    assert h100.vcpus == 128 and h100.memory_gib == 1000  # typical shape from the bundled catalog
    assert ("1x_A100-80GB-SXM_SECURE", "CA-MTL-1") not in by_key  # availability NONE
    assert not any(o.instance_type.endswith("_COMMUNITY") and o.gpu_model == "H200" for o in offers)
    assert ("8x_RTX4090_COMMUNITY", "US-KS-2") not in by_key  # community maxCount is 4
    assert by_key[("4x_RTX4090_COMMUNITY", "EU-RO-1")].reliability == 0.98


def test_spot_price_query_is_retried_on_5xx(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="graphql", times=1, status=500)
    offers = adapter(fake).list_offers(OfferQuery(spot=True))
    assert offers and all(o.spot_price_per_hour_usd for o in offers)
    assert [c.status for c in fake.calls_of("graphql")] == [500, 200]


def test_offer_query_filters(fake: RunPodFake) -> None:
    provider = adapter(fake)
    offers = provider.list_offers(OfferQuery(gpu_models=("h100",), regions=("EU-RO-1",), min_gpus=4))
    assert offers and {(o.gpu_model, o.region) for o in offers} == {("H100", "EU-RO-1")}
    assert min(o.gpus for o in offers) == 4
    spot = provider.list_offers(OfferQuery(spot=True))
    assert spot and all(o.spot_price_per_hour_usd for o in spot)
    assert not any(o.gpu_model == "H200" and "COMMUNITY" in o.instance_type for o in spot)
    calls_before = len(fake.calls_of("graphql"))
    provider.list_offers(OfferQuery(spot=False))
    assert len(fake.calls_of("graphql")) == calls_before  # no spot prices fetched when not wanted


# ----- create ------------------------------------------------------------------------------------
def test_create_marks_pods_and_passes_user_data_and_ssh(fake: RunPodFake) -> None:
    provider = adapter(fake)
    script = "#!/bin/bash\necho join-the-cluster\n"
    nodes = provider.create_nodes(
        "c1",
        [
            spec("head", ssh_public_key=SSH_KEY, bootstrap="script", user_data=script),
            spec("w0", ssh_public_key=SSH_KEY),
        ],
    )
    assert [n.name for n in nodes] == ["head", "w0"]
    pods = {pod["name"]: pod for pod in fake.pods.values()}
    head = pods["c1-head"]
    assert head["env"][CLUSTER_ENV] == "c1"
    assert base64.b64decode(head["env"][USER_DATA_ENV]).decode() == script
    assert "base64 -d" in head["args"] and "/start.sh" in head["args"]
    assert head["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1}
    assert head["dataCenterId"] == "US-KS-2" and "22/tcp" in head["ports"]
    assert USER_DATA_ENV not in pods["c1-w0"]["env"] and pods["c1-w0"]["args"] == ""
    assert fake.ssh_keys == [" ".join(SSH_KEY.split()[:2]) + " c1"]
    provider.create_nodes("c1", [spec("w1", ssh_public_key=SSH_KEY)])
    assert len(fake.calls_of("updateSshKeys")) == 1  # the key is reused, not re-registered
    assert fake.launched == 3


def test_cloud_config_user_data_is_refused_before_buying(fake: RunPodFake) -> None:
    with pytest.raises(PlanError, match="cloud-config is not executed"):
        adapter(fake).create_nodes(
            "cc",
            [
                spec("a", bootstrap="script", user_data="#!/bin/sh\ntrue\n"),
                spec("b", bootstrap="cloud_init", user_data="#cloud-config\nruncmd: [true]\n"),
            ],
        )
    assert fake.launched == 0 and fake.calls_of("createPod") == []


def test_get_nodes_selects_by_cluster_env_not_name_prefix(fake: RunPodFake) -> None:
    provider = adapter(fake)
    provider.create_nodes("a", [spec("n0")])
    provider.create_nodes("a-b", [spec("n0")])
    assert [n.name for n in provider.get_nodes("a")] == ["n0"]
    assert {n.cluster_id for n in provider.get_nodes("a-b")} == {"a-b"}


def test_status_mapping_keeps_raw_state(fake: RunPodFake) -> None:
    provider = adapter(fake, poll_interval_s=0.01)
    provider.create_nodes("c", [spec("a"), spec("b"), spec("c")])
    first = {n.name: n for n in provider.get_nodes("c")}
    assert first["a"].status == NodeStatus.PENDING and first["a"].provider_state == "PROVISIONING"
    running = {n.name: n for n in provider.get_nodes("c")}
    assert running["a"].status == NodeStatus.RUNNING and running["a"].public_ip
    pods = {pod["name"]: pod for pod in fake.pods.values()}
    pods["c-b"]["status"] = "EXITED"
    pods["c-c"]["status"] = "ERROR"
    states = {n.name: (n.status, n.provider_state) for n in provider.get_nodes("c")}
    assert states["b"] == (NodeStatus.STOPPING, "EXITED")
    assert states["c"] == (NodeStatus.FAILED, "ERROR")


def test_spot_pod_uses_graphql_with_bid(fake: RunPodFake) -> None:
    provider = adapter(fake)
    floor = provider.create_nodes("s", [spec("a", instance_type="2x_H100-SXM_SECURE", spot=True)])
    bid = provider.create_nodes("s", [spec("b", instance_type="2x_H100-SXM_SECURE", spot=True, bid_usd_per_hour=5.0)])
    assert fake.bids[floor[0].id] == pytest.approx(1.75)  # per-GPU floor from gpuTypes
    assert fake.bids[bid[0].id] == pytest.approx(2.5)  # the node's bid split per GPU
    assert len(fake.calls_of("createPod")) == 0
    assert {n.name for n in provider.get_nodes("s")} == {"a", "b"}


def test_spot_pod_unreadable_after_rent_is_still_reported(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="getPod", times=None, status=404)
    (node,) = adapter(fake).create_nodes("s", [spec("a", spot=True)])
    (pod_id,) = fake.pods
    assert (node.id, node.name, node.status) == (pod_id, "a", NodeStatus.PENDING)
    fake.faults.clear()
    adapter(fake).delete_nodes("s")
    assert fake.instance_count() == 0


def test_terminated_pod_of_the_same_name_is_replaced(fake: RunPodFake) -> None:
    provider = adapter(fake)
    (old,) = provider.create_nodes("z", [spec("a")])
    fake.pods[old.id]["status"] = "TERMINATED"
    (new,) = provider.create_nodes("z", [spec("a")])
    assert new.id != old.id and new.status == NodeStatus.PENDING and fake.launched == 2


def test_spot_without_supply_is_capacity_error(fake: RunPodFake) -> None:
    fake.faults.inject("capacity_after", route="createPod", times=None, k=0)
    with pytest.raises(CapacityError, match="no longer any instances"):
        adapter(fake).create_nodes("s", [spec("a", spot=True)])


def test_unknown_gpu_token_is_resolved_from_live_catalog(fake: RunPodFake) -> None:
    fake.gpus.append(
        {
            **DEFAULT_GPUS[3],
            "id": "NVIDIA RTX PRO 6000 Blackwell",
            "name": "RTX PRO 6000",
            "dataCenters": {"US-KS-2": "LOW"},
        }
    )
    offers = adapter(fake).list_offers(OfferQuery(gpu_models=("RTXPRO6000",)))
    assert offers and offers[0].instance_type == "1x_RTX-PRO-6000_SECURE"
    node = adapter(fake).create_nodes("u", [spec("a", instance_type="1x_RTX-PRO-6000_SECURE")])[0]
    assert fake.pods[node.id]["gpu"]["id"] == "NVIDIA RTX PRO 6000 Blackwell"


def test_launch_5xx_before_acting_relaunches_once(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="createPod", times=1, status=503)
    nodes = adapter(fake).create_nodes("r", [spec("a")])
    assert len(nodes) == 1 and fake.launched == 1
    assert [c.status for c in fake.calls_of("createPod")] == [503, 201]


class _CreateTimesOut(httpx.BaseTransport):
    """Passes requests to the fake, except that the first pod create never gets an answer and
    never reaches the fake: from the client's side, exactly like a pod still being created."""

    def __init__(self, app: RunPodFake) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.timed_out = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v2/pods" and not self.timed_out:
            self.timed_out += 1
            raise httpx.ReadTimeout("no answer", request=request)
        return self.inner.handle_request(request)


def test_launch_timeout_with_no_pod_yet_is_not_relaunched(fake: RunPodFake) -> None:
    transport = _CreateTimesOut(fake)
    provider = RunPodProvider(KEY, base_url="http://runpod.fake", transport=transport, retry=FAST)
    with pytest.raises(ProviderAPIError, match="timed out"):
        provider.create_nodes("t", [spec("a")])
    assert transport.timed_out == 1 and fake.calls_of("createPod") == [] and fake.launched == 0
    assert [n.name for n in provider.create_nodes("t", [spec("a")])] == ["a"]  # a later create works
    assert fake.launched == 1


def test_failed_cleanup_names_what_remains(fake: RunPodFake) -> None:
    fake.faults.inject("capacity_after", route="createPod", times=None, k=1)
    fake.faults.inject("http_error", route="deletePod", times=None, status=500)
    with pytest.raises(CapacityError) as caught:
        adapter(fake).create_nodes("f", [spec("a"), spec("b")])
    (left,) = fake.pods
    message = str(caught.value)
    assert "1 of 2 new nodes made" in message and "cleanup FAILED" in message
    assert left in message and "provisioner gc --provider runpod --cluster f --yes" in message
    assert "1x_RTX4090_SECURE in US-KS-2" in message


def test_insufficient_balance_from_account_state(fake: RunPodFake) -> None:
    fake.balance_usd = 1.0
    with pytest.raises(QuotaError, match="insufficient balance"):
        adapter(fake).create_nodes("q", [spec("big", instance_type="2x_RTX4090_SECURE")])
    assert fake.instance_count() == 0


def test_delete_is_idempotent_and_scoped(fake: RunPodFake) -> None:
    # ~20 calls: at RunPod's published 0.8 req/s this test would spend 12 s queueing (the rate
    # limits have their own contract test).
    provider = adapter(fake, limits=RATE_LIMITS.scaled(50))
    provider.create_nodes("d", [spec("a"), spec("b")])
    provider.create_nodes("keep", [spec("a")])
    a = next(n for n in provider.get_nodes("d") if n.name == "a")
    provider.delete_nodes("d", [a.id])
    provider.delete_nodes("d", [a.id])
    assert [n.name for n in provider.get_nodes("d")] == ["b"]
    keep = provider.get_nodes("keep")[0]
    provider.delete_nodes("d", [keep.id])  # an id of another cluster is left alone
    assert [n.id for n in provider.get_nodes("keep")] == [keep.id]
    provider.delete_nodes("d")
    assert provider.get_nodes("d") == [] and len(provider.get_nodes("keep")) == 1


# ----- errors ------------------------------------------------------------------------------------
def _problem(status: int, detail: str, **extra: object) -> httpx.Response:
    return httpx.Response(status, json={"title": "x", "status": status, "detail": detail, **extra})


@pytest.mark.parametrize(
    ("response", "kind", "text"),
    [
        (_problem(400, NO_CAPACITY), CapacityError, "no longer any instances"),
        (_problem(402, "insufficient balance"), QuotaError, "insufficient balance"),
        (_problem(401, "missing bearer token"), CredentialsError, "missing bearer token"),
        (_problem(403, "access denied"), CredentialsError, "access denied"),
        (_problem(429, "rate limit exceeded for the minute window"), RateLimitError, "minute window"),
        (
            _problem(422, "Request validation failed.", errors=["$: additional properties 'x' not allowed"]),
            ProviderAPIError,
            "additional properties",
        ),
        (httpx.Response(502, text="<html>Bad gateway</html>"), ProviderAPIError, "Bad gateway"),
    ],
)
def test_error_mapping(response: httpx.Response, kind: type[Exception], text: str) -> None:
    error = map_error("runpod", response)
    assert type(error) is kind and text in str(error)
    assert "\n" not in str(error)


def test_graphql_errors_mapping() -> None:
    assert isinstance(
        _graphql_error("runpod", [{"message": NO_CAPACITY, "extensions": {"code": "SUPPLY_CONSTRAINT"}}]), CapacityError
    )
    assert isinstance(_graphql_error("runpod", [{"message": "Insufficient funds to rent"}]), QuotaError)
    other = _graphql_error("runpod", [{"message": "Something odd"}])
    assert isinstance(other, ProviderAPIError) and "Something odd" in str(other)


def test_user_data_and_key_never_logged(fake: RunPodFake, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "MUNGE-CANARY-5f1e"
    provider = adapter(fake)
    nodes = provider.create_nodes("sec", [spec("a", bootstrap="script", user_data=f"#!/bin/sh\necho {secret}\n")])
    fake.faults.inject("capacity_after", route="createPod", times=None, k=0)
    with pytest.raises(CapacityError) as caught:
        provider.create_nodes("sec", [spec("b", bootstrap="script", user_data=f"#!/bin/sh\necho {secret}\n")])
    encoded = base64.b64encode(secret.encode()).decode()[:8]
    texts = [r.getMessage() for r in caplog.records] + [
        repr(nodes),
        str(caught.value),
        repr(provider),
        repr(provider.client),
        repr(spec("x", bootstrap="script", user_data=secret)),
    ]
    joined = "\n".join(texts)
    assert secret not in joined and KEY not in joined and encoded not in joined


# ----- the fake itself ---------------------------------------------------------------------------
def test_fake_enforces_windows_and_reports_ratelimit_headers() -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=KEY, enforce_limits=True, windows=(("minute", 3, 60.0), ("hour", 100, 3600.0)))
    client = httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://runpod.fake",
        headers={"Authorization": f"Bearer {KEY}"},
    )
    answers = [client.get("/v2/account/ssh-keys") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[0].headers["RateLimit"] == '"minute";r=2;t=60, "hour";r=99;t=3600'
    assert answers[0].headers["RateLimit-Policy"] == '"minute";q=3;w=60, "hour";q=100;w=3600'
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 60
    assert answers[3].json()["detail"] == "rate limit exceeded for the minute window"
    assert [c.status for c in app.calls][-1] == 429
    assert app.validation_errors == []


def test_fake_graphql_rejects_undocumented_fields() -> None:
    app = RunPodFake(api_key=KEY, validate=False)
    client = httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://runpod.fake",
        headers={"Authorization": f"Bearer {KEY}"},
    )
    query = "mutation R($input: PodRentInterruptableInput!) { podRentInterruptable(input: $input) { id } }"
    answer = client.post(
        "/graphql",
        json={
            "query": query,
            "variables": {
                "input": {"gpuTypeId": "NVIDIA H200", "gpuCount": 1, "bidPerGpu": 2.5, "imageName": "x", "labels": {}}
            },
        },
    )
    assert answer.json()["errors"] and app.validation_errors
    assert "labels" in app.validation_errors[0]
    assert app.instance_count() == 0


def test_fake_runs_as_a_server() -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    process = subprocess.Popen(
        [sys.executable, "-m", "provisioner.testing.fakes", "runpod", "--port", "0", "--api-key", KEY],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split(" on ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        offers = RunPodProvider(KEY, base_url=url, retry=FAST).list_offers(OfferQuery(gpu_models=("H200",)))
        assert {o.region for o in offers} == {"US-TX-3"}
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_a_listed_offer_is_created_from_its_offer_id(fake: RunPodFake) -> None:
    """Offer ids write the GPU id's spaces as '+' (SAFE_ID); creating from one finds the GPU again."""
    provider = adapter(fake)
    offer = next(o for o in provider.list_offers(OfferQuery(gpu_models=("RTX4090",))) if o.gpus == 1)
    assert offer.offer_id and " " not in offer.offer_id
    node_spec = NodeSpec(name="a", instance_type=offer.instance_type, region=offer.region, offer_id=offer.offer_id)
    (node,) = provider.create_nodes("o", [node_spec])
    assert fake.pods[node.id]["gpu"]["id"] == offer.offer_id.replace("+", " ")
