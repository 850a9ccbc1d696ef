"""Vast.ai charges in the Vast.ai fake: ``GET /api/v0/charges/`` (``show charges``) and ``GET /api/v1/invoices/``.

Shapes follow ``openapi.yaml``; ``VastAIFake`` validates each request and answer against it. One
result per instance contract the fake's clock saw (``app.meter``) overlapping the ``day`` range of
``select_filters``: the contract's start and end (unix seconds; a running one ends now), its
``gpu`` and ``disk`` items billed per second at the instance's ``dph_base`` and storage rate (Vast's
documented rule: storage is billed while the instance exists), and the contract's ``amount``
rounded to 3 decimals, as the spec says Vast rounds it. Bandwidth (``bwu``/``bwd``) is zero: the
fake moves no data. Keyset pages of ``limit`` (default 100), ``next_token`` the next offset; oldest
first when ``latest_first=false`` (what the official client sends), else newest first.
``/api/v1/invoices`` lists payments, not usage: always empty here (nothing is paid to the fake).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.vastai import VastAIFake


def _unix(when: dt.datetime) -> int:
    return int(when.timestamp())


class ChargeRoutes:
    def __init__(self, fake: VastAIFake) -> None:
        self.fake = fake
        self.rates: dict[str, tuple[Decimal, Decimal]] = {}
        """instance id -> (compute $/h, storage $/h), as rented."""
        fake.route("GET", "/api/v0/charges/", self._charges, kind="other", name="charges")
        fake.route("GET", "/api/v1/invoices/", self._invoices, kind="other", name="invoices")

    def _charges(self, request: Request) -> Response:
        try:
            filters = json.loads(request.args.get("select_filters", ""))
            low, high = int(filters["day"]["gte"]), int(filters["day"]["lte"])
        except (ValueError, KeyError, TypeError):
            return self.fake.json(
                {"success": False, "error": "invalid_args", "msg": "select_filters needs a day range"}, 400
            )
        limit = int(request.args.get("limit", "100"))
        offset = int(request.args.get("after_token") or 0)
        rows = []
        for instance_id, span in sorted(self.fake.meter.spans.items()):
            end = span.end or self.fake.clock()
            if _unix(end) < low or _unix(span.start) > high:
                continue
            compute, storage = self.rates.get(instance_id, (span.usd_per_hour, Decimal(0)))
            items = []
            for kind, rate in (("gpu", compute), ("disk", storage)):
                amount = self.fake.meter.billed_usd(span) * rate / span.usd_per_hour if span.usd_per_hour else 0
                items.append(
                    {
                        "start": _unix(span.start),
                        "end": _unix(end),
                        "type": kind,
                        "source": None,
                        "description": f"at ${rate}/hour",
                        "amount": float(round(Decimal(amount), 6)),
                        "metadata": {},
                        "items": [],
                    }
                )
            total = self.fake.meter.billed_usd(span)
            rows.append(
                {
                    "start": _unix(span.start),
                    "end": _unix(end),
                    "type": "instance",
                    "source": f"instance-{instance_id}",
                    "description": f"Instance {instance_id} Charges",
                    "amount": float(total.quantize(Decimal("0.001"))),
                    "metadata": {"label": span.name},
                    "items": items,
                }
            )
        if request.args.get("latest_first", "true").lower() != "false":  # the spec's default: newest first
            rows.reverse()
        page = rows[offset : offset + limit]
        more = offset + limit < len(rows)
        return self.fake.json(
            {
                "success": True,
                "count": len(page),
                "total": len(rows),
                "next_token": str(offset + limit) if more else None,
                "results": page,
            }
        )

    def _invoices(self, request: Request) -> Response:
        """Payments (top-ups, transfers, payouts): the fake takes none, so none are listed."""
        return self.fake.json({"success": True, "count": 0, "total": 0, "next_token": None, "results": []})


__all__ = ["ChargeRoutes"]
