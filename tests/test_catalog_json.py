"""A catalog over 1 MiB: JSON decoded straight into columns (provisioner.catalog_json), the same
table and the same plan as the Offer-model path; bad values refused at their location; YAML that
large refused with a hint."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from provisioner.catalog import LARGE_CATALOG_BYTES, load_catalog, parse_catalog
from provisioner.catalog_json import decode_table_catalog
from provisioner.errors import CatalogError
from provisioner.optimizer import resolve_plan
from tests.test_optimizer import ALL, make_spec


def test_the_same_table_as_the_offer_model_path() -> None:
    from provisioner.catalog import BUNDLED_FILE

    text = BUNDLED_FILE.read_bytes()
    # An 8-decimal ask and a price under a micro-dollar keep every decimal on both paths.
    text = text.replace(b'"price_per_hour_usd": 0.31,', b'"price_per_hour_usd": 0.38333333,', 1)
    model = parse_catalog(text.decode(), "x").offer_table()
    fast = decode_table_catalog(text, "x").offer_table()
    assert set(model.values) == set(fast.values) and set(model.names) == set(fast.names)
    for name, column in model.values.items():
        assert column.dtype == fast.values[name].dtype, name
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    for name, dictionary in model.names.items():
        np.testing.assert_array_equal(dictionary, fast.names[name], err_msg=name)
    assert b"0.38333333" in text and (fast["price_rest"] == 330_000).any()


def test_a_large_json_file_plans_like_the_small_path(tmp_path: Path) -> None:
    from provisioner.catalog import BUNDLED_FILE

    doc = json.loads(BUNDLED_FILE.read_text())
    small = tmp_path / "small.json"
    small.write_text(json.dumps(doc))
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc) + " " * LARGE_CATALOG_BYTES)  # padding: over the threshold
    spec = make_spec(gpus={"count": 16, "model": ["H100"]}, workload={"hours": 24})
    caps = {name: ALL for name in doc["providers"]}
    a, b = resolve_plan(spec, load_catalog(small), caps), resolve_plan(spec, load_catalog(big), caps)
    assert type(load_catalog(big)).__name__ == "TableCatalog"
    assert [(o.offer.key, o.cost, o.hourly_usd) for o in a.options] == [
        (o.offer.key, o.cost, o.hourly_usd) for o in b.options
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: o.update(gpus=8.5), r"offers\[0\]\.gpus: Expected `int`, got `float`"),
        (lambda o: o.update(colour="red"), r"offers\[0\]: Object contains unknown field `colour`"),
        (lambda o: o.update(price_per_hour_usd=-1), r"offers\[0\]\.price_per_hour_usd: must be above 0"),
        (
            lambda o: o.update(price_per_hour_usd=Decimal("0.0000000000001")),
            r"offers\[0\]\.price_per_hour_usd: more than 12 decimal places",
        ),
        (lambda o: o.update(region="us east"), r"offers\[0\]\.region"),
        (lambda o: o.update(fabric="carrier-pigeon"), r"offers\[0\]\.fabric: must be one of"),
        (
            lambda o: o.update(purchase="reservation", spot_price_per_hour_usd=1),
            r"offers\[0\]\.spot_price_per_hour_usd: a reservation or sales product has no spot price",
        ),
    ],
)
def test_bad_values_are_refused_at_their_location(edit: object, message: str) -> None:
    from provisioner.catalog import BUNDLED_FILE

    doc = json.loads(BUNDLED_FILE.read_text(), parse_float=Decimal)
    edit(doc["offers"][0])  # type: ignore[operator]
    text = json.dumps(doc, default=lambda d: "DEC" + str(d) + "DEC")
    text = text.replace('"DEC', "").replace('DEC"', "")
    with pytest.raises(CatalogError, match=rf"^x: {message}"):
        decode_table_catalog(text.encode(), "x")


def test_a_large_yaml_catalog_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("as_of: 2026-11-22\n" + "#" * LARGE_CATALOG_BYTES + "\nproviders: {}\noffers: []\n")
    with pytest.raises(CatalogError, match=r"YAML catalog over 1 MiB is refused.*write it as JSON once"):
        load_catalog(path)


def test_offers_decoded_in_chunks_keep_their_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.catalog import BUNDLED_FILE

    monkeypatch.setattr("provisioner.catalog_json.CHUNK", 7)  # many chunks from the bundled catalog
    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 500)  # and many cuts on the fast path
    text = BUNDLED_FILE.read_bytes()
    fast = decode_table_catalog(text, "x").offer_table()
    model = parse_catalog(text.decode(), "x").offer_table()
    for name, column in model.values.items():
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    doc = json.loads(text)
    doc["offers"][23]["gpus"] = 1.5
    with pytest.raises(CatalogError, match=r"^x: offers\[23\]\.gpus: Expected `int`, got `float`$"):
        decode_table_catalog(json.dumps(doc).encode(), "x")
    doc["offers"][23]["gpus"] = 8
    doc["offers"][30]["price_per_hour_usd"] = "cheap"
    with pytest.raises(CatalogError, match=r"^x: offers\[30\]\.price_per_hour_usd: expected a number$"):
        decode_table_catalog(json.dumps(doc).encode(), "x")


def test_a_large_refreshed_cache_is_still_read_as_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # catalog refresh merges into the cache's Offer models: a cache over 1 MiB must not come back as
    # columns (nor be set aside for the bundled snapshot with a warning).
    from provisioner.catalog import BUNDLED_FILE
    from provisioner.catalog_model import Catalog
    from provisioner.workflow import CACHE_FILE, choose_catalog

    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path))
    doc = json.loads(BUNDLED_FILE.read_text())
    doc["as_of"] = "2026-11-25"
    (tmp_path / CACHE_FILE).write_text(json.dumps(doc) + " " * LARGE_CATALOG_BYTES)
    warnings: list[str] = []
    catalog = choose_catalog(None, warnings)
    assert isinstance(catalog, Catalog) and str(catalog.as_of) == "2026-11-25" and warnings == []


def _catalog_with(prices: list[str], rates: list[str]) -> bytes:
    """The bundled catalog's first offer repeated, with each written price (JSON text) and rate in turn."""
    from provisioner.catalog import BUNDLED_FILE

    doc = json.loads(BUNDLED_FILE.read_text())
    first = {k: v for k, v in doc["offers"][0].items() if k not in ("price_per_hour_usd", "spot_price_per_hour_usd")}
    rows = []
    for i, (price, rate) in enumerate(zip(prices, rates, strict=True)):
        row = json.dumps({**first, "offer_id": f"o{i}"})[:-1]
        rows.append(f'{row}, "price_per_hour_usd": {price}, "egress_usd_per_gb": {rate}}}')
    head = json.dumps({"as_of": doc["as_of"], "providers": doc["providers"]})[:-1]
    return f'{head}, "offers": [{", ".join(rows)}]}}'.encode()


