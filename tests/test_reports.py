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
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import pytest

from provisioner.loader import parse_spec
from provisioner.offer import Offer
from provisioner.plan import CostBreakdown, Option, PlanResult, RejectedOffer
from provisioner.report import ReportMeta, render_catalog, render_report
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
    # Identifiers outside SAFE_ID (spaces, markup) cannot come from a catalog any more; the reports
    # must still escape whatever reaches them, so such names are set without validation.
    shown = {name: fields.pop(name) for name in ("instance_type", "region") if name in fields}
    return Offer.model_validate({**fields, "instance_type": "x", "region": "r"}).model_copy(update=shown)


def make_option(
    rank: int,
    provider: str,
    instance_type: str,
    region: str,
    costs: tuple[float, float, float, float],
    *,
    zone: str | None = None,
    spot: bool = False,
    hourly_usd: float = 60.0,
) -> Option:
    compute, storage, egress, interruption = costs
    return Option(
        rank=rank,
        provider=provider,
        region="r",
        zone=zone,
        instance_type="x",
        gpu_model="H100",
        gpus_per_node=8,
        nodes=2,
        spot=spot,
        hourly_usd=hourly_usd,
        cost=CostBreakdown(
            compute=compute,
            storage=storage,
            egress=egress,
            interruption=interruption,
            total=compute + storage + egress + interruption,
        ),
        expected_interruptions=0.25 * rank,
        offer=make_offer(provider, instance_type, region, zone=zone),
    ).model_copy(update={"instance_type": instance_type, "region": region})


