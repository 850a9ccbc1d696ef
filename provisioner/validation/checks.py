"""Health checks on parsed ``nvidia-smi`` state: pure functions from GpuState to Findings.

``CHECK_RULES`` is the one table of rules (code, severity, action, when it fires); the node
check, and anything else that watches GPUs, evaluates states through ``evaluate``. Each finding
names what it saw and what it expected. Severities (and why):

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provisioner.validation.model import Action, Finding, Severity
from provisioner.validation.nvsmi import CLOCK_EVENT_BITS, GpuState

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
    count, model = CHECK_RULES["gpu.count"], CHECK_RULES["gpu.model"]
    if expect_gpus is not None and len(states) != expect_gpus:
        findings.append(
            Finding(
                code=count.code,
                severity=count.severity,
                action=count.action,
                value=len(states),
                threshold=expect_gpus,
                message=f"{len(states)} GPU(s) visible, expected {expect_gpus}",
            )
        )
    if expect_model:
        for state in states:
            if state.name and not model_matches(state.name, expect_model):
                findings.append(
                    Finding(
                        code=model.code,
                        severity=model.severity,
                        gpu=state.index,
                        action=model.action,
                        message=f"GPU {state.index} is {state.name}, expected {expect_model}",
                    )
                )
    return findings


@dataclass(frozen=True)
class CheckRule:
    """One health rule on a GPU's nvidia-smi state: when it fires, how bad it is, what to do.

    ``fires`` reads a ``GpuState``; ``detail`` says what was seen (the finding's message after
    ``GPU i:``); ``value``/``threshold`` are what the finding records. ``applies`` is None for the
    node-level inventory rules (count, model), which need the expectations and live in
    ``check_inventory``. The table is the one place a severity or an action is decided: the node
    check and any other watcher (a periodic health watch) evaluate states through ``evaluate``.
    """

    code: str
    severity: Severity
    action: Action
    meaning: str
    applies: Callable[[GpuState], bool] | None = None
    detail: Callable[[GpuState], str] | None = None
    value: Callable[[GpuState], float | None] = lambda state: None
    threshold: Callable[[GpuState], float | None] = lambda state: None


def _below(current: int | None, maximum: int | None) -> bool:
    return current is not None and maximum is not None and current < maximum


def _event(reason: str) -> Callable[[GpuState], bool]:
    bit = CLOCK_EVENT_BITS[reason]
    return lambda state: state.clock_event_mask is not None and bool(state.clock_event_mask & bit)


def _mask(state: GpuState) -> float | None:
    return state.clock_event_mask


_RULES = (
    CheckRule("gpu.count", Severity.FAILED, Action.REPLACE_NODE, "fewer or more GPUs than expected"),
    CheckRule("gpu.model", Severity.FAILED, Action.REPLACE_NODE, "a GPU of another model than expected"),
    CheckRule(
        "ecc.disabled",
        Severity.DEGRADED,
        Action.FIX_CONFIG,
        "ECC is disabled",
        lambda s: s.ecc_enabled is False,
        lambda s: "ECC is disabled",
    ),
    CheckRule(
        "ecc.volatile_uncorrectable",
        Severity.FAILED,
        Action.DRAIN,
        "volatile uncorrectable ECC errors since the last reset",
        lambda s: bool(s.ecc_volatile_uncorrectable),
        lambda s: f"{s.ecc_volatile_uncorrectable} volatile uncorrectable ECC error(s) since the last reset",
        lambda s: s.ecc_volatile_uncorrectable,
    ),
    CheckRule(
        "ecc.aggregate_uncorrectable",
        Severity.WARN,
        Action.NONE,
        "uncorrectable ECC errors over the GPU's lifetime (history, not a present fault)",
        lambda s: bool(s.ecc_aggregate_uncorrectable),
        lambda s: f"{s.ecc_aggregate_uncorrectable} uncorrectable ECC error(s) over the GPU's lifetime",
        lambda s: s.ecc_aggregate_uncorrectable,
    ),
    CheckRule(
        "ecc.sram_threshold_exceeded",
        Severity.FAILED,
        Action.REPLACE_NODE,
        "SRAM uncorrectable error threshold exceeded (RMA)",
        lambda s: bool(s.sram_threshold_exceeded),
        lambda s: "SRAM uncorrectable error threshold exceeded (RMA)",
    ),
    CheckRule(
        "remap.failure",
        Severity.FAILED,
        Action.REPLACE_NODE,
        "row remapping failed (no spare rows left)",
        lambda s: bool(s.remap_failure),
        lambda s: "row remapping failed (no spare rows left)",
    ),
    CheckRule(
        "remap.pending",
        Severity.FAILED,
        Action.RESET_GPU,
        "a row remap is pending (takes effect on GPU reset)",
        lambda s: bool(s.remap_pending),
        lambda s: "a row remap is pending (takes effect on GPU reset)",
    ),
    CheckRule(
        "retired_pages.pending",
        Severity.FAILED,
        Action.RESET_GPU,
        "a page retirement is pending (takes effect on GPU reset)",
        lambda s: bool(s.retired_pages_pending),
        lambda s: "a page retirement is pending (takes effect on GPU reset)",
    ),
    CheckRule(
        "persistence.off",
        Severity.DEGRADED,
        Action.FIX_CONFIG,
        "persistence mode is off",
        lambda s: s.persistence_mode is False,
        lambda s: "persistence mode is off (nvidia-smi -pm 1, or nvidia-persistenced)",
    ),
    CheckRule(
        "pcie.gen_below_max",
        Severity.DEGRADED,
        Action.DRAIN,
        "PCIe link generation below the link's maximum",
        lambda s: _below(s.pcie_gen_current, s.pcie_gen_max),
        lambda s: f"PCIe link at Gen{s.pcie_gen_current}, the link supports Gen{s.pcie_gen_max}",
        lambda s: s.pcie_gen_current,
        lambda s: s.pcie_gen_max,
    ),
    CheckRule(
        "pcie.width_below_max",
        Severity.DEGRADED,
        Action.DRAIN,
        "PCIe link width below the link's maximum",
        lambda s: _below(s.pcie_width_current, s.pcie_width_max),
        lambda s: f"PCIe link at x{s.pcie_width_current}, the link supports x{s.pcie_width_max}",
        lambda s: s.pcie_width_current,
        lambda s: s.pcie_width_max,
    ),
    *(
        CheckRule(f"clock_event.{reason}", severity, Action.DRAIN, meaning, _event(reason), None, _mask)
        for reason, severity, meaning in (
            ("hw_slowdown", Severity.FAILED, "HW slowdown (thermal or external power brake signal)"),
            ("hw_thermal_slowdown", Severity.FAILED, "HW thermal slowdown (GPU too hot)"),
            ("hw_power_brake_slowdown", Severity.FAILED, "HW power brake slowdown (external power brake asserted)"),
            (
                "sw_thermal_slowdown",
                Severity.DEGRADED,
                "SW thermal slowdown (clocks lowered to hold the temperature target)",
            ),
        )
    ),
)
CHECK_RULES: dict[str, CheckRule] = {rule.code: rule for rule in _RULES}
"""Every nvidia-smi rule by finding code. SW power cap (0x4), idle, application clocks, sync
boost and display clock events are deliberately absent: they are normal."""


def _finding(rule: CheckRule, state: GpuState, suffix: str = "") -> Finding:
    detail = rule.detail(state) if rule.detail else rule.meaning
    if rule.code.startswith("clock_event."):
        suffix += f" (clock event reasons {state.clock_event_mask:#x})"
    return Finding(
        code=rule.code,
        severity=rule.severity,
        gpu=state.index,
        action=rule.action,
        value=rule.value(state),
        threshold=rule.threshold(state),
        message=f"GPU {state.index}: {detail}{suffix}",
    )


def evaluate(state: GpuState, *, under_load: bool = False, prefix: str = "") -> list[Finding]:
    """Every rule of ``CHECK_RULES`` that fires on one GPU's state, in table order.

    ``under_load``: the state was read during the burn-in, so only the clock-event rules apply
    (the rest were read before it) and the message says so. Pure.
    """
    found = []
    for rule in CHECK_RULES.values():
        if rule.applies is None or (under_load and not rule.code.startswith("clock_event.")):
            continue
        if rule.applies(state):
            found.append(_finding(rule, state, " under load" if under_load else ""))
    return found


def check_memory(state: GpuState) -> list[Finding]:
    return [f for f in evaluate(state) if f.code.split(".")[0] in ("ecc", "remap", "retired_pages")]


def check_config(state: GpuState) -> list[Finding]:
    return [f for f in evaluate(state) if f.code.split(".")[0] in ("persistence", "pcie")]


def check_clock_events(state: GpuState, *, under_load: bool = False) -> list[Finding]:
    """Decode the clock event mask: bad reasons become findings; SW power cap is normal."""
    return [f for f in evaluate(state, under_load=under_load) if f.code.startswith("clock_event.")]


def check_gpus(
    states: Sequence[GpuState],
    *,
    expect_gpus: int | None = None,
    expect_model: str | None = None,
    under_load: Sequence[GpuState] = (),
) -> list[Finding]:
    """Every nvidia-smi check. ``under_load`` is a reading taken during the sustained burn-in."""
    findings = check_inventory(states, expect_gpus, expect_model)
    for state in states:
        findings += evaluate(state)
    seen = {(f.code, f.gpu) for f in findings}
    for state in under_load:
        for finding in evaluate(state, under_load=True):
            if (finding.code, finding.gpu) not in seen:
                findings.append(finding)
    return findings


__all__ = [
    "CHECK_RULES",
    "CheckRule",
    "canonical_model",
    "check_clock_events",
    "check_config",
    "check_gpus",
    "check_inventory",
    "check_memory",
    "evaluate",
    "model_matches",
]
