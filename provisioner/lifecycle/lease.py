"""The cluster lock and lease: one ``up``/``down``/``gc`` at a time per cluster, and proof of life.

``hold(cluster_id, what)`` takes an exclusive ``flock`` on ``clusters/<cluster_id>.lock`` (under
the state dir) for the whole ``up``/``down`` and writes the lease into it: ``what`` holds it,
pid, host, start and a heartbeat refreshed every ``HEARTBEAT_S`` by a daemon thread. A second
holder does not wait: it gets ClusterBusyError, one line naming the holder from the lease. The
kernel drops the lock when the holder dies, SIGKILL included, so ``holder()`` (a lock that
cannot be taken) is the proof that an ``up`` is alive; a record left in ``creating`` whose lock
is free was left by a dead ``up``, and ``gc`` collects its nodes whatever the TTL.

Reentrant within one process (``burst`` holds the cluster across ``bring_up`` and ``tear_down``).
The lease written here is local to this machine; what another machine sees is the lease mark on
the nodes (providers.ownership.LeaseMark, the same pid, host and start, and the place: a hash of
this state dir's path, so another state dir on this host tells its own leases from this one's),
renewed on the nodes by what the holder hangs on its heartbeat (``on_beat``; lifecycle.lease_renewal).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from provisioner.errors import ClusterBusyError, ProvisionerError
from provisioner.lifecycle.state import clusters_dir, state_dir
from provisioner.providers.ownership import LeaseMark, host_slug, place_slug
from provisioner.untrusted import loads_bounded

HEARTBEAT_S = 15.0
"""How often the holder rewrites its heartbeat."""
_TRIES = 20


@dataclass(frozen=True)
class Lease:
    """What the holder of a cluster's lock wrote: who, since when, last seen alive when."""

    what: str
    pid: int
    host: str
    started_at: str
    heartbeat_at: str

    def line(self) -> str:
        return f"{self.what} (pid {self.pid} on {self.host}, since {self.started_at}, heartbeat {self.heartbeat_at})"


def lock_path(cluster_id: str) -> str:
    return str(clusters_dir() / f"{cluster_id}.lock")


@dataclass
class _Held:
    fd: int
    lease: Lease
    mark: LeaseMark
    depth: int = 1
    stop: threading.Event | None = None
    thread: threading.Thread | None = None
    renewers: list[Callable[[dt.datetime], None]] = field(default_factory=list)


