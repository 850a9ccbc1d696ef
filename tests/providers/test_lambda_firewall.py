"""Lambda firewall rulesets for access.allowed_cidrs, on the validating Lambda fake."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from provisioner.errors import CredentialsError, PlanError, ProviderAPIError
from provisioner.providers.base import NodeSpec, SupportsFirewall
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.lambda_ import firewall
from provisioner.providers.lambda_.provider import LambdaProvider
from provisioner.testing.fakes.lambda_ import CONTRACT_API_KEY as API_KEY
from provisioner.testing.fakes.lambda_ import CONTRACT_SSH_KEY as SSH_KEY
from provisioner.testing.fakes.lambda_ import LambdaFake
from tests.conftest import need_shared

FAST = RetryPolicy(attempts=3, base_delay_s=0.001, max_delay_s=0.01)
UNTHROTTLED = RateLimits(requests_per_s=1000.0, burst=1000.0)  # the limiter has its own tests
REGION = "us-south-2"


@pytest.fixture
def fake() -> Iterator[LambdaFake]:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    app = LambdaFake(api_key=API_KEY)
    yield app
    assert app.validation_errors == [], "traffic broke Lambda's OpenAPI spec"


def adapter(app: LambdaFake, transport: httpx.BaseTransport | None = None, key: str = API_KEY) -> LambdaProvider:
    return LambdaProvider(
        key,
        base_url="http://lambda.fake",
        transport=transport or httpx.WSGITransport(app=app),
        limits=UNTHROTTLED,
        retry=FAST,
    )


def spec(name: str, region: str = REGION) -> NodeSpec:
    return NodeSpec(name=name, instance_type="gpu_8x_h100_sxm5", region=region, ssh_public_key=SSH_KEY)


def rules_of(app: LambdaFake, ruleset_id: str) -> list[tuple[str, list[int], str]]:
    return [(r["protocol"], r["port_range"], r["source_network"]) for r in app.firewall.rulesets[ruleset_id]["rules"]]


def test_ensure_admits_ssh_only_from_the_allowed_networks(fake: LambdaFake) -> None:
    provider = adapter(fake)
    assert isinstance(provider, SupportsFirewall)
    ruleset_id = provider.ensure_firewall("fw1", ["203.0.113.0/24", "198.51.100.7", "203.0.113.9/24"], REGION)
    (ruleset,) = fake.firewall.rulesets.values()
    assert ruleset["id"] == ruleset_id and ruleset["name"] == "provisioner-fw1"
    assert ruleset["region"]["name"] == REGION
    assert rules_of(fake, ruleset_id) == [("tcp", [22, 22], "203.0.113.0/24"), ("tcp", [22, 22], "198.51.100.7/32")]


def test_ensure_is_idempotent_and_replaces_changed_rules(fake: LambdaFake) -> None:
    provider = adapter(fake)
    first = provider.ensure_firewall("fw2", ["203.0.113.0/24"], REGION)
    assert provider.ensure_firewall("fw2", ["203.0.113.0/24"], REGION) == first
    assert len(fake.calls_of("create_firewall_ruleset")) == 1 and fake.calls_of("update_firewall_ruleset") == []
    assert provider.ensure_firewall("fw2", ["192.0.2.0/28"], REGION) == first
    assert rules_of(fake, first) == [("tcp", [22, 22], "192.0.2.0/28")]
    other = provider.ensure_firewall("fw2", ["192.0.2.0/28"], "us-east-1")  # one ruleset per region
    assert other != first and len(fake.firewall.rulesets) == 2


def test_launches_attach_the_clusters_ruleset_of_their_region(fake: LambdaFake) -> None:
    provider = adapter(fake)
    ruleset_id = provider.ensure_firewall("fw3", ["203.0.113.0/24"], REGION)
    provider.ensure_firewall("fw3", ["203.0.113.0/24"], "us-west-3")
    nodes = provider.create_nodes("fw3", [spec("a"), spec("b")])
    assert [r["firewall_rulesets"] for r in fake.launch_requests] == [[{"id": ruleset_id}]]
    assert sorted(provider.client.list_firewall_rulesets()[0].instance_ids) == sorted(n.id for n in nodes)
    provider.create_nodes("bare", [spec("c")])  # a cluster without a firewall attaches none
    assert "firewall_rulesets" not in fake.launch_requests[-1]


def test_remove_waits_for_the_nodes_and_a_gone_ruleset_is_a_noop(fake: LambdaFake) -> None:
    provider = adapter(fake)
    ruleset_id = provider.ensure_firewall("fw4", ["203.0.113.0/24"], REGION)
    provider.create_nodes("fw4", [spec("a")])
    with pytest.raises(ProviderAPIError, match=f"firewall ruleset {ruleset_id}.*in use"):
        provider.remove_firewall("fw4")
    assert ruleset_id in fake.firewall.rulesets
    provider.delete_nodes("fw4")
    provider.remove_firewall("fw4")
    assert fake.firewall.rulesets == {}
    provider.remove_firewall("fw4")  # nothing left: success
    provider.ensure_firewall("fw4", ["203.0.113.0/24"], REGION)
    racing = _GoneBeforeDelete(fake)
    adapter(fake, racing).remove_firewall("fw4")  # deleted by someone else after our listing: success
    assert racing.statuses == [404] and fake.firewall.rulesets == {}


class _GoneBeforeDelete(httpx.BaseTransport):
    """Each ruleset DELETE finds the ruleset already deleted (by someone else, after the listing)."""

    def __init__(self, app: LambdaFake) -> None:
        self.app = app
        self.inner = httpx.WSGITransport(app=app)
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE" and "/firewall-rulesets/" in request.url.path:
            self.app.firewall.rulesets.pop(request.url.path.rsplit("/", 1)[-1], None)
            response = self.inner.handle_request(request)
            self.statuses.append(response.status_code)
            return response
        return self.inner.handle_request(request)


class _AnswerLost(httpx.BaseTransport):
    """The first ruleset create reaches the fake (the ruleset exists) but its answer is lost."""

    def __init__(self, app: LambdaFake) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/firewall-rulesets") and not self.lost:
            self.lost += 1
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_a_lost_create_answer_is_adopted_not_created_twice(fake: LambdaFake) -> None:
    transport = _AnswerLost(fake)
    ruleset_id = adapter(fake, transport).ensure_firewall("fw5", ["203.0.113.0/24"], REGION)
    assert transport.lost == 1 and list(fake.firewall.rulesets) == [ruleset_id]


def test_what_a_ruleset_cannot_say_is_left_out_or_refused(fake: LambdaFake) -> None:
    provider = adapter(fake)
    ruleset_id = provider.ensure_firewall("fw6", ["2001:db8::/32", "203.0.113.0/24"], REGION)
    assert rules_of(fake, ruleset_id) == [("tcp", [22, 22], "203.0.113.0/24")]  # IPv6: no rule, so no SSH
    calls = len(fake.calls)
    with pytest.raises(PlanError, match="not a CIDR"):
        provider.ensure_firewall("fw6", ["203.0.113.0/33"], REGION)
    with pytest.raises(PlanError, match="too long"):
        provider.ensure_firewall("x" * 60, ["203.0.113.0/24"], REGION)
    assert len(fake.calls) == calls, "a request went out before the refusal"
    assert firewall.ruleset_name("fw6") == "provisioner-fw6"


def test_errors_are_mapped(fake: LambdaFake) -> None:
    with pytest.raises(CredentialsError):
        adapter(fake, key="wrong-key").ensure_firewall("fw7", ["203.0.113.0/24"], REGION)
    with pytest.raises(ProviderAPIError) as caught:
        adapter(fake).ensure_firewall("fw7", ["203.0.113.0/24"], "mars-north-1")
    assert caught.value.status == 400 and "mars-north-1" in str(caught.value)
