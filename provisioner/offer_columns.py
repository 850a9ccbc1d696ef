"""Decoded catalog rows (msgspec Structs, ``provisioner.catalog_json``) into offer columns, fast.

``Columns`` takes the rows chunk by chunk: each chunk becomes one tuple of values per field
(``astuple`` and ``zip``, in C) and each column is made from its tuple by numpy or a C-level
``map``, so no Python code runs per value. Identifiers and texts are dictionary-encoded as they
come (the offer id, which is usually unique, once at the end); prices and rates are kept as their
written text and read exactly by numpy (``written_numbers.written_units``; ``Decimal`` for the rare
forms it does not read). Values are not checked here: ``provisioner.columns.problems`` checks the finished table.
Raises CatalogError at ``offers[i].field`` for a price or rate that is not a number. Pure.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
from msgspec.structs import astuple

from provisioner.errors import CatalogError
from provisioner.money import PICO_PER_MICRO
from provisioner.written_numbers import written_units

if TYPE_CHECKING:
    from provisioner.columns import OfferTable


class Columns:
    """Offer columns built chunk by chunk; identifiers and texts share one dictionary per field.

    Each chunk's rows become one tuple of values per field (``astuple`` and ``zip``, both in C), and
    each column is made from its tuple by numpy or a C-level ``map``: no Python code runs per value.
    Small chunks stay in the CPU cache, which is most of the speed. Prices and rates are parsed by
    numpy once ``BATCH`` rows of them have been gathered, so its per-call cost is paid rarely. Rates
    written as JSON strings (few values) are parsed at once the first times they come and each text
    remembered (``rate_texts``): a decoder may then hand them back as shared str objects, mapped
    here by one lookup each."""

    BATCH = 65_536

    def __init__(self, origin: str, fields: tuple[str, ...], rows: int = 0) -> None:
        """``rows``: how many offers to expect (a guess: the columns grow past it, or end short of it)."""
        from provisioner.columns import ENUMS, IDS, PRICES, RATES, TEXTS

        self.origin, self.fields = origin, fields
        self.seen: dict[str, dict[str | None, int]] = {name: {None: -1} for name in (*IDS, *TEXTS) if name != UNIQUE}
        self.unique: list[bytes] = []  # UNIQUE's written values, a line each, chunk by chunk
        self.enums = {name: {str(member): i for i, member in enumerate(members)} for name, members in ENUMS.items()}
        self.days: dict[dt.date | None, int] = {None: -1}
        self.rows = rows
        self.arrays: dict[str, np.ndarray] = {}  # each column, allocated once for ``rows`` and filled in place
        self.filled: dict[str, int] = {}
        self.written: dict[str, list[bytes]] = {name: [] for name in PRICES}
        self.pending = (0, 0)  # (first row, rows) whose prices wait in self.written
        # per rate field: each value seen written as a JSON string (no escape), its text -> nano-USD
        self.rate_texts: dict[str, dict[str, int]] = {name: {"0": 0} for name in RATES}
        self.rate_lines: dict[str, list[bytes]] = {name: [] for name in RATES}  # written, waiting
        self.rate_rows = dict.fromkeys(RATES, 0)
        self.learned = 0  # rate pieces parsed at once to learn their texts (at most MAX_LEARNED)

    def add(self, rows: list[Any], base: int) -> None:
        """Append ``rows`` (offers ``base`` onwards) to the columns."""
        from provisioner.columns import NUMBERS, RATES

        n = len(rows)
        if not n:
            return
        column = dict(zip(self.fields, zip(*map(astuple, rows), strict=True), strict=True))
        del rows
        values: dict[str, np.ndarray] = {}
        for name, seen in self.seen.items():
            values[name] = _codes(column[name], seen)
        self.unique.append(_lines(column[UNIQUE], self.origin, UNIQUE, base))
        for name, (dtype, *_rest) in NUMBERS.items():
            values[name] = _numbers(column[name], dtype, self.origin, name, base)  # None -> NaN
        for name, index in self.enums.items():
            values[name] = _members(column[name], index)
        values["available"] = np.fromiter(column["available"], dtype=bool, count=n)
        values["as_of_days"] = _days(column["as_of"], self.days)
        for name, part in values.items():
            self._put(name, part)
        for name, written in self.written.items():
            written.append(_lines(column[name], self.origin, name, base))
        first, pending = self.pending
        self.pending = (first, pending + n)
        try:
            for name, texts in self.rate_texts.items():
                raw = column[name]
                if type(raw[0]) is str:  # decoded as one of ``texts``
                    self._parse_rates(name)  # the rows before these first
                    self._put(RATES[name], np.fromiter(map(texts.__getitem__, raw), np.int64, n))
                    continue
                lines = _lines(raw, self.origin, name, base)
                self.rate_lines[name].append(lines)
                self.rate_rows[name] += n
                learn = b'"' in lines and len(texts) < MAX_RATE_TEXTS and self.learned < MAX_LEARNED
                if learn or self.rate_rows[name] >= self.BATCH:
                    self.learned += learn
                    self._parse_rates(name, learn=learn)
        except CatalogError:
            self._parse_written()  # a bad price in the same batch is named first
            raise
        if pending + n >= self.BATCH:
            self._parse_written()

    def _put(self, name: str, part: np.ndarray) -> None:
        """Append ``part`` to column ``name``. The columns are filled in place, not kept as parts and joined
        at the end: each byte is touched once (fresh memory costs a page fault per 4 KiB here)."""
        array, at = self.arrays.get(name), self.filled.get(name, 0)
        if array is None or at + len(part) > len(array):
            grown = np.empty(max(self.rows, at + len(part), 3 * at // 2), dtype=part.dtype)
            if array is not None:
                grown[:at] = array[:at]
            self.arrays[name] = array = grown
        array[at : at + len(part)] = part
        self.filled[name] = at + len(part)

    def flush(self) -> None:
        """Parse the prices, then the rates, still waiting (CatalogError at the first that is not a number)."""
        self._parse_written()
        for name in self.rate_lines:
            self._parse_rates(name)

    def _parse_rates(self, name: str, *, learn: bool = False) -> None:
        """Parse the rates of ``name`` waiting; with ``learn``, remember the texts of those written as
        strings (no escape), each with the very units ``written_units`` gave it."""
        from provisioner.columns import RATES

        n = self.rate_rows[name]
        if not n:
            return
        joined = b"\n".join(self.rate_lines[name])
        units = written_units(joined, n, 9, self.origin, name, self.filled.get(RATES[name], 0), null=None)
        self.rate_lines[name].clear()
        self.rate_rows[name] = 0
        self._put(RATES[name], units)
        texts = self.rate_texts[name]
        for text, value in zip(joined.split(b"\n"), units.tolist(), strict=True) if learn else ():
            if text[:1] == b'"' and b"\\" not in text and len(texts) < MAX_RATE_TEXTS:
                texts.setdefault(text[1:-1].decode(), value)

    def _parse_written(self) -> None:
        from provisioner.columns import PRICE_RESTS, PRICES

        first, n = self.pending
        if not n:
            return
        for name, written in self.written.items():
            pico = written_units(b"\n".join(written), n, 12, self.origin, name, first, null=-1)
            sold = pico >= 0
            self._put(PRICES[name], np.where(sold, pico // PICO_PER_MICRO, pico))
            self._put(PRICE_RESTS[PRICES[name]], np.where(sold, pico % PICO_PER_MICRO, 0))
            written.clear()
        self.pending = (first + n, 0)

    def table(self, n: int) -> OfferTable:
        from provisioner.columns import OfferTable

        self.flush()
        values = (
            {name: array[: self.filled[name]] for name, array in self.arrays.items()}
            if self.arrays
            else table_of_nothing()
        )
        self.arrays = {}
        names = {name: _dictionary(list(seen)[1:]) for name, seen in self.seen.items()}  # [0]: None
        values[UNIQUE], names[UNIQUE] = _unique_codes(b"\n".join(self.unique), n, self.origin)
        self.unique.clear()
        values["key_rank"] = _key_rank(values, names, n)
        return OfferTable(values=values, names=names)


UNIQUE = "offer_id"
"""The identifier that usually differs on every row: kept as its written JSON (one line per offer) and
coded all at once by numpy at the end, not through a dictionary of a million str objects."""


def _lines(raw: tuple[Any, ...], origin: str, name: str, base: int) -> bytes:
    """The written JSON values of one column, a line each (a number, a string or null never holds a raw
    newline: a value that does is an object or array, refused)."""
    joined = b"\n".join(raw)
    if joined.count(b"\n") != len(raw) - 1:
        row = next(i for i, r in enumerate(raw) if b"\n" in bytes(r))
        kind = "a string" if name == UNIQUE else "a number"
        raise CatalogError(f"{origin}: offers[{base + row}].{name}: expected {kind}")
    return joined


MAX_RATE_TEXTS = 1000
MAX_LEARNED = 16


_MAX_ID_BYTES = 256


def _unique_codes(joined: bytes, n: int, origin: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, dictionary) of the ``n`` written JSON strings or nulls of ``joined``, in order of first use.

    numpy gathers the strings' bytes into one fixed-width array; when 64-bit hashes of them all differ
    (the usual case: an id per offer) each is its own entry, else ``np.unique`` finds the repeats. A
    string with an escape, or longer than _MAX_ID_BYTES, is decoded by msgspec instead."""
    if not n:
        return np.zeros(0, dtype=np.int32), np.array([], "S1")
    buf = np.frombuffer(joined + b"\n", dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    length = ends - starts
    first = buf[starts]
    string = first == ord('"')
    bad = ~string & ~((length == 4) & (first == ord("n")))  # msgspec has checked the JSON: n... is null
    if bad.any():
        raise CatalogError(f"{origin}: offers[{int(np.argmax(bad))}].{UNIQUE}: expected a string")
    rows = np.flatnonzero(string)
    width = int(length[rows].max(initial=2)) - 2
    codes = np.full(n, -1, dtype=np.int32)
    if width > _MAX_ID_BYTES or b"\\" in joined:
        decoded = [None if text == b"null" else msgspec.json.decode(text, type=str) for text in joined.split(b"\n")]
        seen: dict[str | None, int] = {None: -1}
        return _codes(tuple(decoded), seen), _dictionary(list(seen)[1:])
    if not len(rows):
        return codes, np.array([], "S1")
    padded = np.concatenate((buf, np.zeros(max(width, 1), dtype=np.uint8)))
    matrix = np.lib.stride_tricks.sliding_window_view(padded, max(width, 1))[starts[rows] + 1].copy()
    matrix *= np.arange(matrix.shape[1]) < (length[rows] - 2)[:, None]  # 0 from the closing quote on
    texts = matrix.view(f"S{matrix.shape[1]}").reshape(len(rows))
    hashes = np.sort(_hashes(matrix))  # (a plain sort: np.unique's hash table is ten times slower here)
    if not (hashes[1:] == hashes[:-1]).any():  # all different
        codes[rows] = np.arange(len(rows), dtype=np.int32)
        return codes, texts
    distinct, first_use, inverse = np.unique(texts, return_index=True, return_inverse=True)
    order = np.argsort(first_use, kind="stable")
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    codes[rows] = rank[inverse.reshape(-1)]
    return codes, distinct[order]


def _hashes(matrix: np.ndarray) -> np.ndarray:
    """A 64-bit FNV-1a-style hash of each row of bytes (zero padding included: rows of one width)."""
    words = np.ascontiguousarray(np.pad(matrix, ((0, 0), (0, -matrix.shape[1] % 8)))).view(np.uint64)
    hashes = np.full(len(matrix), 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            hashes ^= words[:, j]
            hashes *= np.uint64(0x100000001B3)
            hashes ^= hashes >> np.uint64(29)
    return hashes


def table_of_nothing() -> dict[str, np.ndarray]:
    """The columns of an empty catalog."""
    from provisioner.columns import OfferTable

    empty = OfferTable.from_offers([])
    return {name: column for name, column in empty.values.items() if name != "key_rank"}


def _codes(texts: tuple[str | None, ...], seen: dict[str | None, int]) -> np.ndarray:
    """Dictionary codes of ``texts``; values not in ``seen`` yet get the next codes, in order of first use."""
    if texts.count(None) == len(texts):  # an optional field nobody wrote
        return np.full(len(texts), -1, dtype=np.int32)
    try:
        return np.fromiter(list(map(seen.__getitem__, texts)), np.int32, len(texts))  # no new value: one pass
    except KeyError:
        start = len(seen) - 1  # seen holds None -> -1 besides the codes
        distinct = dict.fromkeys(texts)
        distinct.pop(None, None)
        if any(map(seen.__contains__, distinct)):
            new = [text for text in distinct if text not in seen]
        else:  # all new (offer ids): no Python loop
            new = list(distinct)
        seen.update(zip(new, range(start, start + len(new)), strict=True))
        if len(new) == len(texts):  # each one new and different: the next codes in order
            return np.arange(start, start + len(new), dtype=np.int32)
        return np.fromiter(list(map(seen.__getitem__, texts)), np.int32, len(texts))


def _dictionary(texts: list[str | None]) -> np.ndarray:
    """The UTF-8 bytes of ``texts`` (no None among them) as a dictionary array."""
    if not texts:
        return np.array([], "S1")
    try:
        return np.array(texts, dtype=np.bytes_)  # ASCII, the usual case: numpy encodes it at once
    except UnicodeEncodeError:
        return np.array([str(text).encode() for text in texts], dtype=np.bytes_)


def _members(texts: tuple[str, ...], index: dict[str, int]) -> np.ndarray:
    """Enum indexes of ``texts``; -1 for a text that is no member (``problems`` refuses it at its row)."""
    try:
        return np.fromiter(list(map(index.__getitem__, texts)), np.int8, len(texts))
    except KeyError:
        return np.array([index.get(text, -1) for text in texts], dtype=np.int8)


def _days(dates: tuple[dt.date | None, ...], days: dict[dt.date | None, int]) -> np.ndarray:
    """Days since 1970-01-01 of each date (-1: none)."""
    from provisioner.columns import EPOCH

    try:
        return np.fromiter(list(map(days.__getitem__, dates)), np.int32, len(dates))
    except KeyError:
        days.update({day: (day - EPOCH).days for day in dates if day is not None})
        return np.fromiter(list(map(days.__getitem__, dates)), np.int32, len(dates))


def _numbers(raw: tuple[Any, ...], dtype: str, origin: str, name: str, base: int) -> np.ndarray:
    try:
        return np.fromiter(raw, dtype=dtype, count=len(raw))  # a tuple: 3x faster than np.array; None -> NaN
    except OverflowError:
        row = next(i for i, x in enumerate(raw) if abs(x) > np.iinfo(dtype).max)
        raise CatalogError(f"{origin}: offers[{base + row}].{name}: out of range") from None


def _key_rank(values: dict[str, np.ndarray], names: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Each row's place in ``Offer.key`` order: (provider, region, zone, instance type + offer id)."""

    def text_rank(field: str) -> np.ndarray:
        codes = values[field]
        order = np.argsort(names[field], kind="stable") if len(names[field]) else np.zeros(0, dtype=np.int64)
        rank = np.empty(len(order) + 1, dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        rank[-1] = 0  # absent ("" in the key) sorts first
        return rank[np.where(codes < 0, -1, codes)]

    types, ids = names["instance_type"], names["offer_id"]
    type_codes, id_codes = values["instance_type"], values["offer_id"]
    typed = types[type_codes] if len(types) else np.full(n, b"", dtype="S1")
    with_id = ids[np.maximum(id_codes, 0)] if len(ids) else np.full(n, b"", dtype="S1")
    joined = np.strings.add(typed, np.where(id_codes >= 0, with_id, b""))  # instance type + offer id, as bytes
    by_name = np.argsort(joined, kind="stable")  # then the integer keys, stably: faster than one lexsort
    order = by_name[np.lexsort(tuple(text_rank(field)[by_name] for field in ("zone", "region", "provider")))]
    key_rank = np.empty(n, dtype=np.int64)
    key_rank[order] = np.arange(n)
    return key_rank


__all__ = ["UNIQUE", "Columns", "table_of_nothing"]
