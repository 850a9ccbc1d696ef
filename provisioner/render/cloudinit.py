"""cloud-init user data, one document per role (head, worker).

Every node of a role gets the same document; the node learns its own name from the
provider's metadata at boot (``provisioner-identity``), so the stack can hand one user
data string to a whole group of instances. The head node is node 0 and, because every
node in a plan carries GPUs, runs the GPU workload too (slurmd next to slurmctld, or a
k3s server that schedules pods).

Secrets (the munge key, the k3s token) appear only here, only for the control plane that
needs them, and only in the full document the SSH pass runs (``with_secrets``); the user data a
provider stores and serves (metadata, pod env, ``onstart``) is rendered without them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from provisioner.render.checkpoint_sync import ENV_FILE, SYNC_PATH, checkpoint_sync
from provisioner.render.firewall import (
    FIREWALL_PATH,
    FirewallView,
    firewall_view,
    render_firewall,
    render_firewall_script,
)
from provisioner.render.kubernetes import (
    K3S_INSTALL_URL,
    K3S_VERSION,
    KUEUE_MANIFEST_URL,
    KUEUE_VERSION,
    TOPOLOGY_LABEL_KEYS,
)
from provisioner.render.teardown import render_teardown_scripts
from provisioner.render.views import ClusterView, render_template
from provisioner.secrets import ClusterSecrets

ROLES = ("head", "worker")
# Where a node keeps the boot token that vouches for its SSH host key (provisioner.realize.hostkeys),
# and what the user data holds there until ``realize.nodes.boot_text`` puts one node's token in.
HOSTKEY_TOKEN_PATH = "/etc/provisioner/hostkey-token"
HOSTKEY_TOKEN_SLOT = "PROVISIONER_HOSTKEY_TOKEN_SLOT"
# How long the head's provisioner-k8s-apply waits for every node to register before it sets the
# topology labels of those that have, when they come from the provider (see render_cloudinit).
LABEL_WAIT_S = 300


def nvme_script(view: ClusterView) -> str:
    """The NVMe discovery + RAID0 + mount script (see templates/cloud-init/nvme-raid.sh.j2)."""
    return render_template("cloud-init/nvme-raid.sh.j2", c=view)


def _packages(view: ClusterView, role: str) -> list[str]:
    packages = ["curl", "mdadm", "nfs-common", "nftables"]
    if view.shared_kind == "nfs" and role == "head":
        packages.append("nfs-kernel-server")
    if view.control_plane == "slurm":
        packages += ["munge", "slurm-client", "slurmd"]
        if role == "head":
            packages.append("slurmctld")
            if view.slurmdbd:
                packages += ["mariadb-server", "slurmdbd"]
    return packages


def _split_labels(
    names: list[str], node_labels: Mapping[str, Mapping[str, str]]
) -> tuple[list[tuple[str, str]], list[tuple[str, list[tuple[str, str]]]]]:
    """Labels every node in ``names`` shares, and each node's remaining ones."""
    if not names or not node_labels:
        return [], []
    per_node = [set(node_labels.get(name, {}).items()) for name in names]
    common = set.intersection(*per_node)
    extra = [(name, sorted(labels - common)) for name, labels in zip(names, per_node, strict=True)]
    return sorted(common), extra


def _topology_labels(
    view: ClusterView, node_labels: Mapping[str, Mapping[str, str]]
) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each labelled node's ``TOPOLOGY_LABEL_KEYS`` labels, in node order (the head sets them)."""
    return [
        (
            node.name,
            [(key, node_labels[node.name][key]) for key in TOPOLOGY_LABEL_KEYS if key in node_labels[node.name]],
        )
        for node in view.nodes
        if node.name in node_labels
    ]


