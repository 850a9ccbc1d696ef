"""Catalog files are untrusted: JSON and columnar files held to one set of rules, located errors,
a columnar round trip, the compiled JSON cache, hostile plan files, and a broken refreshed cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from provisioner.catalog import TableCatalog, load_bundled_catalog, load_catalog, load_columnar, save_columnar
from provisioner.errors import CatalogError, PlanError
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import load_plan
from provisioner.providers.registry import capabilities
from tests.conftest import EXAMPLES

HOSTILE = [
    ("instance_type", "gpu_8x\nbootcmd: [rm -rf /]", "offers[0].instance_type"),
    ("region", "us-east-1\nPrologSlurmctld=/tmp/x", "offers[0].region"),
    ("gpu_model", "H100 ", "offers[0].gpu_model"),
    ("price_per_hour_usd", -1, "offers[0].price_per_hour_usd"),
    ("price_per_hour_usd", 0, "offers[0].price_per_hour_usd"),
    ("price_per_hour_usd", "1e400", "offers[0].price_per_hour_usd"),
    ("price_per_hour_usd", "NaN", "offers[0].price_per_hour_usd"),
    ("price_per_hour_usd", "Infinity", "offers[0].price_per_hour_usd"),
    ("gpus", "1" + "0" * 400, "offers[0].gpus"),
]


def _bundled_doc() -> dict[str, Any]:
    text = (Path(__file__).parents[1] / "provisioner" / "data" / "catalog.json").read_text()
    return json.loads(text)


@pytest.mark.parametrize(("field", "value", "where"), HOSTILE, ids=[f"{h[0]}={h[1]!r:.20}" for h in HOSTILE])
def test_hostile_json_catalog_values_are_located_errors(tmp_path: Path, field: str, value: Any, where: str) -> None:
    doc = _bundled_doc()
    doc["offers"][0][field] = "__VALUE__"
    text = json.dumps(doc).replace(
        '"__VALUE__"',
        value
        if isinstance(value, str) and value[0] in "1NI" and field in ("price_per_hour_usd", "gpus")
        else json.dumps(value),
    )
    path = tmp_path / "hostile.json"
    path.write_text(text)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {where}: ") and "\n" not in message


def test_hostile_values_through_the_cli_end_in_one_line(tmp_path: Path) -> None:
    doc = _bundled_doc()
    doc["offers"][12]["price_per_hour_usd"] = -3
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(doc))
    spec = EXAMPLES / "lora-a100-k8s.yaml"
    out = subprocess.run(
        [sys.executable, "-m", "provisioner.cli", "plan", str(spec), "--catalog", str(path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {path}: offers[12].price_per_hour_usd: Input should be greater than 0"


def _columnar(tmp_path: Path) -> tuple[TableCatalog, Path]:
    path = tmp_path / "bundled.npz"
    save_columnar(load_bundled_catalog(), path)
    return load_columnar(path), path


def test_columnar_round_trip_plans_the_same(tmp_path: Path) -> None:
    columnar, _ = _columnar(tmp_path)
    bundled = load_bundled_catalog()
    assert columnar.offers == bundled.offers and dict(columnar.providers) == bundled.providers
    for path in sorted(EXAMPLES.glob("*.yaml")):
        spec = load_spec(path)
        assert (
            resolve_plan(spec, columnar, capabilities()).options == resolve_plan(spec, bundled, capabilities()).options
        )


def _rewrite(path: Path, change: dict[str, np.ndarray]) -> Path:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(change)
    out = path.with_name("hostile.npz")
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"d.instance_type": np.array([b"gpu_8x\nbootcmd"])}, "offers[0].instance_type"),
        ({"d.region": np.array([b"us\nPrologSlurmctld=x"])}, "offers[0].region"),
        ({"c.price_micro": "negative"}, "price_per_hour_usd"),
        ({"c.price_micro": "zero"}, "price_per_hour_usd"),
        ({"c.gpu_memory_gib": "nan"}, "gpu_memory_gib"),
        ({"c.fabric_gbps": "inf"}, "fabric_gbps"),
        ({"c.gpus": "huge"}, "gpus"),
    ],
)
def test_hostile_columnar_values_are_refused(tmp_path: Path, change: dict[str, Any], where: str) -> None:
    _, path = _columnar(tmp_path)
    ((key, how),) = change.items()
    if isinstance(how, str):
        with np.load(path) as data:
            column = data[key].copy()
        column[5] = {"negative": -5, "zero": 0, "nan": np.nan, "inf": np.inf, "huge": 2**30}[how]
        how = column
    elif key.startswith("d."):  # point every code at the one hostile dictionary entry
        field = key[2:]
        with np.load(path) as data:
            how = np.concatenate([how, data[key]])
            codes = np.where(data[f"c.{field}"] >= 0, data[f"c.{field}"] + 1, -1)
        codes[0] = 0
        change = {key: how, f"c.{field}": codes}
    hostile = _rewrite(path, change if key.startswith("d.") else {key: how})
    with pytest.raises(CatalogError) as caught:
        load_catalog(hostile)
    assert "offers[" in str(caught.value) and where in str(caught.value) and "\n" not in str(caught.value)


def test_a_corrupt_columnar_file_is_a_catalog_error(tmp_path: Path) -> None:
    _, path = _columnar(tmp_path)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CatalogError, match="not a columnar catalog"):
        load_catalog(path)


@pytest.mark.parametrize("damage", ["object column", "2-d column", "cut inside a column", "compressed"])
def test_columnar_files_are_mapped_only_when_well_formed(tmp_path: Path, damage: str) -> None:
    """The file is mapped, not read through np.load: a pickled or reshaped column and a cut file are
    located refusals; a compressed archive (not what save_columnar writes) is still read."""
    columnar, path = _columnar(tmp_path)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    out = tmp_path / "damaged.npz"
    if damage == "object column":
        arrays["c.gpus"] = np.array([1, "x"], dtype=object)
    elif damage == "2-d column":
        arrays["c.gpus"] = arrays["c.gpus"].reshape(1, -1)
    if damage == "compressed":
        np.savez_compressed(out, **arrays)
        assert load_columnar(out).offers == columnar.offers
        return
    np.savez(out, **arrays)
    if damage == "cut inside a column":
        raw = out.read_bytes()
        at = raw.index(b"c.price_micro.npy")
        out.write_bytes(raw[: at + 400] + raw[at + 400 + 8 * 16 :])  # drop a few values: sizes no longer add up
    with pytest.raises(CatalogError, match="not a columnar catalog") as caught:
        load_catalog(out)
    assert "\n" not in str(caught.value)


def test_json_catalogs_are_compiled_once_to_a_columnar_cache(tmp_path: Path) -> None:
    source = tmp_path / "catalog.json"
    source.write_text(json.dumps(_bundled_doc()))
    cache = tmp_path / "cache"
    first = load_catalog(source, cache_dir=cache)
    [compiled] = (cache / "compiled").glob("*.npz")
    second = load_catalog(source, cache_dir=cache)
    assert isinstance(second, TableCatalog) and second.origin == str(source)
    assert second.offers == first.offers
    compiled.write_bytes(b"garbage")  # a damaged entry is rebuilt, never an error
    assert load_catalog(source, cache_dir=cache).offers == first.offers


HAND_EDITS = {
    "offer id with a space": ("d.offer_id", "id"),
    "offer id with a NUL inside": ("d.offer_id", "nul"),
    "price below zero": ("c.price_micro", -7),
    "price of zero": ("c.price_micro", 0),
    "key ranks not a permutation": ("c.key_rank", "repeat"),
    "key ranks as floats": ("c.key_rank", "float"),
    "enum code out of range": ("c.fabric", 9),
    "NaN memory": ("c.gpu_memory_gib", np.nan),
    "region codes as floats": ("c.region", "float"),
}


@pytest.mark.parametrize("edit", HAND_EDITS)
def test_a_hand_edited_compiled_cache_is_refused_and_rebuilt(tmp_path: Path, edit: str) -> None:
    """The compiled cache is checked like any columnar file each time it is read (nothing trusts it for
    having been written by this tool): an entry edited into a valid archive with a bad value is
    dropped and compiled again from the JSON, so the plan sees the source's offers."""
    source = tmp_path / "catalog.json"
    doc = _bundled_doc()
    for i, offer in enumerate(doc["offers"]):
        offer["offer_id"] = f"ask-{i}"
    source.write_text(json.dumps(doc))
    cache = tmp_path / "cache"
    first = load_catalog(source, cache_dir=cache)
    [compiled] = (cache / "compiled").glob("*.npz")
    with np.load(compiled) as data:
        arrays = {name: data[name].copy() for name in data.files}
    key, how = HAND_EDITS[edit]
    if how in ("id", "nul"):
        arrays[key][3] = b"ask 3" if how == "id" else b"as\0k3"
    elif how == "repeat":
        arrays[key][1] = arrays[key][0]
    elif how == "float":
        arrays[key] = arrays[key].astype(np.float64)
    else:
        arrays[key][2] = how
    np.savez(compiled, **arrays)
    with pytest.raises(CatalogError):
        load_columnar(compiled)
    again = load_catalog(source, cache_dir=cache)
    assert again.offers == first.offers
    assert load_columnar(compiled).offers == first.offers  # the entry was written again


