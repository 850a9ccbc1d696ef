"""docs/report-schema.json and `provisioner schema` say what the output is, and the output keeps it:
every example's report, and the no-fit report of a spec stopped at each stage, validate; the
promises the schema makes in words (the variant prefix, quote prices, number budgets) hold."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from provisioner.catalog import load_bundled_catalog
from provisioner.cli import main
from provisioner.errors import NoFeasibleOfferError, SpecError
from provisioner.loader import parse_spec
from provisioner.report import ReportMeta, render_report
from provisioner.report.facts import unplannable_result
from provisioner.spec import ClusterSpec
from tests.test_optimizer import REJECTIONS, make_offer, make_spec, plan

ROOT = Path(__file__).parents[1]
REPORT_SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
META = ReportMeta(generated_at=dt.datetime(2026, 11, 26, 5, 0, tzinfo=dt.UTC), tool_version="test")


def valid_report(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    jsonschema.validate(doc, REPORT_SCHEMA, format_checker=jsonschema.FormatChecker())
    exact = json.loads(text, parse_float=Decimal)
    for record in [*exact.get("rejected", []), *(e for g in exact["rejection_groups"] for e in g["examples"])]:
        prefixed = record["reason"].startswith(("on-demand: ", "spot: "))
        assert prefixed == (record["stage"] >= 15), record  # the schema's words on reason
        assert 1 <= record["stage"] <= 20
    for quote in exact["quotes"]:
        assert isinstance(quote["hourly_usd"], Decimal) and quote["purchase"] in ("reservation", "sales")
    return exact


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_report_validates(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(path), "-f", "json", "--explain"]) == 0
    doc = valid_report(capsys.readouterr().out)
    assert doc["options"] and doc["rejected"]


@pytest.mark.parametrize(
    ("spec_fields", "offer_fields", "field", "stage"), REJECTIONS, ids=[f"{r[3]}-{r[2]}" for r in REJECTIONS]
)
def test_every_no_fit_report_validates(
    spec_fields: dict[str, Any], offer_fields: dict[str, Any], field: str, stage: int
) -> None:
    spec = make_spec(**spec_fields)
    quote = make_offer(
        instance_type="1cc",
        purchase="reservation",
        price_per_hour_usd=Decimal("0.38333333"),
        how_to_obtain="ask sales",
        **{k: v for k, v in offer_fields.items() if k != "available"},
    )
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(spec, [make_offer(**offer_fields), quote], explain=True)
    result = unplannable_result(spec, dt.date(2026, 11, 22), "test", caught.value)
    for explain in (False, True):
        doc = valid_report(render_report(result, "json", explain=explain, meta=META))
        assert doc["options"] == [] and doc["rejection_groups"][0]["field"] == field
        assert doc["rejection_groups"][0]["stage"] == stage
        assert [q["hourly_usd"] for q in doc["quotes"]] in ([], [Decimal("0.76666666")])


def test_the_cli_no_fit_report_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "ib.yaml"
    spec.write_text(
        "name: ib\ngpus: {model: [H100], count: 16}\ninterconnect: {fabric: infiniband}\n"
        "control_plane: slurm\nworkload: {hours: 24}\n"
    )
    assert main(["plan", str(spec), "-f", "json"]) == 3  # the bundled catalog: a Lambda 1-Click Cluster fits
    doc = valid_report(capsys.readouterr().out)
    assert [q["instance_type"] for q in doc["quotes"]] == ["1cc_8x_h100_sxm5_ib"] and doc["options"] == []
    assert main(["plan", str(spec), "-f", "json", "--explain"]) == 3
    # every bundled offer but the one that fits (153 of the 154 when this was written)
    assert valid_report(capsys.readouterr().out)["rejected_count"] == len(load_bundled_catalog().offers) - 1


def test_the_spec_schema_says_budgets_are_numbers_as_the_loader_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    for path in EXAMPLES:  # every example spec is valid under the published schema
        import yaml

        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    budget = {"name": "bb", "gpus": {"count": 8}, "pricing": {"max_total_usd": "5"}}
    with pytest.raises(jsonschema.ValidationError, match=r"'5' is not valid"):
        jsonschema.validate(budget, schema)
    with pytest.raises(SpecError, match=r"pricing\.max_total_usd"):
        parse_spec('name: bb\ngpus: {count: 8}\npricing: {max_total_usd: "5"}\n', "b.yaml")
    number = {"name": "bb", "gpus": {"count": 8}, "pricing": {"max_total_usd": 4.35}}
    jsonschema.validate(number, schema)
    assert isinstance(ClusterSpec.model_validate(number).pricing.max_total_usd, Decimal)
    with pytest.raises(jsonschema.ValidationError, match="does not match"):  # the name rule is published too
        jsonschema.validate({**number, "name": "B"}, schema)
