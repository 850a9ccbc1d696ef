"""The stack lock a killed engine leaves, told apart from a live one (provisioner.lifecycle.stack_lock).

The error texts are the real engine's (pulumi v3.274.1, file and S3 backends, as the real-engine tests
met them); the process table is a stand-in ``/proc`` tree.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from provisioner.lifecycle.stack_lock import WORK_VAR, lock_in, orphans

FILE = (
    "error: file:///home/al/.local/state/gpu-provisioner/pulumi/.pulumi/locks/organization/provisioner/lc-lambda/"
    "d0905829-4c75-4939-a9bd-77523256fcad.json?no_tmp_dir=true: created by al@box (pid 27354) at "
    "2026-11-28T19:20:50Z"
)
S3 = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
    "delete the lock file with `pulumi cancel`.\n  s3://team/.pulumi/locks/organization/provisioner/lc-lambda/"
    "0c1e.json: created by bob@laptop-2 (pid 4242) at 2026-11-28T19:30:00Z"
)


def test_the_lock_is_read_from_the_engines_words() -> None:
    lock = lock_in(FILE)
    assert lock is not None and (lock.user, lock.host, lock.pid, lock.at) == (
        "al",
        "box",
        27354,
        "2026-11-28T19:20:50Z",
    )
    assert lock.where.endswith("/lc-lambda/d0905829-4c75-4939-a9bd-77523256fcad.json")
    other = lock_in(S3)
    assert other is not None and (other.user, other.host, other.pid) == ("bob", "laptop-2", 4242)
    assert lock_in("error: update failed: lambda: no capacity") is None


def test_only_a_dead_process_of_this_host_leaves_a_stale_lock() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that was this host's and is gone
    here = socket.gethostname()
    text = f"x/.pulumi/locks/o/p/s/1.json: created by al@{here} (pid {{}}) at 2026-11-28T19:20:50Z"
    gone, alive = lock_in(text.format(dead.pid)), lock_in(text.format(os.getpid()))
    assert gone is not None and alive is not None
    assert gone.stale() is True and alive.stale() is False
    elsewhere = lock_in(FILE.replace("@box", "@another-host"))
    assert elsewhere is not None and elsewhere.stale(host=here) is False  # never broken from another host


def test_the_refusal_is_one_line_naming_the_lock_and_how_to_wait_or_cancel() -> None:
    lock = lock_in(S3)
    assert lock is not None
    line = lock.refusal("lc-lambda", "s3://team?endpoint=http://127.0.0.1:9000")
    assert "\n" not in line
    assert line == (
        "stack lc-lambda is locked by bob@laptop-2 (pid 4242) since 2026-11-28T19:30:00Z: another pulumi update "
        "of it is running; wait for it to end and run this again, or, if that process is gone, remove the lock "
        "with: PULUMI_BACKEND_URL='s3://team?endpoint=http://127.0.0.1:9000' pulumi cancel --yes --stack lc-lambda"
    )


def _proc(root: Path, pid: int, parent: int, argv: list[str], env: dict[str, str]) -> None:
    entry = root / str(pid)
    entry.mkdir()
    (entry / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (entry / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    (entry / "stat").write_text(f"{pid} (x y) S {parent} {pid} {pid}")


def test_orphans_are_the_dynamic_provider_servers_of_this_workspace_whose_engine_is_gone(tmp_path: Path) -> None:
    work, other = tmp_path / "state" / "pulumi" / "work", tmp_path / "other" / "pulumi" / "work"
    mine = {WORK_VAR: str(work)}
    server = ["/venv/bin/python3", "-u", "/opt/pulumi/bin/dynamic_provider.py", "127.0.0.1:4000"]
    _proc(tmp_path, 10, 1, ["/opt/pulumi/bin/pulumi", "up"], mine)  # a live engine
    _proc(tmp_path, 11, 10, server, mine)  # its server: not an orphan
    _proc(tmp_path, 12, 1, server, mine)  # a dead engine's: an orphan
    _proc(tmp_path, 13, 1, ["/usr/bin/python3", "-u", "-m", "pulumi.dynamic"], mine)  # upstream's plugin, orphaned
    _proc(tmp_path, 14, 1, server, {WORK_VAR: str(other)})  # another state dir's: not ours to stop
    _proc(tmp_path, 15, 1, ["/usr/bin/python3", "train.py"], mine)  # not a dynamic provider
    assert sorted(orphans(work, proc=tmp_path)) == [12, 13]
