"""The bundled offer catalog (provisioner/data/catalog.json): coverage, shape and sanity.

These tests pin what the planner can rely on from the snapshot shipped in the package:
which families each provider carries, that facts carry sources, that spot and billing
rules match each provider's terms, and that the data keep the comparisons interesting
(for instance, a large dataset in AWS can change the H200 winner).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import pytest

from provisioner.catalog import BUNDLED, dump_catalog, load_bundled_catalog, parse_catalog
from provisioner.catalog_model import Catalog
from provisioner.offer import EgressTier, Offer
from provisioner.providers.registry import REGISTRY
from provisioner.spec import Fabric

PROVIDERS = {"aws", "gcp", "lambda", "runpod", "vastai", "fluence"}

REQUIRED_TYPES = {
    "aws": {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "g5.xlarge",
        "g5.12xlarge",
        "g5.48xlarge",
        "g6e.xlarge",
        "g6e.12xlarge",
        "g6e.48xlarge",
    },
    "gcp": {
        "a2-highgpu-1g",
        "a2-highgpu-8g",
        "a2-ultragpu-8g",
        "a3-highgpu-8g",
        "a3-megagpu-8g",
        "a3-ultragpu-8g",
        "a4-highgpu-8g",
        "g2-standard-4",
        "g2-standard-96",
    },
    "lambda": {
        "gpu_1x_h100_sxm5",
        "gpu_2x_h100_sxm5",
        "gpu_4x_h100_sxm5",
        "gpu_8x_h100_sxm5",
        "gpu_8x_a100",
        "gpu_8x_a100_80gb_sxm4",
        "gpu_1x_gh200",
        "gpu_8x_b200_sxm6",
    },
}

# Provider -> GPU models that must be on offer there.
REQUIRED_GPUS = {
    "aws": {"A100", "H100", "H200", "B200", "A10G", "L40S"},
    "gcp": {"A100", "H100", "H200", "B200", "L4"},
    "lambda": {"H100", "A100", "GH200", "B200"},
    "runpod": {"H100", "H200", "A100", "L40S", "RTX4090", "B200"},
    "vastai": {"H100", "H200", "A100", "RTX4090", "L40S"},
    "fluence": {"H100", "H200", "A100", "L40S"},
}

CANONICAL_GPUS = {"H100", "H200", "A100", "B200", "GH200", "L40S", "RTX4090", "A10G", "A10", "L4"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_bundled_catalog()


def of(catalog: Catalog, provider: str) -> list[Offer]:
    return [offer for offer in catalog.offers if offer.provider == provider]


def test_bundled_catalog_loads_dated_and_labelled(catalog: Catalog) -> None:
    assert catalog.origin == BUNDLED
    assert isinstance(catalog.as_of, dt.date)
    assert catalog.as_of == dt.date(2026, 11, 20)
    # every registered provider has facts and offers, and no other (the six pinned as a floor)
    assert PROVIDERS <= set(catalog.providers) == set(REGISTRY)
    assert {offer.provider for offer in catalog.offers} == set(catalog.providers)
    assert len(catalog.offers) >= 120


def test_dump_and_parse_round_trip_keeps_every_offer(catalog: Catalog) -> None:
    # `catalog refresh` rewrites the bundled facts through dump_catalog; nothing may be lost.
    again = parse_catalog(dump_catalog(catalog), "roundtrip")
    assert again.offers == catalog.offers
    assert again.providers == catalog.providers
    assert again.as_of == catalog.as_of


@pytest.mark.parametrize("provider", sorted(REQUIRED_TYPES))
def test_required_instance_types_present(catalog: Catalog, provider: str) -> None:
    types = {offer.instance_type for offer in of(catalog, provider)}
    missing = REQUIRED_TYPES[provider] - types
    assert not missing, f"{provider} lacks {sorted(missing)}"


@pytest.mark.parametrize("provider", sorted(REQUIRED_GPUS))
def test_required_gpu_models_present(catalog: Catalog, provider: str) -> None:
    models = {offer.gpu_model for offer in of(catalog, provider)}
    missing = REQUIRED_GPUS[provider] - models
    assert not missing, f"{provider} lacks {sorted(missing)}"


def test_gpu_models_use_canonical_names(catalog: Catalog) -> None:
    assert {offer.gpu_model for offer in catalog.offers} <= CANONICAL_GPUS


def test_several_regions_per_hyperscaler_and_type(catalog: Catalog) -> None:
    for provider in ("aws", "gcp", "lambda", "runpod"):
        regions = {offer.region for offer in of(catalog, provider)}
        assert len(regions) >= 4, (provider, regions)
    p5_regions = {o.region for o in of(catalog, "aws") if o.instance_type == "p5.48xlarge"}
    assert {"us-east-1", "us-west-2"} <= p5_regions
    # GCP machine types are zonal: every GCP offer names a zone inside its region.
    for offer in of(catalog, "gcp"):
        assert offer.zone is not None and offer.zone.startswith(offer.region + "-"), offer.key


def test_every_provider_has_a_dated_source_note(catalog: Catalog) -> None:
    for name, info in catalog.providers.items():
        assert len(info.source) > 80, name
        assert "2026" in info.source, name
        assert info.boot_minutes > 0, name
        # A managed filesystem has both a price and a name, or neither.
        assert (info.shared_storage_usd_per_gib_month is None) == (info.shared_storage_kind is None), name


def test_no_duplicate_offer_keys(catalog: Catalog) -> None:
    keys = Counter((o.provider, o.instance_type, o.region, o.zone, o.offer_id) for o in catalog.offers)
    duplicates = [key for key, count in keys.items() if count > 1]
    assert not duplicates
    assert len({offer.key for offer in catalog.offers}) == len(catalog.offers)


def test_prices_positive_and_spot_cheaper(catalog: Catalog) -> None:
    for offer in catalog.offers:
        prices = [p for p in (offer.price_per_hour_usd, offer.spot_price_per_hour_usd) if p is not None]
        assert prices, offer.key
        assert all(p > 0 for p in prices), offer.key
        if offer.spot_price_per_hour_usd is not None and offer.price_per_hour_usd is not None:
            assert offer.spot_price_per_hour_usd < offer.price_per_hour_usd, offer.key


def test_spot_sold_where_the_provider_sells_it(catalog: Catalog) -> None:
    for provider in ("aws", "gcp", "vastai"):
        assert all(o.spot_price_per_hour_usd is not None for o in of(catalog, provider) if not o.purchase.quote_only), (
            provider
        )  # a reservation is never spot
    for provider in ("lambda", "fluence"):
        assert all(o.spot_price_per_hour_usd is None for o in of(catalog, provider)), provider
        assert all(o.spot_interruptions_per_node_hour is None for o in of(catalog, provider)), provider
    runpod_spot = {o.gpu_model for o in of(catalog, "runpod") if o.spot_price_per_hour_usd is not None}
    assert {"H100", "H200", "A100", "L40S", "RTX4090", "B200"} <= runpod_spot
    for provider in ("runpod", "vastai"):
        for model in ("RTX4090", "L40S"):
            assert any(o.gpu_model == model and o.spot_price_per_hour_usd for o in of(catalog, provider))


def test_interruption_estimates_are_grounded(catalog: Catalog) -> None:
    llama_rate = 3.79 / 1000 / 24
    for offer in catalog.offers:
        assert offer.interruption_basis.strip(), offer.key
        assert offer.interruptions_per_node_hour >= llama_rate * 0.99, offer.key
        if offer.spot_price_per_hour_usd is not None:
            assert offer.spot_interruptions_per_node_hour is not None, offer.key
            assert offer.spot_interruptions_per_node_hour > offer.interruptions_per_node_hour, offer.key
    hyperscaler = [o for o in catalog.offers if o.provider in ("aws", "gcp") and o.gpu_model != "B200"]
    assert {round(o.interruptions_per_node_hour, 6) for o in hyperscaler} == {1.58e-4}

    # Marketplaces are riskier than hyperscalers on average.
    def mean(offers: list[Offer]) -> float:
        return sum(o.interruptions_per_node_hour for o in offers) / len(offers)

    assert mean(of(catalog, "vastai")) > 3 * mean(of(catalog, "aws"))


def test_billing_terms_per_provider(catalog: Catalog) -> None:
    for offer in of(catalog, "aws") + of(catalog, "gcp"):
        assert (offer.billing_increment_s, offer.billing_minimum_s) == (1, 60), offer.key
    on_demand_lambda = [o for o in of(catalog, "lambda") if not o.instance_type.startswith("1cc_")]
    assert {(o.billing_increment_s, o.billing_minimum_s) for o in on_demand_lambda} == {(60, 0)}
    for provider in ("runpod", "vastai"):
        assert {o.billing_increment_s for o in of(catalog, provider)} == {1}, provider
    assert all(o.disk_usd_per_gib_hour > 0 for o in of(catalog, "runpod"))


def test_fluence_bills_hourly_with_three_hour_minimum(catalog: Catalog) -> None:
    fluence = of(catalog, "fluence")
    assert fluence
    assert {(o.billing_increment_s, o.billing_minimum_s) for o in fluence} == {(3600, 10800)}
    assert all(o.egress_usd_per_gb == 0 for o in fluence)
    note = catalog.providers["fluence"].egress_note.lower() + catalog.providers["fluence"].source.lower()
    assert "undocumented" in note


def test_vast_offers_carry_marketplace_facts(catalog: Catalog) -> None:
    vast = of(catalog, "vastai")
    assert 15 <= len(vast) <= 25
    assert all(o.offer_id and o.offer_id.isdigit() for o in vast)
    assert len({o.offer_id for o in vast}) == len(vast)
    scores = [o.reliability for o in vast]
    assert min(scores) <= 0.65 and max(scores) >= 0.99
    assert all(0.6 <= s <= 0.999 for s in scores)
    assert all(o.egress_usd_per_gb > 0 for o in vast)
    assert all(o.ingress_usd_per_gb >= 0 for o in vast)
    assert sum(o.ingress_usd_per_gb > 0 for o in vast) >= len(vast) // 2
    assert all(o.max_nodes <= 4 for o in vast)
    # A less reliable host is expected to fail more often.
    worst, best = min(vast, key=lambda o: o.reliability), max(vast, key=lambda o: o.reliability)
    assert worst.interruptions_per_node_hour > 10 * best.interruptions_per_node_hour


def test_egress_facts(catalog: Catalog) -> None:
    aws = catalog.providers["aws"]
    assert aws.free_egress_gb == 100
    assert aws.internet_egress_tiers[0] == EgressTier(up_to_gb=10240, usd_per_gb=0.09)
    assert aws.internet_egress_tiers[-1].up_to_gb is None
    for info in (aws, catalog.providers["gcp"]):
        rates = [tier.usd_per_gb for tier in info.internet_egress_tiers]
        bounds = [tier.up_to_gb for tier in info.internet_egress_tiers[:-1]]
        assert rates == sorted(rates, reverse=True)
        assert bounds == sorted(bounds)  # type: ignore[type-var]
        assert info.inter_region_usd_per_gb > 0
    for name in ("lambda", "runpod"):
        assert catalog.providers[name].internet_egress_tiers == []
        assert all(o.egress_usd_per_gb == 0 and o.ingress_usd_per_gb == 0 for o in of(catalog, name))


def test_fabrics_match_the_hardware(catalog: Catalog) -> None:
    def one(provider: str, instance_type: str) -> Offer:
        return next(o for o in of(catalog, provider) if o.instance_type == instance_type)

    expected = {
        ("aws", "p4d.24xlarge"): (Fabric.EFA, 400),
        ("aws", "p5.48xlarge"): (Fabric.EFA, 3200),
        ("aws", "p5en.48xlarge"): (Fabric.EFA, 3200),
        ("aws", "p6-b200.48xlarge"): (Fabric.EFA, 3200),
        ("gcp", "a2-highgpu-8g"): (Fabric.ETHERNET, 100),
        ("gcp", "a3-megagpu-8g"): (Fabric.ETHERNET, 1800),
        ("gcp", "a3-ultragpu-8g"): (Fabric.ROCE, 3200),
        ("gcp", "a4-highgpu-8g"): (Fabric.ROCE, 3200),
    }
    for (provider, instance_type), (fabric, gbps) in expected.items():
        offer = one(provider, instance_type)
        assert (offer.fabric, offer.fabric_gbps) == (fabric, gbps), instance_type
    assert one("aws", "p5.48xlarge").local_nvme_gib > 25000
    assert one("aws", "p5.48xlarge").max_nodes >= 16
    infiniband = {o.provider for o in catalog.offers if o.fabric == Fabric.INFINIBAND and o.max_nodes >= 4}
    assert len(infiniband) >= 2
    assert all(o.fabric_gbps >= 1600 for o in catalog.offers if o.fabric == Fabric.INFINIBAND)


def test_eight_h100_on_several_providers_at_different_prices(catalog: Catalog) -> None:
    cheapest: dict[str, float] = {}
    for o in catalog.offers:
        if o.gpu_model == "H100" and o.gpus == 8 and o.price_per_hour_usd:
            cheapest[o.provider] = min(cheapest.get(o.provider, math.inf), o.price_per_hour_usd)
    assert len(cheapest) >= 5
    assert len(set(cheapest.values())) == len(cheapest)


def _tiered(tiers: list[EgressTier], gb: float, free_gb: float) -> float:
    def cost(amount: float) -> float:
        usd, floor = 0.0, 0.0
        for tier in tiers:
            ceiling = math.inf if tier.up_to_gb is None else tier.up_to_gb
            usd += max(0.0, min(amount, ceiling) - floor) * float(tier.usd_per_gb)
            floor = ceiling
        return usd

    return cost(gb) - cost(min(gb, free_gb))


def test_h200_offers_let_aws_egress_change_the_winner(catalog: Catalog) -> None:
    # examples/h200-dataset-aws.yaml: 4 nodes of 8x H200, >= 400 Gbps, 48 h, 80 TB in aws:us-east-1.
    nodes, hours, dataset_gb = 4, 48, 80_000

    def fits(o: Offer) -> bool:
        return (
            o.gpu_model == "H200"
            and o.gpus == 8
            and o.price_per_hour_usd is not None
            and o.max_nodes >= nodes
            and o.fabric_gbps >= 400
        )

    h200 = [o for o in catalog.offers if fits(o)]
    assert {o.provider for o in h200} >= {"aws", "gcp", "runpod"}
    assert any(o.provider == "gcp" and o.instance_type == "a3-ultragpu-8g" for o in h200)
    in_place = [o for o in h200 if o.provider == "aws" and o.region == "us-east-1"]
    assert {o.instance_type for o in in_place} == {"p5e.48xlarge", "p5en.48xlarge"}
    elsewhere = [o for o in h200 if o.provider != "aws"]

    def compute(o: Offer) -> float:
        assert o.price_per_hour_usd is not None
        return nodes * hours * float(o.price_per_hour_usd)

    aws_best = min((o for o in in_place if not o.purchase.quote_only), key=compute)  # p5e is a reservation
    other_best = min(elsewhere, key=compute)
    aws = catalog.providers["aws"]
    egress = _tiered(aws.internet_egress_tiers, dataset_gb, aws.free_egress_gb)
    assert 6000 < egress < 7000
    # Without the dataset another provider is cheaper; paying AWS egress to move it flips that.
    assert compute(other_best) < compute(aws_best) < compute(other_best) + egress


def test_offers_satisfy_the_examples_basic_needs(catalog: Catalog) -> None:
    # burst-4090-marketplace: 4 single-GPU RTX 4090/L40S nodes, reliability >= 0.95, <= $6/h.
    burst = [
        o
        for o in catalog.offers
        if o.provider in ("runpod", "vastai", "fluence")
        and o.gpu_model in ("RTX4090", "L40S")
        and o.gpus == 1
        and o.max_nodes >= 4
        and o.reliability >= 0.95
    ]
    assert {o.provider for o in burst} == {"runpod", "vastai", "fluence"}
    # pretrain-h100-slurm: 2 nodes of 8x H100 with >= 400 Gbps and 2000 GiB NVMe, on-demand.
    pretrain = {
        o.provider
        for o in catalog.offers
        if o.gpu_model == "H100"
        and o.gpus == 8
        and o.max_nodes >= 2
        and o.fabric_gbps >= 400
        and o.local_nvme_gib >= 2000
        and o.price_per_hour_usd
    }
    assert pretrain >= {"aws", "gcp", "lambda", "runpod"}
