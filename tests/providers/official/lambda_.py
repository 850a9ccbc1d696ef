"""Witness for Lambda: a client generated from Lambda's OpenAPI 1.8.3 against the Lambda fake on
127.0.0.1, and the adapter's requests compared with that client's.

Lambda publishes no official Python client. ``lambda-ai-cloud-api-client`` 2.4.1 (PyPI) stands in
and is labelled so here and in docs/providers.md: its ``api/`` and ``models/`` are the output of
openapi-python-client run on ``openapi-1.8.3.json`` (the file ../reference/provider-apis.md cites
as Lambda's 1.8.3 spec, from that package's repository); it is not Lambda's code. Generating it
here at test time is not possible: the 1.8.3 file is not in ../shared and only package registries
are reachable. Only its generated modules are used, not its CLI.

Every call the adapter makes is driven through the generated client: instance types, launch,
list, get, rename, terminate, SSH keys, firewall rulesets and audit events (both page shapes).
"""

from __future__ import annotations

import base64
import datetime as dt
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from werkzeug.wrappers import Response

from provisioner.providers.base import OfferQuery
from provisioner.providers.http import RateLimits
from provisioner.providers.lambda_.models import FirewallRule
from provisioner.providers.lambda_.provider import LambdaProvider
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.testing.fakes.lambda_ import LambdaFake, contract_node_specs
from tests.conftest import ROOT, need_shared
from tests.providers.official.support import need_client

GENERATED_VERSION = "2.4.1"
KEY = "lambda-witness-key-0123456789"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIWitnessKeyForTheLambdaFake0000000000 witness@test"
T0 = dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
FAST = RateLimits(requests_per_s=1000.0, burst=1000.0, launches_per_s=1000.0, launch_burst=1000.0)
LAUNCH = {
    "region_name": "us-south-2",
    "instance_type_name": "gpu_8x_h100_sxm5",
    "ssh_key_names": ["witness"],
    "name": "witness-0",
    "tags": [{"key": "provisioner-cluster", "value": "w1"}],
}


