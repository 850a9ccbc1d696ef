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
import re
from decimal import Decimal
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from provisioner.errors import CatalogError
from provisioner.money import split_price, to_nano

if TYPE_CHECKING:
    from provisioner.catalog import TableCatalog
    from provisioner.columns import OfferTable


class Row(msgspec.Struct, forbid_unknown_fields=True):
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
    fabric: str = "ethernet"
    fabric_gbps: float = 0.0
    price_per_hour_usd: msgspec.Raw = msgspec.Raw(b"null")  # the number's own text: parsed exactly below
    spot_price_per_hour_usd: msgspec.Raw = msgspec.Raw(b"null")
    billing_increment_s: int = 1
    billing_minimum_s: int = 0
    egress_usd_per_gb: Decimal = Decimal(0)
    ingress_usd_per_gb: Decimal = Decimal(0)
    disk_usd_per_gib_hour: Decimal = Decimal(0)
    spot_interruptions_per_node_hour: float | None = None
    reliability: float = 0.99
    max_nodes: int = 1
    min_nodes: int = 1
    purchase: str = "instance"
    bootstrap: str = "cloud_init"
    network: str = "private"
    how_to_obtain: str | None = None
    block_hours: int = 0
    block_start: str | None = None
    as_of: dt.date | None = None
    source: str | None = None
    available: bool = True


class Document(msgspec.Struct, forbid_unknown_fields=True):
    """The file's top level; each offer kept as its raw bytes until its chunk is decoded."""

    as_of: dt.date
    providers: dict[str, msgspec.Raw]
    offers: list[msgspec.Raw]
    origin: str | None = None


CHUNK = 10_000
"""Offers decoded into rows at a time: the rows of one chunk, not of the whole file, are alive at once."""
_AT = re.compile(r" - at `\$\.?(.*)`$")


def decode_table_catalog(data: bytes, origin: str) -> TableCatalog:
    """``data`` (a JSON catalog) as a ``TableCatalog``; CatalogError at the first bad value."""
    from pydantic import ValidationError

    from provisioner.catalog import TableCatalog
    from provisioner.columns import problems
    from provisioner.offer import ProviderInfo

    doc = _decode(data, Document, origin, "")
    try:
        providers = {name: ProviderInfo.model_validate_json(bytes(raw)) for name, raw in doc.providers.items()}
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise CatalogError(f"{origin}: providers.{path}: {first['msg']}") from None
    columns = Columns(origin)
    for base in range(0, len(doc.offers), CHUNK):
        chunk = b"[" + b",".join(doc.offers[base:base + CHUNK]) + b"]"
        columns.add(_decode(chunk, list[Row], origin, "offers", base), base)
    as_of, offers = doc.as_of, len(doc.offers)
    del doc, data  # the text and the raw offers: the columns hold everything now
    table = columns.table(offers)
    missing = sorted(set(table.dictionary("provider")) - set(providers))
    if missing:
        raise CatalogError(f"{origin}: offers from {', '.join(missing)} but no providers entry for them")
    for row, field, message in problems(table, frozenset(providers)):
        raise CatalogError(f"{origin}: offers[{row}].{field}: {message}")
    return TableCatalog(as_of=as_of, origin=origin, providers=providers, table=table)


