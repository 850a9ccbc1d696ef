"""The burst's watchdog: TTL and cost cap on an injectable clock, over the whole run (every cluster a
run moved through, lifecycle/recover.py: ``base_usd`` is what the clusters left behind cost).

It fires when ``now >= expires_at`` (TTL) or when ``base_usd + hourly_usd x elapsed >= max_cost_usd``
(Decimal, no rounding; compared as ``(base x 3600 + hourly x seconds) >= max_cost x 3600``), or when the
metered spend (every instance, replacements included) reaches the cap.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

from provisioner.errors import ProvisionerError
from provisioner.money import cents_text, round_cents, usd_text
from provisioner.termtext import when_text


class BurstStopped(ProvisionerError):
    """The watchdog ended the burst (TTL or budget); the cluster was torn down."""

    exit_code = 124


class Watchdog:
    """TTL and cost cap on an injectable clock. ``reason(now)`` says why to stop, or None."""

    def __init__(
        self,
        started_at: dt.datetime,
        *,
        hourly_usd: Decimal,
        expires_at: dt.datetime | None,
        max_cost_usd: Decimal | None,
        warn_cost_usd: Decimal | None = None,
    ) -> None:
        self.started_at = started_at
        self.hourly_usd = hourly_usd
        self.expires_at = expires_at
        self.max_cost_usd = max_cost_usd
        self.warn_cost_usd = warn_cost_usd
        """``--on-budget warn``: the budget warned about at 50/80/100 %, never stopped at."""
        self.warned = 0
        self.metered: Callable[[dt.datetime], int] | None = None
        """Cents metered over every instance (replacements included, heal.py); the cap counts the larger."""
        self.base_usd = Decimal(0)
        """What the clusters the run moved off cost (``moved``)."""

    def moved(self, now: dt.datetime, hourly_usd: Decimal, base_usd: Decimal) -> None:
        """The run now runs on a new cluster at ``hourly_usd``; the ones before it cost ``base_usd``."""
        self.started_at, self.hourly_usd, self.base_usd = now, hourly_usd, base_usd

    def warning(self, now: dt.datetime) -> str | None:
        """The budget line once per level reached (50, 80, 100 % of ``warn_cost_usd``), else None."""
        if self.warn_cost_usd is None:
            return None
        spent = self.spent_usd(now)
        level = max((lvl for lvl in (50, 80, 100) if spent * 100 >= self.warn_cost_usd * lvl), default=0)
        if level <= self.warned:
            return None
        self.warned = level
        return (
            f"budget: {level} % reached (about {cents_text(round_cents(spent))} of {usd_text(self.warn_cost_usd)}); "
            "on-budget warn: the job goes on"
        )

    def spent_usd(self, now: dt.datetime) -> Decimal:
        """Exact cost so far: hourly x elapsed seconds / 3600 (microseconds counted), or what was
        metered over every instance when that is more (a replacement's minimum billed period)."""
        elapsed = now - self.started_at
        micros = Decimal(elapsed.days * 86_400_000_000 + elapsed.seconds * 1_000_000 + elapsed.microseconds)
        hourly = self.base_usd + self.hourly_usd * micros / Decimal(3_600_000_000)
        return max(hourly, Decimal(self.metered(now)) / 100) if self.metered is not None else hourly

    def reason(self, now: dt.datetime) -> str | None:
        if self.expires_at is not None and now >= self.expires_at:
            return f"TTL reached at {when_text(self.expires_at)}"
        if self.max_cost_usd is not None:
            elapsed = now - self.started_at
            micros = elapsed.days * 86_400_000_000 + elapsed.seconds * 1_000_000 + elapsed.microseconds
            if self.base_usd * 3_600_000_000 + self.hourly_usd * micros >= self.max_cost_usd * 3_600_000_000:
                return f"cost cap {usd_text(self.max_cost_usd)} reached ({usd_text(self.hourly_usd)}/h)"
            if self.metered is not None and self.metered(now) >= self.max_cost_usd * 100:
                return f"cost cap {usd_text(self.max_cost_usd)} reached (replacements included)"
        return None


__all__ = ["BurstStopped", "Watchdog"]
