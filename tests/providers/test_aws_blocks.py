"""Buying an EC2 Capacity Block for ML and launching into it, on the AWSFake over boto3 (127.0.0.1).

Every request and answer is checked against botocore's shapes by the fake (the fixture fails a
test that sent or got anything invalid)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest

from provisioner.errors import CapacityError, PlanError, ProviderError
from provisioner.providers.aws.client import LIMITS
from provisioner.providers.aws.provider import CLUSTER_TAG, AWSProvider
from provisioner.providers.base import NodeSpec, SupportsReservations
from provisioner.testing.fakes.aws_ec2 import AWSFake
from provisioner.testing.fakes.base import RunningServer, serve
from tests.conftest import need_shared

IMAGE = "ami-12c6146b"
START = dt.datetime(2026, 11, 25, 11, 30, tzinfo=dt.UTC)


class Clock:
    """A fake clock the adapter's sleep moves forward (no real waiting)."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at
        self.slept = 0.0

    def now(self) -> dt.datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.at += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock(START - dt.timedelta(hours=2))


@pytest.fixture
def fake(clock: Clock) -> Iterator[RunningServer]:
    with serve(AWSFake(api_key="testing", now=clock.now)) as running:
        yield running
        assert running.app.validation_errors == []


def _provider(url: str, clock: Clock, **kwargs: Any) -> AWSProvider:
    # 100x the published request rate: the wait polls every (fake) minute for two hours, ~12 s at the
    # real 10 requests/s; the limits have their own contract test.
    kwargs.setdefault("limits", LIMITS.scaled(100))
    return AWSProvider(
        boto3.Session(region_name="us-east-1"),
        regions=["us-east-1"],
        endpoint_url=url,
        image_id=IMAGE,
        poll_interval_s=60.0,
        now=clock.now,
        sleep=clock.sleep,
        **kwargs,
    )


def _nodes(n: int = 2, **update: Any) -> list[NodeSpec]:
    fields: dict[str, Any] = {
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "gpus": 8,
        "capacity_block_hours": 72,
        "capacity_block_usd_per_hour": Decimal("31.464"),
        **update,
    }
    return [NodeSpec(name=f"n{i}", **fields) for i in range(n)]


def _actions(fake: RunningServer) -> list[str]:
    return [call.route for call in fake.app.calls]


