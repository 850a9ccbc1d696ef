"""GCP after purchase: instance launch times from creationTimestamp, a price check at the Cloud Billing
Catalog's SKU prices by GCE's rule (per second, one-minute minimum), exact."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from provisioner.metering import NodeUsage
from provisioner.offer import Offer
from provisioner.providers.billing import SupportsPriceCheck
from provisioner.testing.fakes.base import serve
from provisioner.testing.fakes.gcp_compute import contract_harness as make_harness
from provisioner.testing.fakes.gcp_compute import contract_node_specs as node_specs

T0 = dt.datetime(2026, 11, 26, 1, 0, 0, 250000, tzinfo=dt.UTC)


def _offer(price: str) -> Offer:
    return Offer.model_validate(
        {
            "provider": "gcp",
            "instance_type": "a3-highgpu-8g",
            "region": "us-central1",
            "zone": "us-central1-a",
            "gpu_model": "H100",
            "gpus": 8,
            "gpu_memory_gib": 80,
            "vcpus": 208,
            "memory_gib": 1872,
            "price_per_hour_usd": price,
            "interruptions_per_node_hour": 0.0,
            "interruption_basis": "test",
        }
    )


def test_gcp_launch_time_and_sku_price_check() -> None:
    harness = make_harness()
    now = [T0]
    harness.app.clock = lambda: now[0]
    with serve(harness.app) as running:
        provider = harness.make_provider(api_key=harness.api_key, base_url=running.url)
        assert isinstance(provider, SupportsPriceCheck)
        provider.create_nodes("gc", node_specs(1, "n"))
        (node,) = provider.get_nodes("gc")
        assert node.launched_at == T0.replace(microsecond=250000)
        usages = [
            NodeUsage(node.id, "n0", node.launched_at, node.launched_at + dt.timedelta(hours=2, seconds=1)),
            NodeUsage("short", "n1", T0, T0 + dt.timedelta(seconds=10)),
        ]
        billed = provider.price_check(usages, _offer("88.49"), spot=False)
        assert running.app.validation_errors == []
    # per hour: 8 x 9.7965 + 208 x 0.02392 + 1872 x 0.0032 = 89.33776; 7201 s, then the 60 s minimum
    hourly = Decimal("89.33776")
    assert billed.total_usd == hourly * 7201 / 3600 + hourly * 60 / 3600
    assert billed.total_cents == 18019  # 178.700336... + 1.488962... = 180.189298... -> $180.19
    assert any("$89.337760/h today; the plan priced $88.49/h" in d for d in billed.differences)
    assert any("BigQuery" in d for d in billed.differences)
