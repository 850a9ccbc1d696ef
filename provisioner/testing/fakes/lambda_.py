"""A stateful fake of the Lambda Cloud API (``/api/v1``), validated against openapi-1.10.0.json.

Answers with the shapes of Lambda's own examples: the ``{"data": ...}`` envelope, errors as
``{"error": {"code", "message", "suggestion"}}`` with the spec's codes, instance types priced
in cents with ``regions_with_capacity_available``, instances that boot (``booting`` ->
``active``) and terminate (``terminating`` on the call and the next listing, then gone, as
Lambda drops terminated instances from the list).

Choices where the spec is silent, each an assumption about the real service:

- ``quantity`` on launch: real clients send it and Lambda's docs example has it, but the 1.10
  schema does not list it. The request schema allows extra properties, so validation passes;
  the fake itself requires an integer 1..``MAX_QUANTITY`` and answers 400
  ``global/invalid-parameters`` otherwise.
- A launch asking for more than the remaining capacity fails whole with 400
  ``insufficient-capacity``; under ``capacity_after(..., partial=True)`` it launches what fits
  and returns fewer ids, which an adapter must treat as a shortfall.
- 429 and 5xx bodies use the same error envelope (``global/rate-limited``,
  ``global/internal-error``); the spec documents neither status for these paths.
- Firewall rulesets (``/api/v1/firewall-rulesets``, handlers in ``lambda_firewall``): a launch
  may attach rulesets of its region; the instance lists them in ``firewall_rulesets``.
- Authentication: ``Bearer <key>``, and HTTP Basic as Lambda's docs and spec describe it,
  ``Basic base64("<key>:")`` (curl's ``-u KEY:``) or ``Basic <key>``.
- Audit events in either published page shape (``lambda_audit``: ``app.audit.shape``).
- ``insufficient_balance`` is 403 ``global/account-inactive`` (Lambda's answer to an account
  without a valid payment method), the closest the API has to "no funds".
"""

from __future__ import annotations

import base64
import binascii
import copy
import itertools
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought, FakeApp
from provisioner.testing.fakes.lambda_audit import AuditRoutes
from provisioner.testing.fakes.lambda_firewall import FirewallRoutes

MAX_QUANTITY = 32
LIVE = ("booting", "active", "unhealthy")

_REGIONS = {
    "us-east-1": "Virginia, USA",
    "us-west-1": "California, USA",
    "us-west-2": "Arizona, USA",
    "us-west-3": "Utah, USA",
    "us-south-2": "North Texas, USA",
    "us-south-3": "Central Texas, USA",
    "us-midwest-1": "Illinois, USA",
    "europe-central-1": "Germany",
    "asia-south-1": "India",
    "australia-east-1": "Australia",
    "me-west-1": "Israel",
    "asia-northeast-1": "Tokyo, Japan",
    "asia-northeast-2": "Seoul, South Korea",
}

# name: (gpu description, gpus, price cents/h, vcpus, memory GiB, storage GiB, regions with capacity)
# Prices, specs and regions from Lambda's captured instance-types response (2025).
_TYPES: dict[str, tuple[str, int, int, int, int, int, tuple[str, ...]]] = {
    "gpu_1x_gh200": ("GH200 (96 GB)", 1, 149, 64, 432, 4096, ("us-east-1",)),
    "gpu_8x_b200_sxm6": ("B200 (180 GB SXM6)", 8, 3992, 208, 2900, 22528, ("australia-east-1", "us-east-1")),
    "gpu_8x_h100_sxm5": ("H100 (80 GB SXM5)", 8, 2392, 208, 1800, 22528, ("us-west-3", "us-south-2")),
    "gpu_4x_h100_sxm5": ("H100 (80 GB SXM5)", 4, 1236, 104, 900, 11264, ("us-south-2", "us-south-3")),
    "gpu_1x_h100_pcie": ("H100 (80 GB PCIe)", 1, 249, 26, 200, 1024, ("us-west-3",)),
    "gpu_8x_a100_80gb_sxm4": ("A100 (80 GB SXM4)", 8, 1432, 240, 1800, 20480, ("us-midwest-1", "us-east-1")),
    "gpu_1x_a100_sxm4": ("A100 (40 GB SXM4)", 1, 129, 30, 200, 512, ("us-east-1", "us-west-2")),
    "gpu_1x_a10": ("A10 (24 GB PCIe)", 1, 75, 30, 200, 1400, ("us-east-1", "us-west-1")),
    "gpu_8x_v100": ("Tesla V100 (16 GB)", 8, 440, 92, 448, 6041, ()),
    "cpu_4x_general": ("N/A", 0, 20, 4, 16, 100, ()),
}

