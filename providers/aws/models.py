"""What the AWS adapter reads out of EC2 and Pricing answers (botocore's dict shapes). Pure.

Shapes: ../shared/provider-apis/aws/ec2_operation_shapes_botocore.json and
service_quotas_and_pricing_shapes_botocore.json (botocore 1.43.11). Fields we do not use are
ignored; a malformed item makes its builder raise, and the offer screen drops it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

MIB_PER_GIB = 1024
_GBPS = re.compile(r"(\d+(?:\.\d+)?)\s*Gigabit", re.IGNORECASE)


@dataclass(frozen=True)
class GpuInstanceType:
    """One GPU instance type from DescribeInstanceTypes."""

    instance_type: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: float
    vcpus: int
    memory_gib: float
    local_nvme_gib: float
    efa_supported: bool
    max_efa_interfaces: int
    network_cards: int
    network_gbps: float
    placement_strategies: tuple[str, ...]
    spot_supported: bool

    @property
    def family(self) -> str:
        """``p5`` for ``p5.48xlarge``, ``p6-b200`` for ``p6-b200.48xlarge``."""
        return self.instance_type.split(".", 1)[0]


def canonical_gpu(name: str) -> str:
    """AWS ``GpuInfo.Gpus[].Name`` -> the catalog's model name: ``"A10G"``, ``"L40S"``, ``"H100"``."""
    return re.sub(r"[\s_-]+", "", name).upper()


def network_gbps(network: dict[str, Any]) -> float:
    """Sum of the network cards' peak bandwidth, else the ``NetworkPerformance`` text (``"3200 Gigabit"``)."""
    cards = network.get("NetworkCards") or []
    total = sum(float(c.get("PeakBandwidthInGbps") or c.get("BaselineBandwidthInGbps") or 0) for c in cards)
    if total > 0:
        return total
    found = _GBPS.search(str(network.get("NetworkPerformance", "")))
    return float(found.group(1)) if found else 0.0


def gpu_instance_type(item: dict[str, Any]) -> GpuInstanceType | None:
    """One DescribeInstanceTypes item -> a GpuInstanceType; None for a type without NVIDIA GPUs."""
    gpu_info = item.get("GpuInfo") or {}
    gpus = [g for g in gpu_info.get("Gpus", []) if str(g.get("Manufacturer", "")).upper() == "NVIDIA"]
    if not gpus:
        return None
    first = gpus[0]
    count = sum(int(g.get("Count", 0)) for g in gpus)
    if count < 1:  # moto lists a few types with a GPU entry of count 0
        return None
    memory_mib = float(first.get("MemoryInfo", {}).get("SizeInMiB", 0))
    network = item.get("NetworkInfo") or {}
    storage = item.get("InstanceStorageInfo") or {}
    nvme = str(storage.get("NvmeSupport", "unsupported")) in ("required", "supported")
    return GpuInstanceType(
        instance_type=str(item["InstanceType"]),
        gpu_model=canonical_gpu(str(first["Name"])),
        gpus=count,
        gpu_memory_gib=memory_mib / MIB_PER_GIB,
        vcpus=int(item["VCpuInfo"]["DefaultVCpus"]),
        memory_gib=float(item["MemoryInfo"]["SizeInMiB"]) / MIB_PER_GIB,
        local_nvme_gib=float(storage.get("TotalSizeInGB", 0)) if nvme else 0.0,
        efa_supported=bool(network.get("EfaSupported", False)),
        max_efa_interfaces=int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)),
        network_cards=int(network.get("MaximumNetworkCards", 1) or 1),
        network_gbps=network_gbps(network),
        placement_strategies=tuple(
            str(s) for s in (item.get("PlacementGroupInfo") or {}).get("SupportedStrategies", [])
        ),
        spot_supported="spot" in item.get("SupportedUsageClasses", ["spot"]),
    )


def zones_by_type(offerings: list[dict[str, Any]]) -> dict[str, list[str]]:
    """DescribeInstanceTypeOfferings items -> {instance type: sorted availability zones}."""
    found: dict[str, set[str]] = {}
    for item in offerings:
        found.setdefault(str(item["InstanceType"]), set()).add(str(item["Location"]))
    return {name: sorted(zones) for name, zones in found.items()}


def latest_spot_prices(history: list[dict[str, Any]]) -> dict[tuple[str, str], Decimal]:
    """SpotPriceHistory items -> {(instance type, zone): the latest price}, exact."""
    latest: dict[tuple[str, str], tuple[Any, Decimal]] = {}
    for item in history:
        key = (str(item["InstanceType"]), str(item["AvailabilityZone"]))
        price = Decimal(str(item["SpotPrice"]))
        stamp = item.get("Timestamp")
        if key not in latest or (stamp is not None and latest[key][0] is not None and stamp > latest[key][0]):
            latest[key] = (stamp, price)
    return {key: price for key, (_, price) in latest.items()}


def on_demand_price(price_list_item: str) -> tuple[str, str, Decimal] | None:
    """One Pricing API ``PriceList`` JSON string -> (instance type, region code, USD per hour).

    Only Linux, shared tenancy, no pre-installed software, ``capacitystatus`` Used, hourly
    on-demand terms count; anything else (or a price of zero) is None. Parsed as Decimal,
    never through float.
    """
    document = json.loads(price_list_item, parse_float=Decimal)
    attributes = document.get("product", {}).get("attributes", {})
    if (
        attributes.get("operatingSystem") != "Linux"
        or attributes.get("tenancy") != "Shared"
        or attributes.get("preInstalledSw", "NA") != "NA"
        or attributes.get("capacitystatus", "Used") != "Used"
    ):
        return None
    for term in (document.get("terms", {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            if str(dimension.get("unit", "")).lower() not in ("hrs", "hours"):
                continue
            try:
                usd = Decimal(str(dimension["pricePerUnit"]["USD"]))
            except (KeyError, InvalidOperation):
                continue
            if usd > 0:
                return str(attributes["instanceType"]), str(attributes["regionCode"]), usd.normalize()
    return None


def tag_map(instance: dict[str, Any]) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in instance.get("Tags", [])}


__all__ = [
    "GpuInstanceType",
    "canonical_gpu",
    "gpu_instance_type",
    "latest_spot_prices",
    "network_gbps",
    "on_demand_price",
    "tag_map",
    "zones_by_type",
]
