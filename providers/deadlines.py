"""Socket deadlines for ``providers.http.ApiClient``: every connect, write and read of a call is cut
to what is left of the call's overall deadline (``DEADLINE.at``, set per thread by the client), by
wrapping httpcore's network backend. httpx's own timeouts are per operation, so a provider that
drips one byte a second would never trip them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpcore
import httpx

DEADLINE = threading.local()  # .at: time.monotonic() by which this thread's current call must end


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current call's deadline; ``error`` once it has passed."""
    at = getattr(DEADLINE, "at", None)
    if at is None:
        return timeout
    left: float = at - time.monotonic()
    if left <= 0:
        raise error("the call's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with connects, reads and writes bounded by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout), socket_options)
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bound_by_deadlines(client: httpx.Client) -> bool:
    """Wrap the network backend of ``client``'s default transport; False where there is none
    (an injected transport: in-process fakes, where the body loop's check still applies)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        return False
    if not isinstance(pool._network_backend, _DeadlineBackend):
        pool._network_backend = _DeadlineBackend(pool._network_backend)
    return True


__all__ = ["DEADLINE", "bound_by_deadlines"]
