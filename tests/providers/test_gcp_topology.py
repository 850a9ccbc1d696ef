"""GCE placement (``resourceStatus.physicalHostTopology``, served by the GCPFake and parsed by the
real compute_v1 client) -> GCPProvider.topology -> provisioner.render's Slurm topology.conf."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.auth.credentials import AnonymousCredentials

from provisioner.providers.base import NodeSpec, NodeStatus
from provisioner.providers.gcp.client import LIMITS
from provisioner.providers.gcp.provider import GCPProvider
from provisioner.render import render_cluster
from provisioner.testing.fakes.base import RunningServer, serve
from provisioner.testing.fakes.gcp_compute import GCPFake
from tests.test_render_slurm import CANARY, conf_lines, make_plan

IMAGE = "projects/debian-cloud/global/images/family/debian-12"
HOSTS = {
    "topo-llm-pretrain-0": ("c1", "b1", "s1", "h0"),
    "topo-llm-pretrain-1": ("c1", "b1", "s1", "h1"),
    "topo-llm-pretrain-2": ("c1", "b1", "s2", "h2"),
    "topo-llm-pretrain-3": ("c1", "b2", "s1", "h3"),
}
"""Instance name -> (cluster, block, subblock, host); s1 of b2 is not s1 of b1."""


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    app = GCPFake(quotas={"NVIDIA_H100_GPUS": (64.0, 0.0)}, hosts=HOSTS, boot_polls=3)
    with serve(app) as running:
        yield running
        assert running.app.validation_errors == []  # answers parsed as compute_v1.Instance, unknown fields refused


def test_topology_from_physical_host_topology_renders_topology_conf(fake: RunningServer) -> None:
    provider = GCPProvider(
        "p", AnonymousCredentials(), zones=["us-central1-a"], endpoint=fake.url, limits=LIMITS.scaled(100)
    )
    names = [f"llm-pretrain-{i}" for i in range(4)]
    provider.create_nodes(
        "topo",
        [
            NodeSpec(name=n, instance_type="a3-highgpu-8g", region="us-central1", zone="us-central1-a", image=IMAGE)
            for n in names
        ],
    )
    assert provider.topology("topo") == {}  # still provisioning: no placement yet
    for _ in range(20):
        if all(n.status == NodeStatus.RUNNING for n in provider.get_nodes("topo")):
            break
    found = provider.topology("topo")
    assert found == {
        "llm-pretrain-0": ["gce-c1", "gce-c1-b1", "gce-c1-b1-s1"],
        "llm-pretrain-1": ["gce-c1", "gce-c1-b1", "gce-c1-b1-s1"],
        "llm-pretrain-2": ["gce-c1", "gce-c1-b1", "gce-c1-b1-s2"],
        "llm-pretrain-3": ["gce-c1", "gce-c1-b2", "gce-c1-b2-s1"],
    }
    rendered = conf_lines(render_cluster(make_plan(nodes=4), CANARY, topology=found)["slurm/topology.conf"])
    assert rendered == [
        "SwitchName=gce-c1 Switches=gce-c1-b1,gce-c1-b2",
        "SwitchName=gce-c1-b1 Switches=gce-c1-b1-s1,gce-c1-b1-s2",
        "SwitchName=gce-c1-b1-s1 Nodes=llm-pretrain-0,llm-pretrain-1",
        "SwitchName=gce-c1-b1-s2 Nodes=llm-pretrain-2",
        "SwitchName=gce-c1-b2 Switches=gce-c1-b2-s1",
        "SwitchName=gce-c1-b2-s1 Nodes=llm-pretrain-3",
    ]


def test_physical_host_alone_gives_cluster_and_block(fake: RunningServer) -> None:
    provider = GCPProvider(
        "p", AnonymousCredentials(), zones=["us-central1-a"], endpoint=fake.url, limits=LIMITS.scaled(100)
    )
    (node,) = provider.create_nodes(
        "old",
        [NodeSpec(name="n0", instance_type="a3-highgpu-8g", region="us-central1", zone="us-central1-a", image=IMAGE)],
    )
    for _ in range(5):
        provider.get_nodes("old")
    instance = fake.app.instances[("us-central1-a", node.id)]  # type: ignore[attr-defined]
    instance["resourceStatus"] = {"physicalHost": "/ab12/cd34/ef56"}  # older answers carry only this
    assert provider.topology("old") == {"n0": ["gce-ab12", "gce-ab12-cd34"]}
