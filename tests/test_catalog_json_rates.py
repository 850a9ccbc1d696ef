"""Rates written as JSON strings are decoded, after the first piece, as shared str objects and mapped to
the units the exact parser gave each text the first time (provisioner.offer_columns._rates): every row
still equals a Decimal of its written text, however the pieces fall."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

import provisioner.offer_columns as offer_columns
from provisioner.catalog import BUNDLED_FILE
from provisioner.catalog_json import decode_table_catalog
from provisioner.errors import CatalogError


def _catalog(rates: list[tuple[str, str, str]]) -> bytes:
    """The bundled catalog's first offer once per row of (egress, ingress, disk), each written as given."""
    doc = json.loads(BUNDLED_FILE.read_text())
    first = {k: v for k, v in doc["offers"][0].items()
             if k not in ("egress_usd_per_gb", "ingress_usd_per_gb", "disk_usd_per_gib_hour")}
    rows = []
    for i, (egress, ingress, disk) in enumerate(rates):
        row = json.dumps({**first, "offer_id": f"o{i}"})[:-1]
        rows.append(f'{row}, "egress_usd_per_gb": {egress}, "ingress_usd_per_gb": {ingress}'
                    + ("" if disk is None else f', "disk_usd_per_gib_hour": {disk}') + "}")
    head = json.dumps({"as_of": doc["as_of"], "providers": doc["providers"]})[:-1]
    return f'{head}, "offers": [{", ".join(rows)}]}}'.encode()


def _nano(written: str | None) -> int:
    # Oracle: Decimal of the written text, half even to the nano-dollar; absent is 0.
    return 0 if written is None else int(Decimal(json.loads(written)).scaleb(9).to_integral_value())


# Mostly a few strings (0.1 and 0.7 are wrong in binary floating point); later: a string never seen
# before, numbers, a text Decimal reads that a plain decimal is not, more decimals than nano-dollars.
EGRESS = ['"0.09"', '"0.1"', '"0.7"', '"0"'] * 40 + ['"0.085"', "0.09", '"1E-2"', '"0.0000000005"'] + ['"0.1"'] * 20
INGRESS = ['"0.01"', '"0"', '"0.02"', '"0.7"'] * 46
DISK = ['"0.000136986"', None, '"0.00000000049"', '" 3.5"'] * 46


def test_rates_decoded_as_shared_strings_are_read_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 2000)  # many pieces: the later decoded as seen
    kinds: list[str] = []
    rates = offer_columns._rates

    def spying(raw: tuple[Any, ...], *args: Any) -> Any:
        kinds.append(type(raw[0]).__name__)
        return rates(raw, *args)

    monkeypatch.setattr(offer_columns, "_rates", spying)
    written = list(zip(EGRESS, INGRESS, DISK, strict=True))
    table = decode_table_catalog(_catalog(written), "x").offer_table()
    assert "str" in kinds and "Raw" in kinds
    row_of = {offer_id: row for row, offer_id in enumerate(table.dictionary("offer_id"))}
    for i, (egress, ingress, disk) in enumerate(written):
        row = row_of[f"o{i}"]
        assert int(table["egress_nano"][row]) == _nano(egress), (i, egress)
        assert int(table["ingress_nano"][row]) == _nano(ingress), (i, ingress)
        assert int(table["disk_nano"][row]) == _nano(disk), (i, disk)
    np.testing.assert_array_equal(np.sort(table["egress_nano"]), np.sort([_nano(e) for e in EGRESS]))


def test_a_bad_rate_after_the_strings_are_known_is_named_at_its_offer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 2000)
    written = list(zip(EGRESS, INGRESS, DISK, strict=True))
    written[150] = ('"cheap"', '"0"', '"0"')
    with pytest.raises(CatalogError, match=r"^x: offers\[150\]\.egress_usd_per_gb: expected a number$"):
        decode_table_catalog(_catalog(written), "x")
