"""A fake's out-of-process control routes (never validated, never logged as API calls):
``GET /_fake/about`` (that it is a fake, and whether its instances boot: ``up`` refuses a plain
fake before buying), ``GET /_fake/state``, ``POST /_fake/reset`` and ``POST /_fake/faults`` (a JSON body of
``Faults.inject``'s arguments, ``kind`` included)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.base import FakeApp


def control_reply(app: FakeApp, request: Request) -> Response:
    """The answer of ``app`` to a request under ``/_fake/``; 404 for a path it does not know."""
    if request.method == "GET" and request.path == "/_fake/about":  # what `up` asks before it buys
        return app.json({"fake": True, "provider": app.provider, "boots_nodes": app.boots_nodes})
    if request.method == "GET" and request.path == "/_fake/state":
        return app.json(app.state())
    if request.method == "POST" and request.path == "/_fake/reset":
        app.reset()
        return app.json({"ok": True})
    if request.method == "POST" and request.path == "/_fake/faults":
        spec = app.body(request)
        try:
            kind = spec.pop("kind")
            fault = app.faults.inject(kind, **spec)
        except (KeyError, TypeError, ValueError) as exc:
            return app.json({"error": f"bad fault: {exc}"}, 400)
        return app.json({"ok": True, "fault": asdict(fault)})
    return app.json({"error": f"no control route {request.method} {request.path}"}, 404)


__all__ = ["control_reply"]
