"""Reports rendered from a hand-built PlanResult: JSON/CSV shape and values, Markdown,
terminal tables, and the self-contained HTML page (structure and escaping).

Golden files for the human formats live in tests/golden/report/; refresh them with
UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from provisioner.loader import parse_spec
from provisioner.offer import Offer
from provisioner.plan import CostBreakdown, Option, PlanResult, RejectedOffer
from provisioner.report import render_catalog, render_report
from provisioner.report.html import BAR_AREA_W
from tests.conftest import assert_golden_file

GOLDEN = Path(__file__).parent / "golden" / "report"

SPEC_YAML = """\
name: demo-cluster
gpus:
  model: [H100, H200]
  count: 16
nodes:
  gpus_per_node: 8
workload:
  hours: 24
"""

SCRIPT_REASON = "<script>alert('x')</script> price above pricing.max_hourly_usd"
MARKUP_REASON = "[bold red]not markup[/bold red] | pipe in reason"
FABRIC_REASON = "fabric ethernet/100 Gbps is below interconnect.min_gbps_per_node=400"


def make_offer(provider: str, instance_type: str, region: str, **extra: object) -> Offer:
    fields: dict[str, object] = {
        "provider": provider,
        "instance_type": instance_type,
        "region": region,
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "vcpus": 192,
        "memory_gib": 2048,
        "price_per_hour_usd": 30.0,
        "interruptions_per_node_hour": 0.0002,
        "interruption_basis": "test fixture",
        "max_nodes": 8,
    }
    fields.update(extra)
    return Offer.model_validate(fields)


def make_option(
    rank: int, provider: str, instance_type: str, region: str, costs: tuple[float, float, float, float],
    *, zone: str | None = None, spot: bool = False, hourly_usd: float = 60.0,
) -> Option:
    compute, storage, egress, interruption = costs
    return Option(
        rank=rank,
        provider=provider,
        region=region,
        zone=zone,
        instance_type=instance_type,
        gpu_model="H100",
        gpus_per_node=8,
        nodes=2,
        spot=spot,
        hourly_usd=hourly_usd,
        cost=CostBreakdown(
            compute=compute, storage=storage, egress=egress, interruption=interruption,
            total=compute + storage + egress + interruption,
        ),
        expected_interruptions=0.25 * rank,
        offer=make_offer(provider, instance_type, region, zone=zone),
    )


def make_result(with_options: bool = True) -> PlanResult:
    options = [
        make_option(1, "lambda", "gpu_8x_h100_sxm5", "us-east-1", (1532.16, 20.0, 45.5, 12.25),
                    hourly_usd=63.84),
        make_option(2, "lambda", "gpu_8x_h100_sxm5", "us-west-1", (1600.0, 20.0, 45.5, 12.25)),
        make_option(3, "aws", "p5.48xlarge", "us-east-1", (1900.0, 40.0, 90.0, 120.0),
                    zone="us-east-1a", spot=True, hourly_usd=79.5),
        make_option(4, "gcp", "a3-highgpu-8g", "us-central1", (2100.0, 35.0, 120.0, 8.0), zone="us-central1-a"),
        make_option(5, "runpod", "8x H100 SXM <fast>", "EU-RO-1", (2600.5, 0.0, 0.0, 30.0)),
    ]
    rejected = [
        RejectedOffer(provider="vastai", instance_type="8x RTX 4090", region="us", reason=FABRIC_REASON,
                      field="interconnect.min_gbps_per_node"),
        RejectedOffer(provider="fluence", instance_type="h100-1x", region="eu", reason=FABRIC_REASON),
        RejectedOffer(provider="runpod", instance_type="1x H100 PCIe", region="US-TX-3", reason=FABRIC_REASON),
        RejectedOffer(provider="runpod", instance_type="1x H100 PCIe", region="US-GA-1", reason=FABRIC_REASON),
        RejectedOffer(provider="aws", instance_type="p5e.48xlarge", region="us-east-2", reason=SCRIPT_REASON),
        RejectedOffer(provider="gcp", instance_type="a3-megagpu-8g", region="europe-west4", reason=MARKUP_REASON),
    ]
    return PlanResult(
        spec=parse_spec(SPEC_YAML),
        catalog_as_of=dt.date(2026, 11, 1),
        catalog_origin="bundled",
        options=options if with_options else [],
        rejected=rejected,
    )


@pytest.fixture
def result() -> PlanResult:
    return make_result()


def check_golden(name: str, text: str) -> None:
    assert_golden_file(GOLDEN / name, text)


# -- JSON ---------------------------------------------------------------------------------

def test_json_has_the_documented_shape_and_values(result: PlanResult) -> None:
    text = render_report(result, "json")
    assert text.startswith('{\n  "spec": "demo-cluster",\n  "as_of": "2026-11-01",')
    doc = json.loads(text)
    assert list(doc) == ["spec", "as_of", "catalog", "options", "rejected"]
    assert doc["catalog"] == "bundled"
    assert [o["rank"] for o in doc["options"]] == [1, 2, 3, 4, 5]
    first = doc["options"][0]
    assert list(first) == [
        "rank", "provider", "region", "zone", "instance_type", "gpu_model", "gpus_per_node", "nodes",
        "spot", "hourly_usd", "expected_interruptions", "cost",
    ]
    assert list(first["cost"]) == ["compute", "storage", "egress", "interruption", "total"]
    assert first["provider"] == "lambda" and first["zone"] is None and first["spot"] is False
    assert first["hourly_usd"] == 63.84
    assert first["cost"]["total"] == result.options[0].cost.total == pytest.approx(1609.91)
    assert doc["options"][2]["zone"] == "us-east-1a" and doc["options"][2]["spot"] is True
    assert [o["cost"]["total"] for o in doc["options"]] == [o.cost.total for o in result.options]
    assert len(doc["rejected"]) == 6
    assert doc["rejected"][4] == {
        "provider": "aws", "instance_type": "p5e.48xlarge", "region": "us-east-2", "reason": SCRIPT_REASON,
    }


def test_json_top_limits_options_but_keeps_every_rejection(result: PlanResult) -> None:
    doc = json.loads(render_report(result, "json", top=2))
    assert [o["rank"] for o in doc["options"]] == [1, 2]
    assert len(doc["rejected"]) == 6


# -- CSV ----------------------------------------------------------------------------------

def test_csv_parses_and_matches_json(result: PlanResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_report(result, "csv"))))
    doc = json.loads(render_report(result, "json"))
    assert len(rows) == len(doc["options"]) == 5
    assert list(rows[0]) == [
        "rank", "provider", "region", "zone", "instance_type", "gpu_model", "gpus_per_node", "nodes",
        "spot", "hourly_usd", "expected_interruptions",
        "cost_compute", "cost_storage", "cost_egress", "cost_interruption", "cost_total",
    ]
    for row, option in zip(rows, doc["options"], strict=True):
        assert int(row["rank"]) == option["rank"]
        assert row["instance_type"] == option["instance_type"]
        assert row["zone"] == (option["zone"] or "")
        assert row["spot"] == ("true" if option["spot"] else "false")
        assert float(row["hourly_usd"]) == option["hourly_usd"]
        for part, value in option["cost"].items():
            assert float(row[f"cost_{part}"]) == value
    assert len(list(csv.reader(io.StringIO(render_report(result, "csv", top=3))))) == 1 + 3


# -- Markdown -----------------------------------------------------------------------------

def test_markdown_has_pipe_tables_and_rejection_summary(result: PlanResult) -> None:
    text = render_report(result, "markdown")
    lines = text.splitlines()
    assert lines[0] == "# Cost comparison: demo-cluster"
    assert "prices as of 2026-11-01 from bundled" in text
    assert "| 1 | lambda | us-east-1 | gpu_8x_h100_sxm5 | H100 x8 | 2 | no | $63.84 |" in text
    assert "| $1,609.91 |" in text
    ranked = text.split("## Ranked options (5 of 5)")[1].split("## Best per provider")[0]
    best = text.split("## Best per provider")[1].split("## Rejected offers")[0]
    assert sum(line.startswith("| ") for line in ranked.splitlines()) == 1 + 5
    best_rows = [line for line in best.splitlines() if line.startswith("| ") and "Provider" not in line]
    assert [row.split(" | ")[1] for row in best_rows] == ["lambda", "aws", "gcp", "runpod"]
    assert "## Rejected offers (6)" in text
    assert f"| {FABRIC_REASON} | 4 |" in text
    assert r"not markup[/bold red] \| pipe in reason" in text
    assert "<script>" not in text and "8x H100 SXM &lt;fast>" in text
    check_golden("report.md", text)


def test_markdown_explain_lists_every_rejection(result: PlanResult) -> None:
    text = render_report(result, "markdown", explain=True, top=1)
    assert "## Ranked options (1 of 5)" in text
    rejected = text.split("## Rejected offers (6)")[1]
    assert "| runpod | US-GA-1 | 1x H100 PCIe |" in rejected
    assert "| runpod | US-TX-3 | 1x H100 PCIe |" in rejected
    assert rejected.count(FABRIC_REASON) == 4


# -- terminal table -----------------------------------------------------------------------

def test_table_shows_header_winner_best_per_provider_and_grouped_reasons(result: PlanResult) -> None:
    text = render_report(result, "table", width=160)
    assert "demo-cluster: 16 GPUs (H100 or H200) for 24 h" in text
    assert "prices as of 2026-11-01 from bundled" in text
    assert "Cheapest: lambda gpu_8x_h100_sxm5 in us-east-1: 2 x H100 x8, on-demand, $63.84/h, " \
           "$1,609.91 expected total" in text
    assert "\x1b[" not in text
    ranked, rest = text.split("Ranked options (5 of 5)")[1].split("Best per provider")
    best, rejected = rest.split("Rejected offers (6)")
    assert re.search(r"4\s+gcp\s+us-central1\s+a3-highgpu-8g\s+H100 x8\s+2\s+no\s+60\.00\s+2,100\.00\s+"
                     r"35\.00\s+120\.00\s+8\.00\s+2,263\.00", ranked)
    assert "USD: $/h for the whole cluster, costs expected over 24 h" in ranked
    best_providers = [line.split()[1] for line in best.splitlines() if re.match(r"^\s*\d+ ", line)]
    assert best_providers == ["lambda", "aws", "gcp", "runpod"]
    assert re.search(r"^\s*4\s+fabric ethernet/100 Gbps", rejected, re.MULTILINE)
    assert "vastai 8x RTX 4090" in rejected
    assert "[bold red]not markup[/bold red]" in rejected  # user text is never read as rich markup
    assert "(--explain lists every rejected offer)" in rejected
    check_golden("report.txt", text)


def test_table_explain_lists_every_rejected_offer(result: PlanResult) -> None:
    text = render_report(result, "table", explain=True, width=200)
    rejected = text.split("Rejected offers (6)")[1]
    for item in result.rejected:
        line = next(line for line in rejected.splitlines()
                    if item.instance_type in line and item.region in line)
        assert item.reason.split()[0] in line
    assert rejected.count(FABRIC_REASON) == 4


def test_table_top_limits_ranked_rows(result: PlanResult) -> None:
    text = render_report(result, "table", top=2, width=160)
    ranked = text.split("Ranked options (2 of 5)")[1].split("Best per provider")[0]
    assert "us-west-1" in ranked and "p5.48xlarge" not in ranked


def test_narrow_table_drops_the_breakdown_but_keeps_totals(result: PlanResult) -> None:
    text = render_report(result, "table", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    ranked = text.split("Ranked options (5 of 5)")[1].split("Best per provider")[0]
    assert "compute" not in ranked and "2,630.50" in ranked
    assert "(cost breakdown from\n118 columns)" in ranked


def test_table_colour_only_on_request(result: PlanResult) -> None:
    assert "\x1b[" in render_report(result, "table", color=True)
    assert "\x1b[" not in render_report(result, "table", color=False)


def test_no_options_is_said_clearly_in_every_format() -> None:
    empty = make_result(with_options=False)
    message = "No offer fits this spec (6 offers rejected)."
    assert message in render_report(empty, "table")
    assert message in render_report(empty, "markdown")
    assert message in render_report(empty, "html")
    assert json.loads(render_report(empty, "json"))["options"] == []
    assert render_report(empty, "csv").count("\n") == 1
    assert "bar-group" not in render_report(empty, "html")


def test_bad_format_or_top_raises_value_error(result: PlanResult) -> None:
    with pytest.raises(ValueError, match="unknown report format 'xml'"):
        render_report(result, "xml")
    with pytest.raises(ValueError, match="top must be at least 1"):
        render_report(result, "table", top=0)


def test_reports_never_carry_environment_secrets(result: PlanResult, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = "sk-CANARY-7f3e9d1c"
    monkeypatch.setenv("LAMBDA_API_KEY", canary)
    monkeypatch.setenv("RUNPOD_API_KEY", canary)
    for fmt in ("table", "json", "csv", "markdown", "html"):
        assert canary not in render_report(result, fmt, explain=True)


# -- HTML ---------------------------------------------------------------------------------

def test_html_is_self_contained(result: PlanResult) -> None:
    page = render_report(result, "html")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # the browser itself refuses any fetch


def test_html_has_one_bar_group_per_shown_option(result: PlanResult) -> None:
    page = render_report(result, "html")
    assert re.findall(r'<g class="bar-group" data-rank="(\d+)"', page) == ["1", "2", "3", "4", "5"]
    three = render_report(result, "html", top=3)
    assert re.findall(r'<g class="bar-group" data-rank="(\d+)"', three) == ["1", "2", "3"]
    for part in ("compute", "storage", "egress", "interruption"):
        assert re.search(rf"<text [^>]*>{part}</text>", page), f"legend entry {part}"


class _BarWidths(HTMLParser):
    """Sum the segment rect widths inside each ``g.bar-group``, keyed by data-rank."""

    def __init__(self) -> None:
        super().__init__()
        self.widths: dict[int, float] = {}
        self._rank: int | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "g":
            if attr.get("class") == "bar-group":
                self._rank, self._depth = int(attr["data-rank"] or 0), 0
                self.widths[self._rank] = 0.0
            elif self._rank is not None:
                self._depth += 1
        elif tag == "rect" and self._rank is not None:
            self.widths[self._rank] += float(attr["width"] or 0)

    def handle_endtag(self, tag: str) -> None:
        if tag == "g" and self._rank is not None:
            if self._depth == 0:
                self._rank = None
            else:
                self._depth -= 1


def test_html_bars_are_scaled_to_the_dearest_option(result: PlanResult) -> None:
    parser = _BarWidths()
    parser.feed(render_report(result, "html"))
    assert sorted(parser.widths) == [1, 2, 3, 4, 5]
    totals = {o.rank: o.cost.total for o in result.options}
    assert parser.widths[5] == pytest.approx(BAR_AREA_W, abs=0.05)
    for rank, width in parser.widths.items():
        assert width == pytest.approx(BAR_AREA_W * totals[rank] / totals[5], abs=0.05)


def test_html_escapes_all_text(result: PlanResult) -> None:
    page = render_report(result, "html", explain=True)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "8x H100 SXM &lt;fast&gt;" in page
    assert "<fast>" not in page
    check_golden("report.html", render_report(result, "html"))


# -- catalog listing ----------------------------------------------------------------------

def test_render_catalog_table_and_json() -> None:
    offers = [
        make_offer("lambda", "gpu_8x_h100_sxm5", "us-east-1", fabric="infiniband", fabric_gbps=3200,
                   egress_usd_per_gb=0.0, reliability=0.995),
        make_offer("vastai", "[red]8x RTX 4090", "us", gpu_model="RTX4090", gpu_memory_gib=24,
                   price_per_hour_usd=None, spot_price_per_hour_usd=2.4, egress_usd_per_gb=0.02),
    ]
    table = render_catalog(offers, "table", dt.date(2026, 11, 1), "/tmp/cache/catalog.json")
    assert "2 offers; prices as of 2026-11-01 from /tmp/cache/catalog.json" in table
    lambda_line = next(line for line in table.splitlines() if "gpu_8x_h100_sxm5" in line)
    assert re.search(r"H100 x8\s+80 GiB\s+infiniband/3200\s+\$30\.00\s+-\s+\$0\.000\s+0\.995", lambda_line)
    vast_line = next(line for line in table.splitlines() if "RTX 4090" in line)
    assert "[red]8x RTX 4090" in vast_line and re.search(r"-\s+\$2\.40\s+\$0\.020", vast_line)
    doc = json.loads(render_catalog(offers, "json", "2026-11-01", "bundled"))
    assert doc["as_of"] == "2026-11-01" and doc["catalog"] == "bundled"
    assert [o["instance_type"] for o in doc["offers"]] == ["gpu_8x_h100_sxm5", "[red]8x RTX 4090"]
    assert doc["offers"][1]["price_per_hour_usd"] is None
    with pytest.raises(ValueError, match="unknown catalog format"):
        render_catalog(offers, "csv", "2026-11-01", "bundled")


def test_human_reports_merge_a_reason_shared_by_both_pricing_variants() -> None:
    from provisioner.report.view import merge_variants

    def rej(provider: str, reason: str, region: str = "r1") -> RejectedOffer:
        return RejectedOffer(provider=provider, instance_type="t", region=region, reason=reason)

    rejected = [
        rej("aws", "on-demand: GPU A100 is not one of H100"), rej("aws", "spot: GPU A100 is not one of H100"),
        rej("lambda", "spot: not sold spot (pricing.mode either)"),
        rej("gcp", "on-demand: expected total $9.00 is over $5.00"),
        rej("gcp", "spot: expected total $6.00 is over $5.00"),
        # two marketplace asks with the same name and place: two offers, each judged twice
        *[rej("vastai", f"{variant}: reliability 0.6 is below 0.9", "US") for variant in ("on-demand", "spot") * 2],
    ]
    assert [(r.provider, r.reason) for r in merge_variants(rejected)] == [
        ("aws", "GPU A100 is not one of H100"),
        ("lambda", "spot: not sold spot (pricing.mode either)"),
        ("gcp", "on-demand: expected total $9.00 is over $5.00"),
        ("gcp", "spot: expected total $6.00 is over $5.00"),
        ("vastai", "reliability 0.6 is below 0.9"),
        ("vastai", "reliability 0.6 is below 0.9"),
    ]
    result = make_result()
    doubled = result.model_copy(update={"rejected": [*result.rejected, *rejected[:2]]})
    table = render_report(doubled, "table", width=150)
    assert "GPU A100 is not one of H100" in table and "spot: GPU A100" not in table
    assert f"Rejected offers ({len(result.rejected) + 1})" in table
    assert json.loads(render_report(doubled, "json"))["rejected"][-1]["reason"] == "spot: GPU A100 is not one of H100"
