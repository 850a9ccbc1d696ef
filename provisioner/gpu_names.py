"""GPU model names as a spec, a catalog and a report spell them: the known models, the comparison
form (``canonical_gpu``) and the one-line hint for a name that is not one (``gpu_model_problem``).
Pure, stdlib only.
"""

from __future__ import annotations

import re


def canonical_gpu(name: str) -> str:
    """Normalise a GPU model name for comparison: ``rtx 4090`` == ``RTX4090`` == ``rtx-4090``."""
    return re.sub(r"[\s_\-]", "", name).upper()


GPU_MODELS = (
    "B300",
    "B200",
    "GB200",
    "H200",
    "GH200",
    "H100",
    "H800",
    "A100",
    "A800",
    "L40S",
    "L40",
    "L4",
    "A40",
    "A30",
    "A10",
    "A10G",
    "A16",
    "T4",
    "V100",
    "P100",
    "RTXPRO6000",
    "RTX6000ADA",
    "RTX6000",
    "RTXA6000",
    "A6000",
    "RTXA5000",
    "RTXA4500",
    "RTXA4000",
    "RTX5090",
    "RTX4090",
    "RTX4080",
    "RTX3090",
    "RTX3080",
    "MI300X",
    "MI325X",
    "MI250X",
)
"""GPU models a spec may ask for (canonical names, as catalogs and reports spell them)."""

_KNOWN_GPUS = {re.sub(r"[\s_\-]", "", name).upper(): name for name in GPU_MODELS}
_VENDOR_WORDS = {"NVIDIA", "AMD", "TESLA", "GEFORCE", "INSTINCT"}
_FORM_WORD = re.compile(r"^(?:SXM\d?|PCIE|NVL|HBM\d?E?|OAM)$")
_MEMORY_WORD = re.compile(r"^(?P<gib>\d+)G(?:I?B)?$")


def gpu_model_problem(name: str) -> str | None:
    """None for a known GPU model (any case, spaces or dashes), else one line saying what to write.

    ``A100-80GB`` -> "use A100 with min_memory_gib: 80"; ``H100 SXM`` -> "use H100"; anything
    else lists the known models.
    """
    if canonical_gpu(name) in _KNOWN_GPUS:
        return None
    words = [w for w in re.split(r"[\s_\-/]+", name.upper()) if w and w not in _VENDOR_WORDS]
    memory = [m["gib"] for m in map(_MEMORY_WORD.match, words) if m]
    base = "".join(w for w in words if not _MEMORY_WORD.match(w) and not _FORM_WORD.match(w))
    if base in _KNOWN_GPUS and memory:
        return (
            f"unknown GPU model {name!r}: memory is its own field; "
            f"use {_KNOWN_GPUS[base]} with min_memory_gib: {int(memory[0])}"
        )
    if base in _KNOWN_GPUS:
        return f"unknown GPU model {name!r}; use {_KNOWN_GPUS[base]}"
    from provisioner.suggest import did_you_mean

    return f"unknown GPU model {name!r}; {did_you_mean(name, GPU_MODELS)}known: {', '.join(GPU_MODELS)}"


__all__ = ["GPU_MODELS", "canonical_gpu", "gpu_model_problem"]
