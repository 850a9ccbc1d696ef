"""Prices and rates as a catalog writes them (JSON numbers or strings, one per line) read exactly into
int64 units of 10^-places USD: numpy reads the plain decimals of a whole column at once, ``Decimal``
the rare other forms (an exponent, a sign, a leading zero, a big number). Used by
``offer_columns.Columns``. Pure.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from provisioner.errors import CatalogError
from provisioner.money import PICO_PER_MICRO, split_price, to_nano

_WIDTH = 32
"""Bytes of each written number that numpy looks at; a plain one is at most 6 + 1 + 12 (+ 2 quotes)."""
_WHOLE_DIGITS = 6
"""Digits before the point of a plain number: 10^6 USD in pico-USD still fits an int64 (and is out of range)."""
_OUT_OF_RANGE = -2
"""A price or rate no offer may have (negative, zero-or-less price, 10^6 USD and more, not finite):
``problems`` refuses it at its row."""


def written_units(
    joined: bytes, n: int, places: int, origin: str, name: str, base: int, *, null: int | None
) -> np.ndarray:
    """The ``n`` values of ``joined`` (each written as a JSON number or string, one per line) in int64
    units of 10^-places USD, exactly.

    A plain decimal (digits, at most one point, at most ``_WHOLE_DIGITS`` before it and ``places`` after
    it, no leading zero) is read by numpy, the whole column at once: its digits as one integer, scaled by
    the decimals it lacks. Anything else goes through ``Decimal`` (``_exotic``). A JSON null becomes
    ``null`` (None: refused). CatalogError at ``offers[i].name`` for a value that is not a number, or a
    price with more than 12 decimals."""
    buf = np.frombuffer(joined + b"\n" + bytes(_WIDTH), dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))[:n]
    starts = np.concatenate(([0], ends[:-1] + 1))
    length = ends - starts
    width = int(min(length.max(initial=0), _WIDTH))
    # one row per byte position, one column per value: every step below is a pass over contiguous vectors,
    # of bytes where it can be (fresh int64 temporaries cost more than the arithmetic)
    m = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(buf, _WIDTH)[starts, :width].T)
    m *= _AT[:width, None] < length  # past each value's end: 0, neither digit nor point
    quoted = (m[0] == ord('"')).astype(np.int64) if width else np.zeros(n, dtype=np.int64)
    value = m - np.uint8(ord("0"))  # a digit's value; anything else wraps to 10 or more
    digit = value < 10
    dot = m == ord(".")
    scale, add = digit * np.uint8(9) + np.uint8(1), value * digit  # a digit shifts the number left and adds
    units = add[0].astype(np.int64) if width else np.zeros(n, dtype=np.int64)
    for j in range(1, width):  # every digit, left to right: at most 6 + 12 of them, so int64 holds them all
        units *= scale[j]
        units += add[j]
    digits, dots = digit.sum(0, dtype=np.int64), dot.sum(0, dtype=np.int64)
    size = length - 2 * quoted  # the number's own characters
    point = np.where(dots == 1, (dot * _AT[:width, None]).sum(0, dtype=np.int64) - quoted, size)
    decimals = np.where(dots == 1, size - point - 1, 0)
    first = m[np.minimum(quoted, max(width - 1, 0)), np.arange(n)] if width else np.zeros(n, dtype=np.uint8)
    plain = (
        (length <= _WIDTH)
        & (digits + dots == size)
        & (dots <= 1)
        & (point >= 1)
        & (point <= _WHOLE_DIGITS)
        & ((dots == 0) | (decimals >= 1))
        & (decimals <= places)
        & ((first != ord("0")) | (point == 1))
    )  # 01.5 is read by Decimal
    units *= _POWERS[np.clip(places - decimals, 0, places)]
    if null is not None and width >= 4:  # JSON null (an absent price is written as one)
        nulls = (length == 4) & (m[0] == ord("n")) & (m[1] == ord("u")) & (m[2] == ord("l")) & (m[3] == ord("l"))
        units[nulls] = null
        plain |= nulls
    for i in np.flatnonzero(~plain).tolist():
        units[i] = _exotic(joined[starts[i] : ends[i]].strip(b'"'), places, origin, f"offers[{base + i}].{name}")
    written: np.ndarray = units
    return written


_POWERS = 10 ** np.arange(13, dtype=np.int64)
_AT = np.arange(_WIDTH, dtype=np.uint8)


def _exotic(written: bytes, places: int, origin: str, where: str) -> int:
    """A value that is not a plain decimal (an exponent, a sign, a leading zero, a big number) in 10^-places
    USD, or ``_OUT_OF_RANGE``. CatalogError when it is not a number; a price (12 places) with more decimals
    is refused, a rate is rounded half to even to nano-USD (as ``to_nano``)."""
    try:
        value = Decimal(written.decode())
    except (ArithmeticError, UnicodeDecodeError):
        raise CatalogError(f"{origin}: {where}: expected a number") from None
    if not value.is_finite() or abs(value) >= 10**_WHOLE_DIGITS or (places == 12 and value <= 0):
        return _OUT_OF_RANGE
    if places != 12:
        return to_nano(value)
    try:
        micro, rest = split_price(value)
    except ValueError as exc:
        raise CatalogError(f"{origin}: {where}: {exc}") from None
    return micro * PICO_PER_MICRO + rest


__all__ = ["written_units"]
