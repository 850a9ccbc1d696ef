"""Lambda Cloud REST client: one method per endpoint, errors mapped in one place.

Facts (Lambda OpenAPI 1.10.0 and its docs): base ``https://cloud.lambda.ai``, paths under
``/api/v1``, ``Authorization: Bearer <key>``, success bodies ``{"data": ...}``, errors
``{"error": {"code", "message", "suggestion"}}`` where clients branch on ``code``. Limits:
about one request per second, and launch one request per 12 s (five per minute).
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import TypeAdapter

from provisioner import errors
from provisioner.errors import CapacityError, CredentialsError, ProviderAPIError, QuotaError, RateLimitError
from provisioner.providers.adapter import EndpointClient, is_not_found
from provisioner.providers.http import RateLimits, error_detail
from provisioner.providers.lambda_.models import (
    AuditEvent,
    AuditPage,
    FirewallRule,
    FirewallRuleset,
    Instance,
    InstanceTypesItem,
    LaunchRequest,
    SSHKey,
)

DEFAULT_URL = "https://cloud.lambda.ai"
LIMITS = RateLimits(requests_per_s=1.0, burst=1.0, launches_per_s=1 / 12, launch_burst=1.0)

_CREDENTIALS = {"global/invalid-api-key", "global/forbidden"}
_QUOTA = {"global/account-inactive", "global/invalid-address", "global/quota-exceeded"}
_CAPACITY = {"instance-operations/launch/insufficient-capacity"}
NOT_FOUND = "global/object-does-not-exist"

_TYPES = TypeAdapter(dict[str, InstanceTypesItem])
_ROWS = TypeAdapter(dict[str, dict[str, Any]])
_INSTANCES = TypeAdapter(list[Instance])
_KEYS = TypeAdapter(list[SSHKey])
_RULESETS = TypeAdapter(list[FirewallRuleset])
_RULESET = TypeAdapter(FirewallRuleset)


def _error_fields(response: httpx.Response) -> tuple[str, str]:
    """(code, "message (suggestion)") from Lambda's error envelope, or ("", best effort)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):
        return "", error_detail(response)
    code = str(error.get("code") or "")
    message = " ".join(str(error.get("message") or code or response.reason_phrase).split())
    suggestion = error.get("suggestion")
    if suggestion:
        message = f"{message} {' '.join(str(suggestion).split())}"
    return code, message[:400]


def map_error(provider: str, response: httpx.Response) -> errors.ProviderError:
    """Lambda's error body -> the project's error tree (branching on ``code``, then status)."""
    code, message = _error_fields(response)
    text = f"{message} [{code}]" if code else message
    status = response.status_code
    if code in _CREDENTIALS or status == 401:
        return CredentialsError(provider, text)
    if code in _QUOTA:
        return QuotaError(provider, text)
    if code in _CAPACITY:
        return CapacityError(provider, text)
    if status == 429:
        return RateLimitError(provider, text)
    return ProviderAPIError(provider, status, text)


