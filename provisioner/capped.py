"""Bounded reads of what another program or another hand wrote: command output and local files.

``run_capped`` runs a command with its output read as it comes, at most ``max_bytes`` of each
stream: a program that floods (a broken or hostile ``nvidia-smi``, a scheduler command, ``dmesg``)
is killed at the cap and the result says so (``returncode`` 125), so memory never grows past the cap
however long the timeout. ``read_capped`` reads a local file without following a symbolic link, only
if it is a regular file, and at most ``max_bytes`` of it (an ``OSError`` otherwise, whose ``strerror``
says why): what the ledger, records and reports are read with. ``capped_lines`` follows a stream
line by line with each line cut at a cap (a job's log over SSH: endless, but never one endless line).
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import stat
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MAX_OUTPUT_BYTES = 8 * 1024 * 1024
"""Most output kept from one stream of a command (``nvidia-smi -q -x`` on 8 GPUs is about 300 KB,
a full kernel ring buffer a few MB)."""
MAX_LINE_BYTES = 64 * 1024
"""Longest line of a followed stream (a job's log) passed on whole; the rest of a longer one is dropped."""
OVER_CAP = 125
"""Return code of a command stopped because its output passed the cap."""
TIMED_OUT = 124
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Captured:
    returncode: int
    stdout: str
    stderr: str


def run_capped(
    argv: Sequence[str],
    *,
    timeout_s: float,
    max_bytes: int = MAX_OUTPUT_BYTES,
    stdin: bytes | None = None,
) -> Captured:
    """Run ``argv`` (no shell; stdin closed, or fed ``stdin`` then closed) for at most ``timeout_s``;
    keep at most ``max_bytes`` of stdout and of stderr. Over the cap the program is killed: returncode
    ``OVER_CAP`` and a stderr line saying so; past the timeout ``TIMED_OUT``. OSError when it cannot
    be started."""
    feed = subprocess.DEVNULL if stdin is None else subprocess.PIPE
    child = subprocess.Popen(list(argv), stdin=feed, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    if stdin is not None:  # written beside the reads: a program may print before it has read it all
        threading.Thread(target=_feed, args=(child, stdin), daemon=True).start()
    out_fd, err_fd = child.stdout.fileno(), child.stderr.fileno()
    kept: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout_s
    verdict: str | None = None
    with selectors.DefaultSelector() as selector:
        for fd in kept:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and verdict is None:
            left = deadline - time.monotonic()
            if left <= 0:
                verdict = "timeout"
                break
            for key, _ in selector.select(timeout=left):
                fd = int(key.fd)
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    selector.unregister(fd)
                    continue
                kept[fd] += chunk
                if len(kept[fd]) > max_bytes:
                    del kept[fd][max_bytes:]
                    verdict = "over"
                    break
    if verdict is not None:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
    try:
        code = child.wait(timeout=max(deadline - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:  # output closed but the program lingers
        child.kill()
        child.wait()
        verdict = verdict or "timeout"
        code = TIMED_OUT
    child.stdout.close()
    child.stderr.close()
    out, err = (bytes(kept[fd]).decode(errors="replace") for fd in (out_fd, err_fd))
    name = Path(argv[0]).name
    if verdict == "over":
        return Captured(OVER_CAP, out, f"{name}: printed more than {max_bytes // 1024} KiB; stopped")
    if verdict == "timeout":
        return Captured(TIMED_OUT, out, f"{name}: timed out after {timeout_s:g}s")
    return Captured(code, out, err)


def capped_lines(pipe: IO[bytes], max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[str, int]]:
    """The lines of ``pipe`` as they come (text, bytes dropped): a line longer than ``max_line_bytes``
    is cut there and the rest of it up to its newline is read and dropped, so following a stream
    that never prints a newline holds at most ``max_line_bytes`` plus one read in memory."""
    kept = bytearray()
    dropped = 0
    while chunk := os.read(pipe.fileno(), _CHUNK):
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            room = max_line_bytes - len(kept)
            kept += part[:room]
            dropped += max(len(part) - room, 0)
            if end >= 0:
                yield kept.decode(errors="replace"), dropped
                kept, dropped = bytearray(), 0
    if kept or dropped:
        yield kept.decode(errors="replace"), dropped


def _feed(child: subprocess.Popen[bytes], data: bytes) -> None:
    assert child.stdin is not None
    with contextlib.suppress(OSError):  # a program that exits (or is killed) before reading it all
        child.stdin.write(data)
    with contextlib.suppress(OSError):
        child.stdin.close()


def read_capped(path: Path, max_bytes: int) -> bytes:
    """The bytes of regular file ``path``, read without following a symbolic link at its end.
    OSError (ELOOP: a link, EINVAL: not a regular file, EFBIG: larger than ``max_bytes``) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {max_bytes // 1024} KiB", str(path))
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew while read
        raise OSError(errno.EFBIG, f"larger than {max_bytes // 1024} KiB", str(path))
    return data


def link_refused(exc: OSError) -> bool:
    """Whether ``exc`` is ``read_capped`` refusing a symbolic link."""
    return exc.errno == errno.ELOOP


__all__ = [
    "MAX_LINE_BYTES",
    "MAX_OUTPUT_BYTES",
    "OVER_CAP",
    "TIMED_OUT",
    "Captured",
    "capped_lines",
    "link_refused",
    "read_capped",
    "run_capped",
]
