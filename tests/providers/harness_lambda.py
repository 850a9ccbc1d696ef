"""Lambda Cloud in the contract suite: the LambdaFake and LambdaProvider."""

from __future__ import annotations

from typing import Any

from provisioner.providers.base import NodeSpec
from provisioner.providers.lambda_.client import LIMITS
from provisioner.providers.lambda_.provider import LambdaProvider

from provisioner.testing.fakes.lambda_ import LambdaFake
from tests.conftest import need_shared
from tests.providers.harness import Harness

API_KEY = "lambda-test-key"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIContractSuiteKeyMaterial0000000000000 contract"


def node_specs(n: int, prefix: str = "n") -> list[NodeSpec]:
    return [NodeSpec(name=f"{prefix}{i}", instance_type="gpu_8x_h100_sxm5", region="us-south-2", gpus=8,
                     ssh_public_key=SSH_KEY, bootstrap="cloud_init", user_data="#cloud-config\n{}\n") for i in range(n)]


def make_provider(**kwargs: Any) -> LambdaProvider:
    return LambdaProvider(**kwargs)


def make_harness() -> Harness:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    app = LambdaFake(api_key=API_KEY)
    # Scale x60: 60 requests/s, one launch per 0.2 s.
    return Harness(name="lambda", app=app, make_provider=make_provider, api_key=API_KEY,
                   node_specs=node_specs, published_limits=LIMITS, scale=60.0,
                   launch_route="launch", list_route="list_instances", offers_route="instance_types",
                   balance_fault_route="launch")
