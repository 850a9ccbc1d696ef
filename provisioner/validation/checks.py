"""Health checks on parsed ``nvidia-smi`` state: pure functions from GpuState to Findings.

Each check names what it saw and what it expected. Severities (and why):

* GPU count or model unlike the plan: failed (the job's layout would be wrong).
* Volatile uncorrectable ECC, pending row remap, remap failure, pending page retirement,
  SRAM threshold exceeded: failed (the reference's "gates that cost nothing").
* Aggregate (lifetime) uncorrectable ECC: warn (history, not a present fault).
* ECC disabled, persistence mode off, PCIe generation or width below the link's maximum: degraded.
* Clock events: HW slowdown, HW thermal slowdown and HW power brake are failed; SW thermal
  slowdown is degraded. SW power cap is normal for a GPU at full load (a healthy H100 SXM
  sits on its 700 W cap under a sustained matmul, clock event 0x4; see tests/fixtures/gpu);
  idle, application-clock, sync-boost and display reasons are informational.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from provisioner.validation.model import Action, Finding, Severity
from provisioner.validation.nvsmi import CLOCK_EVENT_BITS, GpuState

_BAD_EVENTS = {
    "hw_slowdown": (Severity.FAILED, "HW slowdown (thermal or external power brake signal)"),
    "hw_thermal_slowdown": (Severity.FAILED, "HW thermal slowdown (GPU too hot)"),
    "hw_power_brake_slowdown": (Severity.FAILED, "HW power brake slowdown (external power brake asserted)"),
    "sw_thermal_slowdown": (Severity.DEGRADED, "SW thermal slowdown (clocks lowered to hold the temperature target)"),
}

_MODEL_WORDS = re.compile(r"[A-Za-z]+\d+[A-Za-z]*|\d+[A-Za-z]+")


def canonical_model(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``; ``NVIDIA GeForce RTX 4090`` -> ``RTX4090``."""
    text = name.upper().replace("NVIDIA", "").replace("GEFORCE", "").strip()
    rtx = re.search(r"RTX\s*(\d{4})", text)
    if rtx:
        return f"RTX{rtx.group(1)}"
    for word in text.replace("-", " ").split():
        if re.fullmatch(r"[A-Z]+\d+[A-Z]*", word) and not re.fullmatch(r"\d+GB", word):
            return word
    return text.split()[0] if text.split() else name


def model_matches(name: str, expected: str) -> bool:
    """The GPU's name satisfies ``expected`` (``H100`` matches ``NVIDIA H100 80GB HBM3``)."""
    return canonical_model(name) == canonical_model(expected) or expected.upper() in name.upper().split()


def check_inventory(states: Sequence[GpuState], expect_gpus: int | None, expect_model: str | None) -> list[Finding]:
    findings = []
    if expect_gpus is not None and len(states) != expect_gpus:
        findings.append(Finding(code="gpu.count", severity=Severity.FAILED, action=Action.REPLACE_NODE,
                                value=len(states), threshold=expect_gpus,
                                message=f"{len(states)} GPU(s) visible, expected {expect_gpus}"))
    if expect_model:
        for state in states:
            if state.name and not model_matches(state.name, expect_model):
                findings.append(Finding(code="gpu.model", severity=Severity.FAILED, gpu=state.index,
                                        action=Action.REPLACE_NODE,
                                        message=f"GPU {state.index} is {state.name}, expected {expect_model}"))
    return findings