class LambdaClient(EndpointClient):
    """Thin typed wrapper over ``/api/v1``. Raises mapped ``ProviderError`` subclasses only."""

    provider = "lambda"
    default_url = DEFAULT_URL
    default_limits = LIMITS
    error_mapper = staticmethod(map_error)

    def _data(
        self, method: str, path: str, *, json: Any = None, launch: bool = False, idempotent: bool | None = None
    ) -> Any:
        body = self.api.request(method, f"/api/v1{path}", json=json, launch=launch, idempotent=idempotent)
        if not isinstance(body, dict) or "data" not in body:
            raise ProviderAPIError("lambda", 200, f"{method} {path}: response has no 'data'")
        return body["data"]

    def instance_types(self) -> dict[str, InstanceTypesItem]:
        """GET /instance-types: every type with price and regions that have capacity now."""
        result: dict[str, InstanceTypesItem] = self._parse(
            _TYPES, self._data("GET", "/instance-types"), "instance-types"
        )
        return result

    def instance_type_rows(self) -> dict[str, Any]:
        """GET /instance-types with each row left unparsed (``InstanceTypesItem.model_validate`` it):
        for the catalog, where one malformed row (a NaN price) is dropped, not the whole answer."""
        result: dict[str, Any] = self._parse(_ROWS, self._data("GET", "/instance-types"), "instance-types")
        return result

    def list_instances(self) -> list[Instance]:
        """GET /instances: every instance of the account (no pagination)."""
        result: list[Instance] = self._parse(_INSTANCES, self._data("GET", "/instances"), "instances")
        return result

    def get_instance(self, instance_id: str) -> Instance:
        result: Instance = self._parse(
            TypeAdapter(Instance), self._data("GET", f"/instances/{instance_id}"), "instance"
        )
        return result

    def rename_instance(self, instance_id: str, name: str) -> Instance:
        """POST /instances/{id} with a new name (the only per-instance field Lambda lets us change).

        Setting a name twice is harmless, so this POST is retried on 5xx and timeouts."""
        data = self._data("POST", f"/instances/{instance_id}", json={"name": name}, idempotent=True)
        result: Instance = self._parse(TypeAdapter(Instance), data, "instance")
        return result

    def launch(self, request: LaunchRequest) -> list[str]:
        """POST /instance-operations/launch; returns the new ids (possibly fewer than asked).

        Takes a launch-limiter token. Not retried on timeout/5xx: the caller reconciles.
        """
        data = self._data(
            "POST", "/instance-operations/launch", launch=True, json=request.model_dump(mode="json", exclude_none=True)
        )
        ids = data.get("instance_ids") if isinstance(data, dict) else None
        if not isinstance(ids, list):
            raise ProviderAPIError("lambda", 200, "launch response has no instance_ids")
        return [str(i) for i in ids]

    def terminate(self, instance_ids: list[str]) -> list[Instance]:
        """POST /instance-operations/terminate. A 404 means one of the ids is unknown.

        Retried on 5xx and timeouts like a DELETE: terminating twice buys nothing (a repeat
        that finds an id gone answers 404, which the provider handles)."""
        data = self._data(
            "POST", "/instance-operations/terminate", json={"instance_ids": instance_ids}, idempotent=True
        )
        result: list[Instance] = self._parse(_INSTANCES, (data or {}).get("terminated_instances", []), "terminate")
        return result

    def audit_events(self, start: str | None = None) -> tuple[list[AuditEvent], frozenset[str]]:
        """GET /audit-events from ``start`` (ISO 8601) on, every page; with the shapes the pages had.

        Lambda's specs disagree on the page: 1.10.0 answers ``{"data": [...], "page_token"}``,
        1.8.3 ``{"data": {"events": [...], "page_token"}}``. Both are read; the caller says which
        it saw (``"1.10.0"``/``"1.8.3"``), since which one the live API sends is not known here."""
        events: list[AuditEvent] = []
        shapes: set[str] = set()
        token: str | None = None
        while True:
            params = {key: value for key, value in (("start", start), ("page_token", token)) if value}
            page: AuditPage = self._parse(
                TypeAdapter(AuditPage),
                self.api.request("GET", "/api/v1/audit-events", params=params or None),
                "audit-events",
            )
            events += page.events
            shapes.add(page.shape)
            token = page.next_token
            if not token or not page.events:
                return events, frozenset(shapes)

    def list_ssh_keys(self) -> list[SSHKey]:
        result: list[SSHKey] = self._parse(_KEYS, self._data("GET", "/ssh-keys"), "ssh-keys")
        return result

    def add_ssh_key(self, name: str, public_key: str) -> SSHKey:
        data = self._data("POST", "/ssh-keys", json={"name": name, "public_key": public_key})
        result: SSHKey = self._parse(TypeAdapter(SSHKey), data, "ssh-key")
        return result

    # ----- firewall rulesets ----------------------------------------------------------------
    def list_firewall_rulesets(self) -> list[FirewallRuleset]:
        """GET /firewall-rulesets: every ruleset of the account, in every region."""
        result: list[FirewallRuleset] = self._parse(
            _RULESETS, self._data("GET", "/firewall-rulesets"), "firewall-rulesets"
        )
        return result

    def create_firewall_ruleset(self, name: str, region: str, rules: list[FirewallRule]) -> FirewallRuleset:
        """POST /firewall-rulesets. Not retried on timeout/5xx: the caller reconciles by name."""
        body = {"name": name, "region": region, "rules": [r.model_dump(exclude_none=True) for r in rules]}
        result: FirewallRuleset = self._parse(
            _RULESET, self._data("POST", "/firewall-rulesets", json=body), "firewall-ruleset"
        )
        return result

    def update_firewall_ruleset(self, ruleset_id: str, rules: list[FirewallRule]) -> FirewallRuleset:
        """PATCH /firewall-rulesets/{id} with the full rule list (setting it twice is harmless: retried)."""
        body = {"rules": [r.model_dump(exclude_none=True) for r in rules]}
        data = self._data("PATCH", f"/firewall-rulesets/{ruleset_id}", json=body, idempotent=True)
        result: FirewallRuleset = self._parse(_RULESET, data, "firewall-ruleset")
        return result

    def delete_firewall_ruleset(self, ruleset_id: str) -> None:
        """DELETE /firewall-rulesets/{id}. ProviderAPIError 404 if it is gone, 400
        ``firewall-rulesets/firewall-ruleset-in-use`` while instances still use it."""
        self._data("DELETE", f"/firewall-rulesets/{ruleset_id}")


__all__ = ["DEFAULT_URL", "LIMITS", "NOT_FOUND", "LambdaClient", "is_not_found", "map_error"]
