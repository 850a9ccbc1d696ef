"""The optimizer: each cost term against hand-computed numbers, every rejection, ranking rules.

Catalogs are built by hand here (never the bundled one), with boot time and interruption
rates zeroed unless a test is about them, so each expected figure is easy to check.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.capabilities import Capability
from provisioner.catalog_model import Catalog
from provisioner.costs import Stage, tiered_usd
from provisioner.errors import CatalogError, NoFeasibleOfferError
from provisioner.offer import EgressTier, Offer, ProviderInfo
from provisioner.optimizer import resolve_plan
from provisioner.plan import PlanResult, decided_by
from provisioner.spec import PROVIDER_NAMES, ClusterSpec

D = Decimal
ALL = frozenset(Capability)
"""Every capability: an adapter that can create anything (tests of the other stages)."""

AWS_TIERS = [EgressTier(up_to_gb=10_240, usd_per_gb=0.09), EgressTier(up_to_gb=None, usd_per_gb=0.085)]


def make_offer(**fields: Any) -> Offer:
    base: dict[str, Any] = {
        "provider": "lambda",
        "instance_type": "gpu_8x",
        "region": "us-east-1",
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "vcpus": 64,
        "memory_gib": 512,
        "local_nvme_gib": 1000,
        "fabric": "infiniband",
        "fabric_gbps": 400,
        "price_per_hour_usd": 10.0,
        "interruptions_per_node_hour": 0.0,
        "interruption_basis": "test",
        "max_nodes": 8,
    }
    base.update(fields)
    return Offer.model_validate(base)


def make_info(**fields: Any) -> ProviderInfo:
    return ProviderInfo.model_validate({"source": "test", "boot_minutes": 0, **fields})


def make_catalog(offers: list[Offer], **infos: ProviderInfo) -> Catalog:
    providers = {name: make_info() for name in PROVIDER_NAMES}
    providers.update(infos)
    return Catalog(as_of=dt.date(2026, 11, 22), origin="test", providers=providers, offers=offers)


def make_spec(**sections: Any) -> ClusterSpec:
    data: dict[str, Any] = {"name": "test", "gpus": {"count": 16}, "workload": {"hours": 10}}
    for key, value in sections.items():
        data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
    return ClusterSpec.model_validate(data)


def plan(
    spec: ClusterSpec, offers: list[Offer], caps: dict[str, frozenset[Capability]] | None = None, **kwargs: Any
) -> PlanResult:
    return resolve_plan(spec, make_catalog(offers), caps or dict.fromkeys(PROVIDER_NAMES, ALL), **kwargs)


def best(spec: ClusterSpec, offers: list[Offer], **infos: ProviderInfo):
    caps = dict.fromkeys(PROVIDER_NAMES, ALL)
    return resolve_plan(spec, make_catalog(offers, **infos), caps).options[0]


# --- cost terms -----------------------------------------------------------------------------


def test_compute_is_nodes_times_hourly_times_hours() -> None:
    option = best(make_spec(), [make_offer()])
    assert (option.nodes, option.hourly_usd, option.usd_per_gpu_hour) == (2, D(20), D("1.25"))
    assert option.cost.compute == 200.0  # 2 nodes x $10/h x 10 h
    assert option.cost.total == 200.0


def test_boot_time_is_folded_into_compute() -> None:
    assert best(make_spec(), [make_offer()]).cost.boot_usd == 0
    option = best(make_spec(), [make_offer()], **{"lambda": make_info(boot_minutes=6)})
    assert option.cost.boot_usd == 2.0  # 2 nodes x $10/h x 0.1 h
    assert option.cost.compute == 202.0
    assert option.cost.total == 202.0


@pytest.mark.parametrize(
    ("hours", "increment_s", "minimum_s", "billed_hours"),
    [
        (1.25, 1, 0, 1.25),  # per-second billing
        (1.25, 60, 0, 1.25),  # per-minute: 75 minutes exactly
        (1.01, 60, 0, 61 / 60),  # 60.6 minutes -> 61
        (1.25, 3600, 0, 2.0),  # hourly rounding
        (1.0, 3600, 10_800, 3.0),  # Fluence: hourly, 3 h reserved on deploy
        (4.5, 3600, 10_800, 5.0),  # past the minimum, still whole hours
    ],
)
def test_billing_granularity(hours: float, increment_s: int, minimum_s: int, billed_hours: float) -> None:
    offer = make_offer(provider="fluence", gpus=8, billing_increment_s=increment_s, billing_minimum_s=minimum_s)
    option = best(make_spec(gpus={"count": 8}, workload={"hours": hours}), [offer])
    assert option.cost.compute == round(D(10) * D(repr(billed_hours)), 2)


def test_storage_managed_filesystem_and_checkpoint_nvme() -> None:
    spec = make_spec(
        workload={"hours": 73},
        storage={"checkpoint_nvme_gib_per_node": 500, "shared": {"kind": "managed", "size_gib": 1000}},
    )
    offer = make_offer(disk_usd_per_gib_hour=0.0001)
    option = best(spec, [offer], **{"lambda": make_info(shared_storage_usd_per_gib_month=0.3)})
    # managed: 0.3 $/GiB-month x 1000 GiB x 73/730 months = 30; NVMe: 2 x 500 GiB x 0.0001 x 73 = 7.3
    assert option.cost.storage == D("37.3")


def test_nfs_shared_storage_is_free() -> None:
    spec = make_spec(storage={"shared": {"kind": "nfs", "size_gib": 1000}})
    assert best(spec, [make_offer()]).cost.storage == 0


@pytest.mark.parametrize(
    ("location", "provider", "region", "expected"),
    [
        ("aws:us-east-1", "aws", "us-east-1", 0.0),  # same provider and region
        ("aws:us-east-1", "aws", "us-west-2", 20.0),  # inter-region 0.02 x 1000
        ("aws:us-east-1", "lambda", "us-east-1", 91.0),  # (1000 - 100 free) x 0.09 + ingress 0.01 x 1000
        ("s3://bucket/data", "lambda", "us-east-1", 91.0),  # an s3 bucket is aws
        ("internet", "lambda", "us-east-1", 10.0),  # only ingress
        ("local", "aws", "us-east-1", 10.0),
    ],
)
def test_dataset_egress(location: str, provider: str, region: str, expected: float) -> None:
    dataset = {"size_gb": 1000, "location": location}
    if location.startswith("s3://"):
        dataset["region"] = "us-east-1"
    spec = make_spec(workload={"hours": 10, "dataset": dataset})
    aws = make_info(internet_egress_tiers=AWS_TIERS, free_egress_gb=100, inter_region_usd_per_gb=0.02)
    offer = make_offer(provider=provider, region=region, ingress_usd_per_gb=0.01)
    assert best(spec, [offer], aws=aws).cost.egress == D(repr(expected))


def test_tiered_egress_crosses_tiers_after_the_free_allowance() -> None:
    assert tiered_usd(AWS_TIERS, 20_000, free_gb=100) == (10_240 - 100) * Fraction("0.09") + (
        20_000 - 10_240
    ) * Fraction("0.085")
    assert tiered_usd(AWS_TIERS, 50, free_gb=100) == 0
    assert tiered_usd([], 1000) == 0
    # beyond a last bounded tier, the last rate applies
    assert tiered_usd([EgressTier(up_to_gb=10, usd_per_gb=1.0)], 15) == 15.0


def test_results_out_use_provider_tiers_else_the_offer_flat_rate() -> None:
    spec = make_spec(workload={"hours": 10, "results_out_gb": 200})
    tiers = make_info(internet_egress_tiers=[EgressTier(up_to_gb=None, usd_per_gb=0.1)], free_egress_gb=50)
    # a provider with a tiered table (AWS, GCP) is priced by it, free allowance included,
    # even when its offers also quote a flat first-tier rate: (200 - 50) x 0.1
    assert best(spec, [make_offer(egress_usd_per_gb=0.09)], **{"lambda": tiers}).cost.egress == 15.0
    assert best(spec, [make_offer()], **{"lambda": tiers}).cost.egress == 15.0
    # no table (a marketplace host): the offer's own rate
    assert best(spec, [make_offer(egress_usd_per_gb=0.05)]).cost.egress == 10.0
    assert best(spec, [make_offer()]).cost.egress == 0  # neither


def test_egress_changes_the_winner() -> None:
    aws_offer = make_offer(provider="aws", instance_type="p5", price_per_hour_usd=12.0)
    lambda_offer = make_offer(provider="lambda", price_per_hour_usd=10.0)
    aws = make_info(internet_egress_tiers=AWS_TIERS, free_egress_gb=100)
    no_data = make_spec()
    assert best(no_data, [aws_offer, lambda_offer], aws=aws).provider == "lambda"
    with_data = make_spec(workload={"hours": 10, "dataset": {"size_gb": 2000, "location": "aws:us-east-1"}})
    winner = best(with_data, [aws_offer, lambda_offer], aws=aws)
    assert (winner.provider, winner.cost.total) == ("aws", D(240))  # lambda: 200 + 1900 x 0.09 = 371


def test_interruption_cost() -> None:
    offer = make_offer(interruptions_per_node_hour=0.01)
    spec = make_spec(workload={"hours": 10, "checkpoint_interval_minutes": 60, "restart_overhead_minutes": 10})
    option = best(spec, [offer])
    # 0.01/node-h x 2 nodes x 10 h = 0.2 interruptions, each losing (30 + 10) min of 2 x $10/h
    assert option.expected_interruptions == pytest.approx(0.2)
    assert option.cost.interruption == D("2.67")
    assert option.cost.total == D("202.67")


# --- spot and on-demand ---------------------------------------------------------------------


def spot_offer(**fields: Any) -> Offer:
    return make_offer(spot_price_per_hour_usd=4.0, spot_interruptions_per_node_hour=0.05, **fields)


def test_pricing_mode_picks_variants() -> None:
    on_demand = plan(make_spec(), [spot_offer()])
    assert [o.spot for o in on_demand.options] == [False]
    spot = plan(make_spec(pricing={"mode": "spot"}), [spot_offer()])
    assert [o.spot for o in spot.options] == [True]
    option = spot.options[0]
    assert option.cost.compute == 80.0  # 2 x $4 x 10 h
    assert option.cost.interruption == D("5.33")  # 0.05 x 2 x 10 x 40/60 x $8
    either = plan(make_spec(pricing={"mode": "either"}), [spot_offer()])
    assert [(o.rank, o.spot) for o in either.options] == [(1, True), (2, False)]


def test_expensive_interruptions_make_on_demand_win() -> None:
    spec = make_spec(pricing={"mode": "either"}, workload={"hours": 10, "restart_overhead_minutes": 600})
    offer = make_offer(spot_price_per_hour_usd=8.0, spot_interruptions_per_node_hour=0.5)
    assert [o.spot for o in plan(spec, [offer]).options] == [False, True]


def test_missing_spot_rate_uses_the_documented_fallback() -> None:
    offer = make_offer(spot_price_per_hour_usd=4.0)
    option = best(make_spec(pricing={"mode": "spot"}), [offer])
    assert option.expected_interruptions == pytest.approx(0.25 / 730 * 2 * 10, abs=1e-6)


# --- rejections -----------------------------------------------------------------------------

REJECTIONS = [
    ({"providers": {"allow": ["aws"]}}, {}, "providers.allow", Stage.PROVIDER),
    ({"providers": {"deny": ["lambda"]}}, {}, "providers.deny", Stage.PROVIDER),
    ({"providers": {"regions": ["eu-west-1"]}}, {}, "providers.regions", Stage.REGION),
    ({"gpus": {"count": 16, "model": ["h200"]}}, {}, "gpus.model", Stage.GPU_MODEL),
    ({"gpus": {"count": 16, "min_memory_gib": 96}}, {}, "gpus.min_memory_gib", Stage.GPU_MEMORY),
    ({}, {"available": False}, "gpus.model", Stage.AVAILABLE),
    ({"gpus": {"count": 12}}, {}, "gpus.count", Stage.NODE_SPLIT),
    ({"nodes": {"gpus_per_node": 4}}, {}, "nodes.gpus_per_node", Stage.NODE_SPLIT),
    ({"nodes": {"count": 4}}, {}, "nodes.count", Stage.NODE_SPLIT),
    ({}, {"max_nodes": 1}, "gpus.count", Stage.MAX_NODES),
    ({"interconnect": {"fabric": "efa"}}, {}, "interconnect.fabric", Stage.FABRIC),
    ({"interconnect": {"fabric": "roce"}}, {"fabric": "ethernet"}, "interconnect.fabric", Stage.FABRIC),
    ({"interconnect": {"min_gbps_per_node": 800}}, {}, "interconnect.min_gbps_per_node", Stage.FABRIC_GBPS),
    ({"storage": {"checkpoint_nvme_gib_per_node": 2000}}, {}, "storage.checkpoint_nvme_gib_per_node", Stage.NVME),
    ({"storage": {"shared": {"kind": "managed", "size_gib": 100}}}, {}, "storage.shared.kind", Stage.SHARED_STORAGE),
    ({"reliability": {"min_score": 0.995}}, {}, "reliability.min_score", Stage.RELIABILITY),
    ({"pricing": {"mode": "spot"}}, {}, "pricing.mode", Stage.PRICING_MODE),
    ({"pricing": {"max_hourly_usd": 19.99}}, {}, "pricing.max_hourly_usd", Stage.MAX_HOURLY),
    ({}, {"min_nodes": 4}, "gpus.count", Stage.MIN_NODES),
    ({"control_plane": "slurm"}, {"network": "none"}, "interconnect.fabric", Stage.PRIVATE_NETWORK),
    ({"pricing": {"max_total_usd": 199.99}}, {}, "pricing.max_total_usd", Stage.MAX_TOTAL),
]


@pytest.mark.parametrize(("spec_fields", "offer_fields", "field", "stage"), REJECTIONS)
def test_each_rejection_names_its_field(
    spec_fields: dict[str, Any], offer_fields: dict[str, Any], field: str, stage: Stage
) -> None:
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(make_spec(**spec_fields), [make_offer(**offer_fields)], explain=True)
    [rejection] = caught.value.rejected
    assert (rejection.field, rejection.stage) == (field, stage)
    assert (rejection.provider, rejection.instance_type, rejection.region) == ("lambda", "gpu_8x", "us-east-1")
    assert rejection.reason and "\n" not in rejection.reason
    assert rejection.reason in str(caught.value)


def test_fabric_rules() -> None:
    def fits(wanted: str, offered: str) -> bool:
        spec = make_spec(interconnect={"fabric": wanted}, gpus={"count": 8})
        try:
            plan(spec, [make_offer(fabric=offered)])
        except NoFeasibleOfferError:
            return False
        return True

    assert [fits("ethernet", f) for f in ("ethernet", "roce", "infiniband", "efa")] == [True] * 4
    assert [fits("any", f) for f in ("ethernet", "efa")] == [True, True]
    assert [fits("roce", f) for f in ("ethernet", "roce", "infiniband", "efa")] == [False, True, True, False]
    assert [fits("infiniband", f) for f in ("roce", "infiniband", "efa")] == [False, True, False]
    assert [fits("efa", f) for f in ("infiniband", "efa")] == [False, True]


def test_fabric_bandwidth_only_matters_across_nodes() -> None:
    spec = make_spec(gpus={"count": 8}, interconnect={"min_gbps_per_node": 3200})
    assert best(spec, [make_offer(fabric_gbps=0)]).nodes == 1


def test_budget_rejection_is_the_deepest_stage() -> None:
    offers = [
        make_offer(instance_type="cheap-but-ethernet", fabric="ethernet", price_per_hour_usd=1.0),
        make_offer(instance_type="ib-but-pricey", price_per_hour_usd=50.0),
        make_offer(instance_type="ib-pricier", price_per_hour_usd=60.0),
    ]
    spec = make_spec(interconnect={"fabric": "infiniband"}, pricing={"max_total_usd": 500})
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(spec, offers, explain=True)
    rejected = caught.value.rejected
    assert [r.instance_type for r in rejected] == ["ib-but-pricey", "ib-pricier", "cheap-but-ethernet"]
    deepest = max(rejected, key=lambda r: r.stage)
    assert (deepest.field, deepest.instance_type) == ("pricing.max_total_usd", "ib-but-pricey")
    assert "$1,000.00" in deepest.reason


def test_rejected_lists_every_rejected_variant() -> None:
    offers = [spot_offer(), make_offer(instance_type="ondemand-only"), make_offer(instance_type="x", gpus=3)]
    result = plan(make_spec(pricing={"mode": "either"}), offers, explain=True)
    assert len(result.options) == 3
    assert sorted((r.instance_type, r.field) for r in result.rejected) == [
        ("ondemand-only", "pricing.mode"),
        ("x", "gpus.count"),
        ("x", "gpus.count"),
    ]


def test_empty_catalog_and_missing_pricing_facts() -> None:
    with pytest.raises(NoFeasibleOfferError, match="no offers"):
        resolve_plan(make_spec(), make_catalog([]))
    catalog = Catalog(as_of=dt.date(2026, 11, 22), providers={"lambda": make_info()}, offers=[make_offer()])
    spec = make_spec(workload={"hours": 1, "dataset": {"size_gb": 10, "location": "gcp:us-central1"}})
    with pytest.raises(CatalogError, match="no pricing facts for gcp") as caught:
        resolve_plan(spec, catalog)
    assert caught.value.exit_code == 2  # a catalog lacking facts, not "no offer fits" (3)
    with pytest.raises(CatalogError, match="offers from lambda but no pricing facts"):
        resolve_plan(make_spec(), Catalog(as_of=dt.date(2026, 11, 22), providers={}, offers=[make_offer()]))


# --- ranking --------------------------------------------------------------------------------


def test_ties_break_by_hourly_then_offer_key_regardless_of_catalog_order() -> None:
    offers = [
        make_offer(region="us-west-1"),
        make_offer(region="us-east-1"),
        make_offer(provider="runpod", region="aa"),
        # the same $200 total at half the hourly price, through a 20 h minimum
        make_offer(provider="fluence", region="zz", price_per_hour_usd=5.0, billing_minimum_s=72_000),
    ]
    spec = make_spec()
    expected = [("fluence", "zz"), ("lambda", "us-east-1"), ("lambda", "us-west-1"), ("runpod", "aa")]
    for seed in range(5):
        shuffled = offers[:]
        random.Random(seed).shuffle(shuffled)
        result = plan(spec, shuffled)
        assert [(o.provider, o.region) for o in result.options] == expected
        assert [o.rank for o in result.options] == [1, 2, 3, 4]
        assert {o.cost.total for o in result.options} == {D(200)}


# --- budgets are compared exactly -----------------------------------------------------------


def test_a_budget_equal_to_the_hourly_price_is_accepted() -> None:
    offer = make_offer(price_per_hour_usd=D("19.95"))  # 8 nodes x $19.95 = $159.60/h exactly
    spec = make_spec(gpus={"count": 64}, pricing={"max_hourly_usd": 159.60})
    option = best(spec, [offer])
    assert option.hourly_usd == D("159.60") and option.nodes == 8
    with pytest.raises(NoFeasibleOfferError, match=r"\$159.60/h, over \$159.59/h"):
        plan(make_spec(gpus={"count": 64}, pricing={"max_hourly_usd": 159.59}), [offer])


def test_a_budget_equal_to_the_expected_total_is_accepted() -> None:
    offer = make_offer(price_per_hour_usd=D("0.1"), interruptions_per_node_hour=0.01)
    spec = make_spec(workload={"hours": 3})
    total = best(spec, [offer]).cost.total
    assert total == D("0.61")  # compute 2 x $0.1 x 3 h = 0.60; interruption 0.06 x 2/3 h x $0.2/h = 0.008 -> 0.01
    edge = make_spec(workload={"hours": 3}, pricing={"max_total_usd": float(total)})
    assert best(edge, [offer]).cost.total == total
    under = make_spec(workload={"hours": 3}, pricing={"max_total_usd": float(total - D("0.01"))})
    with pytest.raises(NoFeasibleOfferError, match=r"over \$"):
        plan(under, [offer])


def test_budgets_where_binary_floating_point_is_wrong() -> None:
    # One node at $4.35/h for 1 h: a $4.35 budget floors to 434 cents in float (4.35 * 100 =
    # 434.99999999999994), which would reject an option that costs exactly the budget.
    offer = make_offer(gpus=16, price_per_hour_usd=D("4.35"))
    assert best(make_spec(workload={"hours": 1}, pricing={"max_total_usd": 4.35}), [offer]).cost.total == D("4.35")
    # Three nodes at $0.70/h: $2.10/h exactly; in float 0.7 * 3 < 2.1.
    cheap = make_offer(gpus=1, price_per_hour_usd=D("0.70"))
    spec = make_spec(gpus={"count": 3}, workload={"hours": 1}, pricing={"max_hourly_usd": 2.10, "max_total_usd": 2.10})
    option = best(spec, [cheap])
    assert (option.hourly_usd, option.cost.total) == (D("2.10"), D("2.10"))
    with pytest.raises(NoFeasibleOfferError, match=r"3 nodes cost \$2.10/h, over \$2.09/h"):
        plan(make_spec(gpus={"count": 3}, workload={"hours": 1}, pricing={"max_hourly_usd": 2.09}), [cheap])


def test_a_tiny_budget_is_written_out_not_in_exponent_form() -> None:
    cheap = make_offer(gpus=1, price_per_hour_usd=D("0.70"))
    with pytest.raises(NoFeasibleOfferError, match=r"1 node costs \$0.70/h, over \$0.000000001/h"):
        plan(make_spec(gpus={"count": 1}, pricing={"max_hourly_usd": 0.000000001}), [cheap])


def test_a_price_keeps_every_decimal_it_was_written_with() -> None:
    # A marketplace ask with 8 decimals: 2 nodes cost $0.76666666/h, not $0.766666 (micro-dollars).
    ask = make_offer(provider="vastai", price_per_hour_usd=D("0.38333333"), network="none", bootstrap="script")
    spec = make_spec(workload={"hours": 3})
    option = best(spec, [ask])
    assert option.hourly_usd == D("0.76666666") and option.offer.price_per_hour_usd == D("0.38333333")
    assert option.cost.compute == D("2.30")  # 0.76666666 x 3 = 2.29999998 -> $2.30
    # A budget a fraction of a micro-dollar under the exact cluster price refuses it; the exact price is accepted.
    under = make_spec(workload={"hours": 3}, pricing={"max_hourly_usd": 0.766666659})
    with pytest.raises(NoFeasibleOfferError, match=r"2 nodes cost \$0.76666666/h, over \$0.766666659/h"):
        plan(under, [ask])
    assert best(make_spec(workload={"hours": 3}, pricing={"max_hourly_usd": 0.76666666}), [ask]).hourly_usd == D(
        "0.76666666"
    )
    # Half a cent decided by the 7th and 8th decimals: $0.00500001/h for 1 h rounds up to a cent.
    tiny = make_offer(gpus=16, price_per_hour_usd=D("0.00500001"))
    assert best(make_spec(workload={"hours": 1}), [tiny]).cost.compute == D("0.01")
    tie = make_offer(gpus=16, price_per_hour_usd=D("0.005"))  # exactly half a cent: half to even, 0
    assert best(make_spec(workload={"hours": 1}), [tie]).cost.compute == D("0.00")


def test_boot_time_is_exact_not_whole_seconds() -> None:
    # 2.5555 min = 153.33 s of boot at $100/h: $4.259166... -> $4.26 (153 whole seconds would be $4.25).
    offer = make_offer(gpus=16, price_per_hour_usd=D("100"))
    option = best(make_spec(workload={"hours": 1}), [offer], **{"lambda": make_info(boot_minutes=2.5555)})
    assert option.cost.boot_usd == D("4.26") and option.cost.compute == D("104.26")


# --- buyable: adapters, networks, cluster products, quotes ----------------------------------


def test_a_provider_without_an_adapter_is_never_ranked() -> None:
    offers = [make_offer(provider="aws", price_per_hour_usd=1.0), make_offer(price_per_hour_usd=10.0)]
    caps = {"lambda": ALL}
    result = plan(make_spec(), offers, caps, explain=True)
    assert [o.provider for o in result.options] == ["lambda"]
    [group] = [g for g in result.rejection_groups if g.stage == Stage.ADAPTER]
    assert (group.field, group.reason, group.count) == ("providers.allow", "no aws adapter in this installation yet", 1)


@pytest.mark.parametrize(
    ("offer_fields", "spec_fields", "lacking", "words"),
    [
        ({"purchase": "cluster", "min_nodes": 2}, {}, Capability.CLUSTER_PRODUCT, "cluster products"),
        ({"spot_price_per_hour_usd": 4.0}, {"pricing": {"mode": "spot"}}, Capability.SPOT, "spot nodes"),
        ({"bootstrap": "script"}, {}, Capability.SCRIPT_BOOTSTRAP, "start script"),
        ({}, {"interconnect": {"fabric": "infiniband"}}, Capability.FABRIC_IB, "InfiniBand"),
        ({}, {}, Capability.MULTI_NODE, "multi-node"),
        ({"network": "private"}, {}, Capability.PRIVATE_NETWORK, "private network"),
    ],
)
def test_each_capability_an_option_needs_is_checked(
    offer_fields: dict[str, Any], spec_fields: dict[str, Any], lacking: Capability, words: str
) -> None:
    offer = make_offer(**offer_fields)
    assert plan(make_spec(**spec_fields), [offer], {"lambda": ALL}).options
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(make_spec(**spec_fields), [offer], {"lambda": ALL - {lacking}})
    [group] = caught.value.rejection_groups  # type: ignore[attr-defined]
    assert group.stage == Stage.ADAPTER and words in group.reason and "lambda adapter" in group.reason


def test_multi_node_with_a_control_plane_needs_a_private_network() -> None:
    public = make_offer(provider="vastai", network="none", bootstrap="script", fabric="ethernet")
    spec = make_spec(control_plane="slurm")
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(spec, [public])
    [group] = caught.value.rejection_groups  # type: ignore[attr-defined]
    assert group.stage == Stage.PRIVATE_NETWORK and "cannot reach each other privately" in group.reason
    assert plan(make_spec(), [public]).options  # no control plane: separate hosts are fine
    assert plan(make_spec(control_plane="slurm", gpus={"count": 8}), [public]).options  # one node


@pytest.mark.parametrize("fabric", ["ethernet", "roce", "infiniband", "efa"])
def test_a_fabric_needs_a_private_network_rdma_included(fabric: str) -> None:
    # The catalog row says the hosts have public addresses only: an RDMA fabric on it is not
    # a path the cluster's control traffic can use, with or without a control plane.
    public = make_offer(network="none", fabric=fabric, fabric_gbps=400)
    private = make_offer(
        network="private", fabric=fabric, fabric_gbps=400, price_per_hour_usd=D("99"), instance_type="gpu_8x_private"
    )
    for plane in ("none", "slurm"):
        spec = make_spec(control_plane=plane, interconnect={"fabric": fabric})
        with pytest.raises(NoFeasibleOfferError) as caught:
            plan(spec, [public])
        [group] = caught.value.rejection_groups  # type: ignore[attr-defined]
        assert group.stage == Stage.PRIVATE_NETWORK and group.field == "interconnect.fabric"
        [best] = plan(spec, [public, private]).options
        assert best.instance_type == "gpu_8x_private"  # the cheaper public-only offer is never ranked
    assert plan(make_spec(interconnect={"fabric": "any"}), [public]).options  # nothing asked: separate hosts


def test_quote_only_products_are_listed_never_ranked() -> None:
    reserved = make_offer(
        instance_type="1cc", purchase="reservation", price_per_hour_usd=1.0, how_to_obtain="ask sales"
    )
    with pytest.raises(NoFeasibleOfferError):
        plan(make_spec(), [reserved], {})
    result = plan(make_spec(), [reserved, make_offer()])
    assert [o.instance_type for o in result.options] == ["gpu_8x"]
    [quote] = result.quotes
    assert (quote.instance_type, quote.hourly_usd, quote.how_to_obtain, quote.nodes) == ("1cc", D(2), "ask sales", 2)
    assert result.to_plan().option.instance_type == "gpu_8x"


def test_min_nodes_rejects_a_cluster_smaller_than_the_product() -> None:
    with pytest.raises(NoFeasibleOfferError, match="sold as at least 4"):
        plan(make_spec(), [make_offer(min_nodes=4)], explain=True)


def test_rejections_are_grouped_and_bounded() -> None:
    offers = [make_offer(instance_type=f"t{i}", gpus=3) for i in range(500)] + [make_offer()]
    result = plan(make_spec(), offers)
    assert result.rejected == []  # only with explain
    [group] = result.rejection_groups
    assert (group.count, len(group.examples), group.field) == (500, 3, "gpus.count")
    assert plan(make_spec(), offers, explain=True).rejected[0].field == "gpus.count"
    assert len(plan(make_spec(), offers, explain=True).rejected) == 500


def test_keep_bounds_the_options_and_counts_every_feasible_one() -> None:
    offers = [make_offer(instance_type=f"t{i:03}", price_per_hour_usd=1 + i) for i in range(120)]
    result = plan(make_spec(), offers, keep=5)
    assert result.feasible_count == 120
    assert [o.instance_type for o in result.options] == ["t000", "t001", "t002", "t003", "t004"]


def test_decided_by_names_the_term_that_made_the_difference() -> None:
    cheap_compute = make_offer(instance_type="a", price_per_hour_usd=10.0, egress_usd_per_gb=0.5)
    cheap_egress = make_offer(instance_type="b", price_per_hour_usd=11.0)
    spec = make_spec(workload={"hours": 10, "results_out_gb": 100})
    first, second = plan(spec, [cheap_compute, cheap_egress]).options
    assert first.instance_type == "b" and decided_by(first, second) == "egress"


def test_provider_as_of_and_option_as_of() -> None:
    dated = make_catalog([make_offer()], **{"lambda": make_info(as_of=dt.date(2026, 11, 1))})
    result = resolve_plan(make_spec(), dated, {"lambda": ALL})
    assert result.provider_as_of == {"lambda": dt.date(2026, 11, 1)}
    assert result.options[0].as_of == dt.date(2026, 11, 1)


# --- property test against an independent brute force (docs/cost-model.md, exact) -----------

_FABRIC_OK = {
    "any": {"ethernet", "roce", "infiniband", "efa"},
    "ethernet": {"ethernet", "roce", "infiniband", "efa"},
    "roce": {"roce", "infiniband"},
    "infiniband": {"infiniband"},
    "efa": {"efa"},
}


def _q(value: Any) -> Fraction:
    """A spec or catalog number as the decimal written."""
    return Fraction(Decimal(repr(value)) if isinstance(value, float) else Decimal(value))


def _half_even_cents(usd: Fraction) -> int:
    return round(usd * 100)


def _tier_cost(tiers: list[EgressTier], gb: Fraction) -> Fraction:
    cost, floor = Fraction(0), Fraction(0)
    for tier in tiers:
        top = None if tier.up_to_gb is None else _q(tier.up_to_gb)
        upper = gb if top is None else min(gb, top)
        if upper > floor:
            cost += (upper - floor) * _q(tier.usd_per_gb)
        if top is None:
            return cost
        floor = max(floor, top)
    if tiers and gb > floor:
        cost += (gb - floor) * _q(tiers[-1].usd_per_gb)
    return cost


def oracle(spec: ClusterSpec, catalog: Catalog) -> list[tuple[int, int, tuple[str, ...], bool]]:
    """(total cents, exact cluster hourly USD, Offer.key, spot) of every rankable candidate, best first.

    Written from docs/cost-model.md alone, with exact rationals; the interruption estimate in
    binary64 exactly as the document orders it.
    """
    w = spec.workload
    hours = _q(w.hours)
    found = []
    for o in catalog.offers:
        nodes, rest = divmod(spec.gpus.count, o.gpus)
        info = catalog.providers[o.provider]
        if (
            rest
            or nodes > o.max_nodes
            or nodes < o.min_nodes
            or not o.available
            or o.reliability < spec.reliability.min_score
            or o.fabric.value not in _FABRIC_OK[spec.interconnect.fabric.value]
            or (nodes > 1 and o.fabric_gbps < spec.interconnect.min_gbps_per_node)
            or (nodes > 1 and o.network.value == "none" and spec.interconnect.fabric.value != "any")
            or o.local_nvme_gib < spec.storage.checkpoint_nvme_gib_per_node
            or o.purchase.quote_only
        ):
            continue
        source, source_region = w.dataset.source
        data_gb = _q(w.dataset.size_gb)
        if not data_gb:
            data = Fraction(0)
        elif source == o.provider:
            data = Fraction(0) if source_region == o.region else data_gb * _q(info.inter_region_usd_per_gb)
        else:
            data = data_gb * _q(o.ingress_usd_per_gb)
            if source is not None:
                src = catalog.providers[source]
                free = min(data_gb, _q(src.free_egress_gb))
                data += _tier_cost(src.internet_egress_tiers, data_gb) - _tier_cost(src.internet_egress_tiers, free)
        out_gb = _q(w.results_out_gb)
        if info.internet_egress_tiers:
            out = _tier_cost(info.internet_egress_tiers, out_gb) - _tier_cost(
                info.internet_egress_tiers, min(out_gb, _q(info.free_egress_gb))
            )
        else:
            out = out_gb * _q(o.egress_usd_per_gb)
        for spot in {"on_demand": [False], "spot": [True], "either": [False, True]}[spec.pricing.mode.value]:
            price = o.spot_price_per_hour_usd if spot else o.price_per_hour_usd
            if price is None:
                continue
            hourly = nodes * _q(price)
            run_s = math.ceil(hours * 3600)
            billed_s = max(-(-run_s // o.billing_increment_s) * o.billing_increment_s, o.billing_minimum_s)
            boot_s = _q(info.boot_minutes) * 60  # exact: a fraction of a second is paid too
            compute = _half_even_cents(hourly * billed_s / 3600) + _half_even_cents(hourly * boot_s / 3600)
            rate = o.spot_interruptions_per_node_hour if spot else o.interruptions_per_node_hour
            if rate is None:
                rate = max(o.interruptions_per_node_hour, 0.25 / 730)
            lost_h = (w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes) / 60.0
            interruption = round(rate * nodes * w.hours * lost_h * (float(int(hourly * 1_000_000)) / 1e6) * 100.0)
            storage = nodes * _q(spec.storage.checkpoint_nvme_gib_per_node) * hours * _q(o.disk_usd_per_gib_hour)
            total = compute + _half_even_cents(storage) + _half_even_cents(data + out) + interruption
            if spec.pricing.max_hourly_usd is not None and hourly > Fraction(spec.pricing.max_hourly_usd):
                continue
            if spec.pricing.max_total_usd is not None and Fraction(total, 100) > Fraction(spec.pricing.max_total_usd):
                continue
            found.append((total, hourly, o.key, spot))
    return sorted(found)


def property_offer(**fields: Any) -> Offer:
    if fields.get("purchase") == "reservation":  # a reservation is never sold spot (docs/cost-model.md)
        fields["spot_price_per_hour_usd"] = None
    return make_offer(**fields)


offers_strategy = st.lists(
    st.builds(
        property_offer,
        provider=st.sampled_from(["aws", "lambda", "vastai"]),
        instance_type=st.sampled_from(["a", "b", "c"]),
        region=st.sampled_from(["us-east-1", "eu-west-1"]),
        gpus=st.sampled_from([1, 2, 4, 8]),
        fabric=st.sampled_from(["ethernet", "roce", "infiniband", "efa"]),
        fabric_gbps=st.sampled_from([0, 100, 400]),
        price_per_hour_usd=st.one_of(
            st.none(),
            st.integers(1, 400_000).map(lambda c: D(c) / 10_000),
            st.integers(1, 4 * 10**10).map(lambda c: D(c) / 10**8),
        ),  # an ask's 8 places
        spot_price_per_hour_usd=st.one_of(st.none(), st.integers(1, 4000).map(lambda c: D(c) / 100)),
        spot_interruptions_per_node_hour=st.sampled_from([None, 0.0, 0.01, 0.2]),
        interruptions_per_node_hour=st.sampled_from([0.0, 0.0002, 0.01]),
        billing_increment_s=st.sampled_from([1, 60, 3600]),
        billing_minimum_s=st.sampled_from([0, 10_800]),
        egress_usd_per_gb=st.sampled_from([D(0), D("0.05"), D("0.013")]),
        ingress_usd_per_gb=st.sampled_from([D(0), D("0.01")]),
        disk_usd_per_gib_hour=st.sampled_from([D(0), D("0.000136986")]),
        reliability=st.sampled_from([0.6, 0.99]),
        max_nodes=st.sampled_from([1, 4, 16]),
        min_nodes=st.sampled_from([1, 1, 2]),
        purchase=st.sampled_from(["instance", "instance", "reservation"]),
        network=st.sampled_from(["private", "private", "none"]),
        available=st.booleans(),
    ).filter(lambda o: o.min_nodes <= o.max_nodes and (o.price_per_hour_usd or o.spot_price_per_hour_usd)),
    min_size=1,
    max_size=6,
)
specs_strategy = st.builds(
    lambda count, mode, hours, size, location, out, fabric, gbps, score, budget, hourly, nvme: make_spec(
        gpus={"count": count},
        pricing={"mode": mode, "max_total_usd": budget, "max_hourly_usd": hourly},
        interconnect={"fabric": fabric, "min_gbps_per_node": gbps},
        reliability={"min_score": score},
        storage={"checkpoint_nvme_gib_per_node": nvme},
        workload={"hours": hours, "results_out_gb": out, "dataset": {"size_gb": size, "location": location}},
    ),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.sampled_from(["on_demand", "spot", "either"]),
    st.sampled_from([0.5, 1, 2.75, 24, 0.0001, 1.01]),
    st.sampled_from([0, 50, 500, 12.5]),
    st.sampled_from(["none", "internet", "aws:us-east-1", "lambda:eu-west-1"]),
    st.sampled_from([0, 30, 0.3]),
    st.sampled_from(["any", "ethernet", "roce", "infiniband", "efa"]),
    st.sampled_from([0, 200]),
    st.sampled_from([0, 0.9]),
    st.one_of(st.none(), st.sampled_from([50, 500, 5000, 0.64])),
    st.one_of(st.none(), st.sampled_from([20, 159.6])),
    st.sampled_from([0, 0, 100]),
)
PROPERTY_INFOS = {
    "aws": make_info(
        internet_egress_tiers=[
            EgressTier(up_to_gb=20, usd_per_gb=D("0.09")),
            EgressTier(up_to_gb=None, usd_per_gb=D("0.085")),
        ],
        free_egress_gb=10,
        inter_region_usd_per_gb=D("0.02"),
        boot_minutes=4,
    ),
    "lambda": make_info(boot_minutes=5.5),
    "vastai": make_info(
        internet_egress_tiers=[EgressTier(up_to_gb=None, usd_per_gb=D("0.02"))], boot_minutes=2.5555
    ),  # 153.33 s: not whole seconds
}


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(offers=offers_strategy, spec=specs_strategy)
def test_the_engine_agrees_with_the_exact_oracle(offers: list[Offer], spec: ClusterSpec) -> None:
    catalog = make_catalog(offers, **PROPERTY_INFOS)
    expected = oracle(spec, catalog)
    per_offer = 2 if spec.pricing.mode.value == "either" else 1
    caps = dict.fromkeys(PROVIDER_NAMES, ALL)
    try:
        result = resolve_plan(spec, catalog, caps, keep=100, explain=True)
    except NoFeasibleOfferError as exc:
        assert expected == []
        quoted = len(getattr(exc, "quotes", []))
        assert len(exc.rejected) + quoted == per_offer * len(offers)
        return
    got = [(int(o.cost.total * 100), Fraction(o.hourly_usd), o.offer.key, o.spot) for o in result.options]
    assert got == expected
    assert result.feasible_count == len(expected)
    assert len(result.options) + len(result.rejected) + len(result.quotes) == per_offer * len(offers)
    for option in result.options:
        c = option.cost
        assert c.compute + c.storage + c.egress + c.interruption == c.total
        assert all(getattr(c, t) == getattr(c, t).quantize(D("0.01")) for t in ("compute", "storage", "total"))
    assert [o.rank for o in result.options] == list(range(1, len(result.options) + 1))
    assert all(a.cost.total <= b.cost.total for a, b in itertools.pairwise(result.options))
