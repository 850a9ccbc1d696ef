"""The shared HTTP client: token bucket, retries, Retry-After, never-retried purchases, no key leaks."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from provisioner.errors import ProviderAPIError, ProviderError, RateLimitError
from provisioner.providers.http import ApiClient, RateLimiter, RateLimits, RetryPolicy, error_detail, parse_retry_after

KEY = "sk-http-canary-5f1e"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def mapper(provider: str, response: httpx.Response) -> ProviderError:
    if response.status_code == 429:
        return RateLimitError(provider, error_detail(response))
    return ProviderAPIError(provider, response.status_code, error_detail(response))


def client(handler, *, sleeps: list[float] | None = None, attempts: int = 4, **kwargs) -> ApiClient:
    record = sleeps if sleeps is not None else []
    return ApiClient(
        "demo",
        "http://127.0.0.1:9",
        SecretStr(KEY),
        error_mapper=mapper,
        limits=RateLimits(1000.0, burst=1000),
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(attempts=attempts, base_delay_s=0.01, sleep=record.append),
        **kwargs,
    )


def test_token_bucket_spaces_calls_at_the_rate_after_the_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=3, clock=clock, sleep=clock.sleep)
    waits = [limiter.acquire() for _ in range(7)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.5, 0.5, 0.5, 0.5])
    clock.now += 10  # idle time refills up to the burst, not beyond
    assert [limiter.acquire() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.5])


def test_retry_after_parsing() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert parse_retry_after("-4") == 0.0


@pytest.mark.parametrize("junk", ["soon", "nan", "inf", "Wed, 99 Foo 2015 07:28:00 GMT", "  "])
def test_malformed_retry_after_is_no_hint_not_a_crash(junk: str) -> None:
    assert parse_retry_after(junk) is None
    answers = iter([httpx.Response(429, headers={"Retry-After": junk}), httpx.Response(200, json={"ok": 1})])
    sleeps: list[float] = []
    assert client(lambda request: next(answers), sleeps=sleeps).request("GET", "/x") == {"ok": 1}
    assert len(sleeps) == 1 and 0.0 <= sleeps[0] <= 0.01  # the jittered backoff, not the header


def test_future_http_date_gives_seconds_until_then() -> None:
    import email.utils
    import time

    stamp = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 100 < (parse_retry_after(stamp) or 0) <= 120
    naive = email.utils.formatdate(time.time() + 120).rsplit(" ", 1)[0] + " -0000"
    assert 100 < (parse_retry_after(naive) or 0) <= 120


def test_get_is_retried_on_5xx_then_succeeds() -> None:
    answers = iter(
        [httpx.Response(500, json={"error": "boom"}), httpx.Response(503), httpx.Response(200, json={"ok": True})]
    )
    sleeps: list[float] = []
    assert client(lambda request: next(answers), sleeps=sleeps).request("GET", "/x") == {"ok": True}
    assert len(sleeps) == 2


def test_429_honours_retry_after_even_for_purchases() -> None:
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "2"}, json={"message": "slow down"}),
            httpx.Response(200, json={"id": "i-1"}),
        ]
    )
    sleeps: list[float] = []
    assert client(lambda request: next(answers), sleeps=sleeps).request("POST", "/launch") == {"id": "i-1"}
    assert sleeps == [2.0]


def test_persistent_429_raises_rate_limit_error_with_retry_after() -> None:
    with pytest.raises(RateLimitError) as info:
        client(lambda request: httpx.Response(429, headers={"Retry-After": "7"}), attempts=2).request("GET", "/x")
    assert info.value.retry_after_s == 7.0


def test_purchases_are_not_retried_on_5xx_or_timeouts() -> None:
    calls: list[str] = []

    def failing(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        return httpx.Response(500, json={"error": {"message": "internal"}})

    with pytest.raises(ProviderAPIError) as info:
        client(failing).request("POST", "/launch")
    assert calls == ["POST"] and info.value.status == 500 and "internal" in str(info.value)

    def timing_out(request: httpx.Request) -> httpx.Response:
        calls.append("timeout")
        raise httpx.ReadTimeout("no answer", request=request)

    with pytest.raises(ProviderAPIError, match="timed out") as info:
        client(timing_out).request("POST", "/launch")
    assert calls.count("timeout") == 1 and info.value.status == 0


def test_a_post_marked_idempotent_is_retried_like_a_get() -> None:
    answers = iter([httpx.Response(502), httpx.Response(200, json={"name": "renamed"})])
    sleeps: list[float] = []
    api = client(lambda request: next(answers), sleeps=sleeps)
    assert api.request("POST", "/rename", json={"name": "x"}, idempotent=True) == {"name": "renamed"}
    assert len(sleeps) == 1
    with pytest.raises(ProviderAPIError):  # and a GET marked otherwise is not
        client(lambda request: httpx.Response(503)).request("GET", "/x", idempotent=False)


def test_connect_errors_are_retried_because_nothing_was_sent() -> None:
    answers = iter([httpx.ConnectError("refused"), httpx.Response(201, json={"id": 1})])

    def handler(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert client(handler).request("POST", "/launch") == {"id": 1}

    pool = iter([httpx.ConnectTimeout("no route"), httpx.Response(201, json={"id": 2})])

    def slow_connect(request: httpx.Request) -> httpx.Response:
        answer = next(pool)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert client(slow_connect).request("POST", "/launch") == {"id": 2}


def test_auth_header_variants_and_no_key_in_repr_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.headers))
        return httpx.Response(500) if len(seen) == 1 else httpx.Response(200, json={})

    caplog.set_level(logging.DEBUG)
    bearer = client(handler)
    bearer.request("GET", "/x")
    assert seen[0]["authorization"] == f"Bearer {KEY}"
    raw = client(handler, auth_header="X-API-KEY", auth_scheme=None)
    raw.request("GET", "/x")
    assert seen[-1]["x-api-key"] == KEY and "authorization" not in seen[-1]
    assert KEY not in repr(bearer) + repr(raw) + caplog.text
    assert "retrying" in caplog.text


def test_error_bodies_are_scrubbed_of_the_key_and_request_secrets() -> None:
    script = "#!/bin/sh\necho 'MUNGE-KEY-CANARY-0123456789abcdef' > /etc/munge/key\n"

    def echoing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"error": f"bad key {KEY}; bad field user_data={script[:60]!r}"})

    with pytest.raises(ProviderAPIError) as info:
        client(echoing).request("POST", "/launch", json={"user_data": script, "name": "n0"})
    text = str(info.value)
    assert KEY not in text and "MUNGE-KEY-CANARY" not in text
    assert "bad key [redacted]" in text and "HTTP 422" in text


def test_redactor_catches_fragments_and_base64_payloads() -> None:
    import base64 as b64

    from provisioner.providers.redact import Redactor, sensitive_strings

    secret = "token-0123456789-abcdefghij"
    payload = f"echo {b64.b64encode(f'export TOKEN={secret}'.encode()).decode()} | base64 -d | sh"
    redactor = Redactor(sensitive_strings({"env": {"BOOT": payload}, "short": "x"}))
    assert secret[:14] not in redactor.scrub(f"the token was {secret[:14]}...")  # a truncated quote
    assert redactor.scrub("nothing secret here") == "nothing secret here"


# ----- provider answers are capped ------------------------------------------------------------
HUGE_BYTES = 70 * 1024 * 1024


def _huge_app(declare_length: bool):
    """A WSGI app answering every request with 70 MB of JSON-looking bytes, streamed in chunks."""
    chunk = b"[" + b"1," * (512 * 1024 - 1)  # 1 MiB

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        headers = [("Content-Type", "application/json")]
        if declare_length:
            headers.append(("Content-Length", str(HUGE_BYTES)))
        start_response("200 OK", headers)
        return (chunk for _ in range(HUGE_BYTES // len(chunk)))

    return app


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
def test_a_70_mb_answer_is_refused_in_bounded_memory(declare_length: bool) -> None:
    import threading
    import tracemalloc

    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, _huge_app(declare_length), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    api = ApiClient(
        "demo",
        f"http://127.0.0.1:{server.server_port}",
        SecretStr(KEY),
        error_mapper=mapper,
        limits=RateLimits(1000.0, burst=1000),
        retry=RetryPolicy(attempts=1),
    )
    try:
        tracemalloc.start()
        with pytest.raises(ProviderAPIError, match="larger than 16 MiB") as caught:
            api.request("GET", "/offers")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        api.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert caught.value.status == 200
    assert peak < 40 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB while refusing a 70 MB answer"


def test_the_body_cap_is_per_client_and_small_answers_pass() -> None:
    body = b'{"data": "' + b"x" * 2000 + b'"}'
    api = client(lambda request: httpx.Response(200, content=body), max_body_bytes=4096)
    assert api.request("GET", "/small") == {"data": "x" * 2000}
    big = client(lambda request: httpx.Response(200, content=body * 3), max_body_bytes=4096)
    with pytest.raises(ProviderAPIError, match="larger than"):
        big.request("GET", "/big")


@pytest.mark.parametrize("shift", [0, 1, 2])
def test_redactor_catches_a_secret_quoted_base64_encoded_or_wrapped(shift: int) -> None:
    """A provider that quotes the user data re-encoded in base64 (at any byte alignment of the secret
    within it), or wrapped over lines (raw or as JSON escapes), leaks no 12 characters of the key."""
    import base64 as b64
    import os
    import textwrap

    from provisioner.providers.redact import MIN_RUN, Redactor

    munge = b64.b64encode(os.urandom(1024)).decode()
    user_data = f"#cloud-config\nwrite_files:\n  - content: {'#' * shift}{munge}\n"
    redactor = Redactor([user_data])
    encoded = b64.b64encode(user_data.encode()).decode()
    quotes = [
        encoded,
        b64.encodebytes(user_data.encode()).decode(),  # one line, and MIME's 76-column lines
        "\n".join(textwrap.wrap(munge, 64)),
        "\\n".join(textwrap.wrap(munge, 70)),
        "\r\n  ".join(textwrap.wrap(user_data, 50)),
    ]
    for quote in quotes:
        out = redactor.scrub(f'{{"error": "cannot parse {quote} at line 3"}}')
        flat = "".join(out.split()).replace("\\n", "")
        leaked = [munge[i : i + MIN_RUN] for i in range(len(munge) - MIN_RUN + 1) if munge[i : i + MIN_RUN] in flat]
        assert leaked == [] and "cannot parse" in out and "at line 3" in out
    # the base64 of the key itself, found inside the encoding of the whole document
    inner = b64.b64encode(munge.encode()).decode()
    assert inner[8:40] not in redactor.scrub(encoded) and inner[8:40] not in redactor.scrub(inner)


def test_every_client_shares_one_verifying_tls_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CA bundle is read once per process, not once per ApiClient (a command builds several), and
    the shared context still verifies; SSL_CERT_FILE set later gets a context of its own."""
    import ssl

    from provisioner.providers import http

    made: list[ssl.SSLContext] = []

    def counted() -> ssl.SSLContext:
        made.append(ssl.create_default_context())
        return made[-1]

    monkeypatch.setattr(http.httpx, "create_ssl_context", counted)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http._tls_context.cache_clear()
    try:
        first = ApiClient("a", "https://a.invalid", None, error_mapper=mapper, limits=RateLimits(1.0))
        second = first.twin(RetryPolicy(attempts=1))
        third = ApiClient("b", "http://127.0.0.1:9", None, error_mapper=mapper, limits=RateLimits(1.0))
        assert len(made) == 1
        assert made[0].verify_mode == ssl.CERT_REQUIRED and made[0].check_hostname
        assert http.tls_context() is made[0]
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        assert http.tls_context() is not made[0] and len(made) == 2
        for built in (first, second, third):
            built.close()
    finally:
        http._tls_context.cache_clear()