def test_the_block_is_bought_waited_for_and_the_nodes_launch_into_it(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    nodes = provider.create_nodes("blk", _nodes())
    (block,) = fake.app.reservations.values()
    assert (block["kind"], block["zone"], block["count"], block["hours"]) == ("p5.48xlarge", "us-east-1a", 2, 72)
    assert block["fee"] == Decimal("4530.816")  # 31.464 x 2 nodes x 72 h, upfront
    assert block["tags"][CLUSTER_TAG] == "blk"
    assert block["used"] == {n.id for n in nodes}  # RunInstances targeted this reservation, MarketType capacity-block
    assert all(fake.app.bought[n.id].interruptible is False for n in nodes)
    # the block starts in 2 h: up waited (on the fake clock) until it was active, then launched
    assert clock.at >= START and clock.slept >= 2 * 3600
    actions = _actions(fake)
    assert (
        actions.index("DescribeCapacityBlockOfferings")
        < actions.index("PurchaseCapacityBlock")
        < actions.index("RunInstances")
    )
    assert actions.count("PurchaseCapacityBlock") == 1
    # a retried create adopts the block and the nodes: nothing more is bought
    again = provider.create_nodes("blk", _nodes())
    assert {n.id for n in again} == {n.id for n in nodes} and len(fake.app.reservations) == 1
    assert _actions(fake).count("PurchaseCapacityBlock") == 1


def test_down_says_the_block_remains_paid_until_its_end(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    assert isinstance(provider, SupportsReservations)
    provider.create_nodes("blk", _nodes(1))
    provider.delete_nodes("blk")
    (notice,) = provider.reservations_left("blk")
    assert notice.startswith("EC2 Capacity Block cr-") and "1 x p5.48xlarge in us-east-1a" in notice
    assert "remains until 2026-11-28T11:30:00Z" in notice  # 72 h from the start
    assert "already paid and AWS cannot cancel it" in notice
    assert provider.reservations_left("other") == []


def test_a_dearer_block_is_refused_before_anything_is_bought(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    with pytest.raises(PlanError, match=r"now costs \$4530.816 upfront, over the planned \$4320; nothing was "):
        provider.create_nodes("blk", _nodes(capacity_block_usd_per_hour=Decimal("30")))
    assert fake.app.reservations == {} and "RunInstances" not in _actions(fake)


def test_no_block_on_offer_is_a_capacity_error_before_anything_is_bought(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    with pytest.raises(CapacityError, match=r"no Capacity Block of 2 x p5\.48xlarge for 72 h in us-east-1c"):
        provider.create_nodes("blk", _nodes(zone="us-east-1c"))
    assert fake.app.reservations == {} and "RunInstances" not in _actions(fake)


def test_a_failure_after_the_purchase_says_what_was_bought(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    fake.app.faults.inject("capacity_after", route="RunInstances", times=None, k=1)
    with pytest.raises(ProviderError) as caught:
        provider.create_nodes("blk", _nodes())
    assert not isinstance(caught.value, CapacityError)  # bring_up_first must not buy another option
    (block,) = fake.app.reservations.values()
    message = str(caught.value)
    assert (
        f"bought before this failure: EC2 Capacity Block {block['id']} (2 x p5.48xlarge in us-east-1a, "
        "$4530.816 paid upfront, non-refundable), ends 2026-11-28T11:30:00Z" in message
    )
    assert "cannot be cancelled" in message
    assert fake.app.instance_count() == 0  # the launched node was rolled back


def test_a_block_that_fails_to_start_says_what_was_bought(fake: RunningServer, clock: Clock) -> None:
    provider = _provider(fake.url, clock)
    clock.at = START + dt.timedelta(days=30)  # the offering's block is long over: EC2 reports it expired
    with pytest.raises(ProviderError, match=r"is expired; bought before this failure: EC2 Capacity Block cr-"):
        provider.create_nodes("blk", _nodes())


def test_an_adapter_asked_without_reservations_lists_blocks_with_their_length_and_start(
    fake: RunningServer, clock: Clock
) -> None:
    from provisioner.providers.base import OfferQuery

    provider = _provider(fake.url, clock)
    offers = provider.list_offers(OfferQuery(gpu_models=("H100",), regions=("us-east-1",)))
    blocks = [o for o in provider.quote_offers(offers) if o.zone == "us-east-1a"]
    assert sorted(o.block_hours for o in blocks) == [24, 72, 168, 336]
    assert {o.block_start for o in blocks} == {"2026-11-25T11:30:00Z"}
    assert {o.price_per_hour_usd for o in blocks} == {Decimal("31.464")}


def test_the_purchase_operations_match_the_shared_botocore_shapes() -> None:
    ec2 = json.loads(need_shared("provider-apis", "aws", "ec2_operation_shapes_botocore.json").read_text())
    assert set(ec2["PurchaseCapacityBlock"]["input"]) >= {
        "CapacityBlockOfferingId",
        "InstancePlatform",
        "TagSpecifications",
    }
    assert "capacity-reservation" in ec2["PurchaseCapacityBlock"]["input"]["TagSpecifications"][0]["ResourceType"]
    assert "CapacityReservationId" in ec2["PurchaseCapacityBlock"]["output"]["CapacityReservation"]
    run = ec2["RunInstances"]["input"]
    assert "capacity-block" in run["InstanceMarketOptions"]["MarketType"]
    assert "CapacityReservationId" in run["CapacityReservationSpecification"]["CapacityReservationTarget"]
    described = ec2["DescribeCapacityReservations"]["output"]["CapacityReservations"][0]
    assert {"State", "StartDate", "EndDate", "ReservationType", "AvailabilityZone"} <= set(described)


def test_down_and_gc_tell_the_user_the_block_remains(
    fake: RunningServer, clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from provisioner.lifecycle.gc import collect_garbage
    from provisioner.lifecycle.realize import Runtime, Timeouts, tear_down

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    provider = _provider(fake.url, clock, owner="tester")
    provider.create_nodes("blk", _nodes(1))
    report = collect_garbage(cluster_id="blk", delete=True, adapters={"aws": provider}, records=[], owner="tester")
    assert [item.cluster_id for item in report.deleted] == ["blk"]
    assert "cannot be deleted: EC2 Capacity Block cr-" in report.render()
    assert "remains until 2026-11-28T11:30:00Z: it is already paid and AWS cannot cancel it" in report.render()
    events: list[tuple[str, str]] = []
    runtime = Runtime(
        provider_for=lambda name: provider,
        emit=lambda event, *, message, **_: events.append((event, message)),
        timeouts=Timeouts(interval_s=0.01, max_interval_s=0.05),
        sleep=lambda s: None,
    )
    tear_down("blk", runtime, provider="aws")
    notes = [message for event, message in events if event == "reservation"]
    assert len(notes) == 1 and "already paid and AWS cannot cancel it" in notes[0]
    assert "remains until 2026-11-28T11:30:00Z" in notes[0]
