"""Fluence-specific behaviour beyond the contract suite: names, offers, delete-before-ACTIVE,
error mapping, the v2 cloud-init path, and the fake's docs-derived schemas."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from provisioner.errors import CapacityError, CredentialsError, PlanError, ProviderAPIError, QuotaError
from provisioner.providers.base import NodeSpec, NodeStatus, OfferQuery
from provisioner.providers.fluence.client import LIMITS, is_not_found, map_error
from provisioner.providers.fluence.models import DeployRequest
from provisioner.providers.fluence.naming import MAX_NAME, canonical_gpu, cluster_mark, instance_name, node_of, vram_gib
from provisioner.providers.fluence.provider import FluenceProvider
from provisioner.providers.http import RetryPolicy
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.testing.fakes.fluence import CONTRACT_API_KEY as API_KEY
from provisioner.testing.fakes.fluence import CONTRACT_INSTANCE_TYPE as INSTANCE_TYPE
from provisioner.testing.fakes.fluence import CONTRACT_REGION as REGION
from provisioner.testing.fakes.fluence import CONTRACT_SSH_KEY as SSH_KEY
from provisioner.testing.fakes.fluence import DOC_SCHEMAS, FluenceFake, doc_problem
from provisioner.testing.fakes.fluence import contract_node_specs as node_specs
from provisioner.waiting import WaitTimeout
from tests.conftest import need_shared

VALID = re.compile(r"^[a-z0-9-]{1,25}$")


@pytest.fixture
def fake() -> FluenceFake:
    need_shared("provider-apis", "fluence", "fluence-openapi-original.yml")
    return FluenceFake(api_key=API_KEY)


@pytest.fixture
def provider(fake: FluenceFake, serve_fake: Callable[[FakeApp], RunningServer]) -> FluenceProvider:
    server = serve_fake(fake)
    return FluenceProvider(
        API_KEY,
        base_url=server.url,
        timeout_s=2.0,
        poll_interval_s=0.02,
        limits=LIMITS.scaled(100),
        retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05),
    )


def cid() -> str:
    return f"ft{uuid.uuid4().hex[:6]}"


# ----- name scheme ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cluster_id, node",
    [
        ("ct1a2b3c", "n0"),
        ("prod", "worker-007"),
        ("My_Cluster-01", "n1"),
        ("c", "GPU_Worker.0001"),
        ("a-very-long-cluster-identifier-2026", "an-extremely-long-node-name-that-never-fits"),
        ("x", "-"),
    ],
)
def test_instance_name_fits_fluence_rules_and_round_trips(cluster_id: str, node: str) -> None:
    name = instance_name(cluster_id, node)
    assert VALID.match(name), name
    assert len(name) <= MAX_NAME
    assert name == instance_name(cluster_id, node), "must be deterministic for idempotent create"
    part = node_of(cluster_id, name)
    assert part is not None and name == f"{cluster_mark(cluster_id)}-{part}"


def test_plain_names_stay_readable() -> None:
    assert instance_name("ct1a2b3c", "n0", "alice").startswith("ct1a2") and instance_name(
        "ct1a2b3c", "n0", "alice"
    ).endswith("-n0")
    assert instance_name("prod", "worker-007", "alice").startswith("prod")
    assert instance_name("prod", "worker-007", "alice").endswith("-worker-007")


def test_the_mark_names_the_owner() -> None:
    """The name's mark is a hash of cluster and owner: one owner never claims another's node of a
    cluster with the same name, nor a name a user chose."""
    alice = instance_name("prod", "n0", "alice")
    assert alice != instance_name("prod", "n0", "bob")
    assert node_of("prod", alice, "alice") == "n0"
    assert node_of("prod", alice, "bob") is None
    assert node_of("research", "research-box", "alice") is None
    assert node_of("prod", "prod-n0", "alice") is None  # the pre-owner scheme's name: not claimed


def test_long_names_differ_by_hash() -> None:
    a = instance_name("cluster", "gpu-worker-number-0001")
    b = instance_name("cluster", "gpu-worker-number-0002")
    assert a != b and len(a) <= MAX_NAME and len(b) <= MAX_NAME


def test_cluster_marks_do_not_claim_each_other() -> None:
    assert node_of("ab", instance_name("abc", "n0")) is None
    assert node_of("abc", instance_name("ab", "c-n0")) is None
    assert node_of("ab", instance_name("ab", "c-n0")) == "c-n0"
    assert node_of("My_Cluster-01", instance_name("My_Cluster-02", "n0")) is None
    assert node_of("ab", "azure-booby-3323") is None


def test_gpu_names_and_memory() -> None:
    assert [canonical_gpu(m) for m in ("h100", "a100", "rtx4090", "l40s", "rtx-4090")] == [
        "H100",
        "A100",
        "RTX4090",
        "L40S",
        "RTX4090",
    ]
    assert vram_gib("141Gi") == 141.0 and vram_gib("80Gi") == 80.0 and vram_gib("n/a") is None


# ----- offers ---------------------------------------------------------------------------------
def test_offers_carry_three_hour_minimum_and_zero_undocumented_egress(provider: FluenceProvider) -> None:
    offers = provider.list_offers(OfferQuery())
    assert len(offers) == 8
    assert {o.billing_increment_s for o in offers} == {3600}
    assert {o.billing_minimum_s for o in offers} == {3 * 3600}
    assert all(o.egress_usd_per_gb == 0 and "undocumented" in o.interruption_basis for o in offers)
    assert all(o.spot_price_per_hour_usd is None for o in offers)
    a10 = [o for o in offers if o.gpu_model == "A10"]
    assert sorted(o.offer_id or "" for o in a10) == [
        "0e311c31-1e31-4fc7-b27d-4b73f3f27bc2",
        "3f6cd2d1-19ac-49fb-95a5-9088bb2dcb49",
    ]
    assert float(a10[0].price_per_hour_usd or 0) == 0.99 and a10[0].gpu_memory_gib == 24.0 and a10[0].vcpus == 30
    h100 = next(o for o in offers if o.instance_type == INSTANCE_TYPE and o.region == REGION)
    assert (h100.gpus, h100.memory_gib, h100.local_nvme_gib) == (8, 1800.0, 14000.0)
    assert h100.max_nodes == 2, "max_nodes comes from the bundled catalog entry of the same shape"


def test_offer_filters(provider: FluenceProvider) -> None:
    assert provider.list_offers(OfferQuery(spot=True)) == []
    h100 = provider.list_offers(OfferQuery(gpu_models=("h100",), min_gpus=8))
    assert {o.region for o in h100} == {"dulles-usa-1", "helsinki-fin-1"}
    assert [o.region for o in provider.list_offers(OfferQuery(regions=("us-central-3",)))] == ["us-central-3"]


def test_exhausted_option_disappears(fake: FluenceFake, provider: FluenceProvider) -> None:
    option = "3f6cd2d1-19ac-49fb-95a5-9088bb2dcb49"
    fake.used[option] = 8
    assert option not in {o.offer_id for o in provider.list_offers(OfferQuery())}
    spec = NodeSpec(
        name="a",
        instance_type="a10-24gi-pcie-1gpu-30cpu-186gi-1303gi",
        region="sanjose-usa-2",
        offer_id=option,
        ssh_public_key=SSH_KEY,
    )
    with pytest.raises(CapacityError, match="no longer available"):
        provider.create_nodes(cid(), [spec])
    assert fake.launched == 0


# ----- create / delete ------------------------------------------------------------------------
def test_create_sends_documented_deploy_body(fake: FluenceFake, provider: FluenceProvider) -> None:
    cluster = cid()
    nodes = provider.create_nodes(cluster, node_specs(1))
    assert [n.name for n in nodes] == ["n0"]
    assert nodes[0].instance_type == INSTANCE_TYPE and nodes[0].region == REGION
    (body,) = fake.deploy_requests
    assert body == {
        "plan_id": "6a0c1f4e-8d52-4b7a-9e31-2c5d7f9a1b30",
        "name": instance_name(cluster, "n0"),
        "ssh_key": SSH_KEY,
        "os_image": "Ubuntu Server 22.04",
    }
    assert [k["name"] for k in fake.ssh_keys] and fake.ssh_keys[0]["publicKey"] == SSH_KEY
    provider.create_nodes(cid(), node_specs(1))
    assert len(fake.ssh_keys) == 1, "the account key is reused, not registered twice"


def test_long_node_names_map_back(fake: FluenceFake, provider: FluenceProvider) -> None:
    spec = NodeSpec(name="GPU_Worker.Number-0001", instance_type=INSTANCE_TYPE, region=REGION, ssh_public_key=SSH_KEY)
    cluster = cid()
    nodes = provider.create_nodes(cluster, [spec])
    assert [n.name for n in nodes] == ["GPU_Worker.Number-0001"]
    assert VALID.match(fake.deploy_requests[0]["name"])
    again = provider.create_nodes(cluster, [spec])
    assert [n.id for n in again] == [n.id for n in nodes] and fake.launched == 1


def test_delete_waits_for_initialized_then_terminates(fake: FluenceFake, provider: FluenceProvider) -> None:
    fake.faults.inject("slow_boot", times=None, polls=4)
    cluster = cid()
    created = provider.create_nodes(cluster, node_specs(2))
    assert {n.status for n in created} == {NodeStatus.PENDING}
    provider.delete_nodes(cluster)
    assert fake.instance_count() == 0
    deletes = fake.calls_of("terminate_gpu_vm")
    assert [c.status for c in deletes] == [204, 204], "no DELETE is sent while an instance is INITIALIZED"
    assert {n.status for n in provider.get_nodes(cluster)} == {NodeStatus.TERMINATED}
    assert {n.provider_state for n in provider.get_nodes(cluster)} == {"ENDED"}


def test_delete_gives_up_after_active_wait(fake: FluenceFake, provider: FluenceProvider) -> None:
    fake.faults.inject("slow_boot", times=None, polls=10_000)
    cluster = cid()
    provider.create_nodes(cluster, node_specs(1))
    provider.active_wait_s = 0.2
    with pytest.raises(WaitTimeout, match="ACTIVE"):
        provider.delete_nodes(cluster)
    assert fake.calls_of("terminate_gpu_vm") == []


def test_delete_of_ended_failed_or_unknown_is_success(fake: FluenceFake, provider: FluenceProvider) -> None:
    cluster = cid()
    nodes = provider.create_nodes(cluster, node_specs(2))
    fake.set_status(nodes[0].id, "ENDED")
    fake.set_status(nodes[1].id, "FAILED")
    provider.delete_nodes(cluster)
    provider.delete_nodes(cluster, ["no-such-instance"])
    assert fake.calls_of("terminate_gpu_vm") == []
    with pytest.raises(ProviderAPIError) as caught:  # the raw endpoint's answer, which the adapter absorbs
        provider.client.terminate("00000000-0000-0000-0000-000000000000")
    assert is_not_found(caught.value)


def test_failed_node_is_replaced_on_create(fake: FluenceFake, provider: FluenceProvider) -> None:
    cluster = cid()
    (first,) = provider.create_nodes(cluster, node_specs(1))
    fake.set_status(first.id, "FAILED")
    (second,) = provider.create_nodes(cluster, node_specs(1))
    assert second.id != first.id and fake.launched == 2
    states = {n.id: n.status for n in provider.get_nodes(cluster)}
    assert states[first.id] == NodeStatus.FAILED


def test_spot_node_is_refused_before_any_request(fake: FluenceFake, provider: FluenceProvider) -> None:
    """Fluence sells no spot: a spot node is a planning error, never an on-demand purchase."""
    specs = [node_specs(2)[0], node_specs(2)[1].model_copy(update={"spot": True})]
    with pytest.raises(PlanError, match=r"spot.*n1"):
        provider.create_nodes(cid(), specs)
    assert fake.calls == [] and fake.launched == 0 and fake.bought == {}


def test_user_data_on_gpu_node_is_refused_before_buying(fake: FluenceFake, provider: FluenceProvider) -> None:
    spec = node_specs(1)[0].model_copy(update={"user_data": "#cloud-config\n{}\n"})
    with pytest.raises(PlanError, match="user data"):
        provider.create_nodes(cid(), [spec])
    assert fake.launched == 0 and fake.calls_of("deploy_gpu_vm") == []


def test_unknown_os_image_is_refused_before_buying(fake: FluenceFake, provider: FluenceProvider) -> None:
    specs = [*node_specs(1), node_specs(1, "b")[0].model_copy(update={"image": "Ubuntu Server 2.04"})]
    with pytest.raises(PlanError, match=r"Ubuntu Server 22\.04"):
        provider.create_nodes(cid(), specs)
    assert fake.launched == 0


def test_cleanup_failure_lists_what_remains(fake: FluenceFake, provider: FluenceProvider) -> None:
    fake.faults.inject("capacity_after", route="deploy_gpu_vm", times=None, k=1)
    fake.faults.inject("http_error", route="terminate_gpu_vm", times=None, status=400, message="backend down")
    with pytest.raises(CapacityError) as caught:
        provider.create_nodes(cid(), node_specs(2))
    text = str(caught.value)
    (left,) = [i for i, body in fake.instances.items() if body["status"] == "ACTIVE"]
    assert "cleanup FAILED" in text and left in text and "provisioner gc --provider fluence --cluster" in text
    assert API_KEY not in text


# ----- errors ---------------------------------------------------------------------------------
def _response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, json=body, request=httpx.Request("POST", "http://127.0.0.1/x"))


@pytest.mark.parametrize(
    "status, body, kind",
    [
        (400, {"detail": "Insufficient balance to deploy instance"}, QuotaError),
        (400, {"detail": "Plan no longer available"}, CapacityError),
        (422, {"error": "Not enough offers found"}, CapacityError),
        (403, {"detail": "Not authenticated"}, CredentialsError),
        (401, {"code": "unauthorized", "error": "Auth token invalid or missing"}, CredentialsError),
        (400, {"code": "insufficient_balance", "error": "Insufficient balance"}, QuotaError),
        (
            422,
            {"detail": [{"type": "value_error", "loc": ["body", "name"], "msg": "bad name", "input": "X"}]},
            ProviderAPIError,
        ),
    ],
)
def test_error_bodies_map(status: int, body: Any, kind: type) -> None:
    error = map_error("fluence", _response(status, body))
    assert type(error) is kind
    if kind is ProviderAPIError:
        assert error.status == 422 and "body.name: bad name" in error.detail


def test_validation_422_from_the_fake(fake: FluenceFake, provider: FluenceProvider) -> None:
    bad = DeployRequest.model_construct(
        plan_id="6a0c1f4e-8d52-4b7a-9e31-2c5d7f9a1b30", name="Bad_Name", ssh_key=SSH_KEY, os_image="Ubuntu Server 22.04"
    )
    with pytest.raises(ProviderAPIError) as caught:
        provider.client.deploy(bad)
    assert caught.value.status == 422 and "body.name" in caught.value.detail
    assert fake.launched == 0


# ----- v2 VM API (cloud-init) -----------------------------------------------------------------
def test_cpu_node_with_cloud_init_uses_v2(
    fake: FluenceFake, provider: FluenceProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = f"MUNGE{uuid.uuid4().hex}"
    cluster = cid()
    controller = NodeSpec(
        name="controller",
        instance_type="cpu-regular-4vcpu-8gb",
        region="Cloudless",
        disk_gib=40,
        bootstrap="cloud_init",
        user_data=f"#cloud-config\nwrite_files: [{{content: {secret}}}]\n",
    )
    nodes = provider.create_nodes(cluster, [controller, *node_specs(1)])
    assert sorted(n.name for n in nodes) == ["controller", "n0"]
    (vm,) = fake.vms.values()
    assert vm["name"] == instance_name(cluster, "controller") and vm["_user_data"].decode() == controller.user_data
    assert vm["cloudInit"] == {}
    again = provider.create_nodes(cluster, [controller, *node_specs(1)])
    assert sorted(n.id for n in again) == sorted(n.id for n in nodes) and fake.launched == 2
    provider.delete_nodes(cluster)
    assert fake.instance_count() == 0
    assert secret not in repr(controller) and secret not in "\n".join(r.getMessage() for r in caplog.records)
    assert fake.validation_errors == []


def test_unknown_v2_configuration_is_a_plan_error(fake: FluenceFake, provider: FluenceProvider) -> None:
    spec = NodeSpec(
        name="c",
        instance_type="cpu-huge-999vcpu",
        region="Cloudless",
        bootstrap="cloud_init",
        user_data="#cloud-config\n",
    )
    with pytest.raises(PlanError, match="cpu-regular-4vcpu-8gb"):
        provider.create_nodes(cid(), [spec])
    assert fake.launched == 0


# ----- the fake's docs-derived schemas --------------------------------------------------------
def _doc_examples() -> dict[str, Any]:
    path = need_shared("provider-apis", "fluence", "docs_examples.json")
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _plans_example(docs: dict[str, Any]) -> Any:
    for item in docs["api__gpu_cloud__get_plans__get_plans.md"]:
        if "3f6cd2d1" in item.get("shape", ""):
            text = re.sub(r"//[^\n]*", "", item["shape"])
            return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))
    raise AssertionError("plans example missing")


def test_documented_examples_pass_the_fakes_schemas() -> None:
    docs = _doc_examples()
    checked: dict[str, int] = {}

    def check(schema: str, document: Any) -> None:
        assert doc_problem(schema, document) is None, (schema, doc_problem(schema, document))
        checked[schema] = checked.get(schema, 0) + 1

    check("gpu_vm_plans.response", _plans_example(docs))
    for item in docs["api__gpu_cloud__manage_instances__manage_instances.md"]:
        body = item.get("json")
        if isinstance(body, list) and body and isinstance(body[0], dict) and "status" in body[0]:
            check("list_gpu_instances.response", body)
        elif isinstance(body, dict) and "availability" in body:
            check("get_gpu_instance.response", body)
    for item in docs["api__gpu_cloud__deploy_instance__deploy_instance.md"]:
        body = item.get("json", {})
        if "os_image" in body:
            check("deploy_gpu_vm.request", body)
        elif "instance_id" in body:
            check("deploy_gpu_vm.response", body)
    for item in docs["api__ssh_keys__ssh_keys.md"]:
        body = item.get("json")
        if isinstance(body, list):
            check("list_ssh_keys.response" if "publicKey" in body[0] else "add_ssh_key.response", body)
        elif isinstance(body, dict) and "publicKey" in body:
            check("add_ssh_key.request", body)
    for item in docs["api_gpu_cloud.md"]:
        check("error.response", item["json"])
    assert set(checked) == set(DOC_SCHEMAS), f"unchecked schemas: {set(DOC_SCHEMAS) - set(checked)}"


def test_doc_schemas_reject_wrong_shapes() -> None:
    assert doc_problem("deploy_gpu_vm.request", {"plan_id": "x", "name": "a", "ssh_key": "k"}) is not None
    assert (
        doc_problem(
            "deploy_gpu_vm.request",
            {"plan_id": "x", "name": "a", "ssh_key": "k", "os_image": "u", "user_data": "no such field"},
        )
        is not None
    )
    assert doc_problem("list_gpu_instances.response", [{"id": "x", "name": "y"}]) is not None
    assert doc_problem("error.response", {"error": "not the GPU Cloud envelope"}) is not None


def test_fake_flags_undocumented_request_fields(
    fake: FluenceFake, serve_fake: Callable[[FakeApp], RunningServer]
) -> None:
    server = serve_fake(fake)
    reply = httpx.post(
        f"{server.url}/gpu/instances/vms",
        headers={"X-API-KEY": API_KEY},
        json={"plan_id": "x", "name": "a", "ssh_key": "k", "os_image": "u", "user_data": "x"},
    )
    assert reply.status_code == 599 and "docs-derived schema" in reply.text
    assert server.app.validation_errors
    server.app.validation_errors.clear()  # expected here; the fixture fails on any left over


class LosesDeployAnswers(httpx.BaseTransport):
    """The fake in process; deploys numbered in ``lose`` (1-based) happen but their answer is lost."""

    def __init__(self, app: FluenceFake, lose: set[int]) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.lose = lose
        self.deploys = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path == "/gpu/instances/vms":
            self.deploys += 1
            if self.deploys in self.lose:
                raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_deploy_with_lost_answer_and_failed_relist_is_still_rolled_back(fake: FluenceFake) -> None:
    # n1's deploy happens but its answer is lost, and the re-list that would adopt it fails
    # (3 attempts): create gives up, and the rollback must find n1's instance by name too.
    fake.faults.inject("http_error", route="list_gpu_instances", times=3, after=1, status=502)
    provider = FluenceProvider(
        API_KEY,
        base_url="http://fluence.test",
        transport=LosesDeployAnswers(fake, {2}),
        timeout_s=2.0,
        poll_interval_s=0.01,
        limits=LIMITS.scaled(100),
        retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05),
    )
    with pytest.raises(ProviderAPIError, match="rolled back 2 instance") as caught:
        provider.create_nodes(cid(), node_specs(2))
    assert fake.launched == 2 and fake.instance_count() == 0
    assert API_KEY not in str(caught.value)
