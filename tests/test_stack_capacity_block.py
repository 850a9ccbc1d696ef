"""A Capacity Block plan under Pulumi's mock runtime: the launch template launches into the block
(market type capacity-block, the reservation as its target); the stack never buys one."""

from __future__ import annotations

import pytest

from provisioner.capabilities import Purchase
from provisioner.errors import PlanError
from provisioner.plan import Plan
from provisioner.spec import ClusterSpec
from tests.test_stack_cluster import _secrets, args_for, plan_on, realize

SPEC = ClusterSpec.model_validate(
    {
        "name": "blk-test",
        "gpus": {"model": ["H100"], "count": 16},
        "nodes": {"gpus_per_node": 8},
        "control_plane": "slurm",
        "pricing": {"reservations": True},
        "workload": {"hours": 48},
        "lifetime": {"ttl_hours": 60},
    }
)


def _block_plan() -> Plan:
    plan = plan_on(SPEC, "aws", "p5.48xlarge")
    offer = plan.option.offer.model_copy(
        update={"purchase": Purchase.RESERVATION, "block_hours": 72, "block_start": "2026-11-25T11:30:00Z"}
    )
    return plan.model_copy(
        update={"option": plan.option.model_copy(update={"offer": offer, "purchase": Purchase.RESERVATION})}
    )


def test_nodes_of_a_block_plan_launch_into_the_reservation() -> None:
    done = realize(args_for(_block_plan(), _secrets(), capacity_reservation_id="cr-0123456789abcdef0"))
    (template,) = done.recorder.of("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert done.recorder.of("aws:ec2/placementGroup:PlacementGroup") == []
    assert len(done.recorder.of("aws:ec2/instance:Instance")) == 2
    assert done.recorder.of("aws:ec2/capacityBlockReservation:CapacityBlockReservation") == []  # never bought here


def test_other_plans_launch_without_a_reservation() -> None:
    done = realize(args_for(plan_on(SPEC, "aws", "p5.48xlarge"), _secrets()))
    (template,) = done.recorder.of("aws:ec2/launchTemplate:LaunchTemplate")
    assert "capacityReservationSpecification" not in template.inputs
    assert "instanceMarketOptions" not in template.inputs


def test_a_block_plan_without_a_reservation_id_is_refused_before_anything() -> None:
    with pytest.raises(PlanError, match="capacityReservationId"):
        args_for(_block_plan(), _secrets())
    with pytest.raises(PlanError, match="not a Capacity Block"):
        args_for(plan_on(SPEC, "aws", "p5.48xlarge"), _secrets(), capacity_reservation_id="cr-0123456789abcdef0")
