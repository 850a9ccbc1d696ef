"""AWS: node times from EC2 itself, and the cluster's bill from Cost Explorer.

Metering reads each instance's ``LaunchTime`` and, while EC2 still lists a terminated instance
(about an hour), the time in its ``StateTransitionReason`` (``User initiated (2026-11-26 01:00:00
GMT)``). Reconciliation asks Cost Explorer ``GetCostAndUsage`` for the UnblendedCost of the days
the cluster lived, filtered by the ``provisioner-cluster`` tag. Two differences are always named:
the tag counts in Cost Explorer only once activated as a cost allocation tag (else the filter
matches nothing), and Cost Explorer's data lags the usage by up to a day, so a bill read at
``down`` may still be incomplete.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from provisioner.providers.aws.client import AWSClient
from provisioner.providers.base import CLUSTER_TAG
from provisioner.providers.billing import Billed, usd

SOURCE = "aws ce GetCostAndUsage (tag provisioner-cluster)"
DIFFERENCES = (
    "Cost Explorer sees the provisioner-cluster tag only once it is activated as a cost allocation tag",
    "Cost Explorer lags usage by up to 24 h: a bill read at down may be incomplete; provisioner costs shows "
    "the latest read",
)
_REASON_TIME = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def ended_at(instance: dict[str, object]) -> dt.datetime | None:
    """When a terminated instance ended, from its StateTransitionReason; None otherwise."""
    state = instance.get("State")
    if not isinstance(state, dict) or state.get("Name") not in ("terminated", "shutting-down"):
        return None
    found = _REASON_TIME.search(str(instance.get("StateTransitionReason") or ""))
    return dt.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC) if found else None


def launched_at(instance: dict[str, object]) -> dt.datetime | None:
    when = instance.get("LaunchTime")
    return when.astimezone(dt.UTC) if isinstance(when, dt.datetime) else None


def billed(client: AWSClient, cluster_id: str, start: dt.datetime, end: dt.datetime) -> Billed:
    """The cluster's UnblendedCost from Cost Explorer over the days ``start``..``end`` (end day included)."""
    params = {
        "TimePeriod": {"Start": start.date().isoformat(), "End": (end.date() + dt.timedelta(days=1)).isoformat()},
        "Granularity": "DAILY",
        "Metrics": ["UnblendedCost"],
        "Filter": {"Tags": {"Key": CLUSTER_TAG, "Values": [cluster_id], "MatchOptions": ["EQUALS"]}},
    }
    total = Decimal(0)
    for result in client.cost_and_usage(params):
        amount = (result.get("Total") or {}).get("UnblendedCost") or {}
        if amount.get("Unit", "USD") == "USD" and amount.get("Amount") is not None:
            total += usd(amount["Amount"])
    return Billed(total_usd=total, source=SOURCE, terms_usd={"compute": total}, differences=DIFFERENCES)


__all__ = ["SOURCE", "billed", "ended_at", "launched_at"]