# Written as a JSON number or string; plain decimals, and the forms numpy does not read (Decimal does).
PRICES = [
    "0.31",
    '"0.31"',
    "2",
    "10",
    "0.000001",
    "0.000000000001",
    "1234.123456789012",
    "0.38333333",
    "1.015",
    "0.1",
    "0.7",
    "4.35",
    "159.60",
    "1e2",
    "1E-3",
    '"2.5e1"',
    "0.10",
    '"007.5"',
    '"07"',
    "9999.999999999999",
    "0.000000999999",
    "100.000000000000",
    '" 3.5"',
    '"5."',
    "0.38333333333",
    "2.0000000001",
]
RATES = [
    "0",
    "0.09",
    '"0.085"',
    "0.000136986",
    "0.0001369863",
    "0.00000000049",
    "0.0000000005",
    "1e-2",
    "999.5",
    "0.1",
    "0.7",
    "0.2",
    "1.015",
    "0.12345678949",
    "3",
    "0.000000001",
    "0.02",
    "0",
    "0.05",
    "0.01",
    "0.09",
    '"1E1"',
    "0.000",
    "7",
    "0.5",
    "0.25",
]


def test_written_prices_and_rates_are_read_exactly() -> None:
    # Oracle: Decimal of the written text (prices exact to the pico-dollar, rates half-even to the
    # nano-dollar). Includes values binary floating point gets wrong (1.015, 0.7, 4.35, 0.1 + ...).
    table = decode_table_catalog(_catalog_with(PRICES, RATES), "x").offer_table()
    order = np.argsort([int(o[1:]) for o in table.dictionary("offer_id")])[table["offer_id"]]
    for i, (price, rate) in enumerate(zip(PRICES, RATES, strict=True)):
        pico = int(Decimal(price.strip('"')).scaleb(12))
        nano = int(Decimal(rate.strip('"')).scaleb(9).to_integral_value())  # default context: half even
        row = int(np.flatnonzero(order == i)[0])
        assert (int(table["price_micro"][row]), int(table["price_rest"][row])) == divmod(pico, 10**6), price
        assert int(table["egress_nano"][row]) == nano, rate
        assert int(table["spot_price_micro"][row]) == -1