class Clock:
    """The fake's clock, moved by the test (audit event times are exact)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def lambda_fake(serve_fake: Callable[[FakeApp], RunningServer]) -> tuple[LambdaFake, str]:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    app = LambdaFake(api_key=KEY, boot_polls=0)
    app.clock = Clock()
    return app, serve_fake(app).url


@pytest.fixture
def lambda_generated(
    lambda_fake: tuple[LambdaFake, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """The generated client, authenticated with the key as Lambda recommends (Bearer)."""
    need_client("lambda-ai-cloud-api-client", GENERATED_VERSION)
    monkeypatch.setenv("HOME", str(tmp_path))
    from lambda_ai_cloud_api_client import AuthenticatedClient

    with AuthenticatedClient(base_url=lambda_fake[1], token=KEY, raise_on_unexpected_status=True) as client:
        yield client


def op(name: str) -> Any:
    """One generated operation module, e.g. ``op("instances.launch_instance")``."""
    return importlib.import_module(f"lambda_ai_cloud_api_client.api.{name}")


def model(name: str) -> Any:
    module, _, cls = name.rpartition(".")
    return getattr(importlib.import_module(f"lambda_ai_cloud_api_client.models.{module}"), cls)


def lambda_adapter(url: str) -> LambdaProvider:
    return LambdaProvider(KEY, base_url=url, limits=FAST)  # type: ignore[arg-type]


def add_key(client: Any, name: str = "witness") -> None:
    body = model("add_ssh_key_request.AddSSHKeyRequest").from_dict({"name": name, "public_key": PUBLIC_KEY})
    assert op("ssh_keys.add_ssh_key").sync_detailed(client=client, body=body).status_code == 200


# ----- offers ---------------------------------------------------------------------------------------
def test_lambda_generated_client_reads_instance_types(lambda_generated: Any) -> None:
    answer = op("instances.list_instance_types").sync_detailed(client=lambda_generated)
    assert answer.status_code == 200
    h100 = answer.parsed.data["gpu_8x_h100_sxm5"]
    assert h100.instance_type.price_cents_per_hour == 2392
    assert h100.instance_type.specs.gpus == 8
    assert [r.name.value for r in h100.regions_with_capacity_available] == ["us-south-2", "us-west-3"]


# ----- create, list, get, rename, delete ------------------------------------------------------------
def test_lambda_generated_client_instance_lifecycle(lambda_generated: Any, lambda_fake: Any) -> None:
    app, url = lambda_fake
    add_key(lambda_generated)
    body = model("instance_launch_request.InstanceLaunchRequest").from_dict(LAUNCH)
    launched = op("instances.launch_instance").sync_detailed(client=lambda_generated, body=body)
    assert launched.status_code == 200
    (instance_id,) = launched.parsed.data.instance_ids
    assert app.launch_requests[-1] == LAUNCH  # the generated client sends no quantity

    ours = lambda_adapter(url).client.get_instance(instance_id)
    assert (ours.name, ours.instance_type.name, ours.region.name) == ("witness-0", "gpu_8x_h100_sxm5", "us-south-2")
    listed = op("instances.list_instances").sync_detailed(client=lambda_generated).parsed.data
    assert [(i.id, i.status.value) for i in listed] == [(instance_id, "active")]
    got = op("instances.get_instance").sync_detailed(instance_id, client=lambda_generated).parsed.data
    assert (got.ssh_key_names, got.private_ip) == (["witness"], app.instances[instance_id]["private_ip"])

    rename = model("instance_modification_request.InstanceModificationRequest").from_dict({"name": "renamed"})
    renamed = op("instances.post_instance").sync_detailed(instance_id, client=lambda_generated, body=rename)
    assert renamed.parsed.data.name == "renamed"

    stop = model("instance_terminate_request.InstanceTerminateRequest").from_dict({"instance_ids": [instance_id]})
    gone = op("instances.terminate_instance").sync_detailed(client=lambda_generated, body=stop)
    assert [(i.id, i.status.value) for i in gone.parsed.data.terminated_instances] == [(instance_id, "terminating")]
    assert app.instance_count() == 0


def test_lambda_generated_client_sees_the_capacity_refusal(lambda_generated: Any, lambda_fake: Any) -> None:
    add_key(lambda_generated)
    body = model("instance_launch_request.InstanceLaunchRequest").from_dict(
        {**LAUNCH, "instance_type_name": "gpu_8x_v100", "region_name": "us-east-1"}
    )
    refused = op("instances.launch_instance").sync_detailed(client=lambda_generated, body=body)
    assert refused.status_code == 400
    assert refused.parsed.error.code == "instance-operations/launch/insufficient-capacity"


# ----- SSH keys --------------------------------------------------------------------------------------
def test_lambda_ssh_keys_agree_between_generated_client_and_adapter(lambda_generated: Any, lambda_fake: Any) -> None:
    add_key(lambda_generated, "from-generated")
    client = lambda_adapter(lambda_fake[1]).client
    assert [(k.name, k.public_key) for k in client.list_ssh_keys()] == [("from-generated", PUBLIC_KEY)]
    client.add_ssh_key("from-adapter", PUBLIC_KEY.replace("witness@test", "adapter@test"))
    listed = op("ssh_keys.list_ssh_keys").sync_detailed(client=lambda_generated).parsed.data
    assert [k.name for k in listed] == ["from-generated", "from-adapter"]


# ----- firewall rulesets -----------------------------------------------------------------------------
def test_lambda_firewall_rulesets_agree_between_generated_client_and_adapter(
    lambda_generated: Any, lambda_fake: Any
) -> None:
    client = lambda_adapter(lambda_fake[1]).client
    rule = FirewallRule(protocol="tcp", port_range=[22, 22], source_network="0.0.0.0/0", description="ssh")
    ours = client.create_firewall_ruleset("w1-fw", "us-south-2", [rule])
    listed = op("firewalls.firewall_rulesets_list").sync_detailed(client=lambda_generated).parsed.data
    assert [(r.id, r.name, r.region.name.value) for r in listed] == [(ours.id, "w1-fw", "us-south-2")]
    patch = model("firewall_ruleset_patch_request.FirewallRulesetPatchRequest").from_dict(
        {"rules": [{"protocol": "tcp", "port_range": [443, 443], "source_network": "10.0.0.0/8", "description": "w"}]}
    )
    patched = op("firewalls.update_firewall_ruleset").sync_detailed(ours.id, client=lambda_generated, body=patch)
    assert [r.port_range for r in patched.parsed.data.rules] == [[443, 443]]
    assert [r.port_range for r in client.list_firewall_rulesets()[0].rules] == [[443, 443]]
    deleted = op("firewalls.delete_firewall_ruleset").sync_detailed(ours.id, client=lambda_generated)
    assert deleted.status_code == 200 and client.list_firewall_rulesets() == []


# ----- audit events: both page shapes ------------------------------------------------------------------
def _launch_and_terminate(app: LambdaFake, url: str) -> str:
    """Launch one instance at T0 + 1 min and terminate it at T0 + 61 min, through the adapter's client."""
    client = lambda_adapter(url).client
    client.add_ssh_key("witness", PUBLIC_KEY)
    from provisioner.providers.lambda_.models import LaunchRequest

    app.clock.now = T0 + dt.timedelta(minutes=1)  # type: ignore[attr-defined]
    (instance_id,) = client.launch(
        LaunchRequest(region_name="us-south-2", instance_type_name="gpu_8x_h100_sxm5", ssh_key_names=["witness"])
    )
    app.clock.now = T0 + dt.timedelta(minutes=61)  # type: ignore[attr-defined]
    client.terminate([instance_id])
    return instance_id


