"""EC2 Capacity Blocks for ML in the core: ``pricing.reservations`` ranks them, the block's fee is
paid upfront for the whole block (its hours, not the run's), and a block shorter than the run is
rejected with a reason. The adapter's purchase path is in tests/providers/test_aws_blocks.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from provisioner.capabilities import Capability, Purchase
from provisioner.costs import Stage
from provisioner.errors import NoFeasibleOfferError, PlanError
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan
from provisioner.report.view import winner_summary
from provisioner.spec import PROVIDER_NAMES
from tests.test_optimizer import ALL, make_catalog, make_info, make_offer, make_spec, plan

WITHOUT = ALL - {Capability.RESERVATION}


def block(**fields: Any) -> Any:
    """A 72 h p5 block: 31.464 USD per node-hour, 8 GPUs a node, on AWS in us-east-1a."""
    base: dict[str, Any] = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "zone": "us-east-1a",
        "offer_id": "cb-0123456789abcdef0",
        "purchase": "reservation",
        "price_per_hour_usd": "31.464",
        "block_hours": 72,
        "block_start": "2026-11-25T11:30:00Z",
        "fabric": "efa",
        "max_nodes": 64,
        "how_to_obtain": "EC2 Capacity Block for ML cb-0123456789abcdef0",
    }
    base.update(fields)
    return make_offer(**base)


def instance(**fields: Any) -> Any:
    return make_offer(
        **{
            "provider": "aws",
            "instance_type": "p5.48xlarge",
            "zone": "us-east-1a",
            "price_per_hour_usd": "55.04",
            "fabric": "efa",
            "max_nodes": 64,
            **fields,
        }
    )


def test_without_the_switch_a_block_stays_quote_only() -> None:
    spec = make_spec(workload={"hours": 48})
    result = plan(spec, [block(), instance()])
    assert [o.purchase for o in result.options] == [Purchase.INSTANCE]
    assert [(q.purchase, q.instance_type) for q in result.quotes] == [(Purchase.RESERVATION, "p5.48xlarge")]


def test_with_the_switch_the_block_is_ranked_and_its_fee_is_upfront_for_the_whole_block() -> None:
    spec = make_spec(workload={"hours": 48}, pricing={"reservations": True})
    result = plan(spec, [block(), instance()])
    first = result.options[0]
    assert first.purchase is Purchase.RESERVATION and result.quotes == []
    # 2 nodes x 31.464 USD x 72 h of the block (not the 48 h run), paid upfront; no boot on top
    assert first.cost.compute == Decimal("4530.82")  # 4530.816 -> half-even to cents
    assert first.cost.boot_usd == 0
    assert first.hourly_usd == Decimal("62.928")
    assert first.cost.total == first.cost.compute + first.cost.storage + first.cost.egress + first.cost.interruption
    second = result.options[1]  # the instance pays only the run: 2 x 55.04 x 48 h
    assert second.purchase is Purchase.INSTANCE and second.cost.compute == Decimal("5283.84")
    text = winner_summary(first)
    assert "72 h from 2026-11-25T11:30:00Z" in text and "$4,530.82 paid upfront" in text
    assert "non-refundable" in text
    frozen = result.to_plan(1)
    assert Plan.model_validate_json(frozen.dumps()).option.offer.block_hours == 72


def test_a_block_is_billed_in_whole_blocks_even_for_a_short_run() -> None:
    spec = make_spec(gpus={"count": 8}, workload={"hours": 1}, pricing={"reservations": True})
    (option,) = plan(spec, [block(block_hours=24)]).options
    assert option.cost.compute == Decimal("755.14")  # 31.464 x 24 h = 755.136: the whole day is paid


def test_an_adapter_without_the_capability_keeps_the_block_quote_only() -> None:
    spec = make_spec(workload={"hours": 48}, pricing={"reservations": True})
    result = plan(spec, [block(), instance()], dict.fromkeys(PROVIDER_NAMES, WITHOUT))
    assert [o.purchase for o in result.options] == [Purchase.INSTANCE]
    assert len(result.quotes) == 1


def test_a_block_of_unknown_length_stays_quote_only() -> None:
    spec = make_spec(workload={"hours": 48}, pricing={"reservations": True})
    result = plan(spec, [block(block_hours=0, block_start=None), instance()])
    assert [o.purchase for o in result.options] == [Purchase.INSTANCE] and len(result.quotes) == 1


def test_a_block_shorter_than_the_run_and_the_boot_is_rejected_with_a_reason() -> None:
    spec = make_spec(workload={"hours": 72}, pricing={"reservations": True})
    offers = [block()]
    catalog = make_catalog(offers, aws=make_info(boot_minutes=10))
    with pytest.raises(NoFeasibleOfferError) as caught:
        resolve_plan(spec, catalog, dict.fromkeys(PROVIDER_NAMES, ALL), explain=True)
    (rejection,) = [r for r in caught.value.rejected if r.stage == Stage.BLOCK_HOURS]
    assert rejection.field == "workload.hours"
    assert "72 h aws p5.48xlarge block (paid upfront in full) ends before the 72 h run" in rejection.reason
    # the same block without boot time covers the 72 h run exactly
    (option,) = resolve_plan(spec, make_catalog(offers), dict.fromkeys(PROVIDER_NAMES, ALL)).options
    assert option.cost.compute == Decimal("4530.82")


def test_a_quote_only_option_still_cannot_be_planned_without_the_switch() -> None:
    spec = make_spec(workload={"hours": 48}, pricing={"reservations": True})
    result = plan(spec, [block()])
    off = result.model_copy(update={"spec": make_spec(workload={"hours": 48})})
    with pytest.raises(PlanError, match="quote-only"):
        off.to_plan(1)


def test_the_switch_is_a_strict_boolean_in_the_spec() -> None:
    from provisioner.errors import SpecError
    from provisioner.loader import parse_spec

    assert parse_spec("name: bb\ngpus: {count: 8}\npricing: {reservations: true}\n").pricing.reservations
    with pytest.raises(SpecError, match="reservations"):
        parse_spec("name: bb\ngpus: {count: 8}\npricing: {reservations: maybe}\n")


def test_the_direct_engine_asks_the_adapter_for_the_planned_block(tmp_path: Any) -> None:
    from provisioner.lifecycle.realize import node_specs
    from provisioner.secrets import load_or_create_secrets

    spec = make_spec(workload={"hours": 48}, pricing={"reservations": True})
    frozen = plan(spec, [block(), instance()]).to_plan(1)
    secrets, _ = load_or_create_secrets(tmp_path / "secrets.json")
    from provisioner.render.cloudinit import HOSTKEY_TOKEN_SLOT

    # Each boot file holds the host key token slot, as rendered ones do (node_specs fills it per node).
    cloud, script = f"#cloud-config\n# {HOSTKEY_TOKEN_SLOT}\n", f"#!/bin/sh\n# {HOSTKEY_TOKEN_SLOT}\n"
    files = {
        "cloud-init/head.yaml": cloud,
        "cloud-init/worker.yaml": cloud,
        "bootstrap/head.sh": script,
        "bootstrap/worker.sh": script,
    }
    specs = node_specs(frozen, secrets, files, None)
    assert [(s.capacity_block_hours, s.capacity_block_usd_per_hour, s.zone) for s in specs] == [
        (72, Decimal("31.464"), "us-east-1a")
    ] * 2
    other = plan(make_spec(workload={"hours": 48}), [block(), instance()]).to_plan(1)
    assert {s.capacity_block_hours for s in node_specs(other, secrets, files, None)} == {None}