@pytest.mark.parametrize(
    ("price", "message"),
    [
        ("0.0000000000001", "more than 12 decimal places"),
        ('"0.0000000000001"', "more than 12 decimal places"),
        ('"cheap"', "expected a number"),
        ('""', "expected a number"),
        ("true", "expected a number"),
        ('"null"', "expected a number"),
        ("[1]", "expected a number"),
        ('{"usd": 1}', "expected a number"),
        ("0", "must be above 0"),
        ("-1.5", "must be above 0"),
        ('"-0.5"', "must be above 0"),
        ("0.000", "must be above 0"),
        ("10000.000000000001", "must be above 0 and at most 10000"),
        ("1000000", "must be above 0 and at most"),
        ("1e400", "must be above 0 and at most"),
        ("1234567890123456789012345.5", "must be above 0 and at most"),
        ('"NaN"', "must be above 0"),
        ('"Infinity"', "must be above 0"),
    ],
)
def test_a_bad_written_price_is_refused_at_its_row(price: str, message: str) -> None:
    prices = ["1.5"] * 5 + [price] + ["2"] * 3
    with pytest.raises(CatalogError, match=rf"^x: offers\[5\]\.price_per_hour_usd: {re.escape(message)}"):
        decode_table_catalog(_catalog_with(prices, ["0"] * 9), "x")


@pytest.mark.parametrize("rate", ['"cheap"', "null", "[0]", "-0.01", "1000.000000001", "1e12"])
def test_a_bad_written_rate_is_refused_at_its_row(rate: str) -> None:
    with pytest.raises(CatalogError, match=r"^x: offers\[2\]\.egress_usd_per_gb: "):
        decode_table_catalog(_catalog_with(["1"] * 4, ["0", "0", rate, "0"]), "x")


def test_an_object_written_over_lines_where_a_price_belongs_is_refused() -> None:
    with pytest.raises(CatalogError, match=r"^x: offers\[1\]\.price_per_hour_usd: expected a number$"):
        decode_table_catalog(_catalog_with(["1", '{\n"usd": 1}', "2"], ["0"] * 3), "x")


