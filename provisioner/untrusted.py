"""Bounded decoding of JSON nobody here wrote: provider answers, the ledger, cluster records.

``loads_bounded`` is the one JSON decode for such text. It refuses, with one line saying why
(``UntrustedJSONError``, a ValueError), what a recursive decoder or the code after it cannot
take: more than ``max_bytes``, nesting deeper than ``MAX_JSON_DEPTH``, ``NaN``/``Infinity``,
a number that overflows a float, an integer of more than ``MAX_INT_DIGITS`` digits, and text
that is not UTF-8 JSON. The depth is checked twice: the C decoder's own recursion guard (a
RecursionError, turned into the same refusal) stops a document nested thousands deep before
it costs anything, and a walk of the decoded value (iterative, one step per value) refuses
anything deeper than the limit, so what reaches pydantic, ``str()`` or a printer is shallow.
Pure.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_JSON_DEPTH = 64
"""Deepest nesting accepted (the deepest real provider answer, a GCP aggregated list, is about 10)."""
MAX_INT_DIGITS = 30
"""Longest integer accepted: 10^30 is no count, id or price a provider sends."""


_INT_LIMIT = 10**MAX_INT_DIGITS


class UntrustedJSONError(ValueError):
    """Text that is not bounded JSON. ``str()`` is one line, free of the text itself."""


def _refuse_constant(name: str) -> Any:
    raise UntrustedJSONError(f"a non-finite number ({name}) where JSON allows none")


def loads_bounded(data: bytes | str, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``data``, or UntrustedJSONError naming the first bound it breaks."""
    if max_bytes is not None and len(data) > max_bytes:
        raise UntrustedJSONError(f"larger than {max_bytes} bytes")
    try:
        value = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        raise UntrustedJSONError(f"nested more than {max_depth} levels deep") from None
    except UntrustedJSONError:
        raise
    except UnicodeDecodeError:
        raise UntrustedJSONError("not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError, int() of too many digits
        raise UntrustedJSONError(f"not JSON ({_first_words(exc)})") from None
    problem = _out_of_bounds(value, max_depth)
    if problem is not None:
        raise UntrustedJSONError(problem)
    return value


def too_deep(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether decoded JSON ``value`` nests deeper than ``max_depth`` (a scalar is depth 0)."""
    return (_out_of_bounds(value, max_depth) or "").startswith("nested")


def _out_of_bounds(value: Any, max_depth: int) -> str | None:
    """The first bound decoded ``value`` breaks (depth, a float that overflowed, a long integer), or None.
    One pass: each container's items are checked as it is visited (about a third of json.loads' own
    time on a 3.8 MB answer of 25,000 offers: docs/benchmarks.md)."""
    stack: list[tuple[Any, int]] = [([value], -1)]
    while stack:
        item, depth = stack.pop()
        if depth + 1 > max_depth:
            return f"nested more than {max_depth} levels deep"
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float and not math.isfinite(child):
                return "a number out of range (it overflows a float)"
            elif kind is int and not -_INT_LIMIT < child < _INT_LIMIT:
                return f"an integer of more than {MAX_INT_DIGITS} digits"
    return None


def _first_words(exc: Exception) -> str:
    return " ".join(str(exc).split())[:120]


__all__ = ["MAX_INT_DIGITS", "MAX_JSON_DEPTH", "UntrustedJSONError", "loads_bounded", "too_deep"]