@pytest.mark.parametrize("unsafe", [b"", b"a b", b"a\nb", b"ab\0cd", b".ab", b"-ab", b"a" * 129, b"ab\xff", b"a;b"])
def test_one_unsafe_id_among_many_safe_ones_is_found(unsafe: bytes) -> None:
    """unsafe_ids answers "all safe" from a count of the bytes used when it can; one bad entry among
    thousands of good ones (of every length, so values are NUL-padded) must still be the one flagged."""
    from provisioner.columns import unsafe_ids

    safe = [f"{'abcdefgh'[i % 8]}{i}.x:/+@-_Z9"[: 1 + i % 13].encode() for i in range(5000)]
    entries = [*safe[:1234], unsafe, *safe[1234:]]
    mask = unsafe_ids(np.array(entries, dtype=np.bytes_))
    assert mask.tolist() == [i == 1234 for i in range(len(entries))]
    assert not unsafe_ids(np.array(safe, dtype=np.bytes_)).any()


def test_a_hand_edited_plan_with_a_hostile_identifier_is_refused(tmp_path: Path) -> None:
    plan = resolve_plan(load_spec(EXAMPLES / "lora-a100-k8s.yaml"), load_bundled_catalog(), capabilities()).to_plan()
    for field, value in (("instance_type", "x\nPrologSlurmctld=/tmp/own"), ("region", "us\nbootcmd")):
        doc = json.loads(plan.dumps())
        doc["option"][field] = value
        doc["option"]["offer"][field] = value
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(PlanError) as caught:
            load_plan(path)
        assert "\n" not in str(caught.value) and f"option.{field}" in str(caught.value)


def test_a_truncated_refreshed_cache_falls_back_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.workflow import CACHE_FILE, choose_catalog

    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path))
    (tmp_path / CACHE_FILE).write_text('{"as_of": "2026-11-2')
    warnings: list[str] = []
    catalog = choose_catalog(None, warnings)
    assert catalog.origin == "bundled"
    [warning] = warnings
    assert warning.startswith("warning: ") and CACHE_FILE in warning
    with pytest.raises(CatalogError):
        choose_catalog(None)
