"""Fluence REST client: one method per endpoint, errors mapped in one place.

Facts (Fluence docs, shared/reference/provider-apis.md section 4): base
``https://api.fluence.dev``; auth header ``X-API-KEY: <key>`` (a missing or bad key gets
403 from the GPU Cloud, 401 ``{"code": "unauthorized", ...}`` from the v1/v2 API). GPU
Cloud errors are FastAPI-style ``{"detail": "..."}`` (400 business refusals such as
``Insufficient balance to deploy instance`` and ``Plan no longer available``) or
``{"detail": [{"loc", "msg", ...}]}`` (422 validation). v1/v2 errors are
``{"code": <ErrorCode>, "error": "..."}`` with ``insufficient_balance`` among the codes.

Fluence publishes no rate limits; ``LIMITS`` is our own conservative choice (2 requests/s,
one deploy per 2 s), not a documented number.
"""

from __future__ import annotations

import httpx
from pydantic import TypeAdapter

from provisioner import errors
from provisioner.errors import CapacityError, CredentialsError, ProviderAPIError, QuotaError, RateLimitError
from provisioner.providers.adapter import EndpointClient, is_not_found
from provisioner.providers.fluence.models import (
    ChargeEntry,
    ClusterDto,
    CreateVmRequest,
    DeployRequest,
    DeployResponse,
    Instance,
    PlansResponse,
    SshKey,
    UserVm,
    VmConfiguration,
    VmPage,
)
from provisioner.providers.http import RateLimits, error_detail

DEFAULT_URL = "https://api.fluence.dev"
LIMITS = RateLimits(requests_per_s=2.0, burst=2.0, launches_per_s=0.5, launch_burst=1.0)
PROVIDER = "fluence"

_CAPACITY_TEXT = ("no longer available", "not enough offers", "no suitable offer", "no capacity")
_QUOTA_TEXT = ("insufficient balance", "insufficient funds", "not enough balance")

_INSTANCES = TypeAdapter(list[Instance])
_KEYS = TypeAdapter(list[SshKey])


def _error_fields(response: httpx.Response) -> tuple[str, str]:
    """(code, one-line message) from either Fluence error envelope."""
    try:
        body = response.json()
    except ValueError:
        return "", error_detail(response)
    if not isinstance(body, dict):
        return "", error_detail(response)
    code = str(body.get("code") or "")
    detail = body.get("detail", body.get("error"))
    if isinstance(detail, list):  # FastAPI validation errors
        parts = []
        for item in detail[:3]:
            if isinstance(item, dict):
                where = ".".join(str(p) for p in item.get("loc", []))
                parts.append(f"{where}: {item.get('msg', '')}".strip(": "))
        message = "; ".join(parts) or "validation error"
    else:
        message = str(detail) if detail else error_detail(response)
    return code, " ".join(message.split())[:400]


def map_error(provider: str, response: httpx.Response) -> errors.ProviderError:
    """A Fluence error response -> the project's error tree (code first, then text, then status)."""
    code, message = _error_fields(response)
    lowered = message.lower()
    status = response.status_code
    text = f"{message} [{code}]" if code else message
    if status in (401, 403) or code in ("unauthorized", "forbidden"):
        return CredentialsError(provider, f"API key rejected (HTTP {status}): {text}")
    if code == "insufficient_balance" or any(t in lowered for t in _QUOTA_TEXT):
        return QuotaError(provider, text)
    if any(t in lowered for t in _CAPACITY_TEXT):
        return CapacityError(provider, text)
    if status == 429:
        return RateLimitError(provider, text)
    return ProviderAPIError(provider, status, text)


def is_not_active(error: errors.ProviderError) -> bool:
    """A terminate refused because the instance is not (yet, or any more) ACTIVE."""
    return isinstance(error, ProviderAPIError) and error.status in (400, 409) and "active" in error.detail.lower()


