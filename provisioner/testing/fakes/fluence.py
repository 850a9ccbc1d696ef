"""A stateful fake of the Fluence API: GPU Cloud VMs, account SSH keys and the v2 VM API.

Two kinds of validation, because Fluence publishes two kinds of description:

- ``/v1/clusters``, ``/v1/configurations/virtual_machines``, ``/v2/vms`` and
  ``/v2/vms/{id}/terminate`` (handlers in ``fluence_vms``) are in ``fluence-openapi-original.yml``
  (0.10.0): the shared framework validates every request and response of them with openapi-core.
- The GPU Cloud endpoints (``/gpu/plans/vms``, ``/gpu/instances/vms[/{id}]``) and ``/ssh_keys``
  are NOT in that file. ``DOC_SCHEMAS`` (``fluence_docs``) holds JSON schemas written from the documented
  example shapes in ``docs_examples.json`` (field names, nesting, JSON types, nullability as
  the docs show them, e.g. ``domain: string | null``); this fake validates every request body
  and response body of those routes against them with jsonschema, records failures in
  ``validation_errors`` and, in strict mode, answers 599. Error bodies are checked against the
  documented ``{"detail": string | [validation item]}`` envelope. tests/providers/test_fluence.py
  checks that the documented examples themselves pass these schemas.

Choices where the docs are silent, each an assumption about the real service:

- A bad or missing key gets 403 ``{"detail": "Not authenticated"}`` on GPU Cloud paths (docs:
  403) and 401 ``{"code": "unauthorized", ...}`` on v1/v2 paths (the spec's example).
- ``DELETE /gpu/instances/vms/{id}`` answers 204 with no body; for a non-ACTIVE instance 400
  ``{"detail": "Instance can be terminated only in ACTIVE status"}``; unknown id 404.
- Instances stay listed after ENDED (the docs' list example shows ENDED/FAILED ones).
- Each option has ``OPTION_CAPACITY`` machines; a deploy takes one (released on terminate), an
  exhausted option disappears from ``/gpu/plans/vms`` and deploys to it get 400 ``Plan no
  longer available``. Deploys of the same name are allowed (Fluence does not forbid them).
- v2 business errors use documented statuses only: insufficient balance is 400 with code
  ``insufficient_balance``, an unknown VM is 400 with code ``not_found``, no capacity is 422
  ``unprocessable_entity`` "No capacity left in cluster".
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import VALIDATION_STATUS, Bought, Call, FakeApp
from provisioner.testing.fakes.fluence_billing import ChargeRoutes
from provisioner.testing.fakes.fluence_docs import DOC_SCHEMAS, doc_problem
from provisioner.testing.fakes.fluence_vms import USER_ID, VmRoutes, now_text

OPTION_CAPACITY = 8
LIVE = ("INITIALIZED", "ACTIVE")
V2_LIVE = ("new", "launching", "launched")
_NAME = re.compile(r"^[a-z0-9-]{1,25}$")

# (model, vram, interface, gpus, option id, location, provider, vcpu, memory Gi, storage Gi, $/h, nvlink, os)
# The a10 and a100-pcie rows are the docs' GET /gpu/plans/vms example; the rest are estimates
# in line with the bundled catalog.
_UBUNTU = ["Ubuntu Server 22.04", "Ubuntu Server 24.04"]
_OPTIONS: list[tuple[str, str, str, int, str, str, str, int, int, int, float, bool, list[str]]] = [
    (
        "a10",
        "24Gi",
        "pcie",
        1,
        "3f6cd2d1-19ac-49fb-95a5-9088bb2dcb49",
        "sanjose-usa-2",
        "sesterce",
        30,
        186,
        1303,
        0.99,
        False,
        ["ubuntu22.04_cuda12.4_shade_os"],
    ),
    (
        "a10",
        "24Gi",
        "pcie",
        1,
        "0e311c31-1e31-4fc7-b27d-4b73f3f27bc2",
        "dulles-usa-1",
        "sesterce",
        30,
        186,
        1303,
        0.99,
        False,
        ["ubuntu22.04_cuda12.4_shade_os"],
    ),
    (
        "a100",
        "80Gi",
        "pcie",
        1,
        "d8312018-c50c-4278-89db-69e40013414d",
        "us-central-3",
        "massed-compute",
        14,
        93,
        582,
        1.07,
        False,
        ["Ubuntu Server 22.04"],
    ),
    (
        "h100",
        "80Gi",
        "sxm",
        8,
        "6a0c1f4e-8d52-4b7a-9e31-2c5d7f9a1b30",
        "dulles-usa-1",
        "sesterce",
        192,
        1800,
        14000,
        16.72,
        True,
        _UBUNTU,
    ),
    (
        "h100",
        "80Gi",
        "sxm",
        8,
        "b2e4d6f8-1a3c-4e5f-8a7b-9c0d1e2f3a4b",
        "helsinki-fin-1",
        "nebius",
        192,
        1800,
        14000,
        17.36,
        True,
        _UBUNTU,
    ),
    (
        "h200",
        "141Gi",
        "sxm",
        8,
        "c7a9e1b3-5d2f-4a6c-8e0b-1f3d5a7c9e2b",
        "dulles-usa-1",
        "sesterce",
        128,
        1024,
        7000,
        23.2,
        True,
        _UBUNTU,
    ),
    (
        "l40s",
        "48Gi",
        "pcie",
        1,
        "e1f2a3b4-c5d6-4e7f-8091-a2b3c4d5e6f7",
        "sanjose-usa-2",
        "sesterce",
        16,
        120,
        500,
        0.89,
        False,
        _UBUNTU,
    ),
    (
        "rtx4090",
        "24Gi",
        "pcie",
        1,
        "f0e1d2c3-b4a5-4968-8776-655443322110",
        "helsinki-fin-1",
        "datacrunch",
        16,
        64,
        500,
        0.45,
        False,
        _UBUNTU,
    ),
]


@dataclass(frozen=True)
class _Option:
    model: str
    vram: str
    interface: str
    gpus: int
    id: str
    location: str
    provider: str
    vcpu: int
    memory: int
    storage: int
    price: float
    nvlink: bool
    os_options: tuple[str, ...]


class FluenceFake(FakeApp):
    """Fluence API fake. ``instances`` (GPU VMs), ``vms`` (v2) and ``ssh_keys`` hold the state."""

    provider = "fluence"
    spec_file = "fluence-openapi-original.yml"

    def __init__(self, *, option_capacity: int = OPTION_CAPACITY, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.doc_checks = kwargs.get("validate", True)
        """Whether bodies are checked against DOC_SCHEMAS; ``validate=False`` turns these off too."""
        self.option_capacity = option_capacity
        """Machines per option; benchmarks raise it to bring up large clusters on one shape."""
        self._local = threading.local()
        self.options = [_Option(*row[:12], tuple(row[12])) for row in _OPTIONS]
        self.used: dict[str, int] = {}
        self.instances: dict[str, dict[str, Any]] = {}
        self.ssh_keys: list[dict[str, Any]] = []
        self.vms: dict[str, dict[str, Any]] = {}
        self.deploy_requests: list[dict[str, Any]] = []
        self._ips = itertools.count(10)
        why = "GPU Cloud endpoint, not in the OpenAPI file: checked against DOC_SCHEMAS from docs_examples.json"
        self.route("GET", "/gpu/plans/vms", self.plans, kind="offers", name="gpu_vm_plans", validate=False, reason=why)
        self.route(
            "GET",
            "/gpu/instances/vms",
            self.list_instances,
            kind="list",
            name="list_gpu_instances",
            validate=False,
            reason=why,
        )
        self.route(
            "GET",
            "/gpu/instances/vms/{id}",
            self.get_instance,
            kind="get",
            name="get_gpu_instance",
            validate=False,
            reason=why,
        )
        self.route(
            "POST", "/gpu/instances/vms", self.deploy, kind="launch", name="deploy_gpu_vm", validate=False, reason=why
        )
        self.route(
            "DELETE",
            "/gpu/instances/vms/{id}",
            self.terminate,
            kind="delete",
            name="terminate_gpu_vm",
            validate=False,
            reason=why,
        )
        self.route("GET", "/ssh_keys", self.list_keys, kind="keys", name="list_ssh_keys", validate=False, reason=why)
        self.route("POST", "/ssh_keys", self.add_key, kind="keys", name="add_ssh_key", validate=False, reason=why)
        self.v2 = VmRoutes(self)  # fakes.fluence_vms
        ChargeRoutes(self, USER_ID)

    # ----- framework hooks ------------------------------------------------------------------
    def auth_ok(self, request: Request) -> bool:
        return self.api_key is None or request.headers.get("X-API-KEY", "") == self.api_key

    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        if getattr(self._local, "v2", False):
            code, default_status, default = {
                "invalid_key": ("unauthorized", 401, "Auth token invalid or missing"),
                "insufficient_balance": ("insufficient_balance", 400, "Insufficient balance"),
                "capacity": ("unprocessable_entity", 422, "No capacity left in cluster"),
                "not_found": ("not_found", 400, "Resource not found"),
                "rate_limit": ("service_unavailable", 429, "Too many requests"),
                "bad_request": ("bad_request", 400, "Wrong parameters"),
            }.get(kind, ("internal_server_error", 500, "Unexpected server error"))
            return self.json({"code": code, "error": message or default}, status or default_status)
        default_status, default = {
            "invalid_key": (403, "Not authenticated"),
            "insufficient_balance": (400, "Insufficient balance to deploy instance"),
            "capacity": (400, "Plan no longer available"),
            "not_found": (404, "Not Found"),
            "rate_limit": (429, "Too Many Requests"),
            "bad_request": (400, "Bad Request"),
        }.get(kind, (500, "Internal Server Error"))
        return self.json({"detail": message or default}, status or default_status)

    def instance_count(self) -> int:
        with self.lock:
            return sum(1 for i in self.instances.values() if i["status"] in LIVE) + sum(
                1 for vm in self.vms.values() if vm["status"] in V2_LIVE
            )

    def reset(self) -> None:
        with self.lock:
            super().reset()
            self.used.clear()
            self.instances.clear()
            self.ssh_keys.clear()
            self.vms.clear()
            self.deploy_requests.clear()

    def set_status(self, instance_id: str, status: str) -> None:
        """Force a GPU instance into a Fluence status (``FAILED``, ``ENDED`` ...) for tests."""
        with self.lock:
            self.instances[instance_id]["status"] = status
            self._births.pop(instance_id, None)

    def _dispatch(self, request: Request) -> Response:
        self._local.v2 = request.path.startswith(("/v1/", "/v2/"))
        route, _ = self._match(request)
        name = route.name if route else ""
        if not self.doc_checks:
            return super()._dispatch(request)
        if route is not None and f"{name}.request" in DOC_SCHEMAS:
            try:
                document = json.loads(request.get_data() or b"null")
            except ValueError:
                document = None
            problem = doc_problem(f"{name}.request", document)
            if problem:
                message = self._doc_failure("request", request, problem)
                if self.strict:
                    with self.lock:
                        self.calls.append(
                            Call(time.monotonic(), request.method, request.path, VALIDATION_STATUS, name, route.kind)
                        )
                    return self.json({"fake_validation_error": message}, VALIDATION_STATUS)
        response = super()._dispatch(request)
        if route is None or route.validate or response.status_code == VALIDATION_STATUS:
            return response
        status = response.status_code
        if status in (204,) or status == 429 or status >= 500:
            with self.lock:
                if status != 204:
                    self.unvalidated.append(f"{request.method} {request.path} -> {status}")
            return response
        schema = f"{name}.response" if status < 400 else "error.response"
        problem = doc_problem(schema, json.loads(response.get_data() or b"null"))
        if problem:
            message = self._doc_failure("response", request, problem)
            if self.strict:
                return self.json({"fake_validation_error": message}, VALIDATION_STATUS)
        return response

    def _doc_failure(self, what: str, request: Request, problem: str) -> str:
        message = f"fluence {what} {request.method} {request.path}: docs-derived schema: {problem}"
        with self.lock:
            self.validation_errors.append(message)
        return message

    # ----- GPU Cloud ------------------------------------------------------------------------
    def _available(self, option: _Option) -> bool:
        return self.used.get(option.id, 0) < self.option_capacity

    def plans(self, request: Request) -> Response:
        groups: dict[tuple[str, str, str], dict[int, list[_Option]]] = {}
        for option in self.options:
            if self._available(option):
                groups.setdefault((option.model, option.vram, option.interface), {}).setdefault(option.gpus, []).append(
                    option
                )
        data = []
        for (model, vram, interface), levels in groups.items():
            by_number: list[dict[str, Any]] = []
            for gpus, options in sorted(levels.items()):
                by_number.append(
                    {
                        "gpu_count": gpus,
                        "minimum_price": min(o.price for o in options),
                        "options_available_total": len(options),
                        "providers_available_total": len({o.provider for o in options}),
                        "data_center_available_total": len({o.location for o in options}),
                        "locations": sorted({o.location for o in options}),
                        "providers": sorted({o.provider for o in options}),
                        "options": [self._option_body(o) for o in options],
                    }
                )
            data.append(
                {
                    "gpu_model": {"vendor": "nvidia", "model": model, "vram": vram, "interface": interface},
                    "minimum_price": min(level["minimum_price"] for level in by_number),
                    "availability_by_number": by_number,
                }
            )
        return self.json({"data": data})

    @staticmethod
    def _option_body(o: _Option) -> dict[str, Any]:
        return {
            "id": o.id,
            "location": o.location,
            "provider": o.provider,
            "vcpu": {"count": o.vcpu},
            "memory": {"count": o.memory, "units": "Gi"},
            "storage": {"count": o.storage, "units": "Gi"},
            "deployment_type": "VM",
            "pricing": {"hour": o.price, "upfront_hours": 3, "currency": "USDC"},
            "nvlink": o.nvlink,
            "os_options": list(o.os_options),
        }

    def _advance(self, body: dict[str, Any]) -> None:
        if body["status"] == "INITIALIZED" and self.booted(body["id"]):
            body["status"] = "ACTIVE"
            body["domain"] = f"203.0.113.{next(self._ips) % 250 + 2}"
            body["updated_at"] = now_text()

    @staticmethod
    def _summary(body: dict[str, Any]) -> dict[str, Any]:
        keys = ("id", "name", "status", "resources", "domain", "location", "created_at", "updated_at")
        return {k: copy.deepcopy(body[k]) for k in keys}

    def list_instances(self, request: Request) -> Response:
        for body in self.instances.values():
            self._advance(body)
        return self.json([self._summary(body) for body in self.instances.values()])

    def get_instance(self, request: Request, id: str) -> Response:
        body = self.instances.get(id)
        if body is None:
            return self.error_reply("not_found", message="Instance not found")
        self._advance(body)
        active = body["status"] == "ACTIVE"
        detail = {k: v for k, v in self._summary(body).items() if k != "domain"}
        detail |= {
            "availability": "vm",
            "os_image": body["os_image"],
            "ssh_key": body["ssh_key"],
            "ssh_connection": f"ssh ubuntu@{body['domain']}" if active else None,
            "billing": {
                "hourly_usage": body["price"] if active else 0,
                "total_spendings": body["price"],
                "reserved_amount": body["price"] * 2 if active else 0,
                "next_billing_period": None,
            },
            "network": {"domain": body["domain"], "forwarded_ports": [], "uri": None} if active else None,
        }
        return self.json(detail)

    def deploy(self, request: Request) -> Response:
        req = self.body(request)
        self.deploy_requests.append(req)
        name = req.get("name", "")
        if not _NAME.match(name):
            return self.json(
                {
                    "detail": [
                        {
                            "type": "string_pattern_mismatch",
                            "loc": ["body", "name"],
                            "msg": "String should match pattern '^[a-z0-9-]{1,25}$'",
                            "input": name,
                            "ctx": {"error": {}},
                        }
                    ]
                },
                422,
            )
        option = next((o for o in self.options if o.id == req.get("plan_id")), None)
        if option is None or not self._available(option):
            return self.error_reply("capacity")
        if req.get("os_image") not in option.os_options:
            return self.error_reply(
                "bad_request",
                message=(
                    f"Provided OS image {req.get('os_image')} is not supported for the selected offer. "
                    f"Available OS images: {', '.join(option.os_options)}"
                ),
            )
        granted, _ = self.faults.grant_capacity(1, "deploy_gpu_vm")
        if granted == 0:
            return self.error_reply("capacity")
        instance_id = str(uuid.uuid4())
        self.used[option.id] = self.used.get(option.id, 0) + 1
        self.instances[instance_id] = {
            "id": instance_id,
            "name": name,
            "status": "INITIALIZED",
            "domain": None,
            "location": option.location,
            "resources": {
                "supply": {
                    "vcpu": {"count": option.vcpu},
                    "memory": {"count": option.memory, "units": "Gi"},
                    "storage": {"count": option.storage, "units": "Gi"},
                    "gpu_count": option.gpus,
                },
                "gpu_model": {
                    "vendor": "nvidia",
                    "model": option.model,
                    "vram": option.vram,
                    "interface": option.interface,
                },
            },
            "created_at": now_text(self.clock()),
            "updated_at": now_text(self.clock()),
            "os_image": req["os_image"],
            "ssh_key": req.get("ssh_key", ""),
            "price": option.price,
            "option": option.id,
        }
        self.meter.start(instance_id, str(option.price), name=name)
        # The GPU deploy takes no user data and no start command: nothing runs at boot but sshd.
        self.record_bought(Bought(instance_id, ssh_public_keys=(req.get("ssh_key", ""),)))
        self.record_launch([instance_id])
        return self.json({"instance_id": instance_id})

    def terminate(self, request: Request, id: str) -> Response:
        body = self.instances.get(id)
        if body is None:
            return self.error_reply("not_found", message="Instance not found")
        if body["status"] != "ACTIVE":
            return self.error_reply("bad_request", message="Instance can be terminated only in ACTIVE status")
        body["status"], body["domain"], body["updated_at"] = "ENDED", None, now_text(self.clock())
        self.meter.stop(id)
        self.used[body["option"]] -= 1
        return Response(status=204)

    def list_keys(self, request: Request) -> Response:
        return self.json(copy.deepcopy(self.ssh_keys))

    def add_key(self, request: Request) -> Response:
        req = self.body(request)
        public_key = str(req.get("publicKey", ""))
        parts = public_key.split()
        try:
            blob = base64.b64decode(parts[1], validate=True) if len(parts) > 1 else b""
        except ValueError:
            blob = b""
        if len(parts) < 2 or not blob:
            return self.error_reply("bad_request", message="Invalid public key")
        fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
        existing = [k for k in self.ssh_keys if k["fingerprint"] == fingerprint]
        if existing:
            return self.json(copy.deepcopy(existing))
        key = {
            "name": req.get("name", ""),
            "fingerprint": fingerprint,
            "algorithm": parts[0],
            "comment": " ".join(parts[2:]),
            "publicKey": public_key,
            "active": True,
            "createdAt": "+00" + now_text(),
        }
        self.ssh_keys.append(key)
        return self.json([copy.deepcopy(key)], 201)


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_API_KEY = "fluence-test-key"
CONTRACT_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZsdWVuY2UtY29udHJhY3Qtc3VpdGUta2V5LTAwMDAw contract"
CONTRACT_INSTANCE_TYPE = "h100-80gi-sxm-8gpu-192cpu-1800gi-14000gi"
CONTRACT_REGION = "dulles-usa-1"


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    """No user_data: GPU Cloud VMs take none (the adapter refuses it)."""
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type=CONTRACT_INSTANCE_TYPE,
            region=CONTRACT_REGION,
            gpus=8,
            ssh_public_key=CONTRACT_SSH_KEY,
        )
        for i in range(n)
    ]


def _contract_provider(**kwargs: Any) -> Any:
    from provisioner.providers.fluence.provider import FluenceProvider

    kwargs.setdefault("poll_interval_s", 0.02)  # delete waits for INITIALIZED instances to turn ACTIVE
    return FluenceProvider(**kwargs)


def contract_harness() -> Any:
    """FluenceFake and FluenceProvider at x20 the published limits (40 requests/s, a deploy per 0.1 s)."""
    from provisioner.providers.fluence.client import LIMITS
    from provisioner.testing.contract import Harness

    return Harness(
        name="fluence",
        app=FluenceFake(api_key=CONTRACT_API_KEY),
        make_provider=_contract_provider,
        api_key=CONTRACT_API_KEY,
        node_specs=contract_node_specs,
        published_limits=LIMITS,
        scale=20.0,
        launch_route="deploy_gpu_vm",
        list_route="list_gpu_instances",
        offers_route="gpu_vm_plans",
        balance_fault_route="deploy_gpu_vm",
        needs=(("fluence", FluenceFake.spec_file or ""),),
    )


__all__ = [
    "CONTRACT_API_KEY",
    "CONTRACT_INSTANCE_TYPE",
    "CONTRACT_REGION",
    "CONTRACT_SSH_KEY",
    "DOC_SCHEMAS",
    "OPTION_CAPACITY",
    "FluenceFake",
    "contract_harness",
    "contract_node_specs",
    "doc_problem",
]
