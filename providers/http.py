"""Shared HTTP plumbing for the REST providers: auth, timeouts, rate limits, retries.

Each provider's ``client.py`` builds one ``ApiClient`` with its base URL, auth header,
published rate limits and an ``error_mapper`` that turns a failed response into the
project's error tree. httpx errors never leave this module or the provider's client.

Retries: idempotent requests (GET, DELETE, PUT) are retried on 429, 5xx and transport
errors with exponential backoff and full jitter, honouring ``Retry-After``. Requests that
buy something (POST) are retried only when the provider certainly did not act on them
(429, or a connection that was never made); on a timeout or 5xx they raise, and the
adapter reconciles by listing what exists (that is what makes create idempotent).

Provider answers are untrusted: a body is streamed and the request fails with
ProviderAPIError once it passes ``max_body_bytes`` (16 MiB by default), so a hostile or
broken endpoint cannot make the client buffer gigabytes; it is decoded only through
providers.answers (bounded depth, finite numbers), so a hostile body is one line naming the
endpoint.

Every call has an overall deadline (``deadline_s``, default five times ``timeout_s``, counted
from when the first attempt may go out under our own rate limits): the attempts, their
back-off sleeps and every socket connect, write and read together. httpx's
own timeouts are per operation, so a provider that drips one byte a second would never trip
them; here each socket operation's timeout is cut to what is left of the call's deadline
(a wrapper around httpcore's network backend), and a call past its deadline raises
ProviderAPIError (status 0) saying so. A POST cut off this way was possibly acted on: the
adapters treat it like any lost answer (providers.orchestrate).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from pydantic import SecretStr

from provisioner.errors import ProviderAPIError, ProviderError, RateLimitError
from provisioner.providers.answers import bounded_error_body, decoded, error_detail, parse_retry_after
from provisioner.providers.deadlines import DEADLINE as _DEADLINE
from provisioner.providers.deadlines import bound_by_deadlines
from provisioner.providers.redact import Redactor, sensitive_strings

log = logging.getLogger("provisioner.http")

ErrorMapper = Callable[[str, httpx.Response], ProviderError]
MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest response body read from a provider (the biggest real answer, a 1000-ask Vast.ai
search, is a few MB)."""
_CHUNK_BYTES = 64 * 1024
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class Pacing(Protocol):
    """The clock and sleep a rate limiter runs on (``time.monotonic``/``time.sleep`` unless a
    test injects virtual time through ``RateLimits.pacing``)."""

    def clock(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RateLimiter:
    """Token bucket: ``rate_per_s`` sustained, ``burst`` at once. Thread-safe, blocking.

    ``granted`` counts the tokens handed out: each client takes one per HTTP request it sends
    (pages, retries and polls included), so the count equals the requests made.
    """

    def __init__(
        self,
        rate_per_s: float,
        burst: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.granted = 0
        self._tokens = burst
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._lock = threading.Lock()

    @classmethod
    def paced(cls, rate_per_s: float, burst: float, pacing: Pacing | None) -> RateLimiter:
        """A limiter on ``pacing``'s clock and sleep (real time when None)."""
        if pacing is None:
            return cls(rate_per_s, burst)
        return cls(rate_per_s, burst, clock=pacing.clock, sleep=pacing.sleep)

    @classmethod
    def for_requests(cls, limits: RateLimits) -> RateLimiter:
        return cls.paced(limits.requests_per_s, limits.burst, limits.pacing)

    @classmethod
    def for_launches(cls, limits: RateLimits) -> RateLimiter | None:
        """The launch limiter, or None where the provider publishes no launch limit."""
        if not limits.launches_per_s:
            return None
        return cls.paced(limits.launches_per_s, limits.launch_burst, limits.pacing)

    def acquire(self) -> float:
        """Take one token, sleeping until one is available; return seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate_per_s)
            self._stamp = now
            self._tokens -= 1
            self.granted += 1
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.rate_per_s
        if wait:
            self._sleep(wait)
        return wait


@dataclass(frozen=True)
class RateLimits:
    """A provider's published limits. ``scaled(k)`` makes them k times faster (tests, benches).

    ``pacing`` (not a limit: ignored in comparisons) replaces real time in the limiters built
    from these limits; tests pass virtual time so that pacing never depends on the wall clock.
    """

    requests_per_s: float
    burst: float = 1.0
    launches_per_s: float | None = None
    launch_burst: float = 1.0
    pacing: Pacing | None = field(default=None, compare=False, repr=False)

    def scaled(self, factor: float) -> RateLimits:
        launches = self.launches_per_s * factor if self.launches_per_s else None
        return RateLimits(self.requests_per_s * factor, self.burst, launches, self.launch_burst, self.pacing)

    def on(self, pacing: Pacing) -> RateLimits:
        """The same limits on ``pacing``'s clock."""
        return dataclasses.replace(self, pacing=pacing)


@dataclass
class RetryPolicy:
    attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every client shares: httpx's default (certifi's bundle, or
    SSL_CERT_FILE / SSL_CERT_DIR), its CA file read once per process, not once per client (~0.1 s of
    CPU each; a command builds an adapter per provider and per retry policy)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the same two variables


class ApiClient:
    """An httpx client bound to one provider. Never logs or repr()s the API key."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: SecretStr | None,
        *,
        error_mapper: ErrorMapper,
        limits: RateLimits,
        auth_header: str = "Authorization",
        auth_scheme: str | None = "Bearer",
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.max_body_bytes = max_body_bytes
        self.deadline_s = deadline_s if deadline_s is not None else 5 * timeout_s
        self._clock = clock
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._transport = transport
        self._auth_header = auth_header
        self._auth_scheme = auth_scheme
        self._error_mapper = error_mapper
        self.retry = retry or RetryPolicy()
        self.limiter = RateLimiter.for_requests(limits)
        self.launch_limiter = RateLimiter.for_launches(limits)
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            transport=transport,
            headers={"User-Agent": "gpu-provisioner", "Accept": "application/json"},
            verify=tls_context(),
        )
        self.socket_deadlines = bound_by_deadlines(self._http)
        """Whether socket operations are cut at the deadline (True unless a transport was injected)."""

    def __repr__(self) -> str:
        return f"ApiClient(provider={self.provider!r}, base_url={str(self._http.base_url)!r})"

    def close(self) -> None:
        self._http.close()

    def twin(self, retry: RetryPolicy) -> ApiClient:
        """A client for the same endpoint and key with another retry policy and its own
        connections, drawing on this client's rate-limit buckets (close it separately)."""
        other = ApiClient(
            self.provider,
            str(self._http.base_url),
            self._api_key,
            error_mapper=self._error_mapper,
            limits=RateLimits(self.limiter.rate_per_s, self.limiter.burst),
            auth_header=self._auth_header,
            auth_scheme=self._auth_scheme,
            timeout_s=self._timeout_s,
            retry=retry,
            transport=self._transport,
            max_body_bytes=self.max_body_bytes,
            deadline_s=self.deadline_s,
            clock=self._clock,
        )
        other.limiter, other.launch_limiter = self.limiter, self.launch_limiter
        return other

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        launch: bool = False,
        expect_json: bool = True,
        idempotent: bool | None = None,
    ) -> Any:
        """Send one API call with limits and retries; return parsed JSON (or None).

        ``launch`` also takes a token from the launch limiter. ``idempotent`` overrides the
        method's default (GET/PUT/DELETE yes, POST no) for POSTs that are safe to repeat: a
        rename, a read-only GraphQL query. Raises the provider's mapped ProviderError subclass
        on failure; ProviderAPIError (status 0) once ``deadline_s`` has passed.
        """
        method = method.upper()
        idempotent = method in _IDEMPOTENT if idempotent is None else idempotent
        deadline: float | None = None
        attempt = 0
        while True:
            self.limiter.acquire()
            if launch and self.launch_limiter:
                self.launch_limiter.acquire()
            if deadline is None:  # the first wait for our own rate limit is not the provider's slowness
                deadline = self._clock() + self.deadline_s
            elif self._clock() >= deadline:
                raise self._past_deadline(method, path)
            try:
                response = self._send(method, path, json=json, params=params, deadline=deadline)
            except httpx.TransportError as exc:
                if self._clock() >= deadline:
                    raise self._past_deadline(method, path) from None
                # No connection (or none from the pool) means the provider never saw the request.
                never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
                wait = self.retry.delay(attempt, None)
                if (idempotent or never_sent) and attempt + 1 < self.retry.attempts and self._clock() + wait < deadline:
                    self._back_off(wait, f"{type(exc).__name__} on {method} {path}")
                    attempt += 1
                    continue
                kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
                raise ProviderAPIError(self.provider, 0, f"{method} {path} {kind}: {type(exc).__name__}") from None
            if response.status_code < 400:
                return decoded(self.provider, method, path, response) if expect_json else None
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            retryable = response.status_code == 429 or (idempotent and response.status_code >= 500)
            wait = self.retry.delay(attempt, retry_after)
            if retryable and attempt + 1 < self.retry.attempts and self._clock() + wait < deadline:
                self._back_off(wait, f"HTTP {response.status_code} on {method} {path}")
                attempt += 1
                continue
            error = self._mapped(method, path, self._scrubbed(bounded_error_body(response), json))
            if isinstance(error, RateLimitError) and error.retry_after_s is None:
                error.retry_after_s = retry_after
            raise error

    def _send(
        self, method: str, path: str, *, json: Any, params: Mapping[str, Any] | None, deadline: float
    ) -> httpx.Response:
        """Send and read the answer, at most ``max_body_bytes`` of it (ProviderAPIError beyond),
        all of it by ``deadline`` (on ``self._clock``; httpx.ReadTimeout beyond).

        The body is streamed in chunks, so an oversized answer costs at most the limit in
        memory; the returned response holds the (decoded) body read.
        """
        request = self._http.build_request(method, path, json=json, params=params, headers=self._auth_headers())
        _DEADLINE.at = time.monotonic() + (deadline - self._clock())
        try:
            response = self._http.send(request, stream=True)
            try:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self.max_body_bytes:
                    raise self._too_large(method, path, response.status_code)
                body = bytearray()
                for chunk in response.iter_bytes(_CHUNK_BYTES):
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise self._too_large(method, path, response.status_code)
                    if self._clock() >= deadline:
                        raise httpx.ReadTimeout("the call's deadline has passed", request=request)
            finally:
                response.close()
        finally:
            _DEADLINE.at = None
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=request)

    def _mapped(self, method: str, path: str, response: httpx.Response) -> ProviderError:
        """The provider's error for a failed answer; one naming the endpoint when its mapper cannot read it."""
        try:
            return self._error_mapper(self.provider, response)
        except Exception as exc:  # a mapper meeting a body shape it never saw: still one line
            return ProviderAPIError(
                self.provider, response.status_code, f"{method} {path}: unreadable error answer ({type(exc).__name__})"
            )

    def _past_deadline(self, method: str, path: str) -> ProviderAPIError:
        return ProviderAPIError(
            self.provider,
            0,
            f"{method} {path} timed out: no complete answer within the {self.deadline_s:g}s deadline of the call",
        )

    def _too_large(self, method: str, path: str, status: int) -> ProviderAPIError:
        limit_mib = self.max_body_bytes / (1024 * 1024)
        return ProviderAPIError(
            self.provider,
            status,
            f"{method} {path}: response larger than {limit_mib:g} MiB; refused (provider answers are capped)",
        )

    def _scrubbed(self, response: httpx.Response, body: Any) -> httpx.Response:
        """``response`` with the API key and the request's long strings (user data) cut out.

        Error mappers copy the provider's own words into exceptions; a provider that quotes
        the request back must not carry a secret into a log line or a terminal.
        """
        secrets = list(sensitive_strings(body))
        if self._api_key is not None:
            secrets.append(self._api_key.get_secret_value())
        redactor = Redactor(secrets)
        if not redactor or not response.content:
            return response
        text = redactor.scrub(response.content.decode("utf-8", errors="replace"))
        return httpx.Response(
            response.status_code, headers=response.headers, content=text.encode(), request=response.request
        )

    def _auth_headers(self) -> dict[str, str]:
        if self._api_key is None:
            return {}
        key = self._api_key.get_secret_value()
        return {self._auth_header: f"{self._auth_scheme} {key}" if self._auth_scheme else key}

    def _back_off(self, delay: float, why: str) -> None:
        log.info("%s: retrying in %.2fs after %s", self.provider, delay, why)
        self.retry.sleep(delay)


__all__ = [
    "ApiClient",
    "ErrorMapper",
    "Pacing",
    "RateLimiter",
    "RateLimits",
    "RetryPolicy",
    "error_detail",
    "parse_retry_after",
]
