"""A hostile proxy in front of a fake provider (no tests here; tests/test_hostile_proxy.py uses it).

``HostileProxy(app)`` is a WSGI app that forwards every request to the fake ``app`` (which acts on
it as it would: a delete deletes) and, while ``mode`` is set, rewrites the answer the client gets:

- ``deep``: 200,000 ``[`` (under the 16 MiB cap; a recursive decoder dies on it);
- ``huge``: a chunked body of 16 MiB and one byte, sent without a length;
- ``nan``: every number of a JSON answer becomes ``NaN``, ``Infinity`` or ``1e999``;
- ``types``: every scalar of a JSON answer becomes a value of another type;
- ``control``: an OSC title sequence and a screen clear appended to every string of free text (a
  token: an id, a mark, a tag, a status word, is left as it is: a provider that rewrites the marks
  the tool reads back makes the nodes another cluster's, which no client can tell from their
  deletion; ids with escapes are tests/test_robust_input.py's);
- ``truncated``: the first half of the body.

``served_hostile(name, monkeypatch)`` serves the proxy on 127.0.0.1 with the CLI pointed at it, as
tests/test_lifecycle_support.served_fake does for the bare fake.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from provisioner.testing.fakes import make_fake, serve
from provisioner.testing.fakes.base import FakeApp, RunningServer

MODES = ("deep", "huge", "nan", "types", "control", "truncated")
ESCAPES = "\x1b]0;owned\x07\x1b[2J"
HUGE_BYTES = 16 * 1024 * 1024 + 1


def _walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {key: _walk(item, leaf) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, leaf) for item in value]
    return leaf(value)


def _nan(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return (float("nan"), float("inf"), -float("inf"))[int(value) % 3] if value == value else value


def _other_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return str(value) + "x"
    if isinstance(value, str):
        return {"was": len(value)}
    if value is None:
        return [1, 2]
    return value


_TOKEN = re.compile(r"[A-Za-z0-9._:/@=+-]*")


def _control(value: Any) -> Any:
    """Free text with escapes appended; a token (an id, a mark, a tag, a status word) left as it is."""
    return value + ESCAPES if isinstance(value, str) and not _TOKEN.fullmatch(value) else value


def rewrite(mode: str, body: bytes) -> bytes:
    """What the client gets instead of ``body`` under ``mode`` (``huge`` is streamed by the proxy)."""
    if mode == "deep":
        return b"[" * 200_000
    if mode == "truncated":
        return body[: len(body) // 2] if len(body) > 1 else b"{"
    try:
        document = json.loads(body)
    except ValueError:
        return body  # an empty or non-JSON answer stays as it is
    if mode == "nan":
        text = json.dumps(_walk(document, _nan)).replace("-Infinity", "1e999")
        return text.encode()
    leaf = {"types": _other_type, "control": _control}[mode]
    return json.dumps(_walk(document, leaf)).encode()


class HostileProxy:
    """Forwards to ``app``; rewrites answers while ``mode`` is set (and ``methods`` holds the method)."""

    def __init__(self, app: FakeApp) -> None:
        self.app = app
        self.provider = app.provider
        self.mode: str | None = None
        self.methods = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
        self.path: str | None = None
        """Only answers to this path (prefix) are rewritten when set."""
        self.custom: Callable[[bytes], bytes] | None = None
        """The rewrite of mode ``custom``."""
        self.rewritten = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        mode, method = self.mode, environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "")
        if (
            mode is None
            or method not in self.methods
            or path.startswith("/_fake/")
            or (self.path is not None and not path.startswith(self.path))
        ):
            return self.app(environ, start_response)
        answer: dict[str, Any] = {}

        def keep(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            answer["status"], answer["headers"] = status, headers
            return lambda data: None

        body = b"".join(self.app(environ, keep))
        self.rewritten += 1
        headers = [(k, v) for k, v in answer["headers"] if k.lower() not in ("content-length", "content-type")]
        headers.append(("Content-Type", "application/json"))
        if mode == "huge":
            start_response(answer["status"], headers)
            return _flood()
        new = self.custom(body) if mode == "custom" and self.custom is not None else rewrite(mode, body)
        start_response(answer["status"], [*headers, ("Content-Length", str(len(new)))])
        return [new]


def _flood() -> Iterator[bytes]:
    chunk = b" " * (1024 * 1024)
    for _ in range(HUGE_BYTES // len(chunk)):
        yield chunk
    yield b" " * (HUGE_BYTES % len(chunk))


@contextmanager
def served_hostile(
    name: str, monkeypatch: pytest.MonkeyPatch, api_key: str | None = None
) -> Iterator[tuple[FakeApp, HostileProxy, RunningServer]]:
    """The fake ``name`` behind a hostile proxy on 127.0.0.1, the CLI pointed at the proxy."""
    from provisioner.providers import registry
    from tests.fast_limits import fast_limits
    from tests.test_lifecycle_support import API_KEYS

    monkeypatch.setattr(registry, "get_provider", fast_limits(registry.get_provider))
    key = api_key or API_KEYS.get(name, f"{name}-lc-key")
    app = make_fake(name, api_key=key)
    proxy = HostileProxy(app)
    server = serve(proxy)  # type: ignore[arg-type]
    prefix = f"PROVISIONER_{name.upper()}"
    monkeypatch.setenv(f"{prefix}_API_URL", server.url)
    monkeypatch.setenv(f"{prefix}_API_KEY", key)
    try:
        yield app, proxy, server
    finally:
        server.stop()


__all__ = ["ESCAPES", "MODES", "HostileProxy", "rewrite", "served_hostile"]