_HELD: dict[str, _Held] = {}
_GUARD = threading.Lock()


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(fd: int, lease: Lease) -> None:
    data = json.dumps(asdict(lease)).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def read_lease(cluster_id: str) -> Lease | None:
    """The lease last written for ``cluster_id`` (by a live holder or a dead one); None if none."""
    try:
        with open(lock_path(cluster_id), encoding="utf-8") as handle:
            data = loads_bounded(handle.read() or "null")
        return Lease(**data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def holder(cluster_id: str) -> Lease | None:
    """Who holds ``cluster_id`` now (None: nobody; a lock held by this process counts as held)."""
    with _GUARD:
        if cluster_id in _HELD:
            return _HELD[cluster_id].lease
    try:
        fd = os.open(lock_path(cluster_id), os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProvisionerError(f"cannot open lock of cluster {cluster_id}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_lease(cluster_id) or Lease("unknown", 0, "?", "?", "?")
    finally:
        os.close(fd)  # closing drops the shared lock taken to probe
    return None


def held_mark(cluster_id: str) -> LeaseMark | None:
    """The lease mark of this process's hold on ``cluster_id`` (None: not held here)."""
    with _GUARD:
        held = _HELD.get(cluster_id)
        return held.mark if held is not None else None


def on_beat(cluster_id: str, renew: Callable[[dt.datetime], None]) -> bool:
    """Call ``renew(now)`` at every heartbeat of this process's hold on ``cluster_id`` until the
    outermost hold ends (False, and nothing registered, when this process does not hold it).
    ``renew`` must not raise; it decides itself how often to act."""
    with _GUARD:
        held = _HELD.get(cluster_id)
        if held is None:
            return False
        held.renewers.append(renew)
        return True


def beats(cluster_id: str) -> list[Callable[[dt.datetime], None]]:
    """What ``on_beat`` registered on this process's hold of ``cluster_id`` (empty: none, or not held)."""
    with _GUARD:
        held = _HELD.get(cluster_id)
        return list(held.renewers) if held is not None else []


def drop_beat(cluster_id: str, renew: Callable[[dt.datetime], None]) -> None:
    """Stop calling ``renew`` (registered with ``on_beat``) at the heartbeats of ``cluster_id``."""
    with _GUARD:
        held = _HELD.get(cluster_id)
        if held is not None and renew in held.renewers:
            held.renewers.remove(renew)


def beat_now(cluster_id: str, now: dt.datetime) -> bool:
    """One heartbeat of this process's hold on ``cluster_id`` at ``now``, as its thread makes every
    ``heartbeat_s`` (tests drive the schedule with it on their own clock). False when not held."""
    with _GUARD:
        held = _HELD.get(cluster_id)
    if held is None:
        return False
    _beat_once(held, now)
    return True


@contextmanager
def hold(
    cluster_id: str, what: str, *, now: Callable[[], dt.datetime] | None = None, heartbeat_s: float = HEARTBEAT_S
) -> Iterator[LeaseMark]:
    """Hold ``cluster_id`` exclusively for the block; yields the lease mark nodes are tagged with.

    Raises ClusterBusyError (naming the holder) when another process holds it. Reentrant.
    """
    clock = now or (lambda: dt.datetime.now(dt.UTC))
    with _GUARD:
        held = _HELD.get(cluster_id)
        if held is not None:
            held.depth += 1
    if held is not None:
        try:
            yield held.mark
        finally:
            with _GUARD:
                held.depth -= 1
        return
    held = _acquire(cluster_id, what, clock())
    stop = threading.Event()
    held.stop = stop
    held.thread = threading.Thread(
        target=_beat, args=(held, stop, clock, heartbeat_s), daemon=True, name=f"lease-{cluster_id}"
    )
    with _GUARD:
        _HELD[cluster_id] = held
    held.thread.start()
    try:
        yield held.mark
    finally:
        stop.set()
        held.thread.join(timeout=5)
        with _GUARD:
            _HELD.pop(cluster_id, None)
        os.close(held.fd)  # releases the flock


def _acquire(cluster_id: str, what: str, now: dt.datetime) -> _Held:
    path = lock_path(cluster_id)
    try:
        clusters_dir().mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise ProvisionerError(f"cannot open lock of cluster {cluster_id} ({path}): {exc.strerror}") from None
    for attempt in range(_TRIES):  # a probe (``holder``) holds it for a moment: try a little longer
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt + 1 < _TRIES:
                time.sleep(0.05)
    else:
        os.close(fd)
        other = read_lease(cluster_id)
        who = other.line() if other is not None else "another process"
        raise ClusterBusyError(
            f"cluster {cluster_id} is held by {who}; wait for it to end (or stop that process) and run this again"
        ) from None
    mark = LeaseMark.here(now, place=place_slug(state_dir()))
    stamp = _stamp(mark.started_at)
    lease = Lease(what, mark.pid, host_slug(), stamp, stamp)
    _write(fd, lease)
    return _Held(fd, lease, mark)


def _beat(held: _Held, stop: threading.Event, clock: Callable[[], dt.datetime], every_s: float) -> None:
    while not stop.wait(every_s):
        _beat_once(held, clock())


def _beat_once(held: _Held, now: dt.datetime) -> None:
    lease = Lease(held.lease.what, held.lease.pid, held.lease.host, held.lease.started_at, _stamp(now))
    try:
        _write(held.fd, lease)
        held.lease = lease
    except OSError:
        pass  # a full disk must not kill the up; the lock itself still proves life
    with _GUARD:
        renewers = list(held.renewers)
    for renew in renewers:
        renew(now)


__all__ = [
    "HEARTBEAT_S",
    "Lease",
    "beat_now",
    "beats",
    "drop_beat",
    "held_mark",
    "hold",
    "holder",
    "lock_path",
    "on_beat",
    "read_lease",
]
