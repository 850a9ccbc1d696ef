"""Every rule pinned: each XID row, each nvidia-smi check rule and each burn-in band, with its
severity and action, written out here (never read back from the production tables). Lowering
any rule to ``info``, or changing its action, fails a test; so does a rule added to a table
without a row here. The findings made outside the tables (NVLink, fabric, DCGM, nvidia-smi
missing, an unreadable kernel log, an unreachable node, stragglers, unjudged and skipped
burn-ins) are pinned the same way, each produced by its real check.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from provisioner.validation.checks import CHECK_RULES, check_gpus, check_inventory, evaluate
from provisioner.validation.cluster import Target, check_remote, mark_stragglers
from provisioner.validation.datasheet import MATMUL_FLOOR, MEMORY_FLOOR
from provisioner.validation.fabric import check_dcgm, check_fabric, check_nvlink
from provisioner.validation.model import Action, BurnInResult, Finding, GpuMetrics, NodeReport, Severity
from provisioner.validation.node import CheckOptions, check_node
from provisioner.validation.nvsmi import XML_ARGS, GpuState
from provisioner.validation.reference import BANDS, H100_SXM, judge_burnin
from provisioner.validation.runner import CommandResult, FakeClock, FakeRunner, Host
from provisioner.validation.xid import XID_TABLE, parse_kernel_log, xid_findings

F, D, W = Severity.FAILED, Severity.DEGRADED, Severity.WARN

XIDS = {
    13: (W, Action.RESTART_JOB),
    31: (W, Action.RESTART_JOB),
    43: (W, Action.RESTART_JOB),
    45: (W, Action.NONE),
    48: (F, Action.DRAIN),
    61: (F, Action.RESET_GPU),
    62: (F, Action.RESET_GPU),
    63: (D, Action.RESET_GPU),
    64: (F, Action.REBOOT),
    74: (F, Action.DRAIN),
    79: (F, Action.REPLACE_NODE),
    92: (D, Action.RESET_GPU),
    94: (D, Action.RESTART_JOB),
    95: (F, Action.DRAIN),
    119: (F, Action.RESET_GPU),
    120: (F, Action.RESET_GPU),
    140: (F, Action.DRAIN),
    154: (F, Action.REBOOT),
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
HEALTHY = GpuState(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    bus_id="00000000:00:06.0",
    persistence_mode=True,
    ecc_enabled=True,
    ecc_volatile_uncorrectable=0,
    ecc_aggregate_uncorrectable=0,
    sram_threshold_exceeded=False,
    retired_pages_pending=False,
    remap_pending=False,
    remap_failure=False,
    pcie_gen_current=5,
    pcie_gen_max=5,
    pcie_width_current=16,
    pcie_width_max=16,
    clock_event_mask=0x4,
)  # SW power cap: normal under load
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


@pytest.mark.parametrize(
    ("code", "kwargs"),
    [
        ("gpu.count", {"expect_gpus": 8, "expect_model": None}),
        ("gpu.model", {"expect_gpus": None, "expect_model": "A100"}),
    ],
)
def test_inventory_rules(code: str, kwargs: dict[str, object]) -> None:
    (finding,) = check_inventory([HEALTHY], **kwargs)  # type: ignore[arg-type]
    assert (finding.code, finding.severity, finding.action) == (code, *INVENTORY[code])


# --- burn-in bands and floors ----------------------------------------------------------------------

BAND_ROWS = {  # metric -> (degraded below, failed below), fractions of the measured reference
    "matmul_burst_tflops": (0.90, 0.75),
    "matmul_sustained_tflops": (0.90, 0.75),
    "hbm_copy_tbps": (0.92, 0.83),
    "h2d_gbps": (0.70, 0.40),
    "d2h_gbps": (0.70, 0.40),
    "nccl_busbw_gbps": (0.90, 0.70),
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
@pytest.mark.parametrize(
    ("where", "expected"), [("at_degraded", None), ("below_degraded", D), ("at_failed", D), ("below_failed", F)]
)
def test_each_band_edge(metric: str, where: str, expected: Severity | None) -> None:
    degraded, failed = BAND_ROWS[metric]
    fraction = {
        "at_degraded": degraded + 1e-6,
        "below_degraded": degraded - 0.005,
        "at_failed": failed + 1e-6,
        "below_failed": failed - 0.005,
    }[where]
    findings = judge_burnin(_h100(metric, fraction), "NVIDIA H100 80GB HBM3")
    if expected is None:
        assert findings == []
        return
    (finding,) = findings
    assert (finding.code, finding.severity, finding.action) == (
        f"burnin.{metric.rsplit('_', 1)[0]}",
        expected,
        Action.DRAIN,
    )


# --- every other finding the checks produce ----------------------------------------------------------


def _sysfs(root: Path, ports: dict[str, str]) -> Host:
    for device, state in ports.items():
        port = root / "sys/class/infiniband" / device / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(f"{4 if state == 'ACTIVE' else 1}: {state}\n")
    return Host(run=FakeRunner(), root=root)


def _dcgm(status: str) -> CommandResult:
    document = {"tests": [{"name": "GPU Memory", "results": [{"gpu_id": "0", "status": status}]}]}
    return CommandResult(0, json.dumps(document))


def _node_check(answers: dict[tuple[str, ...], CommandResult], prefix: str) -> list[Finding]:
    """The node check's findings whose code starts with ``prefix`` (dmesg is absent from these fakes)."""
    host = Host(run=FakeRunner(answers), clock=FakeClock())
    findings = check_node(host, CheckOptions(node="n", burnin=False, dcgm_level=None)).findings
    return [f for f in findings if f.code.startswith(prefix)]


