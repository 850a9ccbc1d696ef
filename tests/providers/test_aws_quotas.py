"""Quotas before purchase, end to end: `catalog refresh --provider aws` through the CLI against the
AWSFake (EC2 by moto, Pricing and Service Quotas by the fake) records quota headroom in the cache;
`plan` on that cache names the quota code of an option that does not fit; `create_nodes` refuses
the same purchase before any RunInstances. Also the optimizer's QUOTA stage on its own (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import boto3
import pytest

from provisioner.capabilities import Purchase
from provisioner.catalog import load_bundled_catalog, load_catalog
from provisioner.catalog_model import Catalog
from provisioner.cli import main
from provisioner.costs import Stage
from provisioner.errors import NoFeasibleOfferError, QuotaError
from provisioner.offer import QuotaHeadroom
from provisioner.optimizer import resolve_plan
from provisioner.providers import registry
from provisioner.providers.aws.client import LIMITS
from provisioner.providers.aws.provider import AWSProvider
from provisioner.providers.base import NodeSpec
from provisioner.providers.registry import capabilities
from provisioner.refresh import FAKE_CACHE_FILE
from provisioner.spec import ClusterSpec
from provisioner.testing.fakes.aws_ec2 import AWSFake
from provisioner.testing.fakes.base import RunningServer, serve

IMAGE = "ami-12c6146b"
SPEC = """
name: quota-check
gpus: {{model: [H100], count: {gpus}}}
nodes: {{gpus_per_node: 8}}
providers: {{allow: [aws]}}
control_plane: none
pricing: {{mode: {mode}}}
workload: {{hours: 10}}
lifetime: {{ttl_hours: 12}}
access:
  ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnlyForDocsDoNotUse0000000000 ml@example
  allowed_cidrs: [203.0.113.0/24]
