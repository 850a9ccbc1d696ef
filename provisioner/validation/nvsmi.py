"""Parsers for ``nvidia-smi --query-gpu=... --format=csv`` and ``nvidia-smi -q -x``.

Both views parse into the same ``GpuState`` (every field optional: a driver that does not
report a value gives None, never a guess). The XML view is the richer one (PCIe maxima,
SRAM/DRAM ECC split, per-reason clock events); the CSV view is cheap enough to sample once a
second under load. ``merge`` fills what one view lacks from the other.

Field names follow nvidia-smi: drivers >= 535 print ``clocks_event_reasons`` where older ones
printed ``clocks_throttle_reasons``; both are read.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from provisioner.errors import ProvisionerError

QUERY_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "persistence_mode",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "clocks_throttle_reasons.active",
    "ecc.mode.current",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "utilization.gpu",
)
QUERY_ARGS = ("nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv")
XML_ARGS = ("nvidia-smi", "-q", "-x")

# NVML clock event (throttle) reason bits, as nvidia-smi prints them in clocks_event_reasons.active.
CLOCK_EVENT_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


class ParseError(ProvisionerError):
    """Tool output that cannot be read (truncated XML, a CSV without a header)."""


@dataclass(frozen=True)
class GpuState:
    index: int
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None
    ecc_volatile_correctable: int | None = None
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_uncorrectable: int | None = None
    sram_threshold_exceeded: bool | None = None
    retired_pages_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    clock_event_mask: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    temperature_c: float | None = None
    utilization_pct: float | None = None


def _absent(text: str | None) -> bool:
    return text is None or text.strip() in ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]")


def _number(text: str | None) -> float | None:
    if _absent(text):
        return None
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(match.group(1)) if match else None


def _int(text: str | None) -> int | None:
    if _absent(text):
        return None
    value = (text or "").strip()
    if value.lower().startswith("0x"):
        try:
            return int(value, 16)
        except ValueError:
            return None
    number = _number(value)
    return int(number) if number is not None else None


def _flag(text: str | None) -> bool | None:
    if _absent(text):
        return None
    value = (text or "").strip().lower()
    if value in ("yes", "enabled", "active", "true", "1"):
        return True
    if value in ("no", "disabled", "not active", "false", "0"):
        return False
    return None


def _column(header: str) -> str:
    """``clocks.current.sm [MHz]`` -> ``clocks.current.sm``; throttle -> event naming."""
    name = header.split("[", 1)[0].strip()
    return name.replace("clocks_throttle_reasons", "clocks_event_reasons")


_CSV_MAP: dict[str, tuple[str, Callable[[str], object]]] = {
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("bus_id", str),
    "persistence_mode": ("persistence_mode", _flag),
    "ecc.mode.current": ("ecc_enabled", _flag),
    "ecc.errors.corrected.volatile.total": ("ecc_volatile_correctable", _int),
    "ecc.errors.uncorrected.volatile.total": ("ecc_volatile_uncorrectable", _int),
    "retired_pages.pending": ("retired_pages_pending", _flag),
    "remapped_rows.pending": ("remap_pending", _flag),
    "remapped_rows.failure": ("remap_failure", _flag),
    "pcie.link.gen.current": ("pcie_gen_current", _int),
    "pcie.link.gen.max": ("pcie_gen_max", _int),
    "pcie.link.width.current": ("pcie_width_current", _int),
    "pcie.link.width.max": ("pcie_width_max", _int),
    "clocks_event_reasons.active": ("clock_event_mask", _int),
    "power.draw": ("power_draw_w", _number),
    "power.limit": ("power_limit_w", _number),
    "clocks.sm": ("sm_clock_mhz", _number),
    "clocks.current.sm": ("sm_clock_mhz", _number),
    "clocks.max.sm": ("sm_clock_max_mhz", _number),
    "temperature.gpu": ("temperature_c", _number),
    "utilization.gpu": ("utilization_pct", _number),
}


def parse_query_csv(text: str) -> list[GpuState]:
    """Rows of ``--format=csv`` output (with its header line), one GpuState per GPU.

    Unknown columns are ignored, so a query with more or fewer fields still parses.
    Raises ParseError when there is no header with an ``index`` column.
    """
    rows = [row for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]
    if not rows or "index" not in [_column(cell) for cell in rows[0]]:
        raise ParseError("nvidia-smi query output has no header with an index column")
    header = [_column(cell) for cell in rows[0]]
    states = []
    for row in rows[1:]:
        cells = dict(zip(header, (cell.strip() for cell in row), strict=False))
        index = _int(cells.get("index"))
        if index is None:
            continue
        values: dict[str, object] = {}
        for column, cell in cells.items():
            if column in _CSV_MAP and not _absent(cell):
                attribute, convert = _CSV_MAP[column]
                values[attribute] = convert(cell)
        states.append(GpuState(index=index, **values))  # type: ignore[arg-type]
    return states


def _text(node: ET.Element, path: str) -> str | None:
    found = node.find(path)
    return found.text if found is not None and found.text is not None else None


def _event_mask(gpu: ET.Element) -> int | None:
    reasons = gpu.find("clocks_event_reasons")
    if reasons is None:
        reasons = gpu.find("clocks_throttle_reasons")
    if reasons is None:
        return None
    mask = 0
    for child in reasons:
        reason = re.sub(r"^clocks?_(event|throttle)_reason_", "", child.tag)
        if reason in CLOCK_EVENT_BITS and _flag(child.text):
            mask |= CLOCK_EVENT_BITS[reason]
    return mask


def _sum(gpu: ET.Element, paths: tuple[str, ...]) -> int | None:
    values = [_int(_text(gpu, path)) for path in paths]
    present = [v for v in values if v is not None]
    return sum(present) if present else None


_UNCORRECTABLE = ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable")


def parse_smi_xml(text: str) -> list[GpuState]:
    """``nvidia-smi -q -x`` output, one GpuState per ``<gpu>`` in file (= index) order.

    Raises ParseError on XML that does not parse (a truncated capture, an error message).
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError(f"nvidia-smi -q -x output is not XML: {exc}") from None
    states = []
    for index, gpu in enumerate(root.findall("gpu")):
        link = "pci/pci_gpu_link_info"
        volatile_unc = _sum(gpu, tuple(f"ecc_errors/volatile/{name}" for name in _UNCORRECTABLE))
        if volatile_unc is None:  # pre-Hopper drivers: single_bit/double_bit totals
            volatile_unc = _int(_text(gpu, "ecc_errors/volatile/double_bit/total"))
        states.append(
            GpuState(
                index=index,
                name=_text(gpu, "product_name"),
                uuid=_text(gpu, "uuid"),
                bus_id=gpu.get("id"),
                persistence_mode=_flag(_text(gpu, "persistence_mode")),
                ecc_enabled=_flag(_text(gpu, "ecc_mode/current_ecc")),
                ecc_volatile_correctable=_sum(
                    gpu, ("ecc_errors/volatile/sram_correctable", "ecc_errors/volatile/dram_correctable")
                ),
                ecc_volatile_uncorrectable=volatile_unc,
                ecc_aggregate_uncorrectable=_sum(gpu, tuple(f"ecc_errors/aggregate/{name}" for name in _UNCORRECTABLE)),
                sram_threshold_exceeded=_flag(_text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")),
                retired_pages_pending=_flag(_text(gpu, "retired_pages/pending_retirement")),
                remap_pending=_flag(_text(gpu, "remapped_rows/remapped_row_pending")),
                remap_failure=_flag(_text(gpu, "remapped_rows/remapped_row_failure")),
                pcie_gen_current=_int(_text(gpu, f"{link}/pcie_gen/current_link_gen")),
                pcie_gen_max=_int(_text(gpu, f"{link}/pcie_gen/max_link_gen")),
                pcie_width_current=_int(_text(gpu, f"{link}/link_widths/current_link_width")),
                pcie_width_max=_int(_text(gpu, f"{link}/link_widths/max_link_width")),
                clock_event_mask=_event_mask(gpu),
                power_draw_w=_number(
                    _text(gpu, "gpu_power_readings/average_power_draw") or _text(gpu, "gpu_power_readings/power_draw")
                ),
                power_limit_w=_number(_text(gpu, "gpu_power_readings/current_power_limit")),
                sm_clock_mhz=_number(_text(gpu, "clocks/sm_clock")),
                sm_clock_max_mhz=_number(_text(gpu, "max_clocks/sm_clock")),
                temperature_c=_number(_text(gpu, "temperature/gpu_temp")),
                utilization_pct=_number(_text(gpu, "utilization/gpu_util")),
            )
        )
    return states


def merge(primary: list[GpuState], secondary: list[GpuState]) -> list[GpuState]:
    """``primary``'s GPUs, each with its None fields filled from ``secondary`` (matched by index)."""
    by_index = {state.index: state for state in secondary}
    merged = []
    for state in primary:
        other = by_index.get(state.index)
        if other is None:
            merged.append(state)
            continue
        fill = {f.name: getattr(other, f.name) for f in fields(state) if getattr(state, f.name) is None}
        merged.append(replace(state, **fill))
    known = {state.index for state in primary}
    merged.extend(state for state in secondary if state.index not in known)
    return sorted(merged, key=lambda s: s.index)


def decode_clock_events(mask: int) -> list[str]:
    """Names of the reasons set in ``mask`` (``0x44`` -> ``sw_power_cap``, ``hw_thermal_slowdown``)."""
    return [name for name, bit in CLOCK_EVENT_BITS.items() if mask & bit]


__all__ = [
    "CLOCK_EVENT_BITS",
    "QUERY_ARGS",
    "QUERY_FIELDS",
    "XML_ARGS",
    "GpuState",
    "ParseError",
    "decode_clock_events",
    "merge",
    "parse_query_csv",
    "parse_smi_xml",
]
