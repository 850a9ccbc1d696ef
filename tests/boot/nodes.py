"""The boot tests' nodes: provisioner.local.nodes and .image (``provisioner up --local`` boots the same ones)."""

from provisioner.local.image import SLURM_COMPAT, build_image
from provisioner.local.nodes import Machine, Netns, boot, boot_pod, left_running, wait_for

__all__ = ["SLURM_COMPAT", "Machine", "Netns", "boot", "boot_pod", "build_image", "left_running", "wait_for"]
