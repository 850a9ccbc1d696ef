"""Rendering a Plan into bootstrap files (cloud-init, Slurm, launch helpers, Kubernetes)."""

from provisioner.render.fabric import fabric_profile, nccl_env

__all__ = ["fabric_profile", "nccl_env"]