_ERRORS: dict[str, tuple[int, str, str, str | None]] = {
    "invalid_key": (
        401,
        "global/invalid-api-key",
        "API key was invalid, expired, or deleted.",
        "Check your API key or create a new one, then try again.",
    ),
    "insufficient_balance": (
        403,
        "global/account-inactive",
        "Your account is inactive.",
        "Make sure you have verified your email address and have a valid payment "
        "method. Contact Support if problems continue.",
    ),
    "capacity": (
        400,
        "instance-operations/launch/insufficient-capacity",
        "Not enough capacity to fulfill launch request.",
        None,
    ),
    "quota": (400, "global/quota-exceeded", "Quota exceeded.", "Contact Support to increase your quota."),
    "not_found": (404, "global/not-found", "The requested resource was not found.", None),
    "instance_not_found": (404, "global/object-does-not-exist", "Specified instance does not exist.", None),
    "bad_request": (400, "global/invalid-parameters", "Invalid request data.", None),
    "rate_limit": (429, "global/rate-limited", "Too many requests.", "Slow down and try again."),
    "http_error": (
        500,
        "global/internal-error",
        "An internal server error occurred.",
        "Try again later. Contact Support if the problem persists.",
    ),
}

_BY_STATUS = {400: "bad_request", 401: "invalid_key", 403: "insufficient_balance", 404: "instance_not_found"}


def _type_body(name: str) -> dict[str, Any]:
    gpu, gpus, cents, vcpus, memory, storage, _ = _TYPES[name]
    prefix = f"{gpus}x " if gpus else ""
    return {
        "name": name,
        "description": f"{prefix}{gpu}" if gpus else "4x CPU General (16 GiB)",
        "gpu_description": gpu,
        "price_cents_per_hour": cents,
        "specs": {"vcpus": vcpus, "memory_gib": memory, "storage_gib": storage, "gpus": gpus},
    }


