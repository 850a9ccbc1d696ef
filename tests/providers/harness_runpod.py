"""RunPod's entry in the shared contract suite: the v2 fake and the adapter bound to it."""

from __future__ import annotations

from typing import Any

from provisioner.providers.base import NodeSpec, OfferQuery
from provisioner.providers.runpod.client import RATE_LIMITS
from provisioner.providers.runpod.provider import RunPodProvider

from provisioner.testing.fakes.runpod import RunPodFake
from tests.conftest import need_shared
from tests.providers.harness import Harness

API_KEY = "rp-harness-key"
SCALE = 20.0
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ harness"


def make_provider(**kwargs: Any) -> RunPodProvider:
    return RunPodProvider(poll_interval_s=0.05, **kwargs)


def node_specs(n: int, prefix: str) -> list[NodeSpec]:
    return [NodeSpec(name=f"{prefix}{i}", instance_type="1x_RTX4090_SECURE", region="US-KS-2",
                     ssh_public_key=SSH_KEY, bootstrap="script", user_data="#!/bin/sh\necho hello\n") for i in range(n)]


def make_harness() -> Harness:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    # The fake enforces RunPod's published windows at the same scale the suite runs the adapter.
    app = RunPodFake(api_key=API_KEY, limit_scale=SCALE, enforce_limits=True)
    return Harness(
        name="runpod",
        app=app,
        make_provider=make_provider,
        api_key=API_KEY,
        node_specs=node_specs,
        published_limits=RATE_LIMITS,
        scale=SCALE,
        offer_query=OfferQuery(gpu_models=("RTX4090", "H100")),
    )
