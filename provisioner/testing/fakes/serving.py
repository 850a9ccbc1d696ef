"""How a fake is reached: on a real 127.0.0.1 socket from a daemon thread (``serve``), or in process
through ``FakeTransport`` (an ``httpx.WSGITransport`` that turns a dropped answer into a transport error);
and how an answer is sent slowly (``dripped``, the ``drip`` fault)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from werkzeug.wrappers import Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.base import FakeApp


class AnswerLost(ConnectionAbortedError):
    """Raised by a fake to drop an answer (the ``lose_answer`` fault); see ``FakeTransport``."""

    def __init__(self, what: str, *, timeout: bool = True) -> None:
        self.timeout = timeout
        super().__init__(what)


class FakeTransport(httpx.BaseTransport):
    """In-process transport to a fake: a dropped answer reaches the client as a transport error."""

    def __init__(self, app: FakeApp) -> None:
        self.app = app
        self._inner = httpx.WSGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self._inner.handle_request(request)
        except AnswerLost as exc:
            error = httpx.ReadTimeout if exc.timeout else httpx.RemoteProtocolError
            raise error(f"fake dropped the answer: {exc}", request=request) from None


@dataclass
class RunningServer:
    """A fake served on a real socket. ``stop()`` shuts it down and joins the thread."""

    url: str
    app: FakeApp
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(app: FakeApp, host: str = "127.0.0.1", port: int = 0, *, access_log: bool = False) -> RunningServer:
    """Serve ``app`` on ``host:port`` (0: a free port) from a daemon thread; returns at once.

    werkzeug's per-request access log is off unless ``access_log``; ``app.calls`` has it all.
    """
    from werkzeug.serving import WSGIRequestHandler, make_server

    class _Handler(WSGIRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            if access_log:
                super().log_request(code, size)

    server = make_server(host, port, app, threaded=True, request_handler=_Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"fake-{app.provider}", daemon=True
    )
    thread.start()
    return RunningServer(f"http://{host}:{server.server_port}", app, server, thread)


def dripped(response: Response, chunk_bytes: int, interval_s: float, sleep: Callable[[float], None]) -> Response:
    """``response`` with its body sent ``chunk_bytes`` at a time, ``interval_s`` apart (``sleep``)."""
    body = response.get_data()
    step = max(chunk_bytes, 1)

    def chunks() -> Iterable[bytes]:
        for start in range(0, len(body), step):
            sleep(interval_s)
            yield body[start : start + step]

    headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
    headers.append(("Content-Length", str(len(body))))
    return Response(chunks(), status=response.status_code, headers=headers, direct_passthrough=True)


__all__ = ["AnswerLost", "FakeTransport", "RunningServer", "dripped", "serve"]
