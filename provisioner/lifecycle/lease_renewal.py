"""Renewing a cluster's lease on its nodes while a process holds it, where the provider lets marks change.

What another machine knows of a cluster it has no record of is what the nodes carry
(providers.ownership). On AWS (tags), GCP (labels) and Vast.ai (the label) the holder of a
cluster's lock (lifecycle.lease: ``up`` on either engine, ``burst``, a replacement ``watch`` buys)
writes ``RENEWED_TAG`` on the nodes carrying its lease right after buying them and again every
``RENEW_S`` of its heartbeat, on the hold's clock; each renewal lists the cluster again, so a node
bought later under the same lease (a burst's replacements) is renewed with the rest. ``gc`` on
another machine judges the lease by that last renewal (lifecycle.gc_verdict): fresh, the holder is
alive; older than ``LEASE_MAX_S``, it died without releasing the lease, and the nodes are
abandoned. An ``up`` (or a replacement bought outside a burst) that finishes releases the lease
(removes the mark): its record now holds the cluster, and another machine keeps it however old.
A ``burst`` keeps renewing until its teardown. Lambda, RunPod and Fluence cannot change a node's
marks: nothing is renewed there, and their leases are judged as before (kept when from another machine).

A renewal that fails (the provider refuses or cannot be reached) is logged and tried again at the
next heartbeat; it never stops the holder. Blocking calls run on the heartbeat thread.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field

from provisioner.errors import ProviderError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.providers.base import Provider, SupportsLeaseRenewal

RENEW_S = 10 * 60
"""How often a holder renews its lease on the nodes: a twelfth of LEASE_MAX_S (2 h), so a dozen
renewals in a row can fail before another machine counts the holder gone."""

log = logging.getLogger("provisioner.lease")


@dataclass(eq=False)
class Renewal:
    """The renewal of one lease on one cluster's nodes; called with the heartbeat's ``now``."""

    adapter: SupportsLeaseRenewal
    provider: str
    cluster_id: str
    lease: str
    owner: str
    every_s: float = RENEW_S
    last: dt.datetime | None = None
    """When the nodes were last marked renewed (None: not yet)."""
    released: bool = False
    wrote: bool = False
    """Whether a renewal may have marked a node (none did: the release has nothing to remove)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Renewals (heartbeat thread) and the release (the holder) one at a time: a renewal in flight
    when the up finishes must not land after the release and leave a mark that goes stale."""

    def __call__(self, now: dt.datetime) -> None:
        if self.last is None or (now - self.last).total_seconds() >= self.every_s:
            self.renew(now)

    def renew(self, now: dt.datetime) -> None:
        """Mark the nodes renewed at ``now``; a failure is logged and retried at the next heartbeat.
        Nothing once released."""
        with self._lock:
            if not self.released:
                self._renew(now)

    def _renew(self, now: dt.datetime) -> None:
        try:
            marked = self.adapter.renew_lease(self.cluster_id, self.lease, self.owner, now)
        except ProviderError as exc:
            self.wrote = True  # some nodes may carry it
            log.warning("%s: could not renew the lease of cluster %s: %s", self.provider, self.cluster_id, exc)
            return
        except Exception as exc:  # the heartbeat thread must go on whatever one renewal hit
            self.wrote = True
            log.warning("%s: renewing the lease of %s failed: %s", self.provider, self.cluster_id, type(exc).__name__)
            return
        self.wrote = self.wrote or marked != 0
        self.last = now

    def release(self) -> None:
        """Remove the renewal mark (after any renewal in flight): the lease's work is done and a
        record holds the cluster. No renewal follows."""
        with self._lock:
            self.released = True
            if not self.wrote:  # e.g. a pulumi up that ended before its nodes were first renewed
                return
            try:
                self.adapter.renew_lease(self.cluster_id, self.lease, self.owner, None)
            except ProviderError as exc:
                log.warning("%s: could not release the lease of cluster %s: %s", self.provider, self.cluster_id, exc)


def start(
    adapter: Provider, cluster_id: str, lease: str, owner: str, now: dt.datetime, *, at_once: bool = True
) -> Renewal | None:
    """Renew ``lease`` on ``cluster_id``'s nodes now (``at_once``: they were just bought; else first
    ``RENEW_S`` from ``now``), then at every ``RENEW_S`` of this process's hold on the cluster
    (``lease.on_beat``) until the hold ends. None where the provider cannot change marks, or this
    process does not hold the cluster."""
    if not isinstance(adapter, SupportsLeaseRenewal):
        return None
    renewal = Renewal(adapter, adapter.name, cluster_id, lease, owner)
    if not at_once:
        renewal.last = now
    if not cluster_lease.on_beat(cluster_id, renewal):
        return None
    if at_once:
        renewal(now)
    return renewal


def cover(adapter: Provider, cluster_id: str, lease: str, owner: str, now: dt.datetime) -> Renewal | None:
    """Mark the nodes just bought under ``lease`` renewed at ``now``: by the renewal of that lease
    already running on this process's hold of ``cluster_id`` (a burst's: it goes on), else by one
    started here (``start``: until the hold ends or ``release``). None where the provider cannot
    change marks or this process does not hold the cluster."""
    for renew in cluster_lease.beats(cluster_id):
        if isinstance(renew, Renewal) and renew.lease == lease and renew.owner == owner:
            renew.renew(now)
            return renew
    return start(adapter, cluster_id, lease, owner, now)


def stop(cluster_id: str, renewal: Renewal) -> None:
    """Stop renewing without releasing: what a failed ``up`` leaves (its holder is done with the
    nodes it made, so their last renewal ages until another machine may collect them)."""
    cluster_lease.drop_beat(cluster_id, renewal)


def release(cluster_id: str) -> int:
    """End every renewal of this process's hold on ``cluster_id`` and remove its mark from the nodes
    (an ``up`` that finished: its record holds the cluster now). How many were released."""
    done = [renew for renew in cluster_lease.beats(cluster_id) if isinstance(renew, Renewal)]
    for renewal in done:
        cluster_lease.drop_beat(cluster_id, renewal)
        renewal.release()
    return len(done)


__all__ = ["RENEW_S", "Renewal", "cover", "release", "start", "stop"]
