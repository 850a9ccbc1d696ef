"""References, datasheet floors and the node check's verdicts on real GPU measurements.

The references are re-derived here from the raw captures (tests/fixtures/gpu, copied from
../shared/fixtures/gpu) with this file's own arithmetic; the six ``provisioner node check``
reports from real H100 and H200 machines are replayed through today's check (their measured
burn-in figures, with the captured nvidia-smi views and kernel logs) and must classify as a
correct check would: healthy GPUs healthy, a GPU shared with a second matmul process failed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from provisioner.validation.burnin import BurnInConfig
from provisioner.validation.checks import check_gpus
from provisioner.validation.datasheet import DATASHEETS, variant_of
from provisioner.validation.model import BurnInResult, GpuMetrics, NodeReport, Severity, Status
from provisioner.validation.node import CheckOptions, check_node
from provisioner.validation.nvsmi import QUERY_ARGS, XML_ARGS, parse_query_csv, parse_smi_xml
from provisioner.validation.reference import CHECK_METHOD, H100_SXM, H200_SXM, judge_burnin, reference_for
from provisioner.validation.runner import CommandResult, FakeClock, FakeRunner, Host
from provisioner.validation.xid import parse_kernel_log, xid_findings

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
H100_IDLE, H100_LOAD = FIXTURES / "h100-sxm-80gb", FIXTURES / "h100-sxm-80gb-under-load"
H200 = FIXTURES / "h200-141gb"
REPORTS = FIXTURES / "node-check-reports"
CLEAN_LOG = FIXTURES / "degraded" / "dmesg-clean.txt"
ROOT = Path(__file__).resolve().parents[1]


def _json(path: Path) -> object:
    return json.loads(path.read_text())


def _ramp_rate(path: Path, start_s: float, end_s: float) -> float:
    """Flop-weighted TFLOP/s of the ramp's chunks in [start, end): every chunk is 10 products, so
    the rate over the span is chunks / sum(1 / rate). The first chunk is the warm-up (kernel
    selection), as the check's own warm-up product is, and is left out."""
    chunks = _json(path)[1:]  # type: ignore[index]
    rates = [c["tflops"] for c in chunks if start_s <= c["t_s"] < end_s]
    return len(rates) / sum(1 / r for r in rates)


def _capture(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if not line.startswith(("$ ", "[exit "))) + "\n"


# --- the references, re-derived from the raw captures --------------------------------------------


def test_h100_sxm_reference_is_derived_from_the_captures() -> None:
    bench = _json(H100_IDLE / "bench.json")
    independent = _json(REPORTS / "h100-independent-figures.json")
    windows = [w["bf16_tflops"] for w in _json(H100_LOAD / "burn-5s-windows.json")]  # type: ignore[union-attr]
    assert H100_SXM.matmul_burst_tflops == pytest.approx(_ramp_rate(H100_LOAD / "ramp-from-idle.json", 0, 3), abs=0.05)
    assert H100_SXM.matmul_sustained_tflops == pytest.approx(statistics.median(windows), abs=0.05)
    assert H100_SXM.hbm_copy_tbps == pytest.approx(bench["hbm_copy_tbps_rw"], abs=0.005)  # type: ignore[index]
    assert (H100_SXM.h2d_gbps, H100_SXM.d2h_gbps) == (independent["h2d_gbps"], independent["d2h_gbps"])  # type: ignore[index]
    assert H100_SXM.nccl_busbw_gbps_8gpu == 370.0


def test_h200_reference_is_derived_from_the_captures() -> None:
    ramp = H200 / "ramp-from-idle.json"
    independent = _json(H200 / "independent-figures.json")
    assert H200_SXM.matmul_burst_tflops == pytest.approx(_ramp_rate(ramp, 0, 3), abs=0.1)
    assert H200_SXM.matmul_sustained_tflops == pytest.approx(_ramp_rate(ramp, 3, 12.5), abs=0.1)
    assert H200_SXM.hbm_copy_tbps == independent["hbm_copy_tbps_rw"]  # type: ignore[index]
    assert (H200_SXM.h2d_gbps, H200_SXM.d2h_gbps) == (independent["h2d_gbps"], independent["d2h_gbps"])  # type: ignore[index]


