"""GCP adapter with the real google-cloud-compute client (REST, anonymous credentials) against
the GCPFake on 127.0.0.1: machine/accelerator facts, GPU quotas, capacity and label checks."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from google.auth.credentials import AnonymousCredentials

from provisioner.errors import CapacityError, PlanError, QuotaError
from provisioner.providers.base import NodeSpec, OfferQuery
from provisioner.providers.gcp.client import LIMITS, GCPClient
from provisioner.providers.gcp.provider import COMPUTE_SERVICE, GCPProvider
from provisioner.providers.http import RateLimits
from provisioner.testing.fakes.base import RunningServer, serve
from provisioner.testing.fakes.gcp_compute import GCPFake
from tests.providers.harness import VirtualTime

IMAGE = "projects/debian-cloud/global/images/family/debian-12"


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    with serve(GCPFake()) as running:
        yield running
        assert running.app.validation_errors == []


def _provider(url: str) -> GCPProvider:
    return GCPProvider(
        "p", AnonymousCredentials(), zones=["us-central1-a"], endpoint=url, limits=LIMITS.scaled(100)
    )  # the limits have their own tests (below, and the contract's)


def _spec(name: str = "a", **update: object) -> NodeSpec:
    spec = NodeSpec(name=name, instance_type="a3-highgpu-8g", region="us-central1", zone="us-central1-a", image=IMAGE)
    return spec.model_copy(update=update)


def test_gpu_machine_types(fake: RunningServer) -> None:
    kinds = {m.machine_type: m for m in _provider(fake.url).gpu_machine_types("us-central1-a")}
    assert "n2-standard-8" not in kinds
    a3 = kinds["a3-highgpu-8g"]
    assert (a3.gpu_model, a3.gpus, a3.gpu_memory_gib, a3.vcpus, a3.local_ssd_gib) == ("H100", 8, 80.0, 208, 6000.0)
    assert (kinds["g2-standard-4"].gpu_model, kinds["a2-ultragpu-8g"].gpu_memory_gib) == ("L4", 80.0)


def test_offers_name_their_price_source(fake: RunningServer) -> None:
    offers = {o.instance_type: o for o in _provider(fake.url).list_offers(OfferQuery(gpu_models=("H100",)))}
    assert set(offers) == {"a3-highgpu-8g", "a3-megagpu-8g"} and {o.zone for o in offers.values()} == {"us-central1-a"}
    a3, mega = offers["a3-highgpu-8g"], offers["a3-megagpu-8g"]
    # 8 x 9.7965 (GPU) + 208 x 0.02392 (vCPU) + 1872 x 0.0032 (GiB) from the fake's SKUs, exact
    assert (a3.price_per_hour_usd, a3.spot_price_per_hour_usd) == (Decimal("89.33776"), Decimal("26.79856"))
    assert a3.source and "Cloud Billing Catalog SKUs" in a3.source
    # no A3 Mega SKUs in the fake: the bundled catalog's price, and the source says so
    assert mega.price_per_hour_usd == Decimal("92.2143") and mega.source and "bundled catalog" in mega.source


def test_every_page_and_poll_takes_a_rate_limit_token(fake: RunningServer) -> None:
    # Time stands still except in the limiter's sleeps: with a burst of 1 at 4 requests/s,
    # n HTTP requests cost n - 1 waits of 0.25 s. Spending one token per call (not per page)
    # would make fewer waits than the fake saw requests.
    time = VirtualTime()
    client = GCPClient(
        "p", AnonymousCredentials(), endpoint=fake.url, limits=RateLimits(4.0, 1.0, 1000.0, 1.0).on(time)
    )
    skus = client.skus(COMPUTE_SERVICE)
    pages = len(fake.app.calls)
    assert pages >= 3 and len(skus) > 4 * (pages - 1)  # several pages of four SKUs
    client.insert_instance(
        "us-central1-a", {"name": "a", "machine_type": "zones/us-central1-a/machineTypes/a3-highgpu-8g"}
    )
    list(client.list_instances("labels.x=y"))
    requests = len(fake.app.calls)
    assert requests == pages + 2
    assert client.limiter.granted == requests and time.now == 0.25 * (requests - 1)


def test_gpu_quota_refusal_names_the_metric(fake: RunningServer) -> None:
    provider = _provider(fake.url)
    provider.check_quota("a3-highgpu-8g", "us-central1-a", 2, spot=False)  # 16 H100 left
    with pytest.raises(QuotaError, match=r"24 GPUs .* NVIDIA_H100_GPUS \(16 left\).*iam-admin/quotas\?project=p"):
        provider.check_quota("a3-highgpu-8g", "us-central1-a", 3, spot=False)
    (spot,) = provider.quota_shortfalls(
        [("a3-highgpu-8g", "us-central1-a", 1, True), ("g2-standard-4", "us-central1-a", 4, False)]
    )
    assert (spot.metric, spot.available_gpus) == ("PREEMPTIBLE_NVIDIA_H100_GPUS", 0)


def test_zone_exhausted_is_capacity_error(fake: RunningServer) -> None:
    fake.app.faults.inject("capacity_after", route="insert", times=None, k=0)
    with pytest.raises(CapacityError, match=r"ZONE_RESOURCE_POOL_EXHAUSTED.*a3-highgpu-8g in us-central1"):
        _provider(fake.url).create_nodes("gc1", [_spec()])
    assert fake.app.instance_count() == 0


def test_spot_node_is_spot_and_deleted_on_preemption(fake: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    fake.app.quotas["PREEMPTIBLE_NVIDIA_H100_GPUS"] = (8.0, 0.0)  # type: ignore[attr-defined]
    (node,) = _provider(fake.url).create_nodes("gc2", [_spec(spot=True, tags={"owner": "alice"})])
    body = fake.app.instances[("us-central1-a", node.id)]  # type: ignore[attr-defined]
    assert body["scheduling"] == {
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
    }
    assert body["labels"] == {
        "owner": "alice",
        "provisioner-cluster": "gc2",
        "provisioner-node": "a",
        "provisioner-owner": "tester",
    }


def test_invalid_label_is_refused_before_buying(fake: RunningServer) -> None:
    with pytest.raises(PlanError, match="not valid GCP names/labels"):
        _provider(fake.url).create_nodes("gc3", [_spec(tags={"Team": "ML"})])
    assert fake.app.calls == []


def test_without_configured_zones_every_zone_of_the_region_is_listed(
    fake: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROVISIONER_GCP_ZONES", raising=False)
    provider = GCPProvider("p", AnonymousCredentials(), endpoint=fake.url)
    assert provider.region_zones(["us-central1"]) == ["us-central1-a", "us-central1-b"]  # the fake's zones
    offers = provider.list_offers(OfferQuery(gpu_models=("H100",), regions=("us-central1",)))
    assert {(o.instance_type, o.zone) for o in offers} >= {
        ("a3-highgpu-8g", "us-central1-a"),
        ("a3-highgpu-8g", "us-central1-b"),
    }


def test_expiry_makes_gce_delete_the_vm_itself(fake: RunningServer) -> None:
    """The TTL stops the bill without the client: GCE deletes the VM (and its auto-delete disk)
    at the expiry, written as an absolute time so a retried create asks for the same end."""
    import datetime as dt

    expires = dt.datetime(2026, 11, 24, 6, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    (node,) = _provider(fake.url).create_nodes("gc4", [_spec(expires_at=expires)])
    body = fake.app.instances[("us-central1-a", node.id)]  # type: ignore[attr-defined]
    assert body["scheduling"]["terminationTime"] == "2026-11-24T05:30:00Z"
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert body["scheduling"]["provisioningModel"] == "STANDARD"
