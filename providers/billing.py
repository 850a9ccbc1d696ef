"""Optional abilities for money after purchase: node billing times and the provider's own billing record.

- ``SupportsUsage``: each node's billing span as the provider reports it (launch and termination
  times from its instance listing or its event log), terminated nodes included where the provider
  still reports them. What ``provisioner.metering`` bills by the catalog's rules.
- ``SupportsBilling``: what the provider's billing API says the cluster cost (RunPod
  ``/v2/billing/pods``, Vast.ai ``/api/v0/charges``, Fluence ``/v1/billing/charges/aggregated``,
  AWS Cost Explorer ``GetCostAndUsage`` by the cluster tag), with ``differences``: where the
  provider bills otherwise than the catalog's rules say (docs/costs.md).

Both are read-only and raise the error tree's ProviderError like every adapter call.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Protocol, runtime_checkable

from provisioner.metering import NodeUsage
from provisioner.offer import Offer
from provisioner.providers.base import parse_expiry


@dataclass(frozen=True)
class Billed:
    """A provider's billing record for one cluster over a period, exact."""

    total_usd: Decimal
    source: str
    """The endpoint it came from (``runpod /v2/billing/pods``)."""
    terms_usd: Mapping[str, Decimal] = field(default_factory=dict)
    differences: tuple[str, ...] = ()

    @property
    def total_cents(self) -> int:
        return int(self.total_usd.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN) * 100)


def provider_time(text: str | None) -> dt.datetime | None:
    """A provider's RFC 3339 / ISO-8601 timestamp as an aware UTC datetime; None when absent or unreadable."""
    return parse_expiry(text)


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


MAX_BILL_USD = Decimal(10**8)
"""Largest amount believed from a billing answer (a thousand 8-GPU nodes for a year is about $10^8)."""


class BillAmountError(ValueError):
    """A billing answer's amount that is no amount of money: not a number, not finite, or absurd."""


def usd(value: object) -> Decimal:
    """An amount from a provider's JSON (a number or a decimal string) as the decimal it was written as.
    BillAmountError for anything else, a non-finite value, or one beyond +-``MAX_BILL_USD``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise BillAmountError(f"an amount of type {type(value).__name__}")
    try:
        amount = Decimal(str(value).strip())
    except ArithmeticError:
        raise BillAmountError(f"an amount that is not a number ({str(value)[:40]!r})") from None
    if not amount.is_finite() or abs(amount) > MAX_BILL_USD:
        raise BillAmountError(f"an amount out of range ({str(value)[:40]})")
    return amount


def checked(billed: Billed) -> Billed:
    """``billed`` when its total and terms are finite, not negative and below ``MAX_BILL_USD``; else
    BillAmountError saying which (a negative total is a credit or a provider's error, never a cost)."""
    for what, amount in (("total", billed.total_usd), *billed.terms_usd.items()):
        if not isinstance(amount, Decimal) or not amount.is_finite() or abs(amount) > MAX_BILL_USD:
            raise BillAmountError(f"{billed.source}: {what} out of range ({str(amount)[:40]})")
        if amount < 0:
            raise BillAmountError(f"{billed.source}: a negative {what} (${amount}) is no cost; not recorded")
    return billed


@runtime_checkable
class SupportsUsage(Protocol):
    def node_usage(
        self, cluster_id: str, node_ids: Mapping[str, str], since: dt.datetime | None = None
    ) -> list[NodeUsage]:
        """The billing span of each node of the cluster (``node_ids``: name -> id the client knows of),
        looking no further back than ``since`` (None: as far as the provider keeps)."""


@runtime_checkable
class SupportsBilling(Protocol):
    def billed(self, cluster_id: str, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
        """What the provider billed the cluster's nodes between ``start`` and ``end``."""


@runtime_checkable
class SupportsPriceCheck(Protocol):
    def price_check(self, usages: Sequence[NodeUsage], offer: Offer, spot: bool) -> Billed:
        """What ``usages`` cost at the provider's own list prices now and by its own billing rule (GCP: Cloud
        Billing Catalog SKUs x the instances' times), where it publishes prices but no per-resource bill."""


__all__ = [
    "MAX_BILL_USD",
    "BillAmountError",
    "Billed",
    "SupportsBilling",
    "SupportsPriceCheck",
    "SupportsUsage",
    "checked",
    "provider_time",
    "rfc3339",
    "usd",
]
