"""When nothing can be bought: the quote-only products that fit are shown (every format, exit 3)
and the field blamed is the one that alone keeps out the most buyable options
(docs/cost-model.md, "When nothing fits")."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest

from provisioner.capabilities import Capability
from provisioner.catalog_model import Catalog
from provisioner.cli import main
from provisioner.costs import Stage
from provisioner.errors import NoFeasibleOfferError
from provisioner.spec import PROVIDER_NAMES
from tests.test_optimizer import ALL, make_catalog, make_offer, make_spec, plan

D = Decimal
SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report-schema.json").read_text())
HOW = "Reserved through Lambda sales, by the week: https://lambda.ai/1cc"


def one_click(**fields: object) -> object:
    return make_offer(
        instance_type="1cc_8x_h100_ib",
        purchase="reservation",
        min_nodes=2,
        max_nodes=64,
        price_per_hour_usd=D("27.92"),
        how_to_obtain=HOW,
        **fields,
    )


def ethernet(i: int) -> object:
    return make_offer(provider="aws", instance_type=f"eth{i}", fabric="ethernet", price_per_hour_usd=D("30"))


def over_budget(i: int) -> object:
    return make_offer(provider="aws", instance_type=f"ib{i}", price_per_hour_usd=D("900"))


NO_IB = {name: ALL for name in PROVIDER_NAMES} | {"runpod": ALL - {Capability.FABRIC_IB}}
SPEC = make_spec(interconnect={"fabric": "infiniband"}, pricing={"max_total_usd": 2000}, workload={"hours": 2})


def test_quote_only_products_that_fit_ride_on_the_no_fit_error() -> None:
    offers = [one_click(), ethernet(0), make_offer(provider="runpod", instance_type="cluster_ib")]
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(SPEC, offers, NO_IB)
    [quote] = caught.value.quotes  # type: ignore[attr-defined]
    assert (quote.instance_type, quote.nodes, quote.hourly_usd, quote.how_to_obtain) == (
        "1cc_8x_h100_ib",
        2,
        D("55.84"),
        HOW,
    )
    assert "quote-only products fit, not bought by this tool: lambda 1cc_8x_h100_ib" in str(caught.value)


def test_blame_goes_to_the_field_that_alone_keeps_out_the_most_buyable_options() -> None:
    # Three Ethernet offers fail only the fabric check; one InfiniBand cluster only the adapter
    # check (a fabric capability: interconnect.fabric too); two InfiniBand offers only the
    # budget, the furthest stage. Four to two: the fabric is blamed, not the budget.
    offers = [
        *(ethernet(i) for i in range(3)),
        make_offer(provider="runpod", instance_type="cluster_ib"),
        *(over_budget(i) for i in range(2)),
    ]
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(SPEC, offers, NO_IB)
    groups = caught.value.rejection_groups  # type: ignore[attr-defined]
    assert groups[0].stage == Stage.MAX_TOTAL  # the furthest stage is not what is blamed
    blamed = caught.value.blamed  # type: ignore[attr-defined]
    assert (blamed.field, blamed.stage) == ("interconnect.fabric", Stage.ADAPTER)
    # Five over budget outnumber them.
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(SPEC, [*offers, *(over_budget(i) for i in range(2, 5))], NO_IB)
    assert caught.value.blamed.field == "pricing.max_total_usd"  # type: ignore[attr-defined]


def test_an_option_failing_two_checks_is_not_counted_for_either() -> None:
    # Ethernet and over budget: lifting either field alone would not admit it. The one
    # within-budget Ethernet offer decides.
    offers = [
        make_offer(provider="aws", instance_type=f"both{i}", fabric="ethernet", price_per_hour_usd=D("900"))
        for i in range(5)
    ]
    with pytest.raises(NoFeasibleOfferError) as caught:
        plan(SPEC, [*offers, ethernet(0), over_budget(0), over_budget(1)], NO_IB)
    assert caught.value.blamed.field == "pricing.max_total_usd"  # type: ignore[attr-defined]


def _catalog_file(tmp_path: Path, offers: list[object]) -> Path:
    catalog: Catalog = make_catalog(offers)  # type: ignore[arg-type]
    path = tmp_path / "catalog.json"
    path.write_text(catalog.model_dump_json())
    return path


SPEC_YAML = """name: ib16
gpus: {model: [H100], count: 16}
interconnect: {fabric: infiniband}
control_plane: slurm
workload: {hours: 24}
"""


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown", "html"])
def test_a_no_fit_report_shows_the_quotes_in_every_format_and_exits_3(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "ib16.yaml"
    spec.write_text(SPEC_YAML)
    catalog = _catalog_file(tmp_path, [one_click(), ethernet(0), ethernet(1)])
    code = main(["plan", str(spec), "--catalog", str(catalog), "-f", fmt])
    out, err = capsys.readouterr()
    assert code == 3
    [line] = err.strip().splitlines()
    assert line.startswith(
        f"{spec}:3:16: interconnect.fabric: no offer fits: fabric ethernet does not provide "
        "infiniband (aws eth0; 2 rejected, see --explain); quote-only products fit"
    )
    if fmt == "json":
        doc = json.loads(out, parse_float=Decimal)
        jsonschema.validate(json.loads(out), SCHEMA, format_checker=jsonschema.FormatChecker())
        assert doc["options"] == [] and doc["feasible_count"] == 0
        assert doc["quotes"] == [
            {
                "provider": "lambda",
                "instance_type": "1cc_8x_h100_ib",
                "region": "us-east-1",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "nodes": 2,
                "purchase": "reservation",
                "hourly_usd": D("55.84"),
                "how_to_obtain": HOW,
            }
        ]
    elif fmt == "csv":
        [row] = list(csv.DictReader(io.StringIO(out)))
        assert (
            row["rank"],
            row["instance_type"],
            row["nodes"],
            row["hourly_usd"],
            row["purchase"],
            row["cost_total"],
            row["how_to_obtain"],
        ) == ("", "1cc_8x_h100_ib", "2", "55.84", "reservation", "", HOW)
    else:
        assert "1cc_8x_h100_ib" in out and "Quote only (1)" in out
        assert "lambda.ai/1cc" in out.replace("\n", "")


def test_without_quotes_a_no_fit_stays_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "ib16.yaml"
    spec.write_text(SPEC_YAML)
    catalog = _catalog_file(tmp_path, [ethernet(0), ethernet(1)])
    assert main(["plan", str(spec), "--catalog", str(catalog)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "quote-only" not in err


def test_a_reservation_or_sales_row_with_a_spot_price_is_refused(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from provisioner.catalog import load_catalog, save_columnar
    from provisioner.errors import CatalogError

    with pytest.raises(ValidationError, match="no spot price"):
        make_offer(purchase="sales", spot_price_per_hour_usd=D("1.5"))
    # The columnar file is checked by its own rules: the same row written around the model is refused.
    good = make_catalog(
        [make_offer(purchase="reservation"), make_offer(instance_type="b", spot_price_per_hour_usd=D("1.5"))]
    )
    path = tmp_path / "c.npz"
    save_columnar(good, path)
    import numpy as np

    with np.load(path) as npz:
        arrays = dict(npz)
    purchase = arrays["c.purchase"]
    arrays["c.purchase"] = np.array([purchase[0], purchase[0]], dtype=purchase.dtype)
    np.savez(path, **arrays)
    with pytest.raises(CatalogError, match=r"offers\[1\]\.spot_price_per_hour_usd: a reservation or sales product"):
        load_catalog(path)
