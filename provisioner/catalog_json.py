"""A large JSON catalog straight into columns: no JSON tree of Python objects, no ``Offer`` model per offer.

The offers array is found without a pass over it (``_offers_span``: the rest of the file, with
``[]`` in its place, is decoded as the top level; where the layout is unusual, msgspec decodes the
whole file with the array kept as one raw text). The array's text is cut between offers about
every ``CHUNK_BYTES`` and each piece decoded into typed rows (unknown keys and wrong types refused;
prices and rates kept as their own text, or, once seen, rates as shared strings), which
``provisioner.offer_columns`` turns into columns at once; every piece decoding is what proves the
array valid JSON. A piece that does not decode sends the file down the row-exact path (every offer
found by msgspec, ``CHUNK`` at a time), so a bad value is always named at ``offers[i].field``. The
same vectorized rules that check a columnar file (``provisioner.columns.problems``) check the
result. What a catalog may hold is the ``Offer`` model's; docs/catalog.md says which path reads
which file. Raises CatalogError naming the file. Pure: bytes in, columns out (the garbage collector
is paused while it runs; a mapped file's pages already decoded are handed back as it goes).
"""

from __future__ import annotations

import datetime as dt
import mmap
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec

from provisioner.catalog_model import TableCatalog
from provisioner.collector import collector_paused
from provisioner.columns import ENUMS
from provisioner.errors import CatalogError
from provisioner.offer_columns import Columns

if TYPE_CHECKING:
    from provisioner.columns import OfferTable

    Fabric: TypeAlias = str
    Purchase: TypeAlias = str
    Bootstrap: TypeAlias = str
    Network: TypeAlias = str
else:  # msgspec checks the members and hands back one shared str object per member (no allocation)
    Fabric, Purchase, Bootstrap, Network = (
        Literal[tuple(str(member) for member in ENUMS[name])] for name in ("fabric", "purchase", "bootstrap", "network")
    )


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
    offer_id: msgspec.Raw = msgspec.Raw(b"null")  # a JSON string or null, coded in one go at the end
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


