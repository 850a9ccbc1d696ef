"""Discovery for the shared provider contract suite (the tests are in test_contract.py).

Every registered provider joins the suite through its fake: the module its ``FACTS.fake`` names
defines ``contract_harness()`` (``provisioner.testing.contract``). Adding a provider adds nothing
here nor under tests/.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.providers.base import Node, NodeStatus, Provider
from provisioner.providers.http import Pacing, RetryPolicy
from provisioner.providers.registry import REGISTRY, facts
from provisioner.testing.fakes.base import FakeApp, FakeTransport, RunningServer
from provisioner.waiting import wait_until
from tests.conftest import need_shared
from tests.providers.harness import Harness, VirtualTime


def _fake_module(name: str) -> Any:
    return importlib.import_module(facts()[name].fake.partition(":")[0])


def harness_names() -> list[str]:
    """The registered providers, sorted: every one's fake hands the suite a harness (checked by
    ``fakes_without_harness``). It imports no fake, so collection pays for no SDK nor moto."""
    return sorted(REGISTRY)


def fakes_without_harness() -> list[str]:
    """The registered providers whose fake defines no ``contract_harness()`` (none: test_provider_lists)."""
    return [name for name in sorted(REGISTRY) if not hasattr(_fake_module(name), "contract_harness")]


def neocloud_names() -> tuple[str, ...]:
    """The registered providers their stack realizes through the adapter (``FACTS.stack``), registry order."""
    return tuple(name for name, found in facts().items() if found.stack == "neocloud")


def load_harness(name: str) -> Harness:
    """A fresh Harness (with a fresh fake) from the provider's fake's ``contract_harness()``; skips (fails
    under REQUIRE_SYSTEM_TOOLS=1) when a shared file its fake validates against is absent."""
    harness: Harness = _fake_module(name).contract_harness()
    for provider, file in harness.needs:
        need_shared("provider-apis", provider, file)
    return harness


ANSWER_TIMEOUT_S = 30.0
"""What an adapter waits for an answer from the fake in tests that do not time anything out."""


@dataclass
class Rig:
    """One harness with its fake served on 127.0.0.1 (the ``rig`` fixture in conftest.py)."""

    harness: Harness
    server: RunningServer
    retry: RetryPolicy

    @property
    def app(self) -> FakeApp:
        return self.harness.app

    def provider(self, api_key: str | None = None, pacing: Pacing | None = None, in_process: bool = False) -> Provider:
        """The adapter on the harness's scaled limits (paced on ``pacing``'s clock when given).

        Its timeout is generous: on a loaded machine an ordinary answer can take a second.
        ``in_process``: the adapter sends through ``FakeTransport`` instead of the socket, so an
        answer the fake drops (``lose_answer``) is its HTTP library's read timeout, at once.
        """
        h = self.harness
        limits = h.scaled_limits if pacing is None else h.scaled_limits.on(pacing)
        transport = FakeTransport(h.app) if in_process else None
        return h.make_provider(
            api_key=api_key or h.api_key,
            base_url=self.server.url,
            transport=transport,
            limits=limits,
            timeout_s=ANSWER_TIMEOUT_S,
            retry=self.retry,
        )


def cluster() -> str:
    """A fresh cluster id."""
    return f"ct{uuid.uuid4().hex[:6]}"


def poll_nodes(provider: Provider, cluster_id: str, done: Callable[[list[Node]], bool], what: str) -> list[Node]:
    """``get_nodes`` until ``done`` holds, on virtual time: the fakes move a node on per poll, never
    per second, so what bounds the wait is the number of polls (about 50), not the wall clock."""
    time = VirtualTime()
    return wait_until(
        lambda: provider.get_nodes(cluster_id),
        done,
        timeout_s=10,
        interval_s=0.05,
        max_interval_s=0.2,
        what=what,
        clock=time.clock,
        sleep=time.sleep,
    )


def wait_running(provider: Provider, cluster_id: str, count: int | None = None) -> list[Node]:
    """The cluster's nodes once (``count`` of them, when given) all run (``poll_nodes``)."""
    return poll_nodes(
        provider,
        cluster_id,
        lambda nodes: (
            bool(nodes)
            and (count is None or len(nodes) == count)
            and all(n.status == NodeStatus.RUNNING for n in nodes)
        ),
        "nodes running",
    )


def wait_gone(provider: Provider, cluster_id: str) -> list[Node]:
    return poll_nodes(
        provider, cluster_id, lambda nodes: all(n.status == NodeStatus.TERMINATED for n in nodes), "nodes gone"
    )


__all__ = [
    "Rig",
    "cluster",
    "fakes_without_harness",
    "harness_names",
    "load_harness",
    "neocloud_names",
    "poll_nodes",
    "wait_gone",
    "wait_running",
]
