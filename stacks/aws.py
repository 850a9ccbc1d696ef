"""AWS resources of a ``GpuCluster`` (pulumi_aws), children of the component.

What ``build_aws`` creates, all through an explicit provider for the plan's region and all
tagged with cluster id, owner and expiry:

- a VPC (10.42.0.0/16), an internet gateway, one subnet in the plan's zone (AWS picks one
  when the plan has none), a route table with the default route;
- a security group: SSH (tcp/22) from ``access.allowed_cidrs`` and nothing else from
  outside; every protocol from members of the same group (Slurm, munge, k3s, NFS, EFA,
  which needs all traffic to and from its own group); all egress;
- a cluster placement group when there is more than one node (not for a Capacity Block);
- for a Capacity Block plan, the launch template's market type ``capacity-block`` and its
  capacity reservation target ``capacity_reservation_id`` (a block bought before ``pulumi up``:
  pulumi_aws's ``CapacityBlockReservation`` would buy a non-refundable block from an offering id
  that expires within minutes, and a replaced resource would buy a second one, so the stack
  never buys: ``provisioner.stacks.model.cluster_args`` refuses a block plan without the id);
- a launch template: the GPU image (config ``provisioner:image`` or the newest Amazon
  "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)"), the EFA interface layout
  of the type (``efa_layout``, from ``provisioner.providers.aws.efa``, shared with the direct
  adapter), ``instance_initiated_shutdown_behavior: terminate`` so the
  bootstrap's TTL shutdown ends the bill, one-time spot with terminate when the plan is spot,
  IMDSv2 only, tags on the instance, its volumes and interfaces;
- one instance per ``Plan.nodes`` entry (its role's user data, gzip-compressed to fit EC2's
  16 KiB, a Pulumi secret) and an
  Elastic IP on its primary interface (AWS assigns no public address to an instance
  launched with several interfaces);
- FSx for Lustre (SCRATCH_2) when ``storage.shared.kind`` is ``managed``; its mount target
  reaches the nodes' rendered mount script through a boot hook (``with_shared_fs_target``).

The instance-store NVMe RAID0 is built by the bootstrap (``cloud-init/nvme-raid.sh``).
"""

from __future__ import annotations

import base64
import gzip
import math

import pulumi
import pulumi_aws as aws

from provisioner.providers.aws.efa import EFA_INTERFACES, Interface, efa_layout
from provisioner.providers.aws.provider import METADATA_OPTIONS
from provisioner.providers.base import NODE_TAG, ROLE_TAG
from provisioner.stacks.built import Built, BuiltNode
from provisioner.stacks.model import ClusterArgs, with_shared_fs_target

VPC_CIDR = "10.42.0.0/16"
SUBNET_CIDR = "10.42.0.0/20"
DEFAULT_IMAGE_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"
"""The image family the AWS adapter also boots (owner ``amazon``, newest first)."""
ROOT_VOLUME_GIB = 200
USER_DATA_MAX_BYTES = 16 * 1024
FSX_STEP_GIB = 2400  # SCRATCH_2 sizes: 1200, then multiples of 2400 GiB


def compressed_user_data(text: str) -> str:
    """``text`` gzip-compressed and base64-encoded, for ``user_data_base64``. Pure, deterministic.

    EC2 takes at most 16 KiB of user data before base64, and a rendered Slurm or k3s head
    is 20-30 KiB; cloud-init recognises gzip and inflates it. Raises ValueError when even
    the compressed form is too large.
    """
    raw = gzip.compress(text.encode(), mtime=0)
    if len(raw) > USER_DATA_MAX_BYTES:
        raise ValueError(f"user data is {len(raw)} bytes gzip-compressed; EC2 takes at most {USER_DATA_MAX_BYTES}")
    return base64.b64encode(raw).decode("ascii")


def fsx_capacity_gib(size_gib: int) -> int:
    """The smallest FSx for Lustre SCRATCH_2 capacity holding ``size_gib``."""
    return 1200 if size_gib <= 1200 else FSX_STEP_GIB * math.ceil(size_gib / FSX_STEP_GIB)