def make_result(with_options: bool = True) -> PlanResult:
    options = [
        make_option(1, "lambda", "gpu_8x_h100_sxm5", "us-east-1", (1532.16, 20.0, 45.5, 12.25), hourly_usd=63.84),
        make_option(2, "lambda", "gpu_8x_h100_sxm5", "us-west-1", (1600.0, 20.0, 45.5, 12.25)),
        make_option(
            3,
            "aws",
            "p5.48xlarge",
            "us-east-1",
            (1900.0, 40.0, 90.0, 120.0),
            zone="us-east-1a",
            spot=True,
            hourly_usd=79.5,
        ),
        make_option(4, "gcp", "a3-highgpu-8g", "us-central1", (2100.0, 35.0, 120.0, 8.0), zone="us-central1-a"),
        make_option(5, "runpod", "8x H100 SXM <fast>", "EU-RO-1", (2600.5, 0.0, 0.0, 30.0)),
    ]
    rejected = [
        RejectedOffer(
            provider="vastai",
            instance_type="8x RTX 4090",
            region="us",
            reason=FABRIC_REASON,
            field="interconnect.min_gbps_per_node",
        ),
        RejectedOffer(
            provider="fluence",
            instance_type="h100-1x",
            region="eu",
            reason=FABRIC_REASON,
            field="interconnect.min_gbps_per_node",
        ),
        RejectedOffer(
            provider="runpod",
            instance_type="1x H100 PCIe",
            region="US-TX-3",
            reason=FABRIC_REASON,
            field="interconnect.min_gbps_per_node",
        ),
        RejectedOffer(
            provider="runpod",
            instance_type="1x H100 PCIe",
            region="US-GA-1",
            reason=FABRIC_REASON,
            field="interconnect.min_gbps_per_node",
        ),
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

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report-schema.json").read_text())
META = ReportMeta(generated_at=dt.datetime(2026, 11, 12, 9, 30, tzinfo=dt.UTC), tool_version="9.9.9")


def validate_report(text: str) -> dict:
    """Parse a JSON report exactly (Decimal money) and validate it against docs/report-schema.json."""
    import jsonschema

    doc = json.loads(text, parse_float=Decimal)
    jsonschema.validate(json.loads(text), SCHEMA, format_checker=jsonschema.FormatChecker())
    return doc


def test_json_has_the_documented_shape_and_values(result: PlanResult) -> None:
    text = render_report(result, "json", meta=META)
    doc = validate_report(text)
    assert list(doc) == [
        "report_version",
        "spec",
        "generated_at",
        "tool_version",
        "as_of",
        "catalog",
        "provider_as_of",
        "warnings",
        "assumptions",
        "feasible_count",
        "options",
        "decided_by",
        "quotes",
        "rejected_count",
        "rejection_groups",
    ]
    assert (doc["report_version"], doc["spec"], doc["as_of"], doc["catalog"]) == (
        2,
        "demo-cluster",
        "2026-11-01",
        "bundled",
    )
    assert (doc["generated_at"], doc["tool_version"]) == ("2026-11-12T09:30:00Z", "9.9.9")
    assert doc["provider_as_of"] == {p: "2026-11-01" for p in ("aws", "gcp", "lambda", "runpod")}
    assert doc["warnings"] == [
        "prices older than 7 days: aws 2026-11-01 (11 days), gcp 2026-11-01 (11 days), lambda 2026-11-01 (11 days), "
        "runpod 2026-11-01 (11 days); run `provisioner catalog refresh` before buying"
    ]
    fresh = META.__class__(generated_at=dt.datetime(2026, 11, 8, tzinfo=dt.UTC), tool_version="9.9.9")
    assert validate_report(render_report(result, "json", meta=fresh))["warnings"] == []
    assert doc["assumptions"] == {
        "hours": 24,
        "dataset_size_gb": 0,
        "dataset_location": "none",
        "dataset_region": None,
        "results_out_gb": 0,
        "pricing_mode": "on_demand",
        "checkpoint_interval_minutes": 60,
        "restart_overhead_minutes": 10,
    }
    assert [o["rank"] for o in doc["options"]] == [1, 2, 3, 4, 5] and doc["feasible_count"] == 5
    first = doc["options"][0]
    assert list(first) == [
        "rank",
        "provider",
        "region",
        "zone",
        "instance_type",
        "gpu_model",
        "gpus_per_node",
        "nodes",
        "spot",
        "hourly_usd",
        "usd_per_gpu_hour",
        "expected_interruptions",
        "purchase",
        "bootstrap",
        "network",
        "as_of",
        "cost",
    ]
    assert list(first["cost"]) == ["compute", "storage", "egress", "interruption", "total", "boot_usd"]
    assert first["provider"] == "lambda" and first["zone"] is None and first["spot"] is False
    assert first["hourly_usd"] == Decimal("63.84") and first["usd_per_gpu_hour"] == Decimal("3.99")
    assert (first["purchase"], first["bootstrap"], first["network"]) == ("instance", "cloud_init", "private")
    assert first["cost"]["total"] == Decimal("1609.91")  # exact: 1532.16 + 20 + 45.5 + 12.25
    assert doc["options"][2]["zone"] == "us-east-1a" and doc["options"][2]["spot"] is True
    assert doc["decided_by"] == {
        "term": "compute",
        "margin_usd": Decimal("67.84"),
        "sentence": "#1 beats #2 (lambda gpu_8x_h100_sxm5 in us-west-1) by $67.84, decided by compute: $67.84 less.",
    }
    assert doc["quotes"] == [] and doc["rejected_count"] == 6 and "rejected" not in doc
    fabric = doc["rejection_groups"][0]
    assert (fabric["reason"], fabric["field"], fabric["count"]) == (FABRIC_REASON, "interconnect.min_gbps_per_node", 4)
    assert [e["instance_type"] for e in fabric["examples"]] == ["8x RTX 4090", "h100-1x", "1x H100 PCIe"]
    assert sum(g["count"] for g in doc["rejection_groups"]) == 6


def test_json_money_is_the_exact_decimal_text(result: PlanResult) -> None:
    exact = result.model_copy(
        update={
            "options": [
                result.options[0].model_copy(
                    update={
                        "hourly_usd": Decimal("159.60"),
                        "cost": result.options[0].cost.model_copy(update={"total": Decimal("0.1") + Decimal("0.2")}),
                    }
                ),
            ]
        }
    )
    text = render_report(exact, "json")
    assert '"hourly_usd": 159.60,' in text and '"total": 0.3' in text and "0.30000000000000004" not in text
    assert validate_report(text)["options"][0]["cost"]["total"] == Decimal("0.3")


def test_json_explain_adds_every_rejection_and_top_limits_options(result: PlanResult) -> None:
    doc = validate_report(render_report(result, "json", top=2, explain=True))
    assert [o["rank"] for o in doc["options"]] == [1, 2] and doc["feasible_count"] == 5
    assert len(doc["rejected"]) == 6
    assert doc["rejected"][4] == {
        "provider": "aws",
        "instance_type": "p5e.48xlarge",
        "region": "us-east-2",
        "reason": SCRIPT_REASON,
        "field": "",
        "stage": 0,
    }


def test_decided_by_names_the_term_that_outweighs_the_others(result: PlanResult) -> None:
    from provisioner.report.facts import decision

    near_data = make_option(1, "aws", "p5e.48xlarge", "us-east-1", (8317.46, 190.68, 36.0, 3.72))
    cheaper_far = make_option(2, "runpod", "cluster_8x_H200-SXM", "US-KS-2", (6594.02, 197.26, 3442.20, 5.60))
    found = decision([near_data, cheaper_far])
    assert found is not None and found.term == "egress"
    assert found.sentence == (
        "#1 beats #2 (runpod cluster_8x_H200-SXM in US-KS-2) by $1,691.22, decided by egress: "
        "$3,406.20 less, outweighing $1,723.44 more compute."
    )


# -- CSV ----------------------------------------------------------------------------------


def test_csv_parses_and_matches_json(result: PlanResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_report(result, "csv"))))
    doc = json.loads(render_report(result, "json"), parse_float=Decimal)
    assert len(rows) == len(doc["options"]) == 5
    assert list(rows[0]) == [
        "rank",
        "provider",
        "region",
        "zone",
        "instance_type",
        "gpu_model",
        "gpus_per_node",
        "nodes",
        "spot",
        "hourly_usd",
        "usd_per_gpu_hour",
        "expected_interruptions",
        "purchase",
        "bootstrap",
        "network",
        "as_of",
        "cost_compute",
        "cost_storage",
        "cost_egress",
        "cost_interruption",
        "cost_total",
        "how_to_obtain",
    ]
    for row, option in zip(rows, doc["options"], strict=True):
        assert int(row["rank"]) == option["rank"]
        assert row["instance_type"] == option["instance_type"]
        assert row["zone"] == (option["zone"] or "")
        assert row["spot"] == ("true" if option["spot"] else "false")
        assert Decimal(row["hourly_usd"]) == option["hourly_usd"]
        assert row["network"] == option["network"]
        for part in ("compute", "storage", "egress", "interruption", "total"):
            assert Decimal(row[f"cost_{part}"]) == option["cost"][part]
    assert len(list(csv.reader(io.StringIO(render_report(result, "csv", top=3))))) == 1 + 3


