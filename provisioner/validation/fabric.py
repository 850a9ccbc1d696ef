"""NVLink, InfiniBand/EFA presence, and DCGM diagnostics.

* NVLink: ``nvidia-smi nvlink -s`` lists each GPU's links with a speed or ``<inactive>``.
  A multi-GPU SXM node must show active links on every GPU.
* IB/EFA: devices under ``/sys/class/infiniband`` (EFA devices are named ``efa*`` or bound to
  the ``efa`` driver) with port ``state`` files reading ``4: ACTIVE``. Required when the plan's
  fabric is ``infiniband``, ``roce`` or ``efa``.
* DCGM: ``dcgmi diag -r LEVEL -j`` when dcgmi is installed (it often is not; the reference
  machine had none). Level 1 takes seconds and fits the 90-second budget; level 2 takes about
  two minutes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from provisioner.untrusted import loads_bounded
from provisioner.validation.model import Action, Finding, Severity
from provisioner.validation.runner import CommandResult, Host

NVLINK_ARGS = ("nvidia-smi", "nvlink", "-s")
_GPU_LINE = re.compile(r"^GPU (\d+):")
_LINK_LINE = re.compile(r"^\s*Link (\d+):\s*(.+)$")


def nvlink_expected(gpu_names: list[str]) -> bool:
    """Auto rule: two or more GPUs of an SXM-class part (HBM SXM boards, H200, B200, GH200)."""
    if len(gpu_names) < 2:
        return False
    upper = " ".join(gpu_names).upper()
    return any(word in upper for word in ("SXM", "HBM3", "H200", "B200", "GH200", "B100"))


def parse_nvlink_status(text: str) -> dict[int, tuple[int, int]]:
    """GPU index -> (active links, links listed)."""
    result: dict[int, tuple[int, int]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        head = _GPU_LINE.match(line)
        if head:
            gpu = int(head.group(1))
            result.setdefault(gpu, (0, 0))
            continue
        link = _LINK_LINE.match(line)
        if link and gpu is not None:
            active, total = result[gpu]
            up = "inactive" not in link.group(2).lower()
            result[gpu] = (active + int(up), total + 1)
    return result


def check_nvlink(result: CommandResult, gpu_count: int, expected: bool) -> list[Finding]:
    if not expected:
        return []
    links = parse_nvlink_status(result.stdout) if result.ok else {}
    findings = []
    for gpu in range(gpu_count):
        active, total = links.get(gpu, (0, 0))
        if active == 0:
            findings.append(
                Finding(
                    code="nvlink.missing",
                    severity=Severity.FAILED,
                    gpu=gpu,
                    action=Action.DRAIN,
                    message=f"GPU {gpu}: no active NVLink on a multi-GPU SXM node"
                    + ("" if result.ok else f" ({result.brief()})"),
                )
            )
        elif active < total:
            findings.append(
                Finding(
                    code="nvlink.inactive_links",
                    severity=Severity.DEGRADED,
                    gpu=gpu,
                    action=Action.DRAIN,
                    value=active,
                    threshold=total,
                    message=f"GPU {gpu}: {active} of {total} NVLinks active",
                )
            )
    return findings


def rdma_devices(host: Host) -> dict[str, list[str]]:
    """RDMA device -> port states (``ACTIVE``, ``DOWN``, ...) from /sys/class/infiniband."""
    base = host.path("/sys/class/infiniband")
    devices: dict[str, list[str]] = {}
    if not base.is_dir():
        return devices
    for device in sorted(base.iterdir()):
        states = []
        for state_file in sorted((device / "ports").glob("*/state")):
            text = state_file.read_text(errors="replace").strip()
            states.append(text.split(":", 1)[-1].strip().upper())
        devices[device.name] = states
    return devices


def _is_efa(host: Host, device: str) -> bool:
    driver = host.path(f"/sys/class/infiniband/{device}/device/driver")
    return device.startswith("efa") or (driver.exists() and driver.resolve().name == "efa")


def check_fabric(host: Host, fabric: str | None) -> list[Finding]:
    """``fabric`` is the plan's: infiniband, roce, efa need RDMA devices with an ACTIVE port."""
    if fabric not in ("infiniband", "roce", "efa"):
        return []
    devices = rdma_devices(host)
    wanted = {name: states for name, states in devices.items() if _is_efa(host, name) == (fabric == "efa")}
    kind = "EFA" if fabric == "efa" else "InfiniBand/RoCE"
    if not wanted:
        return [
            Finding(
                code="fabric.missing",
                severity=Severity.FAILED,
                action=Action.REPLACE_NODE,
                message=f"no {kind} device under /sys/class/infiniband (the plan's fabric is {fabric})",
            )
        ]
    down = {name: states for name, states in wanted.items() if "ACTIVE" not in states}
    if len(down) == len(wanted):
        return [
            Finding(
                code="fabric.ports_down",
                severity=Severity.FAILED,
                action=Action.DRAIN,
                message=f"no {kind} port is ACTIVE ({', '.join(sorted(down))})",
            )
        ]
    if down:
        return [
            Finding(
                code="fabric.ports_down",
                severity=Severity.DEGRADED,
                action=Action.DRAIN,
                value=len(down),
                threshold=len(wanted),
                message=f"{len(down)} of {len(wanted)} {kind} devices have no ACTIVE port ({', '.join(sorted(down))})",
            )
        ]
    return [
        Finding(code="fabric.ok", severity=Severity.INFO, message=f"{len(wanted)} {kind} device(s) with an ACTIVE port")
    ]