def _image(args: ClusterArgs, opts: pulumi.InvokeOptions) -> pulumi.Input[str]:
    if args.image:
        return args.image
    ami = aws.ec2.get_ami_output(
        most_recent=True,
        owners=["amazon"],
        filters=[
            aws.ec2.GetAmiFilterArgs(name="name", values=[DEFAULT_IMAGE_NAME]),
            aws.ec2.GetAmiFilterArgs(name="architecture", values=["x86_64"]),
        ],
        opts=opts,
    )
    ami_id: pulumi.Output[str] = ami.id  # pulumi_aws is read as Any by mypy (pyproject: follow_imports skip)
    return ami_id


def _ssh_rules(cidrs: tuple[str, ...]) -> list[aws.ec2.SecurityGroupIngressArgs]:
    v4 = [c for c in cidrs if ":" not in c]
    v6 = [c for c in cidrs if ":" in c]
    rules = []
    if v4:
        rules.append(
            aws.ec2.SecurityGroupIngressArgs(
                description="SSH from access.allowed_cidrs", protocol="tcp", from_port=22, to_port=22, cidr_blocks=v4
            )
        )
    if v6:
        rules.append(
            aws.ec2.SecurityGroupIngressArgs(
                description="SSH from access.allowed_cidrs (IPv6)",
                protocol="tcp",
                from_port=22,
                to_port=22,
                ipv6_cidr_blocks=v6,
            )
        )
    return rules