# -- Markdown ---------------------------------------------------------------------------------


def test_markdown_has_pipe_tables_assumptions_and_rejection_summary(result: PlanResult) -> None:
    text = render_report(result, "markdown", meta=META)
    lines = text.splitlines()
    assert lines[0] == "# Cost comparison: demo-cluster"
    assert "prices as of 2026-11-01 from bundled" in text
    assert (
        "**Assumptions:** 24 h run; no dataset to move; results out 0 GB; pricing on-demand; "
        "checkpoint every 60 min (restart 10 min)."
    ) in text
    assert (
        "**Price dates:** aws 2026-11-01, gcp 2026-11-01, lambda 2026-11-01, runpod 2026-11-01; "
        "generated 2026-11-12 09:30 UTC by gpu-provisioner 9.9.9."
    ) in text
    assert "> **Warning:** prices older than 7 days: aws 2026-11-01 (11 days)," in text
    assert "**Why #1:** #1 beats #2 (lambda gpu_8x_h100_sxm5 in us-west-1) by $67.84, decided by compute" in text
    assert "| 1 | lambda | us-east-1 | gpu_8x_h100_sxm5 | H100 x8 | 2 | no | private | $63.84 | $3.99 |" in text
    assert "| $1,609.91 |" in text
    ranked = text.split("## Ranked options (5 of 5 feasible)")[1].split("## Best per provider")[0]
    best = text.split("## Best per provider")[1].split("## Rejected offers")[0]
    assert sum(line.startswith("| ") for line in ranked.splitlines()) == 1 + 5
    best_rows = [line for line in best.splitlines() if line.startswith("| ") and "Provider" not in line]
    assert [row.split(" | ")[1] for row in best_rows] == ["lambda", "aws", "gcp", "runpod"]
    assert "## Rejected offers (6)" in text
    assert f"| 4 | - | interconnect.min_gbps_per_node | {FABRIC_REASON} |" in text
    assert r"not markup[/bold red] \| pipe in reason" in text
    assert "<script>" not in text and "8x H100 SXM &lt;fast>" in text
    assert "Quote only" not in text
    check_golden("report.md", text)


