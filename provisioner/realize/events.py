"""Progress events of the lifecycle commands: one shape for people (rich) and machines (JSON lines).

Every step calls ``emit(event, message=..., **fields)``. ``event`` is a short stable name
(``create``, ``running``, ``ready``, ``failover``, ``job-output``, ...), ``message`` one human
line, the other fields JSON-able facts (ids, counts, Decimal money as text). An event never
carries a secret: callers pass names, ids, addresses and exit codes only.

``JsonLines`` writes one JSON object per line (``{"event", "time", "message", ...}``) and
flushes each, so a reader sees it at once; ``RichLines`` prints the message to stderr with
rich, job output to stdout as is. ``no_events`` drops everything.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import IO, Any, Protocol


class Emit(Protocol):
    def __call__(self, event: str, /, *, message: str, **fields: Any) -> None: ...


def no_events(event: str, /, *, message: str, **fields: Any) -> None:
    """An Emit that drops every event."""


def _default(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


class JsonLines:
    """Writes each event as one JSON object on its own line (``--json``)."""

    def __init__(
        self, stream: IO[str] | None = None, clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    ) -> None:
        self._stream = stream
        self._clock = clock

    def __call__(self, event: str, /, *, message: str, **fields: Any) -> None:
        stream = self._stream or sys.stdout
        record = {"event": event, "time": self._clock().isoformat(), "message": message, **fields}
        stream.write(json.dumps(record, default=_default, sort_keys=False) + "\n")
        stream.flush()


class RichLines:
    """Human progress on stderr through rich; ``job-output`` lines go to stdout unchanged.

    On a terminal a ``wait-*`` event shows a spinner until the next event arrives."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console

        self._console = Console(stderr=True, highlight=False, soft_wrap=True)
        self._quiet = quiet
        self._status: Any = None

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __call__(self, event: str, /, *, message: str, **fields: Any) -> None:
        self._stop()
        if event.startswith("wait-") and self._console.is_terminal:
            self._status = self._console.status(_escape(message))
            self._status.start()
            atexit.register(self._stop)  # a wait that ends in an error has no next event
            return
        if event == "job-output":
            sys.stdout.write(str(fields.get("line", "")) + "\n")
            sys.stdout.flush()
            return
        if self._quiet and event not in ("error", "failover", "teardown", "watchdog", "warning"):
            return
        style = {
            "error": "bold red",
            "failover": "yellow",
            "warning": "yellow",
            "watchdog": "yellow",
            "ready": "green",
            "up": "bold green",
            "down": "bold",
        }.get(event, "")
        self._console.print(f"[{style}]{_escape(message)}[/]" if style else _escape(message))


def _escape(text: str) -> str:
    """``text`` with rich markup and terminal control characters (provider strings) made inert; its
    line breaks kept (``down``'s planned-vs-actual table is one multi-line message)."""
    from rich.markup import escape

    from provisioner.termtext import printable

    return escape(printable(text, keep_newlines=True))


__all__ = ["Emit", "JsonLines", "RichLines", "no_events"]
