"""Offers as columns: the one in-memory form the optimizer reads, and the columnar catalog file.

An ``OfferTable`` holds one numpy array per ``Offer`` field. Identifiers and texts are
dictionary-encoded (an int32 code per offer into a byte-string array of distinct values; -1 =
absent); money is integer (prices in micro-USD, rates in nano-USD; -1 = not sold); enums are
int8 indexes; dates are days since 1970-01-01 (-1 = none). ``key_rank`` is each offer's position
in ``Offer.key`` order (the final tie-break), computed once when the table is built.

The same table is built from ``Offer`` models (``from_offers``: JSON catalogs, provider answers)
or read straight from a ``.npz`` file (``load_table``: 10^6 offers in a fraction of a second).
``problems`` applies the catalog rules of ``provisioner.offer`` vectorized, so a columnar file is
held to the same rules as a JSON one: safe identifiers, finite bounded numbers, prices above zero.

Pure except ``save_table``/``load_table`` (file I/O). Importing this imports numpy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.costs import FABRICS
from provisioner.money import PICO_PER_MICRO, split_price, to_micro, to_nano
from provisioner.offer import (
    MAX_BILLING_S,
    MAX_BLOCK_HOURS,
    MAX_GPUS_PER_NODE,
    MAX_INTERRUPTIONS_PER_NODE_HOUR,
    MAX_NODES_PER_OFFER,
    MAX_PRICE_PER_HOUR_USD,
    MAX_RATE_USD,
    MAX_SIZE_GIB,
    Offer,
)

EPOCH = dt.date(1970, 1, 1)
ENUMS: dict[str, tuple[Any, ...]] = {
    "fabric": FABRICS,
    "purchase": tuple(Purchase),
    "bootstrap": tuple(Bootstrap),
    "network": tuple(Network),
}
IDS = ("provider", "instance_type", "region", "zone", "gpu_model", "offer_id")
"""Identifier fields: dictionary-encoded, every distinct value checked against SAFE_ID."""
TEXTS = ("interruption_basis", "how_to_obtain", "source", "block_start")
"""Free-text fields: dictionary-encoded UTF-8, one printable line each."""
OPTIONAL = frozenset({"zone", "offer_id", "how_to_obtain", "source", "block_start"})
MAX_TEXT_BYTES = 2000

# name -> (dtype, lowest, highest, lowest is exclusive); bounds from provisioner.offer.
NUMBERS: dict[str, tuple[str, float, float, bool]] = {
    "gpus": ("int32", 0, MAX_GPUS_PER_NODE, True),
    "vcpus": ("int32", 0, 1_000_000, True),
    "gpu_memory_gib": ("float64", 0, MAX_SIZE_GIB, True),
    "memory_gib": ("float64", 0, MAX_SIZE_GIB, True),
    "local_nvme_gib": ("float64", 0, MAX_SIZE_GIB, False),
    "fabric_gbps": ("float64", 0, 1_000_000, False),
    "billing_increment_s": ("int64", 0, MAX_BILLING_S, True),
    "billing_minimum_s": ("int64", 0, MAX_BILLING_S, False),
    "interruptions_per_node_hour": ("float64", 0, MAX_INTERRUPTIONS_PER_NODE_HOUR, False),
    "spot_interruptions_per_node_hour": ("float64", 0, MAX_INTERRUPTIONS_PER_NODE_HOUR, False),  # NaN: none
    "reliability": ("float64", 0, 1, False),
    "max_nodes": ("int32", 0, MAX_NODES_PER_OFFER, True),
    "min_nodes": ("int32", 0, MAX_NODES_PER_OFFER, True),
    "block_hours": ("int32", 0, MAX_BLOCK_HOURS, False),
}
PRICES = {"price_per_hour_usd": "price_micro", "spot_price_per_hour_usd": "spot_price_micro"}
"""USD per node-hour -> int64 whole micro-USD column (rounded down); -1 = not sold that way, else
0..MAX_PRICE (0 only with a remainder: a price under a micro-dollar)."""
PRICE_RESTS = {"price_micro": "price_rest", "spot_price_micro": "spot_price_rest"}
"""The pico-USD of each price below its whole micro-USD (0..999,999): prices are exact to 12 places."""
RATES = {"egress_usd_per_gb": "egress_nano", "ingress_usd_per_gb": "ingress_nano", "disk_usd_per_gib_hour": "disk_nano"}
"""USD per GB / GiB-hour -> int64 nano-USD column, 0..MAX_RATE."""
MAX_PRICE_MICRO = to_micro(MAX_PRICE_PER_HOUR_USD)
MAX_RATE_NANO = to_nano(MAX_RATE_USD)
FORMAT = "provisioner.offers/1"


@dataclass(frozen=True, eq=False)
class OfferTable:
    """``values[name]`` is one column (row ``i`` = offer ``i``); ``names[field]`` the dictionary of an
    identifier or text field (``values[field]`` holds its codes)."""

    values: dict[str, np.ndarray]
    names: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.values["gpus"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def text(self, field: str, row: int) -> str | None:
        """The decoded identifier or text of ``field`` at ``row`` (None when absent)."""
        code = int(self.values[field][row])
        return None if code < 0 else self.names[field][code].decode("utf-8")

    def dictionary(self, field: str) -> tuple[str, ...]:
        """Every distinct value of a (small) identifier field, decoded, in code order."""
        return tuple(value.decode("utf-8") for value in self.names[field].tolist())

    def key(self, row: int) -> tuple[str, str, str, str]:
        """``Offer.key`` of one row."""
        return (
            self.text("provider", row) or "",
            self.text("region", row) or "",
            self.text("zone", row) or "",
            (self.text("instance_type", row) or "") + (self.text("offer_id", row) or ""),
        )

    def offer(self, row: int) -> Offer:
        """Row ``row`` as an ``Offer`` model (validated again: a table never yields an invalid offer)."""
        v = self.values
        data: dict[str, Any] = {name: self.text(name, row) for name in (*IDS, *TEXTS)}
        for name in NUMBERS:
            value = v[name][row].item()
            data[name] = None if value != value else value  # NaN (spot_interruptions_per_node_hour): none
        for name, column in PRICES.items():
            micro = int(v[column][row])
            data[name] = None if micro < 0 else _decimal(micro * PICO_PER_MICRO + int(v[PRICE_RESTS[column]][row]), 12)
        for name, column in RATES.items():
            data[name] = _decimal(int(v[column][row]), 9)
        for name, members in ENUMS.items():
            data[name] = members[int(v[name][row])]
        data["available"] = bool(v["available"][row])
        days = int(v["as_of_days"][row])
        data["as_of"] = None if days < 0 else EPOCH + dt.timedelta(days=days)
        return Offer.model_validate({k: val for k, val in data.items() if val is not None})

    @classmethod
    def from_offers(cls, offers: Sequence[Offer]) -> OfferTable:
        """Columns of validated ``Offer`` models (linear, plus one sort of the keys for ``key_rank``)."""
        values: dict[str, np.ndarray] = {}
        names: dict[str, np.ndarray] = {}
        for name in (*IDS, *TEXTS):
            names[name], values[name] = _encode([getattr(o, name) for o in offers])
        for name, (dtype, *_rest) in NUMBERS.items():
            raw = [getattr(o, name) for o in offers]
            values[name] = np.array([np.nan if x is None else x for x in raw], dtype=dtype)
        for name, column in PRICES.items():
            parts = [(-1, 0) if (p := getattr(o, name)) is None else split_price(p) for o in offers]
            values[column] = np.array([micro for micro, _ in parts], dtype=np.int64).reshape(len(offers))
            values[PRICE_RESTS[column]] = np.array([rest for _, rest in parts], dtype=np.int64).reshape(len(offers))
        for name, column in RATES.items():
            values[column] = np.array([to_nano(getattr(o, name)) for o in offers], dtype=np.int64)
        for name, members in ENUMS.items():
            index = {member: i for i, member in enumerate(members)}
            values[name] = np.array([index[getattr(o, name)] for o in offers], dtype=np.int8)
        values["available"] = np.array([o.available for o in offers], dtype=bool)
        values["as_of_days"] = np.array(
            [-1 if o.as_of is None else (o.as_of - EPOCH).days for o in offers], dtype=np.int32
        )
        key_rank = np.empty(len(offers), dtype=np.int64)
        key_rank[sorted(range(len(offers)), key=lambda i: offers[i].key)] = np.arange(len(offers))
        values["key_rank"] = key_rank
        return cls(values=values, names=names)


def _decimal(units: int, places: int) -> Decimal:
    """``units`` of 10^-places USD as a plain Decimal (``0.31``, ``2``, ``0.000136986``; never ``0E-9``)."""
    value = Decimal(units).scaleb(-places)
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


def _encode(values: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    seen: dict[str, int] = {}
    codes = np.array([-1 if v is None else seen.setdefault(v, len(seen)) for v in values], dtype=np.int32)
    dictionary = np.array([v.encode("utf-8") for v in seen], dtype=np.bytes_) if seen else np.array([], "S1")
    return dictionary, codes


FLOAT_COLUMNS = frozenset(name for name, (dtype, *_rest) in NUMBERS.items() if dtype == "float64")
COLUMNS: tuple[str, ...] = (
    *IDS,
    *TEXTS,
    *NUMBERS,
    *PRICES.values(),
    *PRICE_RESTS.values(),
    *RATES.values(),
    *ENUMS,
    "available",
    "as_of_days",
    "key_rank",
)

# --- the catalog rules, vectorized --------------------------------------------------------

_ID_FIRST = np.zeros(256, dtype=bool)
_ID_REST = np.zeros(256, dtype=bool)
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789":
    _ID_FIRST[_c] = _ID_REST[_c] = True
for _c in b"._:/+@-":
    _ID_REST[_c] = True
_ID_BYTES_OR_PADDING = bytes(np.flatnonzero(_ID_REST).tolist()) + b"\0"


def _bytes_matrix(dictionary: np.ndarray) -> np.ndarray:
    width = max(dictionary.dtype.itemsize, 1)
    return np.frombuffer(np.ascontiguousarray(dictionary, dtype=f"S{width}").tobytes(), dtype=np.uint8).reshape(
        len(dictionary), width
    )


def unsafe_ids(dictionary: np.ndarray) -> np.ndarray:
    """Mask of dictionary entries that break SAFE_ID (``provisioner.offer``), vectorized over bytes."""
    if not len(dictionary):
        return np.zeros(0, dtype=bool)
    m = _bytes_matrix(dictionary)
    if _all_safe(m):  # the usual answer, from a count of the bytes used (10^5 offer ids: ~1 ms, not ~15)
        return np.zeros(len(m), dtype=bool)
    filled = m != 0
    length = filled.sum(axis=1)
    # a NUL inside a value (not trailing padding) is a control character
    holes = (filled[:, 1:] & ~filled[:, :-1]).any(axis=1) if m.shape[1] > 1 else np.zeros(len(m), dtype=bool)
    rest_ok = (_ID_REST[m] | ~filled).all(axis=1)
    bad: np.ndarray = ~(_ID_FIRST[m[:, 0]] & rest_ok & (length >= 1) & (length <= 128) & ~holes)
    return bad


def _all_safe(m: np.ndarray) -> bool:
    """Whether every row of the byte matrix ``m`` (values NUL-padded on the right) is a SAFE_ID: its
    first byte may start one, every byte is one a SAFE_ID may hold or padding, no padding comes
    before a value byte, and no value is over 128 bytes. False means "look row by row"."""
    width = m.shape[1]
    if width > 128 or not _ID_FIRST[m[:, 0]].all() or m.tobytes().translate(None, _ID_BYTES_OR_PADDING):
        return False
    filled = m.ravel() != 0
    value_after_padding = np.flatnonzero(filled[1:] > filled[:-1]) + 1  # where a value byte follows a NUL
    return not (value_after_padding % width).any()  # ... other than at the start of the next row


def unsafe_texts(dictionary: np.ndarray) -> np.ndarray:
    """Mask of free-text entries with a control character (or over MAX_TEXT_BYTES, or not UTF-8)."""
    bad = np.zeros(len(dictionary), dtype=bool)
    for i, raw in enumerate(dictionary.tolist()):  # texts are few and short (bases, how-to notes)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad[i] = True
            continue
        bad[i] = len(raw) > MAX_TEXT_BYTES or not text.isprintable()
    return bad


def problems(table: OfferTable, providers: set[str] | frozenset[str]) -> Iterator[tuple[int, str, str]]:
    """``(row, field, message)`` for rows breaking a catalog rule, field by field (first bad row each).

    The same rules ``Offer`` enforces on a JSON catalog, applied to whole columns.
    """
    n = len(table)
    v = table.values
    for name in COLUMNS:
        if name not in v:
            yield 0, name, "column missing"
            return
        if len(v[name]) != n:
            yield 0, name, f"column has {len(v[name])} rows, not {n}"
            return
        if v[name].dtype.kind == "f" and name not in FLOAT_COLUMNS:  # codes, counts, money: whole numbers
            yield 0, name, "column holds fractions where whole numbers belong"
            return
    for name in (*IDS, *TEXTS):
        codes, dictionary = v[name], table.names.get(name, np.array([], "S1"))
        lowest_code = -1 if name in OPTIONAL else 0
        bad = (
            None
            if _within(codes, lowest_code, len(dictionary) - 1)
            else ((codes < lowest_code) | (codes >= len(dictionary)))
        )
        if bad is not None and bad.any():
            yield int(np.argmax(bad)), name, "missing" if name not in OPTIONAL else "bad dictionary code"
            continue
        bad_entries = unsafe_ids(dictionary) if name in IDS else unsafe_texts(dictionary)
        if name == "provider":
            bad_entries |= np.array(
                [p.decode("utf-8", "replace") not in providers for p in dictionary.tolist()], dtype=bool
            )
        if bad_entries.any():
            row = int(np.argmax(bad_entries[np.maximum(codes, 0)] & (codes >= 0)))
            rule = (
                "no providers entry for this provider"
                if name == "provider" and not unsafe_ids(dictionary[codes[row] : codes[row] + 1]).any()
                else (
                    "must match SAFE_ID (letters, digits and ._:/+@-; no spaces or control characters)"
                    if name in IDS
                    else "must be one printable line"
                )
            )
            yield row, name, rule
    for name, (_dtype, low, high, exclusive) in NUMBERS.items():
        col = v[name]
        if _within(col, low, high, exclusive=exclusive, nan=name == "spot_interruptions_per_node_hour"):
            continue
        with np.errstate(invalid="ignore"):
            out = (col <= low) if exclusive else (col < low)
            out |= col > high
        if col.dtype.kind == "f":
            out |= ~np.isfinite(col) & ~(np.isnan(col) & (name == "spot_interruptions_per_node_hour"))
        if out.any():
            yield int(np.argmax(out)), name, f"must be {'>' if exclusive else '>='} {low:g} and <= {high:g}"
    for name, column in PRICES.items():
        col, rest = v[column], v[PRICE_RESTS[column]]
        if _within(rest, 0, 0) and _within(col, -1, MAX_PRICE_MICRO) and not (col == 0).any():
            continue  # whole micro-USD prices, each absent (-1) or above zero
        out = ((col != -1) & (col < 0)) | (col > MAX_PRICE_MICRO) | (rest < 0) | (rest >= PICO_PER_MICRO)
        out |= ((col == -1) & (rest != 0)) | ((col == 0) & (rest == 0)) | ((col == MAX_PRICE_MICRO) & (rest != 0))
        if out.any():
            yield int(np.argmax(out)), name, f"must be above 0 and at most {MAX_PRICE_PER_HOUR_USD} USD (or absent)"
    quoted = np.isin(v["purchase"], [ENUMS["purchase"].index(p) for p in Purchase if p.quote_only])
    spot_quote = quoted & (v["spot_price_micro"] >= 0)
    if spot_quote.any():
        yield int(np.argmax(spot_quote)), "spot_price_per_hour_usd", "a reservation or sales product has no spot price"
    unsold = (v["price_micro"] < 0) & (v["spot_price_micro"] < 0)
    if unsold.any():
        yield int(np.argmax(unsold)), "price_per_hour_usd", "an offer needs an on-demand or a spot price"
    for name, column in RATES.items():
        if _within(v[column], 0, MAX_RATE_NANO):
            continue
        out = (v[column] < 0) | (v[column] > MAX_RATE_NANO)
        if out.any():
            yield int(np.argmax(out)), name, f"must be >= 0 and at most {MAX_RATE_USD} USD"
    for name, members in ENUMS.items():
        if _within(v[name], 0, len(members) - 1):
            continue
        out = (v[name] < 0) | (v[name] >= len(members))
        if out.any():
            yield int(np.argmax(out)), name, f"must be one of {', '.join(str(m) for m in members)}"
    short = v["min_nodes"] > v["max_nodes"]
    if short.any():
        yield int(np.argmax(short)), "min_nodes", "must be <= max_nodes"
    rank = v["key_rank"]
    if n and (
        rank.dtype.kind not in "iu" or rank.min() < 0 or rank.max() >= n or np.bincount(rank, minlength=n).max() != 1
    ):
        yield 0, "key_rank", "must be a permutation of the rows"


def _within(column: np.ndarray, low: float, high: float, *, exclusive: bool = False, nan: bool = False) -> bool:
    """Whether every value of ``column`` is in [low, high] (above ``low`` when ``exclusive``), NaN only
    where ``nan`` allows it, answered from the column's least and greatest values. False means "not
    known": the caller looks value by value (NaN and empty columns always come back False)."""
    if not len(column):
        return False
    least, greatest = (np.fmin.reduce(column), np.fmax.reduce(column)) if nan else (column.min(), column.max())
    return bool((least > low if exclusive else least >= low) and greatest <= high)


__all__ = ["COLUMNS", "FORMAT", "OfferTable", "problems", "unsafe_ids"]
