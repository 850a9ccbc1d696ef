"""Compute Engine v1 client: one method per API call, google.api_core errors mapped in one place.

The Google libraries are imported here only. Every call goes through ``_call``: our own retry
loop (the generated clients' retries are off: every call passes ``retry=None``) and
``map_error``. The client-side token bucket (``LIMITS``) is taken per HTTP request, in the
clients' requests session, so each page of a paged list, each retry and each operation poll
spends a token (inserts also take one launch token per call):

- HTTP 401, and 403 without a quota reason -> CredentialsError
- 403 ``quotaExceeded`` / operation error ``QUOTA_EXCEEDED`` -> QuotaError
- 429 / ``rateLimitExceeded`` -> RateLimitError (``Retry-After`` honoured when sent)
- ``ZONE_RESOURCE_POOL_EXHAUSTED`` (HTTP or operation error) -> CapacityError
- anything else -> ProviderAPIError(status, message); timeouts and refused connections: status 0.

Throttling is always retried; 5xx and transport errors only for calls that buy nothing.
``instances.insert`` is never retried: the instance name is the idempotence key, and the
adapter re-reads it after a lost answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import requests.adapters
import requests.exceptions
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.cloud import billing_v1, compute_v1
from google.protobuf import json_format

from provisioner.errors import (
    CapacityError,
    CredentialsError,
    ProviderAPIError,
    ProviderError,
    QuotaError,
    RateLimitError,
)
from provisioner.providers.gcp import FACTS
from provisioner.providers.http import RateLimiter, RateLimits, RetryPolicy, parse_retry_after

PROVIDER = "gcp"
LIMITS = RateLimits(requests_per_s=10.0, burst=5.0, launches_per_s=2.0, launch_burst=1.0)
"""Our own pacing, well below Compute Engine's per-project API rate quotas (read and write
requests per minute; exact defaults vary by project: UNVERIFIED here, see docs/aws-gcp.md)."""
_CAPACITY = FACTS.capacity_codes
_QUOTA = ("quotaExceeded", "QUOTA_EXCEEDED")
_RATE = ("rateLimitExceeded", "userRateLimitExceeded")
_OPERATIONS = {
    "InstancesClient": ("zone_operations", "ZoneOperationsClient"),
    "FirewallsClient": ("global_operations", "GlobalOperationsClient"),
}
"""The operations client each client's long-running calls poll through (ours, paced)."""


def _one_line(text: str, limit: int = 400) -> str:
    return " ".join(str(text).split())[:limit]


def _reasons(exc: gexc.GoogleAPICallError) -> str:
    """Every reason/code the error carries (JSON ``errors[].reason`` or operation ``errors[].code``)."""
    found = []
    for item in exc.errors or ():
        if isinstance(item, dict):
            found += [str(item.get("reason", "")), str(item.get("code", ""))]
        else:
            found += [str(getattr(item, "code", "")), str(getattr(item, "reason", ""))]
    return " ".join([*found, str(exc.message)])


def map_error(exc: Exception) -> ProviderError:
    """A google.api_core / transport exception -> the project's error tree (module docstring)."""
    if isinstance(exc, gexc.GoogleAPICallError):
        status = int(exc.code or 0)
        reasons = _reasons(exc)
        text = _one_line(exc.message or type(exc).__name__)
        if any(code in reasons for code in _CAPACITY):
            return CapacityError(PROVIDER, f"{text} [ZONE_RESOURCE_POOL_EXHAUSTED]")
        if any(code in reasons for code in _QUOTA):
            return QuotaError(PROVIDER, text)
        if status == 429 or any(code in reasons for code in _RATE):
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None) or {}
            return RateLimitError(PROVIDER, text, parse_retry_after(headers.get("Retry-After")))
        if status in (401, 403):
            return CredentialsError(PROVIDER, text)
        return ProviderAPIError(PROVIDER, status, text)
    if isinstance(exc, requests.exceptions.RequestException):
        return ProviderAPIError(PROVIDER, 0, f"{type(exc).__name__}: {_one_line(str(exc), 200)}")
    import google.auth.exceptions

    if isinstance(exc, google.auth.exceptions.GoogleAuthError):
        return CredentialsError(
            PROVIDER,
            f"no usable Google credentials: {_one_line(str(exc))} (Application "
            "Default Credentials: GOOGLE_APPLICATION_CREDENTIALS or gcloud auth)",
        )
    return ProviderAPIError(PROVIDER, 0, f"{type(exc).__name__}: {_one_line(str(exc))}")


def _mapped(exc: Exception) -> bool:
    import google.auth.exceptions

    return isinstance(
        exc, (gexc.GoogleAPICallError, requests.exceptions.RequestException, google.auth.exceptions.GoogleAuthError)
    )


