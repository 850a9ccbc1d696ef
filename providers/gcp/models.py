"""What the GCP adapter reads out of Compute Engine answers (compute_v1 message types), and the
bundled catalog's GCP rows it borrows facts from. Pure, except the catalog read (cached once).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from provisioner.offer import Offer

GPU_MODELS = {
    "nvidia-tesla-a100": ("A100", 40),
    "nvidia-a100-80gb": ("A100", 80),
    "nvidia-h100-80gb": ("H100", 80),
    "nvidia-h100-mega-80gb": ("H100", 80),
    "nvidia-h200-141gb": ("H200", 141),
    "nvidia-b200": ("B200", 180),
    "nvidia-l4": ("L4", 24),
    "nvidia-tesla-t4": ("T4", 16),
    "nvidia-tesla-v100": ("V100", 16),
}
"""Accelerator type -> (canonical model, GiB per GPU) (gpuhunt ``accelerator_details``; the
description's ``NN GB`` wins when present)."""
_GB = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
_SWITCH_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class GpuMachineType:
    machine_type: str
    zone: str
    accelerator: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: float
    vcpus: int
    memory_gib: float
    local_ssd_gib: float


def zone_region(zone: str) -> str:
    """``us-central1`` for ``us-central1-a``."""
    return zone.rsplit("-", 1)[0]


def leaf(url: str) -> str:
    """The last path segment of a resource URL."""
    return url.rsplit("/", 1)[-1]


def gpu_machine_type(machine: Any, accelerators: dict[str, Any], zone: str) -> GpuMachineType | None:
    """A ``compute_v1.MachineType`` with bundled NVIDIA GPUs -> GpuMachineType; None for others and
    deprecated ones. ``accelerators`` maps accelerator type name -> ``compute_v1.AcceleratorType``."""
    if not machine.accelerators or (machine.deprecated and machine.deprecated.state == "DEPRECATED"):
        return None
    bundled = machine.accelerators[0]
    accelerator = leaf(bundled.guest_accelerator_type)
    model, memory = GPU_MODELS.get(accelerator, ("", 0))
    described = _GB.search(accelerators[accelerator].description) if accelerator in accelerators else None
    memory = int(described.group(1)) if described else memory
    if not model or bundled.guest_accelerator_count < 1:
        return None
    partitions = machine.bundled_local_ssds.partition_count if machine.bundled_local_ssds else 0
    return GpuMachineType(
        machine.name,
        zone,
        accelerator,
        model,
        bundled.guest_accelerator_count,
        float(memory),
        machine.guest_cpus,
        machine.memory_mb / 1024,
        375.0 * partitions,
    )


def switch_path(instance: Any) -> list[str] | None:
    """The switch path (outermost first) of a ``compute_v1.Instance`` from
    ``resourceStatus.physicalHostTopology`` (cluster, block, subblock), else the first two parts of
    ``physicalHost`` (``/cluster/block/host``); None without placement. Each level is named after
    the ones above it (``gce-<cluster>-<block>``) so a name sits once in the tree; characters
    outside ``[A-Za-z0-9_-]`` are dropped."""
    status = instance.resource_status
    where = status.physical_host_topology if status else None
    levels = (
        [where.cluster, where.block, where.subblock]
        if where and where.cluster
        else [part for part in (status.physical_host if status else "").split("/") if part][:2]
    )
    levels = [_SWITCH_CHARS.sub("", level)[:40] for level in levels if level]
    if not levels or not all(levels):
        return None
    return ["gce-" + "-".join(levels[:depth]) for depth in range(1, len(levels) + 1)]


@lru_cache(maxsize=1)
def bundled_offers() -> tuple[dict[tuple[str, str], Offer], dt.date | None]:
    """The bundled catalog's GCP offers by (machine type, region), and its date."""
    try:
        from provisioner.catalog import load_bundled_catalog

        catalog = load_bundled_catalog()
    except Exception:  # prices are context here; without them nothing is offered
        return {}, None
    return ({(o.instance_type, o.region): o for o in catalog.offers if o.provider == "gcp"}, catalog.as_of)


def typical_offer() -> Offer | None:
    """A typical bundled GCP offer: the facts (interruption rates, egress, billing terms) for a
    machine type the bundled catalog has no row for."""
    rows = sorted(bundled_offers()[0].values(), key=lambda o: o.key)
    return rows[len(rows) // 2] if rows else None


__all__ = [
    "GPU_MODELS",
    "GpuMachineType",
    "bundled_offers",
    "gpu_machine_type",
    "leaf",
    "switch_path",
    "typical_offer",
    "zone_region",
]
