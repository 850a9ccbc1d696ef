"""Shared framework for the fake provider servers: routing, faults, call log, OpenAPI checks.

A fake is a ``FakeApp`` subclass: a stateful WSGI app that answers like the provider's
real API. Subclasses register routes in ``__init__`` and keep their own state; everything
else lives here.

Contract of ``FakeApp`` (what tests may rely on):

- ``route(method, template, handler, kind=..., name=..., validate=True)`` registers a
  handler ``handler(request, **path_params) -> werkzeug Response``. ``kind`` is the route
  class used by faults, latency and the contract suite: ``offers``, ``list``, ``get``,
  ``launch``, ``delete``, ``keys`` or ``other``.
- Every request and every response of a validated route is checked with openapi-core
  against the provider's official spec (``spec_file`` under the shared reference folder,
  or ``$PROVISIONER_OPENAPI_DIR/<provider>/<file>``). Failures are appended to
  ``validation_errors``; in ``strict`` mode the client also gets HTTP 599 with the message,
  so a test fails loudly. Responses produced by an injected fault whose status the spec
  does not document for that operation (429 and 5xx usually) are not validated; they are
  listed in ``unvalidated``. When the spec file is absent the fake runs unvalidated and
  says so in ``validation_note`` (tests call ``need_shared`` first).
- The spec's ``servers`` are replaced in memory by ``/`` so any host and port (a real
  127.0.0.1 server or an in-process base URL) matches. The parsed spec is cached per
  process.
- ``calls`` is the log of every API request (``Call``: monotonic time, method, path,
  status, route name and kind); ``exchanges`` keeps each one's request and response bodies
  (``Exchange``, bytes as sent: what leak and address checks search); ``launched`` counts
  instances the fake created;
  ``instance_count()`` counts live (not terminating/terminated) instances.
- ``bought`` maps each launched instance id to a ``Bought`` record: what the provider was
  asked to sell (interruptible or not), what the instance receives at boot (user data, start
  command and environment as the API got them), its tags, SSH keys and private network. The
  capability contract proves each declared capability from these records.
- ``faults.inject(kind, ...)`` injects a fault (the kinds and their parameters: ``fakes.faults``).
- Out of process (``fakes.control``): ``POST /_fake/faults`` (JSON body of ``inject``'s arguments),
  ``GET /_fake/state``, ``POST /_fake/reset``. These routes are never validated.
- ``latency_s`` maps a route kind (or ``*``) to seconds slept before answering.
- ``requests_in_flight`` / ``requests_started`` count, per route kind, the requests being
  answered now and all requests received (``launch`` in flight: a purchase the client may be
  killed during); ``wait_for(predicate, timeout_s)`` blocks until ``predicate(app)`` holds
  (tests use it to send a signal only once the fake says a launch is in flight).
- ``serve(app)`` runs it on 127.0.0.1 in a background thread; in process use
  ``FakeTransport(app)`` (an ``httpx.WSGITransport`` that turns lost answers into transport errors).
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.control import control_reply
from provisioner.testing.fakes.faults import FAULT_KINDS, Fault, Faults
from provisioner.testing.fakes.metering import Clock, Meter, wall_clock
from provisioner.testing.fakes.openapi import (
    SpecPatch,
    error_detail,
    load_openapi,
    request_error,
    response_error,
    spec_root,
)
from provisioner.testing.fakes.records import Bought, Call, Exchange
from provisioner.testing.fakes.serving import AnswerLost, FakeTransport, RunningServer, dripped, serve

log = logging.getLogger("provisioner.fakes")

ROUTE_KINDS = frozenset({"offers", "list", "get", "launch", "delete", "keys", "other"})
_PRE_FAULTS = ("http_error", "rate_limit", "invalid_key", "insufficient_balance")
VALIDATION_STATUS = 599

Handler = Callable[..., Response]


@dataclass
class _Route:
    method: str
    template: str
    pattern: re.Pattern[str]
    handler: Handler
    kind: str
    name: str
    validate: bool
    reason: str


@dataclass
class _Birth:
    polls_left: int
    ready_at: float


class FakeApp(abc.ABC):
    """Base WSGI fake; see the module docstring for the contract."""

    provider = "fake"
    spec_file: str | None = None
    spec_patch: SpecPatch | None = None
    """Where the real server accepts or answers more than ``spec_file`` says (``fakes.openapi``)."""
    boots_nodes = False
    """Whether its instances are machines that boot (provisioner.local.backed); a plain fake's are
    documentation addresses no machine answers at, so ``up`` refuses it before buying."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        strict: bool = True,
        latency_s: dict[str, float] | None = None,
        validate: bool = True,
        boot_polls: int = 1,
    ) -> None:
        self.api_key = api_key
        self.strict = strict
        self.latency_s = dict(latency_s or {})
        self.boot_polls = boot_polls
        self.sleep: Callable[[float], None] = time.sleep  # latency and timeout faults; tests swap it
        self.clock: Clock = wall_clock  # timestamps the fake reports and what it bills; tests swap it
        self.meter = Meter(lambda: self.clock)  # fakes.metering: what each instance ran, for billing routes
        self.lock = threading.RLock()
        self.faults = Faults(self.lock)
        self.calls: list[Call] = []
        self.exchanges: list[Exchange] = []
        self.validation_errors: list[str] = []
        self.unvalidated: list[str] = []
        self.launched = 0
        self.requests_in_flight: dict[str, int] = {}
        self.requests_started: dict[str, int] = {}
        self.changed = threading.Condition(self.lock)
        self.bought: dict[str, Bought] = {}
        self._routes: list[_Route] = []
        self._births: dict[str, _Birth] = {}
        self.openapi: Any = None
        self.validation_note = "validation disabled"
        if validate and self.spec_file:
            path = spec_root() / self.provider / self.spec_file
            if path.exists():
                self.openapi = load_openapi(str(path), type(self).spec_patch)
                self.validation_note = f"validating against {path.name}"
            else:
                self.validation_note = f"UNVALIDATED: {path} not found"
                log.warning("fake %s runs unvalidated: %s not found", self.provider, path)

    # ----- for subclasses -------------------------------------------------------------------
    def route(
        self,
        method: str,
        template: str,
        handler: Handler,
        *,
        kind: str = "other",
        name: str | None = None,
        validate: bool = True,
        reason: str = "",
    ) -> None:
        """Register a handler. ``validate=False`` needs a ``reason`` (the endpoint is not in the spec)."""
        if kind not in ROUTE_KINDS:
            raise ValueError(f"unknown route kind {kind!r}")
        if not validate and not reason:
            raise ValueError("a route with validate=False must say why (reason=...)")
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template)
        self._routes.append(
            _Route(
                method.upper(),
                template,
                re.compile(f"^{regex}$"),
                handler,
                kind,
                name or f"{method.upper()} {template}",
                validate,
                reason,
            )
        )

    @staticmethod
    def json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json.dumps(body), status=status, headers=headers, mimetype="application/json")

    @staticmethod
    def body(request: Request) -> Any:
        """The request's JSON body, or {} when empty or not JSON."""
        try:
            return json.loads(request.get_data() or b"{}")
        except ValueError:
            return {}

    def error_reply(self, kind: str, *, status: int | None = None, message: str | None = None) -> Response:
        """A provider-shaped error. Kinds: invalid_key, insufficient_balance, capacity, not_found,
        rate_limit, http_error, bad_request. Subclasses override with their real bodies."""
        default = {
            "invalid_key": 401,
            "insufficient_balance": 402,
            "capacity": 409,
            "not_found": 404,
            "rate_limit": 429,
            "bad_request": 400,
        }.get(kind, 500)
        return self.json({"error": message or kind}, status or default)

    def auth_ok(self, request: Request) -> bool:
        """Whether the request carries ``api_key`` (Bearer). Subclasses change the scheme."""
        if self.api_key is None:
            return True
        return request.headers.get("Authorization", "") == f"Bearer {self.api_key}"

    def record_launch(self, instance_ids: Iterable[str]) -> None:
        """Count new instances and start their boot clock (pending until polled/aged)."""
        polls, seconds = self.faults.boot_requirement()
        now = time.monotonic()
        with self.lock:
            for instance_id in instance_ids:
                self.launched += 1
                self._births[instance_id] = _Birth(max(polls, self.boot_polls), now + seconds)

    def record_bought(self, bought: Bought) -> None:
        """Keep what one launch bought (see ``Bought``); call it next to ``record_launch``."""
        with self.lock:
            self.bought[bought.instance_id] = bought

    def booted(self, instance_id: str) -> bool:
        """Called once per poll that shows the instance; True once it may report running."""
        with self.lock:
            birth = self._births.get(instance_id)
            if birth is None:
                return True
            if birth.polls_left > 0:
                birth.polls_left -= 1
                return False
            if time.monotonic() < birth.ready_at:
                return False
            del self._births[instance_id]
            return True

    @abc.abstractmethod
    def instance_count(self) -> int:
        """Live instances (not terminating or terminated)."""

    def state(self) -> dict[str, Any]:
        """A JSON-able summary for ``GET /_fake/state``; subclasses may add to it."""
        with self.lock:
            return {
                "provider": self.provider,
                "instances": self.instance_count(),
                "launched": self.launched,
                "in_flight": dict(self.requests_in_flight),
                "started": dict(self.requests_started),
                "calls": [asdict(call) for call in self.calls],
                "validation_errors": list(self.validation_errors),
                "validation_note": self.validation_note,
            }

    def reset(self) -> None:
        """Forget faults, calls and counters. Subclasses also clear their state (call super)."""
        with self.lock:
            self.faults.clear()
            self.calls.clear()
            self.exchanges.clear()
            self.validation_errors.clear()
            self.unvalidated.clear()
            self.launched = 0
            self.requests_started.clear()
            self.bought.clear()
            self._births.clear()
            self.meter.clear()

    # ----- queries used by tests ------------------------------------------------------------
    def calls_of(self, kind: str) -> list[Call]:
        with self.lock:
            return [call for call in self.calls if call.kind == kind or call.route == kind]

    # ----- WSGI -----------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        control = request.path.startswith("/_fake/")
        try:
            response = control_reply(self, request) if control else self._tracked(request)
        except AnswerLost:
            connection = environ.get("werkzeug.socket")
            if connection is not None:  # a real socket: hang up before any answer is written
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            raise
        return response(environ, start_response)

    def _tracked(self, request: Request) -> Response:
        """``_dispatch`` with the request counted in ``requests_started`` and, while answered,
        ``requests_in_flight``."""
        route, _ = self._match(request)
        kind = route.kind if route else "other"
        with self.changed:
            self.requests_started[kind] = self.requests_started.get(kind, 0) + 1
            self.requests_in_flight[kind] = self.requests_in_flight.get(kind, 0) + 1
            self.changed.notify_all()
        try:
            return self._dispatch(request)
        finally:
            with self.changed:
                self.requests_in_flight[kind] -= 1
                self.changed.notify_all()

    def wait_for(self, predicate: Callable[[FakeApp], bool], timeout_s: float = 30.0) -> bool:
        """Block until ``predicate(self)`` holds (checked whenever a request starts or ends, and
        every 50 ms); False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.05))
        return True

    def _match(self, request: Request) -> tuple[_Route | None, dict[str, str]]:
        for route in self._routes:
            if route.method != request.method:
                continue
            found = route.pattern.match(request.path)
            if found:
                return route, found.groupdict()
        return None, {}

    def _dispatch(self, request: Request) -> Response:
        route, params = self._match(request)
        name, kind = (route.name, route.kind) if route else ("unknown", "other")
        delay = self.latency_s.get(kind, self.latency_s.get("*", 0.0))
        if delay:
            self.sleep(delay)
        validating = self.openapi is not None and (route is None or route.validate)
        problem = self._validate_request(request) if validating else None
        injected = False
        if problem and self.strict:
            response = self.json({"fake_validation_error": problem}, VALIDATION_STATUS)
        elif route is None:
            response = self.error_reply("not_found", message=f"no route {request.method} {request.path}")
        else:
            fault = self.faults.take(_PRE_FAULTS, name, kind)
            if fault is not None:
                injected = True
                response = self._fault_reply(fault)
            elif not self.auth_ok(request):
                response = self.error_reply("invalid_key")
            else:
                lost = self.faults.take(("lose_answer",), name, kind)
                if lost is not None and not lost.params.get("processed", True):
                    self._lose(request, name, lost)
                with self.lock:
                    response = route.handler(request, **params)
                if lost is not None:
                    self._lose(request, name, lost)
                hold = self.faults.take(("timeout",), name, kind)
                if hold is not None:
                    self.sleep(float(hold.params.get("delay_s", 3.0)))
        if validating and not problem:
            problem = self._validate_response(request, response, injected)
            if problem and self.strict:
                response = self.json({"fake_validation_error": problem}, VALIDATION_STATUS)
        with self.lock:
            self.calls.append(Call(time.monotonic(), request.method, request.path, response.status_code, name, kind))
            self.exchanges.append(
                Exchange(request.method, request.path, response.status_code, request.get_data(), response.get_data())
            )
        drip = self.faults.take(("drip",), name, kind) if route is not None else None
        if drip is None:
            return response
        return dripped(
            response, int(drip.params.get("chunk_bytes", 1)), float(drip.params.get("interval_s", 0.1)), self.sleep
        )

    def _lose(self, request: Request, name: str, fault: Fault) -> None:
        with self.lock:
            self.calls.append(Call(time.monotonic(), request.method, request.path, 0, name, "lost"))
        then = fault.params.get("then")
        if then:  # a fault that starts when this answer is lost (e.g. the listing that would adopt it fails)
            spec = dict(then)
            self.faults.inject(spec.pop("kind"), **spec)
        raise AnswerLost(f"{request.method} {request.path}", timeout=bool(fault.params.get("as_timeout", True)))

    def _fault_reply(self, fault: Fault) -> Response:
        params = fault.params
        if fault.kind == "rate_limit":
            response = self.error_reply("rate_limit", message=params.get("message"))
            response.headers["Retry-After"] = str(params.get("retry_after_s", 1))
            return response
        if fault.kind == "http_error":
            return self.error_reply("http_error", status=int(params.get("status", 500)), message=params.get("message"))
        return self.error_reply(fault.kind, message=params.get("message"))

    # ----- OpenAPI validation (``fakes.openapi``) --------------------------------------------------
    def _validate_request(self, request: Request) -> str | None:
        exc = request_error(self.openapi, request)
        return None if exc is None else self._record("request", request, exc)

    def _validate_response(self, request: Request, response: Response, injected: bool) -> str | None:
        exc, undocumented = response_error(self.openapi, request, response)
        if exc is not None and undocumented and injected:
            with self.lock:
                self.unvalidated.append(f"{request.method} {request.path} -> {response.status_code}")
            return None
        return None if exc is None else self._record("response", request, exc)

    def _record(self, what: str, request: Request, exc: Exception) -> str:
        detail = error_detail(exc)
        message = f"{self.provider} {what} {request.method} {request.path}: {type(exc).__name__}: {detail}"
        with self.lock:
            self.validation_errors.append(message[:2000])
        log.error("openapi validation failed: %s", message[:500])
        return message[:2000]


__all__ = [
    "FAULT_KINDS",
    "ROUTE_KINDS",
    "VALIDATION_STATUS",
    "AnswerLost",
    "Bought",
    "Call",
    "Exchange",
    "FakeApp",
    "FakeTransport",
    "Fault",
    "Faults",
    "RunningServer",
    "load_openapi",
    "serve",
    "spec_root",
]
