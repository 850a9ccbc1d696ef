"""Lambda node billing spans from its audit log (``GET /api/v1/audit-events``).

Lambda has no billing API and its instance listing carries no launch time; the audit log records
each instance's launch and termination. Lambda bills from a successful boot and health check,
per minute (docs: "on-demand billing"), which the launch event precedes by the boot: the
difference is named in docs/costs.md. Lambda's spec versions disagree on the page shape (1.10.0
``{"data": [...]}``, 1.8.3 ``{"data": {"events": [...]}}``): both are read and each span's source
names the shape seen (docs/providers.md). The event actions for instances (``launched``,
``terminated``) are UNVERIFIED against Lambda's event catalog (the spec does not list them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from provisioner.metering import NodeUsage
from provisioner.providers.billing import provider_time, rfc3339
from provisioner.providers.lambda_.client import LambdaClient

LAUNCHED = frozenset({"launched", "created", "launch"})
TERMINATED = frozenset({"terminated", "deleted", "terminate"})
SOURCE = "lambda audit-events"


def source_of(shapes: frozenset[str]) -> str:
    """The source a span names: the endpoint and the page shape(s) Lambda answered in
    (``lambda audit-events, 1.10.0 shape``), as the two spec versions disagree on it."""
    return f"{SOURCE}, {' and '.join(sorted(shapes))} shape" if shapes else SOURCE


def node_usage(client: LambdaClient, node_ids: Mapping[str, str], since: dt.datetime | None = None) -> list[NodeUsage]:
    """The span of every instance in ``node_ids`` (name -> id) the audit log has a launch event for."""
    names = {node_id: name for name, node_id in node_ids.items()}
    starts: dict[str, dt.datetime] = {}
    ends: dict[str, dt.datetime] = {}
    events, shapes = client.audit_events(rfc3339(since) if since else None)
    source = source_of(shapes)
    for event in events:
        if event.resource_name != "instance":
            continue
        when = provider_time(event.event_time)
        for lrn in event.resource_lrns:
            node_id = lrn.rpartition(":")[2]
            if node_id not in names or when is None:
                continue
            if event.action in LAUNCHED:
                starts[node_id] = min(when, starts.get(node_id, when))
            elif event.action in TERMINATED:
                ends[node_id] = max(when, ends.get(node_id, when))
    return [
        NodeUsage(node_id, names[node_id], start, ends.get(node_id), source=source)
        for node_id, start in sorted(starts.items())
    ]


__all__ = ["SOURCE", "node_usage", "source_of"]
