"""Reference figures per GPU model, and the burn-in verdicts drawn from them.

Like with like: a reference records *how* it was measured (``Method``: matrix size, burst
seconds, window seconds, copy sizes, from idle) and a burn-in figure is compared with it only
when the burn-in measured it the same way. The check's own method is ``CHECK_METHOD`` (the
defaults of ``BurnInConfig``); the references below are re-derived for that method from
measurements that did not use this code:

* burst: the flop-weighted rate of the first 3 s of back-to-back 8192^3 bf16 products on an idle
  GPU (``ramp-from-idle.json``, chunks with 0 <= t < 3 s, the warm-up chunk left out). A
  healthy H100 SXM gives ~780 TFLOP/s for only ~0.25 s before its 700 W cap bites, so "burst"
  here is mostly power-capped: H100 SXM 681.0, H200 661.9 (the check's own 3 s figures on those
  GPUs: 683.6 / 677.3 and 667.1 / 661.7).
* sustained: median 5 s window under a sustained 8192^3 bf16 matmul: H100 SXM 669.9
  (``burn-5s-windows.json``, 75 s), H200 659.1 (``ramp-from-idle.json``, 3 <= t < 12.5 s,
  flop-weighted; no longer H200 capture exists).
* HBM: 1 GiB device-to-device copy counting read + write: H100 SXM 3.02 (``bench.json``),
  H200 4.255 (``independent-figures.json``).
* pinned H2D / D2H, 256 MiB: H100 55.2 / 55.2 (``h100-independent-figures.json``), H200
  55.2 / 54.9 (``independent-figures.json``). They depend on the host's PCIe path, hence the
  loose band.

Sources: ../shared/fixtures/gpu (NVIDIA H100 80GB HBM3 and NVIDIA H200, driver 580.159.04,
torch 2.11), copied to tests/fixtures/gpu; tests/test_validation_reference.py re-derives every
figure from those files. 8 x H100 NCCL all-reduce bus bandwidth, ring (no NVLS): ~370 GB/s
(NVIDIA GTC25 slide via ml-engineering, ../shared/reference/performance-and-reliability-facts.md;
not measured here).

Every other model in the catalog is judged against a datasheet floor (datasheet.py). A model with
neither is ``burnin.unjudged``: degraded, never silently healthy, unless the operator passes
``--allow-unjudged``. Third-party "maximum achievable matmul" tables (best of many shapes, warm
GPU) are not the check's method, so they are not used as references.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.validation.datasheet import DATASHEETS, MEMORY_FLOOR, Datasheet, variant_of
from provisioner.validation.model import Action, BurnInResult, Finding, Severity
from provisioner.validation.straggler import find_stragglers


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


@dataclass(frozen=True)
class Method:
    """How the burn-in measures (and how a reference was measured): sizes, seconds, from idle."""

    matmul_n: int = 8192
    burst_s: float = 3.0
    window_s: float = 5.0
    copy_bytes: int = 1 << 30
    pinned_bytes: int = 1 << 28

    def describe(self, metric: str) -> str:
        n = f"{self.matmul_n}^3 bf16 matmul"
        return {
            "matmul_burst_tflops": f"{n}, first {self.burst_s:g} s from idle",
            "matmul_sustained_tflops": f"{n}, median {self.window_s:g} s window, sustained",
            "hbm_copy_tbps": f"{_size(self.copy_bytes)} device copy, read + write",
            "h2d_gbps": f"{_size(self.pinned_bytes)} pinned host-to-device",
            "d2h_gbps": f"{_size(self.pinned_bytes)} pinned device-to-host",
        }[metric]

    def __str__(self) -> str:
        return (
            f"{self.matmul_n}^3 matmul, {self.burst_s:g} s burst, {self.window_s:g} s windows, "
            f"{_size(self.copy_bytes)} copy, {_size(self.pinned_bytes)} pinned"
        )

    def same_for(self, metric: str, other: Method) -> bool:
        """Whether ``other`` measures ``metric`` the way this method does."""
        fields = {
            "matmul_burst_tflops": ("matmul_n", "burst_s"),
            "matmul_sustained_tflops": ("matmul_n", "window_s"),
            "hbm_copy_tbps": ("copy_bytes",),
            "h2d_gbps": ("pinned_bytes",),
            "d2h_gbps": ("pinned_bytes",),
        }
        return all(getattr(self, name) == getattr(other, name) for name in fields[metric])


CHECK_METHOD = Method()
"""What ``BurnInConfig()`` measures; a test pins that the two agree."""


@dataclass(frozen=True)
class Reference:
    key: str  # the datasheet variant (H100-SXM)
    measured_on: str
    source: str
    method: Method = CHECK_METHOD
    matmul_burst_tflops: float | None = None
    matmul_sustained_tflops: float | None = None
    hbm_copy_tbps: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    nccl_busbw_gbps_8gpu: float | None = None


@dataclass(frozen=True)
class Band:
    """Below ``degraded`` x reference: degraded; below ``failed`` x reference: failed."""

    degraded: float
    failed: float


# HBM: the reference's "pass >= 2.8 TB/s, quarantine below ~2.5" is 0.92/0.83 of 3.02. Host<->device
# depends on the host's PCIe path and NUMA placement far more than on the GPU, hence the looser
# band. NCCL 0.90 x 370 = 333, near the 340 pass mark.
BANDS: dict[str, Band] = {
    "matmul_burst_tflops": Band(0.90, 0.75),
    "matmul_sustained_tflops": Band(0.90, 0.75),
    "hbm_copy_tbps": Band(0.92, 0.83),
    "h2d_gbps": Band(0.70, 0.40),
    "d2h_gbps": Band(0.70, 0.40),
    "nccl_busbw_gbps": Band(0.90, 0.70),
}
UNITS = {
    "matmul_burst_tflops": "TFLOP/s",
    "matmul_sustained_tflops": "TFLOP/s",
    "hbm_copy_tbps": "TB/s",
    "h2d_gbps": "GB/s",
    "d2h_gbps": "GB/s",
    "nccl_busbw_gbps": "GB/s",
}
LABELS = {
    "matmul_burst_tflops": "bf16 matmul burst",
    "matmul_sustained_tflops": "bf16 matmul sustained",
    "hbm_copy_tbps": "HBM device copy",
    "h2d_gbps": "pinned host-to-device",
    "d2h_gbps": "pinned device-to-host",
    "nccl_busbw_gbps": "NCCL all-reduce bus bandwidth",
}
METRICS = ("matmul_burst_tflops", "matmul_sustained_tflops", "hbm_copy_tbps", "h2d_gbps", "d2h_gbps")

_FIXTURES = "../shared/fixtures/gpu (tests/fixtures/gpu)"
H100_SXM = Reference(
    key="H100-SXM",
    measured_on="NVIDIA H100 80GB HBM3 (SXM, 700 W), driver 580.159.04, torch 2.11",
    source=f"{_FIXTURES}: ramp-from-idle.json, burn-5s-windows.json, bench.json, h100-independent-figures.json",
    matmul_burst_tflops=681.0,
    matmul_sustained_tflops=669.9,
    hbm_copy_tbps=3.02,
    h2d_gbps=55.2,
    d2h_gbps=55.2,
    nccl_busbw_gbps_8gpu=370.0,
)
H200_SXM = Reference(
    key="H200-SXM",
    measured_on="NVIDIA H200 (SXM, 700 W), driver 580.159.04, torch 2.11",
    source=f"{_FIXTURES}: h200-141gb/ramp-from-idle.json, h200-141gb/independent-figures.json",
    matmul_burst_tflops=661.9,
    matmul_sustained_tflops=659.1,
    hbm_copy_tbps=4.255,
    h2d_gbps=55.2,
    d2h_gbps=54.9,
)
REFERENCES: dict[str, Reference] = {ref.key: ref for ref in (H100_SXM, H200_SXM)}


def reference_for(gpu_name: str | None) -> Reference | None:
    """The measured reference for a GPU's nvidia-smi name (``NVIDIA H100 80GB HBM3`` -> H100 SXM), if any."""
    key = variant_of(gpu_name)
    return REFERENCES.get(key) if key else None


