"""Rates written as JSON strings are decoded, after the first piece, as shared str objects and mapped to
the units the exact parser gave each text the first time (provisioner.offer_columns.Columns): every row
still equals a Decimal of its written text, however the pieces fall, strings or numbers."""

from __future__ import annotations

import json
import typing
from decimal import Decimal
from typing import Any, Literal

import msgspec
import pytest

import provisioner.catalog_json as catalog_json
from provisioner.catalog import BUNDLED_FILE
from provisioner.catalog_json import decode_table_catalog
from provisioner.errors import CatalogError


def _catalog(rates: list[tuple[str, str, str]]) -> bytes:
    """The bundled catalog's first offer once per row of (egress, ingress, disk), each written as given."""
    doc = json.loads(BUNDLED_FILE.read_text())
    first = {
        k: v
        for k, v in doc["offers"][0].items()
        if k not in ("egress_usd_per_gb", "ingress_usd_per_gb", "disk_usd_per_gib_hour")
    }
    rows = []
    for i, (egress, ingress, disk) in enumerate(rates):
        row = json.dumps({**first, "offer_id": f"o{i}"})[:-1]
        rows.append(
            f'{row}, "egress_usd_per_gb": {egress}, "ingress_usd_per_gb": {ingress}'
            + ("" if disk is None else f', "disk_usd_per_gib_hour": {disk}')
            + "}"
        )
    head = json.dumps({"as_of": doc["as_of"], "providers": doc["providers"]})[:-1]
    return f'{head}, "offers": [{", ".join(rows)}]}}'.encode()


def _nano(written: str | None) -> int:
    # Oracle: Decimal of the written text, half even to the nano-dollar; absent is 0.
    if written is None:
        return 0
    text = json.loads(written) if written.startswith('"') else written  # a number: its own text, not a float
    return int(Decimal(text).scaleb(9).to_integral_value())


# Mostly a few strings (0.1 and 0.7 are wrong in binary floating point); a run of numbers (parsed
# later, in a batch, yet before the strings after them); later: a string never seen before, numbers,
# a text Decimal reads that a plain decimal is not, more decimals than nano-dollars.
FEW = ['"0.09"', '"0.1"', '"0.7"', '"0"']
EGRESS = (
    FEW * 15
    + ["0.09", "0.1", "0.7", "0.2"] * 3
    + FEW * 22
    + ['"0.085"', "0.09", '"1E-2"', '"0.0000000005"']
    + ['"0.1"'] * 20
)
INGRESS = ['"0.01"', '"0"', '"0.02"', '"0.7"'] * 46
DISK = ['"0.000136986"', None, '"0.00000000049"', '" 3.5"'] * 46


def _rate_types(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The egress field's type in each decoder of seen values built while decoding."""
    types: list[Any] = []
    seen_rows = catalog_json._seen_rows

    def spying(*args: Any) -> Any:
        decoder = seen_rows(*args)
        if decoder is not None:
            row = typing.get_args(decoder.type)[0]
            types.append(next(f.type for f in msgspec.structs.fields(row) if f.name == "egress_usd_per_gb"))
        return decoder

    monkeypatch.setattr(catalog_json, "_seen_rows", spying)
    return types


@pytest.mark.parametrize("as_numbers", [False, True])
def test_rates_are_read_exactly_however_the_pieces_fall(monkeypatch: pytest.MonkeyPatch, as_numbers: bool) -> None:
    monkeypatch.setattr(catalog_json, "CHUNK_BYTES", 2000)  # many pieces: the later decoded as seen
    types = _rate_types(monkeypatch)
    written = list(zip(EGRESS, INGRESS, DISK, strict=True))
    if as_numbers:  # as the bundled catalog writes them: never decoded as strings, parsed in batches
        written = [
            tuple(None if r is None else r.strip('"') if r != '" 3.5"' else "3.5" for r in row) for row in written
        ]
    table = decode_table_catalog(_catalog(written), "x").offer_table()
    literal = [t for t in types if typing.get_origin(t) is Literal]
    assert (literal == []) if as_numbers else ("0.7" in typing.get_args(literal[-1]))
    row_of = {offer_id: row for row, offer_id in enumerate(table.dictionary("offer_id"))}
    for i, (egress, ingress, disk) in enumerate(written):
        row = row_of[f"o{i}"]
        assert int(table["egress_nano"][row]) == _nano(egress), (i, egress)
        assert int(table["ingress_nano"][row]) == _nano(ingress), (i, ingress)
        assert int(table["disk_nano"][row]) == _nano(disk), (i, disk)


def test_a_bad_rate_after_the_strings_are_known_is_named_at_its_offer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 2000)
    written = list(zip(EGRESS, INGRESS, DISK, strict=True))
    written[150] = ('"cheap"', '"0"', '"0"')
    with pytest.raises(CatalogError, match=r"^x: offers\[150\]\.egress_usd_per_gb: expected a number$"):
        decode_table_catalog(_catalog(written), "x")
