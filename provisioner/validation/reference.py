"""Reference figures per GPU model, and the burn-in verdicts drawn from them.

Thresholds are fractions of a reference measured on a healthy GPU, compared like with like:
the burst matmul with the burst figure, the 60-second sustained matmul with the sustained
figure (a healthy H100 SXM falls from ~789 to ~670 TFLOP/s as its 700 W power cap bites; that
is not a fault). Sources:

* H100 SXM (``NVIDIA H100 80GB HBM3``, driver 580.159.04, torch 2.11), ../shared/fixtures/gpu,
  copied to tests/fixtures/gpu: bench.json (8192^3 bf16 matmul 789.0 TFLOP/s, device copy
  3.02 TB/s read+write, pinned H2D 42.6 GB/s, D2H 55.1 GB/s) and burn-5s-windows.json
  (sustained bf16, median of the 5-second windows 669.9 TFLOP/s). tests/test_validation.py
  re-reads those files and fails if these numbers drift from them.
* 8 x H100 NCCL all-reduce bus bandwidth, ring (no NVLS): ~370 GB/s (NVIDIA GTC25 slide via
  ml-engineering, in ../shared/reference/performance-and-reliability-facts.md); not measured here.
* H100 PCIe and A100 SXM burst matmul: third-party MAMF table (mag-/gpu_benchmark): 499.5 and
  267.9 TFLOP/s; no sustained, memory or NCCL figures, so those are compared with peers only.

A model without a reference is still burned in: its figures are reported and compared across
GPUs and nodes (straggler detection), never against a guessed absolute figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.validation.checks import canonical_model
from provisioner.validation.model import Action, BurnInResult, Finding, Severity
from provisioner.validation.straggler import find_stragglers


@dataclass(frozen=True)
class Reference:
    model: str
    source: str
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


# (metric, unit, display name, band). HBM: the reference's "pass >= 2.8 TB/s, quarantine below
# ~2.5" is 0.92/0.83 of 3.02. Host<->device depends on the host's PCIe path and NUMA placement
# far more than on the GPU, hence the looser band. NCCL 0.90 x 370 = 333, near the 340 pass mark.
BANDS: dict[str, Band] = {
    "matmul_burst_tflops": Band(0.90, 0.75),
    "matmul_sustained_tflops": Band(0.90, 0.75),
    "hbm_copy_tbps": Band(0.92, 0.83),
    "h2d_gbps": Band(0.70, 0.40),
    "d2h_gbps": Band(0.70, 0.40),
    "nccl_busbw_gbps": Band(0.90, 0.70),
}
UNITS = {"matmul_burst_tflops": "TFLOP/s", "matmul_sustained_tflops": "TFLOP/s", "hbm_copy_tbps": "TB/s",
         "h2d_gbps": "GB/s", "d2h_gbps": "GB/s", "nccl_busbw_gbps": "GB/s"}
LABELS = {"matmul_burst_tflops": "bf16 matmul burst", "matmul_sustained_tflops": "bf16 matmul sustained",
          "hbm_copy_tbps": "HBM device copy", "h2d_gbps": "pinned host-to-device", "d2h_gbps": "pinned device-to-host",
          "nccl_busbw_gbps": "NCCL all-reduce bus bandwidth"}

H100_SXM = Reference(
    model="H100", source="tests/fixtures/gpu/h100-sxm-80gb (bench.json, burn-5s-windows.json)",
    matmul_burst_tflops=789.0, matmul_sustained_tflops=669.9, hbm_copy_tbps=3.02, h2d_gbps=42.6, d2h_gbps=55.1,
    nccl_busbw_gbps_8gpu=370.0,
)
REFERENCES: dict[str, Reference] = {
    "H100": H100_SXM,
    "H100-PCIE": Reference(model="H100-PCIE", source="mag-/gpu_benchmark MAMF table", matmul_burst_tflops=499.5),
    "A100": Reference(model="A100", source="mag-/gpu_benchmark MAMF table (A100 SXM)", matmul_burst_tflops=267.9),
}


def reference_for(gpu_name: str | None) -> Reference | None:
    """The reference for a GPU's nvidia-smi name (``NVIDIA H100 80GB HBM3`` -> H100 SXM), if any."""
    if not gpu_name:
        return None
    model = canonical_model(gpu_name)
    if model == "H100" and ("PCIE" in gpu_name.upper() or "NVL" in gpu_name.upper()):
        return REFERENCES["H100-PCIE"]
    return REFERENCES.get(model)


def _verdict(metric: str, value: float, reference: float, gpu: int | None, source: str) -> Finding | None:
    band = BANDS[metric]
    ratio = value / reference
    if ratio >= band.degraded:
        return None
    severity = Severity.FAILED if ratio < band.failed else Severity.DEGRADED
    where = f"GPU {gpu}: " if gpu is not None else ""
    floor = band.failed if severity is Severity.FAILED else band.degraded
    return Finding(code=f"burnin.{metric.rsplit('_', 1)[0]}", severity=severity, gpu=gpu, action=Action.DRAIN,
                   value=round(value, 3), threshold=round(reference * floor, 3),
                   message=f"{where}{LABELS[metric]} {value:.1f} {UNITS[metric]} is {ratio:.0%} of the reference "
                           f"{reference:g} (below {floor:.0%}; {source})")


def judge_burnin(result: BurnInResult, gpu_name: str | None) -> list[Finding]:
    """Findings for a burn-in: absolute bands against the model's reference, and GPU stragglers.

    Pure. A skipped burn-in is one ``info`` finding saying why (the node is not failed for it).
    """
    if result.skipped:
        return [Finding(code="burnin.skipped", severity=Severity.INFO, message=f"burn-in skipped: {result.skipped}")]
    reference = reference_for(gpu_name)
    findings: list[Finding] = []
    if reference is None:
        findings.append(Finding(code="burnin.no_reference", severity=Severity.INFO,
                                message=f"no reference figures for {gpu_name or 'this GPU'}; compared with peers only"))
    for metric in ("matmul_burst_tflops", "matmul_sustained_tflops", "hbm_copy_tbps", "h2d_gbps", "d2h_gbps"):
        ref_value = getattr(reference, metric, None) if reference else None
        per_gpu = {gpu.index: getattr(gpu, metric) for gpu in result.gpus if getattr(gpu, metric) is not None}
        flagged: set[int] = set()
        if ref_value:
            for index, value in per_gpu.items():
                finding = _verdict(metric, value, ref_value, index, reference.source if reference else "")
                if finding:
                    findings.append(finding)
                    flagged.add(index)
        for straggler in find_stragglers({str(i): v for i, v in per_gpu.items()}):
            index = int(straggler.name)
            if index not in flagged:
                findings.append(Finding(
                    code=f"straggler.gpu.{metric.rsplit('_', 1)[0]}", severity=Severity.DEGRADED, gpu=index,
                    action=Action.DRAIN, value=round(straggler.value, 3), threshold=round(straggler.median, 3),
                    message=f"GPU {index}: " + straggler.describe(LABELS[metric], UNITS[metric])))
    if result.nccl_busbw_gbps is not None and reference and reference.nccl_busbw_gbps_8gpu and result.nccl_gpus == 8:
        finding = _verdict("nccl_busbw_gbps", result.nccl_busbw_gbps, reference.nccl_busbw_gbps_8gpu, None,
                           "8 x H100 ring all-reduce, GTC25 via ml-engineering")
        if finding:
            findings.append(finding)
    return findings


__all__ = ["BANDS", "H100_SXM", "REFERENCES", "Band", "Reference", "judge_burnin", "reference_for"]