def _fixed_token(credentials: Any) -> bool:
    """Whether ``credentials`` are a bare OAuth access token (no refresh token, nothing to refresh with)."""
    import google.oauth2.credentials

    return isinstance(credentials, google.oauth2.credentials.Credentials) and credentials.refresh_token is None


class _PacedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter taking one token from ``limiter`` before each HTTP request it sends
    (through ``inner`` when given, else over the network)."""

    def __init__(self, limiter: RateLimiter, inner: requests.adapters.BaseAdapter | None = None) -> None:
        super().__init__()
        self._limiter = limiter
        self._inner = inner

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._limiter.acquire()
        if self._inner is not None:
            return self._inner.send(request, *args, **kwargs)
        return super().send(request, *args, **kwargs)


def is_not_found(error: ProviderError) -> bool:
    return isinstance(error, ProviderAPIError) and error.status == 404


class GCPClient:
    """compute_v1 clients sharing credentials, one limiter and one retry policy. Thread-safe.

    ``credentials`` default to Application Default Credentials; ``endpoint`` (a URL with its
    scheme, e.g. ``http://127.0.0.1:PORT``) replaces compute.googleapis.com, ``billing_endpoint``
    (default: ``endpoint``) cloudbilling.googleapis.com. ``http_adapter`` (a requests transport
    adapter) sends every request instead of the network, after the limiter (tests: an in-process fake).
    """

    def __init__(
        self,
        project: str,
        credentials: Any = None,
        *,
        endpoint: str | None = None,
        billing_endpoint: str | None = None,
        limits: RateLimits | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        http_adapter: requests.adapters.BaseAdapter | None = None,
    ) -> None:
        self.project = project
        self.endpoint = endpoint or None
        self.billing_endpoint = billing_endpoint or endpoint or None
        self.limits = limits or LIMITS
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self._credentials = credentials
        self._http_adapter = http_adapter
        self.limiter = RateLimiter.for_requests(self.limits)
        self.launch_limiter = RateLimiter.for_launches(self.limits)
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GCPClient(project={self.project!r}, endpoint={self.endpoint!r})"

    def _client(self, kind: str) -> Any:
        with self._lock:
            if kind not in self._clients:
                client = self._build(kind)
                operations = getattr(client._transport, "_extended_operations_services", None)
                if isinstance(operations, dict) and kind in _OPERATIONS:
                    # The library would poll inserts through a client of its own, at the default
                    # endpoint and outside our limiter: hand it ours.
                    key, ops_kind = _OPERATIONS[kind]
                    operations[key] = self._build(ops_kind)
                self._clients[kind] = client
            return self._clients[kind]

    def _build(self, kind: str) -> Any:
        """A REST client of ``kind`` whose every HTTP request takes a token from the limiter."""
        endpoint = self.billing_endpoint if kind == "CloudCatalogClient" else self.endpoint
        options = ClientOptions(api_endpoint=endpoint) if endpoint else None
        cls = getattr(billing_v1 if kind == "CloudCatalogClient" else compute_v1, kind)
        try:
            client = cls(credentials=self._credentials, transport="rest", client_options=options)
        except Exception as exc:
            if not _mapped(exc):
                raise
            raise map_error(exc) from exc
        session = getattr(client._transport, "_session", None)
        if session is None:  # a library change: refuse rather than send requests outside the limits
            raise RuntimeError(f"{kind}: the REST transport has no requests session to pace")
        paced = _PacedAdapter(self.limiter, self._http_adapter)
        session.mount("https://", paced)
        session.mount("http://", paced)
        if _fixed_token(self._credentials):
            # A bare access token cannot be refreshed: answer a 401 with the API's own message
            # instead of google-auth's failed refresh (the session's refresh-on-401 is private).
            session._refresh_status_codes = ()
        return client

    def _call(
        self,
        kind: str,
        method: str,
        *,
        idempotent: bool = True,
        launch: bool = False,
        consume: Callable[[Any], Any] = lambda result: result,
        **params: Any,
    ) -> Any:
        """One API call (and ``consume`` of its result, e.g. paging), paced, retried, errors mapped.

        Each HTTP request it makes (every page, every operation poll) takes a request token in
        the session; a ``launch`` call also takes one launch token per attempt.
        """
        attempts = max(self.retry.attempts, 1)
        for attempt in range(attempts):
            if launch and self.launch_limiter is not None:
                self.launch_limiter.acquire()
            try:
                return consume(getattr(self._client(kind), method)(retry=None, timeout=self.timeout_s, **params))
            except (json_format.ParseError, RecursionError, ValueError) as exc:  # an answer the client cannot read
                raise ProviderAPIError(
                    PROVIDER, 0, f"{kind}.{method}: answer refused: unreadable ({type(exc).__name__})"
                ) from None
            except Exception as exc:
                if not _mapped(exc):
                    raise
                error = map_error(exc)
                retryable = isinstance(error, RateLimitError) or (
                    idempotent and isinstance(error, ProviderAPIError) and (error.status >= 500 or error.status == 0)
                )
                if not retryable or attempt == attempts - 1:
                    raise error from exc
            retry_after = error.retry_after_s if isinstance(error, RateLimitError) else None
            self.retry.sleep(self.retry.delay(attempt, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    # ----- discovery ----------------------------------------------------------------------------
    def machine_types(self, zone: str) -> list[Any]:
        """machineTypes.list in ``zone`` (every page)."""
        return list(self._call("MachineTypesClient", "list", consume=list, project=self.project, zone=zone))

    def accelerator_types(self, zone: str) -> list[Any]:
        """acceleratorTypes.list in ``zone`` (every page)."""
        return list(self._call("AcceleratorTypesClient", "list", consume=list, project=self.project, zone=zone))

    def region(self, region: str) -> Any:
        """regions.get: the region with its ``zones`` URLs and ``quotas`` (metric, limit, usage)."""
        return self._call("RegionsClient", "get", project=self.project, region=region)

    def skus(self, service: str) -> list[dict[str, Any]]:
        """Cloud Billing Catalog ``services.skus.list`` in USD (every page), as REST JSON dicts."""
        pages = self._call(
            "CloudCatalogClient", "list_skus", consume=list, request={"parent": service, "currency_code": "USD"}
        )
        return [billing_v1.Sku.to_dict(sku, preserving_proto_field_name=False) for sku in pages]

    # ----- instances ---------------------------------------------------------------------------
    def insert_instance(self, zone: str, instance: Any) -> None:
        """instances.insert and wait for its operation (done at once for capacity errors). Never retried."""
        self._call(
            "InstancesClient",
            "insert",
            idempotent=False,
            launch=True,
            consume=lambda op: op.result(timeout=self.timeout_s),
            project=self.project,
            zone=zone,
            instance_resource=instance,
        )

    def get_instance(self, zone: str, name: str) -> Any:
        return self._call("InstancesClient", "get", project=self.project, zone=zone, instance=name)

    def list_instances(self, label_filter: str) -> Iterator[tuple[str, Any]]:
        """instances.aggregatedList with a filter: (zone, instance) across every zone."""
        pages = self._call(
            "InstancesClient",
            "aggregated_list",
            consume=list,
            request={"project": self.project, "filter": label_filter},
        )
        for scope, scoped in pages:
            for instance in scoped.instances:
                yield scope.rsplit("/", 1)[-1], instance

    def set_labels(self, zone: str, name: str, labels: Mapping[str, str], fingerprint: str) -> None:
        """instances.setLabels: replace the instance's labels, given the ``labelFingerprint`` it was
        read with (a stale one: ProviderAPIError 412, nothing changed); waits for its operation."""
        request = compute_v1.InstancesSetLabelsRequest(labels=dict(labels), label_fingerprint=fingerprint)
        self._call(
            "InstancesClient",
            "set_labels",
            idempotent=False,  # a retry after a lost answer meets a changed fingerprint: the caller reads again
            consume=lambda op: op.result(timeout=self.timeout_s),
            project=self.project,
            zone=zone,
            instance=name,
            instances_set_labels_request_resource=request,
        )

    def delete_instance(self, zone: str, name: str) -> None:
        """instances.delete (deleting twice buys nothing, so it is retried like a read)."""
        self._call("InstancesClient", "delete", consume=lambda op: None, project=self.project, zone=zone, instance=name)

    # ----- firewall rules (global, per network) ------------------------------------------------
    def insert_firewall(self, firewall: Any) -> None:
        """firewalls.insert and wait for its global operation. Never retried (a lost answer: get it)."""
        self._call(
            "FirewallsClient",
            "insert",
            idempotent=False,
            consume=lambda op: op.result(timeout=self.timeout_s),
            project=self.project,
            firewall_resource=firewall,
        )

    def get_firewall(self, name: str) -> Any:
        return self._call("FirewallsClient", "get", project=self.project, firewall=name)

    def delete_firewall(self, name: str) -> None:
        """firewalls.delete and wait for it (deleting twice is harmless: retried like a read)."""
        self._call(
            "FirewallsClient",
            "delete",
            consume=lambda op: op.result(timeout=self.timeout_s),
            project=self.project,
            firewall=name,
        )


__all__ = ["LIMITS", "GCPClient", "is_not_found", "map_error"]