def test_prices_parsed_in_batches_keep_their_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.catalog_json import Columns

    monkeypatch.setattr("provisioner.catalog_json.CHUNK", 3)
    monkeypatch.setattr(Columns, "BATCH", 4)  # several batches, each of several chunks
    prices = [f"{i}.{i:03d}" for i in range(1, 20)]
    table = decode_table_catalog(_catalog_with(prices, ["0.01"] * 19), "x").offer_table()
    assert [int(table["price_micro"][table.dictionary("offer_id").index(f"o{i}")]) for i in range(19)] == [
        int(Decimal(p).scaleb(6)) for p in prices
    ]
    prices[13] = '"x"'
    with pytest.raises(CatalogError, match=r"^x: offers\[13\]\.price_per_hour_usd: expected a number$"):
        decode_table_catalog(_catalog_with(prices, ["0.01"] * 19), "x")


def test_a_cut_between_offers_that_falls_inside_a_text_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path cuts the offers text where "}, {" appears: inside a string that cut leaves its piece
    # invalid JSON, and the file is read again offer by offer, to the same table.
    from provisioner.catalog import BUNDLED_FILE

    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 300)
    doc = json.loads(BUNDLED_FILE.read_text())  # floats written back by repr: the same decimals
    for i, offer in enumerate(doc["offers"]):
        offer["how_to_obtain"] = f"ask sales}}, {{then wait {i}" if i % 2 else "ask}  ,   { again"
    text = json.dumps(doc).encode()
    fast = decode_table_catalog(text, "x").offer_table()
    model = parse_catalog(text.decode(), "x").offer_table()
    assert len(fast) == len(doc["offers"]) > 20
    for name, column in model.values.items():
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    np.testing.assert_array_equal(model.names["how_to_obtain"], fast.names["how_to_obtain"])


def test_the_fast_path_cuts_only_between_offers(monkeypatch: pytest.MonkeyPatch) -> None:
    import provisioner.catalog_json as catalog_json

    monkeypatch.setattr(catalog_json, "CHUNK_BYTES", 200)
    recut = []
    monkeypatch.setattr(catalog_json, "_columns_by_offer", lambda *args: recut.append(args) or pytest.fail("recut"))
    prices = [f"{i}.5" for i in range(1, 40)]
    table = decode_table_catalog(_catalog_with(prices, ["0"] * 39), "x").offer_table()
    assert sorted(table["price_micro"].tolist()) == [i * 1_000_000 + 500_000 for i in range(1, 40)] and not recut


def test_values_first_seen_in_a_later_piece_are_read_there(monkeypatch: pytest.MonkeyPatch) -> None:
    # After the first piece, provider, region, GPU model, instance type and interruption basis are decoded
    # against the values seen so far; a piece with a new one is decoded again as plain rows (not sent down
    # the row-exact path) and read exactly as the Offer-model path reads it.
    import provisioner.catalog_json as catalog_json
    from provisioner.catalog import BUNDLED_FILE

    monkeypatch.setattr(catalog_json, "CHUNK_BYTES", 400)
    monkeypatch.setattr(catalog_json, "_columns_by_offer", lambda *args: pytest.fail("row-exact path taken"))
    doc = json.loads(BUNDLED_FILE.read_text())
    offers = sorted(doc["offers"], key=lambda o: (o["provider"], o["region"]))  # new values keep coming
    for i, offer in enumerate(offers):
        offer["interruption_basis"] = f"basis {i // 7}"
    doc["offers"] = offers
    text = json.dumps(doc).encode()
    fast = decode_table_catalog(text, "x").offer_table()
    model = parse_catalog(text.decode(), "x").offer_table()
    for name, column in model.values.items():
        np.testing.assert_array_equal(column, fast.values[name], err_msg=name)
    for name, dictionary in model.names.items():
        np.testing.assert_array_equal(dictionary, fast.names[name], err_msg=name)