def dcgm_args(level: int) -> tuple[str, ...]:
    return ("dcgmi", "diag", "-r", str(level), "-j")


def _walk_tests(node: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(test name, result) pairs from dcgmi's JSON, DCGM 3 and 4 layouts alike."""
    if isinstance(node, dict):
        name = node.get("name") or node.get("test_name")
        results = node.get("results")
        if isinstance(name, str) and isinstance(results, list):
            for result in results:
                if isinstance(result, dict):
                    yield name, result
        for value in node.values():
            yield from _walk_tests(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk_tests(value)


def check_dcgm(result: CommandResult, level: int) -> list[Finding]:
    if result.returncode == 127:
        return [Finding(code="dcgm.skipped", severity=Severity.INFO, message="dcgmi is not installed; DCGM skipped")]
    try:
        document = loads_bounded(result.stdout)
    except ValueError:
        return [
            Finding(
                code="dcgm.error",
                severity=Severity.WARN,
                message=f"dcgmi diag -r {level} gave no JSON: {result.brief()}",
            )
        ]
    findings = []
    for name, outcome in _walk_tests(document):
        status = str(outcome.get("status", "")).lower()
        gpu = outcome.get("gpu_id", outcome.get("entity_id"))
        gpu = int(gpu) if isinstance(gpu, int | str) and str(gpu).isdigit() else None
        detail = outcome.get("warnings") or outcome.get("info") or ""
        if isinstance(detail, list):
            detail = "; ".join(str(d.get("warning", d)) if isinstance(d, dict) else str(d) for d in detail)
        where = f"GPU {gpu}: " if gpu is not None else ""
        if status == "fail":
            findings.append(
                Finding(
                    code=f"dcgm.{name.lower().replace(' ', '_')}",
                    severity=Severity.FAILED,
                    gpu=gpu,
                    action=Action.DRAIN,
                    message=f"{where}DCGM level {level} test {name!r} failed {detail}".rstrip(),
                )
            )
        elif status == "warn":
            findings.append(
                Finding(
                    code=f"dcgm.{name.lower().replace(' ', '_')}",
                    severity=Severity.WARN,
                    gpu=gpu,
                    message=f"{where}DCGM level {level} test {name!r} warned {detail}".rstrip(),
                )
            )
    if not findings and not result.ok:
        findings.append(
            Finding(
                code="dcgm.error",
                severity=Severity.WARN,
                message=f"dcgmi diag -r {level} exited {result.returncode}: {result.brief()}",
            )
        )
    return findings


__all__ = [
    "NVLINK_ARGS",
    "check_dcgm",
    "check_fabric",
    "check_nvlink",
    "dcgm_args",
    "nvlink_expected",
    "parse_nvlink_status",
    "rdma_devices",
]
