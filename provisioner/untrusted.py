"""Bounded decoding of JSON nobody here wrote: provider answers, the ledger, cluster records.

``loads_bounded`` is the one JSON decode for such text. It refuses, with one line saying why
(``UntrustedJSONError``, a ValueError), what a recursive decoder or the code after it cannot
take: more than ``max_bytes``, nesting deeper than ``MAX_JSON_DEPTH``, and text that is not UTF-8
JSON. A number that is none (``NaN``/``Infinity``, a float that overflows, an integer of more than
``MAX_INT_DIGITS`` digits) is decoded as None, so no non-finite or huge number gets past the
decode, and the model reading the field refuses that item alone (an offer row dropped and
counted, as providers.screening does, rather than the whole answer). The depth is checked
twice: the C decoder's own recursion guard (a RecursionError, turned into the same refusal)
stops a document nested thousands deep before it costs anything, and a walk of the decoded
value (iterative, one step per container) refuses anything deeper than the limit, so what
reaches pydantic, ``str()`` or a printer is shallow.
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


def _no_constant(name: str) -> None:
    return None  # NaN, Infinity, -Infinity: no number; the field reads as absent


def loads_bounded(data: bytes | str, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``data``, every number in it finite and in range; UntrustedJSONError naming the
    first bound it breaks (size, depth, not JSON). A number that is not one (``NaN``, ``Infinity``, a
    float that overflows, an integer of more than ``MAX_INT_DIGITS`` digits) is decoded as None: the
    field reads as absent, so the model reading it refuses that item (an offer row is dropped and
    counted, a bill or a listing refused) instead of computing with it."""
    if max_bytes is not None and len(data) > max_bytes:
        raise UntrustedJSONError(f"larger than {max_bytes} bytes")
    try:
        wrapper = [json.loads(data, parse_constant=_no_constant)]
    except RecursionError:
        raise UntrustedJSONError(f"nested more than {max_depth} levels deep") from None
    except UnicodeDecodeError:
        raise UntrustedJSONError("not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError, int() of more than 4,300 digits
        raise UntrustedJSONError(f"not JSON ({_first_words(exc)})") from None
    if _bounded(wrapper, max_depth):
        raise UntrustedJSONError(f"nested more than {max_depth} levels deep")
    return wrapper[0]


def too_deep(value: Any, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether decoded JSON ``value`` nests deeper than ``max_depth`` (a scalar is depth 0); numbers out of
    range in it are set to None on the way."""
    return _bounded([value], max_depth)


def _bounded(wrapper: list[Any], max_depth: int) -> bool:
    """Walk ``wrapper[0]`` (one pass, iterative): True when it nests deeper than ``max_depth``; every float
    that overflowed and every integer past ``MAX_INT_DIGITS`` digits is replaced by None in place (about a
    third of json.loads' own time on a 3.8 MB answer of 25,000 offers: docs/benchmarks.md)."""
    stack: list[tuple[Any, int]] = [(wrapper, -1)]
    while stack:
        item, depth = stack.pop()
        if depth + 1 > max_depth:
            return True
        for key, child in item.items() if type(item) is dict else enumerate(item):
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif (kind is float and not math.isfinite(child)) or (kind is int and not -_INT_LIMIT < child < _INT_LIMIT):
                item[key] = None
    return False


def _first_words(exc: Exception) -> str:
    return " ".join(str(exc).split())[:120]


__all__ = ["MAX_INT_DIGITS", "MAX_JSON_DEPTH", "UntrustedJSONError", "loads_bounded", "too_deep"]
