"""Text that is safe to put on a terminal: control characters shown, never obeyed; counts worded.

``say`` is the one printer of the CLI: every line a command writes to stdout or stderr goes
through it (tests/test_printer.py scans the source for any other ``print``/``write`` and runs
every command and format with control characters in every provider- and file-supplied string).
JSON documents go through it too: ``json.dumps`` already writes control characters as ``\\uNNNN``,
so escaping leaves them unchanged.

Provider answers (addresses, names, error bodies) and catalog free text reach ``up``, ``status``,
``ssh --print``, error lines and the table report. An ESC sequence among them would retitle the
window, clear the screen or hide a line. ``printable`` escapes every C0/C1 control character,
DEL and the Unicode bidirectional overrides as ``\\xNN``/``\\uNNNN`` (line breaks and tabs are kept
when ``keep_newlines``). Pure.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys

# C0 controls, DEL, C1 controls, and the bidi embedding/override/isolate characters (U+202A-U+202E,
# U+2066-U+2069) that reorder what a reader sees.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def counted(count: object, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun agreeing with it: ``1 GPU``, ``2 GPUs``, ``1 offer``, ``0 nodes``."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``str(text)`` with each control character written as an escape (``\\x1b``); tab and line
    feed stay as they are when ``keep_newlines``."""
    pattern = _CONTROL_KEEP_LINES if keep_newlines else _CONTROL
    return pattern.sub(_escaped, str(text))


def when_text(when: dt.datetime | str | None, missing: str = "n/a") -> str:
    """A moment as every human output writes it: UTC, to the second (``2026-11-28 19:04:52 UTC``),
    never with microseconds; ``missing`` when unknown. ISO text (a record's field) is read first."""
    if when is None or when == "":
        return missing
    moment = dt.datetime.fromisoformat(when) if isinstance(when, str) else when
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if moment.tzinfo is not None else "")


def say(text: object = "", *, err: bool = False, end: str = "\n", flush: bool = False) -> None:
    """Write ``text`` (escaped by ``printable``, line breaks and tabs kept) and ``end`` to stdout, or
    to stderr with ``err``. The one way the CLI prints."""
    stream = sys.stderr if err else sys.stdout
    stream.write(printable(text, keep_newlines=True) + end)
    if flush:
        stream.flush()


class _SayHandler(logging.Handler):
    """A logging handler that writes each record through ``say`` to stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            say(self.format(record), err=True)
        except Exception:  # a broken stderr must not turn a log line into a crash
            self.handleError(record)


def install_log_printer() -> None:
    """Make logging's last resort (what writes a warning when no handler is configured: the CLI
    configures none) print through ``say``, so a provider's words in a log line are escaped too.
    Idempotent."""
    if not isinstance(logging.lastResort, _SayHandler):
        logging.lastResort = _SayHandler(logging.WARNING)


__all__ = ["counted", "install_log_printer", "printable", "say", "when_text"]
