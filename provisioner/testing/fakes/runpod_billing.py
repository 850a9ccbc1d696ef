"""RunPod billing in the RunPod fake: ``GET /v2/billing/pods`` and ``GET /v2/billing/clusters``.

Shapes follow ``openapi-rest-v2.json`` (``ListPodBillingResponse``, ``ListClusterBillingResponse``);
``RunPodFake`` validates every request and answer against it. What is billed is what the fake's
clock ran (``app.meter``): each pod from its creation to its deletion, per second (RunPod's
documented rule), at the pod's hourly ``cost``, split into ``bucketSize`` buckets of the
resolved window. Amounts are JSON doubles, as RunPod sends them, rounded to 1e-6 USD.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.metering import Span, stamp

if TYPE_CHECKING:
    from provisioner.testing.fakes.runpod import RunPodFake

BUCKETS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(weeks=1)}


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _snap(when: dt.datetime, size: dt.timedelta, *, up: bool) -> dt.datetime:
    epoch = dt.datetime(2000, 1, 3, tzinfo=dt.UTC)  # a Monday: weeks snap to Mondays
    steps, rest = divmod(when - epoch, size)
    return epoch + size * (steps + (1 if up and rest else 0))


def _double(amount: Decimal) -> float:
    return float(amount.quantize(Decimal("0.000001")))


class BillingRoutes:
    def __init__(self, fake: RunPodFake) -> None:
        self.fake = fake
        fake.route("GET", "/v2/billing/pods", self._pods, kind="other", name="listPodBilling")
        fake.route("GET", "/v2/billing/clusters", self._clusters, kind="other", name="listClusterBilling")

    def _window(self, request: Request) -> tuple[dt.datetime, dt.datetime, str, dt.timedelta] | Response:
        size_name = request.args.get("bucketSize", "day")
        if size_name not in BUCKETS:
            return self.fake.problem(400, f"bucketSize {size_name} is not supported by this fake")
        size = BUCKETS[size_name]
        now = self.fake.clock()
        try:
            start = _parse(request.args.get("startTime")) or now - dt.timedelta(days=30)
            end = _parse(request.args.get("endTime")) or now
        except ValueError:
            return self.fake.problem(400, "startTime/endTime must be RFC 3339")
        return _snap(start, size, up=False), _snap(end, size, up=True), size_name, size

    def _answer(
        self, request: Request, key: str, group: Callable[[Span], str | None], zeros: tuple[str, ...], count_name: str
    ) -> Response:
        """Records per (group, bucket) of the spans ``group`` names (None: not this route's), and the metadata."""
        window = self._window(request)
        if isinstance(window, Response):
            return window
        start, end, size_name, size = window
        wanted = request.args.get(key)
        grouped: dict[str, list[Span]] = {}
        for span in self.fake.meter.spans.values():
            name = group(span)
            if name is not None and wanted in (None, name):
                grouped.setdefault(name, []).append(span)
        records = []
        for name, spans in grouped.items():
            bucket = start
            while bucket < end:
                window_ = (bucket, bucket + size)
                if any((s.end or end) > bucket and s.start < bucket + size for s in spans):
                    amount = _double(sum((self.fake.meter.billed_usd(s, window=window_) for s in spans), Decimal(0)))
                    records.append(
                        {
                            "startTime": stamp(bucket),
                            "endTime": stamp(bucket + size),
                            key: name,
                            "totalAmount": amount,
                            "gpuAmount": amount,
                            **dict.fromkeys(zeros, 0),
                        }
                    )
                bucket += size
        total = _double(sum((Decimal(str(r["totalAmount"])) for r in records), Decimal(0)))
        return self.fake.ok(
            {
                "records": records,
                "metadata": {
                    "query": {"startTime": stamp(start), "endTime": stamp(end), "bucketSize": size_name, key: wanted},
                    "recordCount": len(records),
                    count_name: len(grouped),
                    "totals": {"totalAmount": total, "gpuAmount": total, **dict.fromkeys(zeros, 0)},
                },
            }
        )

    def _pods(self, request: Request) -> Response:
        return self._answer(
            request,
            "podId",
            lambda s: s.instance_id if s.cluster is None else None,
            ("cpuAmount", "diskAmount"),
            "uniquePodCount",
        )

    def _clusters(self, request: Request) -> Response:
        return self._answer(
            request, "clusterId", lambda s: s.cluster, ("diskAmount", "networkingAmount"), "uniqueClusterCount"
        )


__all__ = ["BillingRoutes"]
