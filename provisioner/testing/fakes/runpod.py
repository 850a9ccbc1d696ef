"""A stateful fake of RunPod's REST v2 API and of its GraphQL API (the operations clients send).

Shapes follow ``shared/provider-apis/runpod/openapi-rest-v2.json`` and its verbatim
examples; every v2 request and response is validated against that spec by ``FakeApp``.
GraphQL (``runpod_graphql``, schema in ``runpod_schema``) is not in the spec: graphql-core
executes it against the schema subset the official SDK, dstack and this project use, and records
a refused request in ``validation_errors`` like any other validation failure. Both APIs read and
write one store: a pod bought over GraphQL is listed by ``GET /v2/pods`` and the other way round.

Behaviour worth knowing:

- Pods start ``PROVISIONING`` and turn ``RUNNING`` after ``boot_polls`` list/get polls
  (the framework's boot clock); ``DELETE`` removes a pod at once (RunPod answers 204 and
  the pod disappears from ``GET /v2/pods``).
- Capacity: a data center whose availability is ``NONE`` for the GPU, a ``capacity_after``
  fault, or a pod larger than ``maxCount`` is refused with RunPod's 400 detail.
- ``balance_usd``: when set, a create whose hourly cost exceeds the balance is refused
  with 402 (RunPod needs at least one hour of credit to deploy).
- Instant Clusters (``/v2/clusters``, handlers in ``runpod_clusters``): a create buys every
  member pod at once or none; members carry ``cluster`` {id, rank, ip}, are left out of
  ``GET /v2/pods`` unless ``includeClusterPods=true``, and ``DELETE /v2/pods/{id}`` of one
  answers 409 (delete the cluster instead), as the spec says.
- ``RateLimit``/``RateLimit-Policy`` headers on every authenticated answer, from RunPod's
  published windows divided by ``limit_scale``; with ``enforce_limits`` an exceeded
  window answers 429 with ``Retry-After``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import secrets
import string
import time
from collections import deque
from http import HTTPStatus
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought, Call, FakeApp, spec_root
from provisioner.testing.fakes.metering import stamp
from provisioner.testing.fakes.runpod_billing import BillingRoutes
from provisioner.testing.fakes.runpod_clusters import ClusterRoutes
from provisioner.testing.fakes.runpod_graphql import NO_CAPACITY, GraphqlRoutes

WINDOWS = (("minute", 60, 60.0), ("hour", 3000, 3600.0), ("day", 50000, 86400.0))

DEFAULT_GPUS: list[dict[str, Any]] = [
    {
        "id": "NVIDIA H100 80GB HBM3",
        "name": "H100 SXM",
        "pool": "HOPPER_80",
        "memory": 80,
        "secure": True,
        "community": True,
        "price": {"secure": 2.99, "community": 2.69},
        "maxCount": {"secure": 8, "community": 8},
        "spot": {"secure": 1.75, "community": 1.49},
        "dataCenters": {"US-KS-2": "HIGH", "EU-RO-1": "LOW"},
    },
    {
        "id": "NVIDIA H200",
        "name": "H200 SXM",
        "pool": "HOPPER_141",
        "memory": 141,
        "secure": True,
        "community": False,
        "price": {"secure": 3.99, "community": 0.0},
        "maxCount": {"secure": 8, "community": 0},
        "spot": {"secure": 2.29, "community": None},
        "dataCenters": {"US-TX-3": "MEDIUM"},
    },
    {
        "id": "NVIDIA A100-SXM4-80GB",
        "name": "A100 SXM",
        "pool": "AMPERE_80",
        "memory": 80,
        "secure": True,
        "community": True,
        "price": {"secure": 1.89, "community": 1.39},
        "maxCount": {"secure": 8, "community": 8},
        "spot": {"secure": 1.19, "community": 0.89},
        "dataCenters": {"US-TX-3": "HIGH", "CA-MTL-1": "NONE"},
    },
    {
        "id": "NVIDIA GeForce RTX 4090",
        "name": "RTX 4090",
        "pool": "ADA_24",
        "memory": 24,
        "secure": True,
        "community": True,
        "price": {"secure": 0.69, "community": 0.34, "serverless": 1.1},
        "maxCount": {"secure": 8, "community": 4},
        "spot": {"secure": 0.44, "community": 0.2},
        "dataCenters": {"US-KS-2": "HIGH", "EU-RO-1": "MEDIUM"},
    },
]
DATA_CENTER_NAMES = {
    "US-KS-2": "US Kansas 2",
    "US-TX-3": "US Texas 3",
    "EU-RO-1": "Europe Romania 1",
    "CA-MTL-1": "Canada Montreal 1",
}


@functools.lru_cache(maxsize=1)
def _load_spec(path: str) -> Any:
    """The v2 spec with ``servers`` set to ``/`` and problem+json read as JSON.

    openapi-core does not treat ``application/problem+json`` (every RunPod error) as JSON
    by default, which would make every error body "not an object".
    """
    from openapi_core import Config, OpenAPI
    from openapi_core.deserializing.media_types import media_type_deserializers

    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    document["servers"] = [{"url": "/"}]
    config = Config(
        spec_validator_cls=None,  # type: ignore[arg-type]  # None skips the check
        extra_media_type_deserializers={"application/problem+json": media_type_deserializers["application/json"]},
    )
    return OpenAPI.from_dict(document, config=config)


def _pod_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(14))


class RunPodFake(FakeApp):
    """RunPod v2 fake; ``pods`` maps id -> the pod as the API returns it."""

    provider = "runpod"
    spec_file = "openapi-rest-v2.json"
    data_center_names = DATA_CENTER_NAMES

    def __init__(
        self,
        *,
        gpus: list[dict[str, Any]] | None = None,
        balance_usd: float | None = None,
        limit_scale: float = 1.0,
        enforce_limits: bool = False,
        windows: tuple[tuple[str, int, float], ...] = WINDOWS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if self.openapi is not None:
            self.openapi = _load_spec(str(spec_root() / self.provider / self.spec_file))
        self._initial_gpus = copy.deepcopy(gpus if gpus is not None else DEFAULT_GPUS)
        self.gpus = copy.deepcopy(self._initial_gpus)
        self.balance_usd = balance_usd
        self.limit_scale = limit_scale
        self.enforce_limits = enforce_limits
        self.windows = windows
        self.pods: dict[str, dict[str, Any]] = {}
        self.ssh_keys: list[str] = []
        self.bids: dict[str, float] = {}
        self._window_calls: deque[float] = deque()
        self.route("GET", "/v2/catalog/gpus", self._catalog, kind="offers", name="listGpuTypes")
        self.route("GET", "/v2/pods", self._list, kind="list", name="listPods")
        self.route("POST", "/v2/pods", self._create, kind="launch", name="createPod")
        self.route("GET", "/v2/pods/{pod_id}", self._get, kind="get", name="getPod")
        self.route("DELETE", "/v2/pods/{pod_id}", self._delete, kind="delete", name="deletePod")
        self.cluster_routes = ClusterRoutes(self)
        BillingRoutes(self)
        self.route("GET", "/v2/account/ssh-keys", self._get_keys, kind="keys", name="getSshKeys")
        self.route("PUT", "/v2/account/ssh-keys", self._put_keys, kind="keys", name="updateSshKeys")
        GraphqlRoutes(self)  # fakes.runpod_graphql: POST /graphql

    # ----- framework hooks -----------------------------------------------------------------
    def instance_count(self) -> int:
        with self.lock:
            return sum(1 for pod in self.pods.values() if pod["status"] != "TERMINATED")

    def reset(self) -> None:
        with self.lock:
            super().reset()
            self.pods.clear()
            self.ssh_keys.clear()
            self.bids.clear()
            self.cluster_routes.clusters.clear()
            self._window_calls.clear()
            self.gpus = copy.deepcopy(self._initial_gpus)

    def state(self) -> dict[str, Any]:
        with self.lock:
            return {
                **super().state(),
                "pods": copy.deepcopy(list(self.pods.values())),
                "clusters": copy.deepcopy(list(self.cluster_routes.clusters.values())),
            }

    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        defaults = {
            "invalid_key": (401, "invalid or expired bearer token"),
            "insufficient_balance": (402, "insufficient balance: deploying needs at least one hour of credit"),
            "capacity": (400, NO_CAPACITY),
            "not_found": (404, "pod not found"),
            "rate_limit": (429, "rate limit exceeded for the minute window"),
            "bad_request": (400, "request could not be processed"),
        }
        code, detail = defaults.get(kind, (status or 500, "internal server error"))
        code = status or code
        return self.problem(code, message or detail)

    def problem(self, status: int, detail: str, errors: list[str] | None = None) -> Response:
        body: dict[str, Any] = {
            "title": HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error",
            "status": status,
            "detail": detail,
        }
        if errors:
            body["errors"] = errors
        response = Response(json.dumps(body), status=status, mimetype="application/problem+json")
        return self._with_limit_headers(response)

    def _dispatch(self, request: Request) -> Response:
        if not request.path.startswith("/_fake/"):
            wait = self._window_wait()
            if wait is not None and self.enforce_limits:
                response = self.problem(429, "rate limit exceeded for the minute window")
                response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
                with self.lock:
                    self.calls.append(
                        Call(time.monotonic(), request.method, request.path, 429, "rate-limited", "other")
                    )
                return response
        return super()._dispatch(request)

    def _validate_response(self, request: Request, response: Response, injected: bool) -> str | None:
        # Tests run RunPod's clock scaled down, so an injected 429 may say "Retry-After: 0.05";
        # the spec says integer seconds. Validate everything else, with that header rounded up.
        retry_after = response.headers.get("Retry-After")
        if injected and retry_after and not retry_after.isdigit():
            try:
                seconds = max(1, math.ceil(float(retry_after)))
            except ValueError:
                seconds = None
            if seconds is not None:
                checked = Response(response.get_data(), status=response.status_code, headers=dict(response.headers))
                checked.headers["Retry-After"] = str(seconds)
                return super()._validate_response(request, checked, injected)
        return super()._validate_response(request, response, injected)

    # ----- rate-limit windows --------------------------------------------------------------
    def _window_wait(self) -> float | None:
        """Count this request; return seconds until it would fit every window, or None if it fits."""
        now = time.monotonic()
        with self.lock:
            longest = max(window for _, _, window in self.windows) / self.limit_scale
            while self._window_calls and now - self._window_calls[0] >= longest:
                self._window_calls.popleft()
            wait = None
            for _name, quota, window in self.windows:
                span = window / self.limit_scale
                inside = [t for t in self._window_calls if now - t < span]
                if len(inside) >= quota:
                    wait = max(wait or 0.0, span - (now - inside[-quota]))
            self._window_calls.append(now)
        return wait

    def _with_limit_headers(self, response: Response) -> Response:
        now = time.monotonic()
        remaining, policy = [], []
        with self.lock:
            calls = list(self._window_calls)
        for name, quota, window in self.windows:
            span = window / self.limit_scale
            used = sum(1 for t in calls if now - t < span)
            remaining.append(f'"{name}";r={max(quota - used, 0)};t={int(span)}')
            policy.append(f'"{name}";q={quota};w={int(span)}')
        response.headers["RateLimit"] = ", ".join(remaining)
        response.headers["RateLimit-Policy"] = ", ".join(policy)
        return response

    def ok(self, body: Any, status: int = 200) -> Response:
        return self._with_limit_headers(self.json(body, status))

    # ----- catalog -------------------------------------------------------------------------
    def _catalog(self, request: Request) -> Response:
        include = request.args.get("include", "")
        cloud = request.args.get("cloud")
        count = int(request.args.get("count", "1"))
        gpus = []
        for gpu in self.gpus:
            clouds = [c for c in ("secure", "community") if gpu[c] and (not cloud or c == cloud.lower())]
            if not clouds or all(gpu["maxCount"][c] < count for c in clouds):
                continue
            item = {
                key: copy.deepcopy(gpu[key])
                for key in ("id", "name", "pool", "memory", "secure", "community", "price", "maxCount")
            }
            item["manufacturer"] = "AMD" if gpu["id"].startswith("AMD") else "NVIDIA"
            if "AVAILABILITY" in include:
                centers = [
                    {"id": dc, "name": DATA_CENTER_NAMES.get(dc, dc), "availability": level}
                    for dc, level in gpu["dataCenters"].items()
                ]
                levels = [c["availability"] for c in centers]
                item["availability"] = max(levels, key=["NONE", "LOW", "MEDIUM", "HIGH"].index, default="NONE")
                if any(level != "NONE" for level in levels):
                    item["dataCenters"] = centers
            gpus.append(item)
        return self.ok({"gpus": gpus})

    # ----- pods ----------------------------------------------------------------------------
    def _visible(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod as a poll shows it; advances PROVISIONING -> RUNNING on the boot clock."""
        if pod["status"] == "PROVISIONING" and self.booted(pod["id"]):
            ip = f"192.0.2.{int(pod['id'], 36) % 250 + 1}"  # TEST-NET-1: never a real host
            port = 30000 + int(pod["id"], 36) % 30000
            pod.update(
                status="RUNNING",
                actions=["stop", "restart", "terminate"],
                startedAt=stamp(self.clock()),
                runtime={"uptime": 0, "ports": [{"private": 22, "public": port, "type": "tcp", "ip": ip}]},
            )
            if "22/tcp" in pod["ports"]:
                pod["ssh"]["direct"] = {
                    "host": ip,
                    "port": port,
                    "username": "root",
                    "command": f"ssh root@{ip} -p {port}",
                }
        return copy.deepcopy(pod)

    def _list(self, request: Request) -> Response:
        members = request.args.get("includeClusterPods", "false") == "true"
        return self.ok({"pods": [self._visible(pod) for pod in self.pods.values() if members or "cluster" not in pod]})

    def _get(self, request: Request, pod_id: str) -> Response:
        pod = self.pods.get(pod_id)
        return self.ok(self._visible(pod)) if pod else self.error_reply("not_found")

    def remove_pod(self, pod_id: str) -> str | None:
        """Delete a standalone pod at once; why not (gone, a cluster member) or None when done."""
        if "cluster" in self.pods.get(pod_id, {}):
            return "pod belongs to a cluster: delete the cluster via DELETE /v2/clusters/{id}"
        if self.pods.pop(pod_id, None) is None:
            return "pod not found"
        self.meter.stop(pod_id)
        return None

    def _delete(self, request: Request, pod_id: str) -> Response:
        refused = self.remove_pod(pod_id)
        if refused == "pod not found":
            return self.error_reply("not_found")
        if refused:
            return self.problem(409, refused)
        return self._with_limit_headers(Response(status=204))

    def _place(self, gpu_id: str, count: int, cloud: str, centers: list[str]) -> tuple[Response | None, str]:
        """Check a placement; (refusal, "") or (None, chosen data center)."""
        gpu = next((g for g in self.gpus if g["id"] == gpu_id), None)
        if gpu is None:
            return self.problem(400, f"gpu type {gpu_id!r} is not available"), ""
        key = cloud.lower()
        if not gpu[key] or count > gpu["maxCount"][key]:
            return self.problem(400, f"{gpu_id} x{count} is not offered on {cloud} cloud"), ""
        stocked = [dc for dc, level in gpu["dataCenters"].items() if level != "NONE" and (not centers or dc in centers)]
        if not stocked:
            return self.error_reply("capacity"), ""
        hourly = gpu["price"][key] * count
        if self.balance_usd is not None and hourly > self.balance_usd:
            return self.error_reply("insufficient_balance"), ""
        granted, _ = self.faults.grant_capacity(1, "createPod")
        if granted < 1:
            return self.error_reply("capacity"), ""
        return None, stocked[0]

    def _new_pod(
        self,
        *,
        name: str,
        image: str,
        gpu_id: str,
        count: int,
        cloud: str,
        center: str,
        disk: int,
        env: dict[str, str],
        ports: list[str],
        args: str,
        start_ssh: bool = False,
        interruptible: bool = False,
        global_networking: bool = False,
        cluster: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        pod_id = _pod_id()
        gpu = next(g for g in self.gpus if g["id"] == gpu_id)
        pod = {
            "id": pod_id,
            "name": name,
            "image": image,
            "args": args,
            "disk": disk,
            "ports": ports,
            "env": env,
            "registry": None,
            "status": "PROVISIONING",
            "actions": ["start", "terminate"],
            "mounts": {},
            "gpu": {"id": gpu_id, "count": count},
            "cloud": cloud,
            "dataCenterId": center,
            "cudaVersion": "12.8",
            "ssh": {
                "proxy": {
                    "host": "ssh.runpod.io",
                    "port": 22,
                    "username": f"{pod_id}-64411eb2",
                    "command": f"ssh {pod_id}-64411eb2@ssh.runpod.io",
                },
                "direct": None,
            },
            "template": None,
            "cost": round(gpu["price"][cloud.lower()] * count, 4),
            "locked": False,
            "globalNetworking": {"enabled": global_networking},
            "runtime": {},
            "createdAt": stamp(self.clock()),
            "startedAt": None,
        }
        if cluster is not None:
            pod["cluster"] = cluster
        self.pods[pod_id] = pod
        self.meter.start(pod_id, str(pod["cost"]), cluster=cluster["id"] if cluster else None, name=name)
        # A pod runs its start command (args) with its environment; startSsh injects the account keys.
        self.record_bought(
            Bought(
                pod_id,
                interruptible=interruptible,
                boot="\n".join([args, *env.values()]),
                ssh_public_keys=tuple(self.ssh_keys) if start_ssh else (),
                private_ip=cluster["ip"] if cluster else None,
                private_network=(
                    f"runpod-cluster-{cluster['id']}" if cluster else "runpod-global" if global_networking else None
                ),
                cluster_product=cluster["id"] if cluster else None,
            )
        )
        self.record_launch([pod_id])
        return pod

    def _create(self, request: Request) -> Response:
        body = self.body(request)
        gpu = body.get("gpu")
        if not gpu:
            return self.problem(400, "exactly one of gpu or cpu must be set (this fake sells GPU pods only)")
        cloud = body.get("cloud", "SECURE")
        refusal, center = self._place(gpu["id"], gpu.get("count", 1), cloud, body.get("dataCenterIds") or [])
        if refusal is not None:
            return refusal
        pod = self._new_pod(
            name=body["name"],
            image=body["image"],
            gpu_id=gpu["id"],
            count=gpu.get("count", 1),
            cloud=cloud,
            center=center,
            disk=body.get("disk", 50),
            env=dict(body.get("env") or {}),
            ports=list(body.get("ports") or []),
            args=body.get("args", ""),
            start_ssh=bool(body.get("startSsh")),
            global_networking=bool(body.get("globalNetworking")),
        )
        return self.ok(copy.deepcopy(pod), 201)

    # ----- account -------------------------------------------------------------------------
    def _get_keys(self, request: Request) -> Response:
        return self.ok({"keys": list(self.ssh_keys)})

    def _put_keys(self, request: Request) -> Response:
        self.ssh_keys = list(self.body(request).get("keys", []))
        return self.ok({"keys": list(self.ssh_keys)})


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_API_KEY = "rp-harness-key"
CONTRACT_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ harness"


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type="1x_RTX4090_SECURE",
            region="US-KS-2",
            ssh_public_key=CONTRACT_SSH_KEY,
            bootstrap="script",
            user_data="#!/bin/sh\necho hello\n",
        )
        for i in range(n)
    ]


def contract_harness() -> Any:
    """The fake enforces RunPod's published windows at the scale the suite runs the adapter (x20)."""
    from provisioner.providers.base import OfferQuery
    from provisioner.providers.runpod.client import RATE_LIMITS
    from provisioner.providers.runpod.provider import RunPodProvider
    from provisioner.testing.contract import Harness

    return Harness(
        name="runpod",
        app=RunPodFake(api_key=CONTRACT_API_KEY, limit_scale=20.0, enforce_limits=True),
        make_provider=lambda **kwargs: RunPodProvider(poll_interval_s=0.05, **kwargs),
        api_key=CONTRACT_API_KEY,
        node_specs=contract_node_specs,
        published_limits=RATE_LIMITS,
        scale=20.0,
        offer_query=OfferQuery(gpu_models=("RTX4090", "H100")),
        needs=(("runpod", RunPodFake.spec_file or ""),),
    )


__all__ = [
    "CONTRACT_API_KEY",
    "CONTRACT_SSH_KEY",
    "DEFAULT_GPUS",
    "NO_CAPACITY",
    "RunPodFake",
    "contract_harness",
    "contract_node_specs",
]
