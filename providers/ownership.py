"""Whose a node is: owner marks, provider-visible leases, and the one owner-checked delete.

Every delete the tool makes of a cluster's nodes (``down``, ``gc``, the cleanup after a failed
create, a stack's replacement and rollback) goes through ``delete_owned``: the nodes are listed,
and only those whose owner mark equals the caller's are deleted. A node of another owner is
never deleted; a node with no owner mark (a user's own instance that happens to carry the
cluster tag or a matching label) only when the caller passes ``force_unowned`` (the CLI's
``--cluster NAME --force-unowned``). Orchestrate's rollback is the one other delete: it
terminates only ids its own call launched (or whose lease mark is its own).

A **lease mark** (``LeaseMark``) names the ``up`` that launched a node: host, pid, start and
the state dir it keeps its record in (``place``: 6 hex digits of a hash of the dir's path), as
one token ``<host>-<pid>-<YYYYmmddTHHMMSSz>-<place>`` (lowercase, at most 63 characters: a valid
tag value, GCP label and Vast label part; marks written before the place existed parse with
``place`` None). Where the provider shows it back (Lambda/AWS tags, GCP labels, RunPod
env, the Vast label) another machine sharing the account sees who is building a cluster. A
lease is **live** while its last renewal (``RENEWED_TAG``, where the provider lets marks change:
AWS, GCP, Vast.ai; else its start) is less than ``LEASE_MAX_S`` ago, and, when it was taken on
this host, while its process exists. The local lease (lifecycle.lease) adds the heartbeat and
the lock; lifecycle.lease_renewal renews this one while its holder runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provisioner.providers.base import Node, NodeStatus, Provider, owner_id

LEASE_MAX_S = 2 * 3600
"""How long a lease mark counts as held without other evidence: longer than any ``up`` (its
waits are 15 + 20 minutes by default), short enough that a dead one frees its cluster."""
_LEASE = re.compile(
    r"^(?P<host>[a-z0-9](?:[a-z0-9-]{0,28}[a-z0-9])?)-(?P<pid>[1-9][0-9]{0,6})-"
    r"(?P<start>[0-9]{8}t[0-9]{6}z)(?:-(?P<place>[0-9a-f]{6}))?$"
)
_HOST_SAFE = re.compile(r"[^a-z0-9]+")
LIVE = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.FAILED})
"""Statuses that may still bill: what a delete must still reach (FAILED: e.g. Lambda's unhealthy)."""


def host_slug(host: str | None = None) -> str:
    """``host`` (default: this host's short name) as a lease's host part: ``[a-z0-9-]``, 30 at most."""
    raw = (host if host is not None else socket.gethostname()).split(".")[0].lower()
    return _HOST_SAFE.sub("-", raw).strip("-")[:30].strip("-") or "host"


def place_slug(state_dir: str | os.PathLike[str]) -> str:
    """The lease's ``place`` for a state dir: 6 hex digits of SHA-256 of its absolute, resolved path
    (two state dirs on one host tell their leases apart; the path itself is not shown)."""
    resolved = os.path.realpath(os.fspath(state_dir))
    return hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:6]


