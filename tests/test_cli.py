"""The CLI end to end on the bundled catalog: examples plan, bad input exits 2 with one line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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


SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report-schema.json").read_text())


def validate_report(text: str) -> Any:
    """The JSON report validated against docs/report-schema.json, parsed with float money for arithmetic."""
    import jsonschema

    doc = json.loads(text)
    jsonschema.validate(doc, SCHEMA, format_checker=jsonschema.FormatChecker())
    return doc


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
        assert option["hourly_usd"] <= spec.pricing.max_hourly_usd
    if spec.pricing.max_total_usd is not None:
        assert option["cost"]["total"] <= spec.pricing.max_total_usd


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_plans_as_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["plan", str(path), "--format", "json", "--top", "1000"], capsys)
    assert code == 0, err
    doc = validate_report(out)
    spec = load_spec(path)
    assert doc["generated_at"] and doc["tool_version"] and doc["assumptions"]["hours"] == spec.workload.hours
    assert doc["as_of"] and doc["options"], doc
    totals = [option["cost"]["total"] for option in doc["options"]]
    assert totals == sorted(totals)
    assert [option["rank"] for option in doc["options"]] == list(range(1, len(totals) + 1))
    for option in doc["options"]:
        parts = option["cost"]
        assert round(parts["compute"] + parts["storage"] + parts["egress"] + parts["interruption"], 2) == pytest.approx(
            parts["total"], abs=0.011
        )
        _assert_feasible(option, spec)
    assert "rejected" not in doc
    for group in doc["rejection_groups"]:
        assert group["reason"] and group["count"] >= len(group["examples"]) >= 1
    assert sum(g["count"] for g in doc["rejection_groups"]) == doc["rejected_count"]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_every_example_json_matches_the_report_schema_with_explain(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["plan", str(path), "--format", "json", "--explain"], capsys)
    assert code == 0, err
    doc = validate_report(out)
    assert len(doc["rejected"]) >= doc["rejected_count"] > 0


def test_several_specs_give_a_json_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["plan", *map(str, EXAMPLE_FILES), "--format", "json"], capsys)
    assert code == 0
    docs = validate_report(out)
    assert [doc["spec"] for doc in docs] == [load_spec(p).name for p in EXAMPLE_FILES]


def test_h200_dataset_egress_changes_the_winner(capsys: pytest.CaptureFixture[str]) -> None:
    """With 80 TB in aws:us-east-1, AWS next to the data beats RunPod's cheaper-per-hour Instant
    Cluster, which would pay the egress; us-east-1 leads the other AWS regions by the inter-region
    transfer. With no dataset RunPod wins and the AWS regions tie."""
    path = EXAMPLES / "h200-dataset-aws.yaml"
    _, out, _ = run_cli(["plan", str(path), "--format", "json"], capsys)
    options = json.loads(out)["options"]
    first = options[0]
    assert (first["provider"], first["region"]) == ("aws", "us-east-1")
    assert first["cost"]["egress"] < 1000  # next to the data: only the results leave
    runpod = next(o for o in options if o["provider"] == "runpod")
    assert runpod["purchase"] == "cluster" and runpod["hourly_usd"] < first["hourly_usd"]
    assert runpod["cost"]["egress"] > 6000  # 80 TB out of AWS is priced
    assert runpod["cost"]["compute"] < first["cost"]["compute"] < runpod["cost"]["compute"] + runpod["cost"]["egress"]
    aws = [o for o in options if o["provider"] == "aws"]
    # another AWS region pays the inter-region transfer: 80,000 GB x $0.02
    assert aws[1]["cost"]["total"] - aws[0]["cost"]["total"] == pytest.approx(1600, abs=0.001)
    no_data = path.read_text().replace("location: aws:us-east-1", "location: none")
    alt = path.parent.parent / "test-artifacts" / "h200-no-dataset.yaml"
    alt.parent.mkdir(exist_ok=True)
    alt.write_text(no_data)
    _, out, _ = run_cli(["plan", str(alt), "--format", "json"], capsys)
    without = json.loads(out)["options"]
    assert without[0]["provider"] == "runpod" and without[0]["cost"]["egress"] == 0
    without_aws = [o for o in without if o["provider"] == "aws"]
    assert without_aws[1]["cost"]["total"] == without_aws[0]["cost"]["total"]  # no data: the regions tie


def test_save_plan_writes_a_frozen_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "plan.json"
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--save-plan", str(target)], capsys)
    assert code == 0, err
    plan = load_plan(target)
    assert plan.version == 2 and plan.option.rank == 1
    assert plan.spec == load_spec(EXAMPLE_FILES[0])


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "html"])
def test_every_format_renders(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / f"report.{fmt}"
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "-f", fmt, "-o", str(out_file)], capsys)
    assert code == 0, err
    assert out_file.stat().st_size > 200


BAD_SPECS = {
    "syntax.yaml": ("name: x\ngpus: [1\n", "syntax.yaml:3:1: YAML syntax error"),
    "unknown.yaml": (
        "name: demo\ngpus:\n  count: 8\n  modle: H100\n",
        "unknown.yaml:4:3: gpus.modle: unknown key 'modle'; did you mean 'model'?",
    ),
    "type.yaml": ("name: demo\ngpus:\n  count: eight\n", "type.yaml:3:10: gpus.count: Input should be a valid integer"),
    "split.yaml": (
        "name: demo\ngpus:\n  count: 12\nnodes:\n  gpus_per_node: 8\n",
        "split.yaml:5:3: nodes.gpus_per_node: 12 GPUs cannot be split evenly into nodes of 8",
    ),
    "model.yaml": (
        "name: demo\ngpus:\n  model: A100-80GB\n  count: 8\n",
        "model.yaml:3:10: gpus.model: unknown GPU model 'A100-80GB': memory is its own field; "
        "use A100 with min_memory_gib: 80",
    ),
    "gpu-typo.yaml": (
        "name: demo\ngpus:\n  model: H1OO\n  count: 8\n",
        "gpu-typo.yaml:3:10: gpus.model: unknown GPU model 'H1OO'; did you mean 'H100'? known: B300,",
    ),
    "provider-typo.yaml": (
        "name: demo\ngpus:\n  count: 8\nproviders:\n  allow: [aws, lamda]\n",
        "provider-typo.yaml:5:10: providers.allow: unknown provider 'lamda'; did you mean 'lambda'? known: aws,",
    ),
}
NO_FIT_SPECS = {
    "ib.yaml": (
        "name: demo\ngpus:\n  count: 16\nnodes:\n  gpus_per_node: 8\ninterconnect:\n  fabric: infiniband\n"
        "providers:\n  allow: [aws, gcp]\n",
        "ib.yaml:7:3: interconnect.fabric: no offer fits",
    ),
    "budget.yaml": (
        "name: demo\ngpus:\n  model: H100\n  count: 8\npricing:\n  max_total_usd: 5\nworkload:\n  hours: 100\n",
        "budget.yaml:6:3: pricing.max_total_usd: no offer fits",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_specs_exit_2_with_one_located_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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


@pytest.mark.parametrize("name", sorted(NO_FIT_SPECS))
def test_no_offer_fits_exits_3_with_one_located_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = NO_FIT_SPECS[name]
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run_cli(["plan", str(path)], capsys)
    assert (code, out) == (3, "")
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(str(tmp_path / expected.split(":", 1)[0]) + ":" + expected.split(":", 1)[1]), lines[0]


def test_several_specs_each_get_a_result_or_an_error_and_the_worst_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_fit = tmp_path / "budget.yaml"
    no_fit.write_text(NO_FIT_SPECS["budget.yaml"][0])
    bad = tmp_path / "model.yaml"
    bad.write_text(BAD_SPECS["model.yaml"][0])
    good = EXAMPLES / "pretrain-h100-slurm.yaml"
    code, out, err = run_cli(["plan", str(good), str(no_fit), str(good)], capsys)
    assert code == 3
    assert out.count("llm-pretrain: 16 GPUs") == 2
    assert err.strip().splitlines() == [line for line in err.strip().splitlines() if "no offer fits" in line]
    assert len(err.strip().splitlines()) == 1
    code, out, err = run_cli(["plan", str(no_fit), str(bad), str(good), "-f", "json"], capsys)
    assert code == 3  # the worst of 3 (no fit), 2 (bad spec) and 0
    docs = validate_report(out)
    assert [doc.get("exit_code") for doc in docs] == [3, 2, None]
    assert docs[0]["spec_file"] == str(no_fit) and docs[0]["error"].startswith(f"{no_fit}:6:3: pricing.max_total_usd")
    assert docs[2]["spec"] == "llm-pretrain"
    assert [line.split(":")[0] for line in err.strip().splitlines()] == [str(no_fit), str(bad)]


def test_missing_file_and_bad_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["plan", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "cannot read spec" in err
    bad = tmp_path / "catalog.json"
    bad.write_text('{"as_of": "2026-01-01", "providers": {}, "offers": [{"provider": "x"}]}')
    code, _, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--catalog", str(bad)], capsys)
    assert code == 2 and err.startswith(f"error: {bad}: offers[0].") and len(err.strip().splitlines()) == 1


USAGE_ERRORS = {
    "no command": ([], "error: missing command (one of: plan, schema, render, catalog, validate, gc, node, up, down,"),
    "no spec": (["plan"], "error: the following arguments are required: SPEC (see 'provisioner plan --help')"),
    "bad format": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "-f", "xml"],
        "error: argument --format/-f: invalid choice: 'xml' (choose from 'table', 'json', 'csv',",
    ),
    "provider case": (
        ["catalog", "--provider", "VastAI"],
        "error: argument --provider: unknown provider 'VastAI'; did you mean 'vastai'?",
    ),
    # Every --provider is checked before its command runs (down and costs --live once ended in a traceback).
    **{
        f"unknown provider ({' '.join(args)})": (
            [*args, "--provider", "azure"],
            "error: argument --provider: unknown provider 'azure'; known: aws,",
        )
        for args in (["catalog"], ["catalog", "refresh"], ["gc"], ["down", "nope"], ["costs", "--live"])
    },
    "missing folder": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "-o", "/missing/dir/r.html"],
        "error: Invalid value for --output: folder /missing/dir does not exist",
    ),
    # Every option that writes a file refuses a folder (it wrote a file named after the folder) and a place
    # no file can be made, naming the path, before any work (they exited 1 after planning).
    **{
        f"{flag} {path}": (
            ["plan", "examples/pretrain-h100-slurm.yaml", flag, path],
            f"error: Invalid value for {option}: {path} names a folder, not a file; name a file "
            f"in it, e.g. {path.rstrip('/')}/{example}",
        )
        for flag, option, example in (("--save-plan", "--save-plan", "plan.json"), ("-o", "--output", "report.txt"))
        for path in ("examples/", "examples", "not-yet-made/")
    },
    "plan save-plan under /proc": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "--save-plan", "/proc/p.json"],
        "error: Invalid value for --save-plan: cannot write /proc/p.json: ",
    ),
    "plan output under /proc": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "-o", "/proc/r.txt"],
        "error: Invalid value for --output: cannot write /proc/r.txt: ",
    ),
    "validate output folder": (
        ["validate", "--nodes", "a", "--via", "ssh", "-o", "examples/"],
        "error: Invalid value for --output: examples/ names a folder, not a file; name a "
        "file in it, e.g. examples/report.json",
    ),
    "node check output under /proc": (
        ["node", "check", "-o", "/proc/r.json"],
        "error: Invalid value for --output: cannot write /proc/r.json: ",
    ),
    "render out under /proc": (
        ["render", "examples/pretrain-h100-slurm.yaml", "--out", "/proc/out"],
        "error: Invalid value for --out: cannot write into /proc/out: ",
    ),
    "render out below a file": (
        ["render", "examples/pretrain-h100-slurm.yaml", "--out", "README.md/out"],
        "error: Invalid value for --out: cannot make README.md/out: README.md is a file, not a folder",
    ),
    "watch report dir under /proc": (
        ["node", "watch", "--once", "--report-dir", "/proc/health"],
        "error: Invalid value for --report-dir: cannot write into /proc/health: ",
    ),
    "unknown command": (["frobnicate"], "error: argument COMMAND: invalid choice: 'frobnicate' (choose from 'plan',"),
    "unknown option": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "--bogus"],
        "error: unrecognized arguments: --bogus (see 'provisioner plan --help')",
    ),
    # A word no option takes points at the command's own help, not the top's.
    "unknown word": (["costs", "nope"], "error: unrecognized arguments: nope (see 'provisioner costs --help')"),
    "unknown nested option": (
        ["node", "check", "--bogus"],
        "error: unrecognized arguments: --bogus (see 'provisioner node check --help')",
    ),
    "top zero": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "--top", "0"],
        "error: argument --top: 0 is below the minimum 1 (see 'provisioner plan --help')",
    ),
    # A missing input file is bad input (exit 2, the README's table), not a failed read or write (1).
    "missing spec": (
        ["plan", "missing-spec.yaml"],
        "missing-spec.yaml:1:1: cannot read spec: No such file or directory",
    ),
    "missing plan": (
        ["render", "missing-plan.json", "--out", "out"],
        "error: missing-plan.json: cannot read plan: No such file or directory",
    ),
    "unknown gpu": (["catalog", "--gpu", "Z9"], "error: Invalid value for --gpu: unknown GPU model 'Z9'; known: B300,"),
    # "did you mean", by one rule (provisioner/suggest.py): commands, options, choices, providers, GPUs
    "misspelt command": (
        ["plna", "x.yaml"],
        "error: argument COMMAND: invalid choice: 'plna'; did you mean 'plan'? (choose",
    ),
    "misspelt subcommand": (
        ["node", "chek"],
        "error: argument COMMAND: invalid choice: 'chek'; did you mean 'check'? (",
    ),
    "misspelt option": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "--fromat", "json"],
        "error: unrecognized arguments: --fromat json; did you mean '--format'? (see 'provisioner plan --help')",
    ),
    "misspelt choice": (
        ["plan", "examples/pretrain-h100-slurm.yaml", "-f", "jsno"],
        "error: argument --format/-f: invalid choice: 'jsno'; did you mean 'json'? (choose from 'table', 'json',",
    ),
    "misspelt provider": (
        ["catalog", "--provider", "lamda"],
        "error: argument --provider: unknown provider 'lamda'; did you mean 'lambda'? known: aws, gcp, lambda,",
    ),
    "misspelt gpu": (
        ["catalog", "--gpu", "H1OO"],
        "error: Invalid value for --gpu: unknown GPU model 'H1OO'; did you mean 'H100'? known:",
    ),
    "gpu with memory": (
        ["catalog", "--gpu", "A100-80GB"],
        "error: Invalid value for --gpu: unknown GPU model "
        "'A100-80GB': memory is its own field; use A100 with min_memory_gib: 80",
    ),
    "out is a file": (
        ["render", "examples/pretrain-h100-slurm.yaml", "--out", "README.md"],
        "error: Invalid value for --out: README.md is a file, not a folder",
    ),
    "json spec as a plan": (
        ["render", "tests/fixtures/spec-as-json.json", "--out", "out"],
        "error: tests/fixtures/spec-as-json.json: a spec, not a plan: a .json file is read as a "
        "saved plan here; save the spec as .yaml, or plan it first: provisioner plan ",
    ),
    "node group": (["node"], "error: missing command (one of: check, watch) (see 'provisioner node --help')"),
}
"""Usage mistakes and the start of the one line each must print (tests/test_runtime_only.py reuses them)."""


@pytest.mark.parametrize("name", sorted(USAGE_ERRORS))
def test_usage_errors_exit_2_with_one_line(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(__file__).parents[1])
    args, start = USAGE_ERRORS[name]
    code, out, err = run_cli(args, capsys)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith(start), err
    assert "Traceback" not in err and "Usage:" not in err


def test_an_output_option_leaves_nothing_where_it_refused_or_only_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--save-plan dir/` wrote a file named `dir`; the check that a file can be made leaves none behind."""
    monkeypatch.chdir(tmp_path)
    spec = str(EXAMPLE_FILES[0])
    code, _, err = run_cli(["plan", spec, "--save-plan", "saved/"], capsys)
    assert code == 2 and "saved/ names a folder" in err and list(tmp_path.iterdir()) == []
    code, _, err = run_cli(["plan", "missing-spec.yaml", "--save-plan", "plan.json", "-o", "report.txt"], capsys)
    assert code == 2 and "cannot read spec" in err and list(tmp_path.iterdir()) == []
    (tmp_path / "out").mkdir()
    code, _, err = run_cli(["render", "missing-plan.json", "--out", "out/cluster"], capsys)
    assert code == 2 and [p.name for p in tmp_path.rglob("*")] == ["out"]
    code, _, _ = run_cli(["plan", spec, "--save-plan", "out/plan.json"], capsys)
    assert code == 0 and json.loads((tmp_path / "out" / "plan.json").read_text())["kind"]


