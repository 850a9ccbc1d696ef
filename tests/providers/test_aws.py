"""AWS adapter against moto in server mode (real HTTP on 127.0.0.1) and the AWSFake for what
moto lacks (Pricing, Service Quotas); error mapping and price parsing on botocore's shapes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import botocore.exceptions
import pytest

from provisioner.capabilities import Purchase
from provisioner.errors import (
    CapacityError,
    CredentialsError,
    PlanError,
    ProviderAPIError,
    QuotaError,
    RateLimitError,
)
from provisioner.providers.aws import quotas
from provisioner.providers.aws.client import LIMITS, AWSClient, by_cluster, map_error
from provisioner.providers.aws.models import on_demand_price
from provisioner.providers.aws.provider import CLUSTER_TAG, EXPIRES_TAG, NODE_TAG, AWSProvider
from provisioner.providers.base import NodeSpec, NodeStatus, OfferQuery
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.spec import Fabric
from provisioner.testing.fakes.aws_ec2 import AWSFake, price_list_item
from provisioner.testing.fakes.base import RunningServer, serve
from tests.conftest import need_shared
from tests.providers.harness import VirtualTime

IMAGE = "ami-12c6146b"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """moto 5 as a real HTTP server on a free 127.0.0.1 port, instance types validated."""
    os.environ["MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION"] = "true"
    import moto.settings
    from moto.server import ThreadedMotoServer

    moto.settings.EC2_ENABLE_INSTANCE_TYPE_VALIDATION = True
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    with serve(AWSFake(api_key="testing")) as running:
        yield running
        assert running.app.validation_errors == []


def _provider(url: str, **kwargs: Any) -> AWSProvider:
    kwargs.setdefault("limits", LIMITS.scaled(100))  # the limits have their own tests (below, and the contract's)
    return AWSProvider(boto3.Session(region_name="us-east-1"), regions=["us-east-1"], endpoint_url=url, **kwargs)


def test_every_page_takes_a_rate_limit_token(fake: RunningServer) -> None:
    # Time stands still except in the limiter's sleeps: with a burst of 1 at 4 requests/s, n
    # HTTP requests cost n - 1 waits of 0.25 s. The fake answers GetProducts two items a page.
    time = VirtualTime()
    client = AWSClient(
        boto3.Session(region_name="us-east-1"), endpoint_url=fake.url, limits=RateLimits(4.0, 1.0).on(time)
    )
    items = client.get_products([{"Field": "regionCode", "Value": "us-east-1"}])
    pages = len(fake.app.calls)
    assert len(items) == 4 and pages == 2
    client.describe_instances("us-east-1", by_cluster("c1"))
    assert client.limiter.granted == len(fake.app.calls) == 3 and time.now == 0.5


def _client_error(code: str, status: int, headers: dict[str, str] | None = None) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {
            "Error": {"Code": code, "Message": f"message of {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}},
        },
        "RunInstances",
    )


# ----- moto (server mode) -----------------------------------------------------------------------
def test_gpu_instance_type_facts_from_moto(moto_url: str) -> None:
    kinds = {k.instance_type: k for k in _provider(moto_url).gpu_types("us-east-1")}
    p5, p4d = kinds["p5.48xlarge"], kinds["p4d.24xlarge"]
    assert (p5.gpu_model, p5.gpus, p5.gpu_memory_gib, p5.vcpus) == ("H100", 8, 80.0, 192)
    assert (p5.efa_supported, p5.max_efa_interfaces, p5.network_gbps) == (True, 32, 3200.0)
    assert p5.local_nvme_gib == 8 * 3800
    assert (p4d.gpu_model, p4d.max_efa_interfaces, p4d.gpu_memory_gib) == ("A100", 4, 40.0)
    assert all(k.gpus >= 1 for k in kinds.values()) and "m5.large" not in kinds


def test_create_get_delete_on_moto(moto_url: str) -> None:
    provider = _provider(moto_url, owner="alice")  # a type without EFA: moto has no placement groups (test_aws_efa)
    specs = [
        NodeSpec(
            name=f"n{i}",
            instance_type="g6e.xlarge",
            region="us-east-1",
            image=IMAGE,
            bootstrap="cloud_init",
            user_data="#cloud-config\n{}\n",
            tags={EXPIRES_TAG: "2026-11-24T00:00:00Z"},
        )
        for i in range(2)
    ]
    created = provider.create_nodes("mc1", specs)
    again = provider.create_nodes("mc1", specs)
    assert sorted(n.id for n in created) == sorted(n.id for n in again) and len(created) == 2
    ec2 = boto3.client("ec2", endpoint_url=moto_url, region_name="us-east-1")
    reservations = ec2.describe_instances(InstanceIds=[created[0].id])["Reservations"]
    (instance,) = [i for r in reservations for i in r["Instances"]]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags[CLUSTER_TAG] == "mc1" and tags[NODE_TAG] == created[0].name
    assert tags["provisioner-owner"] == "alice" and tags[EXPIRES_TAG] == "2026-11-24T00:00:00Z"
    behaviour = ec2.describe_instance_attribute(InstanceId=created[0].id, Attribute="instanceInitiatedShutdownBehavior")
    assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    # IMDSv2 only with a hop limit of 1: a container or pod on the node gets no metadata token
    assert instance["MetadataOptions"]["HttpTokens"] == "required"
    assert instance["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    provider.delete_nodes("mc1", [created[0].id, "i-0000000000000dead"])
    states = {n.name: n.status for n in provider.get_nodes("mc1")}
    assert states[created[0].name] == NodeStatus.TERMINATED and states[created[1].name] == NodeStatus.RUNNING
    provider.delete_nodes("mc1")
    provider.delete_nodes("mc1")
    assert {n.status for n in provider.get_nodes("mc1")} == {NodeStatus.TERMINATED}


def test_the_direct_adapter_makes_the_clusters_own_security_group(fake: RunningServer) -> None:
    """Closed by default on the direct engine too (issue 16): the cluster's instances get a group of
    their own (tcp/22 from allowed_cidrs, all within the group) instead of the VPC's default group,
    and it goes with the cluster."""
    from provisioner.providers.base import SupportsFirewall

    provider = _provider(fake.url, owner="alice")
    assert isinstance(provider, SupportsFirewall)
    group_id = provider.ensure_firewall("fw1", ["203.0.113.7/32", "2001:db8::/48"], "us-east-1")
    assert provider.ensure_firewall("fw1", ["203.0.113.7/32", "2001:db8::/48"], "us-east-1") == group_id
    specs = [NodeSpec(name=f"n{i}", instance_type="g6e.xlarge", region="us-east-1", image=IMAGE) for i in range(2)]
    created = provider.create_nodes("fw1", specs)
    ec2 = boto3.client(
        "ec2",
        endpoint_url=fake.url,
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key=fake.app.api_key or "x",
    )
    instances = [
        i for r in ec2.describe_instances(InstanceIds=[n.id for n in created])["Reservations"] for i in r["Instances"]
    ]
    assert [[g["GroupId"] for g in i["SecurityGroups"]] for i in instances] == [[group_id], [group_id]]
    (group,) = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    assert tags[CLUSTER_TAG] == "fw1" and tags["provisioner-owner"] == "alice"
    rules = {(p["IpProtocol"], p.get("FromPort")): p for p in group["IpPermissions"]}
    assert sorted(rules) == [("-1", None), ("tcp", 22)]
    assert [r["CidrIp"] for r in rules[("tcp", 22)]["IpRanges"]] == ["203.0.113.7/32"]
    assert [r["CidrIpv6"] for r in rules[("tcp", 22)]["Ipv6Ranges"]] == ["2001:db8::/48"]
    assert [g["GroupId"] for g in rules[("-1", None)]["UserIdGroupPairs"]] == [group_id]
    provider.delete_nodes("fw1")
    provider.remove_firewall("fw1")
    assert ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [group_id]}])["SecurityGroups"] == []


def test_unknown_instance_type_is_refused_by_ec2(moto_url: str) -> None:
    spec = NodeSpec(name="x", instance_type="p99.mega", region="us-east-1", image=IMAGE)
    with pytest.raises(ProviderAPIError, match=r"p99.mega.*InvalidInstanceType"):  # by the quota check, before buying
        _provider(moto_url).create_nodes("mc2", [spec])
    assert _provider(moto_url).get_nodes("mc2") == []


def test_moto_has_no_pricing_backend(moto_url: str) -> None:
    """Why Pricing is the AWSFake's job: moto answers 500, read as ProviderAPIError, never a crash."""
    with pytest.raises(ProviderAPIError) as caught:
        # the default retry policy (every attempt), its back-off on no clock
        _provider(moto_url, retry=RetryPolicy(sleep=lambda _: None)).on_demand_prices("us-east-1", ["p5.48xlarge"])
    assert caught.value.status == 500


