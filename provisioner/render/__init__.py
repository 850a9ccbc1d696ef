"""Render a Plan into the files that bootstrap its cluster.

``render_cluster(plan, secrets)`` is pure: it returns a ``RenderedCluster`` mapping
relative paths to contents::

    cloud-init/head.yaml, cloud-init/worker.yaml     user data per role, without secrets (what a
                                                     provider stores and serves); a 1-node plan has
                                                     no worker.yaml
    bootstrap/head.sh, bootstrap/worker.sh           the same as a script, for container pods
                                                     (no secrets; render.bootstrap)
    ssh/head.sh, ssh/worker.sh                       the whole bootstrap with the munge key / k3s
                                                     token, which only the SSH pass carries to a node
    slurm/{slurm,gres,topology,cgroup}.conf, slurm/epilog.sh[, slurm/slurmdbd.conf]
    launch/train.sbatch                              torchrun launcher      (Slurm clusters)
    k8s/...                                          provisioner.render.kubernetes (k8s clusters)

``write_rendered`` / ``render_to_dir`` are the only functions here that touch the disk.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import ipaddress
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.errors import ProvisionerError, SpecError
from provisioner.plan import Plan
from provisioner.render.bootstrap import render_bootstrap_script
from provisioner.render.cloudinit import LABEL_WAIT_S, ROLES, render_cloudinit
from provisioner.render.fabric import fabric_profile, nccl_env
from provisioner.render.firewall import firewall_view
from provisioner.render.launch import render_launch
from provisioner.render.slurm import render_slurm
from provisioner.render.views import ClusterView, cluster_view
from provisioner.secrets import ClusterSecrets, load_or_create_secrets


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
    node_addresses: Mapping[str, str] | None = None,
    private_cidrs: Sequence[str] | None = None,
    boot_secrets: bool = False,
) -> RenderedCluster:
    """Render every bootstrap file for ``plan``. Pure and deterministic for fixed secrets.

    ``topology`` maps node name (``<cluster>-<i>``) to its switch path, outermost first;
    ``slurmdbd`` turns Slurm accounting on or off (default: the spec's ``slurm.accounting``).
    ``node_addresses`` (node name -> private IP, when known: SSH bootstrap, fixed addresses)
    becomes /etc/provisioner/hosts on every node; the node firewall and NFS exports are built
    from that file at boot (and rebuilt when it changes). Until it exists, ``private_cidrs``
    (e.g. the VPC's) stand in for it, else cluster daemons answer the node itself only.
    Raises PlanError for an inconsistent plan or topology, SpecError for a bad address. Secrets
    are placed only in the SSH pass's scripts (``ssh/<role>.sh``), listed in ``secret_paths``
    whenever the control plane needs one; the boot files (user data, entrypoint script) hold none
    and leave the control plane to the SSH pass. ``boot_secrets`` puts them in the boot files too,
    for a driver that has no SSH pass (they are then listed as secret as well). The boot files hold
    a slot for a per-node host key token (``realize.nodes.boot_text`` fills it); the SSH pass's
    scripts do not.
    """
    k8s = _kubernetes_module() if plan.spec.control_plane.value == "kubernetes" else None
    accounting = plan.spec.slurm.accounting if slurmdbd is None else slurmdbd
    view = cluster_view(plan, topology=topology, slurmdbd=accounting)
    labels_of = getattr(k8s, "node_labels", None)
    node_labels = (
        {node.name: labels_of(plan, node.index, (topology or {}).get(node.name)) for node in view.nodes}
        if labels_of is not None
        else {}
    )
    files: dict[str, str] = {}
    slurm_files: dict[str, str] = {}
    if view.control_plane == "slurm":
        slurm_files = render_slurm(view)
        files.update({f"slurm/{name}": text for name, text in slurm_files.items()})
        files.update({f"launch/{name}": text for name, text in render_launch(view).items()})
    roles = ROLES if view.node_count > 1 else ROLES[:1]
    addresses = _node_addresses(view, node_addresses)
    firewall = firewall_view(
        view.allowed_cidrs, private_cidrs=private_cidrs, kubernetes=view.control_plane == "kubernetes"
    )
    k8s_files: dict[str, str] = k8s.render_kubernetes(plan) if k8s is not None else {}  # paths start with k8s/
    manifests = k8s.bootstrap_manifests(k8s_files) if k8s is not None else {}
    boot: dict[str, str] = {}
    full: dict[str, str] = {}
    for role in roles:

        def document(with_secrets: bool, boot: bool, role: str = role) -> str:
            return render_cloudinit(
                view,
                role,
                secrets,
                slurm_files,
                node_labels,
                firewall=firewall,
                node_addresses=addresses,
                k8s_manifests=manifests,
                label_wait_s=LABEL_WAIT_S if topology else 0,
                with_secrets=with_secrets,
                hostkey_slot=boot,
            )

        whole = document(True, boot=False)
        user_data = document(boot_secrets, boot=True)
        boot[f"cloud-init/{role}.yaml"] = user_data
        boot[f"bootstrap/{role}.sh"] = render_bootstrap_script(view, role, user_data)
        full[f"ssh/{role}.sh"] = render_bootstrap_script(view, role, whole)
    files.update(boot)
    files.update(full)
    files.update(k8s_files)
    secret_paths: frozenset[str] = frozenset()
    if view.control_plane in ("slurm", "kubernetes"):
        secret_paths = frozenset(full) | (frozenset(boot) if boot_secrets else frozenset())
    return RenderedCluster(files=dict(sorted(files.items())), secret_paths=secret_paths)


def _node_addresses(view: ClusterView, addresses: Mapping[str, str] | None) -> dict[str, str]:
    """Node name -> canonical IP text, in node order. SpecError for an unknown node or a non-IP."""
    if not addresses:
        return {}
    names = [node.name for node in view.nodes]
    unknown = sorted(set(addresses) - set(names))
    if unknown:
        raise SpecError(f"addresses given for node(s) not in the plan: {', '.join(unknown)}", path="node_addresses")
    out = {}
    for name in names:
        if name in addresses:
            try:
                out[name] = str(ipaddress.ip_address(addresses[name]))
            except ValueError:
                raise SpecError(f"{addresses[name]!r} is not an IP address", path=f"node_addresses.{name}") from None
    return out


def write_rendered(rendered: RenderedCluster, out_dir: Path) -> list[Path]:
    """Write every file under ``out_dir`` (created if missing); secret files get mode 0600.

    Never follows a symlink below ``out_dir``: each subfolder is opened with O_NOFOLLOW relative
    to its parent (a symlinked subfolder is refused), and each file is written to a new temp file
    (O_EXCL, created with its final mode, so a secret is never readable by others even briefly)
    and renamed over the old name, which replaces a symlink there instead of writing through it.
    Overwrites existing files; idempotent. Raises ProvisionerError on an unsafe path, a symlinked
    subfolder or an OS error; a file written before the error stays written.
    """
    out_dir = Path(out_dir)
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        root = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ProvisionerError(f"cannot write into {out_dir}: {exc.strerror}") from exc
    try:
        for rel, text in rendered.items():
            parts = tuple(rel.split("/"))
            if any(part in ("", ".", "..") for part in parts):
                raise ProvisionerError(f"refusing to write {rel!r} outside {out_dir}")
            mode = 0o600 if rendered.is_secret(rel) else (0o755 if rel.endswith((".sh", ".sbatch")) else 0o644)
            _write_below(root, parts, text, mode, out_dir)
            written.append(out_dir / rel)
    finally:
        os.close(root)
    return written


def _write_below(root: int, parts: tuple[str, ...], text: str, mode: int, out_dir: Path) -> None:
    """Write ``text`` at ``parts`` below the open folder ``root`` without following a symlink."""
    opened: list[int] = []
    folder = root
    try:
        for index, part in enumerate(parts[:-1]):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=folder)
            try:
                folder = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                where = out_dir.joinpath(*parts[: index + 1])
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ProvisionerError(f"refusing to write through {where}: a symlink or not a folder") from None
                raise ProvisionerError(f"cannot open {where}: {exc.strerror}") from exc
            opened.append(folder)
        name = parts[-1]
        tmp = f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder)
            try:
                os.fchmod(fd, mode)  # the umask may have narrowed it
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                    handle.write(text)
                os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                os.unlink(tmp, dir_fd=folder)
                raise
        except OSError as exc:
            raise ProvisionerError(f"cannot write {out_dir.joinpath(*parts)}: {exc.strerror}") from exc
    finally:
        for fd in reversed(opened):
            os.close(fd)


def render_to_dir(
    plan: Plan,
    out_dir: Path,
    secrets: ClusterSecrets | None = None,
    *,
    secrets_file: Path | None = None,
    topology: Mapping[str, Sequence[str]] | None = None,
    node_addresses: Mapping[str, str] | None = None,
) -> list[Path]:
    """Render ``plan`` and write it under ``out_dir``. Returns the written paths.

    Secrets: ``secrets`` if given; else those kept in ``secrets_file`` (created 0600 with fresh
    ones on first use, so rendering again reuses them); else fresh ones, not kept.
    """
    if secrets is None and secrets_file is not None:
        secrets, _ = load_or_create_secrets(secrets_file, generate=lambda: ClusterSecrets.generate())
    rendered = render_cluster(
        plan, secrets or ClusterSecrets.generate(), topology=topology, node_addresses=node_addresses
    )
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
