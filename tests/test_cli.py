"""The CLI end to end on the bundled catalog: examples plan, bad input exits 2 with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.loader import load_spec
from provisioner.plan import load_plan
from provisioner.spec import ClusterSpec, Fabric, PricingMode, canonical_gpu
from tests.conftest import EXAMPLES

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
FABRICS_OK = {
    Fabric.ANY: {"ethernet", "roce", "infiniband", "efa"},
    Fabric.ETHERNET: {"ethernet", "roce", "infiniband", "efa"},
    Fabric.ROCE: {"roce", "infiniband"},
    Fabric.INFINIBAND: {"infiniband"},
    Fabric.EFA: {"efa"},
}


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_feasible(option: dict, spec: ClusterSpec) -> None:
    assert option["gpus_per_node"] * option["nodes"] == spec.gpus.count
    if spec.gpus.model:
        assert canonical_gpu(option["gpu_model"]) in {canonical_gpu(m) for m in spec.gpus.model}
    if spec.nodes.gpus_per_node:
        assert option["gpus_per_node"] == spec.nodes.gpus_per_node
    if spec.nodes.count:
        assert option["nodes"] == spec.nodes.count
    if spec.providers.allow:
        assert option["provider"] in spec.providers.allow
    assert option["provider"] not in spec.providers.deny
    if spec.pricing.mode is PricingMode.ON_DEMAND:
        assert option["spot"] is False
    if spec.pricing.mode is PricingMode.SPOT:
        assert option["spot"] is True
    if spec.pricing.max_hourly_usd is not None:
        assert option["hourly_usd"] <= spec.pricing.max_hourly_usd + 1e-9
    if spec.pricing.max_total_usd is not None:
        assert option["cost"]["total"] <= spec.pricing.max_total_usd + 1e-9


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_plans_as_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["plan", str(path), "--format", "json", "--top", "1000"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    spec = load_spec(path)
    assert doc["as_of"] and doc["options"], doc
    totals = [option["cost"]["total"] for option in doc["options"]]
    assert totals == sorted(totals)
    assert [option["rank"] for option in doc["options"]] == list(range(1, len(totals) + 1))
    for option in doc["options"]:
        parts = option["cost"]
        assert round(parts["compute"] + parts["storage"] + parts["egress"] + parts["interruption"], 2) == \
            pytest.approx(parts["total"], abs=0.011)
        _assert_feasible(option, spec)
    for rejected in doc["rejected"]:
        assert set(rejected) >= {"provider", "instance_type", "region", "reason"}
        assert rejected["reason"]


def test_several_specs_give_a_json_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["plan", *map(str, EXAMPLE_FILES), "--format", "json"], capsys)
    assert code == 0
    docs = json.loads(out)
    assert [doc["spec"] for doc in docs] == [load_spec(p).name for p in EXAMPLE_FILES]


def test_h200_dataset_egress_changes_the_winner(capsys: pytest.CaptureFixture[str]) -> None:
    """With the dataset in aws:us-east-1 the winner differs from the same spec with no dataset."""
    path = EXAMPLES / "h200-dataset-aws.yaml"
    _, out, _ = run_cli(["plan", str(path), "--format", "json"], capsys)
    with_data = json.loads(out)["options"][0]
    assert with_data["cost"]["egress"] < 1000  # staying next to the data avoids the egress bill
    no_data = path.read_text().replace("location: aws:us-east-1", "location: none")
    alt = path.parent.parent / "test-artifacts" / "h200-no-dataset.yaml"
    alt.parent.mkdir(exist_ok=True)
    alt.write_text(no_data)
    _, out, _ = run_cli(["plan", str(alt), "--format", "json"], capsys)
    without = json.loads(out)["options"][0]
    assert (with_data["provider"], with_data["instance_type"]) != (without["provider"], without["instance_type"])


def test_save_plan_writes_a_frozen_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "plan.json"
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--save-plan", str(target)], capsys)
    assert code == 0, err
    plan = load_plan(target)
    assert plan.version == 1 and plan.option.rank == 1
    assert plan.spec == load_spec(EXAMPLE_FILES[0])


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "html"])
def test_every_format_renders(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / f"report.{fmt}"
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "-f", fmt, "-o", str(out_file)], capsys)
    assert code == 0, err
    assert out_file.stat().st_size > 200


BAD_SPECS = {
    "syntax.yaml": ("name: x\ngpus: [1\n", "syntax.yaml:3:1: YAML syntax error"),
    "unknown.yaml": ("name: demo\ngpus:\n  count: 8\n  modle: H100\n",
                     "unknown.yaml:4:3: gpus.modle: unknown key 'modle'; did you mean 'model'?"),
    "type.yaml": ("name: demo\ngpus:\n  count: eight\n", "type.yaml:3:10: gpus.count: Input should be a valid integer"),
    "split.yaml": ("name: demo\ngpus:\n  count: 12\nnodes:\n  gpus_per_node: 8\n",
                   "split.yaml:5:3: nodes.gpus_per_node: 12 GPUs cannot be split evenly into nodes of 8"),
    "ib.yaml": ("name: demo\ngpus:\n  count: 16\nnodes:\n  gpus_per_node: 8\ninterconnect:\n  fabric: infiniband\n"
                "providers:\n  allow: [aws, gcp]\n",
                "ib.yaml:7:3: interconnect.fabric: no offer fits"),
    "budget.yaml": ("name: demo\ngpus:\n  model: H100\n  count: 8\npricing:\n  max_total_usd: 5\n"
                    "workload:\n  hours: 100\n",
                    "budget.yaml:6:3: pricing.max_total_usd: no offer fits"),
}


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_specs_exit_2_with_one_located_line(name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = BAD_SPECS[name]
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run_cli(["plan", str(path)], capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(str(tmp_path / expected.split(":", 1)[0]) + ":" + expected.split(":", 1)[1]), lines[0]
    assert "Traceback" not in err


def test_missing_file_and_bad_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["plan", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "cannot read spec" in err
    bad = tmp_path / "catalog.json"
    bad.write_text('{"as_of": "2026-01-01", "providers": {}, "offers": [{"provider": "x"}]}')
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--catalog", str(bad)], capsys)
    assert code == 2 and err.startswith(f"error: {bad}: offers.0.") and len(err.strip().splitlines()) == 1


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--format", "pdf"], capsys)
    assert code == 2 and "--format" in err
    code, _, _ = run_cli(["frobnicate"], capsys)
    assert code == 2


def test_schema_is_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["schema"], capsys)
    assert code == 0
    schema = json.loads(out)
    assert schema["type"] == "object" and "gpus" in schema["properties"] and "name" in schema["required"]


def test_catalog_listing_filters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["catalog", "--provider", "lambda", "--gpu", "h100", "--format", "json"], capsys)
    assert code == 0
    offers = json.loads(out)["offers"]
    assert offers and {o["provider"] for o in offers} == {"lambda"} and {o["gpu_model"] for o in offers} == {"H100"}


def test_console_script_runs_in_a_fresh_process() -> None:
    spec = EXAMPLES / "pretrain-h100-slurm.yaml"
    result = subprocess.run([sys.executable, "-m", "provisioner.cli", "plan", str(spec)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "llm-pretrain" in result.stdout