# ----- the fake (Pricing, Service Quotas, spot history) -------------------------------------------
def test_an_efa_type_without_a_known_layout_is_offered_as_ethernet(
    fake: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2 says the type has EFA, but the adapter knows no interface layout for it: its nodes would
    launch without EFA, so the offer must not be ranked as an EFA one."""
    from provisioner.providers.aws import efa

    monkeypatch.delitem(efa.EFA_INTERFACES, "p5.48xlarge")
    offers = _provider(fake.url).list_offers(OfferQuery(gpu_models=("H100",)))
    assert {o.fabric for o in offers if o.instance_type == "p5.48xlarge" and o.purchase == Purchase.INSTANCE} == {
        Fabric.ETHERNET
    }


def test_offers_carry_exact_prices_and_efa(fake: RunningServer) -> None:
    offers = _provider(fake.url).list_offers(OfferQuery(gpu_models=("H100",)))
    p5 = {o.zone: o for o in offers if o.instance_type == "p5.48xlarge" and o.purchase == Purchase.INSTANCE}
    assert p5["us-east-1a"].price_per_hour_usd == Decimal("55.04")
    assert p5["us-east-1a"].spot_price_per_hour_usd == Decimal("27.2010")
    assert p5["us-east-1c"].spot_price_per_hour_usd is None  # no spot history there
    assert p5["us-east-1a"].fabric == Fabric.EFA and p5["us-east-1a"].fabric_gbps == 3200
    assert {o.instance_type for o in offers} == {"p5.48xlarge"}  # p5.4xlarge has no price in the fake
    only_spot = _provider(fake.url).list_offers(OfferQuery(gpu_models=("H100",), spot=True))
    assert {o.zone for o in only_spot} == {"us-east-1a", "us-east-1b"}
    assert {o.purchase for o in only_spot} == {Purchase.INSTANCE}  # Capacity Blocks are not spot


def test_capacity_blocks_are_quote_only_offers_priced_per_node_hour(fake: RunningServer) -> None:
    provider = _provider(fake.url)
    offers = provider.list_offers(OfferQuery(gpu_models=("H100",)))
    assert {o.purchase for o in offers} == {Purchase.INSTANCE}  # list_offers: only what create_nodes buys
    blocks = {o.zone: o for o in provider.quote_offers(offers) if o.block_hours == 24}
    assert set(blocks) == {"us-east-1a", "us-east-1b"}  # the fake's p5 blocks in us-east-1
    block = blocks["us-east-1a"]
    assert block.purchase.quote_only and block.price_per_hour_usd == Decimal("31.464")  # 755.136 USD / 1 / 24 h
    assert block.offer_id and block.offer_id.startswith("cb-") and block.spot_price_per_hour_usd is None
    assert (block.gpus, block.fabric, block.max_nodes) == (8, Fabric.EFA, 64)
    assert block.how_to_obtain and "purchase-capacity-block" in block.how_to_obtain
    assert "2026-11-25T11:30:00Z to 2026-11-26T11:30:00Z" in block.how_to_obtain
    assert {o.purchase for o in blocks.values()} == {Purchase.RESERVATION}
    assert _provider(fake.url, capacity_blocks=False).quote_offers(offers) == []


def test_quota_refusal_names_the_code_and_the_increase_command(fake: RunningServer) -> None:
    provider = _provider(fake.url)
    provider.check_quota("p5.48xlarge", "us-east-1", 2, spot=False)  # 384 vCPUs fit 2 x 192
    with pytest.raises(QuotaError) as caught:
        provider.check_quota("p5.48xlarge", "us-east-1", 3, spot=False)
    text = str(caught.value)
    assert "L-417A185B" in text and "576 vCPUs" in text and "of 384 vCPUs" in text
    assert (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 576 --region us-east-1"
    ) in text
    (spot,) = provider.quota_shortfalls([("p5.48xlarge", "us-east-1", 1, True), ("g6e.xlarge", "us-east-1", 2, True)])
    assert (spot.code, spot.limit_vcpus, spot.needed_vcpus) == ("L-C4BD4855", 0, 192)


def test_unknown_quota_is_no_refusal(fake: RunningServer) -> None:
    fake.app.quotas.clear()  # type: ignore[attr-defined]
    _provider(fake.url).check_quota("p5.48xlarge", "us-east-1", 100, spot=False)


def test_quota_codes() -> None:
    assert quotas.quota_code("p4d.24xlarge", spot=False) == quotas.quota_code("p5.48xlarge", spot=False) == "L-417A185B"
    assert quotas.quota_code("p4d.24xlarge", spot=True) == "L-7212CCBC"
    assert quotas.quota_code("p5en.48xlarge", spot=True) == "L-C4BD4855"
    assert quotas.quota_code("g6e.xlarge", spot=False) == "L-DB2E81BA"
    assert quotas.quota_code("g5.xlarge", spot=True) == "L-3819A6DF"
    assert quotas.quota_code("m5.large", spot=False) is None


def test_capacity_fault_is_capacity_error_and_nothing_is_left(fake: RunningServer) -> None:
    fake.app.faults.inject("capacity_after", route="RunInstances", times=None, k=0)
    spec = NodeSpec(name="a", instance_type="p5.48xlarge", region="us-east-1", image=IMAGE)
    with pytest.raises(CapacityError, match="InsufficientInstanceCapacity"):
        _provider(fake.url).create_nodes("fc1", [spec])
    assert fake.app.instance_count() == 0


def test_spot_node_is_bought_as_spot_with_a_max_price(fake: RunningServer) -> None:
    spec = NodeSpec(
        name="s",
        instance_type="p5.48xlarge",
        region="us-east-1",
        image=IMAGE,
        spot=True,
        bid_usd_per_hour=30.0,
        zone="us-east-1a",
    )
    fake.app.quotas[("us-east-1", "L-C4BD4855")] = 192.0  # type: ignore[attr-defined]  # the default spot P5 is 0
    (node,) = _provider(fake.url).create_nodes("fc2", [spec])
    assert fake.app.bought[node.id].interruptible is True


def test_no_image_and_none_found_is_a_plan_error_before_buying(fake: RunningServer) -> None:
    spec = NodeSpec(name="a", instance_type="p5.48xlarge", region="us-east-1")
    with pytest.raises(PlanError, match="PROVISIONER_AWS_IMAGE_ID"):
        _provider(fake.url).create_nodes("fc3", [spec])
    assert fake.app.launched == 0


# ----- mapping and parsing ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("InsufficientInstanceCapacity", 500, CapacityError),
        ("VcpuLimitExceeded", 400, QuotaError),
        ("MaxSpotInstanceCountExceeded", 400, QuotaError),
        ("RequestLimitExceeded", 503, RateLimitError),
        ("ThrottlingException", 400, RateLimitError),
        ("AuthFailure", 401, CredentialsError),
        ("UnrecognizedClientException", 400, CredentialsError),
        ("InvalidParameterValue", 400, ProviderAPIError),
    ],
)
def test_botocore_errors_map_into_the_error_tree(code: str, status: int, kind: type[Exception]) -> None:
    error = map_error(_client_error(code, status, {"Retry-After": "2"}))
    assert type(error) is kind and code in str(error) and f"message of {code}" in str(error)
    if isinstance(error, RateLimitError):
        assert error.retry_after_s == 2.0
    if isinstance(error, ProviderAPIError):
        assert error.status == status


def test_missing_credentials_are_credentials_error() -> None:
    assert isinstance(map_error(botocore.exceptions.NoCredentialsError()), CredentialsError)


def test_price_list_item_parses_exactly() -> None:
    item = price_list_item("p5.48xlarge", "us-east-1", Decimal("55.04"))
    assert on_demand_price(item) == ("p5.48xlarge", "us-east-1", Decimal("55.04"))
    windows = json.loads(item)
    windows["product"]["attributes"]["operatingSystem"] = "Windows"
    assert on_demand_price(json.dumps(windows)) is None


def test_operations_match_the_shared_botocore_shapes() -> None:
    """The parameters the adapter sends exist in the shapes gathered in ../shared (botocore 1.43.11)."""
    ec2 = json.loads(need_shared("provider-apis", "aws", "ec2_operation_shapes_botocore.json").read_text())
    other = json.loads(
        need_shared("provider-apis", "aws", "service_quotas_and_pricing_shapes_botocore.json").read_text()
    )
    run = ec2["RunInstances"]["input"]
    for name in (
        "ImageId",
        "InstanceType",
        "MinCount",
        "MaxCount",
        "UserData",
        "KeyName",
        "TagSpecifications",
        "InstanceMarketOptions",
        "Placement",
        "InstanceInitiatedShutdownBehavior",
    ):
        assert name in run, name
    instance_type = ec2["DescribeInstanceTypes"]["output"]["InstanceTypes"][0]
    assert {"GpuInfo", "NetworkInfo", "InstanceStorageInfo"} <= set(instance_type)
    assert "MaximumEfaInterfaces" in instance_type["NetworkInfo"]["EfaInfo"]
    assert set(other["GetServiceQuota"]["input"]) >= {"ServiceCode", "QuotaCode"}
    blocks = ec2["DescribeCapacityBlockOfferings"]
    assert set(blocks["input"]) >= {"InstanceType", "InstanceCount", "CapacityDurationHours"}
    assert set(blocks["output"]["CapacityBlockOfferings"][0]) >= {
        "CapacityBlockOfferingId",
        "AvailabilityZone",
        "InstanceCount",
        "CapacityBlockDurationHours",
        "UpfrontFee",
        "CurrencyCode",
        "StartDate",
        "EndDate",
    }
    assert set(ec2["DescribeInstanceTopology"]["input"]) >= {"InstanceIds", "NextToken"}
    assert other["pricing.GetProducts"]["output"]["PriceList"] == ["string"]