def test_an_output_into_a_named_pipe_gets_the_whole_report(tmp_path: Path) -> None:
    """`-o PIPE` with a reader on the pipe: checking the path by opening it once would hand the reader its end
    of file before the report, and the real write would then wait for a reader forever."""
    import os

    pipe, got = tmp_path / "pipe", tmp_path / "got.json"
    os.mkfifo(pipe)
    with open(got, "w") as sink:
        reader = subprocess.Popen(["cat", str(pipe)], stdout=sink)
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "provisioner.cli",
                    "plan",
                    str(EXAMPLES / "pretrain-h100-slurm.yaml"),
                    "--format",
                    "json",
                    "-o",
                    str(pipe),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            if reader.poll() is None:
                with open(pipe, "w"):  # a reader still waiting gets its end of file
                    pass
            reader.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert json.loads(got.read_text())["options"]


def _commands(parser: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    from provisioner.cliargs import subparsers

    found = [path]
    for name, sub in sorted(subparsers(parser).items()):  # type: ignore[arg-type]
        found += _commands(sub, (*path, name))
    return found


def test_every_command_has_working_help(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.cli import COMMAND_NAMES, build_parser
    from provisioner.cliargs import subcommand_names

    commands = _commands(build_parser())
    assert tuple(subcommand_names(build_parser())) == COMMAND_NAMES
    assert ("plan",) in commands and ("catalog", "refresh") in commands and ("node", "check") in commands
    for path in commands:
        code, out, err = run_cli([*path, "--help"], capsys)
        assert (code, err) == (0, ""), path
        assert out.startswith("Usage: ") and "--help" in out, path
        # The help is the handler's docstring: it must speak in options, not in Python.
        assert not re.search(r"``|\b\w+=(True|False|None)\b|provisioner\.\w+\.\w+", out), (path, out)


@pytest.mark.parametrize("url", ["not-a-url", "ftp://127.0.0.1:8701", "127.0.0.1:8701"])
def test_an_api_url_that_is_no_http_url_is_a_usage_error(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a provider failure (exit 4: 'UnsupportedProtocol') after a refresh attempt."""
    monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", url)
    monkeypatch.setenv("LAMBDA_API_KEY", "demo")
    code, _, err = run_cli(["catalog", "refresh", "--provider", "lambda"], capsys)
    assert (code, err.strip().splitlines()) == (
        2,
        [
            f"error: Invalid value for PROVISIONER_LAMBDA_API_URL: {url!r} "
            "is not an http(s) URL like http://127.0.0.1:8701"
        ],
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner import __version__

    assert run_cli(["--version"], capsys) == (0, f"gpu-provisioner {__version__}\n", "")


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
    result = subprocess.run(
        [sys.executable, "-m", "provisioner.cli", "plan", str(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "llm-pretrain" in result.stdout


def test_python_m_from_the_checkout_finds_the_mapped_packages() -> None:
    """The README's ``python -m provisioner.testing.fakes lambda ...`` run in the repository after a
    plain ``pip install .``: ``-m`` puts the checkout's ``provisioner/`` first on sys.path, where
    ``provisioner.providers`` (folder ``providers/``) was not found (ModuleNotFoundError). Here the
    editable install's finder is taken away, so only the checkout can answer."""
    code = (
        "import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in repr(f)]; "
        "sys.argv = ['fakes', '--help']; runpy.run_module('provisioner.testing.fakes', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLES.parent, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "{aws,fluence,gcp,lambda,runpod,vastai}" in result.stdout


# --- "rank 1 is the cheapest feasible offer under the documented model" ---------------------
# An independent re-statement of docs/cost-model.md on the raw bundled catalog JSON (no Offer
# models, no optimizer code), checked against what `provisioner plan --format json` prints.

_ACCEPTS = {
    "any": {"ethernet", "roce", "infiniband", "efa"},
    "ethernet": {"ethernet", "roce", "infiniband", "efa"},
    "roce": {"roce", "infiniband"},
    "infiniband": {"infiniband"},
    "efa": {"efa"},
}


def _tiered(tiers: list[dict], gb: float) -> float:
    cost, floor = 0.0, 0.0
    for tier in tiers:
        top = float("inf") if tier.get("up_to_gb") is None else tier["up_to_gb"]
        cost += max(0.0, min(gb, top) - floor) * tier["usd_per_gb"]
        floor = max(floor, top)
    if tiers and gb > floor:
        cost += (gb - floor) * tiers[-1]["usd_per_gb"]
    return cost


def _internet_out(info: dict, gb: float) -> float:
    return _tiered(info["internet_egress_tiers"], gb) - _tiered(
        info["internet_egress_tiers"], min(gb, info.get("free_egress_gb", 0))
    )


def _buyable(spec: ClusterSpec, o: dict, nodes: int) -> bool:
    """docs/cost-model.md stages min nodes, private network and adapter (on-demand part; spot is checked
    per variant below), and quote-only products are never ranked."""
    from provisioner.capabilities import BOOTSTRAP_CAPABILITY, Bootstrap, Capability
    from provisioner.providers.registry import capabilities

    caps = capabilities().get(o["provider"], frozenset())
    network, purchase = o.get("network", "private"), o.get("purchase", "instance")
    if purchase in ("reservation", "sales") or nodes < o.get("min_nodes", 1):
        return False
    if (
        nodes > 1
        and network == "none"
        and spec.control_plane.value != "none"
        and spec.interconnect.fabric.value in ("any", "ethernet")
    ):
        return False
    needs = {BOOTSTRAP_CAPABILITY[Bootstrap(o.get("bootstrap", "cloud_init"))]}
    if nodes > 1:
        needs.add(Capability.MULTI_NODE)
        if network in ("private", "partition"):
            needs.add(Capability.PRIVATE_NETWORK)
        fabric = {"infiniband": Capability.FABRIC_IB, "efa": Capability.FABRIC_EFA, "roce": Capability.FABRIC_ROCE}
        if spec.interconnect.fabric.value in fabric:
            needs.add(fabric[spec.interconnect.fabric.value])
    if purchase == "cluster":
        needs.add(Capability.CLUSTER_PRODUCT)
    return bool(caps) and needs <= caps


def _documented_model(spec: ClusterSpec, raw: dict) -> dict[tuple[str, str, str, str, bool], float]:
    """(provider, region, instance type, offer id, spot) -> expected total USD of every feasible variant."""
    w, feasible = spec.workload, {}
    models = {canonical_gpu(m) for m in spec.gpus.model}
    allowed = (set(spec.providers.allow) or set(raw["providers"])) - set(spec.providers.deny)
    for o in raw["offers"]:
        info = raw["providers"][o["provider"]]
        nodes, rest = divmod(spec.gpus.count, o["gpus"])
        if (
            o["provider"] not in allowed
            or (spec.providers.regions and o["region"] not in spec.providers.regions)
            or (models and canonical_gpu(o["gpu_model"]) not in models)
            or o["gpu_memory_gib"] < spec.gpus.min_memory_gib
            or not o.get("available", True)
            or rest
            or nodes == 0
            or nodes > o.get("max_nodes", 1)
            or spec.nodes.gpus_per_node not in (None, o["gpus"])
            or spec.nodes.count not in (None, nodes)
            or o.get("fabric", "ethernet") not in _ACCEPTS[spec.interconnect.fabric.value]
            or (nodes > 1 and o.get("fabric_gbps", 0) < spec.interconnect.min_gbps_per_node)
            or o.get("local_nvme_gib", 0) < spec.storage.checkpoint_nvme_gib_per_node
            or (spec.storage.shared.kind.value == "managed" and info["shared_storage_usd_per_gib_month"] is None)
            or o.get("reliability", 0.99) < spec.reliability.min_score
            or not _buyable(spec, o, nodes)
        ):
            continue
        storage = nodes * spec.storage.checkpoint_nvme_gib_per_node * o.get("disk_usd_per_gib_hour", 0) * w.hours
        if spec.storage.shared.kind.value == "managed":
            storage += info["shared_storage_usd_per_gib_month"] * spec.storage.shared.size_gib * w.hours / 730
        source, source_region = w.dataset.source
        data = w.dataset.size_gb
        if source == o["provider"]:
            egress = 0.0 if source_region == o["region"] else data * info["inter_region_usd_per_gb"]
        else:
            egress = data * o.get("ingress_usd_per_gb", 0)
            if source is not None:
                egress += _internet_out(raw["providers"][source], data)
        if info["internet_egress_tiers"]:
            egress += _internet_out(info, w.results_out_gb)
        else:
            egress += w.results_out_gb * o.get("egress_usd_per_gb", 0)
        for spot in {"on_demand": [False], "spot": [True], "either": [False, True]}[spec.pricing.mode.value]:
            price = o.get("spot_price_per_hour_usd") if spot else o.get("price_per_hour_usd")
            from provisioner.capabilities import Capability
            from provisioner.providers.registry import capabilities

            sold_as = Capability.SPOT if spot else Capability.ON_DEMAND
            if sold_as not in capabilities().get(o["provider"], frozenset()):
                continue
            if price is None or (
                spec.pricing.max_hourly_usd is not None and nodes * price > float(spec.pricing.max_hourly_usd)
            ):
                continue
            step = o.get("billing_increment_s", 1)
            billed_h = max(math.ceil(w.hours * 3600 / step) * step, o.get("billing_minimum_s", 0)) / 3600
            rate = o["interruptions_per_node_hour"]
            if spot:
                rate = o.get("spot_interruptions_per_node_hour")
                if rate is None:
                    rate = max(o["interruptions_per_node_hour"], 0.25 / 730)
            lost_h = (w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes) / 60
            terms = [
                nodes * price * billed_h + nodes * price * info["boot_minutes"] / 60,
                storage,
                egress,
                rate * nodes * w.hours * lost_h * nodes * price,
            ]
            total = sum(round(term, 2) for term in terms)
            if spec.pricing.max_total_usd is not None and total > float(spec.pricing.max_total_usd) + 1e-9:
                continue
            feasible[(o["provider"], o["region"], o["instance_type"], o.get("offer_id") or "", spot)] = total
    return feasible


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_rank_one_is_the_cheapest_feasible_offer_under_the_documented_model(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.loads((Path(__file__).parents[1] / "provisioner" / "data" / "catalog.json").read_text())
    expected = _documented_model(load_spec(path), raw)
    code, out, err = run_cli(["plan", str(path), "--format", "json", "--top", "100000", "--explain"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["as_of"] == raw["as_of"]
    assert len(expected) >= 2, "an example should have a choice to make"
    got = {(o["provider"], o["region"], o["instance_type"], o["spot"]): o["cost"]["total"] for o in doc["options"]}
    assert len(got) == len(doc["options"]) == len(expected)
    assert got == pytest.approx({(p, r, t, s): v for (p, r, t, _, s), v in expected.items()}, abs=0.011)
    assert doc["options"][0]["cost"]["total"] == pytest.approx(min(expected.values()), abs=0.011)
    variants = 2 if load_spec(path).pricing.mode is PricingMode.EITHER else 1
    assert len(doc["options"]) + len(doc["rejected"]) + len(doc["quotes"]) == variants * len(raw["offers"])


def test_unwritable_outputs_and_unknown_provider_are_one_line_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(EXAMPLE_FILES[0])
    for args, hint in [
        (["plan", spec, "--save-plan", str(tmp_path / "missing" / "plan.json")], "--save-plan"),
        (["plan", spec, "-o", str(tmp_path / "missing" / "report.html"), "-f", "html"], "--output"),
        (["plan", spec, "-o", str(tmp_path)], "--output"),
        (["catalog", "--provider", "azure"], "--provider"),
    ]:
        code, out, err = run_cli(args, capsys)
        assert (code, out) == (2, ""), args
        assert len(err.strip().splitlines()) == 1 and hint in err, err
    assert not (tmp_path / "missing").exists()


def test_catalog_flag_beats_the_refreshed_cache_which_beats_the_bundled_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime as dt
    import os

    from provisioner.catalog import load_bundled_catalog

    bundled = load_bundled_catalog()

    def only(instance_type: str, as_of: str) -> str:
        offers = [o for o in bundled.offers if o.instance_type == instance_type][:1]
        return bundled.model_copy(update={"offers": offers, "as_of": dt.date.fromisoformat(as_of)}).model_dump_json()

    spec = tmp_path / "s.yaml"
    spec.write_text("name: demo\ngpus: {count: 8}\n")
    cache = Path(os.environ["PROVISIONER_CACHE_DIR"]) / "catalog.json"
    cache.write_text(only("p5.48xlarge", "2026-12-01"))
    flag = tmp_path / "mine.json"
    flag.write_text(only("a3-highgpu-8g", "2026-12-02"))
    _, out, _ = run_cli(["plan", str(spec), "-f", "json"], capsys)
    doc = json.loads(out)
    assert (doc["as_of"], doc["catalog"], doc["options"][0]["instance_type"]) == (
        "2026-12-01",
        str(cache),
        "p5.48xlarge",
    )
    _, out, _ = run_cli(["plan", str(spec), "-f", "json", "--catalog", str(flag)], capsys)
    doc = json.loads(out)
    assert (doc["as_of"], doc["options"][0]["instance_type"]) == ("2026-12-02", "a3-highgpu-8g")
    cache.unlink()
    _, out, _ = run_cli(["plan", str(spec), "-f", "json"], capsys)
    assert json.loads(out)["as_of"] == bundled.as_of.isoformat()


def test_render_with_a_topology_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text("llm-pretrain-0: [spine0, leaf0]\nllm-pretrain-1: [spine0, leaf1]\n")
    spec = str(EXAMPLES / "pretrain-h100-slurm.yaml")
    code, _, err = run_cli(["render", spec, "--out", str(tmp_path / "out"), "--topology", str(topology)], capsys)
    assert code == 0, err
    lines = (tmp_path / "out/slurm/topology.conf").read_text().splitlines()
    assert "SwitchName=spine0 Switches=leaf0,leaf1" in lines
    assert "SwitchName=leaf1 Nodes=llm-pretrain-1" in lines
    topology.write_text("- not a mapping\n")
    code, _, err = run_cli(["render", spec, "--out", str(tmp_path / "out2"), "--topology", str(topology)], capsys)
    assert code == 2 and err.strip().endswith("a topology maps each node name to a non-empty list of switch names")
    # A YAML mistake or a missing file: one located line, as for a spec (not PyYAML's multi-part text).
    topology.write_text("llm-pretrain-0: [spine0, leaf0\n")
    code, _, err = run_cli(["render", spec, "--out", str(tmp_path / "out3"), "--topology", str(topology)], capsys)
    assert (code, err.strip()) == (2, f"{topology}:2:1: YAML syntax error: expected ',' or ']', but got '<stream end>'")
    missing = tmp_path / "nope.yaml"
    code, _, err = run_cli(["render", spec, "--out", str(tmp_path / "out4"), "--topology", str(missing)], capsys)
    assert (code, err.strip()) == (2, f"{missing}:1:1: cannot read topology: No such file or directory")


def test_explain_on_an_unplannable_spec_prints_the_rejection_table_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "budget.yaml"
    path.write_text(NO_FIT_SPECS["budget.yaml"][0])
    code, out, err = run_cli(["plan", str(path), "--explain"], capsys)
    assert code == 3
    assert err.strip().splitlines() == [err.strip()] and err.startswith(f"{path}:6:3: pricing.max_total_usd: no offer")
    assert "No offer fits this spec" in out and "Every rejected offer" in out
    assert "pricing.max_total_usd" in out and "expected total" in out
    code, out, err = run_cli(["plan", str(path), "--explain", "-f", "json"], capsys)
    doc = validate_report(out)
    assert code == 3 and doc["options"] == [] and doc["rejected_count"] == len(doc["rejected"]) > 0


def test_readme_quick_start_has_two_commands_and_its_layout_rule_finds_files() -> None:
    import importlib
    import re

    root = Path(__file__).parents[1]
    readme = (root / "README.md").read_text()
    quick = readme.split("## Quick start")[1].split("\n## ")[0]
    commands = re.findall(r"```bash\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert "provisioner plan examples/" in commands[0]
    assert commands[1] == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -q -n auto"
    )
    for name, path in [
        ("provisioner.providers.lambda_.client", "providers/lambda_/client.py"),
        ("provisioner.report.facts", "provisioner/report/facts.py"),
    ]:
        assert f"`{name}` is `{path}`" in " ".join(readme.split())
        assert Path(importlib.import_module(name).__file__ or "").resolve() == (root / path).resolve()


def test_reports_name_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    # report_meta reads provisioner.__version__ (cheap); it must be what the installed package says.
    from importlib import metadata

    import provisioner

    assert provisioner.__version__ == metadata.version("gpu-provisioner")
    code, out, err = run_cli(["plan", str(EXAMPLE_FILES[0]), "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["tool_version"] == metadata.version("gpu-provisioner")
