"""Lambda-specific behaviour beyond the shared contract: offers, launch bodies, batching,
rollback details, adoption, status mapping, error mapping."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

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
from provisioner.providers.base import CLUSTER_TAG, OWNER_TAG, NodeSpec, NodeStatus, OfferQuery, owner_id
from provisioner.providers.http import RetryPolicy
from provisioner.providers.lambda_.client import LIMITS, map_error
from provisioner.providers.lambda_.provider import PLACEHOLDER, LambdaProvider, canonical_gpu, key_name
from provisioner.testing.fakes.base import RunningServer
from provisioner.testing.fakes.lambda_ import CONTRACT_API_KEY as API_KEY
from provisioner.testing.fakes.lambda_ import CONTRACT_SSH_KEY as SSH_KEY
from provisioner.testing.fakes.lambda_ import LambdaFake
from tests.conftest import need_shared
from tests.providers.harness import VirtualTime

FAST = LIMITS.scaled(60)


@pytest.fixture
def fake() -> LambdaFake:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    return LambdaFake(api_key=API_KEY)


@pytest.fixture
def lam(fake: LambdaFake, serve_fake: Callable[[LambdaFake], RunningServer], fast_retry: RetryPolicy) -> LambdaProvider:
    server = serve_fake(fake)
    return LambdaProvider(API_KEY, base_url=server.url, limits=FAST, timeout_s=1.0, retry=fast_retry)


def spec(name: str, instance_type: str = "gpu_8x_h100_sxm5", region: str = "us-south-2", **kw: object) -> NodeSpec:
    return NodeSpec(name=name, instance_type=instance_type, region=region, ssh_public_key=SSH_KEY, **kw)


def test_offers_have_lambda_prices_and_canonical_gpus(lam: LambdaProvider) -> None:
    offers = lam.list_offers(OfferQuery())
    h100 = [o for o in offers if o.instance_type == "gpu_8x_h100_sxm5"]
    assert sorted(o.region for o in h100) == ["us-south-2", "us-west-3"]
    offer = h100[0]
    assert (offer.gpu_model, offer.gpus, offer.gpu_memory_gib) == ("H100", 8, 80.0)
    assert float(offer.price_per_hour_usd) == pytest.approx(23.92)
    assert offer.spot_price_per_hour_usd is None
    assert (offer.vcpus, offer.memory_gib, offer.billing_increment_s) == (208, 1800, 60)
    assert offer.interruptions_per_node_hour > 0 and offer.interruption_basis
    assert not [o for o in offers if o.instance_type in ("cpu_4x_general", "gpu_8x_v100")]
    assert {o.gpu_model for o in offers} >= {"GH200", "B200", "H100", "A100", "A10"}
    assert lam.list_offers(OfferQuery(spot=True)) == []
    only = lam.list_offers(OfferQuery(gpu_models=("a100",), regions=("us-east-1",), min_gpus=8))
    assert [(o.instance_type, o.region) for o in only] == [("gpu_8x_a100_80gb_sxm4", "us-east-1")]


@pytest.mark.parametrize(
    ("description", "model"),
    [
        ("H100 (80 GB SXM5)", "H100"),
        ("Tesla V100 (16 GB)", "V100"),
        ("GH200 (96 GB)", "GH200"),
        ("RTX 6000 (24 GB)", "RTX6000"),
        ("A6000 (48 GB)", "RTXA6000"),
        ("B200 (180 GB SXM6)", "B200"),
    ],
)
def test_canonical_gpu(description: str, model: str) -> None:
    assert canonical_gpu(description) == model


def test_one_batched_launch_with_tags_name_key_and_user_data(lam: LambdaProvider, fake: LambdaFake) -> None:
    nodes = lam.create_nodes(
        "c1", [spec(f"w{i}", bootstrap="cloud_init", user_data="#cloud-config\nruncmd: [true]\n") for i in range(3)]
    )
    assert sorted(n.name for n in nodes) == ["w0", "w1", "w2"]
    assert len(fake.launch_requests) == 1
    body = fake.launch_requests[0]
    assert body["quantity"] == 3
    assert body["ssh_key_names"] == [key_name(SSH_KEY)]
    assert body["name"] == f"c1-{PLACEHOLDER}"
    assert body["tags"] == [{"key": CLUSTER_TAG, "value": "c1"}, {"key": OWNER_TAG, "value": owner_id()}]
    assert body["user_data"].startswith("#cloud-config")
    assert sorted(i["name"] for i in fake.instances.values()) == ["c1-w0", "c1-w1", "c1-w2"]
    # the key is registered once and reused by name
    lam.create_nodes("c2", [spec("x")])
    assert len(fake.ssh_keys) == 1
    assert fake.launch_requests[1]["name"] == "c2-x" and "quantity" in fake.launch_requests[1]


def test_image_family_or_id(lam: LambdaProvider, fake: LambdaFake) -> None:
    lam.create_nodes("c1", [spec("a", image="lambda-stack-24-04")])
    lam.create_nodes("c2", [spec("b", image="ddaedf1b7a0e41ac981711504493b242")])
    assert fake.launch_requests[0]["image"] == {"family": "lambda-stack-24-04"}
    assert fake.launch_requests[1]["image"] == {"id": "ddaedf1b7a0e41ac981711504493b242"}


def test_launches_respect_the_launch_limit(
    fake: LambdaFake, serve_fake: Callable[[LambdaFake], RunningServer], fast_retry: RetryPolicy
) -> None:
    # Virtual time moves only in the limiters' sleeps: three launches with a burst of one wait
    # two launch periods (12/60 = 0.2 s at the scaled limit) whatever the threads do.
    time = VirtualTime()
    lam = LambdaProvider(API_KEY, base_url=serve_fake(fake).url, limits=FAST.on(time), timeout_s=1.0, retry=fast_retry)
    types = [("gpu_8x_h100_sxm5", "us-south-2"), ("gpu_4x_h100_sxm5", "us-south-3"), ("gpu_1x_a10", "us-east-1")]
    lam.create_nodes("c1", [spec(f"n{i}", t, r) for i, (t, r) in enumerate(types)])
    launcher = lam.client.api.launch_limiter
    assert len(fake.calls_of("launch")) == 3 and launcher is not None and launcher.granted == 3
    assert (launcher.rate_per_s, launcher.burst) == (5.0, 1.0)
    assert time.now >= 2 / 5.0 - 1e-9


def test_capacity_on_second_group_rolls_back_first(lam: LambdaProvider, fake: LambdaFake) -> None:
    fake.capacity["gpu_1x_a10"].clear()
    with pytest.raises(CapacityError) as caught:
        lam.create_nodes("c1", [spec("a"), spec("b"), spec("c", "gpu_1x_a10", "us-east-1")])
    message = str(caught.value)
    assert "gpu_1x_a10 in us-east-1" in message and "rolled back 2" in message
    assert "insufficient-capacity" in message and "capacity now:" in message
    assert fake.instance_count() == 0 and fake.launched == 2


def test_failed_cleanup_names_what_remains(lam: LambdaProvider, fake: LambdaFake) -> None:
    fake.faults.inject("capacity_after", route="launch", times=None, k=1, partial=True)
    fake.faults.inject("http_error", route="terminate", times=None, status=500)
    with pytest.raises(CapacityError) as caught:
        lam.create_nodes("c1", [spec("a"), spec("b")])
    message = str(caught.value)
    (left,) = fake.instances
    assert "cleanup FAILED" in message and left in message
    assert "instances may exist in cluster c1" in message
    assert "provisioner gc --provider lambda --cluster c1 --yes" in message
    assert API_KEY not in message


def test_leftover_placeholders_are_adopted(lam: LambdaProvider, fake: LambdaFake) -> None:
    # A batch launched by an earlier run that died before renaming.
    fake.instances.clear()
    lam.create_nodes("c1", [spec("a"), spec("b")])
    for instance_id in fake.instances:
        fake.instances[instance_id]["name"] = f"c1-{PLACEHOLDER}"
    nodes = lam.create_nodes("c1", [spec("a"), spec("b")])
    assert sorted(n.name for n in nodes) == ["a", "b"]
    assert fake.launched == 2 and len(fake.launch_requests) == 1


def test_launch_5xx_without_instances_is_raised_not_relaunched(lam: LambdaProvider, fake: LambdaFake) -> None:
    fake.faults.inject("http_error", route="launch", times=1, status=503)
    with pytest.raises(ProviderAPIError) as caught:
        lam.create_nodes("c1", [spec("a")])
    assert caught.value.status == 503
    assert fake.launched == 0 and len(fake.calls_of("launch")) == 1
    assert [n.name for n in lam.create_nodes("c1", [spec("a")])] == ["a"]


def test_status_mapping_and_ips(lam: LambdaProvider, fake: LambdaFake) -> None:
    nodes = lam.create_nodes("c1", [spec("a"), spec("b"), spec("c")])
    assert {n.status for n in nodes} == {NodeStatus.PENDING}
    by_name = {n.name: n.id for n in nodes}
    fake.set_status(by_name["b"], "unhealthy")
    fake.set_status(by_name["c"], "preempted")
    got = {n.name: n for n in lam.get_nodes("c1")}
    assert got["a"].status == NodeStatus.RUNNING and got["a"].public_ip
    assert (got["b"].status, got["b"].provider_state) == (NodeStatus.FAILED, "unhealthy")
    assert (got["c"].status, got["c"].provider_state) == (NodeStatus.TERMINATED, "preempted")
    assert got["a"].private_ip and got["a"].instance_type == "gpu_8x_h100_sxm5"


def test_delete_subset_and_vanished_ids(lam: LambdaProvider, fake: LambdaFake) -> None:
    nodes = lam.create_nodes("c1", [spec("a"), spec("b")])
    other = lam.create_nodes("c2", [spec("z")])
    lam.delete_nodes("c1", [nodes[0].id, other[0].id])  # an id of another cluster is ignored
    states = {n.name: n.status for n in lam.get_nodes("c1")}
    assert states[nodes[0].name] == NodeStatus.STOPPING and states[nodes[1].name] != NodeStatus.STOPPING
    assert fake.instances[other[0].id]["status"] != "terminating"
    # an instance that vanishes between listing and terminating: the call is retried without it
    fake.faults.inject("http_error", route="terminate", times=1, status=404)
    lam.delete_nodes("c1")
    lam.delete_nodes("c2")
    assert fake.instance_count() == 0


def test_missing_ssh_key_everywhere_is_one_line_error(lam: LambdaProvider) -> None:
    with pytest.raises(ProviderAPIError, match="needs exactly one SSH key"):
        lam.create_nodes("c1", [NodeSpec(name="a", instance_type="gpu_1x_a10", region="us-east-1")])


def test_env_url_and_key_in_process(fake: LambdaFake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", "http://lambda.fake")
    monkeypatch.setenv("LAMBDA_API_KEY", API_KEY)
    provider = LambdaProvider(limits=FAST, transport=httpx.WSGITransport(app=fake))
    assert provider.base_url == "http://lambda.fake"
    provider.check_credentials()
    assert API_KEY not in repr(provider) and API_KEY not in repr(provider.client)
    monkeypatch.delenv("LAMBDA_API_KEY")
    with pytest.raises(CredentialsError, match="LAMBDA_API_KEY"):
        LambdaProvider()
    assert fake.validation_errors == []


def _response(status: int, error: dict[str, str] | None, headers: dict[str, str] | None = None) -> httpx.Response:
    body = json.dumps({"error": error}) if error is not None else "<html>bad gateway</html>"
    return httpx.Response(
        status, content=body.encode(), headers=headers, request=httpx.Request("GET", "http://x/api/v1/instances")
    )


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (401, "global/invalid-api-key", CredentialsError),
        (403, "global/account-inactive", QuotaError),
        (403, "global/invalid-address", QuotaError),
        (400, "global/quota-exceeded", QuotaError),
        (400, "instance-operations/launch/insufficient-capacity", CapacityError),
        (429, "global/rate-limited", RateLimitError),
        (404, "global/object-does-not-exist", ProviderAPIError),
        (500, "provider/internal-unavailable", ProviderAPIError),
    ],
)
def test_error_mapping(status: int, code: str, kind: type[Exception]) -> None:
    error = map_error("lambda", _response(status, {"code": code, "message": "Said so.", "suggestion": "Do X."}))
    assert type(error) is kind
    assert code in str(error) and "Said so. Do X." in str(error)
    assert "\n" not in str(error)


def test_error_mapping_non_json() -> None:
    error = map_error("lambda", _response(502, None))
    assert isinstance(error, ProviderAPIError) and error.status == 502 and "bad gateway" in str(error)


def test_retries_logged_without_key(lam: LambdaProvider, fake: LambdaFake, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.faults.inject("rate_limit", route="list_instances", times=2, retry_after_s=0.01)
    assert lam.get_nodes("c1") == []
    assert "retrying" in caplog.text and API_KEY not in caplog.text


def test_spot_node_is_refused_before_buying(lam: LambdaProvider, fake: LambdaFake) -> None:
    with pytest.raises(PlanError, match="spot") as caught:
        lam.create_nodes("c1", [spec("a"), spec("b", spot=True)])
    assert "b" in str(caught.value)
    assert fake.calls == [] and fake.launched == 0, "a request went out before the refusal"


def test_transient_5xx_on_a_rename_is_retried_not_rolled_back(lam: LambdaProvider, fake: LambdaFake) -> None:
    fake.faults.inject("http_error", route="rename", times=1, status=500)
    nodes = lam.create_nodes("c1", [spec("a"), spec("b")])
    assert sorted(n.name for n in nodes) == ["a", "b"]
    assert [c.status for c in fake.calls_of("rename")].count(500) == 1
    assert fake.launched == 2 and fake.instance_count() == 2
