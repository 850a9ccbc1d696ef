"""Metering: each billing rule of the catalog applied to provider-reported node times, exact cents.

Oracles are hand-worked amounts (docs/costs.md has the same examples); prices are ones binary
floating point gets wrong (0.1 + 0.2 style: $2.49, $0.29, $1.1 per hour).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from provisioner.metering import (
    BillingRule,
    NodeUsage,
    budget_deadline,
    budget_level,
    compare,
    meter,
    run_seconds,
    span_end,
)
from tests.test_render_slurm import make_plan

T0 = dt.datetime(2026, 11, 26, 1, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def usage(name: str, start_s: float, end_s: float | None, node_id: str | None = None, **kw: object) -> NodeUsage:
    return NodeUsage(node_id or f"i-{name}", name, at(start_s), None if end_s is None else at(end_s), **kw)  # type: ignore[arg-type]


def test_run_seconds_rounds_up_microseconds_and_never_goes_negative() -> None:
    assert run_seconds(at(0), at(90)) == 90
    assert run_seconds(at(0), at(90.000001)) == 91
    assert run_seconds(at(5), at(0)) == 0


@pytest.mark.parametrize(
    ("overrides", "run_s", "cents", "billed_s"),
    [
        # RunPod / Vast.ai: per second. 2 nodes x $2.49/h x 3601 s = $4.981... -> 2 x 2.49 x 3601 / 3600
        ({"billing_increment_s": 1, "price_per_hour_usd": 2.49}, 3601, 498, 3601),
        # Lambda: per minute, no minimum: 61 s bills 120 s. 2 x $1.1 x 120 / 3600 = $0.0733.. -> 7 cents
        ({"billing_increment_s": 60, "price_per_hour_usd": 1.1}, 61, 7, 120),
        # Fluence GPU: per started hour, 3 h prepaid: 1 h 1 s bills 3 h. 2 x $0.29 x 3 = $1.74
        ({"billing_increment_s": 3600, "billing_minimum_s": 10800, "price_per_hour_usd": 0.29}, 3601, 174, 10800),
        # ... and 3 h 1 s bills 4 h: 2 x 0.29 x 4 = $2.32
        ({"billing_increment_s": 3600, "billing_minimum_s": 10800, "price_per_hour_usd": 0.29}, 10801, 232, 14400),
        # AWS Linux: per second with a 60 s minimum: 10 s bills 60 s. 2 x $98.32 x 60 / 3600 = $3.2773 -> 328
        ({"billing_increment_s": 1, "billing_minimum_s": 60, "price_per_hour_usd": 98.32}, 10, 328, 60),
        # GCP: the same rule; past the minimum per second: 2 x $88.49 x 61 / 3600 = $2.99882 -> 300
        ({"billing_increment_s": 1, "billing_minimum_s": 60, "price_per_hour_usd": 88.49}, 61, 300, 61),
        # Lambda 1-Click Clusters: reserved by the week: a day bills 604800 s. 2 x $27.92 x 168 = $9381.12
        (
            {"billing_increment_s": 604800, "billing_minimum_s": 604800, "price_per_hour_usd": 27.92},
            86400,
            938112,
            604800,
        ),
    ],
)
def test_each_billing_rule(overrides: dict[str, object], run_s: int, cents: int, billed_s: int) -> None:
    plan = make_plan({"storage": {"checkpoint_nvme_gib_per_node": 0}}, nodes=2, **overrides)
    metered = meter(plan, [usage("llm-pretrain-0", 0, run_s), usage("llm-pretrain-1", 0, run_s)], at(99999))
    assert metered.terms == {"compute": cents, "storage": 0, "egress": None, "interruption": 0}
    assert [b.billed_s for b in metered.nodes] == [billed_s, billed_s]


def test_capacity_block_is_its_upfront_fee_whatever_ran() -> None:
    # 2 nodes x $31.464/h x 24 h = $1510.272 -> $1510.27, even for 10 minutes of use
    plan = make_plan(
        {"storage": {"checkpoint_nvme_gib_per_node": 0}},
        nodes=2,
        price_per_hour_usd=31.464,
        block_hours=24,
        purchase="reservation",
    )
    metered = meter(
        plan,
        [
            usage("llm-pretrain-0", 0, 600),
            usage("llm-pretrain-1", 0, 600),
            usage("llm-pretrain-1", 600, 900, node_id="i-again"),
        ],
        at(900),
    )
    assert metered.terms["compute"] == 151027
    assert metered.terms["interruption"] == 0  # the replacement runs inside the block already paid for


def test_storage_is_billed_while_stopped_compute_is_not() -> None:
    # Vast.ai style: $0.1/GiB-month ~ 0.000136986 $/GiB-h on 1000 GiB, node existed 2 h, stopped 1 h of it.
    plan = make_plan(
        {"storage": {"checkpoint_nvme_gib_per_node": 1000}},
        nodes=1,
        billing_increment_s=1,
        price_per_hour_usd=0.3,
        disk_usd_per_gib_hour=0.000136986,
    )
    metered = meter(plan, [usage("llm-pretrain-0", 0, 7200, stopped_s=3600)], at(7200))
    assert metered.terms["compute"] == 30  # 1 h x $0.3
    assert metered.terms["storage"] == 27  # 1000 x 0.000136986 x 2 = $0.273972 -> 27 cents
    assert metered.nodes[0].run_s == 3600


def test_a_running_node_is_counted_up_to_now_and_replacements_are_named() -> None:
    plan = make_plan(
        {"storage": {"checkpoint_nvme_gib_per_node": 0}}, nodes=2, billing_increment_s=1, price_per_hour_usd=0.7
    )
    usages = [
        usage("llm-pretrain-0", 0, None),
        usage("llm-pretrain-1", 0, 1800),
        usage("llm-pretrain-1", 1800, None, node_id="i-replacement"),
    ]
    metered = meter(plan, usages, at(3600))
    # compute: 0.7 x (3600 + 1800) / 3600 = $1.05; the replacement's 1800 s: $0.35
    assert (metered.terms["compute"], metered.terms["interruption"]) == (105, 35)
    assert [b.term for b in metered.nodes] == ["compute", "compute", "interruption"]


def test_compare_names_each_term_and_what_is_not_measured() -> None:
    plan = make_plan(
        {"storage": {"checkpoint_nvme_gib_per_node": 0}}, nodes=1, billing_increment_s=1, price_per_hour_usd=0.7
    )
    comparison = compare(plan, meter(plan, [usage("llm-pretrain-0", 0, 3600)], at(3600)))
    assert [(line.term, line.planned_cents, line.actual_cents, line.difference_cents) for line in comparison.lines] == [
        ("compute", 100, 70, -30),
        ("storage", 0, 0, 0),
        ("egress", 0, None, None),
        ("interruption", 0, 0, 0),
    ]
    text = "\n".join(comparison.render())
    assert "egress" in text and "n/m" in text and "-$0.30" in text
    assert comparison.as_json()["difference_usd"] == "-0.30"


def test_budget_levels_are_exact() -> None:
    # $0.30 cap: 15 cents is exactly 50 %, 23 cents is 76.7 %, 24 is exactly 80 %, 30 is 100 %
    assert [budget_level(c, Decimal("0.3")) for c in (14, 15, 23, 24, 29, 30, 31)] == [0, 50, 50, 80, 80, 100, 100]


def test_budget_deadline_follows_the_billing_rule() -> None:
    per_second = make_plan(nodes=2, billing_increment_s=1, price_per_hour_usd=1.1)
    # 2 x $1.1/h = $2.2/h: $0.3 lasts 0.3 / 2.2 h = 490.9 s -> 490 whole seconds fit, 491 do not
    assert budget_deadline(per_second, T0, Decimal("0.3")) == at(490)
    hourly = make_plan(nodes=1, billing_increment_s=3600, billing_minimum_s=10800, price_per_hour_usd=0.29)
    # 3 h prepaid ($0.87) fits $1.00; the 4th started hour ($1.16) does not: stop at 3 h
    assert budget_deadline(hourly, T0, Decimal("1.00")) == at(10800)
    assert budget_deadline(hourly, T0, Decimal("0.86")) is None  # not even the minimum fits


def test_span_end_is_the_expiry_else_the_planned_hours() -> None:
    plan = make_plan({"workload": {"hours": 0.1}, "lifetime": {}}, nodes=1)
    assert span_end(plan, T0, None) == at(360)
    assert span_end(plan, T0, at(7)) == at(7)


def test_rule_describes_itself() -> None:
    assert (
        BillingRule(price_micro=1, increment_s=3600, minimum_s=10800).describe() == "per started hour, at least 10800 s"
    )
    assert BillingRule(price_micro=1, block_hours=24).describe() == "Capacity Block: 24 h per node paid upfront"


def test_a_half_cent_is_rounded_from_the_exact_amount() -> None:
    # $0.35/h for 1,800 s is $0.175: 17.5 cents exactly, half to even -> 18. In binary float
    # 0.35 * 1800 / 3600 is 0.17499999999999998..., which rounds to 17.
    plan = make_plan({"storage": {"checkpoint_nvme_gib_per_node": 0}}, nodes=1, price_per_hour_usd=0.35)
    metered = meter(plan, [usage("llm-pretrain-0", 0, 1800)], at(99999))
    assert metered.terms == {"compute": 18, "storage": 0, "egress": None, "interruption": 0}
    assert metered.nodes[0].usd * 1000 == 175  # the node's amount is exact, not only its rounding


def test_budget_levels_are_exact_where_float_is_not() -> None:
    # $1.10 cap: 55, 88 and 110 cents are exactly 50, 80 and 100 % (1.1 * 50 is 55.00000000000001 in float);
    # $2.49 and $0.07 at 100 %, $0.14 at 50 %.
    assert [budget_level(c, Decimal("1.10")) for c in (54, 55, 87, 88, 109, 110)] == [0, 50, 50, 80, 80, 100]
    assert [budget_level(c, Decimal("2.49")) for c in (248, 249)] == [80, 100]
    assert [budget_level(c, Decimal("0.07")) for c in (6, 7)] == [80, 100]
    assert [budget_level(c, Decimal("0.14")) for c in (6, 7)] == [0, 50]


@pytest.mark.parametrize(
    ("run_s", "increment_s", "minimum_s", "billed_s"),
    [
        (0, 1, 0, 0),
        (1, 60, 0, 60),  # up to the increment
        (60, 60, 0, 60),
        (61, 60, 0, 120),
        (61, 60, 600, 600),  # at least the minimum
        (600, 60, 600, 600),
        (601, 60, 600, 660),
        (3601, 3600, 0, 7200),  # per started hour
        (5, 1, 60, 60),
    ],
)
def test_billed_span_on_ints_and_on_int64_columns_alike(
    run_s: int, increment_s: int, minimum_s: int, billed_s: int
) -> None:
    """One rule for the plan's columns (cost_terms) and for a node's metered run (metering): written
    without a numpy call so that metering needs no numpy, it must still work elementwise."""
    import numpy as np

    from provisioner.costs import billed_span

    single = billed_span(run_s, increment_s, minimum_s)
    assert type(single) is int and single == billed_s
    column = billed_span(
        np.array([run_s, run_s], dtype=np.int64),
        np.array([increment_s, 1], dtype=np.int64),
        np.array([minimum_s, 0], dtype=np.int64),
    )
    assert column.dtype == np.int64 and column.tolist() == [billed_s, run_s]
