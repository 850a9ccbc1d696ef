"""Lambda's audit log in the Lambda fake: ``GET /api/v1/audit-events``.

Lambda publishes no billing API; its audit log records each instance's launch and termination,
which is what metering reads. Shapes follow ``openapi-1.10.0.json`` (``AuditEvent``), validated by
``LambdaFake`` like every route. Events are stamped on the fake's clock (``app.clock``), service
``cloud``, resource ``instance``, action ``launched`` or ``terminated`` (the action words of
Lambda's event catalog for instances are not in the spec: docs/costs.md marks them UNVERIFIED),
``resource_lrns`` ``["lrn:cloud:instance:<id>"]``. ``start``/``end`` filter inclusively,
``resource_type`` (``<service>.<resource>``, e.g. ``cloud.instance``) exactly; pages of ``PAGE``
events with ``page_token`` the next offset.

Lambda's two spec versions disagree on the page and which one the live API sends is not known, so
``shape`` picks it: ``"1.10.0"`` (the default, ``{"data": [...], "page_token": ...}``) or
``"1.8.3"`` (``{"data": {"events": [...], "page_token": ...}}``, what the client generated from
1.8.3 reads). A 1.8.3 page is checked against ``PAGE_1_8_3`` (the 1.8.3 wrapper around the
``AuditEvent`` of the 1.10.0 file, which both versions share) instead of the 1.10.0 file.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import uuid
from typing import TYPE_CHECKING, Any

from openapi_schema_validator import OAS31Validator
from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.metering import stamp
from provisioner.testing.fakes.openapi import spec_root

if TYPE_CHECKING:
    from provisioner.testing.fakes.lambda_ import LambdaFake

PAGE = 50
SHAPES = ("1.10.0", "1.8.3")
PAGE_1_8_3: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["data"],
    "properties": {
        "data": {
            "type": "object",
            "additionalProperties": False,
            "required": ["events", "page_token"],
            "properties": {
                "events": {"type": "array", "items": {"$ref": "#/components/schemas/AuditEvent"}},
                "page_token": {"type": ["string", "null"]},
            },
        }
    },
}
ACCOUNT = "lrn:cloud:account:fedcba9876543210fedcba9876543210"


@functools.lru_cache(maxsize=2)
def _validator_1_8_3(spec_path: str) -> Any:
    """``PAGE_1_8_3`` with the components of the 1.10.0 file it refers to (read once)."""
    with open(spec_path, encoding="utf-8") as handle:
        components = json.load(handle)["components"]
    return OAS31Validator({**PAGE_1_8_3, "components": components})


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class AuditRoutes:
    def __init__(self, fake: LambdaFake) -> None:
        self.fake = fake
        self.events: list[tuple[dt.datetime, dict[str, Any]]] = []
        self.shape = SHAPES[0]
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
        kind = request.args.get("resource_type")
        chosen = [
            body
            for when, body in self.events
            if (start is None or when >= start)
            and (end is None or when <= end)
            and kind in (None, f"{body['service_name']}.{body['resource_name']}")
        ]
        page = chosen[offset : offset + PAGE]
        token = str(offset + PAGE) if offset + PAGE < len(chosen) else None
        if self.shape == "1.8.3":
            return self.fake.json({"data": {"events": page, "page_token": token}})
        return self.fake.json({"data": page, "page_token": token})

    def check_1_8_3(self, response: Response) -> str | None:
        """Why a 1.8.3-shaped answer breaks ``PAGE_1_8_3``; None when it holds."""
        validator = _validator_1_8_3(str(spec_root() / self.fake.provider / (self.fake.spec_file or "")))
        problems = [error.message for error in validator.iter_errors(json.loads(response.get_data()))]
        return "; ".join(problems)[:500] or None


__all__ = ["PAGE_1_8_3", "SHAPES", "AuditRoutes"]
