"""The network of a multi-node EFA cluster on the direct AWS adapter: a cluster placement group,
a security group and the EFA interfaces of each launch (``efa.efa_layout``).

What ``EfaNetwork.ensure`` makes per (cluster, region), each named after and tagged with the
cluster (so a retried create finds it: adopted by tag, never made twice):

- a placement group ``provisioner-<cluster>``, strategy ``cluster`` (none for a Capacity Block:
  EC2 places a block's capacity itself, as ``stacks/aws.py`` does);
- a security group ``provisioner-<cluster>-efa`` in the default VPC allowing every protocol from
  members of the same group and nothing else from outside (EFA needs all traffic to and from its
  own group; egress is the new group's default, all). The adapter manages no SSH rules today:
  each interface also carries the VPC's ``default`` group, as every non-EFA instance does, so
  whatever the account allows there (its SSH rule, if any) still applies;
- the default subnet of the cluster's zone (the nodes' zone, the block's, else the first default
  subnet by zone name).

``interfaces`` is RunInstances' ``NetworkInterfaces`` for a type's layout: network card N, device
index 0 on card 0 else 1, ``efa`` / ``efa-only``, the subnet and both groups. EC2 gives no public
address to an instance launched with several interfaces, so ``attach_address`` gives each such
node an Elastic IP (tagged with the cluster and node) on its primary interface, as the stack does.

``release`` releases the Elastic IPs, then deletes the placement group and the security group once none of the cluster's
instances in the region is left (terminated ones do not count); gone already is success. The
security group is made first and deleted last, so it marks a cluster with EFA groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.errors import PlanError, ProviderAPIError
from provisioner.providers.aws.client import AWSClient, by_cluster, is_not_found
from provisioner.providers.aws.efa import efa_layout, has_efa
from provisioner.providers.base import CLUSTER_TAG, NodeSpec

log = logging.getLogger("provisioner.providers.aws")

PLACEMENT_STRATEGY = "cluster"
_IN_USE = ("[InvalidPlacementGroup.InUse]", "[DependencyViolation]", "[InvalidIPAddress.InUse]")


def group_name(cluster_id: str) -> str:
    """The cluster's placement group name (also its security group's, with ``-efa``)."""
    return f"provisioner-{cluster_id}"


@dataclass(frozen=True)
class EfaPlacement:
    """Where a region's EFA nodes launch: placement group (None for a Capacity Block), zone, subnet
    and the security groups of every interface."""

    placement_group: str | None
    zone: str
    subnet_id: str
    security_group_ids: tuple[str, ...]

    def interfaces(self, instance_type: str) -> list[dict[str, Any]]:
        """RunInstances' ``NetworkInterfaces`` for ``instance_type``'s EFA layout."""
        return [
            {
                "NetworkCardIndex": nic.network_card_index,
                "DeviceIndex": nic.device_index,
                "InterfaceType": nic.interface_type,
                "SubnetId": self.subnet_id,
                "Groups": list(self.security_group_ids),
                "DeleteOnTermination": True,
            }
            for nic in efa_layout(instance_type)
        ]


class EfaNetwork:
    """Placement groups and security groups of EFA clusters (see the module docstring)."""

    def __init__(self, client: AWSClient) -> None:
        self.client = client

    def ensure(
        self, cluster_id: str, region: str, zone: str | None, tags: dict[str, str], *, placement: bool
    ) -> EfaPlacement:
        """The cluster's EFA placement in ``region``: found by tag, else made. Raises PlanError when the
        region has no default VPC or no default subnet in ``zone``; ProviderError from EC2."""
        cluster_filter = by_cluster(cluster_id)
        vpcs = self.client.describe_vpcs(region, [{"Name": "is-default", "Values": ["true"]}])
        if not vpcs:
            raise PlanError(f"aws: no default VPC in {region}: EFA nodes launch into its default subnets")
        vpc_id = str(vpcs[0]["VpcId"])
        subnets = sorted(
            self.client.describe_subnets(
                region, [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default-for-az", "Values": ["true"]}]
            ),
            key=lambda s: str(s.get("AvailabilityZone", "")),
        )
        subnet = next((s for s in subnets if zone is None or s.get("AvailabilityZone") == zone), None)
        if subnet is None:
            raise PlanError(f"aws: no default subnet in {zone or region} for the EFA nodes")
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        mine = self.client.describe_security_groups(region, [*cluster_filter, {"Name": "vpc-id", "Values": [vpc_id]}])
        if mine:
            group_id = str(mine[0]["GroupId"])
        else:
            group_id = self.client.create_security_group(
                region,
                f"{group_name(cluster_id)}-efa",
                f"cluster {cluster_id}: all traffic within the group (EFA)",
                vpc_id,
                [*tag_list, {"Key": "Name", "Value": f"{group_name(cluster_id)}-efa"}],
            )
            self.client.authorize_security_group_ingress(
                region,
                group_id,
                [
                    {
                        "IpProtocol": "-1",
                        "UserIdGroupPairs": [{"GroupId": group_id, "Description": "EFA and the cluster"}],
                    }
                ],
            )
        default = self.client.describe_security_groups(
            region, [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "group-name", "Values": ["default"]}]
        )
        groups = (group_id, *(str(g["GroupId"]) for g in default[:1]))
        name = None
        if placement:
            name = group_name(cluster_id)
            if not self.client.describe_placement_groups(region, cluster_filter):
                self.client.create_placement_group(
                    region, name, PLACEMENT_STRATEGY, [*tag_list, {"Key": "Name", "Value": name}]
                )
        return EfaPlacement(name, str(subnet["AvailabilityZone"]), str(subnet["SubnetId"]), groups)

    def attach_address(self, region: str, instance: dict[str, Any], tags: dict[str, str], node_tag: str) -> str:
        """An Elastic IP on ``instance``'s primary interface (card 0, device 0): the node's address
        tagged ``tags`` is adopted, else one is allocated. Returns the allocation id. ProviderError
        from EC2 (the caller rolls the launch back)."""
        primary = next(
            (
                str(n["NetworkInterfaceId"])
                for n in instance.get("NetworkInterfaces", [])
                if n.get("Attachment", {}).get("DeviceIndex") == 0
                and n.get("Attachment", {}).get("NetworkCardIndex", 0) == 0
            ),
            None,
        )
        if primary is None:
            raise ProviderAPIError(
                "aws", 0, f"instance {instance.get('InstanceId')} has no primary interface to give an address to"
            )
        mine = self.client.describe_addresses(
            region, [{"Name": f"tag:{k}", "Values": [tags[k]]} for k in (CLUSTER_TAG, node_tag)]
        )
        if mine and mine[0].get("NetworkInterfaceId") == primary:
            return str(mine[0]["AllocationId"])
        allocation = (
            str(mine[0]["AllocationId"])
            if mine
            else self.client.allocate_address(region, [{"Key": k, "Value": v} for k, v in sorted(tags.items())])
        )
        self.client.associate_address(region, allocation, primary)
        return allocation

    def ensure_ssh_group(self, cluster_id: str, region: str, allowed_cidrs: Sequence[str], tags: dict[str, str]) -> str:
        """The cluster's own security group in the region's default VPC (``provisioner-<cluster>-ssh``):
        tcp/22 from ``allowed_cidrs`` (IPv4 and IPv6; none: SSH from nowhere outside), all traffic
        from members of the group, nothing else. Found by tag and name, else made; returns its id. The
        direct engine's twin of the stack's group. PlanError without a default VPC; ProviderError."""
        name = f"{group_name(cluster_id)}-ssh"
        mine = self.client.describe_security_groups(
            region, [*by_cluster(cluster_id), {"Name": "group-name", "Values": [name]}]
        )
        if mine:
            return str(mine[0]["GroupId"])
        vpcs = self.client.describe_vpcs(region, [{"Name": "is-default", "Values": ["true"]}])
        if not vpcs:
            raise PlanError(f"aws: no default VPC in {region} for the cluster's security group")
        tag_list = [{"Key": k, "Value": v} for k, v in sorted({**tags, "Name": name}.items())]
        group_id = self.client.create_security_group(
            region,
            name,
            f"cluster {cluster_id}: SSH from access.allowed_cidrs, all within the group",
            str(vpcs[0]["VpcId"]),
            tag_list,
        )
        v4 = [c for c in allowed_cidrs if ":" not in c]
        v6 = [c for c in allowed_cidrs if ":" in c]
        permissions: list[dict[str, Any]] = [
            {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id, "Description": "the cluster"}]}
        ]
        if v4 or v6:
            permissions.append(
                {
                    "IpProtocol": "tcp",
                    "FromPort": 22,
                    "ToPort": 22,
                    "IpRanges": [{"CidrIp": c, "Description": "SSH from access.allowed_cidrs"} for c in v4],
                    "Ipv6Ranges": [{"CidrIpv6": c, "Description": "SSH from access.allowed_cidrs"} for c in v6],
                }
            )
        self.client.authorize_security_group_ingress(region, group_id, permissions)
        return group_id

    def release(self, cluster_id: str, region: str, remaining: Callable[[], int]) -> list[str]:
        """Release the cluster's Elastic IPs, then delete its placement group and security group in
        ``region``, when ``remaining()``
        (its instances not yet terminated) is 0. Returns what is left (names); gone is success.
        Idempotent; a cluster without its security group (none made, or released) costs one listing."""
        cluster_filter = by_cluster(cluster_id)
        security = self.client.describe_security_groups(region, cluster_filter)
        if not security:  # made first and deleted last: without it the cluster has no EFA groups left
            return []
        placement = self.client.describe_placement_groups(region, cluster_filter)
        if remaining():
            return [str(g.get("GroupName")) for g in placement] + [str(g.get("GroupId")) for g in security]
        left: list[str] = []
        addresses = self.client.describe_addresses(region, cluster_filter)
        steps: list[tuple[list[dict[str, Any]], Callable[[str, str], None], str]] = [
            (addresses, self.client.release_address, "AllocationId"),
            (placement, self.client.delete_placement_group, "GroupName"),
            (security, self.client.delete_security_group, "GroupId"),
        ]
        for what, delete, key in steps:
            if left and what is security:  # kept while anything else is: it marks what is left to release
                left += [str(g["GroupId"]) for g in security]
                break
            for group in what:
                try:
                    delete(region, str(group[key]))
                except ProviderAPIError as exc:
                    if is_not_found(exc):
                        continue
                    if not any(code in exc.detail for code in _IN_USE):
                        raise
                    log.warning("aws: %s of cluster %s is still in use: %s", group[key], cluster_id, exc.detail)
                    left.append(str(group[key]))
        return left


def efa_zones_of(nodes: Sequence[NodeSpec]) -> dict[str, str | None]:
    """{region: zone or None} where the nodes launch with EFA (several nodes, a type with an EFA
    layout). PlanError, before any request, when one region's EFA nodes name several zones: a
    cluster placement group lives in one."""
    if len(nodes) < 2:
        return {}
    zones: dict[str, set[str]] = {}
    for spec in nodes:
        if has_efa(spec.instance_type):
            zones.setdefault(spec.region, set()).update({spec.zone} if spec.zone else set())
    for region, named in zones.items():
        if len(named) > 1:
            raise PlanError(
                f"aws: the EFA nodes in {region} name zones {', '.join(sorted(named))}; a cluster "
                "placement group is in one zone: nothing was bought"
            )
    return {region: min(named) if named else None for region, named in zones.items()}


__all__ = ["PLACEMENT_STRATEGY", "EfaNetwork", "EfaPlacement", "efa_zones_of", "group_name"]