class LambdaFake(FakeApp):
    """Lambda Cloud API fake. ``instances`` maps id -> instance body (the API's Instance shape)."""

    provider = "lambda"
    spec_file = "openapi-1.10.0.json"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instances: dict[str, dict[str, Any]] = {}
        self.ssh_keys: dict[str, dict[str, str]] = {}
        self.capacity: dict[str, set[str]] = {name: set(spec[6]) for name, spec in _TYPES.items()}
        self.launch_requests: list[dict[str, Any]] = []
        self._ips = itertools.count(10)
        self.route("GET", "/api/v1/instance-types", self.list_types, kind="offers", name="instance_types")
        self.route("GET", "/api/v1/instances", self.list_instances, kind="list", name="list_instances")
        self.route("GET", "/api/v1/instances/{id}", self.get_instance, kind="get", name="get_instance")
        self.route("POST", "/api/v1/instances/{id}", self.rename_instance, kind="other", name="rename")
        self.route("POST", "/api/v1/instance-operations/launch", self.launch, kind="launch", name="launch")
        self.route("POST", "/api/v1/instance-operations/terminate", self.terminate, kind="delete", name="terminate")
        self.route("GET", "/api/v1/ssh-keys", self.list_keys, kind="keys", name="list_ssh_keys")
        self.route("POST", "/api/v1/ssh-keys", self.add_key, kind="keys", name="add_ssh_key")
        self.route("DELETE", "/api/v1/ssh-keys/{id}", self.delete_key, kind="keys", name="delete_ssh_key")
        self.firewall = FirewallRoutes(self, _REGIONS, LIVE)
        self.audit = AuditRoutes(self)

    # ----- framework hooks ------------------------------------------------------------------
    def auth_ok(self, request: Request) -> bool:
        """Bearer, or Basic with the key as user name and no password (or the bare key)."""
        if self.api_key is None or super().auth_ok(request):
            return True
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        if value == self.api_key:
            return True
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        return decoded == f"{self.api_key}:"

    def _validate_response(self, request: Request, response: Response, injected: bool) -> str | None:
        if request.path == "/api/v1/audit-events" and response.status_code == 200 and self.audit.shape == "1.8.3":
            why = self.audit.check_1_8_3(response)
            return None if why is None else self._record("response", request, ValueError(why))
        return super()._validate_response(request, response, injected)

    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        if kind == "http_error" and status in _BY_STATUS:
            kind = _BY_STATUS[status]  # a documented status gets the body the spec gives it
        code_status, code, default, suggestion = _ERRORS.get(kind, _ERRORS["http_error"])
        error: dict[str, Any] = {"code": code, "message": message or default}
        if suggestion:
            error["suggestion"] = suggestion
        return self.json({"error": error}, status or code_status)

    def instance_count(self) -> int:
        with self.lock:
            return sum(1 for body in self.instances.values() if body["status"] in LIVE)

    def reset(self) -> None:
        with self.lock:
            super().reset()
            self.instances.clear()
            self.ssh_keys.clear()
            self.launch_requests.clear()
            self.firewall.rulesets.clear()
            self.audit.events.clear()
            self.capacity = {name: set(spec[6]) for name, spec in _TYPES.items()}

    def set_status(self, instance_id: str, status: str) -> None:
        """Force an instance into a Lambda status (``unhealthy``, ``preempted``...) for tests."""
        with self.lock:
            self.instances[instance_id]["status"] = status
            self._births.pop(instance_id, None)

    # ----- handlers -------------------------------------------------------------------------
    def list_types(self, request: Request) -> Response:
        data = {
            name: {
                "instance_type": _type_body(name),
                "regions_with_capacity_available": [
                    {"name": r, "description": _REGIONS[r]} for r in sorted(self.capacity[name])
                ],
            }
            for name in _TYPES
        }
        return self.json({"data": data})

    def _visible(self) -> list[dict[str, Any]]:
        """Advance boot/termination by one poll and return what a listing shows."""
        shown = []
        for instance_id, body in list(self.instances.items()):
            if body["status"] == "terminated":
                del self.instances[instance_id]
                continue
            if body["status"] == "booting" and self.booted(instance_id):
                body["status"] = "active"
                body["ip"] = f"198.51.100.{next(self._ips) % 250 + 2}"
                self._set_actions(body, True)
            shown.append(copy.deepcopy(body))
            if body["status"] == "terminating":
                body["status"] = "terminated"
        return shown

    def list_instances(self, request: Request) -> Response:
        return self.json({"data": self._visible()})

    def get_instance(self, request: Request, id: str) -> Response:
        shown = {body["id"]: body for body in self._visible()}
        if id not in shown:
            return self.error_reply("instance_not_found")
        return self.json({"data": shown[id]})

    def rename_instance(self, request: Request, id: str) -> Response:
        body = self.instances.get(id)
        if body is None or body["status"] == "terminated":
            return self.error_reply("instance_not_found")
        name = self.body(request).get("name")
        if not isinstance(name, str) or len(name) > 64:
            return self.error_reply("bad_request")
        body["name"] = name
        return self.json({"data": copy.deepcopy(body)})

    def launch(self, request: Request) -> Response:
        req = self.body(request)
        self.launch_requests.append(req)
        type_name, region = req.get("instance_type_name"), req.get("region_name")
        quantity = req.get("quantity", 1)
        if not isinstance(quantity, int) or isinstance(quantity, bool) or not 1 <= quantity <= MAX_QUANTITY:
            return self.error_reply("bad_request", message=f"quantity must be 1..{MAX_QUANTITY}")
        keys = req.get("ssh_key_names") or []
        if len(keys) != 1:
            return self.error_reply("bad_request", message="Exactly one SSH key must be specified.")
        known_keys = {key["name"] for key in self.ssh_keys.values()}
        if keys[0] not in known_keys:
            return self.json(
                {
                    "error": {
                        "code": "global/object-does-not-exist",
                        "message": f"SSH key {keys[0]!r} does not exist.",
                        "suggestion": "Add the SSH key first.",
                    }
                },
                404,
            )
        if type_name not in _TYPES or region not in _REGIONS:
            return self.json(
                {
                    "error": {
                        "code": "global/object-does-not-exist",
                        "message": "Instance type or region does not exist.",
                        "suggestion": "List instance types to see what is offered.",
                    }
                },
                404,
            )
        refused = self.firewall.check_launch(req.get("firewall_rulesets"), region)
        if refused:
            return self.error_reply("bad_request", message=refused)
        if region not in self.capacity[type_name]:
            return self.error_reply("capacity")
        granted, _ = self.faults.grant_capacity(quantity)
        if granted == 0:
            return self.error_reply("capacity")
        ids = [uuid.uuid4().hex for _ in range(granted)]
        keys_by_name = {key["name"]: key["public_key"] for key in self.ssh_keys.values()}
        for instance_id in ids:
            body = self.instances[instance_id] = self._new_instance(instance_id, req, type_name, region)
            self.record_bought(
                Bought(
                    instance_id,
                    interruptible=False,
                    boot=req.get("user_data") or "",
                    tags={tag["key"]: tag["value"] for tag in body["tags"]},
                    ssh_public_keys=tuple(keys_by_name[name] for name in keys),
                    private_ip=body["private_ip"],
                    private_network=f"lambda-private-{region}",
                )
            )
            self.audit.note(instance_id, "launched", instance_type=type_name, region=region)
        self.record_launch(ids)
        return self.json({"data": {"instance_ids": ids}})

    def terminate(self, request: Request) -> Response:
        ids = self.body(request).get("instance_ids") or []
        missing = [i for i in ids if i not in self.instances or self.instances[i]["status"] == "terminated"]
        if missing:
            return self.error_reply("instance_not_found")
        terminated = []
        for instance_id in ids:
            body = self.instances[instance_id]
            body["status"] = "terminating"
            self._set_actions(body, False, "vm-is-terminating")
            self._births.pop(instance_id, None)
            self.audit.note(instance_id, "terminated")
            terminated.append(copy.deepcopy(body))
        return self.json({"data": {"terminated_instances": terminated}})

    def list_keys(self, request: Request) -> Response:
        return self.json({"data": list(self.ssh_keys.values())})

    def add_key(self, request: Request) -> Response:
        req = self.body(request)
        name, public_key = req.get("name"), req.get("public_key")
        if any(key["name"] == name for key in self.ssh_keys.values()):
            return self.error_reply("bad_request", message=f"SSH key {name!r} already exists.")
        key = {
            "id": uuid.uuid4().hex,
            "name": name,
            "public_key": public_key or "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFAKEFAKEFAKE generated",
        }
        self.ssh_keys[key["id"]] = key
        if public_key:
            return self.json({"data": dict(key)})
        return self.json({"data": {**key, "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n"}})

    def delete_key(self, request: Request, id: str) -> Response:
        if self.ssh_keys.pop(id, None) is None:
            return self.error_reply("bad_request", message="SSH key does not exist.")
        return self.json({"data": {}})

    # ----- helpers --------------------------------------------------------------------------
    def _new_instance(self, instance_id: str, req: dict[str, Any], type_name: str, region: str) -> dict[str, Any]:
        # One private network per region (10.<region>.0.0/16): instances of a region reach each other.
        serial = next(self._ips)
        body: dict[str, Any] = {
            "id": instance_id,
            "name": req.get("name", ""),
            "private_ip": f"10.{list(_REGIONS).index(region) + 1}.{serial // 250 % 250}.{serial % 250 + 2}",
            "status": "booting",
            "ssh_key_names": list(req.get("ssh_key_names", [])),
            "file_system_names": list(req.get("file_system_names", [])),
            "region": {"name": region, "description": _REGIONS[region]},
            "instance_type": _type_body(type_name),
            "hostname": req.get("hostname") or f"{instance_id[:12]}",
            "jupyter_token": uuid.uuid4().hex,
            "jupyter_url": f"https://jupyter-{instance_id}.lambdaspaces.com/?token=redacted",
            "tags": [dict(tag) for tag in req.get("tags", [])],
            "firewall_rulesets": [{"id": entry["id"]} for entry in req.get("firewall_rulesets") or []],
        }
        self._set_actions(body, False, "vm-has-not-launched")
        return body

    @staticmethod
    def _set_actions(body: dict[str, Any], available: bool, reason: str = "") -> None:
        detail: dict[str, Any] = {"available": available}
        if not available:
            detail |= {"reason_code": reason, "reason_description": reason.replace("-", " ")}
        body["actions"] = {op: dict(detail) for op in ("migrate", "rebuild", "restart", "cold_reboot", "terminate")}


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_API_KEY = "lambda-test-key"
CONTRACT_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIContractSuiteKeyMaterial0000000000000 contract"


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type="gpu_8x_h100_sxm5",
            region="us-south-2",
            gpus=8,
            ssh_public_key=CONTRACT_SSH_KEY,
            bootstrap="cloud_init",
            user_data="#cloud-config\n{}\n",
        )
        for i in range(n)
    ]


def contract_harness() -> Any:
    """LambdaFake and LambdaProvider at x60 Lambda's published limits (60 requests/s, a launch per 0.2 s)."""
    from provisioner.providers.lambda_.client import LIMITS
    from provisioner.providers.lambda_.provider import LambdaProvider
    from provisioner.testing.contract import Harness

    return Harness(
        name="lambda",
        app=LambdaFake(api_key=CONTRACT_API_KEY),
        make_provider=LambdaProvider,
        api_key=CONTRACT_API_KEY,
        node_specs=contract_node_specs,
        published_limits=LIMITS,
        scale=60.0,
        launch_route="launch",
        list_route="list_instances",
        offers_route="instance_types",
        balance_fault_route="launch",
        needs=(("lambda", LambdaFake.spec_file or ""),),
    )


__all__ = [
    "CONTRACT_API_KEY",
    "CONTRACT_SSH_KEY",
    "MAX_QUANTITY",
    "LambdaFake",
    "contract_harness",
    "contract_node_specs",
]
