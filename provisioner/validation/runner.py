"""The one door to the outside: every external command, file read, clock and sleep.

Checks never call ``subprocess`` or ``time`` themselves; they get a ``Host``. Production uses
``Host.local()``; tests build one from a ``FakeRunner`` that answers with captured tool output
(tests/fixtures/gpu), a fake clock that advances on sleep, and a temporary sysfs tree.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from provisioner.capped import run_capped


@dataclass(frozen=True)
class CommandResult:
    """``returncode`` 127 means the program does not exist; 124 that it timed out; 125 that it printed
    more than the cap and was stopped (provisioner.capped)."""

    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def brief(self) -> str:
        """The last line of stderr (or stdout), for one-line messages."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
            if lines:
                return lines[-1][:200]
        return f"exit {self.returncode}"


class Runner(Protocol):
    def __call__(self, args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult: ...


def run_subprocess(args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
    """Run without a shell; never raises for a missing program, a failure or a timeout. At most
    ``capped.MAX_OUTPUT_BYTES`` of each stream is kept: a program printing more is killed there
    (returncode 125, a stderr line saying so), so a flooding tool never grows memory."""
    if shutil.which(args[0]) is None:
        return CommandResult(127, "", f"{args[0]}: command not found")
    try:
        done = run_capped(args, timeout_s=timeout_s)
    except OSError as exc:
        return CommandResult(126, "", f"{args[0]}: {exc.strerror or exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


@dataclass
class FakeRunner:
    """Answers commands from a table: the first key that is a prefix of the argv wins.

    Unknown programs answer 127 (not installed). ``calls`` records every argv, in order.
    """

    answers: Mapping[tuple[str, ...], CommandResult | Callable[[Sequence[str]], CommandResult]] = field(
        default_factory=dict
    )
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        argv = tuple(args)
        self.calls.append(argv)
        for prefix in sorted(self.answers, key=len, reverse=True):
            if argv[: len(prefix)] == prefix:
                answer = self.answers[prefix]
                return answer(argv) if callable(answer) else answer
        return CommandResult(127, "", f"{argv[0]}: command not found")


class FakeClock:
    """A monotonic clock that only moves when ``sleep`` is called (or ``advance``)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Host:
    """Where a check runs: its commands, clock, sleep and filesystem root (``/`` for real)."""

    run: Runner
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    root: Path = Path("/")

    @classmethod
    def local(cls) -> Host:
        return cls(run=run_subprocess)

    def path(self, absolute: str) -> Path:
        """``/sys/class/infiniband`` under this host's root."""
        return self.root / absolute.lstrip("/")


__all__ = ["CommandResult", "FakeClock", "FakeRunner", "Host", "Runner", "run_subprocess"]
