"""A large JSON catalog straight into columns: no JSON tree of Python objects, no ``Offer`` model per offer.

msgspec decodes the file's top level with every offer left as its raw bytes, then ``CHUNK``
offers at a time into typed rows (unknown keys and wrong types refused with their location;
prices kept as their own text and split exactly by numpy, rates as exact ``Decimal``); each
chunk becomes columns at once, sharing one dictionary per identifier field. The same vectorized
rules that check a columnar file (``provisioner.columns.problems``) check the result. What a
catalog may hold is the ``Offer`` model's; docs/catalog.md says which path reads which file.
Raises CatalogError naming the file and ``offers[i].field``. Pure: bytes in, columns out.
"""

from __future__ import annotations

import datetime as dt
import gc
import mmap
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec
import numpy as np
from msgspec.structs import astuple

from provisioner.columns import ENUMS
from provisioner.errors import CatalogError
from provisioner.money import PICO_PER_MICRO, split_price, to_nano

if TYPE_CHECKING:
    from provisioner.catalog import TableCatalog
    from provisioner.columns import OfferTable

    Fabric: TypeAlias = str
    Purchase: TypeAlias = str
    Bootstrap: TypeAlias = str
    Network: TypeAlias = str
else:  # msgspec checks the members and hands back one shared str object per member (no allocation)
    Fabric, Purchase, Bootstrap, Network = (Literal[tuple(str(member) for member in ENUMS[name])]
                                            for name in ("fabric", "purchase", "bootstrap", "network"))