"""


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    with serve(AWSFake(api_key="quota-secret")) as running:
        yield running
        assert running.app.validation_errors == []


@pytest.fixture
def aws_env(fake: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What a user sets to point the CLI at a local AWS endpoint (docs/aws-gcp.md)."""
    for name, value in {
        "PROVISIONER_AWS_API_URL": fake.url,
        "PROVISIONER_AWS_REGIONS": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIAQUOTATEST",
        "AWS_SECRET_ACCESS_KEY": "quota-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "PROVISIONER_CACHE_DIR": str(tmp_path / "cache"),
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    # The CLI's adapter at 100x the published 10 requests/s: refresh pages through the fake's whole
    # price list (~6 s at the real pace); the limits have their own contract test.
    real_get_provider = registry.get_provider
    monkeypatch.setattr(
        registry,
        "get_provider",
        lambda name, **kwargs: real_get_provider(name, **{"limits": LIMITS.scaled(100), **kwargs}),
    )
    return tmp_path


def _spec_file(where: Path, gpus: int, mode: str = "on_demand") -> str:
    path = where / f"spec-{gpus}-{mode}.yaml"
    path.write_text(SPEC.format(gpus=gpus, mode=mode))
    return str(path)


def test_refresh_records_prices_and_quota_headroom_then_plan_names_the_quota(
    aws_env: Path, fake: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.app.quotas[("us-east-1", "L-417A185B")] = 400.0  # type: ignore[attr-defined]  # 2 x p5 (192 vCPUs)
    assert main(["catalog", "refresh", "--provider", "aws"]) == 0
    out = capsys.readouterr().out
    assert "aws: " in out and "quotas read" in out
    cache = load_catalog(aws_env / "cache" / FAKE_CACHE_FILE)  # a refresh against a fake never writes the real cache
    live = [
        o
        for o in cache.offers
        if o.provider == "aws" and o.instance_type == "p5.48xlarge" and o.purchase == Purchase.INSTANCE
    ]
    blocks = [o for o in cache.offers if o.provider == "aws" and o.purchase == Purchase.RESERVATION]
    assert blocks and all(o.source == "EC2 DescribeCapacityBlockOfferings (live)" for o in blocks)  # bundled replaced
    assert {(o.zone, o.price_per_hour_usd) for o in live} >= {("us-east-1a", Decimal("55.04"))}
    assert {o.zone: o.spot_price_per_hour_usd for o in live}["us-east-1a"] == Decimal("27.2010")
    quotas = {(q.code, q.spot): q for q in cache.providers["aws"].quotas or []}
    assert (quotas[("L-417A185B", False)].available, quotas[("L-417A185B", False)].unit) == (400, "vcpus")
    assert "p5.48xlarge" in quotas[("L-417A185B", False)].instance_types
    assert quotas[("L-C4BD4855", True)].available == 0  # the fake's spot P5 quota

    # 16 GPUs = 2 nodes x 192 vCPUs fit in 400; 24 GPUs = 3 nodes do not.
    assert (
        main(
            ["plan", _spec_file(aws_env, 16), "--catalog", str(aws_env / "cache" / FAKE_CACHE_FILE), "--format", "json"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    best = report["options"][0]
    assert (best["provider"], best["instance_type"], best["nodes"]) == ("aws", "p5.48xlarge", 2)
    quotes = [q for q in report["quotes"] if q["provider"] == "aws"]  # Capacity Blocks: listed, never ranked
    assert quotes and all(q["purchase"] == "reservation" and "Capacity Block" in q["how_to_obtain"] for q in quotes)
    code = main(
        ["plan", _spec_file(aws_env, 24), "--catalog", str(aws_env / "cache" / FAKE_CACHE_FILE), "--format", "json"]
    )
    captured = capsys.readouterr()
    assert code == 3, captured
    # The provider fields are blamed last (docs/cost-model.md, "When nothing fits"): the line blames
    # gpus.count with the quota and how to raise it, names the quote-only products, and lists every
    # single field whose relaxation alone lets an option fit (providers.allow among them).
    line = captured.err
    assert "gpus.count: no offer fits: on-demand: 3 x p5.48xlarge need 576 vcpus, over the quota L-417A185B" in line
    assert "quote-only products fit" in line and "providers.allow (runpod 8x_H100-SXM_SECURE on-demand" in line
    [quota] = [g for g in json.loads(captured.out)["rejection_groups"] if g["stage"] == 19]
    assert quota["field"] == "gpus.count" and "L-417A185B" in quota["reason"]
    assert "request-service-quota-increase" in quota["reason"] and "400 vcpus left of 400" in quota["reason"]
    assert "576 vcpus" in quota["examples"][0]["reason"]


def test_create_over_quota_is_refused_before_any_launch(fake: RunningServer) -> None:
    provider = AWSProvider(
        boto3.Session(aws_access_key_id="AKIAQUOTATEST", aws_secret_access_key="quota-secret", region_name="us-east-1"),
        regions=["us-east-1"],
        endpoint_url=fake.url,
        limits=LIMITS.scaled(100),
    )
    specs = [NodeSpec(name=f"n{i}", instance_type="p5.48xlarge", region="us-east-1", image=IMAGE) for i in range(3)]
    with pytest.raises(QuotaError) as caught:
        provider.create_nodes("q1", specs)
    assert "L-417A185B" in str(caught.value) and "--desired-value 576" in str(caught.value)
    assert fake.app.launched == 0 and fake.app.instance_count() == 0
    spot = [NodeSpec(name="s", instance_type="p5.48xlarge", region="us-east-1", image=IMAGE, spot=True)]
    with pytest.raises(QuotaError, match=r"L-C4BD4855 \(All P5 Spot Instance Requests\) of 0 vCPUs"):
        provider.create_nodes("q2", spot)
    assert fake.app.launched == 0

    # Running instances count against the quota: 2 fit, then a third is refused, the first two stay.
    assert len(provider.create_nodes("q3", specs[:2])) == 2
    with pytest.raises(QuotaError, match=r"192 vCPUs .* of 384 vCPUs \(384 already in use\)"):
        provider.create_nodes("q4", specs[2:])
    assert fake.app.launched == 2
    again = provider.create_nodes("q3", specs[:2])  # a retried create buys nothing and needs no quota
    assert len(again) == 2 and fake.app.launched == 2
    provider.delete_nodes("q3")


def _with_quota(available: int, spot: bool = False) -> Catalog:
    bundled = load_bundled_catalog()
    offers = [o for o in bundled.offers if o.provider == "aws" and o.instance_type == "p5.48xlarge"]
    types = sorted({o.instance_type for o in offers})
    regions = sorted({o.region for o in offers})
    quota = [
        QuotaHeadroom(
            region=r,
            code="L-417A185B",
            name="Running On-Demand P instances",
            unit="vcpus",
            spot=spot,
            limit=available,
            available=available,
            instance_types=types,
            how_to_request="aws service-quotas request-service-quota-increase",
        )
        for r in regions
    ]
    info = bundled.providers["aws"].model_copy(update={"quotas": quota})
    return Catalog(as_of=bundled.as_of, origin="test", providers={"aws": info}, offers=offers)


def _spec(gpus: int) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": "quota-stage",
            "gpus": {"model": ["H100"], "count": gpus},
            "nodes": {"gpus_per_node": 8},
            "providers": {"allow": ["aws"]},
            "control_plane": "none",
            "pricing": {"mode": "on_demand"},
            "workload": {"hours": 10},
            "lifetime": {"ttl_hours": 12},
            "access": {
                "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnlyForDocsDoNotUse0000000000 x",
                "allowed_cidrs": ["203.0.113.0/24"],
            },
        }
    )


def test_quota_stage_is_pure_arithmetic_on_recorded_headroom() -> None:
    caps = capabilities()
    fits = resolve_plan(_spec(16), _with_quota(384), caps)
    assert fits.options[0].nodes == 2 and fits.options[0].instance_type == "p5.48xlarge"
    with pytest.raises(NoFeasibleOfferError) as caught:
        resolve_plan(_spec(16), _with_quota(383), caps)
    groups = caught.value.rejection_groups  # type: ignore[attr-defined]
    assert groups and all(g.stage == Stage.QUOTA and g.stage_name == "quota" for g in groups)  # one per region
    assert all("L-417A185B" in g.reason and "383 vcpus left of 383" in g.reason for g in groups)
    assert "2 x p5.48xlarge need 384 vcpus" in groups[0].examples[0].reason
    # A spot-only quota does not govern on-demand nodes; without quotas nothing is refused.
    assert resolve_plan(_spec(16), _with_quota(0, spot=True), caps).options[0].nodes == 2
    no_quotas = _with_quota(0).model_copy(update={"providers": {"aws": load_bundled_catalog().providers["aws"]}})
    assert resolve_plan(_spec(16), no_quotas, caps).options[0].nodes == 2


def test_quotas_that_cannot_be_read_leave_the_offers_and_check_nothing_in_plan(
    aws_env: Path, fake: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.app.faults.inject("invalid_key", route="GetServiceQuota", times=None)  # e.g. no servicequotas permission
    assert main(["catalog", "refresh", "--provider", "aws"]) == 0
    out = capsys.readouterr().out
    assert "quotas not read (" in out and "UnrecognizedClientException" in out
    cache = load_catalog(aws_env / "cache" / FAKE_CACHE_FILE)  # a refresh against a fake never writes the real cache
    assert cache.providers["aws"].quotas is None
    assert any(o.provider == "aws" and o.price_per_hour_usd == Decimal("55.04") for o in cache.offers)
