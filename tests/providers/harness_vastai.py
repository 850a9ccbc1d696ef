"""Vast.ai's entry in the shared contract suite: its fake, adapter and node shapes."""

from __future__ import annotations

from typing import Any

from provisioner.providers.base import NodeSpec, OfferQuery
from provisioner.providers.vastai.client import VAST_LIMITS
from provisioner.providers.vastai.provider import VastAIProvider

from provisioner.testing.fakes.vastai import VastAIFake
from tests.providers.harness import Harness

API_KEY = "vast-test-key-0123456789"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHarnessKeyForVastFake harness@test"


def node_specs(n: int, prefix: str) -> list[NodeSpec]:
    """n single-4090 nodes in the US, as a plan would give them (no per-node ask ids)."""
    return [NodeSpec(name=f"{prefix}{i}", instance_type="1x_RTX_4090", region="US", gpus=1, disk_gib=40,
                     ssh_public_key=SSH_KEY, bootstrap="script", user_data="#!/bin/sh\necho ready\n") for i in range(n)]


def make_provider(**kwargs: Any) -> VastAIProvider:
    return VastAIProvider(**kwargs)


def make_harness() -> Harness:
    return Harness(
        name="vastai",
        app=VastAIFake(api_key=API_KEY),
        make_provider=make_provider,
        api_key=API_KEY,
        node_specs=node_specs,
        published_limits=VAST_LIMITS,
        scale=20.0,
        offer_query=OfferQuery(gpu_models=("RTX4090",), regions=("US",), min_reliability=0.95),
    )


__all__ = ["make_harness", "node_specs"]
