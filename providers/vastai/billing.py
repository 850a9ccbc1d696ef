"""Vast.ai's billing record for a cluster's instances: ``GET /api/v0/charges/``, the contracts of its ids.

Vast bills GPU time per second and storage while the instance exists (stopped too), at rates the
host sets, and bandwidth per byte at the host's ``inet_up_cost``/``inet_down_cost``; each
contract's amount is rounded to $0.001. The items split it: ``gpu`` -> compute, ``disk`` ->
storage, ``bwu``/``bwd`` -> egress (measured here, unlike from instance times).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal

from provisioner.providers.billing import Billed, usd
from provisioner.providers.vastai.client import VastClient

SOURCE = "vastai GET /api/v0/charges/"
TERMS = {"gpu": "compute", "disk": "storage", "bwu": "egress", "bwd": "egress"}
DIFFERENCES = (
    "Vast.ai rounds each contract's amount to $0.001",
    "an instance's hourly price includes its disk at the host's storage rate for the disk size rented, "
    "which can differ from the ask's listed price",
)


def billed(client: VastClient, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
    """The charges of every contract ``instance-<id>`` of ``node_ids`` in the days ``start``..``end``."""
    wanted = {f"instance-{node_id}" for node_id in node_ids.values()}
    total, terms = Decimal(0), {term: Decimal(0) for term in set(TERMS.values())}
    low = int(start.timestamp()) - 86_400  # the day range is by contract day: a margin either side
    for charge in client.iter_charges(low, int(end.timestamp()) + 86_400):
        if charge.source in wanted:
            total += usd(charge.amount)
            for item in charge.items:
                if item.type in TERMS:
                    terms[TERMS[item.type]] += usd(item.amount)
    return Billed(total_usd=total, source=SOURCE, terms_usd=terms, differences=DIFFERENCES)


__all__ = ["SOURCE", "billed"]
