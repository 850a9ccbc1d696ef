"""RunPod Instant Clusters: cluster offers bought through ``/v2/clusters`` on the validating fake."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator

import httpx
import pytest

from provisioner.capabilities import Purchase
from provisioner.catalog import load_bundled_catalog
from provisioner.errors import (
    CapacityError,
    ClusterBusyError,
    CredentialsError,
    PlanError,
    ProviderAPIError,
    QuotaError,
)
from provisioner.providers.base import NodeSpec, owner_id
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.runpod import clusters
from provisioner.providers.runpod import provider as pods
from provisioner.providers.runpod.provider import RunPodProvider
from provisioner.testing.fakes.runpod import RunPodFake
from tests.conftest import need_shared
from tests.providers.contract import wait_running

KEY = "rp-cluster-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ me@laptop"
FAST = RetryPolicy(attempts=3, base_delay_s=0.001, max_delay_s=0.01)
UNTHROTTLED = RateLimits(requests_per_s=1000.0, burst=1000.0)  # the limiter has its own tests
H100 = "cluster_8x_H100-SXM"


@pytest.fixture
def fake() -> Iterator[RunPodFake]:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=KEY)
    yield app
    assert app.validation_errors == [], "traffic broke RunPod's OpenAPI spec"


def adapter(app: RunPodFake, transport: httpx.BaseTransport | None = None, key: str = KEY) -> RunPodProvider:
    return RunPodProvider(
        key,
        base_url="http://runpod.fake",
        transport=transport or httpx.WSGITransport(app=app),
        retry=FAST,
        limits=UNTHROTTLED,
        poll_interval_s=0.001,
    )


def node(name: str, **overrides: object) -> NodeSpec:
    values: dict[str, object] = {
        "name": name,
        "instance_type": H100,
        "region": "US-KS-2",
        "gpus": 8,
        "ssh_public_key": SSH_KEY,
        "bootstrap": "script",
        "user_data": "#!/bin/sh\necho boot\n",
    }
    values.update(overrides)
    return NodeSpec(**values)  # type: ignore[arg-type]


def created_clusters(app: RunPodFake) -> list[dict[str, object]]:
    return list(app.cluster_routes.clusters.values())


def test_bundled_cluster_offers_are_the_types_this_dispatches() -> None:
    offers = [o for o in load_bundled_catalog().offers if o.provider == "runpod" and o.purchase is Purchase.CLUSTER]
    assert offers and all(clusters.is_cluster_type(o.instance_type) for o in offers)
    assert not clusters.is_cluster_type("8x_H100-SXM_SECURE")
    names = ("CLUSTER_ENV", "INSTANCE_TYPE_ENV", "USER_DATA_ENV", "OWNER_ENV", "EXPIRES_ENV")
    assert [getattr(clusters, name) for name in names] == [getattr(pods, name) for name in names]


def test_create_buys_one_cluster_named_by_rank_on_the_overlay(fake: RunPodFake) -> None:
    provider = adapter(fake)
    made = provider.create_nodes("c1", [node("c1-0"), node("c1-1"), node("c1-2")])
    assert [n.name for n in made] == ["c1-0", "c1-1", "c1-2"]
    (cluster,) = created_clusters(fake)
    assert cluster["name"] == "c1" and cluster["compute"] == {
        "gpuTypeId": "NVIDIA H100 80GB HBM3",
        "gpuCountPerPod": 8,
        "podCount": 3,
    }
    assert cluster["dataCenterId"] == "US-KS-2" and cluster["type"] == "TRAINING"
    members = fake.cluster_routes.members(str(cluster["id"]))
    assert {n.id: n.name for n in made} == {pod["id"]: f"c1-{pod['cluster']['rank']}" for pod in members}
    assert [n.private_ip for n in made] == ["10.65.0.2", "10.65.0.3", "10.65.0.4"]
    assert {fake.bought[n.id].cluster_product for n in made} == {cluster["id"]}
    assert fake.launched == 3 and fake.ssh_keys and fake.ssh_keys[0].startswith(SSH_KEY.rsplit(" ", 1)[0])
    running = wait_running(provider, "c1")
    assert [(n.name, n.instance_type, n.region) for n in running] == [(f"c1-{i}", H100, "US-KS-2") for i in range(3)]
    assert all(n.public_ip for n in running)


def test_a_retried_create_finds_the_cluster_and_buys_nothing(fake: RunPodFake) -> None:
    provider = adapter(fake)
    first = provider.create_nodes("c2", [node("a"), node("b")])
    again = provider.create_nodes("c2", [node("a"), node("b")])
    assert [n.id for n in again] == [n.id for n in first]
    assert len(created_clusters(fake)) == 1 and fake.launched == 2
    assert [c.status for c in fake.calls_of("createCluster")] == [201]
    with pytest.raises(PlanError, match="cannot grow"):
        provider.create_nodes("c2", [node("a"), node("b"), node("c")])
    assert fake.launched == 2


def test_an_instant_cluster_of_an_earlier_run_is_refused_not_adopted(fake: RunPodFake) -> None:
    """Every member carries the run mark (PROVISIONER_RUN, echoed by the fake's listing); a create for
    another run of the same name refuses the cluster the earlier run left (nothing bought)."""
    provider = adapter(fake)
    first = provider.create_nodes(
        "c2r", [node("a", run="20261128-101500-0a1b2c"), node("b", run="20261128-101500-0a1b2c")]
    )
    assert {n.run for n in provider.get_nodes("c2r")} == {"20261128-101500-0a1b2c"}
    again = provider.create_nodes(
        "c2r", [node("a", run="20261128-101500-0a1b2c"), node("b", run="20261128-101500-0a1b2c")]
    )
    assert [n.id for n in again] == [n.id for n in first]  # the same run's retry adopts
    with pytest.raises(ClusterBusyError, match=r"earlier run \(20261128-101500-0a1b2c\).*gc --provider runpod"):
        provider.create_nodes("c2r", [node("a", run="20261128-221500-3d4e5f"), node("b", run="20261128-221500-3d4e5f")])
    assert len(created_clusters(fake)) == 1 and fake.launched == 2


class _AnswerLost(httpx.BaseTransport):
    """The first cluster create reaches the fake (the cluster is bought) but its answer is lost."""

    def __init__(self, app: RunPodFake) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path == "/v2/clusters" and not self.lost:
            self.lost += 1
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_a_lost_create_answer_is_adopted_not_bought_twice(fake: RunPodFake) -> None:
    transport = _AnswerLost(fake)
    made = adapter(fake, transport).create_nodes("c3", [node("a"), node("b")])
    assert transport.lost == 1 and len(created_clusters(fake)) == 1 and fake.launched == 2
    assert sorted(n.name for n in made) == ["a", "b"]


def test_a_definite_500_with_nothing_made_is_created_once_more(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="createCluster", times=1, status=500)
    adapter(fake).create_nodes("c4", [node("a"), node("b")])
    assert [c.status for c in fake.calls_of("createCluster")] == [500, 201] and len(created_clusters(fake)) == 1


def test_members_that_cannot_be_listed_roll_the_cluster_back(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="listClusterPods", times=None, status=500)
    with pytest.raises(ProviderAPIError, match="was deleted") as caught:
        adapter(fake).create_nodes("c5", [node("a"), node("b")])
    assert H100 in str(caught.value) and "US-KS-2" in str(caught.value)
    assert created_clusters(fake) == [] and fake.instance_count() == 0


def test_failed_rollback_names_the_cluster_and_the_command(fake: RunPodFake) -> None:
    fake.faults.inject("http_error", route="listClusterPods", times=None, status=500)
    fake.faults.inject("http_error", route="deleteCluster", times=None, status=500)
    with pytest.raises(ProviderAPIError) as caught:
        adapter(fake).create_nodes("c6", [node("a"), node("b")])
    (cluster,) = created_clusters(fake)
    assert f"curl -X DELETE http://runpod.fake/v2/clusters/{cluster['id']}" in str(caught.value)


def test_delete_removes_the_whole_cluster_and_a_gone_one_is_a_noop(fake: RunPodFake) -> None:
    provider = adapter(fake)
    made = provider.create_nodes("c7", [node("a"), node("b")])
    kept = provider.create_nodes("other", [node("x"), node("y")])
    with pytest.raises(PlanError, match="only be deleted whole"):
        provider.delete_nodes("c7", [made[0].id])
    assert fake.instance_count() == 4
    provider.delete_nodes("c7", [n.id for n in made])
    assert provider.get_nodes("c7") == [] and len(created_clusters(fake)) == 1
    assert [n.id for n in provider.get_nodes("other")] == [n.id for n in kept]
    provider.delete_nodes("c7")  # gone already: nothing to do
    fake.faults.inject("http_error", route="deleteCluster", times=1, status=404)
    provider.delete_nodes("other")  # RunPod says it is gone between the listing and the delete: success
    assert fake.calls_of("deleteCluster")[-1].status == 404 and len(created_clusters(fake)) == 1
    provider.delete_nodes("other")
    assert created_clusters(fake) == [] and fake.instance_count() == 0


def test_member_pods_are_not_deleted_through_the_pod_endpoint(fake: RunPodFake) -> None:
    made = adapter(fake).create_nodes("c8", [node("a"), node("b")])
    with pytest.raises(ProviderAPIError) as caught:
        adapter(fake).client.delete_pod(made[0].id)
    assert caught.value.status == 409 and fake.instance_count() == 2
    assert all(p.cluster for p in adapter(fake).client.list_pods(include_cluster_pods=True))
    assert adapter(fake).client.list_pods() == []


def test_each_node_gets_its_own_script_by_rank(fake: RunPodFake) -> None:
    head, worker = "#!/bin/sh\necho head\n", "#!/bin/sh\necho worker\n"
    expires = dt.datetime(2026, 11, 24, 6, tzinfo=dt.UTC)
    adapter(fake).create_nodes(
        "c9",
        [
            node("h", bootstrap="script", user_data=head, expires_at=expires),
            node("w", bootstrap="script", user_data=worker, expires_at=expires),
        ],
    )
    (pod, *_) = fake.pods.values()
    env = pod["env"]
    assert env[clusters.NODES_ENV] == "h,w" and env[clusters.EXPIRES_ENV] == "2026-11-24T06:00:00Z"
    assert env[clusters.OWNER_ENV] == owner_id()
    owned = {o.node.name: o for o in adapter(fake).list_owned()}
    assert sorted(owned) == ["h", "w"] and owned["w"].expires_at == expires
    assert base64.b64decode(env[f"{clusters.USER_DATA_ENV}_0"]).decode() == head
    assert base64.b64decode(env[f"{clusters.USER_DATA_ENV}_1"]).decode() == worker
    assert clusters.USER_DATA_ENV not in env and "NODE_RANK" in pod["args"]


@pytest.mark.parametrize(
    ("nodes", "why"),
    [
        ([node("a", spot=True), node("b", spot=True)], "on demand only"),
        ([node("a")], "2-250 nodes"),
        ([node("a"), node("b", region="EU-RO-1")], "same type, data center"),
        ([node("a"), NodeSpec(name="b", instance_type="1x_RTX4090_SECURE", region="US-KS-2")], "mixed"),
        ([node("a,b"), node("c")], "no comma"),
    ],
)
def test_what_one_cluster_cannot_be_is_refused_before_any_request(
    fake: RunPodFake, nodes: list[NodeSpec], why: str
) -> None:
    with pytest.raises(PlanError, match=why):
        adapter(fake).create_nodes("r", nodes)
    assert fake.calls == [] and fake.launched == 0


def test_errors_are_mapped(fake: RunPodFake) -> None:
    with pytest.raises(CapacityError, match="no longer any instances"):
        adapter(fake).create_nodes(
            "e1",
            [
                node("a", instance_type="cluster_8x_A100-80GB-SXM", region="CA-MTL-1"),
                node("b", instance_type="cluster_8x_A100-80GB-SXM", region="CA-MTL-1"),
            ],
        )
    fake.balance_usd = 10.0
    with pytest.raises(QuotaError, match="insufficient balance"):
        adapter(fake).create_nodes("e2", [node("a"), node("b")])
    with pytest.raises(CredentialsError):
        adapter(fake, key="wrong").create_nodes("e3", [node("a"), node("b")])
    fake.balance_usd = None
    fake.faults.inject("capacity_after", route="createCluster", times=None, k=1)
    with pytest.raises(CapacityError):
        adapter(fake).create_nodes("e4", [node("a"), node("b")])
    assert created_clusters(fake) == [] and fake.launched == 0


class _MembersHidden(httpx.BaseTransport):
    """The first ``polls`` member listings come back empty, as while RunPod is still placing pods."""

    def __init__(self, app: RunPodFake, polls: int) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.polls = polls
        self.seen = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "GET" and request.url.path.endswith("/pods") and "/clusters/" in request.url.path:
            self.seen += 1
            if self.seen <= self.polls:
                return httpx.Response(200, json={"pods": []})
        return response


def test_a_retry_while_members_are_being_placed_waits_and_adopts(fake: RunPodFake) -> None:
    made = adapter(fake).create_nodes("c10", [node("a"), node("b")])
    hidden = _MembersHidden(fake, polls=3)
    again = adapter(fake, hidden).create_nodes("c10", [node("a"), node("b")])
    assert [n.id for n in again] == [n.id for n in made] and hidden.seen >= 4
    assert len(created_clusters(fake)) == 1 and fake.launched == 2


def test_members_never_listed_on_a_retry_buy_nothing(fake: RunPodFake) -> None:
    adapter(fake).create_nodes("c11", [node("a"), node("b")])
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    provider = adapter(fake, _MembersHidden(fake, polls=10**6))
    with pytest.raises(ProviderAPIError, match="did not list its 2 member pods"):
        clusters.create(provider, "c11", [node("a"), node("b")], clock=lambda: now[0], sleep=sleep)
    assert now[0] >= clusters.MEMBERS_TIMEOUT_S and len(created_clusters(fake)) == 1 and fake.launched == 2