def build_aws(parent: pulumi.Resource, args: ClusterArgs, user_data: dict[str, pulumi.Output[str]]) -> Built:
    """Create the cluster's AWS resources under ``parent``. ``user_data``: node name -> secret."""
    cid = args.cluster_id
    # An explicit provider: the plan's region wins over whatever aws:region the stack has.
    regional = aws.Provider(f"{cid}-aws", region=args.region, opts=pulumi.ResourceOptions(parent=parent))
    child = pulumi.ResourceOptions(parent=parent, provider=regional)
    tags = args.tags()

    def named(suffix: str) -> dict[str, str]:
        return {**tags, "Name": f"{cid}-{suffix}"}

    vpc = aws.ec2.Vpc(
        f"{cid}-vpc",
        cidr_block=VPC_CIDR,
        enable_dns_hostnames=True,
        enable_dns_support=True,
        tags=named("vpc"),
        opts=child,
    )
    igw = aws.ec2.InternetGateway(f"{cid}-igw", vpc_id=vpc.id, tags=named("igw"), opts=child)
    subnet = aws.ec2.Subnet(
        f"{cid}-subnet",
        vpc_id=vpc.id,
        cidr_block=SUBNET_CIDR,
        availability_zone=args.zone,
        tags=named("subnet"),
        opts=child,
    )
    routes = aws.ec2.RouteTable(
        f"{cid}-routes",
        vpc_id=vpc.id,
        tags=named("routes"),
        routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
        opts=child,
    )
    aws.ec2.RouteTableAssociation(f"{cid}-routes-assoc", route_table_id=routes.id, subnet_id=subnet.id, opts=child)
    group = aws.ec2.SecurityGroup(
        f"{cid}-sg",
        vpc_id=vpc.id,
        description=f"cluster {cid}: SSH from allowed CIDRs, all within the group",
        ingress=[
            *_ssh_rules(args.allowed_cidrs),
            aws.ec2.SecurityGroupIngressArgs(
                description="all traffic within the cluster", protocol="-1", from_port=0, to_port=0, self=True
            ),
        ],
        egress=[
            aws.ec2.SecurityGroupEgressArgs(
                description="all egress",
                protocol="-1",
                from_port=0,
                to_port=0,
                cidr_blocks=["0.0.0.0/0"],
                ipv6_cidr_blocks=["::/0"],
            )
        ],
        tags=named("sg"),
        opts=child,
    )
    placement = None
    block = args.capacity_reservation_id
    if len(args.nodes) > 1 and block is None:  # a Capacity Block's capacity is placed by EC2 already
        placement = aws.ec2.PlacementGroup(f"{cid}-pg", strategy="cluster", tags=named("pg"), opts=child)
    key = None
    if args.ssh_public_key:
        key = aws.ec2.KeyPair(f"{cid}-key", public_key=args.ssh_public_key, tags=named("key"), opts=child)
    template = aws.ec2.LaunchTemplate(
        f"{cid}-lt",
        image_id=_image(args, pulumi.InvokeOptions(parent=parent, provider=regional)),
        instance_type=args.instance_type,
        key_name=key.key_name if key is not None else None,
        instance_initiated_shutdown_behavior="terminate",
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement.name, availability_zone=args.zone)
        if placement is not None
        else None,
        network_interfaces=[
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=nic.network_card_index,
                device_index=nic.device_index,
                interface_type=nic.interface_type,
                subnet_id=subnet.id,
                security_groups=[group.id],
                delete_on_termination="true",
            )
            for nic in efa_layout(args.instance_type)
        ],
        instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        if block is not None
        else aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="spot",
            spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(
                instance_interruption_behavior="terminate", spot_instance_type="one-time"
            ),
        )
        if args.spot
        else None,
        capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=block
            )
        )
        if block is not None
        else None,
        # The direct adapter's METADATA_OPTIONS: IMDSv2 only, hop limit 1 (no token for a container or pod).
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint=str(METADATA_OPTIONS["HttpEndpoint"]),
            http_tokens=str(METADATA_OPTIONS["HttpTokens"]),
            http_put_response_hop_limit=int(METADATA_OPTIONS["HttpPutResponseHopLimit"]),
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=ROOT_VOLUME_GIB, volume_type="gp3", delete_on_termination="true"
                ),
            )
        ],
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=named("lt"),
        opts=child,
    )
    shared = None
    if args.shared_fs is not None:
        lustre = aws.fsx.LustreFileSystem(
            f"{cid}-fsx",
            deployment_type="SCRATCH_2",
            storage_capacity=fsx_capacity_gib(args.shared_fs.size_gib),
            subnet_ids=subnet.id,
            security_group_ids=[group.id],
            tags=named("fsx"),
            opts=child,
        )
        mount_path = args.shared_fs.mount_path
        shared = pulumi.Output.all(lustre.dns_name, lustre.mount_name).apply(
            lambda v: {"kind": "fsx-lustre", "target": f"{v[0]}@tcp:/{v[1]}", "mount_path": mount_path}
        )
        target = shared.apply(lambda fs: fs["target"])
        user_data = {
            name: pulumi.Output.all(text, target).apply(lambda v: with_shared_fs_target(v[0], v[1]))
            for name, text in user_data.items()
        }
    built: list[BuiltNode] = []
    for node in args.nodes:
        instance = aws.ec2.Instance(
            node.name,
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            instance_initiated_shutdown_behavior="terminate",
            user_data_base64=user_data[node.name].apply(compressed_user_data) if node.name in user_data else None,
            tags={
                **tags,
                NODE_TAG: node.name,
                "Name": node.name,
                ROLE_TAG: node.role,
                **args.lease_tags(),
                **args.run_tags(),
            },
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[routes, igw], ignore_changes=args.kept_marks("tags"))
            ),
        )
        address = aws.ec2.Eip(
            f"{node.name}-eip",
            domain="vpc",
            network_interface=instance.primary_network_interface_id,
            tags=named(f"{node.name}-eip"),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[igw])),
        )
        built.append(BuiltNode(node.name, node.role, address.public_ip, instance.private_ip, instance.id))
    return Built(built, shared)


__all__ = [
    "EFA_INTERFACES",
    "USER_DATA_MAX_BYTES",
    "Interface",
    "build_aws",
    "compressed_user_data",
    "efa_layout",
    "fsx_capacity_gib",
]
