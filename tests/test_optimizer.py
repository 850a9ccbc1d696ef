"""The optimizer: each cost term against hand-computed numbers, every rejection, ranking rules.

Catalogs are built by hand here (never the bundled one), with boot time and interruption
rates zeroed unless a test is about them, so each expected figure is easy to check.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.costs import Stage, price_offers, ranked, tiered_usd
from provisioner.errors import NoFeasibleOfferError, PlanError
from provisioner.offer import Catalog, EgressTier, Offer, ProviderInfo
from provisioner.offer_table import OfferTable, rank_table
from provisioner.optimizer import price_candidates, resolve_plan
from provisioner.spec import PROVIDER_NAMES, ClusterSpec

AWS_TIERS = [EgressTier(up_to_gb=10_240, usd_per_gb=0.09), EgressTier(up_to_gb=None, usd_per_gb=0.085)]


def make_offer(**fields: Any) -> Offer:
    base: dict[str, Any] = {
        "provider": "lambda", "instance_type": "gpu_8x", "region": "us-east-1", "gpu_model": "H100",
        "gpus": 8, "gpu_memory_gib": 80, "vcpus": 64, "memory_gib": 512, "local_nvme_gib": 1000,
        "fabric": "infiniband", "fabric_gbps": 400, "price_per_hour_usd": 10.0,
        "interruptions_per_node_hour": 0.0, "interruption_basis": "test", "max_nodes": 8,
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


def best(spec: ClusterSpec, offers: list[Offer], **infos: ProviderInfo):
    return resolve_plan(spec, make_catalog(offers, **infos)).options[0]


# --- cost terms -----------------------------------------------------------------------------


def test_compute_is_nodes_times_hourly_times_hours() -> None:
    option = best(make_spec(), [make_offer()])
    assert (option.nodes, option.hourly_usd) == (2, 20.0)
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
    assert option.cost.compute == round(10.0 * billed_hours, 2)


def test_storage_managed_filesystem_and_checkpoint_nvme() -> None:
    spec = make_spec(
        workload={"hours": 73},
        storage={"checkpoint_nvme_gib_per_node": 500, "shared": {"kind": "managed", "size_gib": 1000}},
    )
    offer = make_offer(disk_usd_per_gib_hour=0.0001)
    option = best(spec, [offer], **{"lambda": make_info(shared_storage_usd_per_gib_month=0.3)})
    # managed: 0.3 $/GiB-month x 1000 GiB x 73/730 months = 30; NVMe: 2 x 500 GiB x 0.0001 x 73 = 7.3
    assert option.cost.storage == 37.3


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
    assert best(spec, [offer], aws=aws).cost.egress == expected


def test_tiered_egress_crosses_tiers_after_the_free_allowance() -> None:
    assert tiered_usd(AWS_TIERS, 20_000, free_gb=100) == pytest.approx(
        (10_240 - 100) * 0.09 + (20_000 - 10_240) * 0.085
    )
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
    assert (winner.provider, winner.cost.total) == ("aws", 240.0)  # lambda: 200 + 1900 x 0.09 = 371


def test_interruption_cost() -> None:
    offer = make_offer(interruptions_per_node_hour=0.01)
    spec = make_spec(workload={"hours": 10, "checkpoint_interval_minutes": 60, "restart_overhead_minutes": 10})
    option = best(spec, [offer])
    # 0.01/node-h x 2 nodes x 10 h = 0.2 interruptions, each losing (30 + 10) min of 2 x $10/h
    assert option.expected_interruptions == pytest.approx(0.2)
    assert option.cost.interruption == round(0.2 * (40 / 60) * 20, 2) == 2.67
    assert option.cost.total == 202.67


# --- spot and on-demand ---------------------------------------------------------------------


def spot_offer(**fields: Any) -> Offer:
    return make_offer(spot_price_per_hour_usd=4.0, spot_interruptions_per_node_hour=0.05, **fields)


def test_pricing_mode_picks_variants() -> None:
    on_demand = resolve_plan(make_spec(), make_catalog([spot_offer()]))
    assert [o.spot for o in on_demand.options] == [False]
    spot = resolve_plan(make_spec(pricing={"mode": "spot"}), make_catalog([spot_offer()]))
    assert [o.spot for o in spot.options] == [True]
    option = spot.options[0]
    assert option.cost.compute == 80.0  # 2 x $4 x 10 h
    assert option.cost.interruption == round(0.05 * 2 * 10 * (40 / 60) * 8, 2)
    either = resolve_plan(make_spec(pricing={"mode": "either"}), make_catalog([spot_offer()]))
    assert [(o.rank, o.spot) for o in either.options] == [(1, True), (2, False)]


def test_expensive_interruptions_make_on_demand_win() -> None:
    spec = make_spec(pricing={"mode": "either"}, workload={"hours": 10, "restart_overhead_minutes": 600})
    offer = make_offer(spot_price_per_hour_usd=8.0, spot_interruptions_per_node_hour=0.5)
    assert [o.spot for o in resolve_plan(spec, make_catalog([offer])).options] == [False, True]


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
    ({"storage": {"checkpoint_nvme_gib_per_node": 2000}}, {}, "storage.checkpoint_nvme_gib_per_node",
     Stage.NVME),
    ({"storage": {"shared": {"kind": "managed", "size_gib": 100}}}, {}, "storage.shared.kind",
     Stage.SHARED_STORAGE),
    ({"reliability": {"min_score": 0.995}}, {}, "reliability.min_score", Stage.RELIABILITY),
    ({"pricing": {"mode": "spot"}}, {}, "pricing.mode", Stage.PRICING_MODE),
    ({"pricing": {"max_hourly_usd": 19.99}}, {}, "pricing.max_hourly_usd", Stage.MAX_HOURLY),
    ({"pricing": {"max_total_usd": 199.99}}, {}, "pricing.max_total_usd", Stage.MAX_TOTAL),
]


@pytest.mark.parametrize(("spec_fields", "offer_fields", "field", "stage"), REJECTIONS)
def test_each_rejection_names_its_field(
    spec_fields: dict[str, Any], offer_fields: dict[str, Any], field: str, stage: Stage
) -> None:
    with pytest.raises(NoFeasibleOfferError) as caught:
        resolve_plan(make_spec(**spec_fields), make_catalog([make_offer(**offer_fields)]))
    [rejection] = caught.value.rejected
    assert (rejection.field, rejection.stage) == (field, stage)
    assert (rejection.provider, rejection.instance_type, rejection.region) == ("lambda", "gpu_8x", "us-east-1")
    assert rejection.reason and "\n" not in rejection.reason
    assert rejection.reason in str(caught.value)


def test_fabric_rules() -> None:
    def fits(wanted: str, offered: str) -> bool:
        spec = make_spec(interconnect={"fabric": wanted}, gpus={"count": 8})
        try:
            resolve_plan(spec, make_catalog([make_offer(fabric=offered)]))
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
        resolve_plan(spec, make_catalog(offers))
    rejected = caught.value.rejected
    assert [r.instance_type for r in rejected] == ["ib-but-pricey", "ib-pricier", "cheap-but-ethernet"]
    deepest = max(rejected, key=lambda r: r.stage)
    assert (deepest.field, deepest.instance_type) == ("pricing.max_total_usd", "ib-but-pricey")
    assert "$1,000.00" in deepest.reason


def test_rejected_lists_every_rejected_variant() -> None:
    offers = [spot_offer(), make_offer(instance_type="ondemand-only"), make_offer(instance_type="x", gpus=3)]
    result = resolve_plan(make_spec(pricing={"mode": "either"}), make_catalog(offers))
    assert len(result.options) == 3
    assert sorted((r.instance_type, r.field) for r in result.rejected) == [
        ("ondemand-only", "pricing.mode"), ("x", "gpus.count"), ("x", "gpus.count"),
    ]


def test_empty_catalog_and_missing_pricing_facts() -> None:
    with pytest.raises(NoFeasibleOfferError, match="no offers"):
        resolve_plan(make_spec(), make_catalog([]))
    catalog = Catalog(as_of=dt.date(2026, 11, 22), providers={"lambda": make_info()}, offers=[make_offer()])
    spec = make_spec(workload={"hours": 1, "dataset": {"size_gb": 10, "location": "gcp:us-central1"}})
    with pytest.raises(PlanError, match="no pricing facts for gcp"):
        resolve_plan(spec, catalog)


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
        result = resolve_plan(spec, make_catalog(shuffled))
        assert [(o.provider, o.region) for o in result.options] == expected
        assert [o.rank for o in result.options] == [1, 2, 3, 4]
        assert {o.cost.total for o in result.options} == {200.0}


def test_rank_table_without_offer_models_matches_resolve_plan() -> None:
    offers = [make_offer(instance_type=f"t{i}", price_per_hour_usd=5 + i, spot_price_per_hour_usd=2 + i)
              for i in range(5)]
    spec = make_spec(pricing={"mode": "either"})
    result = resolve_plan(spec, make_catalog(offers))
    table = OfferTable.from_offers(offers)
    bare = OfferTable(**{f: getattr(table, f) for f in table.__dataclass_fields__ if f != "offers"})
    ranking = rank_table(spec, bare, make_catalog([]).providers)
    assert [int(ranking.total_cents[c]) / 100 for c in ranking.order] == [o.cost.total for o in result.options]
    assert ranking.deepest_stage() == 0
    broke = rank_table(make_spec(pricing={"mode": "either", "max_total_usd": 1}), bare, make_catalog([]).providers)
    assert (len(broke.order), broke.deepest_stage()) == (0, Stage.MAX_TOTAL)


def test_small_catalogs_are_planned_without_importing_numpy() -> None:
    code = (
        "import sys, datetime; from provisioner.optimizer import resolve_plan; "
        "from provisioner.offer import Catalog, ProviderInfo, Offer; from provisioner.spec import ClusterSpec; "
        "o = Offer(provider='lambda', instance_type='t', region='r', gpu_model='H100', gpus=8, "
        "gpu_memory_gib=80, vcpus=8, memory_gib=64, price_per_hour_usd=1, interruptions_per_node_hour=0, "
        "interruption_basis='t'); "
        "c = Catalog(as_of=datetime.date(2026, 1, 1), providers={'lambda': ProviderInfo(source='t')}, offers=[o]); "
        "r = resolve_plan(ClusterSpec(name='ab', gpus={'count': 8}), c); "
        "print(len(r.options), 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]


def test_large_catalogs_take_the_vectorized_path_with_the_same_answer() -> None:
    offers = [make_offer(instance_type=f"t{i}", price_per_hour_usd=1 + i % 7, gpus=[1, 2, 4, 8][i % 4],
                         spot_price_per_hour_usd=None if i % 3 else 0.5 + i % 5, fabric_gbps=100 * (i % 5))
              for i in range(40)]
    catalog = make_catalog(offers)
    spec = make_spec(pricing={"mode": "either"}, interconnect={"min_gbps_per_node": 200})
    scalar = price_candidates(spec, offers, catalog, numpy_min_offers=10**9)
    vector = price_candidates(spec, offers, catalog, numpy_min_offers=1)
    assert scalar == vector
    assert sum(1 for c in scalar if not c.stage) > 10


# --- property test against an independent brute force --------------------------------------

_FABRIC_OK = {
    "any": {"ethernet", "roce", "infiniband", "efa"},
    "ethernet": {"ethernet", "roce", "infiniband", "efa"},
    "roce": {"roce", "infiniband"},
    "infiniband": {"infiniband"},
    "efa": {"efa"},
}


def brute_force(spec: ClusterSpec, catalog: Catalog) -> list[tuple[int, float]]:
    """(total cents, hourly) of every feasible (offer, variant), by plain scalar arithmetic."""
    w = spec.workload
    found = []
    for o in catalog.offers:
        nodes, rest = divmod(spec.gpus.count, o.gpus)
        info = catalog.providers[o.provider]
        if (rest or nodes > o.max_nodes or not o.available or o.reliability < spec.reliability.min_score
                or o.fabric.value not in _FABRIC_OK[spec.interconnect.fabric.value]
                or (nodes > 1 and o.fabric_gbps < spec.interconnect.min_gbps_per_node)):
            continue
        source, source_region = w.dataset.source
        if source is None:
            data = w.dataset.size_gb * o.ingress_usd_per_gb
        elif source == o.provider:
            data = 0.0 if source_region == o.region else w.dataset.size_gb * info.inter_region_usd_per_gb
        else:
            src = catalog.providers[source]
            rate_out = src.internet_egress_tiers[0].usd_per_gb if src.internet_egress_tiers else 0.0
            free = min(w.dataset.size_gb, src.free_egress_gb)
            data = (w.dataset.size_gb * rate_out - free * rate_out) + w.dataset.size_gb * o.ingress_usd_per_gb
        if info.internet_egress_tiers:
            tier_rate = info.internet_egress_tiers[0].usd_per_gb
            out = w.results_out_gb * tier_rate - min(w.results_out_gb, info.free_egress_gb) * tier_rate
        else:
            out = w.results_out_gb * o.egress_usd_per_gb
        for spot in {"on_demand": [False], "spot": [True], "either": [False, True]}[spec.pricing.mode.value]:
            price = o.spot_price_per_hour_usd if spot else o.price_per_hour_usd
            if price is None:
                continue
            rate = o.spot_interruptions_per_node_hour if spot else o.interruptions_per_node_hour
            hourly = nodes * price
            billed_s = max(math.ceil(w.hours * 3600 / o.billing_increment_s) * o.billing_increment_s,
                           o.billing_minimum_s)
            compute = round(hourly * (billed_s / 3600) * 100) + round(hourly * (info.boot_minutes / 60) * 100)
            expected = rate * nodes * w.hours
            lost_hours = (w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes) / 60
            cents = compute + round((data + out) * 100) + round(expected * lost_hours * hourly * 100)
            if spec.pricing.max_total_usd is not None and cents > spec.pricing.max_total_usd * 100:
                continue
            found.append((cents, hourly))
    return found


offers_strategy = st.lists(
    st.builds(
        make_offer,
        provider=st.sampled_from(["aws", "lambda", "vastai"]),
        instance_type=st.sampled_from(["a", "b", "c"]),
        region=st.sampled_from(["us-east-1", "eu-west-1"]),
        gpus=st.sampled_from([1, 2, 4, 8]),
        fabric=st.sampled_from(["ethernet", "roce", "infiniband", "efa"]),
        fabric_gbps=st.sampled_from([0, 100, 400]),
        price_per_hour_usd=st.one_of(st.none(), st.integers(1, 4000).map(lambda c: c / 100)),
        spot_price_per_hour_usd=st.one_of(st.none(), st.integers(1, 4000).map(lambda c: c / 100)),
        spot_interruptions_per_node_hour=st.sampled_from([0.0, 0.01, 0.2]),
        interruptions_per_node_hour=st.sampled_from([0.0, 0.0002, 0.01]),
        billing_increment_s=st.sampled_from([1, 60, 3600]),
        billing_minimum_s=st.sampled_from([0, 10_800]),
        egress_usd_per_gb=st.sampled_from([0.0, 0.05]),
        ingress_usd_per_gb=st.sampled_from([0.0, 0.01]),
        reliability=st.sampled_from([0.6, 0.99]),
        max_nodes=st.sampled_from([1, 4, 16]),
        available=st.booleans(),
    ),
    min_size=1,
    max_size=6,
)
specs_strategy = st.builds(
    lambda count, mode, hours, size, location, out, fabric, gbps, score, budget: make_spec(
        gpus={"count": count}, pricing={"mode": mode, "max_total_usd": budget},
        interconnect={"fabric": fabric, "min_gbps_per_node": gbps}, reliability={"min_score": score},
        workload={"hours": hours, "results_out_gb": out, "dataset": {"size_gb": size, "location": location}},
    ),
    st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(["on_demand", "spot", "either"]),
    st.sampled_from([0.5, 1, 2.75, 24]), st.sampled_from([0, 50, 500]),
    st.sampled_from(["none", "internet", "aws:us-east-1", "lambda:eu-west-1"]), st.sampled_from([0, 30]),
    st.sampled_from(["any", "ethernet", "roce", "infiniband", "efa"]), st.sampled_from([0, 200]),
    st.sampled_from([0, 0.9]), st.one_of(st.none(), st.sampled_from([50, 500, 5000])),
)
PROPERTY_INFOS = {
    "aws": make_info(internet_egress_tiers=[EgressTier(up_to_gb=None, usd_per_gb=0.09)], free_egress_gb=100,
                     inter_region_usd_per_gb=0.02, boot_minutes=4),
    "lambda": make_info(boot_minutes=5),
    "vastai": make_info(internet_egress_tiers=[EgressTier(up_to_gb=None, usd_per_gb=0.02)], boot_minutes=2),
}


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(offers=offers_strategy, spec=specs_strategy)
def test_properties_against_brute_force(offers: list[Offer], spec: ClusterSpec) -> None:
    catalog = make_catalog(offers, **PROPERTY_INFOS)
    expected = brute_force(spec, catalog)
    per_offer = 2 if spec.pricing.mode.value == "either" else 1
    try:
        result = resolve_plan(spec, catalog)
    except NoFeasibleOfferError as exc:
        assert expected == []
        assert len(exc.rejected) == per_offer * len(offers)
        return
    options = result.options
    assert len(options) == len(expected)
    assert len(options) + len(result.rejected) == per_offer * len(offers)
    for option in options:
        c = option.cost
        assert round((c.compute + c.storage + c.egress + c.interruption) * 100) == round(c.total * 100)
    assert [o.rank for o in options] == list(range(1, len(options) + 1))
    assert all(a.cost.total <= b.cost.total for a, b in itertools.pairwise(options))
    cheapest_cents, cheapest_hourly = min(expected)
    assert round(options[0].cost.total * 100) == cheapest_cents
    assert options[0].hourly_usd == round(cheapest_hourly, 4)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(offers=offers_strategy, spec=specs_strategy)
def test_vectorized_core_matches_the_scalar_one(offers: list[Offer], spec: ClusterSpec) -> None:
    catalog = make_catalog(offers, **PROPERTY_INFOS)
    scalar = price_offers(spec, offers, catalog.providers)
    ranking = rank_table(spec, OfferTable.from_offers(offers), catalog.providers)
    assert ranking.candidates() == scalar
    in_order = [(int(ranking.offer_idx[c]), bool(ranking.spot[c])) for c in ranking.order]
    assert in_order == [(c.offer_idx, c.spot) for c in ranked(scalar, offers)]
