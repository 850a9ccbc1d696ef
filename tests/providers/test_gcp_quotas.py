"""GCP end to end on the GCPFake with the real client libraries (google-cloud-compute and
google-cloud-billing, REST, anonymous credentials): `catalog refresh --provider gcp` through the
CLI prices machine types from Cloud Billing Catalog SKUs and records regional GPU quota headroom;
`plan` names a quota metric it refuses; `create_nodes` refuses before any insert."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials

from provisioner.catalog import load_catalog
from provisioner.cli import main
from provisioner.errors import PlanError, QuotaError
from provisioner.providers.base import NodeSpec
from provisioner.providers.gcp.billing import resource_of, sku_prices, unit_price
from provisioner.providers.gcp.provider import GCPProvider
from provisioner.refresh import FAKE_CACHE_FILE
from provisioner.testing.fakes.base import RunningServer, serve
from provisioner.testing.fakes.gcp_compute import DEFAULT_QUOTAS, GCPFake

IMAGE = "projects/debian-cloud/global/images/family/debian-12"
SPEC = """
name: gcp-quota
gpus: {{model: [H100], count: {gpus}}}
nodes: {{gpus_per_node: 8}}
providers: {{allow: [gcp]}}
control_plane: none
pricing: {{mode: on_demand}}
workload: {{hours: 10}}
lifetime: {{ttl_hours: 12}}
access:
  ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnlyForDocsDoNotUse0000000000 ml@example
  allowed_cidrs: [203.0.113.0/24]
