"""Exact money: units, the one rounding rule, and int64 headroom at every bound at once."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.capabilities import Capability
from provisioner.catalog_model import Catalog
from provisioner.cost_terms import _cents_of, _per_key
from provisioner.money import (
    floor_units,
    half_even,
    round_cents,
    spec_decimal,
    split_price,
    to_micro,
    to_nano,
    usd_of_cents,
    usd_of_micro,
    usd_of_pico,
)
from provisioner.offer import MAX_PRICE_PER_HOUR_USD, Offer, ProviderInfo
from provisioner.optimizer import resolve_plan
from provisioner.spec import MAX_COUNT, MAX_HOURS, ClusterSpec


def test_units_and_rounding_rule() -> None:
    assert (to_micro(Decimal("23.92")), to_micro(0.31), to_nano(Decimal("0.000136986"))) == (
        23_920_000,
        310_000,
        136_986,
    )
    assert to_micro(Decimal("0.0000005")) == 0 and to_micro(Decimal("0.0000015")) == 2  # half to even
    assert round_cents(Fraction(1, 200)) == 0 and round_cents(Fraction(3, 200)) == 2  # $0.005 -> 0, $0.015 -> 2
    assert usd_of_cents(1230) == Decimal("12.30") and str(usd_of_micro(47_840_000)) == "47.84"
    assert str(usd_of_micro(253_184_000)) == "253.184"
    assert spec_decimal(159.6) == Decimal("159.6") and spec_decimal(0.1) == Decimal("0.1")
    assert floor_units(Decimal("159.6"), 1_000_000) == 159_600_000
    assert floor_units(Decimal("0.0099"), 100) == 0


def test_values_binary_floating_point_gets_wrong() -> None:
    # In binary64: int(4.35 * 100) == 434, 0.7 * 3 < 2.1, 1.1 + 2.2 > 3.3, 1.015 * 100 < 101.5.
    assert int(4.35 * 100) == 434 and floor_units(spec_decimal(4.35), 100) == 435
    assert floor_units(spec_decimal(0.70) * 3, 100) == 210
    assert floor_units(spec_decimal(1.1) + spec_decimal(2.2), 100) == 330
    assert round(1.015 * 100) == 101 and round_cents(Decimal("1.015")) == 102  # 101.5 cents, half to even
    assert split_price(Decimal("0.38333333")) == (383_333, 330_000)  # an ask's 8 decimals kept, not rounded
    assert split_price(Decimal("1e-12")) == (0, 1) and usd_of_pico(383_333, 330_000) == Decimal("0.38333333")
    assert str(usd_of_pico(47_840_000)) == "47.84" and half_even(5, 2) == 2 and half_even(7, 2) == 4
    with pytest.raises(ValueError, match="more than 12 decimal places"):
        split_price(Decimal("0.0000000000001"))


@given(cents=st.integers(0, 10**11))
def test_a_budget_in_cents_floors_to_itself(cents: int) -> None:
    budget = float(Decimal(cents) / 100)  # what YAML hands the loader
    assert floor_units(spec_decimal(budget), 100) == cents


@given(x=st.integers(0, 10**15), amount=st.integers(0, 4 * 10**8))
def test_split_cents_is_exact(x: int, amount: int) -> None:
    got = _cents_of(np.array([x], dtype=np.int64), np.array([amount], dtype=np.int64), 3600)
    assert int(got[0]) == round(Fraction(x * amount, 3600 * 10_000))


def test_extreme_values_do_not_overflow() -> None:
    """$10,000 per node-hour, 100,000 one-GPU nodes, ten years, hourly billing with a year's minimum."""
    offer = Offer(
        provider="lambda",
        instance_type="huge",
        region="r",
        gpu_model="H100",
        gpus=1,
        gpu_memory_gib=80,
        vcpus=8,
        memory_gib=64,
        price_per_hour_usd=MAX_PRICE_PER_HOUR_USD,
        billing_increment_s=31_622_400,
        billing_minimum_s=31_622_400,
        interruptions_per_node_hour=1000,
        interruption_basis="t",
        max_nodes=MAX_COUNT,
        local_nvme_gib=10_000_000,
        disk_usd_per_gib_hour=1000,
        egress_usd_per_gb=1000,
        ingress_usd_per_gb=1000,
    )
    info = ProviderInfo(source="t", boot_minutes=10_000)
    catalog = Catalog(as_of=dt.date(2026, 1, 1), providers={"lambda": info}, offers=[offer])
    spec = ClusterSpec.model_validate(
        {
            "name": "huge",
            "gpus": {"count": MAX_COUNT},
            "storage": {"checkpoint_nvme_gib_per_node": 1e7},
            "workload": {
                "hours": MAX_HOURS,
                "results_out_gb": 1e9,
                "dataset": {"size_gb": 1e9, "location": "internet"},
                "restart_overhead_minutes": 1e9,
            },
        }
    )
    option = resolve_plan(spec, catalog, {"lambda": frozenset(Capability)}).options[0]
    hourly = Fraction(MAX_COUNT) * 10_000
    billed_s = -(-int(MAX_HOURS * 3600) // 31_622_400) * 31_622_400
    assert option.hourly_usd == Decimal(10**9)
    assert option.cost.compute == usd_of_cents(round(hourly * billed_s / 3600 * 100) + round(hourly * 600_000 / 36))
    assert option.cost.egress == Decimal(2 * 10**12)  # 10^9 GB in and 10^9 GB out at $1000/GB
    # 10^5 nodes x 10^7 GiB x 87,600 h x $1000/GiB-h, and the interruption estimate, are over the $10^15 cap
    assert option.cost.storage == option.cost.interruption == Decimal(10**15)
    c = option.cost
    assert c.total == c.compute + c.storage + c.egress + c.interruption > 0


def test_prices_above_the_bound_or_not_above_zero_are_refused() -> None:
    base = {
        "provider": "lambda",
        "instance_type": "t",
        "region": "r",
        "gpu_model": "H100",
        "gpus": 1,
        "gpu_memory_gib": 80,
        "vcpus": 8,
        "memory_gib": 64,
        "interruptions_per_node_hour": 0,
        "interruption_basis": "t",
    }
    for price in (0, -1, "10000.01", float("nan"), float("inf"), 10**400):
        with pytest.raises(ValueError):
            Offer.model_validate({**base, "price_per_hour_usd": price})


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(-(2**62), 2**62), st.integers(0, 10**12)), min_size=1, max_size=40
    ),
    st.integers(1, 12),
)
def test_per_key_evaluates_each_distinct_row_once_and_maps_it_back(
    rows: list[tuple[int, int, int]], repeat: int
) -> None:
    # up to 36 columns of up to 40 distinct values: past 2**62 row numbers, so the renumbering runs
    columns = [np.array(column, dtype=np.int64) for column in zip(*rows, strict=True)] * repeat
    calls: list[tuple[int, ...]] = []

    def value(*key: int) -> int:
        calls.append(key)
        return sum(key) % 1_000_003

    out = _per_key(columns, value)
    keys = [tuple(int(column[i]) for column in columns) for i in range(len(rows))]
    assert out.tolist() == [sum(key) % 1_000_003 for key in keys]
    assert sorted(calls) == sorted(set(keys))


def test_per_key_tells_apart_rows_past_what_an_int64_can_number() -> None:
    # 2**70 possible rows of 70 two-valued columns: numbered naively (mixed radix in an int64), the
    # first column's bit would overflow away and the first two rows would share one value
    columns = [np.array([1, 0, 0], dtype=np.int64)] + [np.array([0, 0, 1], dtype=np.int64)] * 69
    assert _per_key(columns, lambda *key: key[0] + 2 * key[1]).tolist() == [1, 0, 2]