def test_markdown_explain_lists_every_rejection(result: PlanResult) -> None:
    text = render_report(result, "markdown", explain=True, top=1)
    assert "## Ranked options (1 of 5 feasible)" in text
    rejected = text.split("### Every rejected offer")[1]
    assert "| runpod | US-GA-1 | 1x H100 PCIe |" in rejected
    assert "| runpod | US-TX-3 | 1x H100 PCIe |" in rejected
    assert rejected.count(FABRIC_REASON) == 4


def with_folds_and_quotes(result: PlanResult) -> PlanResult:
    """rank 2 and 3 are rank 1's offer at the same price in two more regions; one quote-only product."""
    from provisioner.report.facts import QuoteRow

    same = [
        make_option(rank, "lambda", "gpu_8x_h100_sxm5", region, (1532.16, 20.0, 45.5, 12.25), hourly_usd=63.84)
        for rank, region in [(1, "us-east-1"), (2, "us-west-1"), (3, "us-south-1")]
    ]
    others = [o.model_copy(update={"rank": o.rank + 1}) for o in result.options[2:]]
    quote = QuoteRow(
        provider="lambda",
        instance_type="1cc-h100-64",
        region="us-east-1",
        gpu_model="H100",
        gpus_per_node=8,
        nodes=8,
        purchase="sales",
        hourly_usd=Decimal("447.36"),
        how_to_obtain="https://lambda.ai/contact (1-Click Clusters are sold by sales)",
    )
    return result.model_copy(update={"options": [*same, *others], "quotes": [quote]})


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_identical_offers_in_several_regions_fold_into_one_row_and_quotes_stand_apart(
    result: PlanResult, fmt: str
) -> None:
    text = render_report(with_folds_and_quotes(result), fmt, width=160)
    assert "3 regions" in text and "us-south-1" in text
    assert "Quote only (1)" in text and "1-Click Clusters are sold by sales" in text
    ranked = text.split("Best per provider")[0]
    assert "1cc-h100-64" not in ranked  # never ranked
    if fmt == "html":
        assert re.findall(r'<g class="bar-group" data-rank="(\d+)"', text) == ["1", "4", "5", "6"]
    doc = validate_report(render_report(with_folds_and_quotes(result), "json"))
    assert [o["region"] for o in doc["options"][:3]] == ["us-east-1", "us-west-1", "us-south-1"]  # JSON: every option
    assert doc["quotes"][0]["hourly_usd"] == Decimal("447.36") and doc["quotes"][0]["purchase"] == "sales"


# -- terminal table -----------------------------------------------------------------------


