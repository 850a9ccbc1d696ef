"""Vast.ai REST client: one method per endpoint, errors mapped in one place.

Paths, methods and bodies are what the official client ``vastai`` 1.9.1 sends (its
``vastai/api/*.py``), which is what the live API is known to serve: every path with a
trailing slash except ``/api/v0/users/current``. The OpenAPI file spells them without the
slash; no known client calls those (docs/providers.md, the facts table). Auth is
``Authorization: Bearer <key>`` as the client sends it; the key lives only in the ApiClient.
Deliberately ours: ``User-Agent: gpu-provisioner`` and ``Accept: application/json`` (the client
sends ``vastai-sdk/<version>`` and ``*/*``): we name ourselves; neither header selects anything.

Rate limits. Vast publishes one number: offer search is limited to 10 requests per
minute per IP. Other endpoints have undisclosed per-endpoint minimum intervals whose
429 bodies quote ``threshold=1.0`` .. ``4.5``; we stay under them with 2 requests/s
overall and 1 launch/s (bursts of 4 and 2). ``RateLimits.scaled`` speeds up everything
together: the search limit is kept at the same ratio to ``requests_per_s``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
from pydantic import SecretStr

from provisioner import errors
from provisioner.errors import CapacityError, CredentialsError, ProviderAPIError, QuotaError, RateLimitError
from provisioner.providers.adapter import EndpointClient
from provisioner.providers.http import RateLimiter, RateLimits, RetryPolicy
from provisioner.providers.vastai.models import (
    BundleOffer,
    BundlesResponse,
    Charge,
    ChargesPage,
    CurrentUser,
    Instance,
    InstancesPage,
    LaunchResponse,
    SshKey,
    SshKeyCreated,
)

PROVIDER = "vastai"
OFFICIAL_URL = "https://console.vast.ai"
SEARCH_PER_MINUTE = 10.0
VAST_LIMITS = RateLimits(requests_per_s=2.0, burst=4.0, launches_per_s=1.0, launch_burst=2.0)
_SEARCH_SHARE = (SEARCH_PER_MINUTE / 60.0) / VAST_LIMITS.requests_per_s
INSTANCES_PAGE_LIMIT = 25  # the most GET /api/v1/instances/ returns per page
# The official client never asks for more than 100 charges a page (billing.show_invoices_v1), though
# the spec says the server allows 500: a larger page is not known to work on the live API.
CHARGES_PAGE_LIMIT = 100


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {"msg": " ".join(response.text.split())[:300]}
    return data if isinstance(data, dict) else {"msg": str(data)[:300]}


def _message(body: Mapping[str, Any], response: httpx.Response) -> str:
    for key in ("msg", "message", "detail", "error"):
        value = body.get(key)
        if value:
            return " ".join(str(value).split())[:300]
    return response.reason_phrase or "no detail"


def map_error(provider: str, response: httpx.Response) -> errors.ProviderError:
    """Turn a failed Vast response into the project's error tree (never includes the key).

    Vast's bodies are ``{"success": false, "error": code, "msg": text}``, sometimes only
    ``{"detail": text}`` or plain text. An invalid key is 401 ``auth_error`` (offer search
    answers 404 "Invalid user key"); a rented-away ask is 404/410 ``no_such_ask``.
    """
    status = response.status_code
    body = _body(response)
    code = str(body.get("error") or "")
    message = _message(body, response)
    lowered = f"{code} {message}".lower()
    if status == 401 or code == "auth_error" or "invalid user key" in lowered:
        return CredentialsError(provider, f"API key rejected ({message})")
    if "insufficient credit" in lowered or "insufficient balance" in lowered or "insufficient_credit" in lowered:
        return QuotaError(provider, f"insufficient balance: {message}")
    if status == 429:
        return RateLimitError(provider, f"throttled: {message}")
    if "no_such_ask" in lowered or (status in (404, 410) and "ask_id" in body):
        return CapacityError(provider, f"offer no longer available: {message}")
    return ProviderAPIError(provider, status, message)


class VastClient(EndpointClient):
    """Thin typed wrapper over the endpoints the adapter uses. Thread-safe (httpx.Client is)."""

    provider = PROVIDER
    default_url = OFFICIAL_URL
    default_limits = VAST_LIMITS
    error_mapper = staticmethod(map_error)

    def __init__(self, api_key: SecretStr | None, **options: Any) -> None:
        """As ``EndpointClient`` (same keyword options), plus the search limiter and launch twin."""
        super().__init__(api_key, **options)
        self.search_limiter = RateLimiter.paced(self.limits.requests_per_s * _SEARCH_SHARE, 1.0, self.limits.pacing)
        # Renting an ask is a PUT, which the shared client would retry on 5xx/timeouts and
        # so could rent twice. Launches go through a twin that never retries by itself and
        # shares the same rate-limit buckets; 429s are retried in ``_send_once``.
        self._launch_api = self.api.twin(RetryPolicy(attempts=1))

    def close(self) -> None:
        super().close()
        self._launch_api.close()

    # -- offers ---------------------------------------------------------------------------
    def search_offers(self, query: Mapping[str, Any]) -> list[BundleOffer]:
        """``POST /api/v0/bundles/``: asks matching the filter object ``query``."""

        self.search_limiter.acquire()
        data = self.api.request("POST", "/api/v0/bundles/", json=dict(query))
        return list(self._parse(BundlesResponse, data, "offer search").offers)

    # -- instances ------------------------------------------------------------------------
    def create_instance(self, ask_id: int, body: Mapping[str, Any]) -> LaunchResponse:
        """``PUT /api/v0/asks/{id}/``: rent one ask. Returns LaunchResponse (``new_contract``).

        Sent once: a PUT would be retried by the shared client, but renting is not
        idempotent, so 5xx/timeouts surface and the adapter reconciles by listing.
        """

        data = self._send_once("PUT", f"/api/v0/asks/{int(ask_id)}/", dict(body))
        return self._parse(LaunchResponse, data, "create instance")

    def list_instances_page(self, after_token: str | None = None) -> InstancesPage:
        """``GET /api/v1/instances/``: one keyset page (at most 25 rows), asked as the official
        client's ``show_instances`` asks (every query value JSON-encoded, the token as is)."""

        params: dict[str, Any] = {
            "select_filters": "{}",
            "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
            "limit": INSTANCES_PAGE_LIMIT,
        }
        if after_token:
            params["after_token"] = after_token
        data = self.api.request("GET", "/api/v1/instances/", params=params)
        return self._parse(InstancesPage, data, "instance list")

    def iter_instances(self) -> Iterator[Instance]:
        """Every instance of the account, following ``next_token`` to the end."""
        token: str | None = None
        while True:
            page = self.list_instances_page(token)
            yield from page.instances
            token = page.next_token
            if not token or not page.instances:
                return

    def destroy_instance(self, instance_id: int) -> bool:
        """``DELETE /api/v0/instances/{id}/`` with the official client's empty JSON body. False when it
        was already gone (404)."""
        try:
            self.api.request("DELETE", f"/api/v0/instances/{int(instance_id)}/", json={})
        except ProviderAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def set_label(self, instance_id: int, label: str) -> None:
        """``PUT /api/v0/instances/{id}/`` with ``{"label": ...}`` (the official client's ``label
        instance``): replaces the instance's label. Idempotent, so the shared client may retry it."""
        self.api.request("PUT", f"/api/v0/instances/{int(instance_id)}/", json={"label": label})

    # -- account --------------------------------------------------------------------------
    def list_ssh_keys(self) -> list[SshKey]:
        """``GET /api/v0/ssh/``: the account's keys (404 means none)."""

        try:
            data = self.api.request("GET", "/api/v0/ssh/")
        except ProviderAPIError as exc:
            if exc.status == 404:
                return []
            raise
        rows = data if isinstance(data, list) else []
        return [self._parse(SshKey, row, "ssh key") for row in rows]

    def create_ssh_key(self, public_key: str) -> SshKey:
        """``POST /api/v0/ssh/``: add an account key (Vast copies it to new instances)."""

        data = self.api.request("POST", "/api/v0/ssh/", json={"ssh_key": public_key})
        created: SshKeyCreated = self._parse(SshKeyCreated, data, "ssh key")
        return created.key

    def iter_charges(self, start_unix: int, end_unix: int) -> Iterator[Charge]:
        """``GET /api/v0/charges/``: every instance contract's charges in the day range, page by page,
        asked as the official client's ``show invoices-v1 --charges -c instance`` asks."""
        token: str | None = None
        while True:
            params: dict[str, Any] = {
                "select_filters": json.dumps(
                    {"day": {"gte": start_unix, "lte": end_unix}, "type": {"in": ["instance"]}}
                ),
                "latest_first": "false",
                "limit": CHARGES_PAGE_LIMIT,
                "format": "table",
            }
            if token:
                params["after_token"] = token
            page = self._parse(ChargesPage, self.api.request("GET", "/api/v0/charges/", params=params), "charges")
            yield from page.results
            token = page.next_token
            if not token or not page.results:
                return

    def current_user(self) -> CurrentUser:
        """``GET /api/v0/users/current`` (no trailing slash, as the official client): validates the
        key; carries the balance."""

        return self._parse(CurrentUser, self.api.request("GET", "/api/v0/users/current"), "user")

    def _send_once(self, method: str, path: str, body: dict[str, Any]) -> Any:
        # Renting must not be repeated blindly: only a 429 (Vast did nothing) is retried.
        attempt = 0
        while True:
            try:
                return self._launch_api.request(method, path, json=body, launch=True)
            except RateLimitError as exc:
                if attempt + 1 >= self.api.retry.attempts:
                    raise
                self.api.retry.sleep(self.api.retry.delay(attempt, exc.retry_after_s))
                attempt += 1


__all__ = [
    "CHARGES_PAGE_LIMIT",
    "OFFICIAL_URL",
    "PROVIDER",
    "SEARCH_PER_MINUTE",
    "VAST_LIMITS",
    "VastClient",
    "map_error",
]
