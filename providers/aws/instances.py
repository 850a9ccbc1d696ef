"""A cluster's EC2 instances on the direct AWS adapter: found by the cluster tag, read as ``Node``s
(and their network topology), terminated. Shared by ``provider.AWSProvider`` and ``launch.RunLauncher``.

Statuses: pending -> pending, running -> running, shutting-down/stopping/stopped -> stopping,
terminated -> terminated. Terminating a gone instance is success.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from provisioner.errors import ProviderAPIError
from provisioner.providers.addresses import ip_or_none
from provisioner.providers.aws import billing
from provisioner.providers.aws.client import AWSClient, by_cluster, is_not_found
from provisioner.providers.aws.models import tag_map
from provisioner.providers.base import (
    CLUSTER_TAG,
    EXPIRES_TAG,
    LEASE_TAG,
    NODE_TAG,
    OWNER_TAG,
    RENEWED_TAG,
    RUN_TAG,
    Node,
    NodeStatus,
    OwnedNode,
    expiry_label,
    parse_expiry,
)

STATUS = {
    "pending": NodeStatus.PENDING,
    "running": NodeStatus.RUNNING,
    "shutting-down": NodeStatus.STOPPING,
    "stopping": NodeStatus.STOPPING,
    "stopped": NodeStatus.STOPPING,
    "terminated": NodeStatus.TERMINATED,
}
"""EC2 instance state -> NodeStatus; an unknown state reads as pending."""
LIVE = ["pending", "running", "stopping", "stopped"]
"""The instance states that still hold (or may again hold) the instance."""


def members(client: AWSClient, cluster_id: str, region: str, *, live: bool = False) -> list[dict[str, Any]]:
    """The instances tagged with the cluster in ``region`` (only the ``LIVE`` ones with ``live``). Read-only."""
    filters: list[dict[str, Any]] = by_cluster(cluster_id)
    if live:
        filters.append({"Name": "instance-state-name", "Values": LIVE})
    return client.describe_instances(region, filters)


def terminate(client: AWSClient, region: str, ids: list[str]) -> None:
    """Terminate ``ids`` in ``region``; when EC2 says one is not found, the survivors are terminated
    again, so already gone is success. Does not wait. ProviderError otherwise."""
    try:
        client.terminate_instances(region, ids)
    except ProviderAPIError as exc:
        if not is_not_found(exc):
            raise
        alive = {
            str(i["InstanceId"])
            for i in client.describe_instances(
                region, [{"Name": "instance-id", "Values": ids}, {"Name": "instance-state-name", "Values": LIVE}]
            )
        }
        survivors = [i for i in ids if i in alive]
        if survivors:
            client.terminate_instances(region, survivors)


def to_node(provider: str, cluster_id: str, region: str, instance: dict[str, Any]) -> Node:
    """One DescribeInstances item as a ``Node`` (name, owner and lease from its tags)."""
    state = str(instance.get("State", {}).get("Name", ""))
    tags = tag_map(instance)
    return Node(
        provider=provider,
        id=str(instance["InstanceId"]),
        name=tags.get(NODE_TAG, ""),
        cluster_id=cluster_id,
        status=STATUS.get(state, NodeStatus.PENDING),
        instance_type=str(instance.get("InstanceType", "")),
        region=region,
        public_ip=ip_or_none(instance.get("PublicIpAddress")),
        private_ip=ip_or_none(instance.get("PrivateIpAddress")),
        provider_state=state,
        launched_at=billing.launched_at(instance),
        ended_at=billing.ended_at(instance),
        owner=tags.get(OWNER_TAG),
        lease=tags.get(LEASE_TAG),
        renewed_at=parse_expiry(tags.get(RENEWED_TAG)),
        run=tags.get(RUN_TAG),
    )


def renew(client: AWSClient, nodes: Sequence[Node], lease: str, owner: str, at: dt.datetime | None) -> int:
    """Tag the live ``nodes`` carrying ``lease`` and ``owner`` with RENEWED_TAG ``at`` (CreateTags,
    one call per region), or remove that tag (DeleteTags) when ``at`` is None. How many were tagged."""
    by_region: dict[str, list[str]] = {}
    for node in nodes:
        if node.lease == lease and node.owner == owner and node.status != NodeStatus.TERMINATED:
            by_region.setdefault(node.region, []).append(node.id)
    for region, ids in sorted(by_region.items()):
        if at is None:
            client.delete_tags(region, ids, [RENEWED_TAG])
        else:
            client.create_tags(region, ids, {RENEWED_TAG: expiry_label(at)})
    return sum(len(ids) for ids in by_region.values())


def owned(client: AWSClient, provider: str, regions: Sequence[str]) -> list[OwnedNode]:
    """Every live instance carrying the cluster tag in ``regions``, with owner and expiry. Read-only."""
    found = []
    for region in regions:
        for instance in client.describe_instances(
            region, [{"Name": "tag-key", "Values": [CLUSTER_TAG]}, {"Name": "instance-state-name", "Values": LIVE}]
        ):
            tags = tag_map(instance)
            node = to_node(provider, tags[CLUSTER_TAG], region, instance)
            found.append(OwnedNode(node, tags.get(OWNER_TAG), parse_expiry(tags.get(EXPIRES_TAG))))
    return found


def topology(client: AWSClient, cluster_id: str, regions: Sequence[str]) -> dict[str, list[str]]:
    """{node name: [network node, ...]} (outermost first) of the cluster's running instances in
    ``regions`` from DescribeInstanceTopology; instances EC2 gives none for are left out. Read-only."""
    found: dict[str, list[str]] = {}
    for region in regions:
        names = {
            str(i["InstanceId"]): tag_map(i).get(NODE_TAG, "")
            for i in members(client, cluster_id, region)
            if i.get("State", {}).get("Name") == "running"
        }
        if not names:
            continue
        for item in client.describe_instance_topology(region, sorted(names)):
            name = names.get(str(item.get("InstanceId")), "")
            layers = [str(n) for n in item.get("NetworkNodes", [])]
            if name and layers:
                found[name] = layers
    return found


__all__ = ["LIVE", "STATUS", "members", "owned", "renew", "terminate", "to_node", "topology"]
