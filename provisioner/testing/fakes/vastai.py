"""A stateful fake of the Vast.ai REST API (the endpoints the adapter uses), at the paths the official
client ``vastai`` 1.9.1 calls: with a trailing slash, except ``/api/v0/users/current``.

Shapes follow shared/provider-apis/vastai (openapi.yaml and its verbatim examples), and every
request/response is validated against that spec as patched by ``fakes.vastai_spec``: where the
spec is stricter than the live server (the client sends ``type: "on-demand"``, one sort key, ``env``
as an object, null fields, string numbers in filters), the fake follows the server. The slash-less
paths of the spec file are not served (no known client calls them; whether the live API answers
them is unknown): a request there gets the fake's spec check failure, so a test sees it.

- ``POST /api/v0/bundles/``: search asks (``fakes.vastai_market.search``). A filter value that
  cannot compare with its field is a 400 ``invalid_request``.
- ``PUT /api/v0/asks/{id}/``: rent an ask. A rented (or unknown) ask answers 404
  ``no_such_ask``, as a marketplace does when someone else was faster; a bid below the
  ask's ``min_bid`` answers 400 ``invalid_price``.
- ``GET /api/v1/instances/`` (keyset pages of 25, ``after_token``), ``GET /api/v0/instances/{id}/``,
  ``DELETE /api/v0/instances/{id}/`` (404 ``not_found`` when gone; the ask is listed again),
  ``PUT /api/v0/instances/{id}/`` (``manageInstance``: a new ``label``, or ``state``).
- ``GET/POST /api/v0/ssh/`` (account keys) and ``GET /api/v0/users/current`` (balance).
- ``GET /api/v0/charges/`` and ``GET /api/v1/invoices/`` (``fakes.vastai_billing``).

A new instance reports ``actual_status: "loading"`` until the framework's boot rule lets
it run (``boot_polls`` polls, or ``slow_boot``). Error bodies are Vast's
(``{"success": false, "error": ..., "msg": ...}``; throttling ``{"detail": ...}``); an
invalid key on the offer search is a 404 "Invalid user key", as the spec documents.
"""

from __future__ import annotations

import base64
import itertools
import threading
from decimal import Decimal
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought, FakeApp
from provisioner.testing.fakes.vastai_billing import ChargeRoutes
from provisioner.testing.fakes.vastai_market import MARKET, BadFilter, build_market, instance_row, search
from provisioner.testing.fakes.vastai_spec import patch_spec

PAGE_LIMIT = 25


class VastAIFake(FakeApp):
    """Vast.ai marketplace + instances, in memory. Thread-safe through ``self.lock``."""

    provider = "vastai"
    spec_file = "openapi.yaml"
    spec_patch = staticmethod(patch_spec)

    def __init__(self, *, balance_usd: float = 250.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.balance_usd = balance_usd
        self._local = threading.local()
        self._ids = itertools.count(31_000_000)
        self.asks = build_market()
        self.instances: dict[int, dict[str, Any]] = {}
        self.ssh_keys: list[dict[str, Any]] = []
        self.route("POST", "/api/v0/bundles/", self._search, kind="offers", name="offers")
        self.route("PUT", "/api/v0/asks/{ask_id}/", self._rent, kind="launch", name="launch")
        self.route("GET", "/api/v1/instances/", self._list, kind="list", name="list")
        self.route("GET", "/api/v0/instances/{instance_id}/", self._show, kind="get", name="get")
        self.route("DELETE", "/api/v0/instances/{instance_id}/", self._destroy, kind="delete", name="delete")
        self.route("PUT", "/api/v0/instances/{instance_id}/", self._manage, kind="other", name="manage")
        self.route("GET", "/api/v0/ssh/", self._keys, kind="keys", name="keys")
        self.route("POST", "/api/v0/ssh/", self._add_key, kind="keys", name="add_key")
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
        try:
            found = search(self.asks.values(), query)
        except BadFilter as exc:
            return self.json({"error": "invalid_request", "msg": str(exc)}, 400)
        bid = query.get("type") == "bid"
        return self.json({"offers": [dict(ask, is_bid=bid) for ask in found]})

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
        self.instances[instance_id] = instance = instance_row(instance_id, ask, body, self.clock().timestamp())
        self.meter.start(str(instance_id), str(instance["dph_total"]), name=str(body.get("label") or ""))
        self.charges.rates[str(instance_id)] = (
            Decimal(str(ask["dph_base"])),
            Decimal(str(instance["storage_total_cost"])),
        )
        # Separate hosts: local_ipaddrs is the host's own LAN, not a network shared with other rentals.
        ssh = "ssh" in str(body.get("runtype") or "ssh")
        self.record_bought(
            Bought(
                str(instance_id),
                interruptible=body.get("price") is not None,
                boot="\n".join(
                    [
                        str(body.get("onstart") or ""),
                        *(f"{k}={v}" for k, v in instance["extra_env"]),
                        str(body.get("args") or ""),
                    ]
                ),
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
        return self.json({"instances": self._shown(instance)})

    def _destroy(self, request: Request, instance_id: str) -> Response:
        instance = self.instances.pop(int(instance_id), None) if instance_id.isdigit() else None
        if instance is None:
            return self.json({"success": False, "error": "not_found", "msg": "Instance not found"}, 404)
        self.meter.stop(instance_id)
        ask = self.asks.get(instance["ask_id"])
        if ask is not None:
            ask["rented"] = False
        return self.json({"success": True, "msg": "Instance destroyed successfully"})

    def _manage(self, request: Request, instance_id: str) -> Response:
        """``manageInstance``: a ``label`` replaces the instance's label, a ``state`` stops or starts it."""
        body = self.body(request)
        instance = self.instances.get(int(instance_id)) if instance_id.isdigit() else None
        if instance is None:
            return self.json({"success": False, "error": "not_found", "msg": "Instance not found"}, 404)
        if not isinstance(body, dict) or not ({"label", "state"} & set(body)):
            return self.json({"success": False, "error": "invalid_args", "msg": "Nothing to change"}, 400)
        if "label" in body:
            instance["label"] = body["label"]
        if "state" in body:
            instance["intended_status"] = body["state"]
        return self.json({"success": True})

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
