"""The Vast.ai fake's marketplace: the asks it sells, how a search filter matches one, and the
instance row a rent makes. Plain data and functions; ``fakes.vastai`` serves them.

Search filters are matched as Vast's server matches what the official client sends: a number
typed on the command line arrives as a string (``{"eq": "1"}``, ``{"gt": "0.99"}``) and compares
as the number it spells; ``gpu_name`` accepts ``RTX_4090`` for ``RTX 4090``; ``geolocation``
matches the country code.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable, Iterable
from typing import Any

NOT_FILTERS = frozenset({"order", "limit", "type", "allocated_storage", "disable_bundling"})


class BadFilter(ValueError):
    """A filter value that cannot be compared with the field (answered as 400 invalid_request)."""


# (gpu_name, num_gpus, gpu_ram MB, vCPUs, cpu_ram MB, disk GB, dph_total, min_bid, geolocation, asks)
MARKET: tuple[tuple[str, int, int, int, int, int, float, float, str, int], ...] = (
    ("RTX 4090", 1, 24564, 16, 64312, 250, 0.38, 0.21, "Texas, US", 40),
    ("RTX 4090", 2, 24564, 32, 128624, 500, 0.74, 0.40, "Ontario, CA", 6),
    ("H100 SXM", 8, 81559, 192, 2063764, 4000, 18.40, 11.20, "Virginia, US", 36),
    ("H100 PCIE", 1, 81559, 24, 257970, 500, 2.10, 1.30, "Oslo, NO", 4),
    ("H200", 8, 143771, 224, 2063764, 8000, 25.60, 16.00, "Quebec, CA", 4),
    ("A100 SXM4", 4, 81920, 64, 515940, 2000, 4.40, 2.60, "Hesse, DE", 8),
    ("L40S", 1, 46068, 32, 257970, 500, 0.79, 0.45, "Quebec, CA", 10),
)


def country(geolocation: str) -> str:
    return geolocation.rpartition(",")[2].strip()


def _number(have: Any, want: Any) -> Any:
    """``want`` as the kind of number ``have`` is, when it arrived as a string (the CLI's form)."""
    if isinstance(want, str) and isinstance(have, int | float) and not isinstance(have, bool):
        try:
            return float(want)
        except ValueError:
            raise BadFilter(f"cannot compare {want!r} with a number") from None
    return want


def _same(field: str, have: Any, want: Any) -> bool:
    if field == "geolocation" and isinstance(have, str):
        return bool(country(have) == want or have == want)
    if field == "gpu_name" and isinstance(want, str):
        return bool(have == want.replace("_", " "))
    return bool(have == _number(have, want))


def _ordered(op: str, have: Any, want: Any) -> bool:
    if have is None:
        return False
    want = _number(have, want)
    try:
        return bool({"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op])
    except TypeError:
        raise BadFilter(f"cannot compare {want!r} with {have!r}") from None


def passes(field: str, have: Any, condition: Any) -> bool:
    """One ``{op: value}`` filter against an ask's field value; BadFilter when they cannot compare."""
    if not isinstance(condition, dict):
        return _same(field, have, condition)
    for op, want in condition.items():
        if op == "eq" and not _same(field, have, want):
            return False
        if op == "neq" and _same(field, have, want):
            return False
        if op == "in" and not any(_same(field, have, w) for w in want):
            return False
        if op == "notin" and any(_same(field, have, w) for w in want):
            return False
        if op in ("gt", "gte", "lt", "lte") and not _ordered(op, have, want):
            return False
    return True


def _sort_key(field: str) -> Callable[[dict[str, Any]], tuple[bool, Any]]:
    """Sort by ``field``, asks without it last (for ascending order)."""

    def key(ask: dict[str, Any]) -> tuple[bool, Any]:
        return ask.get(field) is None, ask.get(field) or 0

    return key


def search(asks: Iterable[dict[str, Any]], query: dict[str, Any]) -> list[dict[str, Any]]:
    """The asks a ``POST /api/v0/bundles/`` body selects, ordered and limited; BadFilter as ``passes``.

    The spec's defaults ``verified=true rentable=true rented=false`` apply when absent; ``order`` is
    a list of [field, direction] pairs (the first the main key), ``limit`` defaults to 64.
    """
    filters: dict[str, Any] = {"verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False}}
    filters.update({k: v for k, v in query.items() if k not in NOT_FILTERS})
    found = [
        ask
        for ask in asks
        if all(field not in ask or passes(field, ask[field], cond) for field, cond in filters.items())
    ]
    for field, direction in reversed(query.get("order") or [["score", "desc"]]):
        found.sort(key=_sort_key(field), reverse=str(direction).lower().startswith("d"))
    return found[: int(query.get("limit") or 64)]


def build_market(seed_id: int = 4_100_000) -> dict[int, dict[str, Any]]:
    """The asks the fake sells, deterministic: MARKET rows plus a few the CLI filters hide."""
    asks: dict[int, dict[str, Any]] = {}
    ids = itertools.count(seed_id)
    for row_no, (gpu, n, ram, cpus, cpu_ram, disk, dph, bid, geo, count) in enumerate(MARKET):
        for k in range(count):
            ask_id = next(ids)
            asks[ask_id] = _ask(
                ask_id,
                row_no * 100 + k,
                gpu,
                n,
                ram,
                cpus,
                cpu_ram,
                disk,
                round(dph * (1 + 0.01 * (k % 5)), 4),
                bid,
                geo,
                reliability=round(0.999 - 0.004 * (k % 7), 4),
            )
    hidden = _ask(next(ids), 990, "RTX 4090", 1, 24564, 16, 64312, 250, 0.19, 0.10, "Texas, US", 0.61)
    hidden["verification"], hidden["verified"] = "unverified", False
    asks[hidden["id"]] = hidden
    return asks


def _ask(
    ask_id: int,
    machine: int,
    gpu: str,
    n: int,
    ram: int,
    cpus: int,
    cpu_ram: int,
    disk: int,
    dph: float,
    bid: float,
    geo: str,
    reliability: float,
) -> dict[str, Any]:
    storage_cost = 0.15  # $/GB-month
    storage_hour = round(storage_cost * 20 / 730, 6)  # the 20 GB the price assumes, per hour
    return {
        "id": ask_id,
        "ask_contract_id": ask_id,
        "bundle_id": ask_id + 500_000_000,
        "bundled_results": None,
        "machine_id": 30_000 + machine,
        "host_id": 7_000 + machine % 13,
        "hostname": None,
        "gpu_name": gpu,
        "num_gpus": n,
        "gpu_ram": ram,
        "gpu_total_ram": ram * n,
        "gpu_frac": 1.0,
        "gpu_arch": "nvidia",
        "compute_cap": 900 if gpu.startswith("H") else 890,
        "cuda_max_good": 12.8,
        "driver_version": "570.124.06",
        "gpu_ids": [machine * 10 + i for i in range(n)],
        "gpu_lanes": 16,
        "gpu_mem_bw": 3350.0 if gpu.startswith("H") else 1008.0,
        "gpu_max_power": 700,
        "gpu_max_temp": 87,
        "gpu_display_active": False,
        "bw_nvlink": 450.0 if n >= 4 else 0.0,
        "cpu_arch": "amd64",
        "cpu_cores": cpus * 2,
        "cpu_cores_effective": float(cpus),
        "cpu_ghz": 3.1,
        "cpu_name": "AMD EPYC 9454 48-Core Processor",
        "cpu_ram": cpu_ram,
        "has_avx": 1,
        "disk_space": float(disk),
        "disk_bw": 4200.0,
        "disk_name": "NVMe SSD",
        "dph_base": round(dph - storage_hour, 6),
        "dph_total": dph,
        "min_bid": bid,
        "is_bid": False,
        "storage_cost": storage_cost,
        "storage_total_cost": storage_hour,
        "vram_costperhour": 0.00002,
        "inet_up": 2000.0,
        "inet_down": 4000.0,
        "inet_up_cost": 0.004,
        "inet_down_cost": 0.002,
        "internet_up_cost_per_tb": 4.0,
        "internet_down_cost_per_tb": 2.0,
        "reliability": reliability,
        "reliability2": reliability,
        "reliability_mult": 0.99,
        "expected_reliability": reliability,
        "score": round(200.0 * reliability / dph, 3),
        "dlperf": 100.0 * n,
        "dlperf_per_dphtotal": round(100.0 * n / dph, 3),
        "total_flops": 82.6 * n,
        "flops_per_dphtotal": round(82.6 * n / dph, 3),
        "geolocation": geo,
        "geolocode": 1000 + machine,
        "public_ipaddr": f"198.51.100.{machine % 250 + 1}",
        "static_ip": True,
        "verification": "verified",
        "verified": True,
        "vericode": 1,
        "external": False,
        "datacenter": True,
        "hosting_type": 1,
        "rentable": True,
        "rented": False,
        "duration": 2_592_000.0,
        "start_date": 1_893_450_000.0,
        "end_date": 1_896_042_000,
        "direct_port_count": 100,
        "mobo_name": "H13SSL-N",
        "os_version": "22.04",
        "pci_gen": 5,
        "pcie_bw": 52.0,
        "logo": "/static/logos/vastai_small2.png",
        "webpage": None,
        "vms_enabled": False,
        "is_vm_deverified": False,
        "resource_type": "gpu",
        "cluster_id": None,
        "credit_discount_max": 0.4,
        "discount_rate": 0.0,
        "discounted_dph_total": dph,
        "rn": 1,
        "dph_total_adj": dph,
        "time_remaining": "",
        "time_remaining_isbid": "",
    }


def env_pairs(env: Any) -> list[list[str]]:
    """A create body's ``env`` (the client's object, or the spec's docker-flag string) as the
    ``extra_env`` pairs an instance row reports: ``[["K", "V"], ["-p 22:22", "1"]]``."""
    if isinstance(env, dict):
        return [[str(k), str(v)] for k, v in env.items()]
    words = shlex.split(env) if isinstance(env, str) else []
    pairs = []
    for flag, value in itertools.pairwise(words):
        if flag == "-e" and "=" in value:
            pairs.append(value.split("=", 1))
        elif flag == "-p":
            pairs.append([f"-p {value}", "1"])
    return pairs


def instance_row(instance_id: int, ask: dict[str, Any], body: dict[str, Any], now: float) -> dict[str, Any]:
    """The instance a rent of ``ask`` with the create body ``body`` makes, as Vast lists it (before boot)."""
    disk = float(body.get("disk") or 8.0)
    dph = round(ask["dph_base"] + ask["storage_cost"] * disk / 730, 6)
    octet = instance_id % 250 + 1
    return {
        "id": instance_id,
        "ask_id": ask["id"],
        "bundle_id": ask["bundle_id"],
        "machine_id": ask["machine_id"],
        "host_id": ask["host_id"],
        "actual_status": None,
        "intended_status": body.get("target_state") or "running",
        "cur_state": "running",
        "next_state": "running",
        "status_msg": None,
        "label": body.get("label"),
        "template_id": None,
        "template_hash_id": None,
        "template_name": None,
        "image_uuid": body.get("image") or "vastai/base-image:@vastai-automatic-tag",
        "image_args": list(body.get("args") or []),
        "image_runtype": body.get("runtype") or "ssh",
        "extra_env": env_pairs(body.get("env")),
        "onstart": body.get("onstart") or "",
        "jupyter_token": f"{instance_id:064x}",
        "public_ipaddr": ask["public_ipaddr"],
        "local_ipaddrs": f"10.8.{octet}.2 172.17.0.1",
        "ssh_host": f"ssh{instance_id % 9 + 1}.vast.ai",
        "ssh_idx": str(instance_id % 9 + 1),
        "ssh_port": 20000 + instance_id % 10000,
        "machine_dir_ssh_port": 30000 + instance_id % 10000,
        "direct_port_start": 40000,
        "direct_port_end": 40099,
        "direct_port_count": 100,
        "gpu_name": ask["gpu_name"],
        "num_gpus": ask["num_gpus"],
        "gpu_ram": ask["gpu_ram"],
        "gpu_totalram": ask["gpu_total_ram"],
        "gpu_frac": 1.0,
        "gpu_arch": "nvidia",
        "gpu_lanes": 16,
        "gpu_mem_bw": ask["gpu_mem_bw"],
        "gpu_util": None,
        "gpu_temp": None,
        "bw_nvlink": ask["bw_nvlink"],
        "cpu_arch": "amd64",
        "cpu_cores": ask["cpu_cores"],
        "cpu_cores_effective": ask["cpu_cores_effective"],
        "cpu_name": ask["cpu_name"],
        "cpu_ram": ask["cpu_ram"],
        "cpu_util": 0.0,
        "disk_space": disk,
        "disk_bw": ask["disk_bw"],
        "disk_name": ask["disk_name"],
        "disk_usage": 0.0,
        "disk_util": 0.0,
        "mem_limit": None,
        "mem_usage": None,
        "vmem_usage": None,
        "dph_base": ask["dph_base"],
        "dph_total": dph,
        "min_bid": ask["min_bid"],
        "is_bid": body.get("price") is not None,
        "storage_cost": ask["storage_cost"],
        "storage_total_cost": round(ask["storage_cost"] * disk / 730, 6),
        "vram_costperhour": ask["vram_costperhour"],
        "credit_balance": None,
        "credit_discount": None,
        "credit_discount_max": 0.4,
        "reliability2": ask["reliability2"],
        "geolocation": ask["geolocation"],
        "country_code": country(ask["geolocation"]),
        "verification": "verified",
        "rentable": True,
        "external": False,
        "static_ip": True,
        "start_date": now,
        "end_date": ask["end_date"],
        "duration": ask["duration"],
        "client_run_time": 0.0,
        "host_run_time": 0.0,
        "uptime_mins": None,
        "pci_gen": float(ask["pci_gen"]),
        "pcie_bw": ask["pcie_bw"],
        "mobo_name": ask["mobo_name"],
        "os_version": ask["os_version"],
        "dlperf": ask["dlperf"],
        "dlperf_per_dphtotal": ask["dlperf_per_dphtotal"],
        "flops_per_dphtotal": ask["flops_per_dphtotal"],
        "total_flops": ask["total_flops"],
        "score": ask["score"],
        "time_remaining": "",
        "time_remaining_isbid": "",
        "webpage": None,
    }