def test_lambda_generated_client_reads_the_1_8_3_page_the_fake_can_send(
    lambda_generated: Any, lambda_fake: Any
) -> None:
    app, url = lambda_fake
    instance_id = _launch_and_terminate(app, url)
    app.audit.shape = "1.8.3"
    page = op("audit_events.get_audit_events").sync_detailed(client=lambda_generated).parsed.data
    assert [(e.action, e.resource_lrns) for e in page.events] == [
        ("launched", [f"lrn:cloud:instance:{instance_id}"]),
        ("terminated", [f"lrn:cloud:instance:{instance_id}"]),
    ]
    assert page.page_token is None
    app.audit.shape = "1.10.0"  # the shape of the 1.10.0 file: the 1.8.3 client cannot read it
    with pytest.raises(ValueError, match="dictionary update sequence"):  # a list where it wants an object
        op("audit_events.get_audit_events").sync_detailed(client=lambda_generated)


@pytest.mark.parametrize("shape", ["1.10.0", "1.8.3"])
def test_lambda_metering_reads_both_audit_shapes_and_names_the_one_it_saw(lambda_fake: Any, shape: str) -> None:
    app, url = lambda_fake
    instance_id = _launch_and_terminate(app, url)
    app.audit.shape = shape
    (usage,) = lambda_adapter(url).node_usage("w1", {"n0": instance_id})
    assert (usage.node_id, usage.name) == (instance_id, "n0")
    assert (usage.started_at, usage.ended_at) == (T0 + dt.timedelta(minutes=1), T0 + dt.timedelta(minutes=61))
    assert usage.source == f"lambda audit-events, {shape} shape"


def test_lambda_fake_checks_its_1_8_3_page() -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    app = LambdaFake(api_key=KEY)
    assert app.audit.check_1_8_3(Response('{"data": {"events": [], "page_token": null}}')) is None
    assert app.audit.check_1_8_3(Response('{"data": [], "page_token": null}')) is not None  # the 1.10.0 shape


# ----- authentication -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header",
    [f"Bearer {KEY}", f"Basic {base64.b64encode(f'{KEY}:'.encode()).decode()}", f"Basic {KEY}"],
    ids=["bearer", "basic-base64-key-colon", "basic-bare-key"],
)
def test_lambda_fake_takes_every_documented_authorization(lambda_fake: Any, header: str) -> None:
    need_client("lambda-ai-cloud-api-client", GENERATED_VERSION)
    from lambda_ai_cloud_api_client import AuthenticatedClient

    prefix, _, token = header.partition(" ")
    with AuthenticatedClient(base_url=lambda_fake[1], token=token, prefix=prefix) as client:
        assert op("instances.list_instances").sync_detailed(client=client).status_code == 200


def test_lambda_fake_takes_curl_user_and_refuses_a_wrong_key(lambda_fake: Any) -> None:
    url = lambda_fake[1]
    assert httpx.get(f"{url}/api/v1/instances", auth=(KEY, ""), timeout=10).status_code == 200  # curl -u KEY:
    wrong = httpx.get(f"{url}/api/v1/instances", auth=("not-the-key", ""), timeout=10)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "global/invalid-api-key"


# ----- the adapter calls what the generated client calls ----------------------------------------------
GENERATED_OPERATIONS = (
    "instances.list_instance_types",
    "instances.launch_instance",
    "instances.list_instances",
    "instances.get_instance",
    "instances.post_instance",
    "instances.terminate_instance",
    "ssh_keys.list_ssh_keys",
    "ssh_keys.add_ssh_key",
    "firewalls.firewall_rulesets_list",
    "firewalls.create_firewall_ruleset",
    "firewalls.update_firewall_ruleset",
    "firewalls.delete_firewall_ruleset",
    "audit_events.get_audit_events",
)


