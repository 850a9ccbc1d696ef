"""Fluence in the contract suite: the FluenceFake and FluenceProvider (GPU Cloud VM path)."""

from __future__ import annotations

from typing import Any

from provisioner.providers.base import NodeSpec
from provisioner.providers.fluence.client import LIMITS
from provisioner.providers.fluence.provider import FluenceProvider

from provisioner.testing.fakes.fluence import FluenceFake
from tests.conftest import need_shared
from tests.providers.harness import Harness

API_KEY = "fluence-test-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZsdWVuY2UtY29udHJhY3Qtc3VpdGUta2V5LTAwMDAw contract"
INSTANCE_TYPE = "h100-80gi-sxm-8gpu-192cpu-1800gi-14000gi"
REGION = "dulles-usa-1"


def node_specs(n: int, prefix: str = "n") -> list[NodeSpec]:
    # No user_data: GPU Cloud VMs take none (the adapter refuses it; see providers/fluence/provider.py).
    return [NodeSpec(name=f"{prefix}{i}", instance_type=INSTANCE_TYPE, region=REGION, gpus=8, ssh_public_key=SSH_KEY)
            for i in range(n)]


def make_provider(**kwargs: Any) -> FluenceProvider:
    # Poll fast: delete waits for INITIALIZED instances to turn ACTIVE before terminating them.
    kwargs.setdefault("poll_interval_s", 0.02)
    return FluenceProvider(**kwargs)


def make_harness() -> Harness:
    need_shared("provider-apis", "fluence", "fluence-openapi-original.yml")
    app = FluenceFake(api_key=API_KEY)
    # Scale x20: 40 requests/s, one deploy per 0.1 s.
    return Harness(name="fluence", app=app, make_provider=make_provider, api_key=API_KEY, node_specs=node_specs,
                   published_limits=LIMITS, scale=20.0, launch_route="deploy_gpu_vm",
                   list_route="list_gpu_instances", offers_route="gpu_vm_plans", balance_fault_route="deploy_gpu_vm")
