"""The node firewall (nftables) every bootstrap installs.

SSH (22) is accepted only from the spec's ``access.allowed_cidrs`` and from the cluster's own
network; the cluster daemons (slurmctld 6817, slurmd 6818, slurmdbd 6819, k3s API 6443, kubelet
10250, flannel VXLAN 8472/udp, NFS 2049 and rpcbind 111) only from the cluster's own network.
Everything else is left to the provider's firewall (``policy accept``).

The cluster's own network is, most specific first: the nodes' addresses when the caller knows
them (``node_addresses``), else the private CIDRs it names (e.g. the VPC), else the RFC 1918
ranges. Every CIDR is parsed and re-printed by ``ipaddress`` before it reaches the file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from provisioner.errors import SpecError
from provisioner.render.views import ClusterView, render_template

RFC1918 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
CLUSTER_TCP_PORTS = (111, 2049, 6443, 6817, 6818, 6819, 10250)
CLUSTER_UDP_PORTS = (111, 2049, 8472)
FIREWALL_PATH = "/etc/provisioner/firewall.nft"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class FirewallView:
    ssh_cidrs: tuple[Network, ...]
    cluster_cidrs: tuple[Network, ...]
    cluster_tcp_ports: tuple[int, ...] = CLUSTER_TCP_PORTS
    cluster_udp_ports: tuple[int, ...] = CLUSTER_UDP_PORTS

    @property
    def sets(self) -> list[tuple[str, str, list[str]]]:
        """(family, set name, CIDRs) for the four address sets the rules use."""
        out = []
        for name, cidrs in (("ssh", self.ssh_cidrs), ("cluster", self.cluster_cidrs)):
            for family, version in (("ipv4", 4), ("ipv6", 6)):
                out.append((family, f"{name}_v{version}", [str(c) for c in _collapse(cidrs, version)]))
        return out


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
    node_addresses: Mapping[str, str] | None = None,
    private_cidrs: Sequence[str] | None = None,
) -> FirewallView:
    """The firewall's address sets. SpecError for a value that is not an address or CIDR."""
    if node_addresses:
        cluster = _networks(node_addresses.values(), "node_addresses")
    elif private_cidrs:
        cluster = _networks(private_cidrs, "private_cidrs")
    else:
        cluster = _networks(RFC1918, "private_cidrs")
    return FirewallView(ssh_cidrs=_networks(allowed_cidrs, "access.allowed_cidrs"), cluster_cidrs=cluster)


def render_firewall(view: ClusterView, firewall: FirewallView) -> str:
    """The nftables ruleset (``nft -f`` loads it; loading it again replaces it)."""
    return render_template("cloud-init/firewall.nft.j2", c=view, fw=firewall)


__all__ = ["FIREWALL_PATH", "FirewallView", "firewall_view", "render_firewall"]