def test_a_bad_value_in_a_later_piece_is_named_at_its_offer(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.catalog import BUNDLED_FILE

    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", 400)
    doc = json.loads(BUNDLED_FILE.read_text())
    doc["offers"][40]["region"] = 7
    with pytest.raises(CatalogError, match=r"^x: offers\[40\]\.region: Expected `str`, got `int`$"):
        decode_table_catalog(json.dumps(doc).encode(), "x")
    doc["offers"][40]["region"] = "us-east-1"
    doc["offers"][41]["fabric"] = "smoke-signals"
    with pytest.raises(CatalogError, match=r"^x: offers\[41\]\.fabric: must be one of ethernet, roce"):
        decode_table_catalog(json.dumps(doc).encode(), "x")


@pytest.mark.parametrize("chunk_bytes", [1 << 19, 300])
def test_offer_ids_are_coded_in_order_of_first_use(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    from provisioner.catalog import BUNDLED_FILE

    monkeypatch.setattr("provisioner.catalog_json.CHUNK_BYTES", chunk_bytes)
    doc = json.loads(BUNDLED_FILE.read_text())
    ids = ["b-7", None, "a-1", "b-7", "q-2", "a-1", None, "c.9", "z"] * 3
    for offer, offer_id in zip(doc["offers"], ids, strict=False):
        offer.pop("offer_id", None)
        if offer_id is not None:
            offer["offer_id"] = offer_id
    doc["offers"] = doc["offers"][: len(ids)]
    text = json.dumps(doc)
    for written in (text, text.replace('"a-1"', '"\\u0061-1"')):  # as is, or with an escape (msgspec decodes)
        table = decode_table_catalog(written.encode(), "x").offer_table()
        assert table.dictionary("offer_id") == ("b-7", "a-1", "q-2", "c.9", "z")
        assert table["offer_id"].tolist() == [0, -1, 1, 0, 2, 1, -1, 3, 4] * 3


def test_each_offer_its_own_id_and_ids_that_are_not_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.catalog import BUNDLED_FILE

    doc = json.loads(BUNDLED_FILE.read_text())
    for i, offer in enumerate(doc["offers"]):
        offer["offer_id"] = f"id-{i:04d}-" + "x" * (i % 9)
    table = decode_table_catalog(json.dumps(doc).encode(), "x").offer_table()
    assert table["offer_id"].tolist() == list(range(len(doc["offers"])))
    assert table.dictionary("offer_id") == tuple(offer["offer_id"] for offer in doc["offers"])
    for bad in (7, True, [1], {"id": 1}):
        doc["offers"][5]["offer_id"] = bad
        with pytest.raises(CatalogError, match=r"^x: offers\[5\]\.offer_id: expected a string$"):
            decode_table_catalog(json.dumps(doc).encode(), "x")
    doc["offers"][5]["offer_id"] = "x" * 300  # past numpy's width: msgspec decodes it, the SAFE_ID rule refuses it
    with pytest.raises(CatalogError, match=r"^x: offers\[5\]\.offer_id: must match SAFE_ID"):
        decode_table_catalog(json.dumps(doc).encode(), "x")


def test_the_first_bad_offer_is_named_whatever_is_wrong_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Prices are parsed in batches after their rows are decoded: a bad price in an earlier offer is
    # still named before a wrong type in a later one.
    monkeypatch.setattr("provisioner.catalog_json.CHUNK", 3)
    doc = json.loads(_catalog_with(["1", '"x"', "2", "3", "4", "5", "6", "7"], ["0"] * 8))
    doc["offers"][6]["gpus"] = 1.5
    with pytest.raises(CatalogError, match=r"^x: offers\[1\]\.price_per_hour_usd: expected a number$"):
        decode_table_catalog(json.dumps(doc).encode(), "x")


def test_a_catalog_emptied_after_it_was_measured_is_a_catalog_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mmap

    def emptied(*args: object, **kwargs: object) -> None:  # what mmap says of a file emptied meanwhile
        raise ValueError("cannot mmap an empty file")

    path = tmp_path / "big.json"
    path.write_text("{}" + " " * LARGE_CATALOG_BYTES)
    monkeypatch.setattr(mmap, "mmap", emptied)
    with pytest.raises(CatalogError, match=r"big.json: cannot read catalog: cannot mmap an empty file$"):
        load_catalog(path)