class _Body:
    """Stands in for a request model: ``_get_kwargs`` only calls ``to_dict`` on it."""

    def to_dict(self) -> dict[str, Any]:
        return {}


def generated_request(name: str) -> tuple[str, str]:
    """(method, path) the generated operation ``name`` sends, an id in the path written ``ID``."""
    build = op(name)._get_kwargs
    needed = [p for p, v in inspect.signature(build).parameters.items() if v.default is inspect.Parameter.empty]
    made = build(**{p: "ID" if p == "id" else _Body() for p in needed})
    return made["method"].upper(), made["url"]


def test_lambda_adapter_requests_are_the_generated_clients(lambda_generated: Any, lambda_fake: Any) -> None:
    app, url = lambda_fake
    served = {generated_request(name) for name in GENERATED_OPERATIONS}
    adapter = lambda_adapter(url)
    adapter.list_offers(OfferQuery())
    nodes = adapter.create_nodes("w1", contract_node_specs(2))
    adapter.node_usage("w1", {n.name: n.id for n in nodes})
    adapter.delete_nodes("w1")
    sent = {(call.method, re.sub(r"/[0-9a-f]{32}(?=/|$)", "/ID", call.path)) for call in app.calls}
    assert {"POST /api/v1/instance-operations/launch", "GET /api/v1/audit-events"} <= {" ".join(s) for s in sent}
    assert sent <= served, f"the adapter calls what the generated 1.8.3 client has no operation for: {sent - served}"


# ----- the fake's own answers pass its own checks ----------------------------------------------------
LAMBDA_REFUSED = (
    ("GET", "/api/v1/instances/0123456789abcdef0123456789abcdef", None),
    ("POST", "/api/v1/instances/0123456789abcdef0123456789abcdef", {"name": "x"}),
    ("POST", "/api/v1/instance-operations/terminate", {"instance_ids": ["0123456789abcdef0123456789abcdef"]}),
    ("POST", "/api/v1/instance-operations/launch", {**LAUNCH, "ssh_key_names": ["missing"]}),
    ("POST", "/api/v1/instance-operations/launch", {**LAUNCH, "ssh_key_names": []}),
    ("POST", "/api/v1/ssh-keys", {"name": "twice", "public_key": PUBLIC_KEY}),
    ("DELETE", "/api/v1/ssh-keys/0123456789abcdef0123456789abcdef", None),
    ("PATCH", "/api/v1/firewall-rulesets/0123456789abcdef0123456789abcdef", {"rules": []}),
    ("DELETE", "/api/v1/firewall-rulesets/0123456789abcdef0123456789abcdef", None),
    ("GET", "/api/v1/instance-types", None),
    ("GET", "/api/v1/audit-events", None),
)


@pytest.mark.parametrize("shape", ["1.10.0", "1.8.3"])
def test_lambda_fake_refusals_pass_its_own_response_checks(shape: str) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    app = LambdaFake(api_key=KEY)
    app.audit.shape = shape
    statuses = []
    for header in (f"Bearer {KEY}", "Bearer not-the-key"):
        with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://lambda.fake") as client:
            client.post(
                "/api/v1/ssh-keys",
                json={"name": "twice", "public_key": PUBLIC_KEY},
                headers={"Authorization": f"Bearer {KEY}"},
            )
            for method, path, body in LAMBDA_REFUSED:
                statuses.append(client.request(method, path, json=body, headers={"Authorization": header}).status_code)
    assert statuses[: len(LAMBDA_REFUSED)] == [404, 404, 404, 404, 400, 400, 400, 404, 404, 200, 200]
    assert statuses[len(LAMBDA_REFUSED) :] == [401] * len(LAMBDA_REFUSED)
    assert app.validation_errors == []


def test_lambda_docs_name_every_generated_call_and_both_shapes() -> None:
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    section = text[text.index("## Lambda") : text.index("## Fluence")]
    paths = {url.replace("ID", "{id}") for _, url in map(generated_request, GENERATED_OPERATIONS)}
    assert sorted(p for p in paths if p not in section) == []
    assert [n for n in GENERATED_OPERATIONS if n not in section and not n.startswith("firewalls.")] == []
    assert f"`lambda-ai-cloud-api-client` {GENERATED_VERSION}" in section
    assert "lambda audit-events, 1.10.0 shape" in section and "lambda audit-events, 1.8.3 shape" in section
