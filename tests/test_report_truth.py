"""Reports say the true thing (issue 27 item 5): which way a product is not sold, no ranked offer
among the rejected, and every single field whose relaxation alone lets an option fit."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from provisioner.catalog_model import Catalog
from provisioner.cli import main
from provisioner.offer import Offer
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
    ("mode", "sold", "reason", "relaxed"),
    [
        # bought on-demand it fits: 1 node x $10/h x 2 h
        (
            "spot",
            ON_DEMAND_ONLY,
            "spot: not sold spot (pricing.mode spot)",
            "pricing.mode (lambda only on-demand, $20.00",
        ),
        # Lambda's adapter buys nothing spot: no field alone lets it fit
        ("on_demand", SPOT_ONLY, "on-demand: not sold on-demand (pricing.mode on_demand)", None),
    ],
)
def test_a_product_not_sold_the_way_asked_says_which_way(
    mode: str,
    sold: dict[str, object],
    reason: str,
    relaxed: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
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
    suffix = f"; one field alone lets an option fit: {relaxed} expected)" if relaxed else ""
    assert err.splitlines()[0] == line + suffix
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


def _lambda(name: str, hourly: str, **fields: object) -> Offer:
    return make_offer(instance_type=name, price_per_hour_usd=D(hourly), spot_price_per_hour_usd=None, **fields)


def _aws_spot(name: str, hourly: str) -> Offer:
    return make_offer(
        instance_type=name,
        price_per_hour_usd=D("99"),
        spot_price_per_hour_usd=D(hourly),
        spot_interruptions_per_node_hour=0.0,
        **AWS,
    )


LAMBDA_SPOT = (
    "name: demo\ngpus: {model: H100, count: 8}\nproviders: {allow: [lambda]}\n"
    "pricing: {mode: spot, max_hourly_usd: 11}\nworkload: {hours: 2}\n"
)


def test_a_no_fit_names_every_field_that_alone_lets_an_option_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lambda sells nothing spot. Relaxing pricing.mode alone admits l10 on-demand (1 node x $10/h x
    2 h = $20.00; l30 would then be over the $11/h budget); relaxing providers.allow alone admits two
    AWS spot offers, the cheapest a4 (1 x $4 x 2 = $8.00); a20 fails the scope and the budget, so no
    one field admits it. The scope is blamed last though it admits more: pricing.mode is the blocker
    (it blamed providers.allow)."""
    offers = [
        _lambda("l10", "10"),
        _lambda("l30", "30"),
        _lambda("a100", "1", gpu_model="A100"),  # model and mode: no single field
        _aws_spot("a5", "5"),
        _aws_spot("a4", "4"),
        _aws_spot("a20", "20"),
    ]
    path = tmp_path / "spec.yaml"
    path.write_text(LAMBDA_SPOT)
    assert main(["plan", str(path), "--catalog", str(_catalog(tmp_path, offers))]) == 3
    out, err = capsys.readouterr()
    assert out == "", out
    assert err == (
        f"{path}:4:11: pricing.mode: no offer fits: spot: not sold spot (pricing.mode spot) (lambda l10; 6 rejected, "
        "see --explain); one field alone lets an option fit: pricing.mode (lambda l10 on-demand, $20.00 expected), "
        "providers.allow (aws a4 spot, $8.00 expected)\n"
    )


def test_markdown_keeps_each_warning_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two warnings (stale prices, no allowed_cidrs) were two "> " lines, which Markdown reads as one
    paragraph: the renderer ran them together. Each is its own quote now (read by markdown-it)."""
    from markdown_it import MarkdownIt

    example = Path(__file__).resolve().parents[1] / "examples" / "h200-dataset-aws.yaml"
    assert main(["plan", str(example), "-f", "markdown", "--top", "2"]) == 0
    out = capsys.readouterr().out
    tokens = MarkdownIt().parse(out)
    quoted, depth = [], 0
    for token in tokens:
        depth += {"blockquote_open": 1, "blockquote_close": -1}.get(token.type, 0)
        if depth and token.type == "inline":
            quoted.append(token.content)
    assert len(quoted) >= 2 and all(text.count("Warning:") == 1 for text in quoted), quoted
    assert any("access.allowed_cidrs is not set" in text for text in quoted)
