"""`catalog refresh` against the fake servers, then `plan` on the refreshed prices."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.catalog import load_bundled_catalog, load_catalog
from provisioner.cli import main
from provisioner.providers.base import OfferQuery
from provisioner.providers.registry import REGISTRY, get_provider
from provisioner.refresh import LISTED_PURCHASES, LIVE_PROVIDERS
from provisioner.testing.fakes import make_fake, serve
from tests.conftest import need_shared

KEY = "refresh-canary-key-0123456789"


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    need_shared("provider-apis")
    apps, servers = {}, []
    for name in LIVE_PROVIDERS:
        app = make_fake(name, api_key=KEY)
        server = serve(app)
        servers.append(server)
        apps[name] = app
        monkeypatch.setenv(f"PROVISIONER_{name.upper()}_API_URL", server.url)
        monkeypatch.setenv(f"PROVISIONER_{name.upper()}_API_KEY", KEY)
    try:
        yield apps
    finally:
        for server in servers:
            server.stop()
    for name, app in apps.items():
        assert app.validation_errors == [], name


def test_refresh_then_plan_uses_the_fresh_prices(fakes, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["catalog", "refresh"]) == 0
    out = capsys.readouterr().out
    for name in LIVE_PROVIDERS:
        assert f"{name}: " in out and "failed" not in out
    assert KEY not in out

    cache = next(Path(p) for p in out.split() if p.endswith("catalog.json"))
    refreshed = load_catalog(cache)
    today = dt.datetime.now(dt.UTC).date()
    assert refreshed.as_of == today
    bundled = load_bundled_catalog()
    for name in LIVE_PROVIDERS:
        live = {
            (o.instance_type, o.region, o.price_per_hour_usd, o.spot_price_per_hour_usd)
            for o in get_provider(name).list_offers(OfferQuery())
        }
        cached = {
            (o.instance_type, o.region, o.price_per_hour_usd, o.spot_price_per_hour_usd)
            for o in refreshed.offers
            if o.provider == name and o.purchase in LISTED_PURCHASES
        }
        assert live and cached == live, name
        assert refreshed.providers[name].as_of == today
    # Products the live APIs do not list (Lambda 1-Click Clusters, RunPod Instant Clusters) are kept, dated.
    unlisted = [o for o in bundled.offers if o.provider in LIVE_PROVIDERS and o.purchase not in LISTED_PURCHASES]
    assert unlisted
    kept = {(o.provider, o.instance_type, o.region): o for o in refreshed.offers}
    for offer in unlisted:
        copy = kept[(offer.provider, offer.instance_type, offer.region)]
        assert copy.as_of == bundled.as_of and copy.source and "bundled" in copy.source
        assert copy.price_per_hour_usd == offer.price_per_hour_usd
    # Providers that were not refreshed keep their bundled offers and their own date.
    assert _prices(refreshed.offers, "aws") == _prices(bundled.offers, "aws")
    assert refreshed.providers["aws"].as_of == bundled.as_of != today

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: fresh\ngpus: {model: H100, count: 8}\nproviders: {allow: [lambda, runpod, vastai]}\n"
        "pricing: {mode: either}\n"
    )
    assert cache.name == "fake-catalog.json" and not (cache.parent / "catalog.json").exists()  # never the real cache
    assert main(["plan", str(spec), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["catalog"] == "bundled"  # plan alone never reads fake prices
    assert main(["plan", str(spec), "--format", "json", "--top", "100", "--catalog", str(cache)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["catalog"] == str(cache)
    fresh_prices: dict[tuple[str, str, str, bool], set[float]] = {}
    for o in refreshed.offers:  # marketplace asks may share a type and region at different prices
        for spot, price in ((False, o.price_per_hour_usd), (True, o.spot_price_per_hour_usd)):
            if price is not None:
                fresh_prices.setdefault((o.provider, o.instance_type, o.region, spot), set()).add(float(price))
    assert doc["options"]
    for option in doc["options"]:
        key = (option["provider"], option["instance_type"], option["region"], option["spot"])
        per_node = float(option["hourly_usd"]) / option["nodes"]
        assert any(abs(per_node - price) < 1e-3 for price in fresh_prices[key]), (key, per_node)

    assert main(["plan", str(spec), "--catalog", str(cache)]) == 0
    assert f"from {cache}" in capsys.readouterr().out


def test_refresh_reports_a_failing_provider_and_keeps_the_rest(fakes, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PROVISIONER_RUNPOD_API_KEY", "wrong-key")
    assert main(["catalog", "refresh"]) == 4
    captured = capsys.readouterr()
    assert "runpod: failed" in captured.out and "lambda: " in captured.out
    assert "wrong-key" not in captured.out + captured.err
    assert captured.err.strip().startswith("error: runpod: refresh failed")


def test_refresh_without_keys_says_what_to_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "refresh"]) == 4
    assert capsys.readouterr().err == (
        "error: catalog: no provider has an API key set: set LAMBDA_API_KEY, RUNPOD_API_KEY, VAST_API_KEY or "
        "FLUENCE_API_KEY, or name aws or gcp with --provider (read with their SDK's credentials)\n"
    )


def _prices(offers: object, provider: str) -> set[tuple[str, str, float]]:
    return {(o.instance_type, o.region, o.price_per_hour_usd) for o in offers if o.provider == provider}  # type: ignore[attr-defined]


def test_refresh_one_provider_at_a_time_accumulates(fakes, capsys: pytest.CaptureFixture[str]) -> None:
    bundled = load_bundled_catalog().offers
    assert main(["catalog", "refresh", "--provider", "fluence"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fluence: ") and "vastai" not in out
    cache = next(Path(p) for p in out.split() if p.endswith("catalog.json"))
    first = load_catalog(cache)
    live_fluence = _prices(get_provider("fluence").list_offers(OfferQuery()), "fluence")
    assert _prices(first.offers, "fluence") == live_fluence
    assert _prices(first.offers, "vastai") == _prices(bundled, "vastai")  # untouched

    assert main(["catalog", "refresh", "--provider", "vastai"]) == 0
    capsys.readouterr()
    second = load_catalog(cache)
    assert _prices(second.offers, "fluence") == live_fluence  # the earlier refresh is kept
    assert _prices(second.offers, "vastai") == _prices(get_provider("vastai").list_offers(OfferQuery()), "vastai")
    assert _prices(second.offers, "vastai") != _prices(bundled, "vastai")


def test_refresh_of_an_unsupported_provider_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # An unknown --provider is a usage error (exit 2), named in one line with every known provider.
    assert main(["catalog", "refresh", "--provider", "oracle"]) == 2
    err = capsys.readouterr().err
    prefix = "error: argument --provider: unknown provider 'oracle'; known: "
    assert err.strip().startswith(prefix) and "\n" not in err.strip()
    named = err.strip().removeprefix(prefix).split(" (see ")[0].split(", ")
    assert {"lambda", "runpod", "vastai", "fluence", "aws", "gcp"} <= set(named) == set(REGISTRY)


def test_fake_prices_never_enter_the_real_cache(fakes, capsys: pytest.CaptureFixture[str]) -> None:
    """A refresh that asked the tool's fakes (their /_fake/about answers) writes fake-catalog.json beside
    the cache and says how to plan on it; the cache plan reads on its own is left byte for byte."""
    import os

    from provisioner.catalog import dump_catalog

    real = Path(os.environ["PROVISIONER_CACHE_DIR"]) / "catalog.json"
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text(dump_catalog(load_bundled_catalog()))
    before = real.read_bytes()
    assert main(["catalog", "refresh", "--provider", "lambda"]) == 0
    out = capsys.readouterr().out
    fake = real.with_name("fake-catalog.json")
    assert real.read_bytes() == before and fake.is_file()
    assert f"plan on them with: provisioner plan SPEC --catalog {fake}" in out
    listed = [o for o in load_catalog(fake).offers if o.purchase in LISTED_PURCHASES]
    assert _prices(listed, "lambda") == _prices(get_provider("lambda").list_offers(OfferQuery()), "lambda")