def test_the_check_measures_the_way_the_references_were_measured() -> None:
    config = BurnInConfig()
    assert (
        (config.matmul_n, config.burst_s, config.window_s, config.copy_bytes, config.pinned_bytes)
        == (
            CHECK_METHOD.matmul_n,
            CHECK_METHOD.burst_s,
            CHECK_METHOD.window_s,
            CHECK_METHOD.copy_bytes,
            CHECK_METHOD.pinned_bytes,
        )
        == (8192, 3.0, 5.0, 1 << 30, 1 << 28)
    )
    assert H100_SXM.method == H200_SXM.method == CHECK_METHOD


@pytest.mark.parametrize("name", ["h100-healthy-60s", "h100-healthy-10s", "h200-healthy-60s", "h200-healthy-10s"])
def test_the_checks_own_figures_on_healthy_gpus_agree_with_the_references(name: str) -> None:
    """Like with like: the check's burst, sustained and copy figures on healthy GPUs sit within 2 %
    of references derived from other measurements (the old 789 burst figure was 13 % off)."""
    report = NodeReport.from_json((REPORTS / f"{name}.json").read_text())
    assert report.burnin is not None
    (gpu,) = report.burnin.gpus
    reference = H100_SXM if name.startswith("h100") else H200_SXM
    for metric in ("matmul_burst_tflops", "matmul_sustained_tflops", "hbm_copy_tbps"):
        assert getattr(gpu, metric) == pytest.approx(getattr(reference, metric), rel=0.02), metric


# --- replaying the six real node-check reports ----------------------------------------------------


def _node(xml: Path, query: str, dmesg: Path) -> FakeRunner:
    return FakeRunner(
        {
            XML_ARGS: CommandResult(0, xml.read_text()),
            QUERY_ARGS: CommandResult(0, query),
            ("dmesg",): CommandResult(0, dmesg.read_text()),
        }
    )


def _replay(name: str, **options: object) -> NodeReport:
    """The report's measured burn-in through today's node check, on that GPU's captured views."""
    recorded = NodeReport.from_json((REPORTS / f"{name}.json").read_text())
    if name.startswith("h100"):
        run = _node(H100_IDLE / "nvidia-smi-q.xml", _capture(H100_IDLE / "nvidia-smi-query.csv"), CLEAN_LOG)
    else:
        run = _node(H200 / "nvidia-smi-q.xml", (H200 / "nvidia-smi-query.csv").read_text(), H200 / "dmesg-nvrm.txt")

    def burnin(config: BurnInConfig, *, clock: object, probe: object) -> BurnInResult:
        assert recorded.burnin is not None
        return recorded.burnin

    return check_node(
        Host(run=run, clock=FakeClock()), CheckOptions(node=recorded.node, expect_gpus=1, **options), burnin=burnin
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "was", "status", "problems"),
    [
        ("h100-healthy-60s", "degraded", Status.HEALTHY, set()),
        ("h100-healthy-10s", "degraded", Status.HEALTHY, set()),
        (
            "h100-shared-gpu-20s",
            "failed",
            Status.FAILED,
            {"burnin.matmul_burst", "burnin.matmul_sustained", "burnin.hbm_copy"},
        ),
        ("h200-healthy-60s", "healthy", Status.HEALTHY, set()),
        ("h200-healthy-10s", "healthy", Status.HEALTHY, set()),
        (
            "h200-shared-gpu-20s",
            "healthy",
            Status.FAILED,
            {"burnin.matmul_burst", "burnin.matmul_sustained", "burnin.hbm_copy"},
        ),
        # bench/device_validation.sh on the lent machines, 2026-11-26, with the re-derived references
        ("h100-device-2026-11-26-60s", "healthy", Status.HEALTHY, set()),
        ("h200-device-2026-11-26-60s", "healthy", Status.HEALTHY, set()),
    ],
)
def test_real_node_check_reports_replay_to_the_right_status(
    name: str, was: str, status: Status, problems: set[str]
) -> None:
    assert _json(REPORTS / f"{name}.json")["status"] == was  # type: ignore[index]  # what the old check said
    report = _replay(name)
    assert report.status is status, report.problems()
    assert report.problem_codes() == problems
    assert all(f.severity is Severity.FAILED for f in report.problems())
    assert "burnin.no_reference" not in {f.code for f in report.findings}


