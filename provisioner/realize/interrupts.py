"""SIGINT/SIGTERM as an exception the lifecycle layer can clean up after, never mid-purchase.

``Interrupts.install()`` (main thread only) turns SIGINT and SIGTERM into ``Interrupted``
(a KeyboardInterrupt, so ``finally`` blocks and ``except BaseException`` cleanups run). Inside
``with interrupts.deferred():`` a signal is only recorded and raised when the block ends:
the create call runs in such a block, so an interrupted purchase finishes (or fails) and the
teardown that follows sees every node it made, instead of racing a launch still in flight.
``shielded()`` records signals without ever raising (the teardown itself runs shielded, so a
second Ctrl-C cannot leave half-deleted nodes). ``restore()`` puts the old handlers back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM arrived. ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


class Interrupts:
    """Signal handling for one lifecycle run. Works without ``install()`` (nothing is raised then)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._depth = 0
        self._shield = 0
        self._old: dict[int, object] = {}

    def install(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._old[signum] = signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._old.clear()

    @property
    def pending(self) -> bool:
        return bool(self.received)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._depth == 0 and self._shield == 0:
            raise Interrupted(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold signals during the block; raise Interrupted after it if one came."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0 and self._shield == 0 and self.received:
            raise Interrupted(self.received[-1])

    @contextmanager
    def shielded(self) -> Iterator[None]:
        """Record signals during the block and never raise for them (cleanup)."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1

    def check(self) -> None:
        """Raise Interrupted if a signal came while held and nothing is holding it now."""
        if self.received and self._depth == 0 and self._shield == 0:
            raise Interrupted(self.received[-1])


__all__ = ["Interrupted", "Interrupts"]