def check_memory(state: GpuState) -> list[Finding]:
    i, found = state.index, []

    def add(code: str, severity: Severity, message: str, action: Action, value: float | None = None) -> None:
        found.append(Finding(code=code, severity=severity, gpu=i, action=action, value=value,
                             message=f"GPU {i}: {message}"))

    if state.ecc_enabled is False:
        add("ecc.disabled", Severity.DEGRADED, "ECC is disabled", Action.FIX_CONFIG)
    if state.ecc_volatile_uncorrectable:
        add("ecc.volatile_uncorrectable", Severity.FAILED,
            f"{state.ecc_volatile_uncorrectable} volatile uncorrectable ECC error(s) since the last reset",
            Action.DRAIN, state.ecc_volatile_uncorrectable)
    if state.ecc_aggregate_uncorrectable:
        add("ecc.aggregate_uncorrectable", Severity.WARN,
            f"{state.ecc_aggregate_uncorrectable} uncorrectable ECC error(s) over the GPU's lifetime",
            Action.NONE, state.ecc_aggregate_uncorrectable)
    if state.sram_threshold_exceeded:
        add("ecc.sram_threshold_exceeded", Severity.FAILED, "SRAM uncorrectable error threshold exceeded (RMA)",
            Action.REPLACE_NODE)
    if state.remap_failure:
        add("remap.failure", Severity.FAILED, "row remapping failed (no spare rows left)", Action.REPLACE_NODE)
    if state.remap_pending:
        add("remap.pending", Severity.FAILED, "a row remap is pending (takes effect on GPU reset)", Action.RESET_GPU)
    if state.retired_pages_pending:
        add("retired_pages.pending", Severity.FAILED, "a page retirement is pending (takes effect on GPU reset)",
            Action.RESET_GPU)
    return found


def check_config(state: GpuState) -> list[Finding]:
    i, found = state.index, []
    if state.persistence_mode is False:
        found.append(Finding(code="persistence.off", severity=Severity.DEGRADED, gpu=i, action=Action.FIX_CONFIG,
                             message=f"GPU {i}: persistence mode is off (nvidia-smi -pm 1, or nvidia-persistenced)"))
    gen, gen_max = state.pcie_gen_current, state.pcie_gen_max
    if gen is not None and gen_max is not None and gen < gen_max:
        found.append(Finding(code="pcie.gen_below_max", severity=Severity.DEGRADED, gpu=i, action=Action.DRAIN,
                             value=gen, threshold=gen_max,
                             message=f"GPU {i}: PCIe link at Gen{gen}, the link supports Gen{gen_max}"))
    width, width_max = state.pcie_width_current, state.pcie_width_max
    if width is not None and width_max is not None and width < width_max:
        found.append(Finding(code="pcie.width_below_max", severity=Severity.DEGRADED, gpu=i, action=Action.DRAIN,
                             value=width, threshold=width_max,
                             message=f"GPU {i}: PCIe link at x{width}, the link supports x{width_max}"))
    return found


def check_clock_events(state: GpuState, *, under_load: bool = False) -> list[Finding]:
    """Decode the clock event mask: bad reasons become findings; SW power cap is normal."""
    if state.clock_event_mask is None:
        return []
    found = []
    when = " under load" if under_load else ""
    for reason, (severity, meaning) in _BAD_EVENTS.items():
        if state.clock_event_mask & CLOCK_EVENT_BITS[reason]:
            found.append(Finding(code=f"clock_event.{reason}", severity=severity, gpu=state.index, action=Action.DRAIN,
                                 value=state.clock_event_mask,
                                 message=f"GPU {state.index}: {meaning}{when} "
                                         f"(clock event reasons {state.clock_event_mask:#x})"))
    return found


def check_gpus(states: Sequence[GpuState], *, expect_gpus: int | None = None, expect_model: str | None = None,
               under_load: Sequence[GpuState] = ()) -> list[Finding]:
    """Every nvidia-smi check. ``under_load`` is a reading taken during the sustained burn-in."""
    findings = check_inventory(states, expect_gpus, expect_model)
    for state in states:
        findings += check_memory(state) + check_config(state) + check_clock_events(state)
    seen = {(f.code, f.gpu) for f in findings}
    for state in under_load:
        for finding in check_clock_events(state, under_load=True):
            if (finding.code, finding.gpu) not in seen:
                findings.append(finding)
    return findings


__all__ = ["canonical_model", "check_clock_events", "check_config", "check_gpus", "check_inventory",
           "check_memory", "model_matches"]
