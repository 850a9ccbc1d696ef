"""What the AWS fake bills, and Cost Explorer's ``GetCostAndUsage`` over it.

moto models Cost Explorer only as a queue of canned answers; the fake answers ``GetCostAndUsage``
itself from what its clock ran (``app.meter``), in botocore's ``ce`` shapes (``AWSFake`` validates
the request and the answer against them like every JSON operation):

- every instance is metered from RunInstances to TerminateInstances at its on-demand price
  (``on_demand_prices``; a spot launch at ``spot_prices``; one launched into a Capacity Block at 0),
  tagged with its cluster; a Capacity Block's upfront fee is charged on the day it is bought;
- EC2's rule for Linux: per second, 60 s minimum;
- ``GetCostAndUsage`` honours ``TimePeriod`` (days, end exclusive), ``Granularity`` DAILY or
  MONTHLY, ``Metrics`` (UnblendedCost, BlendedCost, AmortizedCost: one amount here) and a
  ``Filter`` of ``Tags`` (key ``provisioner-cluster``, ``Values``); amounts are decimal strings
  with 10 places, unit USD, ``Estimated`` true.

moto stamps instances with the wall clock; the fake rewrites a DescribeInstances answer's
``launchTime`` and a terminated instance's ``reason`` (``User initiated (YYYY-MM-DD HH:MM:SS GMT)``,
EC2's words) with its own clock's times, so the adapter reads the times the fake bills.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.aws_ec2 import AWSFake

CLUSTER_TAG = "provisioner-cluster"
METRICS = ("UnblendedCost", "BlendedCost", "AmortizedCost", "NetUnblendedCost", "NetAmortizedCost")
_LAUNCH = re.compile(rb"(<instanceId>(i-[0-9a-f]+)</instanceId>.*?<launchTime>)([^<]*)(</launchTime>)", re.S)
_REASON = re.compile(rb"(<instanceId>(i-[0-9a-f]+)</instanceId>.*?<reason>)(User initiated \([^<]*\))(</reason>)", re.S)


class CostExplorer:
    def __init__(self, fake: AWSFake) -> None:
        self.fake = fake
        self.one_off: list[tuple[dt.datetime, str | None, Decimal]] = []
        """Upfront fees (a Capacity Block's, charged when bought): (when, cluster tag, USD)."""
        fake.route("POST", "/", self._get_cost_and_usage, kind="other", name="GetCostAndUsage")

    def bought_block(self, tags: dict[str, str], fee: Decimal) -> None:
        self.one_off.append((self.fake.clock(), tags.get(CLUSTER_TAG), Decimal(fee)))

    def launched(
        self,
        instance_ids: list[str],
        instance_type: str,
        region: str,
        tags: dict[str, str],
        spot: bool,
        block: bool = False,
    ) -> None:
        """Meter each instance at its price; one launched into a Capacity Block at 0 (the block is prepaid)."""
        on_demand = "0" if block else self.fake.on_demand_prices.get((instance_type, region), "0")
        for instance_id in instance_ids:
            zone = self.fake.placement.get(instance_id, ("", ""))[1]
            price = self.fake.spot_prices.get((instance_type, zone), on_demand) if spot else on_demand
            self.fake.meter.start(instance_id, price, cluster=tags.get(CLUSTER_TAG), name=instance_id)

    def terminated(self, instance_ids: set[str]) -> None:
        for instance_id in instance_ids:
            self.fake.meter.stop(instance_id)

    def with_fake_times(self, body: bytes) -> bytes:
        """A DescribeInstances answer with the fake clock's launch and termination times."""
        spans = self.fake.meter.spans

        def launch(found: re.Match[bytes]) -> bytes:
            span = spans.get(found.group(2).decode())
            if span is None:
                return found.group(0)
            when = span.start.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z").encode()
            return found.group(1) + when + found.group(4)

        def reason(found: re.Match[bytes]) -> bytes:
            span = spans.get(found.group(2).decode())
            if span is None or span.end is None:
                return found.group(0)
            return found.group(1) + f"User initiated ({span.end:%Y-%m-%d %H:%M:%S} GMT)".encode() + found.group(4)

        return _LAUNCH.sub(launch, _REASON.sub(reason, body))

    def _get_cost_and_usage(self, request: Request) -> Response:
        body = self.fake.body(request)
        try:
            first = dt.date.fromisoformat(body["TimePeriod"]["Start"])
            last = dt.date.fromisoformat(body["TimePeriod"]["End"])
        except (KeyError, TypeError, ValueError):
            return self.fake.error_reply("bad_request", message="TimePeriod Start and End must be dates")
        if last <= first:
            return self.fake.error_reply("bad_request", message="Start date must be before end date")
        clusters = self._tag_values(body.get("Filter") or {})
        monthly = body.get("Granularity") == "MONTHLY"
        metrics = [m for m in body.get("Metrics", []) if m in METRICS] or ["UnblendedCost"]
        spans = [s for s in self.fake.meter.spans.values() if clusters is None or s.cluster in clusters]
        results = []
        day = first
        while day < last:
            stop = (
                min(last, (day.replace(day=1) + dt.timedelta(days=32)).replace(day=1))
                if monthly
                else day + dt.timedelta(days=1)
            )
            window = (dt.datetime.combine(day, dt.time(), dt.UTC), dt.datetime.combine(stop, dt.time(), dt.UTC))
            amount = sum((self.fake.meter.billed_usd(s, window=window, minimum_s=0) for s in spans), Decimal(0))
            amount += sum(
                (
                    fee
                    for when, cluster, fee in self.one_off
                    if window[0] <= when < window[1] and (clusters is None or cluster in clusters)
                ),
                Decimal(0),
            )
            results.append(
                {
                    "TimePeriod": {"Start": day.isoformat(), "End": stop.isoformat()},
                    "Total": {m: {"Amount": f"{amount:.10f}", "Unit": "USD"} for m in metrics},
                    "Groups": [],
                    "Estimated": True,
                }
            )
            day = stop
        self._minimums(spans, results, metrics)
        return self.fake.json(
            {"ResultsByTime": results, "DimensionValueAttributes": []}, headers={"x-amzn-RequestId": str(uuid.uuid4())}
        )

    def _minimums(self, spans: list[Any], results: list[dict[str, Any]], metrics: list[str]) -> None:
        """EC2's 60 s minimum, charged on the day the instance started."""
        for span in spans:
            short = self.fake.meter.billed_usd(span, minimum_s=60) - self.fake.meter.billed_usd(span)
            if not short:
                continue
            for result in results:
                if result["TimePeriod"]["Start"] <= span.start.date().isoformat() < result["TimePeriod"]["End"]:
                    for metric in metrics:
                        total = Decimal(result["Total"][metric]["Amount"]) + short
                        result["Total"][metric]["Amount"] = f"{total:.10f}"

    @staticmethod
    def _tag_values(expression: dict[str, Any]) -> set[str] | None:
        tags = expression.get("Tags")
        if not tags:
            for part in expression.get("And") or []:
                found = CostExplorer._tag_values(part)
                if found is not None:
                    return found
            return None
        return set(tags.get("Values") or []) if tags.get("Key") == CLUSTER_TAG else None


__all__ = ["CostExplorer"]
