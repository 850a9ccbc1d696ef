"""What a fake bills: each instance's span on the fake's clock at the price it was sold at.

Every fake has ``app.clock`` (aware UTC datetimes; the wall clock unless a test injects one) and
``app.meter``: a fake calls ``meter.start(id, usd_per_hour)`` when it sells an instance and
``meter.stop(id)`` when it deletes one. Its billing endpoints then bill the spans by the
provider's own documented rule (``billed_usd``: increment and minimum as the provider states
them), written here independently of the catalog's rules that provisioner.metering applies, so a
reconciliation test compares two separate implementations.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

Clock = Callable[[], dt.datetime]


def wall_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stamp(when: dt.datetime, *, micros: bool = False) -> str:
    """RFC 3339 UTC with a ``Z`` (``2026-11-26T01:00:00Z``), microseconds when asked."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micros else "%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Span:
    instance_id: str
    usd_per_hour: Decimal
    start: dt.datetime
    end: dt.datetime | None = None
    cluster: str | None = None
    name: str = ""


class Meter:
    """Instance spans on ``clock``; thread-safe."""

    def __init__(self, clock: Callable[[], Clock]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.spans: dict[str, Span] = {}

    def start(
        self, instance_id: str, usd_per_hour: Decimal | float | str, *, cluster: str | None = None, name: str = ""
    ) -> Span:
        span = Span(instance_id, Decimal(str(usd_per_hour)), self._clock()(), cluster=cluster, name=name)
        with self._lock:
            self.spans[instance_id] = span
        return span

    def stop(self, instance_id: str) -> None:
        with self._lock:
            span = self.spans.get(instance_id)
            if span is not None and span.end is None:
                span.end = self._clock()()

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()

    def billed_usd(
        self,
        span: Span,
        *,
        increment_s: int = 1,
        minimum_s: int = 0,
        window: tuple[dt.datetime, dt.datetime] | None = None,
    ) -> Decimal:
        """The span (clipped to ``window``) billed in whole ``increment_s`` steps, at least ``minimum_s``."""
        start, end = span.start, span.end or self._clock()()
        if window is not None:
            start, end = max(start, window[0]), min(end, window[1])
        if end <= start:
            return Decimal(0)
        span_ = end - start
        seconds = -(-((span_.days * 86_400 + span_.seconds) * 1_000_000 + span_.microseconds) // 1_000_000)
        billed = max(-(-seconds // increment_s) * increment_s, minimum_s)
        return span.usd_per_hour * billed / 3600


__all__ = ["Clock", "Meter", "Span", "stamp", "wall_clock"]
