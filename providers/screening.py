"""Offers from a provider API are untrusted input: screen them before anyone ranks them.

A provider (or anything answering at its URL) can send an instance type with a newline, a
region that is a slurm.conf line, a negative or non-finite price, an integer with 400 digits,
or a million asks. Every adapter builds its offers through ``OfferScreen``:

- building one item's offers may fail on such data (pydantic, ``OverflowError`` ...): that
  item is dropped and counted, never raised (``guard``);
- every identifier (provider, instance type, region, zone, GPU model, offer id) must match
  the one ``SAFE_ID`` rule (``provisioner.offer.SAFE_ID`` when the core defines it);
- prices must be finite, above zero (a zero price is never ranked as free) and at most
  ``MAX_PRICE_PER_HOUR_USD`` per node; counts and sizes finite and bounded;
- at most ``MAX_OFFERS_PER_PROVIDER`` offers are kept.

What was dropped is counted by reason (``dropped``); ``catalog refresh`` reports the counts.
Pure: no network, no clock.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import ValidationError

from provisioner.offer import SAFE_ID as CORE_SAFE_ID
from provisioner.offer import Offer

T = TypeVar("T")

SAFE_ID: re.Pattern[str] = CORE_SAFE_ID
"""Identifiers: the core's one rule (``provisioner.offer.SAFE_ID``): a letter or digit, then up to 127
of ``A-Za-z0-9._:/+@-``; no spaces, no control characters."""

MAX_OFFERS_PER_PROVIDER = 100_000
MAX_PRICE_PER_HOUR_USD = 10_000
"""Per node. The dearest real node (8x B200 on AWS) costs about 114 $/h."""
MAX_GPUS_PER_NODE = 64
MAX_VCPUS = 4096
MAX_MEMORY_GIB = 65_536.0
MAX_DISK_GIB = 10_000_000.0
MAX_NODES = 100_000

_IDS = ("provider", "instance_type", "region", "zone", "gpu_model", "offer_id")
_PRICES = ("price_per_hour_usd", "spot_price_per_hour_usd")
_BOUNDED: dict[str, float] = {
    "gpus": MAX_GPUS_PER_NODE,
    "vcpus": MAX_VCPUS,
    "gpu_memory_gib": MAX_MEMORY_GIB,
    "memory_gib": MAX_MEMORY_GIB,
    "local_nvme_gib": MAX_DISK_GIB,
    "fabric_gbps": 1_000_000.0,
    "billing_increment_s": 31_622_400,
    "billing_minimum_s": 31_622_400,
    "egress_usd_per_gb": 1_000.0,
    "ingress_usd_per_gb": 1_000.0,
    "disk_usd_per_gib_hour": 1_000.0,
    "interruptions_per_node_hour": 1_000.0,
    "spot_interruptions_per_node_hour": 1_000.0,
    "max_nodes": MAX_NODES,
    "min_nodes": MAX_NODES,
}


def safe_id(value: str) -> bool:
    """Whether ``value`` passes the one identifier rule."""
    return SAFE_ID.fullmatch(value) is not None


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None


def offer_problem(offer: Offer) -> str | None:
    """Why ``offer`` must not be used (one short reason, no offer data in it), or None."""
    for name in _IDS:
        value = getattr(offer, name)
        if value is not None and not safe_id(str(value)):
            return f"unsafe {name}"
    prices = [getattr(offer, name) for name in _PRICES if getattr(offer, name) is not None]
    if not prices:
        return "no price"
    for value in prices:
        number = _finite(value)
        if number is None:
            return "non-finite price"
        if number <= 0:
            return "zero or negative price"
        if number > MAX_PRICE_PER_HOUR_USD:
            return "absurd price"
    for name, limit in _BOUNDED.items():
        value = getattr(offer, name, None)
        if value is None:
            continue
        number = _finite(value)
        if number is None or number < 0 or number > limit:
            return f"out-of-range {name}"
    return None


class OfferScreen:
    """Screens one provider's offers; ``dropped`` counts what was refused, by reason."""

    def __init__(self, provider: str, *, max_offers: int = MAX_OFFERS_PER_PROVIDER) -> None:
        self.provider = provider
        self.max_offers = max_offers
        self.dropped: Counter[str] = Counter()

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Run the building of one item's offers; bad data drops the item (counted), never raises."""
        try:
            yield
        except (ValidationError, ValueError, ArithmeticError, TypeError, KeyError, AttributeError):
            self.dropped["unreadable offer data"] += 1

    def build(self, items: Iterable[T], make: Callable[[T], Iterable[Offer]]) -> list[Offer]:
        """``make(item)`` for every item (guarded), then ``screen`` the result."""
        offers: list[Offer] = []
        for item in items:
            with self.guard():
                offers.extend(make(item))
        return self.screen(offers)

    def screen(self, offers: Iterable[Offer]) -> list[Offer]:
        """The offers without a problem, at most ``max_offers`` of them (the rest counted)."""
        kept: list[Offer] = []
        for offer in offers:
            problem = offer_problem(offer)
            if problem is not None:
                self.dropped[problem] += 1
            elif len(kept) >= self.max_offers:
                self.dropped[f"over the cap of {self.max_offers} offers"] += 1
            else:
                kept.append(offer)
        return kept


__all__ = ["MAX_OFFERS_PER_PROVIDER", "MAX_PRICE_PER_HOUR_USD", "SAFE_ID", "OfferScreen", "offer_problem", "safe_id"]
