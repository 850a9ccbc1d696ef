"""What the realize core reaches the outside through: the ``Runtime`` both engines pass down.

``Runtime`` bundles every effect (adapters by name, commands on nodes, progress events, the
clocks, held signals) with a default for each, so the direct engine, the Pulumi program's
dynamic resources and the tests share one set of functions (``realize.sshpass``,
``realize.readiness``, ``realize.launch``) and differ only in what they inject.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from provisioner.providers.base import Node, Provider
from provisioner.realize.events import Emit, no_events
from provisioner.realize.interrupts import Interrupts
from provisioner.realize.remote import Remote


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _get_provider(name: str) -> Provider:
    from provisioner.providers.registry import get_provider

    return get_provider(name)


@dataclass(frozen=True)
class Timeouts:
    running_s: float = 900.0
    ready_s: float = 1200.0
    deleted_s: float = 600.0
    interval_s: float = 5.0
    max_interval_s: float = 30.0


@dataclass
class Runtime:
    """Everything ``bring_up``/``tear_down`` reach the outside through; every field has a default.

    ``remote``: commands on nodes (default: OpenSSH with the cluster key, see ``remote``);
    ``provider_for``: adapter by name (default: the registry, configured from the environment);
    ``now`` (UTC datetimes for records and expiry), ``clock``/``sleep`` (polling);
    ``interrupts``: held during the purchase so Ctrl-C never lands mid-launch; ``environ``: where
    the SSH pass reads the checkpoint store's credentials (realize/store_credentials.py).
    """

    remote: Remote | None = None
    provider_for: Callable[[str], Provider] = _get_provider
    emit: Emit = no_events
    now: Callable[[], dt.datetime] = utc_now
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    timeouts: Timeouts = field(default_factory=Timeouts)
    interrupts: Interrupts | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    touched: set[str] = field(default_factory=set)
    """Providers a purchase was attempted on (what a cleanup must look at)."""
    _providers: dict[str, Provider] = field(default_factory=dict, repr=False)

    def provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = self.provider_for(name)
        return self._providers[name]

    def held(self) -> AbstractContextManager[None]:
        return self.interrupts.deferred() if self.interrupts is not None else nullcontext()

    def wait(
        self, poll: Callable[[], list[Node]], done: Callable[[list[Node]], bool], *, timeout_s: float, what: str
    ) -> list[Node]:
        from provisioner.waiting import wait_until

        return wait_until(
            poll,
            done,
            timeout_s=timeout_s,
            interval_s=self.timeouts.interval_s,
            max_interval_s=self.timeouts.max_interval_s,
            what=what,
            clock=self.clock,
            sleep=self.sleep,
        )


__all__ = ["Runtime", "Timeouts", "utc_now"]