def datasheet_for(gpu_name: str | None) -> Datasheet | None:
    key = variant_of(gpu_name)
    return DATASHEETS.get(key) if key else None


def method_of(result: BurnInResult) -> Method:
    """How a burn-in measured; a report from before the method was recorded used the defaults."""
    given = {
        name: getattr(result, name)
        for name in ("matmul_n", "burst_s", "window_s", "copy_bytes", "pinned_bytes")
        if getattr(result, name) is not None
    }
    return Method(**given)


def _where(gpu: int | None) -> str:
    return f"GPU {gpu}: " if gpu is not None else ""


def _band_verdict(metric: str, value: float, reference: float, gpu: int | None, source: str) -> Finding | None:
    band = BANDS[metric]
    ratio = value / reference
    if ratio >= band.degraded:
        return None
    severity = Severity.FAILED if ratio < band.failed else Severity.DEGRADED
    floor = band.failed if severity is Severity.FAILED else band.degraded
    return Finding(
        code=f"burnin.{metric.rsplit('_', 1)[0]}",
        severity=severity,
        gpu=gpu,
        action=Action.DRAIN,
        value=round(value, 3),
        threshold=round(reference * floor, 3),
        message=f"{_where(gpu)}{LABELS[metric]} {value:.1f} {UNITS[metric]} is {ratio:.0%} of the reference "
        f"{reference:g} (below {floor:.0%}; {source})",
    )


