"""Compute Engine prices from Cloud Billing Catalog SKUs (``services/6F81-5844-456A``). Pure.

A GPU machine type's hourly price is the sum of what it is billed for:
``gpus x GPU SKU + vCPUs x "<family> Instance Core" SKU + GiB x "<family> Instance Ram" SKU``,
each read for the machine's region and usage type (``OnDemand``; ``Preemptible`` for spot).
A machine with any of the three missing is not priced (never under-priced). Bundled local
SSDs, boot disks and network are not included (docs/aws-gcp.md).

SKU descriptions (facts dated 2026-11-23, from public Billing Catalog listings): on-demand
``Nvidia H100 80GB GPU running in Americas``, ``A3 Instance Core running in Americas``,
``A3 Instance Ram running in Americas``; spot ``Spot Preemptible <...>`` or
``Nvidia <...> GPU attached to Spot Preemptible VMs running in <...>``, with
``category.usageType`` ``Preemptible``. The family per machine-type prefix and the GPU name per
accelerator beyond A2/A3/G2 and H100/A100/L4 are UNVERIFIED (``FAMILIES``, ``GPU_SKU_NAMES``).
Prices are exact: ``units + nanos / 10^9`` as Decimal, the sum rounded half-even to micro-USD.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

COMPUTE_SERVICE = "services/6F81-5844-456A"
"""Compute Engine's service id in the Cloud Billing Catalog."""
MICRO_USD = Decimal("0.000001")
FAMILIES = {
    "a2-": "A2",
    "a3-highgpu": "A3",
    "a3-edgegpu": "A3",
    "a3-megagpu": "A3Plus",
    "a3-ultragpu": "A3Ultra",
    "a4-": "A4",
    "g2-": "G2",
}
"""Machine-type prefix -> billing family of its Core/Ram SKUs (A3Plus for a3-megagpu: UNVERIFIED)."""
GPU_SKU_NAMES = {
    "nvidia-h100-80gb": "H100 80GB",
    "nvidia-h100-mega-80gb": "H100 80GB Mega",
    "nvidia-a100-80gb": "A100 80GB",
    "nvidia-tesla-a100": "A100 40GB",
    "nvidia-l4": "L4",
    "nvidia-h200-141gb": "H200 141GB",
    "nvidia-b200": "B200",
    "nvidia-tesla-t4": "Tesla T4",
    "nvidia-tesla-v100": "Tesla V100",
}
"""Accelerator type -> the GPU's name in its SKU description (``Nvidia <name> GPU ...``)."""
_USAGE = {"OnDemand": False, "Preemptible": True}
_SPOT = re.compile(r"^Spot Preemptible\s+")
_GPU = re.compile(r"^Nvidia (?P<name>.+?) GPU\b")
_PART = re.compile(r"^(?P<family>[A-Za-z0-9]+) Instance (?P<part>Core|Ram)\b")


@dataclass(frozen=True)
class SkuPrices:
    """USD per unit-hour by (region, spot, resource): resource is ``gpu:<name>``, ``core:<family>``
    or ``ram:<family>`` (per vCPU-hour, per GiB-hour, per GPU-hour)."""

    prices: Mapping[tuple[str, bool, str], Decimal]

    def machine_price(
        self, machine_type: str, accelerator: str, gpus: int, vcpus: int, memory_gib: Decimal, region: str, spot: bool
    ) -> Decimal | None:
        """The machine's hourly USD price (micro-USD, half-even), or None when a part is unpriced."""
        family = next((f for prefix, f in FAMILIES.items() if machine_type.startswith(prefix)), None)
        gpu = GPU_SKU_NAMES.get(accelerator)
        if family is None or gpu is None:
            return None
        parts = [(f"gpu:{gpu}", Decimal(gpus)), (f"core:{family}", Decimal(vcpus)), (f"ram:{family}", memory_gib)]
        total = Decimal(0)
        for resource, amount in parts:
            unit = self.prices.get((region, spot, resource))
            if unit is None:
                return None
            total += unit * amount
        return total.quantize(MICRO_USD, rounding=ROUND_HALF_EVEN) if total > 0 else None


def unit_price(sku: Mapping[str, Any]) -> Decimal | None:
    """The first-tier USD unit price of a SKU (a dict in the REST JSON shape), exact; None if absent."""
    for info in sku.get("pricingInfo") or []:
        expression = info.get("pricingExpression") or {}
        tiers = sorted(expression.get("tieredRates") or [], key=lambda t: float(t.get("startUsageAmount") or 0))
        for tier in tiers[:1]:
            money = tier.get("unitPrice") or {}
            if money.get("currencyCode", "USD") != "USD":
                return None
            return Decimal(str(money.get("units") or 0)) + Decimal(int(money.get("nanos") or 0)) / 10**9
    return None


def resource_of(description: str) -> str | None:
    """``gpu:H100 80GB`` / ``core:A3`` / ``ram:A3`` for the SKU descriptions we price; else None."""
    text = _SPOT.sub("", description.strip())
    found = _GPU.match(text)
    if found:
        return f"gpu:{found.group('name')}"
    found = _PART.match(text)
    if found:
        return f"{found.group('part').lower()}:{found.group('family')}"
    return None


def sku_prices(skus: Iterable[Mapping[str, Any]], regions: Iterable[str] | None = None) -> SkuPrices:
    """Index SKUs (REST JSON dicts) by (region, spot, resource). Unknown usage types (commitments)
    and descriptions are skipped; of two SKUs for one key the lower price wins."""
    wanted = set(regions) if regions is not None else None
    prices: dict[tuple[str, bool, str], Decimal] = {}
    for sku in skus:
        category = sku.get("category") or {}
        spot = _USAGE.get(str(category.get("usageType", "")))
        resource = resource_of(str(sku.get("description", "")))
        price = unit_price(sku)
        if spot is None or resource is None or price is None or price <= 0:
            continue
        for region in sku.get("serviceRegions") or []:
            if wanted is not None and region not in wanted:
                continue
            key = (str(region), spot, resource)
            prices[key] = min(price, prices.get(key, price))
    return SkuPrices(prices)


__all__ = ["COMPUTE_SERVICE", "FAMILIES", "GPU_SKU_NAMES", "SkuPrices", "resource_of", "sku_prices", "unit_price"]
