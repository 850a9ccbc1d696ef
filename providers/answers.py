"""What a provider's answer may be before anything reads it: bounded JSON, a readable error body, a
Retry-After hint.

The one place a provider body is decoded (``decoded``, through provisioner.untrusted's bounds:
size, depth, finite numbers); a body that breaks a bound is one ProviderAPIError naming the provider
and the endpoint, never a RecursionError from deep inside a parser. ``bounded_error_body`` gives the
error mappers (each provider's ``client.py``) a body they can read with ``response.json()``: a JSON
error body past the bounds is replaced by a one-line note.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from typing import Any

import httpx

from provisioner.errors import ProviderAPIError
from provisioner.untrusted import UntrustedJSONError, loads_bounded


def decoded(provider: str, method: str, path: str, response: httpx.Response) -> Any:
    """The JSON of a successful answer (None when empty); ProviderAPIError naming the endpoint when it
    is not bounded JSON."""
    if not response.content:
        return None
    try:
        return loads_bounded(response.content)
    except UntrustedJSONError as exc:
        raise ProviderAPIError(provider, response.status_code, f"{method} {path}: answer refused: {exc}") from None


def bounded_error_body(response: httpx.Response) -> httpx.Response:
    """``response`` as it is when its body is bounded JSON or plain text; otherwise (JSON nested too
    deep, a non-finite number, ...) the same status with a one-line text body saying so."""
    body = response.content
    if body.lstrip()[:1] not in (b"{", b"["):
        return response
    try:
        loads_bounded(body)
    except UntrustedJSONError as exc:
        if str(exc).startswith("not JSON"):
            return response  # truncated or plain text: the mappers fall back to the text
        return httpx.Response(
            response.status_code,
            headers=[(k, v) for k, v in response.headers.items() if k.lower() != "content-length"],
            content=f"error body refused: {exc}".encode(),
            request=response.request,
        )
    return response


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None when absent or unreadable.

    A malformed header (``soon``, ``nan``, a broken date) is the provider's quirk, not a reason
    to fail the call: it reads as "no hint" and the normal backoff applies.
    """
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if parsed.tzinfo is None:  # RFC 9110 dates are GMT; "-0000" parses naive
            parsed = parsed.replace(tzinfo=datetime.UTC)
        seconds = parsed.timestamp() - time.time()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def error_detail(response: httpx.Response) -> str:
    """Best-effort one-line message from an error body (JSON ``error``/``message``/``detail``)."""
    try:
        body = loads_bounded(response.content)
    except UntrustedJSONError:
        return " ".join(response.text.split())[:300] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("error", "message", "detail", "msg"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message") or value.get("code")
            if value:
                return " ".join(str(value).split())[:300]
    return " ".join(str(body).split())[:300]


__all__ = ["bounded_error_body", "decoded", "error_detail", "parse_retry_after"]