def _floor_verdict(metric: str, value: float, sheet: Datasheet, gpu: int | None, why: str) -> Finding | None:
    """Failed below the datasheet floor; the message says the bound is a datasheet floor."""
    matmul = metric.startswith("matmul")
    peak, fraction = (sheet.bf16_dense_tflops, sheet.matmul_floor) if matmul else (sheet.memory_tbps, MEMORY_FLOOR)
    if value >= peak * fraction:
        return None
    what = "dense bf16 peak" if matmul else "memory bandwidth"
    lowered = f", lowered: {sheet.floor_reason}" if matmul and sheet.floor_reason else ""
    return Finding(
        code=f"burnin.{metric.rsplit('_', 1)[0]}",
        severity=Severity.FAILED,
        gpu=gpu,
        action=Action.DRAIN,
        value=round(value, 3),
        threshold=round(peak * fraction, 3),
        message=f"{_where(gpu)}{LABELS[metric]} {value:.1f} {UNITS[metric]} is {value / peak:.0%} of the "
        f"datasheet {what} {peak:g} {UNITS[metric]}, below the datasheet floor of {fraction:.0%}"
        f"{lowered} (a datasheet floor: {why}; {sheet.source})",
    )


def _absolute(
    metric: str, value: float, gpu: int, reference: Reference | None, sheet: Datasheet | None, method: Method
) -> Finding | None:
    ref_value = getattr(reference, metric) if reference else None
    if reference and ref_value and reference.method.same_for(metric, method):
        return _band_verdict(
            metric, value, ref_value, gpu, f"{reference.key} reference, {reference.method.describe(metric)}"
        )
    if sheet and metric in ("matmul_burst_tflops", "matmul_sustained_tflops", "hbm_copy_tbps"):
        why = (
            f"measured another way than the {reference.key} reference"
            if reference and ref_value
            else f"no measured reference for {sheet.key}"
        )
        return _floor_verdict(metric, value, sheet, gpu, why)
    return None


def _unjudged(result: BurnInResult, gpu_name: str | None, allow_unjudged: bool) -> Finding:
    peers = "; compared with the node's other GPUs only" if len(result.gpus) > 1 else ""
    how = (
        "allowed by --allow-unjudged"
        if allow_unjudged
        else "add it to provisioner/validation/datasheet.py, or pass --allow-unjudged to accept the node"
    )
    return Finding(
        code="burnin.unjudged",
        severity=Severity.INFO if allow_unjudged else Severity.DEGRADED,
        message=f"no reference or datasheet figures for {gpu_name or 'this GPU'}: its burn-in figures "
        f"cannot be judged{peers} ({how})",
    )


def judge_burnin(result: BurnInResult, gpu_name: str | None, *, allow_unjudged: bool = False) -> list[Finding]:
    """Findings for a burn-in: the model's measured reference (bands) where the method matches,
    else its datasheet floor, plus GPU stragglers. Pure.

    A skipped burn-in is one ``info`` finding saying why. A model with neither a reference nor
    a datasheet entry is ``burnin.unjudged``: degraded, or info with ``allow_unjudged``.
    """
    if result.skipped:
        return [Finding(code="burnin.skipped", severity=Severity.INFO, message=f"burn-in skipped: {result.skipped}")]
    reference, sheet, method = reference_for(gpu_name), datasheet_for(gpu_name), method_of(result)
    findings: list[Finding] = []
    if reference is None and sheet is None and result.gpus:
        findings.append(_unjudged(result, gpu_name, allow_unjudged))
    if reference and any(not reference.method.same_for(m, method) for m in METRICS):
        findings.append(
            Finding(
                code="burnin.method_differs",
                severity=Severity.INFO,
                message=f"the burn-in did not measure the way the {reference.key} reference was "
                f"measured ({method} vs {reference.method}); those figures are judged "
                "against the datasheet floor instead",
            )
        )
    for metric in METRICS:
        per_gpu = {gpu.index: getattr(gpu, metric) for gpu in result.gpus if getattr(gpu, metric) is not None}
        flagged: set[int] = set()
        for index, value in per_gpu.items():
            finding = _absolute(metric, value, index, reference, sheet, method)
            if finding:
                findings.append(finding)
                flagged.add(index)
        for straggler in find_stragglers({str(i): v for i, v in per_gpu.items()}):
            index = int(straggler.name)
            if index not in flagged:
                findings.append(
                    Finding(
                        code=f"straggler.gpu.{metric.rsplit('_', 1)[0]}",
                        severity=Severity.DEGRADED,
                        gpu=index,
                        action=Action.DRAIN,
                        value=round(straggler.value, 3),
                        threshold=round(straggler.median, 3),
                        message=f"GPU {index}: " + straggler.describe(LABELS[metric], UNITS[metric]),
                    )
                )
    if result.nccl_busbw_gbps is not None and reference and reference.nccl_busbw_gbps_8gpu and result.nccl_gpus == 8:
        finding = _band_verdict(
            "nccl_busbw_gbps",
            result.nccl_busbw_gbps,
            reference.nccl_busbw_gbps_8gpu,
            None,
            "8 x H100 ring all-reduce, GTC25 via ml-engineering",
        )
        if finding:
            findings.append(finding)
    return findings


__all__ = [
    "BANDS",
    "CHECK_METHOD",
    "H100_SXM",
    "H200_SXM",
    "METRICS",
    "REFERENCES",
    "Band",
    "Method",
    "Reference",
    "datasheet_for",
    "judge_burnin",
    "method_of",
    "reference_for",
]
