"""Datasheet peaks per GPU model, and which variant an ``nvidia-smi`` name is.

A model measured here (reference.py) is judged against its measured figures; every other model
is judged against a *floor* drawn from its datasheet: a burn-in matmul under ``MATMUL_FLOOR`` of
the dense bf16 tensor peak, or a device copy under ``MEMORY_FLOOR`` of the memory bandwidth,
fails the GPU, and the finding says the bound is a datasheet floor, not a measurement. A floor
catches a GPU that is far too slow (half speed, a shared GPU, a broken clock), not a 10 % one.

Why 50 % / 60 %: on the measured GPUs the check's sustained matmul reaches 68 % (H100 SXM,
670 of 989) and 67 % (H200, 659 of 989) of the dense peak at their 700 W cap, and the device
copy 90 % (3.02 of 3.35 TB/s) and 89 % (4.27 of 4.8 TB/s) of the bandwidth; a half-speed GPU
(the shared-GPU captures: 309 TFLOP/s, 1.2-2.1 TB/s) lands at 31 % and 37-44 %. Parts whose
board power holds them far below boost under a sustained matmul get a lower matmul floor, with
the reason recorded (``floor_reason``).

Peaks are *dense* (no 2:4 sparsity): datasheets that print the sparse figure are halved, and the
source says so. Memory bandwidth is compared with the copy figure counting read + write, as
the burn-in measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.validation.checks import canonical_model

MATMUL_FLOOR = 0.50
MEMORY_FLOOR = 0.60


@dataclass(frozen=True)
class Datasheet:
    """A GPU variant's published peaks. ``key`` is what ``variant_of`` returns for it."""

    key: str
    bf16_dense_tflops: float
    memory_tbps: float
    source: str
    matmul_floor: float = MATMUL_FLOOR
    floor_reason: str = ""


_HOPPER = (
    "NVIDIA H100 Tensor Core GPU datasheet (2023): BF16 1,979 (SXM) / 1,513 (PCIe) / 1,671 (NVL) TFLOPS "
    "with sparsity, halved; 3.35 / 2.0 / 3.9 TB/s"
)

DATASHEETS: dict[str, Datasheet] = {
    sheet.key: sheet
    for sheet in (
        Datasheet("H100-SXM", 989.4, 3.35, _HOPPER),
        Datasheet("H100-PCIE", 756.0, 2.0, _HOPPER),
        Datasheet("H100-NVL", 835.5, 3.9, _HOPPER),
        Datasheet(
            "H200-SXM",
            989.4,
            4.8,
            "NVIDIA H200 Tensor Core GPU datasheet (2024): BF16 1,979 TFLOPS with sparsity (SXM), halved; 4.8 TB/s",
        ),
        Datasheet(
            "H200-NVL",
            835.5,
            4.8,
            "NVIDIA H200 Tensor Core GPU datasheet (2024): BF16 1,671 TFLOPS with sparsity (NVL), halved; 4.8 TB/s",
        ),
        Datasheet(
            "GH200",
            989.4,
            4.0,
            "NVIDIA GH200 Grace Hopper Superchip datasheet (2023): the H100 die at BF16 "
            "1,979 TFLOPS with sparsity, halved; 96 GB HBM3 at 4 TB/s (the 144 GB HBM3e part: 4.9 TB/s)",
        ),
        Datasheet(
            "B200",
            2250.0,
            8.0,
            "NVIDIA HGX B200 specifications (2024): 8 GPUs, FP16/BF16 36 PFLOPS with "
            "sparsity, 64 TB/s HBM3e; per GPU, halved: 2,250 TFLOPS dense, 8 TB/s",
        ),
        Datasheet(
            "A100-SXM-80GB",
            312.0,
            2.039,
            "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16 312 TFLOPS dense; 80GB SXM 2,039 GB/s",
        ),
        Datasheet(
            "A100-PCIE-80GB",
            312.0,
            1.935,
            "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16 312 TFLOPS dense; 80GB PCIe 1,935 GB/s",
        ),
        Datasheet(
            "A100-40GB",
            312.0,
            1.555,
            "NVIDIA A100 Tensor Core GPU datasheet (2020): BF16 312 TFLOPS dense; 40GB (SXM and PCIe) 1,555 GB/s",
        ),
        Datasheet(
            "L40S",
            362.05,
            0.864,
            "NVIDIA L40S datasheet (2023): BF16 733 TFLOPS with sparsity (362.05 dense); 864 GB/s GDDR6",
        ),
        Datasheet(
            "L4",
            121.0,
            0.300,
            "NVIDIA L4 Tensor Core GPU datasheet (2023): BF16 242 TFLOPS with sparsity, halved; 300 GB/s GDDR6",
            matmul_floor=0.35,
            floor_reason="72 W board power holds the tensor clocks far below the 2,040 MHz boost under a "
            "sustained matmul",
        ),
        Datasheet(
            "A10",
            125.0,
            0.600,
            "NVIDIA A10 Tensor Core GPU datasheet (2021): BF16 250 TFLOPS with sparsity, halved; 600 GB/s GDDR6",
        ),
        Datasheet(
            "A10G",
            70.0,
            0.600,
            "AWS publishes no A10G datasheet; Baseten, 'NVIDIA A10 vs A10G for ML model "
            "inference' (2023): BF16 tensor 70 TFLOPS, 600 GB/s GDDR6 (the A10's memory)",
        ),
        Datasheet(
            "RTX4090",
            165.2,
            1.008,
            "NVIDIA Ada Lovelace architecture whitepaper v1.1, GeForce RTX 4090: BF16 "
            "tensor with FP32 accumulate 165.2 TFLOPS dense; 1,008 GB/s GDDR6X",
        ),
        Datasheet(
            "RTX5090",
            209.5,
            1.792,
            "NVIDIA RTX Blackwell GPU architecture whitepaper (2025), GeForce RTX 5090: "
            "FP16/BF16 tensor with FP32 accumulate 209.5 TFLOPS dense; 1,792 GB/s GDDR7",
        ),
        Datasheet(
            "MI300X", 1307.4, 5.3, "AMD Instinct MI300X data sheet (2023): BF16 1,307.4 TFLOPS dense; 5.3 TB/s HBM3"
        ),
    )
}


def _words(name: str) -> set[str]:
    return set(name.upper().replace("-", " ").replace("_", " ").split())


def variant_of(gpu_name: str | None) -> str | None:
    """The DATASHEETS key for a GPU as ``nvidia-smi`` (or ``rocm-smi``) names it, or None.

    ``NVIDIA H100 80GB HBM3`` -> ``H100-SXM``; ``NVIDIA H100 PCIe`` -> ``H100-PCIE``;
    ``NVIDIA A100-SXM4-40GB`` -> ``A100-40GB``; an A100 whose memory the name does not say is
    taken as the 40 GB part (the lower bandwidth, so the floor never fails a healthy GPU).
    """
    if not gpu_name:
        return None
    model, words = canonical_model(gpu_name), _words(gpu_name)
    if model in ("H100", "H200"):
        form = "PCIE" if "PCIE" in words else ("NVL" if "NVL" in words else "SXM")
        return f"{model}-{form}" if f"{model}-{form}" in DATASHEETS else None
    if model == "A100":
        if "80GB" not in words:
            return "A100-40GB"
        return "A100-PCIE-80GB" if "PCIE" in words else "A100-SXM-80GB"
    return model if model in DATASHEETS else None


__all__ = ["DATASHEETS", "MATMUL_FLOOR", "MEMORY_FLOOR", "Datasheet", "variant_of"]
