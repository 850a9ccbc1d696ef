"""Faults a fake can be told to answer with (``FakeApp.faults``), injected per route or route kind.

``faults.inject(kind, route=None, times=1, after=0, **params)``; ``route`` is a route
name or kind (None: every route); the fault skips ``after`` matching requests, then
fires ``times`` times (None: forever). Kinds: ``http_error`` (``status``, ``message``),
``rate_limit`` (429 + ``Retry-After: retry_after_s``), ``invalid_key``,
``insufficient_balance``, ``timeout`` (the request is processed, then the answer is held
``delay_s`` seconds: the launch happened but the client did not hear), ``capacity_after``
(``k`` more instances launch, then capacity errors; ``partial=True`` lets a batch launch
fewer than asked where the provider would), and ``slow_boot`` (instances created while it
is active stay pending for ``polls`` list/get polls or ``seconds``), ``lose_answer`` (the
request is processed, unless ``processed=False``, and its answer dropped: the connection is
closed on a real socket; in process ``FakeTransport`` raises ``httpx.ReadTimeout``, or
``httpx.RemoteProtocolError`` with ``as_timeout=False``; ``then``: a fault, as ``inject``'s
keyword arguments with ``kind``, injected when the answer is dropped) and ``drip`` (the answer's body is
sent ``chunk_bytes`` at a time, ``interval_s`` apart, through ``sleep``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

FAULT_KINDS = frozenset(
    {
        "http_error",
        "rate_limit",
        "invalid_key",
        "insufficient_balance",
        "timeout",
        "capacity_after",
        "slow_boot",
        "lose_answer",
        "drip",
    }
)


@dataclass
class Fault:
    kind: str
    route: str | None = None
    times: int | None = 1
    after: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    seen: int = 0
    fired: int = 0
    used: int = 0  # capacity_after: instances already granted

    def matches(self, route_name: str, route_kind: str) -> bool:
        return self.route is None or self.route in (route_name, route_kind)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times


class Faults:
    """The faults injected into one app. Thread-safe through the app's lock."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.active: list[Fault] = []

    def inject(
        self, kind: str, *, route: str | None = None, times: int | None = 1, after: int = 0, **params: Any
    ) -> Fault:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(FAULT_KINDS)}")
        fault = Fault(kind, route, times, after, dict(params))
        with self._lock:
            self.active.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.active.clear()

    def take(self, kinds: Iterable[str], route_name: str, route_kind: str) -> Fault | None:
        """The first matching fault of ``kinds`` that fires on this request (counts it)."""
        kinds = tuple(kinds)
        with self._lock:
            for fault in self.active:
                if fault.kind not in kinds or fault.exhausted or not fault.matches(route_name, route_kind):
                    continue
                fault.seen += 1
                if fault.seen <= fault.after:
                    continue
                fault.fired += 1
                return fault
        return None

    def grant_capacity(self, wanted: int, route_name: str = "launch") -> tuple[int, bool]:
        """How many of ``wanted`` instances may launch now, and whether partial grants are allowed.

        With no ``capacity_after`` fault every launch is granted. The caller launches the
        granted count (or none if partial launches are not allowed and fewer were granted).
        """
        with self._lock:
            granted, partial = wanted, False
            for fault in self.active:
                if fault.kind != "capacity_after" or not fault.matches(route_name, "launch"):
                    continue
                left = max(int(fault.params.get("k", 0)) - fault.used, 0)
                granted = min(granted, left)
                partial = partial or bool(fault.params.get("partial", False))
            if granted < wanted and not partial:
                granted = 0
            for fault in self.active:
                if fault.kind == "capacity_after" and fault.matches(route_name, "launch"):
                    fault.used += granted
            return granted, partial

    def boot_requirement(self) -> tuple[int, float]:
        """(polls, seconds) a newly created instance stays pending under ``slow_boot``."""
        with self._lock:
            for fault in self.active:
                if fault.kind == "slow_boot":
                    return int(fault.params.get("polls", 0)), float(fault.params.get("seconds", 0.0))
        return 0, 0.0


__all__ = ["FAULT_KINDS", "Fault", "Faults"]
