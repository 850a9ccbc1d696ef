"""A stateful fake of the Vast.ai REST API (the endpoints the adapter uses).

Shapes follow shared/provider-apis/vastai (openapi.yaml and its verbatim examples), and
every request/response is validated against that spec by ``FakeApp``:

- ``POST /api/v0/bundles``: search asks. Filters ``{field: {op: value}}`` with the ops
  eq/neq/gt/gte/lt/lte/in/notin on any ask field (``geolocation`` matches the country
  code, ``gpu_name`` accepts ``RTX_4090`` for ``RTX 4090``); the spec's defaults
  ``verified=true rentable=true rented=false`` apply when absent; ``order`` and ``limit``.
- ``PUT /api/v0/asks/{id}``: rent an ask. A rented (or unknown) ask answers 404
  ``no_such_ask``, as a marketplace does when someone else was faster; a bid below the
  ask's ``min_bid`` answers 400 ``invalid_price``.
- ``GET /api/v1/instances`` (keyset pages of 25, ``after_token``), ``GET /api/v0/instances/{id}``,
  ``DELETE /api/v0/instances/{id}`` (404 ``not_found`` when gone; the ask is listed again).
- ``GET/POST /api/v0/ssh`` (account keys) and ``GET /api/v0/users/current`` (balance).

A new instance reports ``actual_status: "loading"`` until the framework's boot rule lets
it run (``boot_polls`` polls, or ``slow_boot``). Error bodies are Vast's
(``{"success": false, "error": ..., "msg": ...}``; throttling ``{"detail": ...}``); an
invalid key on the offer search is a 404 "Invalid user key", as the spec documents.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought, FakeApp
from provisioner.testing.fakes.vastai_billing import ChargeRoutes

PAGE_LIMIT = 25

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


def _country(geolocation: str) -> str:
    return geolocation.rpartition(",")[2].strip()


def _same(field: str, have: Any, want: Any) -> bool:
    if field == "geolocation" and isinstance(have, str):
        return _country(have) == want or have == want
    if field == "gpu_name" and isinstance(want, str):
        return have == want.replace("_", " ")
    return bool(have == want)


def _passes(field: str, have: Any, condition: Any) -> bool:
    """One ``{op: value}`` filter against an ask's field value."""
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
        if op in ("gt", "gte", "lt", "lte"):
            if have is None:
                return False
            if (
                (op == "gt" and not have > want)
                or (op == "gte" and not have >= want)
                or (op == "lt" and not have < want)
                or (op == "lte" and not have <= want)
            ):
                return False
    return True


def _sort_key(field: str) -> Callable[[dict[str, Any]], tuple[bool, Any]]:
    """Sort by ``field``, asks without it last (for ascending order)."""

    def key(ask: dict[str, Any]) -> tuple[bool, Any]:
        return ask.get(field) is None, ask.get(field) or 0

    return key


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


