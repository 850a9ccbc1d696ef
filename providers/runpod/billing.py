"""RunPod's billing record for a cluster's pods: ``GET /v2/billing/pods`` per pod, summed.

RunPod bills pods per second from creation (the catalog says the same: increment 1 s, no
minimum); the API reports each day's amount per pod as a double. Instant Cluster members are
billed under ``/v2/billing/clusters`` by the RunPod cluster's id, which the local record does
not keep: their amounts are not read (docs/costs.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

from provisioner.providers.billing import Billed, rfc3339, usd
from provisioner.providers.runpod.client import RunPodClient

SOURCE = "runpod GET /v2/billing/pods"
DIFFERENCES = ("RunPod reports amounts as doubles per day bucket; the ledger rounds their sum to cents once",)


def billed(client: RunPodClient, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
    """Sum of every billing bucket of each pod in ``node_ids`` between ``start`` and ``end``."""
    total = Decimal(0)
    for pod_id in sorted(set(node_ids.values())):
        for record in client.pod_billing(pod_id, rfc3339(start), rfc3339(end + dt.timedelta(seconds=1))):
            if record.pod_id == pod_id:
                total += usd(record.total_amount)
    return Billed(total_usd=total, source=SOURCE, terms_usd={"compute": total}, differences=DIFFERENCES)


__all__ = ["SOURCE", "billed"]
