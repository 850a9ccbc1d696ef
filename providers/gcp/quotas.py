"""Compute Engine regional GPU quotas: which metric governs an accelerator, and refusals that name
the metric and where to ask for more. Pure.

Spot (and preemptible) VMs count against ``PREEMPTIBLE_<metric>``. ``NVIDIA_H100_GPUS`` /
``PREEMPTIBLE_NVIDIA_H100_GPUS`` are named in issue 10; the other metrics follow the same
pattern and are UNVERIFIED (docs/aws-gcp.md). regions.get reports each metric's ``limit`` and
``usage`` (running and reserved VMs), so headroom is ``limit - usage``.
"""

from __future__ import annotations

from dataclasses import dataclass

QUOTA_METRICS = {
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
}
"""Regional quota metric per accelerator type (on-demand; spot adds ``PREEMPTIBLE_``)."""


def quota_metric(accelerator: str, spot: bool) -> str | None:
    """The regional quota metric counting ``accelerator`` GPUs bought ``spot`` or not (None: unknown)."""
    metric = QUOTA_METRICS.get(accelerator)
    if metric is None:
        return None
    return f"PREEMPTIBLE_{metric}" if spot else metric


def how_to_request(project: str, metric: str, region: str) -> str:
    """Where a person asks for more of ``metric`` in ``region``."""
    return (
        f"https://console.cloud.google.com/iam-admin/quotas?project={project} "
        f"(metric compute.googleapis.com/{metric}, region {region})"
    )


@dataclass(frozen=True)
class GpuQuotaShortfall:
    """Requests whose GPUs exceed what is left of one regional quota (``machine_type`` names every
    machine type of the request under this metric, comma-separated)."""

    machine_type: str
    region: str
    spot: bool
    metric: str
    available_gpus: int
    needed_gpus: int
    project: str

    @property
    def reason(self) -> str:
        return (
            f"{self.needed_gpus} {'spot ' if self.spot else ''}GPUs of {self.machine_type} in {self.region} exceed "
            f"the quota {self.metric} ({self.available_gpus} left); ask for more at "
            f"{how_to_request(self.project, self.metric, self.region)}"
        )


__all__ = ["QUOTA_METRICS", "GpuQuotaShortfall", "how_to_request", "quota_metric"]