def test_the_half_speed_h200_is_failed_against_its_own_reference() -> None:
    report = _replay("h200-shared-gpu-20s")
    burst = next(f for f in report.findings if f.code == "burnin.matmul_burst")
    assert burst.value == pytest.approx(309.68) and burst.threshold == pytest.approx(0.75 * 661.9, abs=0.01)
    assert "H200-SXM reference" in burst.message and "first 3 s from idle" in burst.message


# --- real noise stays quiet ---------------------------------------------------------------------


def test_captured_kernel_noise_is_no_finding() -> None:
    text = (H200 / "dmesg-nvrm.txt").read_text()
    assert "FBHUB Interrupt detected" in text and "Persistence mode is deprecated" in text
    assert parse_kernel_log(text) == []
    assert xid_findings(parse_kernel_log(text), {"00000000:00:06.0": 0}) == []


def test_the_h200_views_parse_as_a_healthy_gpu() -> None:
    (xml,) = parse_smi_xml((H200 / "nvidia-smi-q.xml").read_text())
    (row,) = parse_query_csv((H200 / "nvidia-smi-query.csv").read_text())
    assert xml.name == row.name == "NVIDIA H200" and xml.bus_id == row.bus_id == "00000000:00:06.0"
    assert (row.power_limit_w, row.sm_clock_max_mhz, row.pcie_gen_current, row.pcie_width_current) == (
        700.0,
        1980.0,
        5,
        16,
    )
    assert row.clock_event_mask == 0x4  # SW power cap, just after a run: normal
    assert (xml.ecc_enabled, xml.ecc_volatile_uncorrectable, xml.remap_pending, xml.remap_failure) == (
        True,
        0,
        False,
        False,
    )
    assert check_gpus([xml], expect_gpus=1, expect_model="H200") == []
    assert check_gpus([row], expect_gpus=1, expect_model="H200", under_load=[row]) == []


def test_the_h200_node_without_burnin_has_no_finding_above_info() -> None:
    run = _node(H200 / "nvidia-smi-q.xml", (H200 / "nvidia-smi-query.csv").read_text(), H200 / "dmesg-nvrm.txt")
    report = check_node(
        Host(run=run, clock=FakeClock()), CheckOptions(node="h200", expect_gpus=1, expect_model="H200", burnin=False)
    )
    assert report.status is Status.HEALTHY
    assert {f.code for f in report.findings} == {"dcgm.skipped", "burnin.skipped"}


# --- a reference or a datasheet floor for every catalog GPU --------------------------------------

