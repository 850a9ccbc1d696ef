"""How the AWS adapter launches a node: its RunInstances parameters (tags, IMDSv2, user data, key
pair, Capacity Block or spot, security groups, EFA interfaces) and the ``orchestrate`` launcher of
one ``create_nodes`` call (one RunInstances per node, in the nodes' regions).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from provisioner.errors import PlanError, ProviderError
from provisioner.providers.aws import instances
from provisioner.providers.aws.efa import has_efa
from provisioner.providers.aws.models import tag_map
from provisioner.providers.base import (
    CLUSTER_TAG,
    LEASE_TAG,
    NODE_TAG,
    ROLE_TAG,
    RUN_TAG,
    NodeSpec,
    expiry_text,
    owner_id,
)
from provisioner.providers.orchestrate import Launcher, Member

if TYPE_CHECKING:
    from provisioner.providers.aws.provider import AWSProvider

log = logging.getLogger("provisioner.providers.aws")

OWNER_TAG = "provisioner-owner"
EXPIRES_TAG = "provisioner-expires"


def key_name(public_key: str) -> str:
    """Stable key-pair name derived from the key material, reused across runs."""
    material = " ".join(public_key.split()[:2])
    return f"provisioner-{hashlib.sha1(material.encode()).hexdigest()[:16]}"


EC2_USER_DATA_MAX_BYTES = 16 * 1024
"""RunInstances refuses user data over 16 KiB (before base64); cloud-init reads gzip natively."""


def ec2_user_data(text: str) -> str | bytes:
    """``text`` as RunInstances takes it: as is when it fits, else gzip-compressed (mtime 0, so a
    retried create sends the same bytes). PlanError before any purchase when even that is too big."""
    raw = text.encode("utf-8")
    if len(raw) <= EC2_USER_DATA_MAX_BYTES:
        return text
    packed = gzip.compress(raw, compresslevel=9, mtime=0)
    if len(packed) > EC2_USER_DATA_MAX_BYTES:
        raise PlanError(
            f"user data is {len(packed)} bytes gzip-compressed; EC2 accepts at most {EC2_USER_DATA_MAX_BYTES}"
        )
    return packed


METADATA_OPTIONS: dict[str, str | int] = {
    "HttpEndpoint": "enabled",
    "HttpTokens": "required",
    "HttpPutResponseHopLimit": 1,
}
"""Every instance: IMDSv2 only (a session token, so no SSRF can GET user data or credentials) and a
hop limit of 1 (a container or pod, one hop further, gets no token). The stack sets the same
(``stacks/aws.py``); the node firewall also drops non-root traffic to the address."""


def node_tags(adapter: AWSProvider, cluster_id: str, spec: NodeSpec, *, node: bool = True) -> dict[str, str]:
    """The node's tags (cluster, node, Name, owner, expiry and its own); ``node=False``: those of
    the cluster's shared resources (no node tag nor Name)."""
    tags = {**{k: v for k, v in spec.tags.items()}, CLUSTER_TAG: cluster_id}
    if node:
        tags.update({NODE_TAG: spec.name, "Name": f"{cluster_id}-{spec.name}"})
    tags.setdefault(OWNER_TAG, spec.owner or adapter.owner or owner_id())
    if node and spec.role is not None:
        tags.setdefault(ROLE_TAG, spec.role)
    if spec.expires_at is not None:
        tags[EXPIRES_TAG] = expiry_text(spec.expires_at)
    if spec.lease:
        tags[LEASE_TAG] = spec.lease
    if spec.run:
        tags[RUN_TAG] = spec.run
    return tags


