"""The Pulumi backend's stack lock, and what a killed engine leaves behind on this machine.

A ``pulumi up``/``destroy`` holds the stack's lock in its backend (a file under
``.pulumi/locks/`` of a file or S3/GCS backend, naming the user, host and pid of the engine)
for as long as it runs. A SIGKILLed engine leaves it, and leaves running the dynamic-provider
servers it started (they have their own process group and never notice the engine is gone:
one may still be buying nodes). ``clear_if_stale`` is what ``up``/``down``/``gc`` do when the
backend refuses them for a lock: on this host, with the holder's pid gone, they stop those
servers and remove the lock (``pulumi cancel``); a live holder, or one on another host, gets one
line naming the lock and how to wait or cancel. Linux only for the orphan search (``/proc``).
"""

from __future__ import annotations

import os
import re
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

from provisioner.providers.ownership import pid_alive

WORK_VAR = "PROVISIONER_PULUMI_WORK"
"""Set in the engine's environment to this state dir's workspace: how its orphaned servers are known."""

_LOCK = re.compile(
    r"(?P<where>\S*\.pulumi/locks/\S+?\.json)\S*: created by (?P<user>[^@\s]+)@(?P<host>\S+) "
    r"\(pid (?P<pid>\d+)\) at (?P<at>\S+)"
)


@dataclass(frozen=True)
class StackLock:
    where: str
    user: str
    host: str
    pid: int
    at: str

    def stale(self, host: str | None = None) -> bool:
        """Held by a process of this host that is gone (a SIGKILLed engine)."""
        if self.host != (host or socket.gethostname()):
            return False
        return not pid_alive(self.pid)

    def refusal(self, cluster_id: str, backend_url: str) -> str:
        """The one line for a live lock or one held from another host."""
        return (
            f"stack {cluster_id} is locked by {self.user}@{self.host} (pid {self.pid}) since {self.at}: "
            f"another pulumi update of it is running; wait for it to end and run this again, or, if that "
            f"process is gone, remove the lock with: PULUMI_BACKEND_URL='{backend_url}' pulumi cancel "
            f"--yes --stack {cluster_id}"
        )


def lock_in(text: str) -> StackLock | None:
    """The stack lock a pulumi error ``text`` reports (``...: created by USER@HOST (pid N) at T``), or None."""
    found = _LOCK.search(text)
    if found is None:
        return None
    return StackLock(found["where"], found["user"], found["host"], int(found["pid"]), found["at"])


def orphans(work_dir: Path, proc: Path = Path("/proc")) -> list[int]:
    """Pids of dynamic-provider servers started by an engine of ``work_dir`` (``WORK_VAR`` in their
    environment) whose engine is gone: their parent is no ``pulumi`` process any more."""
    mark = f"{WORK_VAR}={work_dir}".encode()
    found = []
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            argv = (entry / "cmdline").read_bytes()
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if mark not in environ or b"pulumi" not in argv or b"dynamic" not in argv:
            continue
        if not _is_pulumi(proc / parent):
            found.append(int(entry.name))
    return found


def _is_pulumi(entry: Path) -> bool:
    try:
        argv = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and Path(argv[0].decode(errors="replace")).name == "pulumi"


def stop_orphans(work_dir: Path) -> list[int]:
    """SIGKILL the orphaned dynamic-provider servers of ``work_dir``'s engines; their pids."""
    stopped = []
    for pid in orphans(work_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        stopped.append(pid)
    return stopped


__all__ = ["WORK_VAR", "StackLock", "lock_in", "orphans", "stop_orphans"]
