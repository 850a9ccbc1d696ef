"""Fluence's billing record for a cluster's GPU VMs: ``GET /v1/billing/charges/aggregated`` per VM, summed.

Fluence bills GPU VMs by fixed UTC clock-hour periods (15:00-16:00), prepaid hourly, with 3 h taken
at deploy (1 charged, 2 reserved) and the unused reserve refunded on termination. The catalog's
rule (increment 3600 s from launch, minimum 10800 s) is the cautious reading: it keeps the 3 h
whatever happens. Both differences are named in every reconciliation. ``/v2/billing/get_history``
lists top-ups (payments), not charges, so it cannot be reconciled per cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

from provisioner.providers.billing import Billed, usd
from provisioner.providers.fluence.client import FluenceClient

SOURCE = "fluence GET /v1/billing/charges/aggregated"
DIFFERENCES = (
    "Fluence charges fixed UTC clock-hour periods, not hours from launch",
    "Fluence refunds the 2 h reserve taken at deploy on termination; the catalog keeps a 3 h minimum",
)


def billed(client: FluenceClient, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
    """The summed charges of every VM in ``node_ids`` over the days ``start``..``end``."""
    total = Decimal(0)
    for vm_id in sorted(set(node_ids.values())):
        for entry in client.aggregated_charges(vm_id, start.date().isoformat(), end.date().isoformat()):
            if entry.resource_id in (None, vm_id):
                total += usd(entry.total_cost)
    return Billed(total_usd=total, source=SOURCE, terms_usd={"compute": total}, differences=DIFFERENCES)


__all__ = ["SOURCE", "billed"]