# nvidia-smi names (as the driver prints them) -> the datasheet variant they must resolve to.
NAMES = {
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA H100 PCIe": "H100-PCIE",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200-SXM",
    "NVIDIA H200 NVL": "H200-NVL",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA B200": "B200",
    "NVIDIA A100-SXM4-80GB": "A100-SXM-80GB",
    "NVIDIA A100 80GB PCIe": "A100-PCIE-80GB",
    "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA A100-PCIE-40GB": "A100-40GB",
    "NVIDIA L40S": "L40S",
    "NVIDIA L4": "L4",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "NVIDIA GeForce RTX 5090": "RTX5090",
    "AMD Instinct MI300X": "MI300X",
}
# variant -> (dense bf16 TFLOP/s, memory TB/s, matmul floor), as the datasheets print them.
PEAKS = {
    "H100-SXM": (989.4, 3.35, 0.5),
    "H100-PCIE": (756.0, 2.0, 0.5),
    "H100-NVL": (835.5, 3.9, 0.5),
    "H200-SXM": (989.4, 4.8, 0.5),
    "H200-NVL": (835.5, 4.8, 0.5),
    "GH200": (989.4, 4.0, 0.5),
    "B200": (2250.0, 8.0, 0.5),
    "A100-SXM-80GB": (312.0, 2.039, 0.5),
    "A100-PCIE-80GB": (312.0, 1.935, 0.5),
    "A100-40GB": (312.0, 1.555, 0.5),
    "L40S": (362.05, 0.864, 0.5),
    "L4": (121.0, 0.300, 0.35),
    "A10": (125.0, 0.600, 0.5),
    "A10G": (70.0, 0.600, 0.5),
    "RTX4090": (165.2, 1.008, 0.5),
    "RTX5090": (209.5, 1.792, 0.5),
    "MI300X": (1307.4, 5.3, 0.5),
}


@pytest.mark.parametrize(("name", "key"), sorted(NAMES.items()))
def test_gpu_names_resolve_to_their_datasheet_variant(name: str, key: str) -> None:
    assert variant_of(name) == key


@pytest.mark.parametrize("key", sorted(PEAKS))
def test_every_datasheet_row_is_pinned_with_a_named_source(key: str) -> None:
    sheet = DATASHEETS[key]
    assert (sheet.bf16_dense_tflops, sheet.memory_tbps, sheet.matmul_floor) == PEAKS[key]
    assert len(sheet.source) > 40
    assert any(
        word in sheet.source.lower()
        for word in ("datasheet", "data sheet", "whitepaper", "specifications", "publishes no")
    )
    assert set(DATASHEETS) == set(PEAKS)


def test_every_gpu_model_in_the_bundled_catalog_can_be_judged() -> None:
    catalog = json.loads((ROOT / "provisioner" / "data" / "catalog.json").read_text())
    models = {offer["gpu_model"] for offer in catalog["offers"]}
    resolvable = {variant.split("-")[0] for variant in NAMES.values()}
    assert models <= resolvable, models - resolvable
    assert models >= {"H100", "H200", "B200", "A100", "GH200", "L40S", "L4", "RTX4090"}


def test_measured_references_clear_their_own_datasheet_floor() -> None:
    for reference in (H100_SXM, H200_SXM):
        sheet = DATASHEETS[reference.key]
        assert reference.matmul_sustained_tflops is not None and reference.hbm_copy_tbps is not None
        assert reference.matmul_sustained_tflops > sheet.matmul_floor * sheet.bf16_dense_tflops
        assert reference.hbm_copy_tbps > 0.6 * sheet.memory_tbps
    assert reference_for("NVIDIA H200 NVL") is None  # the NVL part is not the measured 700 W SXM one


def _one_gpu(**figures: float) -> BurnInResult:
    return BurnInResult(gpus=[GpuMetrics(index=0, **figures)])


@pytest.mark.parametrize(
    ("name", "metric", "value", "failed"),
    [
        ("NVIDIA L40S", "matmul_sustained_tflops", 181.03, False),  # 50 % of 362.05 = 181.025
        ("NVIDIA L40S", "matmul_sustained_tflops", 181.02, True),
        ("NVIDIA B200", "matmul_burst_tflops", 1124.9, True),  # a half-speed B200
        ("NVIDIA B200", "matmul_burst_tflops", 1500.0, False),
        ("NVIDIA L4", "matmul_sustained_tflops", 42.34, True),  # 35 % of 121 = 42.35
        ("NVIDIA L4", "matmul_sustained_tflops", 42.36, False),
        ("NVIDIA A100-SXM4-80GB", "hbm_copy_tbps", 1.2233, True),  # 60 % of 2.039 = 1.2234
        ("NVIDIA A100-SXM4-80GB", "hbm_copy_tbps", 1.2235, False),
        ("AMD Instinct MI300X", "hbm_copy_tbps", 2.0, True),
    ],
)
def test_a_one_gpu_node_without_measured_reference_is_judged_by_its_datasheet_floor(
    name: str, metric: str, value: float, failed: bool
) -> None:
    findings = judge_burnin(_one_gpu(**{metric: value}), name)
    if not failed:
        assert findings == []
        return
    (finding,) = findings
    assert (finding.code, finding.severity, finding.gpu) == (f"burnin.{metric.rsplit('_', 1)[0]}", Severity.FAILED, 0)
    assert finding.action.value == "drain"
    assert "datasheet floor" in finding.message and DATASHEETS[variant_of(name) or ""].source in finding.message


