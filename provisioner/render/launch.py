"""Launch helpers: the Slurm batch script that starts torchrun on every node."""

from __future__ import annotations

from provisioner.render.views import ClusterView, render_template


def render_launch(view: ClusterView) -> dict[str, str]:
    """``{file name: content}`` of launch helpers for ``view``. Pure; no secrets.

    Called for Slurm clusters; Kubernetes clusters get part B's Job manifests under
    ``k8s/`` instead, and clusters without a control plane get no launcher.
    """
    return {"train.sbatch": render_template("launch/train.sbatch.j2", c=view)}


__all__ = ["render_launch"]
