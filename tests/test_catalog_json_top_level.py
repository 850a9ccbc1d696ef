"""The large JSON reader finds the offers array without decoding the whole file first
(provisioner.catalog_json._offers_span): the usual layout takes that path, every other layout still
reads to the same table, and a file that is not valid JSON is still refused. The text already
decoded is let go of as the pieces go; reading a large catalog asks malloc to keep the memory it frees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import provisioner.catalog_json as catalog_json
from provisioner.catalog import BUNDLED_FILE, parse_catalog
from provisioner.catalog_json import Head, decode_table_catalog
from provisioner.errors import CatalogError


def _doc() -> dict[str, Any]:
    return json.loads(BUNDLED_FILE.read_text())


def _same_table(text: str) -> None:
    fast = decode_table_catalog(text.encode(), "x").offer_table()
    model = parse_catalog(text, "x").offer_table()
    assert len(fast) > 20
    for name, column in model.values.items():
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    for name, dictionary in model.names.items():
        np.testing.assert_array_equal(dictionary, fast.names[name], err_msg=name)


def _whole_file_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the whole file is decoded as its top level (the offers skipped over, not cut)."""
    seen: list[int] = []
    decode = catalog_json._decode

    def counting(data: Any, kind: Any, *args: Any) -> Any:
        if kind is Head:
            seen.append(len(data))
        return decode(data, kind, *args)

    monkeypatch.setattr(catalog_json, "_decode", counting)
    return seen


def test_the_usual_layout_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_json, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(catalog_json, "_columns_by_offer", lambda *args: pytest.fail("row-exact path taken"))
    seen = _whole_file_decodes(monkeypatch)
    for text in (json.dumps(_doc()), json.dumps(_doc(), indent=2) + "\n\n", BUNDLED_FILE.read_text()):
        _same_table(text)
    assert seen == []


@pytest.mark.parametrize(("layout", "whole"), [("offers first", 1), ("origin last", 1), ("origin first", 0)])
def test_other_layouts_read_to_the_same_table(layout: str, whole: int, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _doc()
    if layout == "offers first":
        doc = {"offers": doc["offers"], "as_of": doc["as_of"], "providers": doc["providers"]}
    elif layout == "origin last":
        doc["origin"] = "elsewhere ]"
    else:
        doc = {"origin": "elsewhere", **doc}
    seen = _whole_file_decodes(monkeypatch)
    _same_table(json.dumps(doc))
    assert len(seen) == whole


def test_a_key_that_ends_like_offers_is_not_taken_for_it() -> None:
    # The first '"offers": [' of this file ends a provider's key (escaped quote): not the top level's.
    doc = _doc()
    doc["providers"][next(iter(doc["providers"]))]['x"offers'] = [1]
    text = json.dumps(doc)
    assert text.index('"offers": [') < text.index('"offers": [{')
    with pytest.raises(CatalogError, match=r'^x: providers\.x"offers: Extra inputs are not permitted$'):
        decode_table_catalog(text.encode(), "x")


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[:-1] + "]}",  # an array closed twice
        lambda text: text[:-1] + "} {}",  # a second document
        lambda text: text.replace('"offers": [', '"offers": [[', 1),  # offers nested one level too deep
        lambda text: text[:-2] + ", {]}",  # an offer left open
        lambda text: text[:-1],  # the top level left open
    ],
)
def test_a_damaged_file_is_still_refused(damage: Any) -> None:
    text = json.dumps(_doc())
    with pytest.raises(CatalogError, match=r"^x: (not valid JSON|offers\[0\])"):
        decode_table_catalog(damage(text).encode(), "x")


def test_reading_a_large_catalog_asks_malloc_to_keep_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # glibc's mallopt(M_MMAP_THRESHOLD = -3, 32 MiB) and (M_TRIM_THRESHOLD = -1, 512 MiB); a C library
    # without mallopt (musl, macOS) is left alone.
    import ctypes

    from provisioner import catalog

    calls: list[tuple[int, int]] = []

    class Libc:
        def mallopt(self, option: int, value: int) -> int:
            calls.append((option, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    catalog._keep_freed_memory()
    assert calls == [(-3, 32 << 20), (-1, 512 << 20)]
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())
    catalog._keep_freed_memory()
    assert len(calls) == 2


def test_a_mapped_file_lets_go_of_the_text_it_has_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pages of text already decoded are handed back as the pieces go (madvise DONTNEED): the table is
    # the same, and a bad offer after that point is still named, by the row-exact path reading them again.
    import mmap

    monkeypatch.setattr(catalog_json, "CHUNK_BYTES", 300)
    monkeypatch.setattr(catalog_json, "DROP_BYTES", 1)
    told: list[int] = []
    dropper = catalog_json._dropper

    def spying(data: Any, at: int) -> Any:
        drop = dropper(data, at)
        assert drop is not None
        return lambda offset: told.append(offset) or drop(offset)

    monkeypatch.setattr(catalog_json, "_dropper", spying)
    doc = _doc()
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(doc))
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    fast = decode_table_catalog(mapped, "x").offer_table()
    model = parse_catalog(path.read_text(), "x").offer_table()
    for name, column in model.values.items():
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    text = path.read_bytes()
    offers = text[text.index(b'"offers": [') + len(b'"offers": ') : -1]  # the array, to its ]
    assert len(told) > 10 and told == sorted(told) and told[-1] == len(offers)
    doc["offers"][-2]["gpus"] = 1.5
    path.write_text(json.dumps(doc))
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    told.clear()
    with pytest.raises(CatalogError, match=rf"^x: offers\[{len(doc['offers']) - 2}\]\.gpus: Expected `int`"):
        decode_table_catalog(mapped, "x")
    assert told