def test_host_copies_are_not_judged_against_a_datasheet() -> None:
    # Pinned copies depend on the host's PCIe path: no datasheet figure applies.
    assert judge_burnin(_one_gpu(h2d_gbps=1.0, d2h_gbps=1.0), "NVIDIA L40S") == []


# --- unjudged models ------------------------------------------------------------------------------


def test_an_unknown_model_is_degraded_unjudged_never_silently_healthy() -> None:
    (finding,) = judge_burnin(_one_gpu(matmul_sustained_tflops=5.0), "NVIDIA Tesla T4")
    assert (finding.code, finding.severity) == ("burnin.unjudged", Severity.DEGRADED)
    assert "--allow-unjudged" in finding.message and "NVIDIA Tesla T4" in finding.message
    (allowed,) = judge_burnin(_one_gpu(matmul_sustained_tflops=5.0), "NVIDIA Tesla T4", allow_unjudged=True)
    assert (allowed.code, allowed.severity) == ("burnin.unjudged", Severity.INFO)
    assert judge_burnin(BurnInResult(), "NVIDIA Tesla T4") == []  # nothing measured: nothing to judge


def test_allow_unjudged_reaches_the_node_check() -> None:
    xml = (H100_IDLE / "nvidia-smi-q.xml").read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA Tesla T4")
    run = FakeRunner({XML_ARGS: CommandResult(0, xml), ("dmesg",): CommandResult(0, "")})

    def burnin(config: BurnInConfig, *, clock: object, probe: object) -> BurnInResult:
        return _one_gpu(matmul_burst_tflops=60.0, matmul_sustained_tflops=55.0, hbm_copy_tbps=0.3)

    strict = check_node(Host(run=run, clock=FakeClock()), CheckOptions(node="t4", dcgm_level=None), burnin=burnin)
    assert strict.status is Status.DEGRADED and strict.problem_codes() == {"burnin.unjudged"}
    allowed = check_node(
        Host(run=run, clock=FakeClock()), CheckOptions(node="t4", dcgm_level=None, allow_unjudged=True), burnin=burnin
    )
    assert allowed.status is Status.HEALTHY


def test_a_burnin_measured_another_way_falls_back_to_the_datasheet_floor() -> None:
    config = BurnInConfig().tiny()
    result = BurnInResult(
        gpus=[GpuMetrics(index=0, matmul_burst_tflops=600.0, matmul_sustained_tflops=600.0)],
        matmul_n=config.matmul_n,
        burst_s=config.burst_s,
        window_s=config.window_s,
        copy_bytes=config.copy_bytes,
        pinned_bytes=config.pinned_bytes,
    )
    findings = judge_burnin(result, "NVIDIA H100 80GB HBM3")
    # 600 is 88 % of the H100 reference (degraded there) but 61 % of the 989.4 peak: above the floor.
    assert {(f.code, f.severity) for f in findings} == {("burnin.method_differs", Severity.INFO)}
    assert "64^3 matmul" in findings[0].message
    slow = judge_burnin(
        result.model_copy(update={"gpus": [GpuMetrics(index=0, matmul_sustained_tflops=400.0)]}),
        "NVIDIA H100 80GB HBM3",
    )
    assert {(f.code, f.severity) for f in slow} == {
        ("burnin.method_differs", Severity.INFO),
        ("burnin.matmul_sustained", Severity.FAILED),
    }
