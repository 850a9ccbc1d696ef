"""The cluster's own Compute Engine firewall rules, for the direct engine (``SupportsFirewall``).

The direct engine puts its instances on the project's ``default`` network, each carrying the
cluster id as its network tag. Three rules on that network aim at the tag:

- ``<cluster>-fw-ssh``: allow tcp/22 from the IPv4 entries of ``access.allowed_cidrs``
  (priority 900; none without an IPv4 entry: the instances have no IPv6 address);
- ``<cluster>-fw-internal``: allow every protocol from instances tagged with the cluster
  (priority 900): Slurm, munge, k3s, NFS between the cluster's own nodes;
- ``<cluster>-fw-deny``: deny every protocol from 0.0.0.0/0 (priority 910), so the default
  network's own allow rules (``default-allow-ssh`` from anywhere, ``-internal``, ``-icmp``,
  ``-rdp``, priority 65534) and any other rule of lower precedence stop reaching the nodes.

A rule the project already has at a priority below 900 still applies (GCE evaluates by
priority): docs/security.md says so. Firewall rules take no labels, so the owner mark is the
description, ``provisioner-cluster=<id> provisioner-owner=<owner>``, parsed strictly: a rule of
one of these names without this cluster's and this owner's mark is never changed or deleted.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Any

from provisioner.errors import ClusterBusyError, ProviderAPIError
from provisioner.providers.gcp.client import GCPClient, is_not_found

NETWORK = "global/networks/default"
ALLOW_PRIORITY = 900
DENY_PRIORITY = 910
_MARK = re.compile(r"^provisioner-cluster=([a-z][-a-z0-9]{0,62}) provisioner-owner=([a-z0-9_-]{1,63})$")


def rule_names(cluster_id: str) -> tuple[str, str, str]:
    """(ssh, internal, deny) rule names of ``cluster_id``. Pure."""
    return (f"{cluster_id}-fw-ssh", f"{cluster_id}-fw-internal", f"{cluster_id}-fw-deny")


def owner_mark(cluster_id: str, owner: str) -> str:
    return f"provisioner-cluster={cluster_id} provisioner-owner={owner}"


def parse_mark(description: str | None) -> tuple[str, str] | None:
    """(cluster, owner) of a rule's description, or None when it is not exactly the tool's mark."""
    found = _MARK.match(description or "")
    return (found.group(1), found.group(2)) if found else None


def rule_bodies(cluster_id: str, allowed_cidrs: Sequence[str], owner: str) -> list[dict[str, Any]]:
    """The rules' request bodies (compute_v1.Firewall fields), allows before the deny. Pure."""
    ssh, internal, deny = rule_names(cluster_id)
    mark = owner_mark(cluster_id, owner)
    v4 = sorted(
        {
            str(ipaddress.ip_network(c, strict=False))
            for c in allowed_cidrs
            if ipaddress.ip_network(c, strict=False).version == 4
        }
    )
    common = {"network": NETWORK, "direction": "INGRESS", "target_tags": [cluster_id], "description": mark}
    bodies = []
    if v4:
        bodies.append(
            {
                **common,
                "name": ssh,
                "priority": ALLOW_PRIORITY,
                "source_ranges": v4,
                "allowed": [{"I_p_protocol": "tcp", "ports": ["22"]}],
            }
        )
    bodies.append(
        {
            **common,
            "name": internal,
            "priority": ALLOW_PRIORITY,
            "source_tags": [cluster_id],
            "allowed": [{"I_p_protocol": "all"}],
        }
    )
    bodies.append(
        {
            **common,
            "name": deny,
            "priority": DENY_PRIORITY,
            "source_ranges": ["0.0.0.0/0"],
            "denied": [{"I_p_protocol": "all"}],
        }
    )
    return bodies


def ensure(client: GCPClient, cluster_id: str, allowed_cidrs: Sequence[str], owner: str) -> str:
    """Create the cluster's rules (idempotent: a rule of ours that exists is kept when it says the
    same, replaced when ``allowed_cidrs`` changed). Returns the deny rule's name, the one that closes
    the nodes. ClusterBusyError when a rule of these names is not this owner's; ProviderError."""
    from google.cloud import compute_v1

    for body in rule_bodies(cluster_id, allowed_cidrs, owner):
        found = _get(client, body["name"])
        if found is not None:
            if parse_mark(found.description) != (cluster_id, owner):
                raise ClusterBusyError(
                    f"gcp: firewall rule {body['name']} exists and is not marked as "
                    f"{owner}'s rule of cluster {cluster_id}; nothing was bought"
                )
            if sorted(found.source_ranges) == sorted(body.get("source_ranges", [])):
                continue
            client.delete_firewall(body["name"])  # the deny rule stays: nothing opens meanwhile
        try:
            client.insert_firewall(compute_v1.Firewall(body))
        except ProviderAPIError as exc:
            if exc.status != 409:  # 409: a concurrent up of ours made it first
                raise
    return rule_names(cluster_id)[2]


def remove(client: GCPClient, cluster_id: str, owner: str) -> list[str]:
    """Delete this owner's rules of the cluster, the deny rule last; gone is success. Returns the
    names of rules kept because another owner's mark (or none) is on them."""
    kept = []
    for name in rule_names(cluster_id):
        found = _get(client, name)
        if found is None:
            continue
        if parse_mark(found.description) != (cluster_id, owner):
            kept.append(name)
            continue
        try:
            client.delete_firewall(name)
        except ProviderAPIError as exc:
            if not is_not_found(exc):
                raise
    return kept


def _get(client: GCPClient, name: str) -> Any:
    try:
        return client.get_firewall(name)
    except ProviderAPIError as exc:
        if is_not_found(exc):
            return None
        raise


__all__ = [
    "ALLOW_PRIORITY",
    "DENY_PRIORITY",
    "NETWORK",
    "ensure",
    "owner_mark",
    "parse_mark",
    "remove",
    "rule_bodies",
    "rule_names",
]
