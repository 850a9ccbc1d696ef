"""NVIDIA XID errors from the kernel log, through a severity table with an action per XID.

The table follows NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors/) as compiled in
../shared/reference/performance-and-reliability-facts.md ("XID quick map"). Application
faults (13, 31, 43, 45) are warnings: they usually blame the job, not the GPU. ECC and
bus errors that need a reset or a new node fail the node. An XID not in the table is a
warning that names the catalog, never silently ignored.

The kernel log is read since boot (``dmesg``; ``journalctl -k -b`` when dmesg is refused),
so an XID before the last reboot does not count against a freshly reset GPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.validation.model import Action, Finding, Severity


@dataclass(frozen=True)
class XidRule:
    xid: int
    meaning: str
    severity: Severity
    action: Action


XID_TABLE: dict[int, XidRule] = {
    rule.xid: rule
    for rule in (
        XidRule(
            13,
            "graphics engine exception (usually an illegal memory access in the application)",
            Severity.WARN,
            Action.RESTART_JOB,
        ),
        XidRule(
            31, "GPU memory page fault (usually the application; rarely hardware)", Severity.WARN, Action.RESTART_JOB
        ),
        XidRule(
            43,
            "GPU stopped processing (a software-induced fault in the application)",
            Severity.WARN,
            Action.RESTART_JOB,
        ),
        XidRule(45, "preemptive cleanup after an earlier error or a killed application", Severity.WARN, Action.NONE),
        XidRule(48, "double-bit (uncorrectable) ECC error", Severity.FAILED, Action.DRAIN),
        XidRule(61, "internal micro-controller breakpoint/warning", Severity.FAILED, Action.RESET_GPU),
        XidRule(62, "internal micro-controller halt", Severity.FAILED, Action.RESET_GPU),
        XidRule(63, "ECC page retirement or row remap recorded", Severity.DEGRADED, Action.RESET_GPU),
        XidRule(64, "ECC page retirement or row remap recording failure", Severity.FAILED, Action.REBOOT),
        XidRule(74, "NVLink error", Severity.FAILED, Action.DRAIN),
        XidRule(79, "GPU has fallen off the bus", Severity.FAILED, Action.REPLACE_NODE),
        XidRule(92, "high single-bit ECC error rate", Severity.DEGRADED, Action.RESET_GPU),
        XidRule(
            94,
            "contained ECC error (only the affected application must restart)",
            Severity.DEGRADED,
            Action.RESTART_JOB,
        ),
        XidRule(95, "uncontained ECC error (the GPU must be reset)", Severity.FAILED, Action.DRAIN),
        XidRule(119, "GSP RPC timeout", Severity.FAILED, Action.RESET_GPU),
        XidRule(120, "GSP error", Severity.FAILED, Action.RESET_GPU),
        XidRule(140, "unrecovered ECC error", Severity.FAILED, Action.DRAIN),
        XidRule(154, "GPU recovery action changed (reset or reboot required)", Severity.FAILED, Action.REBOOT),
    )
}

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus." The driver names
# the GPU domain:bus:device, without the function nvidia-smi adds (00000000:3b:00.0).
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\)"
    r"(?:, GPU-[0-9a-f-]+)?: (?P<xid>\d+)"
)


@dataclass(frozen=True)
class XidEvent:
    xid: int
    bus_id: str
    line: str


def parse_kernel_log(text: str) -> list[XidEvent]:
    """Every XID line in ``dmesg``/``journalctl -k`` text, in log order."""
    events = []
    for line in text.splitlines():
        match = _XID_LINE.search(line)
        if match:
            events.append(XidEvent(int(match.group("xid")), match.group("bus").lower(), line.strip()))
    return events


def _bus_key(bus_id: str) -> str:
    """``00000000:3b:00.0`` (nvidia-smi) and ``0000:3b:00`` (kernel) name one GPU: compare bus:device."""
    parts = bus_id.lower().split(".", 1)[0].split(":")
    return ":".join(parts[-2:])


def xid_findings(events: Sequence[XidEvent], bus_to_index: dict[str, int]) -> list[Finding]:
    """One finding per (XID, GPU) with the number of occurrences; unknown XIDs are warnings."""
    index_of = {_bus_key(bus): index for bus, index in bus_to_index.items()}
    counts: dict[tuple[int, int | None], int] = {}
    for event in events:
        key = (event.xid, index_of.get(_bus_key(event.bus_id)))
        counts[key] = counts.get(key, 0) + 1
    findings = []
    for (xid, gpu), count in sorted(counts.items(), key=lambda item: (item[0][0], item[0][1] or -1)):
        rule = XID_TABLE.get(xid)
        where = f"GPU {gpu}" if gpu is not None else "a GPU"
        times = f" ({count}x)" if count > 1 else ""
        if rule is None:
            findings.append(
                Finding(
                    code=f"xid.{xid}",
                    severity=Severity.WARN,
                    gpu=gpu,
                    value=count,
                    message=f"XID {xid} on {where}{times}: not in the table; see docs.nvidia.com/deploy/xid-errors/",
                )
            )
            continue
        findings.append(
            Finding(
                code=f"xid.{xid}",
                severity=rule.severity,
                gpu=gpu,
                action=rule.action,
                value=count,
                message=f"XID {xid} on {where}{times}: {rule.meaning}; action: {rule.action.value}",
            )
        )
    return findings


__all__ = ["XID_TABLE", "XidEvent", "XidRule", "parse_kernel_log", "xid_findings"]