def test_table_shows_header_winner_best_per_provider_and_grouped_reasons(result: PlanResult) -> None:
    text = render_report(result, "table", width=160, meta=META)
    assert "demo-cluster: 16 GPUs (H100 or H200) for 24 h" in text
    assert "assumes 24 h run; no dataset to move; results out 0 GB; pricing on-demand; checkpoint every 60 min" in text
    assert "prices as of 2026-11-01 from bundled; provider price dates: aws 2026-11-01, gcp 2026-11-01" in text
    assert "generated 2026-11-12 09:30 UTC by gpu-provisioner 9.9.9" in text
    assert "warning: prices older than 7 days: aws 2026-11-01 (11 days)," in text
    assert (
        "Cheapest: lambda gpu_8x_h100_sxm5 in us-east-1: 2 x H100 x8, on-demand, $63.84/h ($3.99/GPU-h), "
        "$1,609.91 expected total; nodes talk over the provider's private network" in " ".join(text.split())
    )
    assert "Why #1: #1 beats #2 (lambda gpu_8x_h100_sxm5 in us-west-1) by $67.84, decided by compute" in text
    assert "\x1b[" not in text
    ranked, rest = text.split("Ranked options (5 of 5 feasible)")[1].split("Best per provider")
    best, rejected = rest.split("Rejected offers (6)")
    assert re.search(
        r"4\s+gcp\s+us-central1\s+a3-highgpu-8g\s+H100 x8\s+2\s+no\s+private\s+60\.00\s+3\.75\s+"
        r"2,100\.00\s+35\.00\s+120\.00\s+8\.00\s+2,263\.00",
        ranked,
    )
    assert "USD: $/h for the whole cluster, costs expected over 24 h" in ranked
    best_providers = [line.split()[1] for line in best.splitlines() if re.match(r"^\s*\d+ ", line)]
    assert best_providers == ["lambda", "aws", "gcp", "runpod"]
    assert re.search(r"^\s*4\s+-\s+interconnect.min_gbps_per_node\s+fabric ethernet/100 Gbps", rejected, re.MULTILINE)
    assert "vastai 8x RTX 4090" in rejected
    assert "[bold red]not markup[/bold red]" in rejected  # user text is never read as rich markup
    assert "(--explain lists every rejected offer)" in rejected
    check_golden("report.txt", text)


def test_table_explain_lists_every_rejected_offer(result: PlanResult) -> None:
    text = render_report(result, "table", explain=True, width=200)
    rejected = text.split("Every rejected offer (6)")[1]
    for item in result.rejected:
        line = next(line for line in rejected.splitlines() if item.instance_type in line and item.region in line)
        assert item.reason.split()[0] in line
    assert rejected.count(FABRIC_REASON) == 4


def test_table_top_limits_ranked_rows(result: PlanResult) -> None:
    text = render_report(result, "table", top=2, width=160)
    ranked = text.split("Ranked options (2 of 5 feasible)")[1].split("Best per provider")[0]
    assert "us-west-1" in ranked and "p5.48xlarge" not in ranked


def test_narrow_table_drops_the_breakdown_but_keeps_totals(result: PlanResult) -> None:
    text = render_report(result, "table", width=80)
    ranked = text.split("Ranked options (5 of 5 feasible)")[1].split("Best per provider")[0]
    assert max(len(line) for line in ranked.splitlines()) <= 80
    assert "compute" not in ranked and "2,630.50" in ranked
    assert "(cost breakdown from\n140 columns)" in ranked or "(cost breakdown from 140\ncolumns)" in ranked


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
        assert width == pytest.approx(float(BAR_AREA_W * totals[rank] / totals[5]), abs=0.05)


def test_html_escapes_all_text(result: PlanResult) -> None:
    page = render_report(result, "html", explain=True)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "8x H100 SXM &lt;fast&gt;" in page
    assert "<fast>" not in page
    check_golden("report.html", render_report(result, "html", meta=META))


# -- catalog listing ----------------------------------------------------------------------


def test_render_catalog_table_and_json() -> None:
    offers = [
        make_offer(
            "lambda",
            "gpu_8x_h100_sxm5",
            "us-east-1",
            fabric="infiniband",
            fabric_gbps=3200,
            egress_usd_per_gb=0.0,
            reliability=0.995,
        ),
        make_offer(
            "vastai",
            "[red]8x RTX 4090",
            "us",
            gpu_model="RTX4090",
            gpu_memory_gib=24,
            price_per_hour_usd=None,
            spot_price_per_hour_usd=2.4,
            egress_usd_per_gb=0.02,
        ),
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
        rej("aws", "on-demand: GPU A100 is not one of H100"),
        rej("aws", "spot: GPU A100 is not one of H100"),
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
    assert (
        json.loads(render_report(doubled, "json", explain=True))["rejected"][-1]["reason"]
        == "spot: GPU A100 is not one of H100"
    )
