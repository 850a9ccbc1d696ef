"""Discovery for the shared provider contract suite (the tests are in test_contract.py).

Every ``tests/providers/harness_<name>.py`` exposing ``make_harness()`` joins the suite;
adding a provider adds one file and nothing here changes.
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass
from pathlib import Path

from provisioner.providers.base import Node, NodeStatus, Provider
from provisioner.providers.http import Pacing, RetryPolicy

from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.waiting import wait_until
from tests.providers.harness import Harness

HERE = Path(__file__).resolve().parent


def harness_names() -> list[str]:
    """Provider names with a harness module, sorted."""
    return sorted(path.stem.removeprefix("harness_") for path in HERE.glob("harness_*.py"))


def load_harness(name: str) -> Harness:
    """A fresh Harness (with a fresh fake) from ``harness_<name>.make_harness()``."""
    module = importlib.import_module(f"tests.providers.harness_{name}")
    harness: Harness = module.make_harness()
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

    def provider(self, api_key: str | None = None, pacing: Pacing | None = None,
                 timeout_s: float = ANSWER_TIMEOUT_S) -> Provider:
        """The adapter on the harness's scaled limits (paced on ``pacing``'s clock when given).

        ``timeout_s`` is generous unless a test makes the fake hold an answer (then it passes the
        harness's short ``timeout_s``): on a loaded machine an ordinary answer can take a second.
        """
        h = self.harness
        limits = h.scaled_limits if pacing is None else h.scaled_limits.on(pacing)
        return h.make_provider(api_key=api_key or h.api_key, base_url=self.server.url,
                               limits=limits, timeout_s=timeout_s, retry=self.retry)


def cluster() -> str:
    """A fresh cluster id."""
    return f"ct{uuid.uuid4().hex[:6]}"


def wait_gone(provider: Provider, cluster_id: str) -> list[Node]:
    return wait_until(lambda: provider.get_nodes(cluster_id),
                      lambda nodes: all(n.status == NodeStatus.TERMINATED for n in nodes),
                      timeout_s=10, interval_s=0.05, max_interval_s=0.2, what="nodes gone")


__all__ = ["Rig", "cluster", "harness_names", "load_harness", "wait_gone"]
