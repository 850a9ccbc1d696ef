"""Buying an EC2 Capacity Block for ML for a cluster, and waiting for it to start.

What ``AWSProvider.create_nodes`` does first when its nodes ask for a block
(``NodeSpec.capacity_block_hours``, from a plan ranked under ``pricing.reservations``):

1. ``find``: a block already tagged ``provisioner-cluster=<id>`` in a state that holds capacity
   is adopted (a retried ``up`` never buys a second one);
2. else ``DescribeCapacityBlockOfferings`` for the planned count, type and hours; the cheapest
   offering in the planned zone whose fee is within the planned price (``capacity_block_usd_per_hour``
   x count x hours) is bought with ``PurchaseCapacityBlock`` (tagged with the cluster, owner and
   expiry); none on offer is a CapacityError, a dearer one a PlanError, both before anything is bought;
3. ``wait_active``: ``DescribeCapacityReservations`` until the block is ``active`` (a block that
   starts in the future is ``scheduled`` until then: ``up`` blocks until its start).

The block is paid upfront in full and cannot be cancelled: once bought, every later error says
what was bought (``Block.bought``), and ``down``/``gc`` say it remains (``Block.notice``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from provisioner.errors import CapacityError, PlanError, ProviderError, ProvisionerError
from provisioner.providers.aws.client import AWSClient, by_cluster
from provisioner.providers.base import CLUSTER_TAG, EXPIRES_TAG, OWNER_TAG, NodeSpec, expiry_text
from provisioner.providers.orchestrate import unclear
from provisioner.waiting import wait_until

HOLDING = ("payment-pending", "pending", "assessing", "scheduled", "delayed", "active")
"""Block states that hold (or will hold) the capacity bought: what ``find`` adopts and what
``down``/``gc`` report as remaining."""
FAILED = ("payment-failed", "failed", "cancelled", "expired", "unsupported", "unavailable")
START_GRACE_S = 1800.0
"""How long past its start date a block may take to become ``active`` before ``up`` gives up."""


@dataclass(frozen=True)
class Block:
    """One Capacity Block (an EC2 capacity reservation of type capacity-block)."""

    reservation_id: str
    region: str
    instance_type: str
    zone: str
    count: int
    state: str
    start: dt.datetime | None
    end: dt.datetime | None
    fee_usd: Decimal | None = None

    @classmethod
    def of(cls, region: str, item: dict[str, Any], fee_usd: Decimal | None = None) -> Block:
        return cls(
            reservation_id=str(item.get("CapacityReservationId", "")),
            region=region,
            instance_type=str(item.get("InstanceType", "")),
            zone=str(item.get("AvailabilityZone", "")),
            count=int(item.get("TotalInstanceCount") or 0),
            state=str(item.get("State", "")),
            start=item.get("StartDate"),
            end=item.get("EndDate"),
            fee_usd=fee_usd,
        )

    def _what(self) -> str:
        fee = f", ${self.fee_usd} paid upfront" if self.fee_usd is not None else ", paid upfront"
        return (
            f"EC2 Capacity Block {self.reservation_id} ({self.count} x {self.instance_type} in {self.zone}"
            f"{fee}, non-refundable)"
        )

    def bought(self) -> str:
        """What a failure after the purchase says was bought."""
        return (
            f"bought before this failure: {self._what()}, ends {_text(self.end)}; it cannot be cancelled and "
            "stays paid: run provisioner up again to launch into it"
        )

    def notice(self) -> str:
        """What ``down``/``gc`` say about a block that outlives the cluster's instances."""
        return (
            f"{self._what()} remains until {_text(self.end)}: it is already paid and AWS cannot cancel it; "
            "its instances are terminated, nothing more is charged for the block itself"
        )


def _text(when: dt.datetime | None) -> str:
    return expiry_text(when) if when is not None else "its end date"


