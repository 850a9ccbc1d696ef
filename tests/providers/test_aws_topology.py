"""AWS DescribeInstanceTopology (answered by the AWSFake: moto has none, checked against botocore's
shapes both ways) -> AWSProvider.topology -> provisioner.render's Slurm topology.conf."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from provisioner.providers.aws.client import LIMITS
from provisioner.providers.aws.provider import AWSProvider
from provisioner.providers.base import NodeSpec, NodeStatus
from provisioner.render import render_cluster
from provisioner.testing.fakes.aws_ec2 import DEFAULT_QUOTAS, AWSFake
from provisioner.testing.fakes.base import RunningServer, serve
from tests.conftest import need_shared
from tests.test_render_slurm import CANARY, conf_lines, make_plan

IMAGE = "ami-12c6146b"


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    with serve(AWSFake(quotas={key: 10_000.0 for key in DEFAULT_QUOTAS}, boot_polls=3)) as running:
        yield running
        assert running.app.validation_errors == []  # requests and answers parsed with botocore's shapes


def _running(provider: AWSProvider, cluster: str, count: int) -> None:
    for _ in range(50):  # the fake shows a new instance pending for a few polls
        nodes = provider.get_nodes(cluster)
        if len(nodes) == count and all(n.status == NodeStatus.RUNNING for n in nodes):
            return
    raise AssertionError(f"{cluster} never ran: {provider.get_nodes(cluster)}")


def test_topology_from_describe_instance_topology_renders_topology_conf(fake: RunningServer) -> None:
    provider = AWSProvider(
        boto3.Session(aws_access_key_id="AKIATOPO", aws_secret_access_key="x", region_name="us-east-1"),
        regions=["us-east-1"],
        endpoint_url=fake.url,
        limits=LIMITS.scaled(100),
    )
    names = [f"llm-pretrain-{i}" for i in range(4)]
    specs = [
        NodeSpec(name=n, instance_type="p5.48xlarge", region="us-east-1", zone="us-east-1a", image=IMAGE) for n in names
    ]
    specs.append(NodeSpec(name="login", instance_type="g6e.xlarge", region="us-east-1", image=IMAGE))
    provider.create_nodes("topo", specs)
    assert provider.topology("topo") == {}  # nothing is running yet: EC2 shows no topology
    _running(provider, "topo", 5)

    found = provider.topology("topo")
    assert sorted(found) == names  # g6e has no instance topology
    assert all(len(path) == 3 for path in found.values())
    spine = {path[0] for path in found.values()}
    assert len(spine) == 1 and len({path[1] for path in found.values()}) == 1
    assert found[names[0]][2] == found[names[1]][2] != found[names[2]][2] == found[names[3]][2]
    assert any(c.route == "DescribeInstanceTopology" and c.status == 200 for c in fake.app.calls)

    rendered = conf_lines(render_cluster(make_plan(nodes=4), CANARY, topology=found)["slurm/topology.conf"])
    (top,) = spine
    leaf_a, leaf_b = found[names[0]][2], found[names[2]][2]
    assert rendered == [
        f"SwitchName={top} Switches={found[names[0]][1]}",
        f"SwitchName={found[names[0]][1]} Switches={leaf_a},{leaf_b}",
        f"SwitchName={leaf_a} Nodes=llm-pretrain-0,llm-pretrain-1",
        f"SwitchName={leaf_b} Nodes=llm-pretrain-2,llm-pretrain-3",
    ]


def test_fake_topology_answers_the_shared_shape() -> None:
    shapes = json.loads(need_shared("provider-apis", "aws", "ec2_operation_shapes_botocore.json").read_text())
    operation = shapes["DescribeInstanceTopology"]
    assert operation["input"]["InstanceIds"] == ["string"]
    assert operation["output"]["Instances"][0]["NetworkNodes"] == ["string"]
