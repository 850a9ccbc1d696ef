"""GCP in the contract suite: the GCPFake and GCPProvider over the real google-cloud-compute
client (REST transport, ``http://127.0.0.1:PORT`` endpoint).

The suite's ``api_key`` is an OAuth access token (``google.oauth2.credentials.Credentials``
with a fixed token: never refreshed, so nothing reaches Google); the fake checks the bearer.
"""

from __future__ import annotations

from typing import Any

from google.oauth2.credentials import Credentials
from provisioner.providers.base import NodeSpec, OfferQuery
from provisioner.providers.gcp.client import LIMITS
from provisioner.providers.gcp.provider import GCPProvider

from provisioner.testing.fakes.gcp_compute import DEFAULT_QUOTAS, GCPFake
from tests.conftest import need_shared
from tests.providers.harness import Harness
from tests.providers.in_process import RequestsAdapter

TOKEN = "gcp-test-token"
PROJECT = "provisioner-test"
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIContractSuiteKeyMaterial0000000000000 contract"


def node_specs(n: int, prefix: str = "n") -> list[NodeSpec]:
    return [NodeSpec(name=f"{prefix}{i}", instance_type="a3-highgpu-8g", region="us-central1", zone="us-central1-a",
                     gpus=8, image=IMAGE, ssh_public_key=SSH_KEY,
                     bootstrap="cloud_init", user_data="#cloud-config\n{}\n") for i in range(n)]


def make_provider(*, api_key: str, base_url: str, transport: Any = None, **kwargs: Any) -> GCPProvider:
    return GCPProvider(PROJECT, Credentials(token=str(api_key)), zones=["us-central1-a"], endpoint=base_url,
                       http_adapter=RequestsAdapter(transport) if transport is not None else None, **kwargs)


def make_harness() -> Harness:
    need_shared("provider-apis", "gcp", "compute_v1_and_billing_fields.json")
    app = GCPFake(api_key=TOKEN, quotas={**DEFAULT_QUOTAS, "NVIDIA_H100_GPUS": (100_000.0, 0.0),
                                         "PREEMPTIBLE_NVIDIA_H100_GPUS": (100_000.0, 0.0)})  # test_gcp*.py refuses
    return Harness(name="gcp", app=app, make_provider=make_provider, api_key=TOKEN, node_specs=node_specs,
                   published_limits=LIMITS, scale=20.0,
                   offer_query=OfferQuery(gpu_models=("H100",), regions=("us-central1",)),
                   launch_route="insert", list_route="aggregated", offers_route="machineTypes",
                   balance_fault_route="insert")
