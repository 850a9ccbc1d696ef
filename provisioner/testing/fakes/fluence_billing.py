"""Fluence charges in the Fluence fake: ``GET /v1/billing/charges/aggregated`` (and ``/v2/billing/get_history``).

Shapes follow ``fluence-openapi-original.yml`` (``TotalChargesEntry``; ``PaginatedResponse_TopUpDto``),
validated by ``FluenceFake`` like its other v1/v2 routes. What is billed is what the fake's clock
ran (``app.meter``), by Fluence's documented GPU rule, not the catalog's: fixed UTC clock-hour
periods (15:00-16:00), each period a VM is alive in charged in full; the 2 h reserve taken at
deploy is refunded on termination, so a VM ended within its first period pays one period. One
entry per VM (``groupBy`` RESOURCE) whose span meets the ``startDate``..``endDate`` days; amounts
are decimal strings. ``get_history`` lists top-ups (payments), never charges: always empty here.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.metering import Span

if TYPE_CHECKING:
    from provisioner.testing.fakes.fluence import FluenceFake

HOUR = dt.timedelta(hours=1)


def periods(span: Span, now: dt.datetime) -> int:
    """UTC clock-hour periods the span touches (at least one)."""
    end = span.end or now
    first = span.start.replace(minute=0, second=0, microsecond=0)
    count = 0
    while first + count * HOUR < end:
        count += 1
    return max(count, 1)


class ChargeRoutes:
    def __init__(self, fake: FluenceFake, user_id: str) -> None:
        self.fake = fake
        self.user_id = user_id
        fake.route(
            "GET", "/v1/billing/charges/aggregated", self._aggregated, kind="other", name="get_aggregated_charges"
        )
        fake.route("GET", "/v2/billing/get_history", self._history, kind="other", name="get_top_up_history_v2")

    def _aggregated(self, request: Request) -> Response:
        try:
            first = dt.date.fromisoformat(request.args["startDate"])
            last = dt.date.fromisoformat(request.args["endDate"])
        except (KeyError, ValueError):
            return self.fake.error_reply("bad_request", message="startDate and endDate are required dates")
        low = dt.datetime.combine(first, dt.time(), dt.UTC)
        high = dt.datetime.combine(last, dt.time(), dt.UTC) + dt.timedelta(days=1)
        wanted = request.args.get("resourceId")
        now = self.fake.clock()
        rows = []
        for vm_id, span in sorted(self.fake.meter.spans.items()):
            if wanted not in (None, vm_id) or (span.end or now) < low or span.start >= high:
                continue
            hours = periods(span, now)
            rows.append(
                {
                    "userId": self.user_id,
                    "resourceId": vm_id,
                    "resourceName": span.name,
                    "resourceType": "VM",
                    "clusterId": None,
                    "quantity": "1",
                    "totalUsageHours": str(hours),
                    "totalCost": str(span.usd_per_hour * hours),
                }
            )
        return self.fake.json(rows)

    def _history(self, request: Request) -> Response:
        return self.fake.json(
            {
                "items": [],
                "pagination": {
                    "currentPage": 0,
                    "perPage": 20,
                    "totalRecords": 0,
                    "filteredRecords": 0,
                    "totalPages": 0,
                },
            }
        )


__all__ = ["ChargeRoutes", "periods"]
