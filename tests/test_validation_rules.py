"""Every rule pinned: each XID row, each nvidia-smi check rule and each burn-in band, with its
severity and action, written out here (never read back from the production tables). Lowering
any rule to ``info``, or changing its action, fails a test; so does a rule added to a table
without a row here.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.validation.checks import CHECK_RULES, check_gpus, check_inventory, evaluate
from provisioner.validation.datasheet import MATMUL_FLOOR, MEMORY_FLOOR
from provisioner.validation.model import Action, BurnInResult, GpuMetrics, Severity
from provisioner.validation.nvsmi import GpuState
from provisioner.validation.reference import BANDS, H100_SXM, judge_burnin
from provisioner.validation.xid import XID_TABLE, parse_kernel_log, xid_findings

F, D, W = Severity.FAILED, Severity.DEGRADED, Severity.WARN

XIDS = {
    13: (W, Action.RESTART_JOB), 31: (W, Action.RESTART_JOB), 43: (W, Action.RESTART_JOB), 45: (W, Action.NONE),
    48: (F, Action.DRAIN), 61: (F, Action.RESET_GPU), 62: (F, Action.RESET_GPU), 63: (D, Action.RESET_GPU),
    64: (F, Action.REBOOT), 74: (F, Action.DRAIN), 79: (F, Action.REPLACE_NODE), 92: (D, Action.RESET_GPU),
    94: (D, Action.RESTART_JOB), 95: (F, Action.DRAIN), 119: (F, Action.RESET_GPU), 120: (F, Action.RESET_GPU),
    140: (F, Action.DRAIN), 154: (F, Action.REBOOT),
}


def test_the_xid_table_has_exactly_the_pinned_rows() -> None:
    assert set(XID_TABLE) == set(XIDS)


@pytest.mark.parametrize(("xid", "expected"), sorted(XIDS.items()))
def test_each_xid_in_a_kernel_log_gives_its_severity_and_action(xid: int, expected: tuple[Severity, Action]) -> None:
    log = f"[ 12.5] NVRM: Xid (PCI:0000:3b:00): {xid}, pid=4242, name=python, something happened\n"
    (finding,) = xid_findings(parse_kernel_log(log), {"00000000:3B:00.0": 2})
    assert (finding.code, finding.gpu, finding.severity, finding.action) == (f"xid.{xid}", 2, *expected)
    assert XID_TABLE[xid].meaning in finding.message


# A healthy GPU state (the H100 capture's values) and, per rule, what to change to make it fire.
HEALTHY = GpuState(index=0, name="NVIDIA H100 80GB HBM3", bus_id="00000000:00:06.0", persistence_mode=True,
                   ecc_enabled=True, ecc_volatile_uncorrectable=0, ecc_aggregate_uncorrectable=0,
                   sram_threshold_exceeded=False, retired_pages_pending=False, remap_pending=False,
                   remap_failure=False, pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16,
                   pcie_width_max=16, clock_event_mask=0x4)  # SW power cap: normal under load
RULES: dict[str, tuple[Severity, Action, dict[str, object]]] = {
    "ecc.disabled": (D, Action.FIX_CONFIG, {"ecc_enabled": False}),
    "ecc.volatile_uncorrectable": (F, Action.DRAIN, {"ecc_volatile_uncorrectable": 1}),
    "ecc.aggregate_uncorrectable": (W, Action.NONE, {"ecc_aggregate_uncorrectable": 3}),
    "ecc.sram_threshold_exceeded": (F, Action.REPLACE_NODE, {"sram_threshold_exceeded": True}),
    "remap.failure": (F, Action.REPLACE_NODE, {"remap_failure": True}),
    "remap.pending": (F, Action.RESET_GPU, {"remap_pending": True}),
    "retired_pages.pending": (F, Action.RESET_GPU, {"retired_pages_pending": True}),
    "persistence.off": (D, Action.FIX_CONFIG, {"persistence_mode": False}),
    "pcie.gen_below_max": (D, Action.DRAIN, {"pcie_gen_current": 4}),
    "pcie.width_below_max": (D, Action.DRAIN, {"pcie_width_current": 8}),
    "clock_event.hw_slowdown": (F, Action.DRAIN, {"clock_event_mask": 0x4 | 0x8}),
    "clock_event.hw_thermal_slowdown": (F, Action.DRAIN, {"clock_event_mask": 0x40}),
    "clock_event.hw_power_brake_slowdown": (F, Action.DRAIN, {"clock_event_mask": 0x80}),
    "clock_event.sw_thermal_slowdown": (D, Action.DRAIN, {"clock_event_mask": 0x20}),
}
INVENTORY = {"gpu.count": (F, Action.REPLACE_NODE), "gpu.model": (F, Action.REPLACE_NODE)}


def test_the_check_table_has_exactly_the_pinned_rules() -> None:
    assert set(CHECK_RULES) == set(RULES) | set(INVENTORY)
    assert evaluate(HEALTHY) == [] and evaluate(HEALTHY, under_load=True) == []


@pytest.mark.parametrize("code", sorted(RULES))
def test_each_check_rule_fires_alone_with_its_severity_and_action(code: str) -> None:
    severity, action, change = RULES[code]
    state = replace(HEALTHY, **change)  # type: ignore[arg-type]
    (finding,) = check_gpus([state], expect_gpus=1, expect_model="H100")
    assert (finding.code, finding.gpu, finding.severity, finding.action) == (code, 0, severity, action)
    assert finding.message.startswith("GPU 0: ")


@pytest.mark.parametrize("code", sorted(c for c in RULES if c.startswith("clock_event.")))
def test_each_clock_event_rule_also_fires_under_load(code: str) -> None:
    severity, action, change = RULES[code]
    loaded = replace(HEALTHY, **change)  # type: ignore[arg-type]
    (finding,) = check_gpus([HEALTHY], under_load=[loaded])
    assert (finding.code, finding.severity, finding.action) == (code, severity, action)
    assert "under load" in finding.message


def test_only_clock_events_are_read_from_the_samples_under_load() -> None:
    # The samples under load are cheap CSV reads; the memory and config rules ran before the burn-in.
    assert check_gpus([HEALTHY], under_load=[replace(HEALTHY, persistence_mode=False)]) == []


@pytest.mark.parametrize(("code", "kwargs"), [("gpu.count", {"expect_gpus": 8, "expect_model": None}),
                                              ("gpu.model", {"expect_gpus": None, "expect_model": "A100"})])
def test_inventory_rules(code: str, kwargs: dict[str, object]) -> None:
    (finding,) = check_inventory([HEALTHY], **kwargs)  # type: ignore[arg-type]
    assert (finding.code, finding.severity, finding.action) == (code, *INVENTORY[code])


# --- burn-in bands and floors ----------------------------------------------------------------------

BAND_ROWS = {  # metric -> (degraded below, failed below), fractions of the measured reference
    "matmul_burst_tflops": (0.90, 0.75), "matmul_sustained_tflops": (0.90, 0.75), "hbm_copy_tbps": (0.92, 0.83),
    "h2d_gbps": (0.70, 0.40), "d2h_gbps": (0.70, 0.40), "nccl_busbw_gbps": (0.90, 0.70),
}


def test_the_band_table_has_exactly_the_pinned_rows() -> None:
    assert {metric: (band.degraded, band.failed) for metric, band in BANDS.items()} == BAND_ROWS
    assert (MATMUL_FLOOR, MEMORY_FLOOR) == (0.50, 0.60)


def _h100(metric: str, fraction: float) -> BurnInResult:
    if metric == "nccl_busbw_gbps":
        return BurnInResult(nccl_busbw_gbps=fraction * 370.0, nccl_gpus=8)
    reference = getattr(H100_SXM, metric)
    return BurnInResult(gpus=[GpuMetrics(index=0, **{metric: round(reference * fraction, 6)})])


@pytest.mark.parametrize("metric", sorted(BAND_ROWS))
@pytest.mark.parametrize(("where", "expected"), [("at_degraded", None), ("below_degraded", D), ("at_failed", D),
                                                 ("below_failed", F)])
def test_each_band_edge(metric: str, where: str, expected: Severity | None) -> None:
    degraded, failed = BAND_ROWS[metric]
    fraction = {"at_degraded": degraded + 1e-6, "below_degraded": degraded - 0.005, "at_failed": failed + 1e-6,
                "below_failed": failed - 0.005}[where]
    findings = judge_burnin(_h100(metric, fraction), "NVIDIA H100 80GB HBM3")
    if expected is None:
        assert findings == []
        return
    (finding,) = findings
    assert (finding.code, finding.severity, finding.action) == (f"burnin.{metric.rsplit('_', 1)[0]}", expected,
                                                                Action.DRAIN)