class VastAIFake(FakeApp):
    """Vast.ai marketplace + instances, in memory. Thread-safe through ``self.lock``."""

    provider = "vastai"
    spec_file = "openapi.yaml"

    def __init__(self, *, balance_usd: float = 250.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.balance_usd = balance_usd
        self._local = threading.local()
        self._ids = itertools.count(31_000_000)
        self.asks = build_market()
        self.instances: dict[int, dict[str, Any]] = {}
        self.ssh_keys: list[dict[str, Any]] = []
        self.route("POST", "/api/v0/bundles", self._search, kind="offers", name="offers")
        self.route("PUT", "/api/v0/asks/{ask_id}", self._rent, kind="launch", name="launch")
        self.route("GET", "/api/v1/instances", self._list, kind="list", name="list")
        self.route("GET", "/api/v0/instances/{instance_id}", self._show, kind="get", name="get")
        self.route("DELETE", "/api/v0/instances/{instance_id}", self._destroy, kind="delete", name="delete")
        self.route("GET", "/api/v0/ssh", self._keys, kind="keys", name="keys")
        self.route("POST", "/api/v0/ssh", self._add_key, kind="keys", name="add_key")
        self.route("GET", "/api/v0/users/current", self._user, kind="other", name="user")
        self.charges = ChargeRoutes(self)

    # -- framework hooks ------------------------------------------------------------------
    def _dispatch(self, request: Request) -> Response:
        self._local.path = request.path  # error bodies differ per endpoint
        return super()._dispatch(request)

    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        path = getattr(self._local, "path", "")
        if kind == "invalid_key":
            # The offer search documents its bad-key answer as a 404.
            return self.json(
                {"success": False, "error": "auth_error", "msg": message or "Invalid user key"},
                404 if path.startswith("/api/v0/bundles") else 401,
            )
        if kind == "rate_limit":
            text = message or "API requests too frequent endpoint threshold=2.0"
            if path.startswith("/api/v0/instances/") and not path.startswith("/api/v0/instances/bid"):
                return self.json({"success": False, "error": "rate_limit_exceeded", "msg": text}, 429)
            return self.json({"detail": text}, 429)
        if kind == "insufficient_balance":
            return self.json({"success": False, "msg": message or "Insufficient credit"}, status or 400)
        if kind == "not_found":
            return self.json({"success": False, "error": "not_found", "msg": message or "Not found"}, status or 404)
        if kind == "bad_request":
            return self.json(
                {"success": False, "error": "invalid_args", "msg": message or "Invalid args"}, status or 400
            )
        return self.json(
            {"success": False, "error": "server_error", "msg": message or "Internal Server Error"}, status or 500
        )

    def instance_count(self) -> int:
        with self.lock:
            return len(self.instances)

    def state(self) -> dict[str, Any]:
        data = super().state()
        with self.lock:
            data["labels"] = sorted(str(inst.get("label")) for inst in self.instances.values())
        return data

    def reset(self) -> None:
        with self.lock:
            super().reset()
            self.asks = build_market()
            self.instances.clear()
            self.ssh_keys.clear()

    # -- offers ---------------------------------------------------------------------------
    def _search(self, request: Request) -> Response:
        query = self.body(request)
        if not isinstance(query, dict):
            return self.json({"error": "invalid_request", "msg": "Invalid json body"}, 400)
        filters: dict[str, Any] = {"verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False}}
        filters.update({k: v for k, v in query.items() if k not in ("order", "limit", "type", "allocated_storage")})
        found = [
            ask
            for ask in self.asks.values()
            if all(field not in ask or _passes(field, ask[field], cond) for field, cond in filters.items())
        ]
        for field, direction in reversed(query.get("order") or [["score", "desc"]]):
            found.sort(key=_sort_key(field), reverse=str(direction).lower().startswith("d"))
        limit = int(query.get("limit") or 64)
        bid = query.get("type") == "bid"
        return self.json({"offers": [dict(ask, is_bid=bid) for ask in found[:limit]]})

    # -- instances ------------------------------------------------------------------------
    def _rent(self, request: Request, ask_id: str) -> Response:
        body = self.body(request)
        ask = self.asks.get(int(ask_id)) if ask_id.isdigit() else None
        if ask is None or ask["rented"] or not ask["rentable"]:
            return self._no_such_ask(int(ask_id) if ask_id.isdigit() else 0)
        price = body.get("price")
        if price is not None and price < ask["min_bid"]:
            return self.json(
                {
                    "success": False,
                    "error": "invalid_price",
                    "ask_id": ask["id"],
                    "msg": f"error 400/3471: bid {price} is below the minimum {ask['min_bid']}",
                },
                400,
            )
        granted, _ = self.faults.grant_capacity(1)
        if granted < 1:
            return self._no_such_ask(ask["id"])
        ask["rented"] = True
        instance_id = next(self._ids)
        self.instances[instance_id] = instance = self._instance(instance_id, ask, body)
        self.meter.start(str(instance_id), str(instance["dph_total"]), name=str(body.get("label") or ""))
        self.charges.rates[str(instance_id)] = (
            Decimal(str(ask["dph_base"])),
            Decimal(str(instance["storage_total_cost"])),
        )
        # Separate hosts: local_ipaddrs is the host's own LAN, not a network shared with other rentals.
        ssh = "ssh" in str(body.get("runtype", "ssh"))
        self.record_bought(
            Bought(
                str(instance_id),
                interruptible=body.get("price") is not None,
                boot="\n".join(str(body.get(k) or "") for k in ("onstart", "env", "args")),
                ssh_public_keys=tuple(k["public_key"] for k in self.ssh_keys) if ssh else (),
            )
        )
        self.record_launch([str(instance_id)])
        return self.json(
            {
                "success": True,
                "new_contract": instance_id,
                "instance_api_key": base64.b16encode(instance_id.to_bytes(8, "big")).decode().lower(),
            }
        )

    @staticmethod
    def _no_such_ask(ask_id: int) -> Response:
        return FakeApp.json(
            {
                "success": False,
                "error": "invalid_args",
                "ask_id": ask_id,
                "msg": f"error 404/3603: no_such_ask Instance type by id {ask_id} is not available.",
            },
            404,
        )

    def _instance(self, instance_id: int, ask: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
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
            "intended_status": body.get("target_state", "running"),
            "cur_state": "running",
            "next_state": "running",
            "status_msg": None,
            "label": body.get("label"),
            "template_id": None,
            "template_hash_id": None,
            "template_name": None,
            "image_uuid": body.get("image", "vastai/base-image:@vastai-automatic-tag"),
            "image_args": list(body.get("args") or []),
            "image_runtype": body.get("runtype", "ssh"),
            "extra_env": [],
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
            "country_code": _country(ask["geolocation"]),
            "verification": "verified",
            "rentable": True,
            "external": False,
            "static_ip": True,
            "start_date": self.clock().timestamp(),
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

    def _shown(self, instance: dict[str, Any]) -> dict[str, Any]:
        """The instance as a poll sees it; each poll advances the boot clock once."""
        if instance["actual_status"] in (None, "loading") and instance["intended_status"] == "running":
            if self.booted(str(instance["id"])):
                instance["actual_status"] = "running"
                instance["status_msg"] = f"success, running {instance['image_uuid']}/ssh"
                # Published ports appear once it runs (spec: "Only present on running instances");
                # sshd's 22/tcp on the first of the instance's direct ports, as in the spec's example.
                instance["ports"] = {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(instance["direct_port_start"])}]}
            else:
                instance["actual_status"] = "loading"
                instance["status_msg"] = "Pulling image"
        shown = {k: v for k, v in instance.items() if k != "ask_id"}
        return shown

    def _list(self, request: Request) -> Response:
        try:
            limit = int(request.args.get("limit", PAGE_LIMIT))
            after = (
                int(base64.urlsafe_b64decode(request.args["after_token"]).decode())
                if request.args.get("after_token")
                else 0
            )
        except ValueError:
            return self.json({"error": "invalid_token", "msg": "invalid after_token"}, 400)
        limit = PAGE_LIMIT if limit > PAGE_LIMIT else (5 if limit <= 0 else limit)
        rows = [self.instances[i] for i in sorted(self.instances) if i > after]
        page = rows[:limit]
        more = len(rows) > limit
        token = base64.urlsafe_b64encode(str(page[-1]["id"]).encode()).decode() if more and page else None
        labels: dict[str, int] = {}
        for inst in self.instances.values():
            labels[inst.get("label") or ""] = labels.get(inst.get("label") or "", 0) + 1
        return self.json(
            {
                "success": True,
                "instances_found": len(page),
                "total_instances": len(self.instances),
                "label_counts": labels,
                "next_token": token,
                "instances": [self._shown(inst) for inst in page],
            }
        )

    def _show(self, request: Request, instance_id: str) -> Response:
        instance = self.instances.get(int(instance_id)) if instance_id.isdigit() else None
        if instance is None:
            return self.json({"success": False, "error": "invalid_args", "msg": "invalid instance_id"}, 400)
        shown = self._shown(instance)
        shown["extra_env"] = []
        return self.json({"instances": shown})

    def _destroy(self, request: Request, instance_id: str) -> Response:
        instance = self.instances.pop(int(instance_id), None) if instance_id.isdigit() else None
        if instance is None:
            return self.json({"success": False, "error": "not_found", "msg": "Instance not found"}, 404)
        self.meter.stop(instance_id)
        ask = self.asks.get(instance["ask_id"])
        if ask is not None:
            ask["rented"] = False
        return self.json({"success": True, "msg": "Instance destroyed successfully"})

    # -- account --------------------------------------------------------------------------
    def _keys(self, request: Request) -> Response:
        return self.json(
            [
                {
                    "id": k["id"],
                    "user_id": k["user_id"],
                    "key": k["public_key"],
                    "created_at": k["created_at"],
                    "deleted_at": None,
                }
                for k in self.ssh_keys
            ]
        )

    def _add_key(self, request: Request) -> Response:
        text = str(self.body(request).get("ssh_key") or "").strip()
        if not text:
            return self.json({"success": False, "error": "no_ssh_key", "msg": "No ssh key provided"}, 400)
        key = {
            "id": 900 + len(self.ssh_keys),
            "user_id": 4242,
            "public_key": text,
            "created_at": "2026-11-22T12:00:00Z",
            "deleted_at": None,
        }
        self.ssh_keys.append(key)
        return self.json({"success": True, "key": key})

    def _user(self, request: Request) -> Response:
        return self.json(
            {
                "id": 4242,
                "key_id": 77,
                "email": "renter@example.com",
                "balance": self.balance_usd,
                "ssh_key": self.ssh_keys[0]["public_key"] if self.ssh_keys else "",
                "sid": "fake-session",
            }
        )


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_API_KEY = "vast-test-key-0123456789"
CONTRACT_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHarnessKeyForVastFake harness@test"


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    """n single-4090 nodes in the US, as a plan would give them (no per-node ask ids)."""
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type="1x_RTX_4090",
            region="US",
            gpus=1,
            disk_gib=40,
            ssh_public_key=CONTRACT_SSH_KEY,
            bootstrap="script",
            user_data="#!/bin/sh\necho ready\n",
        )
        for i in range(n)
    ]


def contract_harness() -> Any:
    from provisioner.providers.base import OfferQuery
    from provisioner.providers.vastai.client import VAST_LIMITS
    from provisioner.providers.vastai.provider import VastAIProvider
    from provisioner.testing.contract import Harness

    return Harness(
        name="vastai",
        app=VastAIFake(api_key=CONTRACT_API_KEY),
        make_provider=VastAIProvider,
        api_key=CONTRACT_API_KEY,
        node_specs=contract_node_specs,
        published_limits=VAST_LIMITS,
        scale=20.0,
        offer_query=OfferQuery(gpu_models=("RTX4090",), regions=("US",), min_reliability=0.95),
    )


__all__ = [
    "CONTRACT_API_KEY",
    "CONTRACT_SSH_KEY",
    "MARKET",
    "VastAIFake",
    "build_market",
    "contract_harness",
    "contract_node_specs",
]