"""


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    quotas = {**DEFAULT_QUOTAS, "NVIDIA_H100_MEGA_GPUS": (8.0, 0.0)}
    with serve(GCPFake(quotas=quotas)) as running:
        yield running
        assert running.app.validation_errors == []


@pytest.fixture
def gcp_env(fake: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What a user sets to point the CLI at a local Compute Engine + Cloud Billing endpoint."""
    for name, value in {
        "PROVISIONER_GCP_API_URL": fake.url,
        "PROVISIONER_GCP_CREDENTIALS": "anonymous",
        "PROVISIONER_GCP_PROJECT": "quota-project",
        "PROVISIONER_GCP_ZONES": "us-central1-a",
        "NO_GCE_CHECK": "True",
        "GCE_METADATA_HOST": "127.0.0.1",
        "PROVISIONER_CACHE_DIR": str(tmp_path / "cache"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PROVISIONER_GCP_BILLING_URL", raising=False)
    return tmp_path


def _spec_file(where: Path, gpus: int) -> str:
    path = where / f"spec-{gpus}.yaml"
    path.write_text(SPEC.format(gpus=gpus))
    return str(path)


def test_refresh_prices_from_skus_records_gpu_quotas_then_plan_names_the_metric(
    gcp_env: Path, fake: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["catalog", "refresh", "--provider", "gcp"]) == 0
    assert "gcp: " in capsys.readouterr().out
    cache = load_catalog(gcp_env / "cache" / FAKE_CACHE_FILE)  # a refresh against a fake never writes the real cache
    live = {o.instance_type: o for o in cache.offers if o.provider == "gcp" and o.region == "us-central1"}
    assert live["a3-highgpu-8g"].price_per_hour_usd == Decimal("89.33776")
    assert live["a3-highgpu-8g"].zone == "us-central1-a"
    quotas = {(q.code, q.region): q for q in cache.providers["gcp"].quotas or []}
    h100 = quotas[("NVIDIA_H100_GPUS", "us-central1")]
    assert (h100.unit, h100.available, h100.spot, h100.instance_types) == ("gpus", 16, False, ["a3-highgpu-8g"])
    assert quotas[("PREEMPTIBLE_NVIDIA_H100_GPUS", "us-central1")].available == 0
    assert "iam-admin/quotas?project=quota-project" in h100.how_to_request

    assert (
        main(
            ["plan", _spec_file(gcp_env, 16), "--catalog", str(gcp_env / "cache" / FAKE_CACHE_FILE), "--format", "json"]
        )
        == 0
    )
    best = json.loads(capsys.readouterr().out, parse_float=Decimal)["options"][0]
    assert (best["provider"], best["instance_type"], best["nodes"]) == ("gcp", "a3-highgpu-8g", 2)
    assert Decimal(best["hourly_usd"]) == Decimal("178.67552")
    assert (
        main(
            [
                "plan",
                _spec_file(gcp_env, 24),
                "--catalog",
                str(gcp_env / "cache" / FAKE_CACHE_FILE),
                "--format",
                "json",
                "--explain",
            ]
        )
        == 3
    )
    captured = capsys.readouterr()
    # The provider fields are blamed last (docs/cost-model.md, "When nothing fits"): the line blames
    # gpus.count and lists providers.allow among the single fields whose relaxation lets an option fit.
    assert "gpus.count: no offer fits: on-demand" in captured.err
    assert "providers.allow (runpod 8x_H100-SXM_SECURE on-demand" in captured.err
    groups = json.loads(captured.out)["rejection_groups"]
    [quota] = [g for g in groups if g["stage"] == 19 and " quota NVIDIA_H100_GPUS " in g["reason"]]
    example = quota["examples"][0]["reason"]
    assert "over the quota NVIDIA_H100" in example and "24 gpus" in example and "iam-admin/quotas" in example


def test_create_over_the_gpu_quota_inserts_nothing(fake: RunningServer) -> None:
    provider = GCPProvider("quota-project", AnonymousCredentials(), zones=["us-central1-a"], endpoint=fake.url)
    specs = [
        NodeSpec(name=f"n{i}", instance_type="a3-highgpu-8g", region="us-central1", zone="us-central1-a", image=IMAGE)
        for i in range(3)
    ]
    with pytest.raises(QuotaError, match=r"24 GPUs of a3-highgpu-8g in us-central1 exceed the quota NVIDIA_H100_GPUS"):
        provider.create_nodes("gq1", specs)
    assert fake.app.launched == 0 and fake.app.instance_count() == 0
    assert len(provider.create_nodes("gq2", specs[:2])) == 2
    assert len(provider.create_nodes("gq2", specs[:2])) == 2 and fake.app.launched == 2  # nothing new to buy


def test_anonymous_credentials_only_for_a_local_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_GCP_CREDENTIALS", "anonymous")
    monkeypatch.delenv("PROVISIONER_GCP_API_URL", raising=False)
    with pytest.raises(PlanError, match="local endpoint only"):
        GCPProvider("p")


def test_sku_parsing_is_exact_and_skips_what_it_cannot_price() -> None:
    def sku(text: str, usage: str, units: str, nanos: int, regions: list[str]) -> dict[str, object]:
        return {
            "description": text,
            "category": {"usageType": usage},
            "serviceRegions": regions,
            "pricingInfo": [
                {
                    "pricingExpression": {
                        "tieredRates": [
                            {
                                "startUsageAmount": 0,
                                "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos},
                            }
                        ]
                    }
                }
            ],
        }

    assert unit_price(sku("x", "OnDemand", "9", 796500000, [])) == Decimal("9.7965")
    assert resource_of("Spot Preemptible A3 Instance Ram running in Americas") == "ram:A3"
    assert (
        resource_of("Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo")
        == "gpu:H100 80GB Mega"
    )
    assert resource_of("Storage PD Capacity") is None
    prices = sku_prices(
        [
            sku("Nvidia H100 80GB GPU running in Americas", "OnDemand", "9", 796500000, ["r1"]),
            sku("A3 Instance Core running in Americas", "OnDemand", "0", 23920000, ["r1"]),
            sku("A3 Instance Ram running in Americas", "OnDemand", "0", 3200000, ["r1"]),
            sku("Commitment v1: A3 Cpu", "Commit1Yr", "0", 1, ["r1"]),
        ]
    )
    assert prices.machine_price("a3-highgpu-8g", "nvidia-h100-80gb", 8, 208, Decimal(1872), "r1", False) == Decimal(
        "89.33776"
    )
    assert prices.machine_price("a3-highgpu-8g", "nvidia-h100-80gb", 8, 208, Decimal(1872), "r1", True) is None
    assert prices.machine_price("a3-highgpu-8g", "nvidia-h100-80gb", 8, 208, Decimal(1872), "r2", False) is None