class CapacityBlocks:
    """The purchase path over one ``AWSClient``. ``now``/``sleep`` drive the wait (injectable)."""

    def __init__(
        self,
        client: AWSClient,
        *,
        now: Callable[[], dt.datetime],
        sleep: Callable[[float], None],
        poll_interval_s: float,
        owner: str,
    ) -> None:
        self.client, self.now, self.sleep = client, now, sleep
        self.poll_interval_s, self.owner = poll_interval_s, owner

    def find(self, cluster_id: str, region: str) -> list[Block]:
        """The cluster's blocks in ``region`` that hold capacity (by the cluster tag). Read-only."""
        items = self.client.describe_capacity_reservations(
            region, [*by_cluster(cluster_id), {"Name": "state", "Values": list(HOLDING)}]
        )
        return [
            Block.of(region, item)
            for item in items
            if item.get("ReservationType", "capacity-block") == "capacity-block"
        ]

    def ensure(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> Block:
        """The cluster's active block for ``nodes`` (all asking for one), bought if none exists; see the
        module docstring. Blocks until the block is active. Raises PlanError/CapacityError before a
        purchase; after one, a ProviderError whose message says what was bought."""
        shapes = {(n.instance_type, n.region, n.zone, n.capacity_block_hours) for n in nodes}
        if len(shapes) != 1:
            raise PlanError(
                "aws: the nodes of one cluster must share one Capacity Block (one type, zone and "
                "length); nothing was bought"
            )
        ((instance_type, region, zone, hours),) = shapes
        count, hours = len(nodes), int(hours or 0)
        held = [b for b in self.find(cluster_id, region) if b.instance_type == instance_type]
        block = held[0] if held else self._buy(cluster_id, nodes, instance_type, region, zone, count, hours)
        try:
            return self.wait_active(block)
        except ProvisionerError as exc:
            raise ProviderError("aws", f"{exc}; {block.bought()}") from exc

    def _buy(
        self,
        cluster_id: str,
        nodes: Sequence[NodeSpec],
        instance_type: str,
        region: str,
        zone: str | None,
        count: int,
        hours: int,
    ) -> Block:
        offerings = [
            o
            for o in self.client.describe_capacity_block_offerings(region, instance_type, count, hours)
            if (zone is None or o.get("AvailabilityZone") == zone)
            and int(o.get("InstanceCount") or 0) == count
            and int(o.get("CapacityBlockDurationHours") or 0) == hours
            and o.get("CurrencyCode", "USD") == "USD"
        ]
        where = f"{zone or region}"
        if not offerings:
            raise CapacityError(
                "aws",
                f"no Capacity Block of {count} x {instance_type} for {hours} h in {where} is "
                "on offer now; nothing was bought",
            )
        offering = min(offerings, key=lambda o: (_fee(o), str(o.get("StartDate", ""))))
        fee = _fee(offering)
        ceiling = nodes[0].capacity_block_usd_per_hour
        if ceiling is not None and fee > ceiling * count * hours:
            raise PlanError(
                f"aws: the Capacity Block of {count} x {instance_type} for {hours} h in {where} now costs "
                f"${fee} upfront, over the planned ${ceiling * count * hours}; nothing was bought: plan "
                "again"
            )
        tags = {CLUSTER_TAG: cluster_id, OWNER_TAG: self.owner}
        expires = next((n.expires_at for n in nodes if n.expires_at is not None), None)
        if expires is not None:
            tags[EXPIRES_TAG] = expiry_text(expires)
        offering_id = str(offering.get("CapacityBlockOfferingId", ""))
        try:
            item = self.client.purchase_capacity_block(
                region, offering_id, [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
            )
        except ProviderError as exc:
            if not unclear(exc):
                raise
            held = [b for b in self.find(cluster_id, region) if b.instance_type == instance_type]
            if not held:
                raise ProviderError(
                    "aws",
                    f"{exc.message}; the purchase of Capacity Block offering {offering_id} "
                    f"(${fee}) may have gone through: check aws ec2 describe-capacity-reservations "
                    f"--filters Name=tag:{CLUSTER_TAG},Values={cluster_id} --region {region}",
                ) from exc
            return held[0]
        return Block.of(region, item, fee)

    def wait_active(self, block: Block) -> Block:
        """Poll the block until it is active; until its start date (plus ``START_GRACE_S``) at most.
        Raises ProviderError when it fails (payment failed, ...), WaitTimeout when it never starts."""
        start = block.start or self.now()
        timeout_s = max((start - self.now()).total_seconds(), 0.0) + START_GRACE_S
        fee = block.fee_usd

        def poll() -> Block:
            items = self.client.describe_capacity_reservations(
                block.region, [{"Name": "capacity-reservation-id", "Values": [block.reservation_id]}]
            )
            found = [Block.of(block.region, item, fee) for item in items]
            return found[0] if found else block

        def active(current: Block) -> bool:
            if current.state in FAILED:
                raise ProviderError("aws", f"Capacity Block {current.reservation_id} is {current.state}")
            return current.state == "active"

        return wait_until(
            poll,
            active,
            timeout_s=timeout_s,
            interval_s=self.poll_interval_s,
            max_interval_s=max(self.poll_interval_s, 60.0),
            what=f"Capacity Block {block.reservation_id} to start ({_text(block.start)})",
            clock=lambda: self.now().timestamp(),
            sleep=self.sleep,
        )


def _fee(offering: dict[str, Any]) -> Decimal:
    try:
        return Decimal(str(offering.get("UpfrontFee")))
    except InvalidOperation:
        return Decimal("Infinity")


__all__ = ["FAILED", "HOLDING", "Block", "CapacityBlocks"]