class Row(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One offer as written; defaults are ``Offer``'s."""

    provider: str
    instance_type: str
    region: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: float
    vcpus: int
    memory_gib: float
    interruptions_per_node_hour: float
    interruption_basis: str
    zone: str | None = None
    offer_id: str | None = None
    local_nvme_gib: float = 0.0
    fabric: Fabric = "ethernet"
    fabric_gbps: float = 0.0
    price_per_hour_usd: msgspec.Raw = msgspec.Raw(b"null")  # the number's own text: parsed exactly below
    spot_price_per_hour_usd: msgspec.Raw = msgspec.Raw(b"null")
    billing_increment_s: int = 1
    billing_minimum_s: int = 0
    egress_usd_per_gb: msgspec.Raw = msgspec.Raw(b"0")
    ingress_usd_per_gb: msgspec.Raw = msgspec.Raw(b"0")
    disk_usd_per_gib_hour: msgspec.Raw = msgspec.Raw(b"0")
    spot_interruptions_per_node_hour: float | None = None
    reliability: float = 0.99
    max_nodes: int = 1
    min_nodes: int = 1
    purchase: Purchase = "instance"
    bootstrap: Bootstrap = "cloud_init"
    network: Network = "private"
    how_to_obtain: str | None = None
    block_hours: int = 0
    block_start: str | None = None
    as_of: dt.date | None = None
    source: str | None = None
    available: bool = True


class Document(msgspec.Struct, forbid_unknown_fields=True):
    """The file's top level, each offer kept as its raw bytes (the row-exact path, ``_columns_by_offer``)."""

    as_of: dt.date
    providers: dict[str, msgspec.Raw]
    offers: list[msgspec.Raw]
    origin: str | None = None


class Head(msgspec.Struct, forbid_unknown_fields=True):
    """The file's top level with the offers array kept as one raw text (checked as JSON, not cut up)."""

    as_of: dt.date
    providers: dict[str, msgspec.Raw]
    offers: msgspec.Raw
    origin: str | None = None


CHUNK = 1000
"""Offers per chunk on the row-exact path: the rows of one chunk, not of the whole file, are alive at once."""
CHUNK_BYTES = 1 << 19
"""Bytes of offers text per chunk on the fast path (~700 offers): small enough to stay in the CPU cache."""
_AT = re.compile(r" - at `\$\.?(.*)`$")
_BETWEEN_OFFERS = re.compile(rb"\}\s*,\s*\{")


def decode_table_catalog(data: bytes | mmap.mmap, origin: str) -> TableCatalog:
    """``data`` (a JSON catalog) as a ``TableCatalog``; CatalogError at the first bad value.

    The cyclic garbage collector is paused meanwhile: decoding allocates millions of objects, none in
    a cycle, and each of its passes would walk every raw offer still alive (half the time at 10^5)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode_table_catalog(data, origin)
    finally:
        if enabled:
            gc.enable()


def _decode_table_catalog(data: bytes | mmap.mmap, origin: str) -> TableCatalog:
    from pydantic import ValidationError

    from provisioner.catalog import TableCatalog
    from provisioner.columns import problems
    from provisioner.offer import ProviderInfo

    head = _decode(data, Head, origin, "")
    try:
        providers = {name: ProviderInfo.model_validate_json(bytes(raw)) for name, raw in head.providers.items()}
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise CatalogError(f"{origin}: providers.{path}: {first['msg']}") from None
    try:
        columns, offers = _columns_by_cuts(memoryview(head.offers), origin)
    except _Recut:
        columns, offers = _columns_by_offer(data, origin)
    as_of = head.as_of
    del head, data  # the text: the columns hold everything now
    table = columns.table(offers)
    missing = sorted(set(table.dictionary("provider")) - set(providers))
    if missing:
        raise CatalogError(f"{origin}: offers from {', '.join(missing)} but no providers entry for them")
    for row, field, message in problems(table, frozenset(providers)):
        raise CatalogError(f"{origin}: offers[{row}].{field}: {message}")
    return TableCatalog(as_of=as_of, origin=origin, providers=providers, table=table)


class _Recut(Exception):
    """A chunk of the fast path did not decode: read the file again offer by offer, to name the offer."""


def _columns_by_cuts(text: memoryview, origin: str) -> tuple[Columns, int]:
    """The fast path: the offers array's text cut, about every CHUNK_BYTES, where one offer ends and the
    next begins (``}``, a comma, ``{``), each piece decoded as an array of rows. Such a cut inside a
    string, or inside something nested, leaves its piece invalid JSON (a string or a bracket left open),
    so a piece that decodes holds whole offers only; any piece that does not raises _Recut."""
    columns, base, start, end = Columns(origin), 0, 1, len(text)
    if not bytes(text[:1]) == b"[":
        raise _Recut
    while start < end:
        cut = _BETWEEN_OFFERS.search(text, start + CHUNK_BYTES) if start + CHUNK_BYTES < end else None
        piece = b"[" + text[start:cut.start() + 1] + b"]" if cut else b"[" + text[start:]  # the last has its "]"
        try:
            rows = _ROWS.decode(piece)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise _Recut from None
        del piece
        count = len(rows)
        columns.add(rows, base)
        base += count
        start = cut.end() - 1 if cut else end
    return columns, base


def _columns_by_offer(data: bytes | mmap.mmap, origin: str) -> tuple[Columns, int]:
    """The row-exact path: every offer's raw text found by msgspec, CHUNK of them decoded at a time, so a
    bad value is reported as ``offers[i].field``."""
    doc = _decode(data, Document, origin, "")
    columns = Columns(origin)
    for base in range(0, len(doc.offers), CHUNK):
        chunk = b"[" + b",".join(doc.offers[base:base + CHUNK]) + b"]"
        columns.add(_decode(chunk, _ROWS, origin, "offers", base), base)
    return columns, len(doc.offers)


_ROWS = msgspec.json.Decoder(list[Row])


def _decode(data: bytes | mmap.mmap, kind: Any, origin: str, prefix: str, base: int = 0) -> Any:
    """msgspec's typed decode (``kind``: a type or a Decoder); its error as a CatalogError at
    ``prefix[base + i].field``."""
    try:
        return kind.decode(data) if isinstance(kind, msgspec.json.Decoder) else msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = _AT.search(text)
        place = where.group(1) if where else ""
        if prefix:
            index = re.match(r"\[(\d+)\]", place)
            place = f"{prefix}[{base + int(index.group(1))}]{place[index.end():]}" if index else prefix
        message = _AT.sub("", text)
        field = place.rpartition(".")[2]
        if message.startswith("Invalid enum value") and field in ENUMS:  # the words of ``problems``
            message = f"must be one of {', '.join(str(member) for member in ENUMS[field])}"
        raise CatalogError(f"{origin}: {place + ': ' if place else ''}{message}") from None
    except msgspec.DecodeError as exc:
        raise CatalogError(f"{origin}: not valid JSON: {' '.join(str(exc).split())[:200]}") from None


def table_of(rows: list[Row], origin: str) -> OfferTable:
    """Columns of decoded rows (values unchecked: ``problems`` checks them)."""
    columns = Columns(origin)
    columns.add(rows, 0)
    return columns.table(len(rows))


FIELDS: tuple[str, ...] = Row.__struct_fields__


class Columns:
    """Offer columns built chunk by chunk; identifiers and texts share one dictionary per field.

    Each chunk's rows become one tuple of values per field (``astuple`` and ``zip``, both in C), and
    each column is made from its tuple by numpy or a C-level ``map``: no Python code runs per value.
    Small chunks stay in the CPU cache, which is most of the speed. Prices and rates are parsed by
    numpy once ``BATCH`` rows of them have been gathered, so its per-call cost is paid rarely."""

    BATCH = 65_536

    def __init__(self, origin: str) -> None:
        from provisioner.columns import ENUMS, IDS, PRICES, RATES, TEXTS

        self.origin = origin
        self.seen: dict[str, dict[str | None, int]] = {name: {None: -1} for name in (*IDS, *TEXTS) if name != UNIQUE}
        self.unique: list[tuple[str | None, ...]] = []  # UNIQUE's values, chunk by chunk
        self.enums = {name: {str(member): i for i, member in enumerate(members)} for name, members in ENUMS.items()}
        self.days: dict[dt.date | None, int] = {None: -1}
        self.parts: dict[str, list[np.ndarray]] = {}
        self.written: dict[str, list[bytes]] = {name: [] for name in (*PRICES, *RATES)}
        self.pending = (0, 0)  # (first row, rows) whose prices and rates wait in self.written

    def add(self, rows: list[Row], base: int) -> None:
        """Append ``rows`` (offers ``base`` onwards) to the columns."""
        from provisioner.columns import NUMBERS

        n = len(rows)
        if not n:
            return
        column = dict(zip(FIELDS, zip(*map(astuple, rows), strict=True), strict=True))
        del rows
        values: dict[str, np.ndarray] = {}
        for name, seen in self.seen.items():
            values[name] = _codes(column[name], seen)
        self.unique.append(column[UNIQUE])
        for name, (dtype, *_rest) in NUMBERS.items():
            values[name] = _numbers(column[name], dtype, self.origin, name, base)  # None -> NaN
        for name, index in self.enums.items():
            values[name] = _members(column[name], index)
        values["available"] = np.fromiter(column["available"], dtype=bool, count=n)
        values["as_of_days"] = _days(column["as_of"], self.days)
        for name, part in values.items():
            self.parts.setdefault(name, []).append(part)
        for name, written in self.written.items():
            joined = b"\n".join(column[name])  # a number or a JSON string never holds a raw newline
            if joined.count(b"\n") != n - 1:
                row = next(i for i, r in enumerate(column[name]) if b"\n" in bytes(r))
                raise CatalogError(f"{self.origin}: offers[{base + row}].{name}: expected a number")
            written.append(joined)
        first, pending = self.pending
        self.pending = (first, pending + n)
        if pending + n >= self.BATCH:
            self._parse_written()

    def _parse_written(self) -> None:
        from provisioner.columns import PRICE_RESTS, PRICES, RATES

        first, n = self.pending
        if not n:
            return
        columns = {name: _units(b"\n".join(written), n, 12 if name in PRICES else 9, self.origin, name, first,
                                null=-1 if name in PRICES else None)
                   for name, written in self.written.items()}
        for name, pico in columns.items():
            if name in PRICES:
                sold = pico >= 0
                self.parts.setdefault(PRICES[name], []).append(np.where(sold, pico // PICO_PER_MICRO, pico))
                self.parts.setdefault(PRICE_RESTS[PRICES[name]], []).append(np.where(sold, pico % PICO_PER_MICRO, 0))
            else:
                self.parts.setdefault(RATES[name], []).append(pico)
        for written in self.written.values():
            written.clear()
        self.pending = (first + n, 0)

    def table(self, n: int) -> OfferTable:
        from provisioner.columns import OfferTable

        self._parse_written()
        values = {name: np.concatenate(parts) for name, parts in self.parts.items()} if self.parts else \
            table_of_nothing()
        names = {name: _dictionary(list(seen)[1:]) for name, seen in self.seen.items()}  # [0]: None
        values[UNIQUE], names[UNIQUE] = _unique_codes(self.unique)
        values["key_rank"] = _key_rank(values, names, n)
        return OfferTable(values=values, names=names)


UNIQUE = "offer_id"
"""The identifier that usually differs on every row: kept as written until the end, then coded all at
once (a dictionary of a million ids, grown chunk by chunk, costs more than the rest of the columns)."""


def _unique_codes(chunks: list[tuple[str | None, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, dictionary) of every value in ``chunks``, in order of first use."""
    texts = [text for chunk in chunks for text in chunk] if len(chunks) != 1 else list(chunks[0])
    chunks.clear()
    distinct = set(texts)
    if len(distinct) == len(texts) and None not in distinct:  # each row its own id: codes are the rows
        return np.arange(len(texts), dtype=np.int32), _dictionary(texts)
    seen: dict[str | None, int] = {None: -1}
    return _codes(tuple(texts), seen), _dictionary(list(seen)[1:])


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


_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[ord("0"):ord("9") + 1] = True
_WIDTH = 32
"""Bytes of each written number that numpy looks at; a plain one is at most 6 + 1 + 12 (+ 2 quotes)."""
_WHOLE_DIGITS = 6
"""Digits before the point of a plain number: 10^6 USD in pico-USD still fits an int64 (and is out of range)."""
_OUT_OF_RANGE = -2
"""A price or rate no offer may have (negative, zero-or-less price, 10^6 USD and more, not finite):
``problems`` refuses it at its row."""


def _units(joined: bytes, n: int, places: int, origin: str, name: str, base: int, *, null: int | None) -> np.ndarray:
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
    m = np.lib.stride_tricks.sliding_window_view(buf, _WIDTH)[starts, :width]
    quoted = (m[:, 0] == ord('"')).astype(np.int64) if width else np.zeros(n, dtype=np.int64)
    inside = (np.arange(width) >= quoted[:, None]) & (np.arange(width) < (length - quoted)[:, None])
    digit = _DIGIT[m] & inside
    dot = (m == ord(".")) & inside
    dots = dot.sum(axis=1)
    size = length - 2 * quoted  # the number's own characters
    point = np.where(dots == 1, np.argmax(dot, axis=1) - quoted, size)
    decimals = np.where(dots == 1, size - point - 1, 0)
    first = m[np.arange(n), np.minimum(quoted, max(width - 1, 0))] if width else np.zeros(n, dtype=np.uint8)
    plain = (length <= _WIDTH) & (digit.sum(axis=1) + dots == size) & (dots <= 1) & (point >= 1) \
        & (point <= _WHOLE_DIGITS) & ((dots == 0) | (decimals >= 1)) & (decimals <= places) \
        & ((first != ord("0")) | (point == 1))  # 01.5 is read by Decimal
    units = np.zeros(n, dtype=np.int64)
    for j in range(width):  # every digit, left to right: at most 6 + 12 of them, so int64 holds them all
        units = np.where(digit[:, j], units * 10 + (m[:, j].astype(np.int64) - ord("0")), units)
    units *= _POWERS[np.clip(places - decimals, 0, places)]
    if null is not None and width >= 4:  # JSON null (an absent price is written as one)
        nulls = (length == 4) & (m[:, :4] == np.frombuffer(b"null", dtype=np.uint8)).all(axis=1)
        units[nulls] = null
        plain |= nulls
    for i in np.flatnonzero(~plain).tolist():
        units[i] = _exotic(joined[starts[i]:ends[i]].strip(b'"'), places, origin, f"offers[{base + i}].{name}")
    return units


_POWERS = 10 ** np.arange(13, dtype=np.int64)


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
    order = np.lexsort((joined, text_rank("zone"), text_rank("region"), text_rank("provider")))
    key_rank = np.empty(n, dtype=np.int64)
    key_rank[order] = np.arange(n)
    return key_rank


__all__ = ["CHUNK", "Columns", "Document", "Row", "decode_table_catalog", "table_of"]