def run_params(adapter: AWSProvider, cluster_id: str, spec: NodeSpec) -> dict[str, Any]:
    """RunInstances' parameters for one node: tags, IMDSv2, user data, key pair, Capacity Block, spot,
    the cluster's security group and, on EFA types, its interfaces and placement group."""
    tags = node_tags(adapter, cluster_id, spec)
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    params: dict[str, Any] = {
        "ImageId": adapter.images.for_node(spec),
        "InstanceType": spec.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": dict(METADATA_OPTIONS),
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
        ],
    }
    if spec.zone:
        params["Placement"] = {"AvailabilityZone": spec.zone}
    if spec.user_data:
        params["UserData"] = ec2_user_data(spec.user_data)  # boto3 base64-encodes it
    if spec.ssh_public_key:
        params["KeyName"] = adapter.ensure_ssh_key(key_name(spec.ssh_public_key), spec.ssh_public_key, spec.region)
    block = adapter._block_of.get(cluster_id) if spec.capacity_block_hours else None
    if block is not None:  # launched into the block bought for the cluster, in its zone
        params["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        params["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId": block.reservation_id}
        }
        params["Placement"] = {"AvailabilityZone": block.zone}
    elif spec.spot:
        options: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
        if spec.bid_usd_per_hour is not None:
            options["MaxPrice"] = str(spec.bid_usd_per_hour)
        params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
    efa = adapter._efa.get((cluster_id, spec.region))
    ssh_group = adapter._ssh_groups.get((cluster_id, spec.region))
    if ssh_group is not None and not (efa is not None and has_efa(spec.instance_type)):
        params["SecurityGroupIds"] = [ssh_group]  # not the VPC's default group (the account's rules)
    if efa is not None and has_efa(spec.instance_type):
        params["NetworkInterfaces"] = efa.interfaces(spec.instance_type)
        if ssh_group is not None:  # the EFA group and the cluster's, not the VPC's default
            for nic in params["NetworkInterfaces"]:
                nic["Groups"] = [efa.security_group_ids[0], ssh_group]
        params["Placement"] = {
            "AvailabilityZone": efa.zone,
            **({"GroupName": efa.placement_group} if efa.placement_group else {}),
        }
        params["TagSpecifications"].append({"ResourceType": "network-interface", "Tags": tag_list})
    return params


class RunLauncher(Launcher):
    """One ``create_nodes`` call: one RunInstances per node, in the nodes' regions."""

    def __init__(self, provider: AWSProvider, cluster_id: str, nodes: Sequence[NodeSpec]) -> None:
        super().__init__(provider.name, cluster_id)
        self.adapter = provider
        self.owner = provider.owner or self.owner
        self.regions = sorted({n.region for n in nodes})
        self.region_of: dict[str, str] = {}

    def members(self) -> list[Member]:
        found = []
        for region in self.regions:
            for i in instances.members(self.adapter.client, self.cluster_id, region, live=True):
                self.region_of[str(i["InstanceId"])] = region
                tags = tag_map(i)
                found.append(
                    Member(
                        str(i["InstanceId"]),
                        tags.get(NODE_TAG),
                        str(i.get("InstanceType", "")),
                        region,
                        tags.get(OWNER_TAG),
                        tags.get(LEASE_TAG),
                        run=tags.get(RUN_TAG),
                    )
                )
        return found

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        (spec,) = batch
        params = run_params(self.adapter, self.cluster_id, spec)
        (instance,) = self.adapter.client.run_instances(spec.region, params)
        self.region_of[str(instance["InstanceId"])] = spec.region
        if len(params.get("NetworkInterfaces", [])) > 1:  # EC2 gives such an instance no public address
            self.adapter.network.attach_address(
                spec.region, instance, node_tags(self.adapter, self.cluster_id, spec), NODE_TAG
            )
        return [str(instance["InstanceId"])]

    def terminate(self, ids: Sequence[str]) -> list[str]:
        left: list[str] = []
        for region in sorted({self.region_of.get(i, "") for i in ids}):
            batch = [i for i in ids if self.region_of.get(i, "") == region]
            try:
                instances.terminate(self.adapter.client, region, batch)
            except ProviderError as cleanup:
                log.error("aws: rollback failed in %s: %s", region, cleanup.message)
                left += batch
        return left

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        return f"1 x {spec.instance_type} in {spec.region}{f' ({spec.zone})' if spec.zone else ''}"


__all__ = [
    "EC2_USER_DATA_MAX_BYTES",
    "EXPIRES_TAG",
    "METADATA_OPTIONS",
    "OWNER_TAG",
    "RunLauncher",
    "ec2_user_data",
    "key_name",
    "node_tags",
    "run_params",
]