class FluenceClient(EndpointClient):
    """Thin typed wrapper over the GPU Cloud and v2 VM endpoints. Raises mapped ProviderErrors only."""

    provider = PROVIDER
    default_url = DEFAULT_URL
    default_limits = LIMITS
    error_mapper = staticmethod(map_error)
    auth_header = "X-API-KEY"  # Fluence takes the bare key, not an Authorization header
    auth_scheme = None

    # ----- GPU Cloud ------------------------------------------------------------------------
    def vm_plans(self) -> PlansResponse:
        """GET /gpu/plans/vms: deployable GPU VM options grouped by model and GPU count."""
        result: PlansResponse = self._parse(
            TypeAdapter(PlansResponse), self.api.request("GET", "/gpu/plans/vms"), "plans"
        )
        return result

    def list_instances(self) -> list[Instance]:
        """GET /gpu/instances/vms: every GPU VM of the account, ENDED ones included."""
        result: list[Instance] = self._parse(_INSTANCES, self.api.request("GET", "/gpu/instances/vms"), "instances")
        return result

    def get_instance(self, instance_id: str) -> Instance:
        result: Instance = self._parse(
            TypeAdapter(Instance), self.api.request("GET", f"/gpu/instances/vms/{instance_id}"), "instance"
        )
        return result

    def deploy(self, request: DeployRequest) -> str:
        """POST /gpu/instances/vms; returns the new instance id. Takes a launch token.

        Not retried on timeout/5xx (POST): the caller re-lists and adopts by name.
        """
        body = self.api.request("POST", "/gpu/instances/vms", json=request.model_dump(mode="json"), launch=True)
        result: DeployResponse = self._parse(TypeAdapter(DeployResponse), body, "deploy")
        return result.instance_id

    def terminate(self, instance_id: str) -> None:
        """DELETE /gpu/instances/vms/{id}. Fluence accepts it only for ACTIVE instances."""
        self.api.request("DELETE", f"/gpu/instances/vms/{instance_id}", expect_json=False)

    def aggregated_charges(self, resource_id: str, first: str, last: str) -> list[ChargeEntry]:
        """``GET /v1/billing/charges/aggregated``: one VM's charges over the days ``first``..``last`` (inclusive)."""
        body = self.api.request(
            "GET",
            "/v1/billing/charges/aggregated",
            params={"resourceId": resource_id, "resourceType": "VM", "startDate": first, "endDate": last},
        )
        result: list[ChargeEntry] = self._parse(TypeAdapter(list[ChargeEntry]), body, "aggregated charges")
        return result

    def list_ssh_keys(self) -> list[SshKey]:
        result: list[SshKey] = self._parse(_KEYS, self.api.request("GET", "/ssh_keys"), "ssh_keys")
        return result

    def add_ssh_key(self, name: str, public_key: str) -> list[SshKey]:
        """POST /ssh_keys (201 new, 200 when the same fingerprint exists); returns the key list."""
        body = self.api.request("POST", "/ssh_keys", json={"name": name, "publicKey": public_key})
        result: list[SshKey] = self._parse(_KEYS, body if isinstance(body, list) else [body], "ssh_keys")
        return result

    # ----- v2 VM API ------------------------------------------------------------------------
    def clusters(self) -> list[ClusterDto]:
        body = self.api.request("GET", "/v1/clusters")
        result: list[ClusterDto] = self._parse(TypeAdapter(list[ClusterDto]), (body or {}).get("items"), "clusters")
        return result

    def vm_configurations(self) -> list[VmConfiguration]:
        body = self.api.request("GET", "/v1/configurations/virtual_machines")
        result: list[VmConfiguration] = self._parse(
            TypeAdapter(list[VmConfiguration]), (body or {}).get("items"), "configurations"
        )
        return result

    def list_vms(self, per_page: int = 100) -> list[UserVm]:
        """GET /v2/vms, every page."""
        vms: list[UserVm] = []
        page = 1
        while True:
            body = self.api.request("GET", "/v2/vms", params={"page": page, "perPage": per_page})
            parsed: VmPage = self._parse(TypeAdapter(VmPage), body, "vms")
            vms.extend(parsed.items)
            if page >= parsed.pagination.totalPages or not parsed.items:
                return vms
            page += 1

    def create_vm(self, request: CreateVmRequest) -> UserVm:
        """POST /v2/vms (cloud-init userData travels here, never logged). Takes a launch token."""
        body = self.api.request("POST", "/v2/vms", json=request.model_dump(mode="json", exclude_none=True), launch=True)
        result: UserVm = self._parse(TypeAdapter(UserVm), body, "vm")
        return result

    def terminate_vm(self, vm_id: str) -> None:
        self.api.request("POST", f"/v2/vms/{vm_id}/terminate")


__all__ = ["DEFAULT_URL", "LIMITS", "FluenceClient", "is_not_active", "is_not_found", "map_error"]