def render_cloudinit(
    view: ClusterView,
    role: str,
    secrets: ClusterSecrets,
    slurm_files: Mapping[str, str] | None = None,
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
    *,
    firewall: FirewallView | None = None,
    node_addresses: Mapping[str, str] | None = None,
    k8s_manifests: Mapping[str, str] | None = None,
    label_wait_s: int = 0,
    with_secrets: bool = True,
    hostkey_slot: bool = False,
) -> str:
    """User data for every node of ``role``. Raises ValueError for an unknown role.

    ``firewall`` is the node firewall (default: SSH from the spec's ``allowed_cidrs``, cluster
    daemons from the node addresses in /etc/provisioner/hosts only; see render/firewall.py);
    ``node_addresses`` (node name -> private IP, when the caller knows them) becomes
    /etc/provisioner/hosts, which ``provisioner-firewall`` turns into the firewall's node sets,
    the NFS exports and /etc/hosts, so every node resolves every other by name. The cluster
    SSH public key (``secrets``) is authorized next to the spec's key for the default user and
    ``ml``.

    ``slurm_files`` (from ``render_slurm``) is embedded under /etc/slurm when the control
    plane is Slurm; ``k8s_manifests`` (file name -> text, ``kubernetes.bootstrap_manifests``)
    under /etc/provisioner/k8s on the head, which applies them after Kueue. ``node_labels``
    (node name -> k3s labels) is split into the labels the role's nodes share (static k3s
    config) and per-node ones, chosen at boot once the node knows its name; k3s applies them
    only when a node first registers, so the head also gets every node's topology labels in
    /etc/provisioner/k8s-node-labels and sets them on the registered nodes each time it runs
    ``provisioner-k8s-apply``, after waiting up to ``label_wait_s`` for every node to register
    (``LABEL_WAIT_S`` when the labels come from the provider's topology, which the nodes did not
    boot with; 0 otherwise: a node that registers later does so with this render's labels). The
    result holds secrets when the control plane is Slurm or Kubernetes, unless ``with_secrets`` is
    False: then the munge key, the k3s configuration (its token) and every control-plane step are
    left out, and the document is what a provider may see (user data); the SSH pass runs the full one.
    ``hostkey_slot``: the boot document gets a 0600 ``HOSTKEY_TOKEN_PATH`` holding
    ``HOSTKEY_TOKEN_SLOT``, which each node's copy replaces with its own boot token (the SSH pass's
    document leaves the file alone).
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    if firewall is None:
        firewall = firewall_view(view.allowed_cidrs, kubernetes=view.control_plane == "kubernetes")
    scripts = {
        "identity": render_template("cloud-init/identity.sh.j2", c=view),
        "nvme": nvme_script(view),
        "gpu_check": render_template("cloud-init/gpu-check.sh.j2", c=view),
        "health": render_template("cloud-init/health.sh.j2", c=view),
        "shared_fs": render_template("cloud-init/shared-fs.sh.j2", c=view),
        "firewall": render_firewall(view, firewall),
        "firewall_apply": render_firewall_script(view, firewall, role),
        **render_teardown_scripts(view),
    }
    k3s_install = ""
    if view.control_plane == "kubernetes":
        scripts["k8s_apply"] = render_template(
            "cloud-init/k8s-apply.sh.j2",
            c=view,
            kueue_version=KUEUE_VERSION,
            kueue_manifest_url=KUEUE_MANIFEST_URL,
            topology_keys=TOPOLOGY_LABEL_KEYS,
            label_wait_s=int(label_wait_s),
        )
        scripts["k8s_node_labels"] = render_template(
            "cloud-init/k8s-node-labels.sh.j2", c=view, nodes=_topology_labels(view, node_labels or {})
        )
        k3s_install = (
            f"curl -sfL {shlex.quote(K3S_INSTALL_URL)} | INSTALL_K3S_VERSION={shlex.quote(K3S_VERSION)} "
            f"INSTALL_K3S_EXEC={'server' if role == 'head' else 'agent'} sh -"
        )
    # (unit, script, OnUnitActiveSec, description) of the lifetime timers; see render/teardown.py.
    timers = [
        (name, name, "1min", what)
        for name, what in (
            ("deadman", f"End this node when the cluster lifetime ({view.ttl_minutes} min) is over"),
            ("idle", f"End this node after {view.idle_minutes} idle minutes"),
        )
        if name in scripts
    ]
    # Only the values the template may place; nothing else about the secrets reaches jinja.
    secret_values: dict[str, object] = {
        "included": with_secrets,
        "munge_key_b64": secrets.munge_key_b64.get_secret_value()
        if with_secrets and view.control_plane == "slurm"
        else "",
        "k3s_token": secrets.k3s_token.get_secret_value()
        if with_secrets and view.control_plane == "kubernetes"
        else "",
    }
    # The shared filesystem's fstab lines, as shell commands with every path quoted. Idempotent: a
    # cloud-init node runs them at boot and again in the SSH pass's bootstrap (a second fstab line
    # would mount the bind twice).
    ckpt, mount = view.checkpoint_path, view.shared_mount_path
    bind_line = shlex.quote(f"{ckpt}/.shared {mount} none bind,nofail 0 0")
    client_line = shlex.quote(
        f"{view.head.name}:{mount} {mount} nfs4 _netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=600 0 0"
    )
    nfs = {
        "bind": f"{{ grep -qxF {bind_line} /etc/fstab || echo {bind_line} >> /etc/fstab; }} && "
        f"{{ mountpoint -q {shlex.quote(mount)} || mount {shlex.quote(mount)}; }}",
        "client": f"grep -qxF {client_line} /etc/fstab || echo {client_line} >> /etc/fstab",
    }
    # slurmctld starts only once slurmdbd answers (sacctmgr reaches it) and holds the cluster, so its
    # first accounting messages go to a live slurmdbd instead of its queue. Slurm's ClusterName is
    # the spec's name with '_' for '-' (slurm.conf.j2); "add cluster" fails when it exists already.
    cluster = shlex.quote(view.name.replace("-", "_"))
    slurmdbd_ready = (
        "i=0; until out=$(sacctmgr -n -P list cluster format=cluster); do i=$((i+1)); "
        "[ $i -lt 60 ] || exit 1; sleep 1; done; "
        f'echo "$out" | grep -qx {cluster} || sacctmgr -i add cluster {cluster}'
    )
    names = [node.name for node in view.nodes if node.role == role]
    checkpoint = checkpoint_sync(view, role)
    common_labels, node_extra_labels = _split_labels(names, node_labels or {})
    authorized_keys = [key for key in (view.ssh_public_key, secrets.ssh_public_key) if key]
    hosts = [(address, name) for name, address in (node_addresses or {}).items()]
    return render_template(
        "cloud-init/node.yaml.j2",
        authorized_keys=authorized_keys,
        firewall_path=FIREWALL_PATH,
        hosts=hosts,
        common_labels=common_labels,
        node_extra_labels=node_extra_labels,
        c=view,
        role=role,
        packages=_packages(view, role) + (["rclone"] if checkpoint else []),
        scripts=scripts,
        secrets=secret_values,
        slurm_files=sorted((slurm_files or {}).items()),
        timers=timers,
        checkpoint=checkpoint,
        checkpoint_env_file=ENV_FILE,
        checkpoint_sync_path=SYNC_PATH,
        k3s_install=k3s_install,
        k8s_manifests=sorted((k8s_manifests or {}).items()),
        nfs=nfs,
        slurmdbd_ready=slurmdbd_ready,
        hostkey_token=(HOSTKEY_TOKEN_PATH, HOSTKEY_TOKEN_SLOT) if hostkey_slot else None,
    )


__all__ = ["HOSTKEY_TOKEN_PATH", "HOSTKEY_TOKEN_SLOT", "LABEL_WAIT_S", "ROLES", "nvme_script", "render_cloudinit"]
