"""The contract suite's test-side helpers: ``VirtualTime`` and ``limiters``. ``Harness`` (what a
provider's fake hands the suite) is ``provisioner.testing.contract.Harness``, re-exported here."""

from __future__ import annotations

import threading
from typing import Any

from provisioner.providers.http import RateLimiter
from provisioner.testing.contract import Harness


class VirtualTime:
    """Rate-limiter time that moves only when a limiter sleeps (``RateLimits.on(VirtualTime())``).

    Sleeps add up even when threads sleep at once, so ``now`` never lags behind the latest
    time a token was granted at: after n tokens from a bucket of rate r and burst b, ``now``
    is at least (n - b) / r whatever the threads did. No real time passes.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def limiters(provider: Any) -> tuple[RateLimiter, RateLimiter | None]:
    """The request and launch limiters of an adapter's client (REST adapters keep them on ``api``)."""
    client = provider.client
    api = getattr(client, "api", client)
    return api.limiter, api.launch_limiter


__all__ = ["Harness", "VirtualTime", "limiters"]