@dataclass(frozen=True)
class LeaseMark:
    """Who is creating a cluster: ``host`` (a host_slug), ``pid``, ``started_at`` (UTC, whole seconds)
    and ``place`` (``place_slug`` of its state dir; None in marks written before it existed)."""

    host: str
    pid: int
    started_at: dt.datetime
    place: str | None = None

    @classmethod
    def here(cls, now: dt.datetime, pid: int | None = None, place: str | None = None) -> LeaseMark:
        return cls(host_slug(), pid or os.getpid(), now.astimezone(dt.UTC).replace(microsecond=0), place)

    def token(self) -> str:
        base = f"{self.host}-{self.pid}-{self.started_at.astimezone(dt.UTC):%Y%m%dt%H%M%Sz}"
        return f"{base}-{self.place}" if self.place else base

    @classmethod
    def parse(cls, text: str | None) -> LeaseMark | None:
        """The mark ``text`` spells, None unless it is exactly a ``token()`` (strict: no guessing)."""
        found = _LEASE.match(text or "")
        if not found:
            return None
        try:
            start = dt.datetime.strptime(found["start"], "%Y%m%dt%H%M%Sz").replace(tzinfo=dt.UTC)
        except ValueError:
            return None
        return cls(found["host"], int(found["pid"]), start, found["place"])

    def live(self, now: dt.datetime, renewed_at: dt.datetime | None = None) -> bool:
        """Held: renewed (``renewed_at``, else started) less than LEASE_MAX_S ago and, taken on this
        host, its process exists."""
        if now >= self.last_renewed(renewed_at) + dt.timedelta(seconds=LEASE_MAX_S):
            return False
        return self.host != host_slug() or pid_alive(self.pid)

    def last_renewed(self, renewed_at: dt.datetime | None) -> dt.datetime:
        """When its holder last showed it was alive: the renewal, or the start when never renewed."""
        return max(self.started_at, renewed_at) if renewed_at is not None else self.started_at

    def ours(self) -> bool:
        """Taken by this very process (an ``up`` that went on to ``burst`` or ``watch``): never a rival."""
        return self.host == host_slug() and self.pid == os.getpid()

    def here_and_gone(self, place: str) -> bool:
        """Provably abandoned: taken on this host from the state dir ``place`` by a process that is gone."""
        return self.host == host_slug() and self.place == place and not pid_alive(self.pid)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.started_at:%Y-%m-%dT%H:%M:%SZ}"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def foreign_lease(
    lease: str | None, mine: str | None, now: dt.datetime, renewed_at: dt.datetime | None = None
) -> LeaseMark | None:
    """The live lease mark ``lease`` (judged by its last renewal ``renewed_at``) when it is not
    ``mine`` nor this process's; None when it is ours, dead or absent."""
    if not lease or lease == mine:
        return None
    mark = LeaseMark.parse(lease)
    return mark if mark is not None and not mark.ours() and mark.live(now, renewed_at) else None


def refusal(node: Node, owner: str, *, force_unowned: bool = False) -> str | None:
    """Why ``node`` must not be deleted by ``owner`` (None: it may be)."""
    if node.owner is None:
        if force_unowned:
            return None
        return (
            f"carries no owner mark of this tool (delete it with --cluster {node.cluster_id} "
            "--force-unowned if it is the tool's)"
        )
    if node.owner != owner:
        return f"owned by {node.owner}"
    return None


@dataclass(frozen=True)
class Deletion:
    """What ``delete_owned`` asked the provider to delete, and what it kept (node, why)."""

    deleted: tuple[Node, ...] = ()
    kept: tuple[tuple[Node, str], ...] = ()
    others: tuple[Node, ...] = ()
    """This owner's nodes of the cluster that ``select`` left out (another run's): neither deleted nor kept."""


def delete_owned(
    adapter: Provider,
    cluster_id: str,
    node_ids: Sequence[str] | None = None,
    *,
    owner: str | None = None,
    lease: str | None = None,
    force_unowned: bool = False,
    select: Callable[[Node], bool] | None = None,
) -> Deletion:
    """Delete the live nodes of ``cluster_id`` that ``owner`` (default ``owner_id()``) owns.

    ``node_ids`` narrows to those ids (in any status; without them, only the LIVE ones are
    looked at), ``lease`` to nodes carrying that lease mark (a failed
    create's cleanup: only what this call launched), ``select`` to the nodes it accepts (``down``:
    this run's; the owner's nodes it leaves out are returned in ``others``, never deleted). Nodes of
    other owners are kept, unmarked ones too unless ``force_unowned``; both are returned in ``kept``
    with the reason. Lists once,
    then one ``delete_nodes`` call with explicit ids; never waits. Raises what the adapter raises.
    """
    me = owner or owner_id()
    wanted = None if node_ids is None else set(node_ids)
    deleted: list[Node] = []
    kept: list[tuple[Node, str]] = []
    others: list[Node] = []
    for node in adapter.get_nodes(cluster_id):
        if wanted is not None and node.id not in wanted:
            continue  # named ids, in any status: the caller chose them (a stopped GCE VM's disks still bill)
        if wanted is None and node.status not in LIVE:
            continue
        if lease is not None and node.lease != lease:
            continue
        why = refusal(node, me, force_unowned=force_unowned)
        if why is not None:
            kept.append((node, why))
        elif select is not None and not select(node):
            others.append(node)
        else:
            deleted.append(node)
    if deleted:
        adapter.delete_nodes(cluster_id, [node.id for node in deleted])
    return Deletion(tuple(deleted), tuple(kept), tuple(others))


__all__ = [
    "LEASE_MAX_S",
    "LIVE",
    "Deletion",
    "LeaseMark",
    "delete_owned",
    "foreign_lease",
    "host_slug",
    "pid_alive",
    "place_slug",
    "refusal",
]
