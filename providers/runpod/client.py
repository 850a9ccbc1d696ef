"""RunPod API client: REST v2, plus GraphQL only where v2 has no equivalent (spot pods, spot prices).

One method per endpoint. Every failure becomes a ``provisioner.errors`` exception here:
v2 errors are RFC 9457 problem+json (``{"title","status","detail","errors"?}``); GraphQL
errors arrive as HTTP 200 with an ``errors`` array and are mapped by ``_graphql_error``.
The API key is only ever placed in the Authorization header by ``ApiClient``.

The official SDK (``runpod`` 1.11.0; 1.12.0 has the same API modules) speaks GraphQL only,
with arguments written inline. We use REST v2 where it exists (an OpenAPI file the fake checks
against, HTTP statuses, clusters and billing) and GraphQL variables in our one mutation (the SDK
interpolates values unescaped, and our boot script travels in env); the spot-price query asks a
subset of the SDK's ``gpuTypes`` fields. docs/providers.md has the evidence;
tests/providers/official/runpod.py the witness.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import ValidationError

from provisioner import errors
from provisioner.errors import CapacityError, CredentialsError, ProviderAPIError, QuotaError, RateLimitError
from provisioner.providers.adapter import EndpointClient
from provisioner.providers.http import RateLimits, error_detail
from provisioner.providers.runpod.models import (
    Cluster,
    ClusterList,
    GpuCatalog,
    Pod,
    PodBillingList,
    PodBillingRecord,
    PodList,
    Problem,
    SpotPrice,
    SshKeys,
)

NAME = "runpod"
DEFAULT_BASE_URL = "https://api.runpod.io"

# Published policy: "minute";q=60;w=60, "hour";q=3000;w=3600, "day";q=50000;w=86400.
# A bucket of 10 refilled at 0.8/s allows at most 58 calls in any minute and 2,890 in any
# hour. The day quota (0.58/s sustained) is left to 429 + Retry-After: no run lasts a day.
RATE_LIMITS = RateLimits(requests_per_s=0.8, burst=10)

# v2 has no machine-readable code for "no capacity", only this detail (and GraphQL's
# SUPPLY_CONSTRAINT); insufficient balance is HTTP 402.
_CAPACITY_MARKERS = ("no longer any instances available", "no capacity", "could not be placed")
_BALANCE_MARKERS = ("insufficient balance", "insufficient funds", "balance too low", "not enough credit")

_GPU_PRICES_QUERY = "query SpotPrices { gpuTypes { id secureSpotPrice communitySpotPrice } }"
_RENT_SPOT_MUTATION = (
    "mutation RentInterruptable($input: PodRentInterruptableInput!) { podRentInterruptable(input: $input) { id name } }"
)


def _classify(status: int, message: str) -> type[errors.ProviderError] | None:
    lowered = message.lower()
    if status == 402 or any(marker in lowered for marker in _BALANCE_MARKERS):
        return QuotaError
    if any(marker in lowered for marker in _CAPACITY_MARKERS):
        return CapacityError
    return None


def map_error(provider: str, response: httpx.Response) -> errors.ProviderError:
    """Turn a failed v2 response into the project's error tree, keeping RunPod's own words."""
    try:
        problem = Problem.model_validate(response.json())
        detail = problem.detail or problem.title or response.reason_phrase
        if problem.errors:
            detail = f"{detail} ({'; '.join(problem.errors)[:200]})"
    except (ValueError, ValidationError):
        detail = error_detail(response)
    status = response.status_code
    if status == 401:
        return CredentialsError(provider, f"API key rejected: {detail}")
    if status == 403:
        return CredentialsError(provider, f"API key lacks access: {detail}")
    if status == 429:
        return RateLimitError(provider, detail)
    kind = _classify(status, detail)
    if kind is not None:
        return kind(provider, detail)
    return ProviderAPIError(provider, status, detail)


def _graphql_error(provider: str, problems: list[Any]) -> errors.ProviderError:
    first = problems[0] if problems and isinstance(problems[0], dict) else {}
    message = " ".join(str(first.get("message", "GraphQL error")).split())[:300]
    code = str((first.get("extensions") or {}).get("code", ""))
    if code == "SUPPLY_CONSTRAINT":
        return CapacityError(provider, message)
    if code in ("UNAUTHENTICATED", "FORBIDDEN"):
        return CredentialsError(provider, message)
    kind = _classify(200, message)
    return kind(provider, message) if kind else ProviderAPIError(provider, 200, message)


class RunPodClient(EndpointClient):
    """Thin wrapper over the RunPod endpoints the adapter needs. Thread-safe as ApiClient is."""

    provider = NAME
    default_url = DEFAULT_BASE_URL
    default_limits = RATE_LIMITS
    error_mapper = staticmethod(map_error)

    # -- catalog ---------------------------------------------------------------------------
    def list_gpu_types(self, *, cloud: str | None = None) -> GpuCatalog:
        """``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD``."""
        params: dict[str, Any] = {"include": "AVAILABILITY", "product": "POD"}
        if cloud:
            params["cloud"] = cloud
        return self._parse(GpuCatalog, self.api.request("GET", "/v2/catalog/gpus", params=params), "GPU catalog")

    def list_spot_prices(self) -> list[SpotPrice]:
        """GraphQL ``gpuTypes``: the interruptible floor price per GPU (v2 does not publish it)."""
        data = self._graphql(_GPU_PRICES_QUERY, {}, idempotent=True)  # a read: safe to retry
        return [self._parse(SpotPrice, item, "gpuTypes") for item in data.get("gpuTypes") or []]

    # -- billing --------------------------------------------------------------------------
    def pod_billing(self, pod_id: str, start: str, end: str) -> list[PodBillingRecord]:
        """``GET /v2/billing/pods?podId=&startTime=&endTime=&bucketSize=day``: the pod's billing buckets."""
        params = {"podId": pod_id, "startTime": start, "endTime": end, "bucketSize": "day"}
        return self._parse(
            PodBillingList, self.api.request("GET", "/v2/billing/pods", params=params), "pod billing"
        ).records

    # -- pods -----------------------------------------------------------------------------
    def list_pods(self, *, include_cluster_pods: bool = False) -> list[Pod]:
        """``GET /v2/pods`` (no pagination here): standalone pods, and with ``include_cluster_pods``
        the members of Instant Clusters too (each with its ``cluster`` membership)."""
        params = {"includeClusterPods": "true"} if include_cluster_pods else None
        return self._parse(PodList, self.api.request("GET", "/v2/pods", params=params), "pod list").pods

    def get_pod(self, pod_id: str) -> Pod:
        return self._parse(Pod, self.api.request("GET", f"/v2/pods/{pod_id}"), "pod")

    def create_pod(self, body: dict[str, Any]) -> Pod:
        """``POST /v2/pods`` (201). Not retried on timeout/5xx: the caller reconciles."""
        return self._parse(Pod, self.api.request("POST", "/v2/pods", json=body, launch=True), "pod")

    def rent_interruptible(self, graphql_input: dict[str, Any]) -> str:
        """GraphQL ``podRentInterruptable`` (spot); returns the new pod id."""
        data = self._graphql(_RENT_SPOT_MUTATION, {"input": graphql_input}, launch=True)
        pod = data.get("podRentInterruptable") or {}
        if not pod.get("id"):
            raise ProviderAPIError(NAME, 200, "podRentInterruptable returned no pod id")
        return str(pod["id"])

    def delete_pod(self, pod_id: str) -> None:
        """``DELETE /v2/pods/{id}`` (204). Raises ProviderAPIError(404) if it is gone."""
        self.api.request("DELETE", f"/v2/pods/{pod_id}", expect_json=False)

    # -- Instant Clusters -----------------------------------------------------------------
    def list_clusters(self) -> list[Cluster]:
        """``GET /v2/clusters``: every cluster of the account."""
        return self._parse(ClusterList, self.api.request("GET", "/v2/clusters"), "cluster list").clusters

    def create_cluster(self, body: dict[str, Any]) -> Cluster:
        """``POST /v2/clusters`` (201). Not retried on timeout/5xx: the caller reconciles by name."""
        return self._parse(Cluster, self.api.request("POST", "/v2/clusters", json=body, launch=True), "cluster")

    def list_cluster_pods(self, cluster_id: str) -> list[Pod]:
        """``GET /v2/clusters/{id}/pods``: the member pods. ProviderAPIError(404) if it is gone."""
        return self._parse(PodList, self.api.request("GET", f"/v2/clusters/{cluster_id}/pods"), "pod list").pods

    def delete_cluster(self, cluster_id: str) -> None:
        """``DELETE /v2/clusters/{id}`` (204): the cluster and every member pod. ProviderAPIError(404)
        if it is gone."""
        self.api.request("DELETE", f"/v2/clusters/{cluster_id}", expect_json=False)

    # -- account --------------------------------------------------------------------------
    def get_ssh_keys(self) -> list[str]:
        return self._parse(SshKeys, self.api.request("GET", "/v2/account/ssh-keys"), "ssh-keys").keys

    def put_ssh_keys(self, keys: list[str]) -> list[str]:
        """``PUT /v2/account/ssh-keys``: a full replacement of the account's key set."""
        payload = self.api.request("PUT", "/v2/account/ssh-keys", json={"keys": keys})
        return self._parse(SshKeys, payload, "ssh-keys").keys

    # -- GraphQL --------------------------------------------------------------------------
    def _graphql(
        self, query: str, variables: dict[str, Any], *, launch: bool = False, idempotent: bool = False
    ) -> dict[str, Any]:
        payload = self.api.request(
            "POST", "/graphql", json={"query": query, "variables": variables}, launch=launch, idempotent=idempotent
        )
        if not isinstance(payload, dict):
            raise ProviderAPIError(NAME, 200, f"GraphQL answer is not an object: {json.dumps(payload)[:80]}")
        if payload.get("errors"):
            raise _graphql_error(NAME, payload["errors"])
        data = payload.get("data")
        return data if isinstance(data, dict) else {}


__all__ = ["DEFAULT_BASE_URL", "NAME", "RATE_LIMITS", "RunPodClient", "map_error"]
