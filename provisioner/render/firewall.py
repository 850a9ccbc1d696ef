"""The node firewall (nftables) and NFS exports every bootstrap installs, built from the node list.

Closed by default (``policy drop``), with an explicit allow list: SSH (22) from the spec's
``access.allowed_cidrs`` and the cluster's own nodes; anything from the cluster's own nodes (the
daemons: slurmctld 6817, slurmd 6818, slurmdbd 6819, k3s API 6443, kubelet 10250, flannel VXLAN
8472/udp, NFS 2049 and rpcbind 111; and the ports no list can name: srun's step I/O, NCCL's
sockets) and, on Kubernetes, from k3s's pod and service networks; loopback, replies, ICMP
(path MTU, IPv6 neighbour discovery) and DHCP replies. Nothing else reaches a node.

The instance metadata address (169.254.169.254, and fd00:ec2::254 on AWS) serves user data and,
on AWS/GCP, the instance's credentials: locally only root (the bootstrap, the provider's agent)
may reach it (``meta skuid != 0`` dropped on output) and nothing forwarded (pods, containers) may.

Node addresses are known only at boot, so the rendered ruleset (``firewall.nft``) carries the
SSH sets and empty node sets, and ``provisioner-firewall`` fills them from
``/etc/provisioner/hosts`` (``IP NAME`` lines, written by render when the caller knows the
addresses, or by the stack/SSH runner at boot): it loads ruleset + node addresses in one ``nft``
transaction, rewrites the NFS exports (head of an NFS cluster: the share, read-write with root
squashing, to each node address) and the ``/etc/hosts`` block. A systemd path unit (or the
script bootstrap's loop) runs it again whenever the hosts file changes. Until the file exists
the node sets hold ``private_cidrs`` if the caller named them (e.g. the VPC), else nothing:
cluster daemons are then reachable from this node only. In a container without CAP_NET_ADMIN
(RunPod, Vast.ai pods) nftables cannot be loaded: the script says so loudly and still applies the
exports and names (the provider's port mapping is then the only boundary); any other nft failure
fails it. Every CIDR is parsed and re-printed by
``ipaddress`` before it reaches a file; the script accepts only address-shaped words from the
hosts file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provisioner.errors import SpecError
from provisioner.render.views import ClusterView, render_template

METADATA_V4 = "169.254.169.254"
METADATA_V6 = "fd00:ec2::254"  # AWS's IPv6 instance metadata endpoint
CLUSTER_TCP_PORTS = (111, 2049, 6443, 6817, 6818, 6819, 10250)
CLUSTER_UDP_PORTS = (111, 2049, 8472)
# k3s defaults (--cluster-cidr, --service-cidr): pods reach the API server and kubelets from here.
K3S_POD_NETWORKS = ("10.42.0.0/16", "10.43.0.0/16")
FIREWALL_PATH = "/etc/provisioner/firewall.nft"
FIREWALL_SCRIPT = "/usr/local/sbin/provisioner-firewall"
HOSTS_PATH = "/etc/provisioner/hosts"
EXPORTS_PATH = "/etc/exports.d/provisioner.exports"
NFS_OPTIONS = "rw,sync,no_subtree_check,root_squash"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class FirewallView:
    ssh_cidrs: tuple[Network, ...]
    static_cidrs: tuple[Network, ...] = ()  # always in the node sets (k3s pod/service networks)
    fallback_cidrs: tuple[Network, ...] = ()  # the node sets until /etc/provisioner/hosts exists
    metadata_v4: str = METADATA_V4
    metadata_v6: str = METADATA_V6

    @property
    def sets(self) -> list[tuple[str, str, list[str]]]:
        """(family, set name, CIDRs) for the four address sets the rules use."""
        out = []
        for name, cidrs in (("ssh", self.ssh_cidrs), ("cluster", self.static_cidrs)):
            for family, version in (("ipv4", 4), ("ipv6", 6)):
                out.append((family, f"{name}_v{version}", [str(c) for c in _collapse(cidrs, version)]))
        return out

    def fallback(self, version: int) -> list[str]:
        return [str(c) for c in _collapse(self.fallback_cidrs, version)]


def _collapse(cidrs: Iterable[Network], version: int) -> list[Network]:
    same = [c for c in cidrs if c.version == version]
    return list(ipaddress.collapse_addresses(same))  # type: ignore[type-var]


def _networks(values: Iterable[str], where: str) -> tuple[Network, ...]:
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError:
            raise SpecError(f"{value!r} is not a CIDR block", path=where) from None
    return tuple(out)


def firewall_view(
    allowed_cidrs: Sequence[str],
    *,
    private_cidrs: Sequence[str] | None = None,
    kubernetes: bool = False,
) -> FirewallView:
    """The firewall's address sets. SpecError for a value that is not an address or CIDR."""
    return FirewallView(
        ssh_cidrs=_networks(allowed_cidrs, "access.allowed_cidrs"),
        static_cidrs=_networks(K3S_POD_NETWORKS, "k3s") if kubernetes else (),
        fallback_cidrs=_networks(private_cidrs or (), "private_cidrs"),
    )


def render_firewall(view: ClusterView, firewall: FirewallView) -> str:
    """The nftables ruleset (``nft -f`` loads it; loading it again replaces it)."""
    return render_template("cloud-init/firewall.nft.j2", c=view, fw=firewall)


def render_firewall_script(view: ClusterView, firewall: FirewallView, role: str) -> str:
    """``provisioner-firewall``: applies the node list (ruleset, NFS exports on the head, /etc/hosts)."""
    export = view.shared_mount_path if view.shared_kind == "nfs" and role == "head" else ""
    return render_template(
        "cloud-init/firewall.sh.j2",
        c=view,
        fw=firewall,
        rules_path=FIREWALL_PATH,
        hosts_path=HOSTS_PATH,
        export_path=export,
        exports_file=EXPORTS_PATH,
        nfs_options=NFS_OPTIONS,
    )


__all__ = [
    "EXPORTS_PATH",
    "FIREWALL_PATH",
    "FIREWALL_SCRIPT",
    "HOSTS_PATH",
    "K3S_POD_NETWORKS",
    "METADATA_V4",
    "METADATA_V6",
    "NFS_OPTIONS",
    "FirewallView",
    "firewall_view",
    "render_firewall",
    "render_firewall_script",
]
