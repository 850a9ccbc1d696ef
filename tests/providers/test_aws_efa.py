"""EFA clusters on the direct AWS adapter against the AWSFake (EC2 by moto; placement groups and
the launches' interfaces recorded by the fake): layout, placement group, security group, tags,
adoption on a retried create, and teardown removing the groups (idempotent)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.exceptions
import pytest

from provisioner.errors import PlanError
from provisioner.providers.aws.client import LIMITS
from provisioner.providers.aws.efa import EFA_INTERFACES, efa_layout
from provisioner.providers.aws.network import group_name
from provisioner.providers.aws.provider import CLUSTER_TAG, EXPIRES_TAG, NODE_TAG, OWNER_TAG, AWSProvider
from provisioner.providers.base import NodeSpec
from provisioner.testing.fakes.aws_ec2 import AWSFake
from provisioner.testing.fakes.base import RunningServer, serve

IMAGE = "ami-12c6146b"
EXPIRES = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
ROOMY = {
    ("us-east-1", code): 100_000.0 for code in ("L-417A185B", "L-DB2E81BA", "L-C4BD4855", "L-7212CCBC", "L-3819A6DF")
}


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    with serve(AWSFake(api_key="testing", quotas=ROOMY)) as running:
        yield running
        assert running.app.validation_errors == []


def _provider(url: str) -> AWSProvider:
    session = boto3.Session(aws_access_key_id="AKIATEST", aws_secret_access_key="testing", region_name="us-east-1")
    return AWSProvider(
        session, regions=["us-east-1"], endpoint_url=url, owner="alice", poll_interval_s=0.01, limits=LIMITS.scaled(100)
    )  # 30-40 requests a create: ~3 s at the real 10 requests/s


def _ec2(url: str) -> Any:
    return boto3.client(
        "ec2", endpoint_url=url, region_name="us-east-1", aws_access_key_id="AKIATEST", aws_secret_access_key="testing"
    )


def _specs(n: int, instance_type: str = "p5.48xlarge", zone: str | None = "us-east-1b") -> list[NodeSpec]:
    return [
        NodeSpec(
            name=f"n{i}",
            instance_type=instance_type,
            region="us-east-1",
            zone=zone,
            gpus=8,
            image=IMAGE,
            expires_at=EXPIRES,
            tags={"team": "ml"},
        )
        for i in range(n)
    ]


def _cluster_groups(url: str, cluster_id: str) -> list[dict[str, Any]]:
    return list(
        _ec2(url).describe_security_groups(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_id]}])[
            "SecurityGroups"
        ]
    )


def test_the_layout_is_one_table_shared_with_the_stack() -> None:
    from provisioner.stacks import aws as stack

    assert stack.efa_layout is efa_layout and stack.EFA_INTERFACES is EFA_INTERFACES
    assert [
        len(efa_layout(t)) for t in ("p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p4d.24xlarge", "p6-b200.48xlarge")
    ] == [32, 32, 16, 4, 8]


def test_p5_cluster_gets_32_efa_interfaces_in_one_placement_group(fake: RunningServer) -> None:
    app: AWSFake = fake.app  # type: ignore[assignment]
    provider = _provider(fake.url)
    nodes = provider.create_nodes("efa1", _specs(2))
    (group,) = _cluster_groups(fake.url, "efa1")
    for node in nodes:
        record = app.launch_network[node.id]
        nics = record["interfaces"]
        assert [n["NetworkCardIndex"] for n in nics] == list(range(32))
        assert [n["DeviceIndex"] for n in nics] == [0] + [1] * 31
        assert [n["InterfaceType"] for n in nics] == ["efa"] + ["efa-only"] * 31
        assert {n["SubnetId"] for n in nics} == {nics[0]["SubnetId"]} and nics[0]["SubnetId"].startswith("subnet-")
        assert all(group["GroupId"] in n["Groups"] for n in nics)
        assert record["placement"] == {"GroupName": group_name("efa1"), "AvailabilityZone": "us-east-1b"}
    (placement,) = app.placement_groups.values()
    assert (placement["name"], placement["strategy"]) == (group_name("efa1"), "cluster")
    wanted = {CLUSTER_TAG: "efa1", OWNER_TAG: "alice", EXPIRES_TAG: "2026-11-25T12:00:00Z", "team": "ml"}
    assert wanted.items() <= placement["tags"].items()
    assert wanted.items() <= {t["Key"]: t["Value"] for t in group["Tags"]}.items()
    # EFA needs all traffic from the group itself; nothing else comes in through this group
    (rule,) = group["IpPermissions"]
    assert rule["IpProtocol"] == "-1" and [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [group["GroupId"]]
    assert rule["IpRanges"] == [] and rule["Ipv6Ranges"] == []
    for node in nodes:
        assert app.bought[node.id].tags[NODE_TAG] == node.name and app.bought[node.id].tags[CLUSTER_TAG] == "efa1"
    # EC2 gives an instance launched with several interfaces no public address: an Elastic IP per node
    addresses = _ec2(fake.url).describe_addresses(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": ["efa1"]}])
    by_node = {t["Value"]: a for a in addresses["Addresses"] for t in a["Tags"] if t["Key"] == NODE_TAG}
    assert sorted(by_node) == ["n0", "n1"] and all(a.get("NetworkInterfaceId") for a in by_node.values())
    shown = {n.name: n.public_ip for n in provider.get_nodes("efa1")}
    assert shown == {name: a["PublicIp"] for name, a in by_node.items()}


def test_a_retried_create_adopts_the_groups_and_the_nodes(fake: RunningServer) -> None:
    app: AWSFake = fake.app  # type: ignore[assignment]
    provider = _provider(fake.url)
    first = provider.create_nodes("efa2", _specs(2))
    again = _provider(fake.url).create_nodes("efa2", _specs(2))
    assert sorted(n.id for n in first) == sorted(n.id for n in again)
    assert len(app.placement_groups) == 1 and len(_cluster_groups(fake.url, "efa2")) == 1
    assert len(app.launch_network) == 2, "a node was bought twice"
    assert len(_ec2(fake.url).describe_addresses()["Addresses"]) == 2


def test_teardown_and_gc_remove_the_placement_and_security_groups(fake: RunningServer) -> None:
    app: AWSFake = fake.app  # type: ignore[assignment]
    provider = _provider(fake.url)
    nodes = provider.create_nodes("efa3", _specs(3))
    gc = _provider(fake.url)  # gc's adapter knows nothing of the create: it deletes by the ids it listed
    gc.delete_nodes("efa3", [nodes[0].id])
    assert len(app.placement_groups) == 1 and _cluster_groups(fake.url, "efa3"), "removed while nodes are left"
    gc.delete_nodes("efa3", [n.id for n in nodes[1:]])
    assert app.placement_groups == {} and _cluster_groups(fake.url, "efa3") == []
    assert (
        _ec2(fake.url).describe_addresses(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": ["efa3"]}])["Addresses"]
        == []
    ), "an Elastic IP is left"
    gc.delete_nodes("efa3")  # idempotent: nothing left is success
    _provider(fake.url).delete_nodes("efa3")
    assert app.placement_groups == {}


def test_down_removes_the_groups(fake: RunningServer) -> None:
    app: AWSFake = fake.app  # type: ignore[assignment]
    provider = _provider(fake.url)
    provider.create_nodes("efa4", _specs(2, "p4d.24xlarge", zone=None))
    assert [len(app.launch_network[i]["interfaces"]) for i in app.launch_network] == [4, 4]
    provider.delete_nodes("efa4")
    assert app.placement_groups == {} and _cluster_groups(fake.url, "efa4") == []


def test_the_fake_refuses_deleting_a_group_in_use(fake: RunningServer) -> None:
    _provider(fake.url).create_nodes("efa5", _specs(2))
    with pytest.raises(botocore.exceptions.ClientError, match=r"InvalidPlacementGroup\.InUse"):
        _ec2(fake.url).delete_placement_group(GroupName=group_name("efa5"))
    with pytest.raises(botocore.exceptions.ClientError, match=r"InvalidPlacementGroup\.Unknown"):
        _ec2(fake.url).run_instances(
            ImageId=IMAGE, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1, Placement={"GroupName": "nope"}
        )


def test_one_node_or_a_type_without_efa_gets_no_efa(fake: RunningServer) -> None:
    app: AWSFake = fake.app  # type: ignore[assignment]
    provider = _provider(fake.url)
    (single,) = provider.create_nodes("one", _specs(1))
    plain = provider.create_nodes("plain", _specs(2, "g6e.xlarge", zone="us-east-1a"))
    for node in (single, *plain):
        assert app.launch_network[node.id]["interfaces"] == []
        assert "GroupName" not in app.launch_network[node.id]["placement"]
    assert app.placement_groups == {} and _cluster_groups(fake.url, "one") == _cluster_groups(fake.url, "plain") == []


def test_efa_nodes_in_two_zones_are_refused_before_any_request(fake: RunningServer) -> None:
    specs = _specs(2)
    specs[1] = specs[1].model_copy(update={"zone": "us-east-1c"})
    with pytest.raises(PlanError, match="placement group is in one zone"):
        _provider(fake.url).create_nodes("two", specs)
    assert fake.app.calls == []
