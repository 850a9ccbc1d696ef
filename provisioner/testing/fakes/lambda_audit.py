"""Lambda's audit log in the Lambda fake: ``GET /api/v1/audit-events``.

Lambda publishes no billing API; its audit log records each instance's launch and termination,
which is what metering reads. Shapes follow ``openapi-1.10.0.json`` (``AuditEvent``), validated by
``LambdaFake`` like every route. Events are stamped on the fake's clock (``app.clock``), service
``cloud``, resource ``instance``, action ``launched`` or ``terminated`` (the action words of
Lambda's event catalog for instances are not in the spec: docs/costs.md marks them UNVERIFIED),
``resource_lrns`` ``["lrn:cloud:instance:<id>"]``. ``start``/``end`` filter inclusively; pages of
``PAGE`` events with ``page_token`` the next offset.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.metering import stamp

if TYPE_CHECKING:
    from provisioner.testing.fakes.lambda_ import LambdaFake

PAGE = 50
ACCOUNT = "lrn:cloud:account:fedcba9876543210fedcba9876543210"


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class AuditRoutes:
    def __init__(self, fake: LambdaFake) -> None:
        self.fake = fake
        self.events: list[tuple[dt.datetime, dict[str, Any]]] = []
        fake.route("GET", "/api/v1/audit-events", self._list, kind="other", name="audit_events")

    def note(self, instance_id: str, action: str, **details: str) -> None:
        when = self.fake.clock()
        self.events.append(
            (
                when,
                {
                    "service_name": "cloud",
                    "resource_name": "instance",
                    "action": action,
                    "catalog_version": "2025-09-06",
                    "event_id": uuid.uuid4().hex,
                    "event_time": stamp(when, micros=True),
                    "actor_lrn": None,
                    "resource_lrns": [f"lrn:cloud:instance:{instance_id}"],
                    "resource_owner_lrn": ACCOUNT,
                    "request_api_key_lrn": None,
                    "additional_details": {"instance_lrn": f"lrn:cloud:instance:{instance_id}", **details},
                },
            )
        )

    def _list(self, request: Request) -> Response:
        try:
            start, end = _parse(request.args.get("start")), _parse(request.args.get("end"))
            offset = int(request.args.get("page_token") or 0)
        except ValueError:
            return self.fake.error_reply("bad_request", message="start/end must be ISO 8601")
        chosen = [
            body for when, body in self.events if (start is None or when >= start) and (end is None or when <= end)
        ]
        page = chosen[offset : offset + PAGE]
        more = offset + PAGE < len(chosen)
        return self.fake.json({"data": page, "page_token": str(offset + PAGE) if more else None})


__all__ = ["AuditRoutes"]