FIELDS: tuple[str, ...] = Row.__struct_fields__


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
    a cycle, and each of its passes would walk every object still alive (half the time at 10^5)."""
    with collector_paused():
        return _decode_table_catalog(data, origin)


def _decode_table_catalog(data: bytes | mmap.mmap, origin: str) -> TableCatalog:
    from pydantic import ValidationError

    from provisioner.columns import problems
    from provisioner.offer import ProviderInfo

    offers_at = _offers_span(data)
    head = _decode(data, Head, origin, "") if offers_at is None else offers_at[0]
    try:
        providers = {name: ProviderInfo.model_validate_json(bytes(raw)) for name, raw in head.providers.items()}
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise CatalogError(f"{origin}: providers.{path}: {first['msg']}") from None
    try:
        if offers_at is None:
            columns, offers = _columns_by_cuts(memoryview(head.offers), origin)
        else:
            text = memoryview(data)[offers_at[1] : offers_at[2]]
            columns, offers = _columns_by_cuts(text, origin, _dropper(data, offers_at[1]))
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


_OFFERS_KEY = re.compile(rb'"offers"\s*:\s*\[')
_HEAD_BYTES = 1 << 24
"""How far into the file the offers array is looked for (the providers come first, and are small)."""
_PLACEHOLDER = b"[]"


def _offers_span(data: bytes | mmap.mmap) -> tuple[Head, int, int] | None:
    """(the top level, start, end of the offers array's text) without reading the offers, or None.

    The usual file is ``{..., "offers": [...]}``: the array runs from the first ``"offers": [`` to the
    last ``]``, just before the final ``}``. The file with that span replaced by ``[]`` is decoded as
    the top level; when it decodes and its offers are that ``[]``, the ``[`` was outside any string,
    the key ``offers`` is the top level's last, and the span is its value exactly when the span is one
    valid JSON array, which ``_columns_by_cuts`` checks piece by piece. So the file is valid JSON as a
    whole with no separate pass over its offers (half a second at 10^6). None: decode it all."""
    found = _OFFERS_KEY.search(data, 0, min(len(data), _HEAD_BYTES))
    last = max(len(data) - 64, 0)
    tail = bytes(data[last:]).rstrip()
    body = tail[:-1].rstrip()
    if found is None or not tail.endswith(b"}") or not body.endswith(b"]"):
        return None
    start, end = found.end() - 1, last + len(body)  # the array's [ and one past its ]
    if end <= start:
        return None
    try:
        head = msgspec.json.decode(bytes(data[:start]) + _PLACEHOLDER + bytes(data[end:]), type=Head)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return (head, start, end) if bytes(head.offers) == _PLACEHOLDER else None


DROP_BYTES = 1 << 24


def _dropper(data: bytes | mmap.mmap, at: int) -> Callable[[int], None] | None:
    """For a memory-mapped file whose offers text starts at ``at``: a function that, told how far into
    that text the pieces have been decoded, lets go of the file's pages before that point. They stay in
    the page cache (read again if needed, e.g. by the row-exact path) but no longer count in this
    process's memory: at 10^6 offers the 755 MB of text is never resident at once. None where the data
    is not mapped or the platform has no madvise."""
    if not isinstance(data, mmap.mmap) or not hasattr(data, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    dropped = 0

    def drop(offset: int) -> None:
        nonlocal dropped
        upto = (at + offset) // mmap.PAGESIZE * mmap.PAGESIZE
        if upto > dropped:
            data.madvise(mmap.MADV_DONTNEED, dropped, upto - dropped)
            dropped = upto

    return drop


class _Recut(Exception):
    """A chunk of the fast path did not decode: read the file again offer by offer, to name the offer."""


def _columns_by_cuts(text: memoryview, origin: str, read: Callable[[int], None] | None = None) -> tuple[Columns, int]:
    """The fast path: the offers array's text cut, about every CHUNK_BYTES, where one offer ends and the
    next begins (``}``, a comma, ``{``), each piece decoded as an array of rows. Such a cut inside a
    string, or inside something nested, leaves its piece invalid JSON (a string or a bracket left open),
    so a piece that decodes holds whole offers only; any piece that does not raises _Recut. ``read`` is
    told, every DROP_BYTES, how far into ``text`` the pieces have been decoded."""
    columns, base, start, end = Columns(origin, FIELDS), 0, 1, len(text)
    told = 0
    if not bytes(text[:1]) == b"[":
        raise _Recut
    seen_rows, rebuilds = None, 0
    while start < end:
        cut = _BETWEEN_OFFERS.search(text, start + CHUNK_BYTES) if start + CHUNK_BYTES < end else None
        piece = b"".join((b"[", text[start : cut.start() + 1], b"]") if cut else (b"[", text[start:]))  # one copy
        try:
            rows = (seen_rows or _ROWS).decode(piece)
        except (msgspec.ValidationError, msgspec.DecodeError):
            if seen_rows is None:
                raise _Recut from None
            seen_rows = None  # a value not seen before, or a bad one: the plain rows tell which
            continue
        count = len(rows)
        if not base:  # as many offers as this piece's share of the text foretells, and a few more
            columns.rows = count * end // max(len(piece), 1) * 21 // 20 + 1024
        del piece
        columns.add(rows, base)
        base += count
        start = cut.end() - 1 if cut else end
        if read is not None and start - told >= DROP_BYTES:
            read(start)
            told = start
        if seen_rows is None and rebuilds < MAX_REBUILDS:
            seen_rows, rebuilds = _seen_rows(columns.seen, columns.rate_texts), rebuilds + 1
    return columns, base


SHARED = ("provider", "region", "gpu_model", "instance_type", "interruption_basis")
"""Text fields with few values: decoded, once seen, to one shared str per value."""
MAX_SHARED = 1000
MAX_REBUILDS = 8


def _seen_rows(
    seen: dict[str, dict[str | None, int]], rates: dict[str, dict[str, int]]
) -> msgspec.json.Decoder[Any] | None:
    """A decoder of rows whose SHARED fields take only the values in ``seen``, each decoded to the very
    str object ``seen`` holds: nothing allocated, its hash known, its lookup an identity check. So do
    the rates, where some were written as JSON strings: only the strings in ``rates`` (a rate written
    as a number, or any other, fails the piece). A value outside them fails the piece, which is then
    decoded by the plain rows (and ``seen`` grows). None when a field has more than MAX_SHARED values."""
    shared = {}
    for name in SHARED:
        values = tuple(value for value in seen[name] if value is not None)
        if not values or len(values) > MAX_SHARED:
            return None
        shared[name] = Literal.__getitem__(values)  # Literal[values], built at run time
    defaults = {}
    for name, texts in rates.items():
        if texts != {"0": 0}:  # some written as strings (the "0" is the default's)
            shared[name], defaults[name] = Literal.__getitem__(tuple(texts)), "0"
    fields = [
        (f.name, shared.get(f.name, f.type))
        if f.required
        else (f.name, shared.get(f.name, f.type), defaults.get(f.name, f.default))
        for f in msgspec.structs.fields(Row)
    ]
    row = msgspec.defstruct("SeenRow", fields, forbid_unknown_fields=True, gc=False)
    return msgspec.json.Decoder(list[row])  # type: ignore[valid-type]


def _columns_by_offer(data: bytes | mmap.mmap, origin: str) -> tuple[Columns, int]:
    """The row-exact path: every offer's raw text found by msgspec, CHUNK of them decoded at a time, so a
    bad value is reported as ``offers[i].field``."""
    doc = _decode(data, Document, origin, "")
    columns = Columns(origin, FIELDS)
    for base in range(0, len(doc.offers), CHUNK):
        chunk = b"[" + b",".join(doc.offers[base : base + CHUNK]) + b"]"
        try:
            rows = _decode(chunk, _ROWS, origin, "offers", base)
        except CatalogError:
            columns.flush()  # a bad price or rate in an earlier offer is named first
            raise
        columns.add(rows, base)
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
            place = f"{prefix}[{base + int(index.group(1))}]{place[index.end() :]}" if index else prefix
        message = _AT.sub("", text)
        field = place.rpartition(".")[2]
        if message.startswith("Invalid enum value") and field in ENUMS:  # the words of ``problems``
            message = f"must be one of {', '.join(str(member) for member in ENUMS[field])}"
        raise CatalogError(f"{origin}: {place + ': ' if place else ''}{message}") from None
    except msgspec.DecodeError as exc:
        raise CatalogError(f"{origin}: not valid JSON: {' '.join(str(exc).split())[:200]}") from None


def table_of(rows: list[Row], origin: str) -> OfferTable:
    """Columns of decoded rows (values unchecked: ``problems`` checks them)."""
    columns = Columns(origin, FIELDS)
    columns.add(rows, 0)
    return columns.table(len(rows))


__all__ = ["CHUNK", "Columns", "Document", "Row", "decode_table_catalog", "table_of"]
