"""Slurm configuration files for a cluster view.

``render_slurm(view)`` returns ``{file name: content}`` for ``/etc/slurm``: slurm.conf,
gres.conf, topology.conf, cgroup.conf, epilog.sh and, when accounting is on, slurmdbd.conf.
None of them holds a secret: munge authenticates with the key cloud-init writes, and
slurmdbd reaches MariaDB over its unix socket.
"""

from __future__ import annotations

from provisioner.render.views import ClusterView, render_template

SLURM_FILES = ("slurm.conf", "gres.conf", "topology.conf", "cgroup.conf", "epilog.sh")


def render_slurm(view: ClusterView) -> dict[str, str]:
    """Render every Slurm file for ``view``. Pure; raises jinja2 errors only on template bugs."""
    names = SLURM_FILES + (("slurmdbd.conf",) if view.slurmdbd else ())
    return {name: render_template(f"slurm/{name}.j2", c=view) for name in names}


__all__ = ["SLURM_FILES", "render_slurm"]
