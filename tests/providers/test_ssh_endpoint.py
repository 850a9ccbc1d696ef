"""Where SSH reaches a node: ``Node.ssh_host``/``ssh_port`` from each container provider's answer.

RunPod publishes a pod's 22/tcp on another public port (``ssh.direct``, ``runtime.ports``); Vast.ai
publishes it on one of the instance's direct ports (``ports["22/tcp"]``) and also offers its SSH
proxy (``ssh_host``/``ssh_port``). Each test runs the adapter against the validating fake in
process and compares the node with what the fake's own record of the pod/instance says.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from provisioner.providers.base import Node, NodeSpec, NodeStatus
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.runpod.models import Pod
from provisioner.providers.runpod.provider import RunPodProvider
from provisioner.providers.vastai.client import VAST_LIMITS
from provisioner.providers.vastai.models import Instance
from provisioner.providers.vastai.provider import VastAIProvider
from provisioner.testing.fakes.runpod import RunPodFake
from provisioner.testing.fakes.vastai import VastAIFake
from tests.conftest import need_shared
from tests.providers.contract import wait_running

RP_KEY = "rp-endpoint-key"
VAST_KEY = "vast-endpoint-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ me@laptop"
FAST = RetryPolicy(attempts=3, base_delay_s=0.001, max_delay_s=0.01)
UNTHROTTLED = RateLimits(requests_per_s=1000.0, burst=1000.0)


@pytest.fixture
def runpod() -> Iterator[RunPodFake]:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    app = RunPodFake(api_key=RP_KEY)
    yield app
    assert app.validation_errors == [], "traffic broke RunPod's OpenAPI spec"


@pytest.fixture
def vast_fake() -> Iterator[VastAIFake]:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    app = VastAIFake(api_key=VAST_KEY)
    yield app
    assert app.validation_errors == [], "traffic broke the Vast.ai OpenAPI spec"


def rp_adapter(app: RunPodFake) -> RunPodProvider:
    return RunPodProvider(
        RP_KEY,
        base_url="http://runpod.fake",
        transport=httpx.WSGITransport(app=app),
        retry=FAST,
        limits=UNTHROTTLED,
        poll_interval_s=0.001,
    )


def vast_adapter(app: VastAIFake) -> VastAIProvider:
    return VastAIProvider(
        VAST_KEY,
        base_url="http://vast.fake",
        transport=httpx.WSGITransport(app=app),
        limits=VAST_LIMITS.scaled(200),
        retry=FAST,
        timeout_s=2.0,
    )


def running(get: object, cluster_id: str) -> list[Node]:
    return wait_running(get, cluster_id)  # type: ignore[arg-type]


# ----- RunPod --------------------------------------------------------------------------------
def test_runpod_pod_endpoint_is_the_published_22_tcp(runpod: RunPodFake) -> None:
    provider = rp_adapter(runpod)
    specs = [
        NodeSpec(name=f"n{i}", instance_type="1x_RTX4090_SECURE", region="US-KS-2", ssh_public_key=SSH_KEY)
        for i in range(2)
    ]
    (pending, _) = provider.create_nodes("ep", specs)
    assert pending.status is NodeStatus.PENDING
    assert (pending.ssh_host, pending.ssh_port, pending.ssh_endpoint()) == (None, 22, None)  # nothing published yet
    nodes = running(provider, "ep")
    for node in nodes:
        direct = runpod.pods[node.id]["ssh"]["direct"]  # what the API answers for this pod
        (mapping,) = [p for p in runpod.pods[node.id]["runtime"]["ports"] if p["private"] == 22]
        assert (direct["host"], direct["port"]) == (mapping["ip"], mapping["public"])
        assert node.ssh_port == direct["port"] != 22
        assert node.ssh_endpoint() == (direct["host"], direct["port"]) == (node.public_ip, node.ssh_port)
    assert len({n.ssh_port for n in nodes}) == 2  # each pod its own mapping


def test_runpod_instant_cluster_members_carry_their_own_mapping(runpod: RunPodFake) -> None:
    provider = rp_adapter(runpod)
    specs = [
        NodeSpec(
            name=f"c-{i}",
            instance_type="cluster_8x_H100-SXM",
            region="US-KS-2",
            gpus=8,
            ssh_public_key=SSH_KEY,
            bootstrap="script",
            user_data="#!/bin/sh\necho boot\n",
        )
        for i in range(2)
    ]
    provider.create_nodes("c", specs)
    members = running(provider, "c")
    assert [n.name for n in members] == ["c-0", "c-1"]
    for node in members:
        direct = runpod.pods[node.id]["ssh"]["direct"]
        assert node.ssh_endpoint() == (direct["host"], direct["port"]) and node.ssh_port != 22
        assert node.private_ip and node.private_ip.startswith("10.65.0.")  # the overlay, not the SSH address


def test_runpod_model_prefers_direct_then_runtime_ports_never_the_proxy() -> None:
    proxy = {
        "host": "ssh.runpod.io",
        "port": 22,
        "username": "abc-64411eb2",
        "command": "ssh abc-64411eb2@ssh.runpod.io",
    }
    only_proxy = Pod.model_validate(
        {"id": "abc", "name": "x", "status": "RUNNING", "ssh": {"proxy": proxy, "direct": None}, "runtime": {}}
    )
    assert only_proxy.ssh_endpoint() is None
    ports = {
        "ports": [
            {"private": 8888, "public": 41000, "type": "http", "ip": "203.0.113.9"},
            {"private": 22, "public": 41022, "type": "tcp", "ip": "203.0.113.9"},
        ]
    }
    from_runtime = Pod.model_validate(
        {"id": "abc", "name": "x", "status": "RUNNING", "ssh": {"proxy": proxy, "direct": None}, "runtime": ports}
    )
    assert from_runtime.ssh_endpoint() == ("203.0.113.9", 41022)
    direct = {"host": "203.0.113.10", "port": 34446, "username": "root", "command": "ssh root@203.0.113.10 -p 34446"}
    both = Pod.model_validate(
        {"id": "abc", "name": "x", "status": "RUNNING", "ssh": {"proxy": proxy, "direct": direct}, "runtime": ports}
    )
    assert both.ssh_endpoint() == ("203.0.113.10", 34446)


# ----- Vast.ai -------------------------------------------------------------------------------
def test_vast_running_instance_is_reached_on_its_direct_port(vast_fake: VastAIFake) -> None:
    provider = vast_adapter(vast_fake)
    provider.create_nodes("vc", [NodeSpec(name=f"n{i}", instance_type="1x_RTX_4090", region="US") for i in range(2)])
    loading = provider.get_nodes("vc")
    assert len(loading) == 2
    for node in loading:  # no published ports yet, so Vast's SSH proxy
        raw = vast_fake.instances[int(node.id)]
        assert node.status is NodeStatus.PENDING and "ports" not in raw
        assert node.ssh_endpoint() == (raw["ssh_host"], raw["ssh_port"]) and node.ssh_host.endswith(".vast.ai")
    for node in running(provider, "vc"):
        raw = vast_fake.instances[int(node.id)]
        (binding,) = raw["ports"]["22/tcp"]
        assert node.ssh_endpoint() == (raw["public_ipaddr"], int(binding["HostPort"]))
        assert node.ssh_host == node.public_ip and node.ssh_port != 22


def test_vast_model_reads_docker_port_bindings() -> None:
    base = {"id": 7, "public_ipaddr": "192.0.2.45", "ssh_host": "ssh2281.vast.ai", "ssh_port": 10882}
    assert Instance.model_validate(base).ssh_endpoint() == ("ssh2281.vast.ai", 10882)
    published = {
        **base,
        "ports": {
            "8888/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8888"}],
            "22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "20000"}],
        },
    }
    assert Instance.model_validate(published).ssh_endpoint() == ("192.0.2.45", 20000)
    odd = {**base, "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": ""}]}}
    assert Instance.model_validate(odd).ssh_endpoint() == ("ssh2281.vast.ai", 10882)
    assert Instance.model_validate({"id": 8, "ports": None}).ssh_endpoint() is None


# ----- everyone else ------------------------------------------------------------------------
def test_a_vm_node_defaults_to_port_22_of_its_address() -> None:
    node = Node(
        provider="lambda",
        id="i-1",
        name="n0",
        cluster_id="c",
        status=NodeStatus.RUNNING,
        public_ip="198.51.100.7",
        private_ip="10.0.0.7",
    )
    assert node.ssh_endpoint() == ("198.51.100.7", 22)
    private_only = node.model_copy(update={"public_ip": None})
    assert private_only.ssh_endpoint() == ("10.0.0.7", 22)
    with pytest.raises(ValueError):
        Node(provider="x", id="1", name="n", cluster_id="c", status=NodeStatus.RUNNING, ssh_port=0)
