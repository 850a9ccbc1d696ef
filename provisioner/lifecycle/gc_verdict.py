"""What gc decides about one node it found (lifecycle.gc): collect it (the reason) or keep it
(``keep: why``). Pure but for the process and lock probes of the lease rules.

The rule without a local record (``unrecorded``): a node is collected only when provably
abandoned: its expiry passed, its lease mark names this host and this state dir and that process
is gone, its lease is renewed (lifecycle.lease_renewal) and its last renewal is over
``LEASE_MAX_S`` old (its holder stopped renewing without releasing it: it died), or the user named
its cluster. Everything else is kept, however old its lease's start: a lease without a renewal
mark was released by an ``up`` that finished (its record holds the cluster) or carried by a
provider whose marks cannot change.
A node whose run mark is not its cluster's record's run (an earlier bring-up of the name left it)
has no record of its run here: the same rule.
"""

from __future__ import annotations

import datetime as dt

from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle.state import ClusterRecord
from provisioner.providers.base import OwnedNode
from provisioner.providers.ownership import LEASE_MAX_S, LeaseMark, host_slug

STALE_S = 8 * cluster_lease.HEARTBEAT_S
"""A lock holder whose heartbeat is older than this counts as dead (a stopped or hung ``up``)."""


def abandoned(record: ClusterRecord, at: dt.datetime) -> str | None:
    """Why ``record`` was left in ``creating`` by an ``up`` that is gone (None: it was not, or its
    ``up`` still holds the cluster's lock with a fresh heartbeat)."""
    if record.status != "creating":
        return None
    held = cluster_lease.holder(record.cluster_id)
    if held is None:
        return "its up died while creating (no process holds the cluster's lock)"
    beat = _parse_stamp(held.heartbeat_at)
    if beat is not None and (at - beat).total_seconds() > STALE_S:
        return f"its up's lease expired (last heartbeat {held.heartbeat_at} from pid {held.pid} on {held.host})"
    return None


def _parse_stamp(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def unrecorded(
    lease: str | None, cluster_id: str, place: str, at: dt.datetime, renewed_at: dt.datetime | None = None
) -> str:
    """The verdict on a node of this owner with no local record and no passed expiry: collected only
    when provably abandoned, i.e. its lease mark names this host and this state dir (``place``) and
    that process is gone, or its lease's last renewal (``renewed_at``) is over ``LEASE_MAX_S``
    old; otherwise kept (``keep: why``) however old the lease's start, since another machine or
    state dir may have a record of it and be using it."""
    named = f"remove it with: provisioner gc --cluster {cluster_id} --yes"
    mark = LeaseMark.parse(lease)
    if mark is None:
        return f"keep: no local record and no lease mark of this tool, so nothing proves it abandoned; {named}"
    if mark.here_and_gone(place):
        return f"no local record, and its up ({mark.describe()}, this state dir) is gone"
    if mark.host == host_slug() and mark.place == place:
        if mark.ours():
            return "keep: this process is creating it"
        return f"keep: being created by {mark.describe()} (this state dir)"
    if renewed_at is not None:
        return _by_renewal(mark, renewed_at, at, named)
    if mark.host == host_slug():
        return (
            f"keep: no record in this state dir; its lease ({mark.describe()}) was taken from another state "
            f"dir on this host, which may hold its record; {named}"
        )
    return (
        f"keep: no local record; its lease ({mark.describe()}) names another machine, which may hold its "
        f"record and be using it; {named}"
    )


def _by_renewal(mark: LeaseMark, renewed_at: dt.datetime, at: dt.datetime, named: str) -> str:
    """A renewed lease of another machine or state dir: held while its last renewal (never its
    start) is younger than LEASE_MAX_S; past that its holder is gone without releasing it."""
    renewed = f"{mark.last_renewed(renewed_at):%Y-%m-%dT%H:%M:%SZ}"
    if mark.live(at, renewed_at) or mark.ours():
        return f"keep: no local record; its lease ({mark.describe()}) was renewed at {renewed}: its holder is alive"
    return (
        f"no local record; its lease ({mark.describe()}) was last renewed at {renewed}, over "
        f"{LEASE_MAX_S // 3600} h before: its holder is gone"
    )


def verdict(
    owned: OwnedNode,
    record: ClusterRecord | None,
    named: str | None,
    me: str,
    at: dt.datetime,
    force_unowned: bool = False,
    place: str = "",
) -> str:
    """Why the node is collected, or ``keep: why`` when it is not."""
    owner = owned.owner if owned.owner is not None else owned.node.owner
    if owner is None:
        if named is not None and force_unowned:
            return "named with --cluster, --force-unowned (it carries no owner mark)"
        return (
            f"keep: carries no owner mark of this tool (collect it with --cluster {owned.node.cluster_id} "
            "--force-unowned if it is the tool's)"
        )
    if owner != me:
        return f"keep: owned by {owner}"
    if named is not None:
        return "named with --cluster"
    if owned.expires_at is not None and at >= owned.expires_at:
        return f"expired at {owned.expires_at:%Y-%m-%dT%H:%M:%SZ}"
    if record is None:
        return unrecorded(owned.node.lease, owned.node.cluster_id, place, at, owned.node.renewed_at)
    if owned.node.run and record.run_id and owned.node.run != record.run_id:  # the record is another run's
        why = unrecorded(owned.node.lease, owned.node.cluster_id, place, at, owned.node.renewed_at)
        return f"{why} (the node is of run {owned.node.run}; the record here is of run {record.run_id})"
    if record.lease_lost():
        return f"its burst process (pid {record.lease_pid}) is gone"
    if record.expired(at) and record.expires_at is not None:
        return f"expired at {record.expires_at.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ} (local record)"
    dead = abandoned(record, at)
    if dead is not None:
        return dead
    if record.status == "creating":
        return "keep: its up is still creating it (it holds the cluster's lock)"
    return "keep: recorded and not expired"


__all__ = ["STALE_S", "abandoned", "unrecorded", "verdict"]
