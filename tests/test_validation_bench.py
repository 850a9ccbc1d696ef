"""bench/bench_validation.py's summary (what goes to docs/benchmarks.md) on real measurements.

The device run (bench/device_validation.sh) can only happen on a GPU machine; the part that
turns a node report into figures, ratios and a Markdown row is checked here on the reports
captured on real H100/H200 machines (tests/fixtures/gpu/node-check-reports).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from provisioner.validation.model import BurnInResult, GpuMetrics, NodeReport
from provisioner.validation.reference import judge_burnin

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "tests" / "fixtures" / "gpu" / "node-check-reports"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_validation", ROOT / "bench" / "bench_validation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _judged(name: str) -> NodeReport:
    recorded = NodeReport.from_json((REPORTS / f"{name}.json").read_text())
    assert recorded.burnin is not None
    return recorded.model_copy(update={"findings": judge_burnin(recorded.burnin, recorded.gpu_name)})


def test_summary_of_the_half_speed_h200(bench: ModuleType) -> None:
    summary = bench.summarize(_judged("h200-shared-gpu-20s"), "loaded", 28.07, 11, ["failed", "degraded"])
    assert (summary["status"], summary["as_expected"], summary["gpu_name"]) == ("failed", True, "NVIDIA H200")
    (gpu,) = summary["gpus"]
    burst = gpu["figures"]["matmul_burst_tflops"]
    assert burst["against"] == {"value": 661.9, "kind": "H200-SXM reference"}
    assert burst["ratio"] == pytest.approx(309.68 / 661.9, abs=1e-4)
    assert gpu["figures"]["hbm_copy_tbps"]["ratio"] == pytest.approx(2.1079 / 4.255, abs=1e-4)
    row = bench.markdown_row(summary)
    assert row == (
        "| loaded | 1 x NVIDIA H200 | failed (exit 11) | 28.1 s | 309.7 (47%) | 308.6 (47%) | "
        "2.108 (50%) | 55.4 (100%) / 55.3 (101%) |"
    )


def test_summary_of_the_healthy_h100_is_as_expected(bench: ModuleType) -> None:
    summary = bench.summarize(_judged("h100-healthy-60s"), "alone", 69.5, 0, ["healthy"])
    assert summary["status"] == "healthy" and summary["as_expected"] is True and summary["problems"] == []
    burst = summary["gpus"][0]["figures"]["matmul_burst_tflops"]
    assert burst["ratio"] == pytest.approx(683.59 / 681.0, abs=1e-4)


def test_a_datasheet_only_gpu_is_summarized_against_its_floor(bench: ModuleType) -> None:
    burnin = BurnInResult(gpus=[GpuMetrics(index=0, matmul_sustained_tflops=250.0, hbm_copy_tbps=0.8)])
    report = NodeReport(
        node="n", gpu_name="NVIDIA L40S", gpu_count=1, burnin=burnin, findings=judge_burnin(burnin, "NVIDIA L40S")
    )
    figures = bench.summarize(report, "l40s", 10.0, 0, [])["gpus"][0]["figures"]
    assert figures["matmul_sustained_tflops"]["against"] == {"value": 181.025, "kind": "L40S datasheet floor"}
    assert figures["hbm_copy_tbps"]["against"] == {"value": 0.518, "kind": "L40S datasheet floor"}