def _decode(data: bytes, kind: Any, origin: str, prefix: str, base: int = 0) -> Any:
    """msgspec's typed decode; its error as a CatalogError at ``prefix[base + i].field``."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = _AT.search(text)
        place = where.group(1) if where else ""
        if prefix:
            index = re.match(r"\[(\d+)\]", place)
            place = f"{prefix}[{base + int(index.group(1))}]{place[index.end():]}" if index else prefix
        raise CatalogError(f"{origin}: {place + ': ' if place else ''}{_AT.sub('', text)}") from None
    except msgspec.DecodeError as exc:
        raise CatalogError(f"{origin}: not valid JSON: {' '.join(str(exc).split())[:200]}") from None


def table_of(rows: list[Row], origin: str) -> OfferTable:
    """Columns of decoded rows (values unchecked: ``problems`` checks them)."""
    columns = Columns(origin)
    columns.add(rows, 0)
    return columns.table(len(rows))


class Columns:
    """Offer columns built chunk by chunk; identifiers and texts share one dictionary per field."""

    def __init__(self, origin: str) -> None:
        from provisioner.columns import IDS, TEXTS

        self.origin = origin
        self.seen: dict[str, dict[str, int]] = {name: {} for name in (*IDS, *TEXTS)}
        self.parts: dict[str, list[np.ndarray]] = {}

    def add(self, rows: list[Row], base: int) -> None:
        """Append ``rows`` (offers ``base`` onwards) to the columns."""
        from provisioner.columns import ENUMS, EPOCH, NUMBERS, PRICE_RESTS, PRICES, RATES

        values: dict[str, np.ndarray] = {}

        def column(name: str) -> list:
            return list(map(attrgetter(name), rows))  # C-level: a getattr per row costs twice as much

        for name, seen in self.seen.items():
            values[name] = np.array([-1 if x is None else seen.setdefault(x, len(seen)) for x in column(name)],
                                    dtype=np.int32)
        for name, (dtype, *_rest) in NUMBERS.items():
            raw = column(name)
            if dtype == "float64":
                nullable = name == "spot_interruptions_per_node_hour"
                values[name] = np.array([np.nan if x is None else x for x in raw] if nullable else raw,
                                        dtype=np.float64)
            else:
                values[name] = _ints(raw, dtype, self.origin, name, base)
        for name, price_column in PRICES.items():
            values[price_column], values[PRICE_RESTS[price_column]] = _prices(column(name), self.origin, name, base)
        for name, rate_column in RATES.items():
            nano = {x: _nano(x) for x in set(column(name))}
            values[rate_column] = np.array(list(map(nano.__getitem__, column(name))), dtype=np.int64)
        for name, members in ENUMS.items():
            index = {str(member): i for i, member in enumerate(members)}
            values[name] = np.array([index.get(x, -1) for x in column(name)], dtype=np.int8)
        values["available"] = np.array(column("available"), dtype=bool)
        days = {d: -1 if d is None else (d - EPOCH).days for d in set(column("as_of"))}
        values["as_of_days"] = np.array(list(map(days.__getitem__, column("as_of"))), dtype=np.int32)
        for name, part in values.items():
            self.parts.setdefault(name, []).append(part)

    def table(self, n: int) -> OfferTable:
        from provisioner.columns import OfferTable

        values = {name: np.concatenate(parts) for name, parts in self.parts.items()} if self.parts else \
            table_of_nothing()
        names = {name: np.array([x.encode() for x in seen], dtype=np.bytes_) if seen else np.array([], "S1")
                 for name, seen in self.seen.items()}
        values["key_rank"] = _key_rank(values, names, n)
        return OfferTable(values=values, names=names)


def table_of_nothing() -> dict[str, np.ndarray]:
    """The columns of an empty catalog."""
    from provisioner.columns import OfferTable

    empty = OfferTable.from_offers([])
    return {name: column for name, column in empty.values.items() if name != "key_rank"}


def _ints(raw: list[int], dtype: str, origin: str, name: str, base: int) -> np.ndarray:
    try:
        return np.array(raw, dtype=dtype)
    except OverflowError:
        row = next(i for i, x in enumerate(raw) if abs(x) > np.iinfo(dtype).max)
        raise CatalogError(f"{origin}: offers[{base + row}].{name}: out of range") from None


_PLAIN = re.compile(rb"(?:0|[1-9][0-9]{0,9})(?:\.[0-9]{1,12})?")
"""A price written without sign or exponent, at most 10 integer digits and 12 decimals: parsed by numpy."""


def _prices(raw: list[msgspec.Raw], origin: str, name: str, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(whole micro-USD, pico-USD rest) per row from each price's JSON number or string; -1 where null. Plain
    decimals are split by numpy string operations, anything else through ``Decimal``."""
    text = np.array([bytes(r).strip(b'"') for r in raw], dtype="S32")  # "0.31" as a JSON string too (as the model)
    plain = np.array([_PLAIN.fullmatch(t) is not None for t in text.tolist()], dtype=bool)
    micro = np.full(len(raw), -1, dtype=np.int64)
    rest = np.zeros(len(raw), dtype=np.int64)
    if plain.any():
        whole, _, fraction = np.char.partition(text[plain], b".").transpose(1, 0)
        pico = np.char.ljust(fraction, 12, b"0").astype(np.int64)
        micro[plain] = whole.astype(np.int64) * 1_000_000 + pico // 1_000_000
        rest[plain] = pico % 1_000_000
    for i in np.flatnonzero(~plain & (text != b"null")).tolist():
        try:
            price = Decimal(bytes(raw[i]).strip(b'"').decode())
            if not price.is_finite() or abs(price) > 10**12:
                raise ValueError("must be a finite price")
            micro[i], rest[i] = split_price(price) if price > 0 else (-2, 0)  # -2: problems() refuses it
        except (ValueError, ArithmeticError, UnicodeDecodeError) as exc:
            detail = str(exc) if isinstance(exc, ValueError) and "decimal places" in str(exc) else "expected a number"
            raise CatalogError(f"{origin}: offers[{base + i}].{name}: {detail}") from None
    return micro, rest


def _nano(rate: Decimal) -> int:
    return to_nano(rate) if rate.is_finite() and abs(rate) < 10**9 else -1  # problems() refuses -1


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
    joined = [types[t] + (ids[o] if o >= 0 else b"") for t, o in zip(type_codes.tolist(), id_codes.tolist(),
                                                                        strict=True)]
    _, last = np.unique(np.array(joined, dtype=np.bytes_), return_inverse=True)
    order = np.lexsort((last.reshape(-1), text_rank("zone"), text_rank("region"), text_rank("provider")))
    key_rank = np.empty(n, dtype=np.int64)
    key_rank[order] = np.arange(n)
    return key_rank


__all__ = ["CHUNK", "Columns", "Document", "Row", "decode_table_catalog", "table_of"]
