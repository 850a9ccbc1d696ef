"""Reports say the true thing (issue 27 item 5): which way a product is not sold, no ranked offer
among the rejected, and every single field whose relaxation alone lets an option fit."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.offer import Catalog, Offer
from tests.test_optimizer import make_catalog, make_offer

D = Decimal


def _catalog(tmp_path: Path, offers: list[Offer]) -> Path:
    catalog: Catalog = make_catalog(offers)
    path = tmp_path / "catalog.json"
    path.write_text(catalog.model_dump_json())
    return path


def _plan(tmp_path: Path, spec: str, offers: list[Offer], *args: str) -> tuple[int, str, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    code = main(["plan", str(path), "--catalog", str(_catalog(tmp_path, offers)), *args])
    return code, path.read_text(), str(path)


ON_DEMAND_ONLY = {"price_per_hour_usd": D("10"), "spot_price_per_hour_usd": None}
AWS = {"provider": "aws", "fabric": "ethernet", "fabric_gbps": 0}
SPOT_ONLY = {"price_per_hour_usd": None, "spot_price_per_hour_usd": D("4")}


@pytest.mark.parametrize(
    ("mode", "sold", "reason"),
    [
        ("spot", ON_DEMAND_ONLY, "spot: not sold spot (pricing.mode spot)"),
        ("on_demand", SPOT_ONLY, "on-demand: not sold on-demand (pricing.mode on_demand)"),
    ],
)
def test_a_product_not_sold_the_way_asked_says_which_way(
    mode: str, sold: dict[str, object], reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stage 15's sub-code was the variant's index, read as the spot flag: a spot-only spec on an
    on-demand product said "not sold on-demand". Pinned both ways, in the three places it shows."""
    spec = f"name: demo\ngpus: {{model: H100, count: 8}}\npricing: {{mode: {mode}}}\nworkload: {{hours: 2}}\n"
    offers = [make_offer(instance_type="only", **sold)]
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    catalog = _catalog(tmp_path, offers)
    assert main(["plan", str(path), "--catalog", str(catalog), "--explain", "-f", "json"]) == 3
    out, err = capsys.readouterr()
    # the exit-3 line
    line = f"{path}:3:11: pricing.mode: no offer fits: {reason} (lambda only; 1 rejected, see --explain)"
    assert err.splitlines()[0] == line
    doc = json.loads(out)
    # the one rejection and its group
    assert [r["reason"] for r in doc["rejected"]] == [reason]
    assert [(g["field"], g["reason"]) for g in doc["rejection_groups"]] == [("pricing.mode", reason.split(": ", 1)[1])]


def test_explain_never_lists_a_ranked_offer_among_the_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pricing.mode either: "both" is ranked spot ($4/h) and rejected on-demand ($50/h over the $40/h
    budget). The human reports listed it under the rejected too; now only "neither" is there."""
    spec = (
        "name: demo\ngpus: {model: H100, count: 8}\npricing: {mode: either, max_hourly_usd: 40}\nworkload: {hours: 2}\n"
    )
    offers = [
        make_offer(instance_type="both", price_per_hour_usd=D("50"), spot_price_per_hour_usd=D("4"), **AWS),
        make_offer(instance_type="neither", price_per_hour_usd=D("60"), spot_price_per_hour_usd=D("45"), **AWS),
    ]
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    catalog = _catalog(tmp_path, offers)
    for fmt in ("table", "markdown", "html"):
        assert main(["plan", str(path), "--catalog", str(catalog), "--explain", "-f", fmt]) == 0
        out = capsys.readouterr().out
        every = out[out.index("very rejected offer") :]
        assert "neither" in every and "both" not in every, (fmt, every)
        assert "both" in out[: out.index("very rejected offer")]  # ranked
    assert main(["plan", str(path), "--catalog", str(catalog), "--explain", "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(o["instance_type"], o["spot"]) for o in doc["options"]] == [("both", True)]
    # JSON keeps every (offer, variant) rejection, each with its variant named
    assert sorted(r["instance_type"] + " " + r["reason"].split(":")[0] for r in doc["rejected"]) == [
        "both on-demand",
        "neither on-demand",
        "neither spot",
    ]
