"""A fake Compute Engine v1 REST endpoint for the GCP adapter (the real google-cloud-compute
client talks to it with ``client_options={"api_endpoint": "http://127.0.0.1:PORT"}``).

Serves machineTypes.list, acceleratorTypes.list, regions.get (zones and GPU quotas),
instances.insert/get/aggregatedList/delete, instances.setLabels (``gcp_labels``: the label
fingerprint checked), zoneOperations.get, and firewalls.insert/get/delete
with globalOperations.get (``gcp_firewall``, validated the same way plus GCE's own rules). Inserts answer a DONE
operation; a capacity refusal is a DONE operation carrying ``ZONE_RESOURCE_POOL_EXHAUSTED``
as GCE reports it. Instances go PROVISIONING -> RUNNING after ``boot_polls`` polls, and
STOPPING -> gone after a delete.

Validation: every request body and every answer is parsed by the client library's own
message types with unknown fields refused (``compute_v1.Instance.from_json(...,
ignore_unknown_fields=False)`` and the list/operation types), and the enums the adapter
sets (provisioning model, termination action, host maintenance, NIC type) are checked
against ../shared/provider-apis/gcp/compute_v1_and_billing_fields.json when present.
Authentication: ``Authorization: Bearer <api_key>`` when ``api_key`` is set (an OAuth token).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought, FakeApp, spec_root
from provisioner.testing.fakes.gcp_firewall import FirewallRoutes, firewall_problems
from provisioner.testing.fakes.gcp_labels import LabelRoutes, label_fingerprint

BASE = "/compute/v1/projects/{project}"
MACHINE_TYPES = {
    "a3-highgpu-8g": (208, 1872 * 1024, "nvidia-h100-80gb", 8, 16),
    "a3-megagpu-8g": (208, 1872 * 1024, "nvidia-h100-mega-80gb", 8, 16),
    "a2-ultragpu-8g": (96, 1360 * 1024, "nvidia-a100-80gb", 8, 8),
    "g2-standard-4": (4, 16 * 1024, "nvidia-l4", 1, 0),
    "n2-standard-8": (8, 32 * 1024, "", 0, 0),
}
"""name -> (vCPUs, memory MiB, bundled accelerator, count, local SSD partitions); provider-apis.md 6.1."""
ACCELERATORS = {
    "nvidia-h100-80gb": "NVIDIA H100 80GB",
    "nvidia-h100-mega-80gb": "NVIDIA H100 80GB MEGA",
    "nvidia-a100-80gb": "NVIDIA A100 80GB",
    "nvidia-l4": "NVIDIA L4",
    "nvidia-tesla-t4": "NVIDIA T4",
}
DEFAULT_QUOTAS = {
    "NVIDIA_H100_GPUS": (16.0, 0.0),
    "PREEMPTIBLE_NVIDIA_H100_GPUS": (0.0, 0.0),
    "NVIDIA_L4_GPUS": (8.0, 4.0),
    "CPUS": (2400.0, 0.0),
}
SKUS = {
    ("Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand"): "9.7965",
    ("Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible"): "2.9385",
    ("A3 Instance Core running in Americas", "CPU", "OnDemand"): "0.02392",
    ("Spot Preemptible A3 Instance Core running in Americas", "CPU", "Preemptible"): "0.00718",
    ("A3 Instance Ram running in Americas", "RAM", "OnDemand"): "0.0032",
    ("Spot Preemptible A3 Instance Ram running in Americas", "RAM", "Preemptible"): "0.00096",
    ("Nvidia L4 GPU running in Americas", "GPU", "OnDemand"): "0.56",
    ("G2 Instance Core running in Americas", "CPU", "OnDemand"): "0.02495",
    ("G2 Instance Ram running in Americas", "RAM", "OnDemand"): "0.002923",
    ("Commitment v1: A3 Cpu in Americas for 1 Year", "CPU", "Commit1Yr"): "0.015",
}
"""Cloud Billing Catalog SKUs of Compute Engine in ``sku_regions``: (description, resource group,
usage type) -> USD per unit-hour (fixture data, not truth; A3 Mega and A2 are left unpriced)."""
SKUS_PAGE = 4
_RESPONSE_TYPES = {
    "machineTypes": "MachineTypeList",
    "acceleratorTypes": "AcceleratorTypeList",
    "region": "Region",
    "aggregated": "InstanceAggregatedList",
    "instance": "Instance",
    "operation": "Operation",
    "firewall": "Firewall",
}
_FILTER = re.compile(r'labels\.([\w-]+)\s*=\s*"?([\w-]+)"?')


class GCPFake(FakeApp):
    """See the module docstring."""

    provider = "gcp"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        zones: tuple[str, ...] = ("us-central1-a", "us-central1-b"),
        quotas: dict[str, tuple[float, float]] | None = None,
        skus: dict[tuple[str, str, str], str] | None = None,
        sku_regions: tuple[str, ...] = ("us-central1", "us-east4"),
        hosts: dict[str, tuple[str, str, str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(api_key=api_key, **kwargs)
        self.skus = dict(SKUS if skus is None else skus)
        self.sku_regions = sku_regions
        self.hosts = dict(hosts or {})
        """instance name -> (cluster, block, subblock, host) once RUNNING; default: derived from the name."""
        self.openapi = object()  # validation on: the client library's message types (see _validate_*)
        fields = spec_root() / "gcp" / "compute_v1_and_billing_fields.json"
        self.fields: dict[str, Any] = json.loads(fields.read_text()) if fields.exists() else {}
        self.validation_note = "validating with compute_v1 message types" + (
            "" if self.fields else " (shared enums absent)"
        )
        self.zones = zones
        self.quotas = dict(DEFAULT_QUOTAS if quotas is None else quotas)
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self._ips = itertools.count(2)
        self._deleting: set[tuple[str, str]] = set()
        self.route(
            "GET", f"{BASE}/zones/{{zone}}/machineTypes", self._machine_types, kind="offers", name="machineTypes"
        )
        self.route("GET", f"{BASE}/zones/{{zone}}/acceleratorTypes", self._accelerator_types, name="acceleratorTypes")
        self.route("GET", f"{BASE}/regions/{{region}}", self._region, name="region")
        self.route("POST", f"{BASE}/zones/{{zone}}/instances", self._insert, kind="launch", name="insert")
        self.route("GET", f"{BASE}/aggregated/instances", self._aggregated, kind="list", name="aggregated")
        self.route("GET", f"{BASE}/zones/{{zone}}/instances/{{name}}", self._get, kind="get", name="instance")
        self.route("DELETE", f"{BASE}/zones/{{zone}}/instances/{{name}}", self._delete, kind="delete", name="delete")
        self.route("GET", f"{BASE}/zones/{{zone}}/operations/{{op}}", self._operation, name="operation")
        self.route("GET", "/v1/services/{service}/skus", self._skus, kind="offers", name="skus")
        self.firewall = FirewallRoutes(self, BASE)
        self.labels = LabelRoutes(self, BASE)

    # ----- errors ---------------------------------------------------------------------------------
    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        code, reason, text = {
            "invalid_key": (401, "authError", "Request had invalid authentication credentials."),
            "insufficient_balance": (
                403,
                "quotaExceeded",
                "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 0.0 in region us-central1.",
            ),
            "not_found": (404, "notFound", "The resource was not found"),
            "rate_limit": (429, "rateLimitExceeded", "Rate Limit Exceeded"),
            "bad_request": (400, "invalid", "Invalid value"),
            "conflict": (409, "alreadyExists", "The resource already exists"),
        }.get(kind, (status or 500, "backendError", "Internal error"))
        code = status or code
        body = {
            "error": {
                "code": code,
                "message": message or text,
                "errors": [{"message": message or text, "domain": "global", "reason": reason}],
            }
        }
        return self.json(body, code)

    # ----- validation -----------------------------------------------------------------------------
    def _validate_request(self, request: Request) -> str | None:
        if request.method != "POST":
            return None
        from google.cloud import compute_v1

        body = request.get_data(as_text=True)
        route, _ = self._match(request)
        firewall = route is not None and route.name == "firewall_insert"
        labels = route is not None and route.name == "setLabels"
        kind = (
            compute_v1.Firewall if firewall else compute_v1.InstancesSetLabelsRequest if labels else compute_v1.Instance
        )
        try:
            kind.from_json(body, ignore_unknown_fields=False)
        except Exception as exc:
            return self._problem("request", request, f"{type(exc).__name__}: {exc}")
        if labels:
            return None
        problems = (firewall_problems if firewall else self._enum_problems)(json.loads(body))
        return self._problem("request", request, "; ".join(problems)) if problems else None

    def _enum_problems(self, body: dict[str, Any]) -> list[str]:
        if not self.fields:
            return []
        scheduling = body.get("scheduling", {})
        checks = [
            ("Scheduling.ProvisioningModel", scheduling.get("provisioningModel")),
            ("Scheduling.InstanceTerminationAction", scheduling.get("instanceTerminationAction")),
            ("Scheduling.OnHostMaintenance", scheduling.get("onHostMaintenance")),
        ]
        checks += [("NetworkInterface.NicType", nic.get("nicType")) for nic in body.get("networkInterfaces", [])]
        return [
            f"{field}={value!r} not in {self.fields[field]}"
            for field, value in checks
            if value is not None and value not in self.fields.get(field, [value])
        ]

    def _validate_response(self, request: Request, response: Response, injected: bool) -> str | None:
        if response.status_code >= 300:
            return None
        from google.cloud import compute_v1

        route, _ = self._match(request)
        type_name = _RESPONSE_TYPES.get(route.name if route else "", "Operation")
        module: Any = compute_v1
        if route is not None and route.name == "skus":
            from google.cloud import billing_v1

            module, type_name = billing_v1, "ListSkusResponse"
        try:
            getattr(module, type_name).from_json(response.get_data(as_text=True), ignore_unknown_fields=False)
        except Exception as exc:
            return self._problem("response", request, f"{type_name}: {type(exc).__name__}: {exc}")
        return None

    def _problem(self, what: str, request: Request, detail: str) -> str:
        message = f"gcp {what} {request.method} {request.path}: {detail}"[:2000]
        with self.lock:
            self.validation_errors.append(message)
        return message

    # ----- discovery ------------------------------------------------------------------------------
    def _machine_types(self, request: Request, project: str, zone: str) -> Response:
        items = []
        for name, (cpus, memory_mb, accelerator, count, ssds) in MACHINE_TYPES.items():
            item: dict[str, Any] = {
                "kind": "compute#machineType",
                "name": name,
                "guestCpus": cpus,
                "memoryMb": memory_mb,
                "zone": zone,
                "id": str(abs(hash(name)) % 10**12),
            }
            if accelerator:
                item["accelerators"] = [{"guestAcceleratorType": accelerator, "guestAcceleratorCount": count}]
            if ssds:
                item["bundledLocalSsds"] = {"partitionCount": ssds, "defaultInterface": "NVME"}
            items.append(item)
        return self.json(
            {"kind": "compute#machineTypeList", "id": f"projects/{project}/zones/{zone}/machineTypes", "items": items}
        )

    def _accelerator_types(self, request: Request, project: str, zone: str) -> Response:
        items = [
            {
                "kind": "compute#acceleratorType",
                "name": name,
                "description": text,
                "zone": zone,
                "maximumCardsPerInstance": 8,
            }
            for name, text in ACCELERATORS.items()
        ]
        return self.json({"kind": "compute#acceleratorTypeList", "items": items})

    def _region(self, request: Request, project: str, region: str) -> Response:
        zones = [
            f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{z}"
            for z in self.zones
            if z.startswith(region)
        ]
        quotas = [
            {"metric": metric, "limit": limit, "usage": usage} for metric, (limit, usage) in sorted(self.quotas.items())
        ]
        return self.json({"kind": "compute#region", "name": region, "status": "UP", "zones": zones, "quotas": quotas})

    def _skus(self, request: Request, service: str) -> Response:
        if service != "6F81-5844-456A":
            return self.error_reply("not_found", message=f"service {service} not found")
        if request.args.get("currencyCode", "USD") != "USD":
            return self.error_reply("bad_request", message="only USD in this fake")
        items = []
        for n, ((text, group, usage), price) in enumerate(sorted(self.skus.items())):
            units, _, frac = price.partition(".")
            sku_id = f"{n:04X}-{n * 7 % 65536:04X}-{n * 13 % 65536:04X}"
            items.append(
                {
                    "name": f"services/{service}/skus/{sku_id}",
                    "skuId": sku_id,
                    "description": text,
                    "category": {
                        "serviceDisplayName": "Compute Engine",
                        "resourceFamily": "Compute",
                        "resourceGroup": group,
                        "usageType": usage,
                    },
                    "serviceRegions": list(self.sku_regions),
                    "serviceProviderName": "Google",
                    "pricingInfo": [
                        {
                            "effectiveTime": "2026-11-01T00:00:00Z",
                            "summary": "",
                            "currencyConversionRate": 1,
                            "pricingExpression": {
                                "usageUnit": "GiBy.h" if group == "RAM" else "h",
                                "displayQuantity": 1,
                                "usageUnitDescription": "gibibyte hour" if group == "RAM" else "hour",
                                "baseUnit": "By.s" if group == "RAM" else "s",
                                "baseUnitConversionFactor": 3600,
                                "baseUnitDescription": "byte second" if group == "RAM" else "second",
                                "tieredRates": [
                                    {
                                        "startUsageAmount": 0,
                                        "unitPrice": {
                                            "currencyCode": "USD",
                                            "units": units or "0",
                                            "nanos": int((frac + "000000000")[:9]),
                                        },
                                    }
                                ],
                            },
                        }
                    ],
                    "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": list(self.sku_regions)},
                }
            )
        start = int(request.args.get("pageToken") or 0)
        size = min(int(request.args.get("pageSize") or SKUS_PAGE), SKUS_PAGE)
        body: dict[str, Any] = {"skus": items[start : start + size]}
        if start + size < len(items):
            body["nextPageToken"] = str(start + size)
        return self.json(body)

    # ----- instances ------------------------------------------------------------------------------
    def _operation_body(
        self, project: str, zone: str, target: str, kind: str, error: tuple[int, str, str] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "compute#operation",
            "name": f"operation-{uuid.uuid4().hex[:12]}",
            "operationType": kind,
            "status": "DONE",
            "progress": 100,
            "zone": zone,
            "targetLink": f"projects/{project}/zones/{zone}/instances/{target}",
        }
        if error:
            status, code, message = error
            body.update(
                httpErrorStatusCode=status,
                httpErrorMessage="SERVICE UNAVAILABLE",
                error={"errors": [{"code": code, "message": message}]},
            )
        return body

    def _insert(self, request: Request, project: str, zone: str) -> Response:
        body = self.body(request)
        name = str(body.get("name", ""))
        if (zone, name) in self.instances:
            return self.error_reply(
                "conflict", message=f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists"
            )
        granted, _ = self.faults.grant_capacity(1, "insert")
        if granted < 1:
            return self.json(
                self._operation_body(
                    project,
                    zone,
                    name,
                    "insert",
                    (
                        503,
                        "ZONE_RESOURCE_POOL_EXHAUSTED",
                        f"The zone 'projects/{project}/zones/{zone}' does not have "
                        "enough resources available to fulfill the request.",
                    ),
                )
            )
        ip = f"10.128.0.{next(self._ips)}"
        nics = body.get("networkInterfaces") or [{}]
        for nic in nics:
            nic["networkIP"] = ip
            nic["network"] = f"https://www.googleapis.com/compute/v1/projects/{project}/global/networks/default"
            for access in nic.get("accessConfigs", []):
                access["natIP"] = f"203.0.113.{ip.rsplit('.', 1)[1]}"  # TEST-NET-3
        instance = {
            **body,
            "kind": "compute#instance",
            "id": str(uuid.uuid4().int % 10**18),
            "status": "PROVISIONING",
            "zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}",
            "networkInterfaces": nics,
            "creationTimestamp": self.clock().astimezone(dt.UTC).isoformat(timespec="milliseconds"),
        }
        self.instances[(zone, name)] = instance
        items = {i["key"]: i.get("value", "") for i in body.get("metadata", {}).get("items", [])}
        keys = tuple(line.split(":", 1)[1] for line in items.get("ssh-keys", "").splitlines() if ":" in line)
        self.record_launch([name])
        self.record_bought(
            Bought(
                instance_id=name,
                interruptible=body.get("scheduling", {}).get("provisioningModel") == "SPOT",
                boot=items.get("user-data", ""),
                tags=dict(body.get("labels", {})),
                ssh_public_keys=keys,
                private_ip=ip,
                private_network="default",
            )
        )
        return self.json(self._operation_body(project, zone, name, "insert"))

    def _shown(self, key: tuple[str, str]) -> dict[str, Any] | None:
        """The instance as a poll shows it (advancing boot and deletion), or None when gone."""
        instance = self.instances.get(key)
        if instance is None:
            return None
        instance["labelFingerprint"] = label_fingerprint(instance.get("labels") or {})
        if key in self._deleting:
            if instance["status"] == "STOPPING":
                instance["status"] = "TERMINATED"
                return {**instance, "status": "STOPPING"}
            del self.instances[key]
            self._deleting.discard(key)
            return None
        if instance["status"] == "PROVISIONING" and self.booted(key[1]):
            instance["status"] = "RUNNING"
            cluster, block, subblock, host = self.hosts.get(key[1]) or _host_of(key[1])
            instance["resourceStatus"] = {
                "physicalHost": f"/{cluster}/{block}/{host}",
                "physicalHostTopology": {"cluster": cluster, "block": block, "subblock": subblock, "host": host},
            }
        return instance

    def _aggregated(self, request: Request, project: str) -> Response:
        wanted = dict(_FILTER.findall(request.args.get("filter", "")))
        items: dict[str, dict[str, Any]] = {}
        for key in sorted(self.instances):
            labels = self.instances[key].get("labels", {})
            if any(labels.get(k) != v for k, v in wanted.items()):
                continue
            shown = self._shown(key)
            if shown is not None:
                items.setdefault(f"zones/{key[0]}", {"instances": []})["instances"].append(shown)
        return self.json(
            {"kind": "compute#instanceAggregatedList", "id": f"projects/{project}/aggregated/instances", "items": items}
        )

    def _get(self, request: Request, project: str, zone: str, name: str) -> Response:
        shown = self._shown((zone, name))
        if shown is None:
            return self.error_reply(
                "not_found", message=f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"
            )
        return self.json(shown)

    def _delete(self, request: Request, project: str, zone: str, name: str) -> Response:
        instance = self.instances.get((zone, name))
        if instance is None or (zone, name) in self._deleting:
            return self.error_reply(
                "not_found", message=f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"
            )
        instance["status"] = "STOPPING"
        self._deleting.add((zone, name))
        return self.json(self._operation_body(project, zone, name, "delete"))

    def _operation(self, request: Request, project: str, zone: str, op: str) -> Response:
        return self.json(self._operation_body(project, zone, "", "insert") | {"name": op})

    # ----- FakeApp --------------------------------------------------------------------------------
    def instance_count(self) -> int:
        return sum(1 for key in self.instances if key not in self._deleting)

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.instances.clear()
            self._deleting.clear()
            self.firewall.rules.clear()


def _host_of(name: str) -> tuple[str, str, str, str]:
    """A stable made-up placement for an instance: two per subblock, four per block."""
    found = re.search(r"(\d+)$", name)
    n = int(found.group(1)) if found else 0
    return ("c9a1b2", f"b{n // 4:04x}", f"s{n // 2:04x}", f"h{hashlib.sha1(name.encode()).hexdigest()[:8]}")


# ----- the contract suite's view of this fake (provisioner.testing.contract) ---------------------------------------
CONTRACT_TOKEN = "gcp-test-token"
CONTRACT_PROJECT = "provisioner-test"
CONTRACT_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
CONTRACT_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIContractSuiteKeyMaterial0000000000000 contract"


def contract_node_specs(n: int, prefix: str = "n") -> list[Any]:
    from provisioner.providers.base import NodeSpec

    return [
        NodeSpec(
            name=f"{prefix}{i}",
            instance_type="a3-highgpu-8g",
            region="us-central1",
            zone="us-central1-a",
            gpus=8,
            image=CONTRACT_IMAGE,
            ssh_public_key=CONTRACT_SSH_KEY,
            bootstrap="cloud_init",
            user_data="#cloud-config\n{}\n",
        )
        for i in range(n)
    ]


def contract_provider(*, api_key: str, base_url: str, transport: Any = None, **kwargs: Any) -> Any:
    from google.oauth2.credentials import Credentials

    from provisioner.providers.gcp.provider import GCPProvider
    from provisioner.testing.in_process import RequestsAdapter

    return GCPProvider(
        CONTRACT_PROJECT,
        Credentials(token=str(api_key)),  # type: ignore[no-untyped-call]
        zones=["us-central1-a"],
        endpoint=base_url,
        http_adapter=RequestsAdapter(transport) if transport is not None else None,
        **kwargs,
    )


def contract_harness() -> Any:
    """Roomy H100 quotas: the suite buys many nodes, spot ones too (test_gcp*.py covers refusals)."""
    from provisioner.providers.base import OfferQuery
    from provisioner.providers.gcp.client import LIMITS
    from provisioner.testing.contract import Harness

    app = GCPFake(
        api_key=CONTRACT_TOKEN,
        quotas={
            **DEFAULT_QUOTAS,
            "NVIDIA_H100_GPUS": (100_000.0, 0.0),
            "PREEMPTIBLE_NVIDIA_H100_GPUS": (100_000.0, 0.0),
        },
    )
    return Harness(
        name="gcp",
        app=app,
        make_provider=contract_provider,
        api_key=CONTRACT_TOKEN,
        node_specs=contract_node_specs,
        published_limits=LIMITS,
        scale=20.0,
        offer_query=OfferQuery(gpu_models=("H100",), regions=("us-central1",)),
        launch_route="insert",
        list_route="aggregated",
        offers_route="machineTypes",
        balance_fault_route="insert",
        needs=(("gcp", "compute_v1_and_billing_fields.json"),),
        env=(("PROVISIONER_GCP_IMAGE", CONTRACT_IMAGE),),
    )


__all__ = [
    "ACCELERATORS",
    "CONTRACT_IMAGE",
    "CONTRACT_PROJECT",
    "CONTRACT_SSH_KEY",
    "CONTRACT_TOKEN",
    "DEFAULT_QUOTAS",
    "MACHINE_TYPES",
    "SKUS",
    "GCPFake",
    "contract_harness",
    "contract_node_specs",
    "contract_provider",
]
