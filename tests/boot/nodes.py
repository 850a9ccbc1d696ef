"""The boot tests' nodes: provisioner.local.nodes (``provisioner up --local`` boots the same ones)."""

from provisioner.local.nodes import (
    SLURM_COMPAT,
    Machine,
    Netns,
    boot,
    boot_pod,
    build_image,
    left_running,
    wait_for,
)

__all__ = ["SLURM_COMPAT", "Machine", "Netns", "boot", "boot_pod", "build_image", "left_running", "wait_for"]
