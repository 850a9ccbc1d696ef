"""Render a Plan into the files that bootstrap its cluster.

``render_cluster(plan, secrets)`` is pure: it returns a ``RenderedCluster`` mapping
relative paths to contents::

    cloud-init/head.yaml, cloud-init/worker.yaml     user data per role (hold secrets);
                                                     a 1-node plan has no worker.yaml
    slurm/{slurm,gres,topology,cgroup}.conf, slurm/epilog.sh[, slurm/slurmdbd.conf]
    launch/train.sbatch                              torchrun launcher      (Slurm clusters)
    k8s/...                                          provisioner.render.kubernetes (k8s clusters)

``write_rendered`` / ``render_to_dir`` are the only functions here that touch the disk.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.errors import ProvisionerError
from provisioner.plan import Plan
from provisioner.render.cloudinit import ROLES, render_cloudinit
from provisioner.render.fabric import fabric_profile, nccl_env
from provisioner.render.launch import render_launch
from provisioner.render.slurm import render_slurm
from provisioner.render.views import ClusterView, cluster_view
from provisioner.secrets import ClusterSecrets


@dataclass(frozen=True)
class RenderedCluster(Mapping[str, str]):
    """Rendered files: relative POSIX path -> text. ``secret_paths`` hold secrets (mode 0600)."""

    files: Mapping[str, str]
    secret_paths: frozenset[str] = field(default_factory=frozenset)

    def __getitem__(self, path: str) -> str:
        return self.files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __repr__(self) -> str:  # never show contents: some hold secrets
        return f"RenderedCluster({sorted(self.files)!r}, secret_paths={sorted(self.secret_paths)!r})"

    def is_secret(self, path: str) -> bool:
        return path in self.secret_paths


def _kubernetes_module() -> Any | None:
    try:
        return importlib.import_module("provisioner.render.kubernetes")
    except ModuleNotFoundError as exc:
        if exc.name != "provisioner.render.kubernetes":
            raise
        return None


def render_cluster(
    plan: Plan,
    secrets: ClusterSecrets,
    *,
    topology: Mapping[str, Sequence[str]] | None = None,
    slurmdbd: bool | None = None,
) -> RenderedCluster:
    """Render every bootstrap file for ``plan``. Pure and deterministic for fixed secrets.

    ``topology`` maps node name (``<cluster>-<i>``) to its switch path, outermost first;
    ``slurmdbd`` turns Slurm accounting on or off (default: the spec's ``slurm.accounting``).
    Raises PlanError for an inconsistent plan or topology. Secrets are placed only in the
    cloud-init files, which are listed in ``secret_paths`` whenever the control plane needs one.
    """
    k8s = _kubernetes_module() if plan.spec.control_plane.value == "kubernetes" else None
    accounting = plan.spec.slurm.accounting if slurmdbd is None else slurmdbd
    view = cluster_view(plan, topology=topology, slurmdbd=accounting)
    labels_of = getattr(k8s, "node_labels", None)
    node_labels = (
        {node.name: labels_of(plan, node.index) for node in view.nodes} if labels_of is not None else {}
    )
    files: dict[str, str] = {}
    slurm_files: dict[str, str] = {}
    if view.control_plane == "slurm":
        slurm_files = render_slurm(view)
        files.update({f"slurm/{name}": text for name, text in slurm_files.items()})
        files.update({f"launch/{name}": text for name, text in render_launch(view).items()})
    roles = ROLES if view.node_count > 1 else ROLES[:1]
    cloud_init = {
        f"cloud-init/{role}.yaml": render_cloudinit(view, role, secrets, slurm_files, node_labels)
        for role in roles
    }
    files.update(cloud_init)
    if k8s is not None:
        files.update(k8s.render_kubernetes(plan))  # its paths already start with k8s/
    secret_paths = frozenset(cloud_init) if view.control_plane in ("slurm", "kubernetes") else frozenset()
    return RenderedCluster(files=dict(sorted(files.items())), secret_paths=secret_paths)


def write_rendered(rendered: RenderedCluster, out_dir: Path) -> list[Path]:
    """Write every file under ``out_dir`` (created if missing); secret files get mode 0600.

    Overwrites existing files; idempotent. Secret files are created 0600 before any byte
    is written, so a secret is never readable by others even briefly. Raises
    ProvisionerError on an unsafe path or an OS error.
    """
    out_dir = Path(out_dir)
    written: list[Path] = []
    for rel, text in rendered.items():
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ProvisionerError(f"refusing to write {rel!r} outside {out_dir}")
        path = out_dir / rel
        mode = 0o600 if rendered.is_secret(rel) else (0o755 if rel.endswith((".sh", ".sbatch")) else 0o644)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            os.fchmod(fd, mode)  # an existing file keeps its old mode through O_CREAT
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        except OSError as exc:
            raise ProvisionerError(f"cannot write {path}: {exc.strerror}") from exc
        written.append(path)
    return written


def render_to_dir(
    plan: Plan,
    out_dir: Path,
    secrets: ClusterSecrets | None = None,
    *,
    topology: Mapping[str, Sequence[str]] | None = None,
) -> list[Path]:
    """Render ``plan`` and write it under ``out_dir``; fresh secrets unless given. Returns paths."""
    rendered = render_cluster(plan, secrets or ClusterSecrets.generate(), topology=topology)
    return write_rendered(rendered, out_dir)


__all__ = [
    "ClusterView",
    "RenderedCluster",
    "cluster_view",
    "fabric_profile",
    "nccl_env",
    "render_cluster",
    "render_to_dir",
    "write_rendered",
]