SMI_XML = (Path(__file__).parent / "fixtures" / "gpu" / "h100-sxm-80gb" / "nvidia-smi-q.xml").read_text()
_EIGHT = BurnInResult(gpus=[GpuMetrics(index=i, matmul_sustained_tflops=670.0 if i else 500.0) for i in range(8)])
OTHER: dict[str, tuple[Callable[[Path], list[Finding]], str, Severity, Action]] = {
    "nvlink missing": (
        lambda _: check_nvlink(CommandResult(0, "GPU 0: H100 (UUID: GPU-a)\n\t Link 0: <inactive>\n"), 1, True),
        "nvlink.missing",
        F,
        Action.DRAIN,
    ),
    "nvlink inactive": (
        lambda _: check_nvlink(
            CommandResult(0, "GPU 0: H100 (UUID: GPU-a)\n\t Link 0: 26.5 GB/s\n\t Link 1: <inactive>\n"), 1, True
        ),
        "nvlink.inactive_links",
        D,
        Action.DRAIN,
    ),
    "fabric missing": (lambda root: check_fabric(_sysfs(root, {}), "efa"), "fabric.missing", F, Action.REPLACE_NODE),
    "fabric all down": (
        lambda root: check_fabric(_sysfs(root, {"efa_0": "DOWN"}), "efa"),
        "fabric.ports_down",
        F,
        Action.DRAIN,
    ),
    "fabric some down": (
        lambda root: check_fabric(_sysfs(root, {"efa_0": "DOWN", "efa_1": "ACTIVE"}), "efa"),
        "fabric.ports_down",
        D,
        Action.DRAIN,
    ),
    "fabric ok": (
        lambda root: check_fabric(_sysfs(root, {"efa_0": "ACTIVE"}), "efa"),
        "fabric.ok",
        Severity.INFO,
        Action.NONE,
    ),
    "dcgm fail": (lambda _: check_dcgm(_dcgm("Fail"), 1), "dcgm.gpu_memory", F, Action.DRAIN),
    "dcgm warn": (lambda _: check_dcgm(_dcgm("Warn"), 1), "dcgm.gpu_memory", W, Action.NONE),
    "dcgm no json": (lambda _: check_dcgm(CommandResult(255, "Error: host engine"), 1), "dcgm.error", W, Action.NONE),
    "dcgm absent": (lambda _: check_dcgm(CommandResult(127), 1), "dcgm.skipped", Severity.INFO, Action.NONE),
    "no driver": (lambda _: _node_check({}, "gpu."), "gpu.smi", F, Action.REPLACE_NODE),
    "smi fails": (
        lambda _: _node_check({XML_ARGS: CommandResult(9, "", "NVML: Unknown Error")}, "gpu."),
        "gpu.smi",
        F,
        Action.REBOOT,
    ),
    "smi garbage": (
        lambda _: _node_check({XML_ARGS: CommandResult(0, "<nvidia")}, "gpu."),
        "gpu.smi",
        F,
        Action.REBOOT,
    ),
    "log unreadable": (
        lambda _: _node_check({XML_ARGS: CommandResult(0, SMI_XML)}, "xid."),
        "xid.unreadable",
        W,
        Action.NONE,
    ),
    "unknown xid": (
        lambda _: xid_findings(parse_kernel_log("NVRM: Xid (PCI:0000:3b:00): 999, new\n"), {}),
        "xid.999",
        W,
        Action.NONE,
    ),
    "unreachable": (
        lambda _: (
            check_remote(
                "n9", Target(nodes=("n9",), via="ssh"), FakeRunner({("ssh",): CommandResult(255, "", "refused")})
            ).findings
        ),
        "node.unreachable",
        F,
        Action.DRAIN,
    ),
    "band failed on one of eight": (
        lambda _: judge_burnin(_EIGHT, "NVIDIA H100 80GB HBM3"),
        "burnin.matmul_sustained",
        F,
        Action.DRAIN,
    ),
    "gpu straggler above band": (
        lambda _: judge_burnin(
            _EIGHT.model_copy(
                update={
                    "gpus": [
                        g.model_copy(update={"matmul_sustained_tflops": 630.0 if g.index == 0 else 670.0})
                        for g in _EIGHT.gpus
                    ]
                }
            ),
            "NVIDIA H100 80GB HBM3",
        ),
        "straggler.gpu.matmul_sustained",
        D,
        Action.DRAIN,
    ),
    "node straggler": (
        lambda _: [
            f
            for r in mark_stragglers(
                [NodeReport(node=f"n{i}", gpu_model="H100", burnin=_one(600.0 if i == 0 else 670.0)) for i in range(5)]
            )
            for f in r.findings
        ],
        "straggler.node.matmul_sustained",
        D,
        Action.DRAIN,
    ),
    "unjudged": (lambda _: judge_burnin(_one(10.0), "NVIDIA Tesla T4"), "burnin.unjudged", D, Action.NONE),
    "skipped": (
        lambda _: judge_burnin(BurnInResult(skipped="no torch"), None),
        "burnin.skipped",
        Severity.INFO,
        Action.NONE,
    ),
}


def _one(sustained: float) -> BurnInResult:
    return BurnInResult(gpus=[GpuMetrics(index=0, matmul_sustained_tflops=sustained)])


@pytest.mark.parametrize("case", sorted(OTHER))
def test_every_other_finding_has_its_severity_and_action(case: str, tmp_path: Path) -> None:
    produce, code, severity, action = OTHER[case]
    (finding,) = produce(tmp_path)
    assert (finding.code, finding.severity, finding.action) == (code, severity, action)
