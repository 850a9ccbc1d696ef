"""GCP resources of a ``GpuCluster`` (pulumi_gcp), children of the component.

What ``build_gcp`` creates, all through an explicit provider for the plan's region and zone
(project from ``gcp:project`` or the credentials), labelled with cluster id, owner and expiry:

- the cluster VPC (custom mode) and a subnet in the plan's region; firewall rules: SSH
  (tcp/22) from ``access.allowed_cidrs`` to the cluster's network tag and nothing else from
  outside, every protocol between instances carrying the tag;
- the extra networks the machine type's NIC layout needs (``nic_layout``): GPUDirect-TCPX
  (a3-high, 4) and -TCPXO (a3-mega, 8) data VPCs for extra gVNICs; for a3-ultra and a4 a
  second host gVNIC VPC plus one RoCE VPC (network profile ``<zone>-vpc-roce``) with a subnet
  per MRDMA NIC (8). Extra gVNIC VPCs admit only their own subnet; none has an external path;
- a compact placement policy (``COLLOCATED``) when there is more than one node;
- one instance per ``Plan.nodes`` entry: gVNIC primary with an external address, the extra
  NICs, bundled local SSDs as NVMe scratch disks (``LOCAL_SSDS``; the bootstrap builds the
  RAID0), ``user-data`` metadata (a Pulumi secret), spot / flex-start / standard provisioning,
  ``max_run_duration`` = the TTL with ``instance_termination_action: DELETE`` so the TTL
  ends the bill even if the node hangs;
- Filestore (BASIC_SSD) when ``storage.shared.kind`` is ``managed``; its export reaches the
  nodes' rendered mount script through a boot hook (``with_shared_fs_target``).

The A2/A3/A4/G2 machine types carry their GPUs, so no ``guest_accelerators`` are set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from provisioner.providers.base import NODE_TAG, ROLE_TAG
from provisioner.stacks.built import Built, BuiltNode
from provisioner.stacks.model import ClusterArgs, with_shared_fs_target

SUBNET_CIDR = "10.42.0.0/20"
DEFAULT_IMAGE = "ubuntu-os-accelerator-images/ubuntu-accelerator-2204-amd64-with-nvidia-570"
"""Ubuntu 22.04 with the NVIDIA driver (project/family); override with ``provisioner:image``."""
BOOT_DISK_GIB = 200
LOCAL_SSD_GIB = 375
LOCAL_SSDS = {"a2-ultragpu-8g": 8, "a3-highgpu-8g": 16, "a3-megagpu-8g": 16, "a3-ultragpu-8g": 32, "a4-highgpu-8g": 32}
"""Local SSDs (375 GiB each) bundled with the machine type; they must be listed on create."""
FILESTORE_MIN_GIB = 2560  # BASIC_SSD
DATA_MTU = 8244  # GPUDirect-TCPX/TCPXO data networks


@dataclass(frozen=True)
class Nic:
    """One network interface: its NIC type and which network it joins ("cluster" is the main VPC)."""

    nic_type: str  # GVNIC or MRDMA
    network: str  # "cluster", "data<i>", "host2", "rdma"
    subnet: int = 0  # subnet index inside an RDMA network


def nic_layout(machine_type: str) -> tuple[Nic, ...]:
    """The NICs a node of ``machine_type`` needs, primary first. Pure.

    a3-highgpu-8g: gVNIC + 4 GPUDirect-TCPX gVNICs; a3-megagpu-8g: gVNIC + 8 GPUDirect-TCPXO
    gVNICs, each in its own VPC; a3-ultragpu-8g and a4-highgpu-8g: two host gVNICs in two VPCs
    and 8 MRDMA NICs in one RoCE VPC, one subnet each. Anything else: one gVNIC.
    """
    primary = Nic("GVNIC", "cluster")
    if machine_type == "a3-highgpu-8g":
        return (primary, *(Nic("GVNIC", f"data{i}") for i in range(4)))
    if machine_type == "a3-megagpu-8g":
        return (primary, *(Nic("GVNIC", f"data{i}") for i in range(8)))
    if machine_type.startswith(("a3-ultragpu-", "a4-highgpu-")):
        return (primary, Nic("GVNIC", "host2"), *(Nic("MRDMA", "rdma", i) for i in range(8)))
    return (primary,)


def provisioning_model(args: ClusterArgs) -> str:
    if args.flex_start:
        return "FLEX_START"
    return "SPOT" if args.spot else "STANDARD"


def _scheduling(args: ClusterArgs) -> gcp.compute.InstanceSchedulingArgs:
    model = provisioning_model(args)
    ttl = args.ttl_seconds
    if model == "FLEX_START" and ttl is None:
        ttl = 7 * 24 * 3600  # flex-start VMs must have a run duration; 7 days is the longest allowed
    ends = model != "STANDARD" or ttl is not None
    return gcp.compute.InstanceSchedulingArgs(
        provisioning_model=model,
        preemptible=model == "SPOT",
        automatic_restart=False,
        on_host_maintenance="TERMINATE",
        instance_termination_action="DELETE" if ends else None,
        max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=ttl) if ttl else None,
    )


def _extra_networks(
    args: ClusterArgs, layout: tuple[Nic, ...], child: pulumi.ResourceOptions, project: pulumi.Input[str]
) -> dict[tuple[str, int], tuple[pulumi.Output[str], pulumi.Output[str]]]:
    """Create every network but the cluster VPC: (network, subnet index) -> (network id, subnet id)."""
    cid, desc = args.cluster_id, args.description()
    out: dict[tuple[str, int], tuple[pulumi.Output[str], pulumi.Output[str]]] = {}
    for index, name in enumerate(sorted({nic.network for nic in layout} - {"cluster", "rdma"})):
        cidr = f"10.{43 + index}.0.0/20"
        net = gcp.compute.Network(
            f"{cid}-{name}", auto_create_subnetworks=False, mtu=DATA_MTU, description=desc, opts=child
        )
        sub = gcp.compute.Subnetwork(
            f"{cid}-{name}-subnet", network=net.id, region=args.region, ip_cidr_range=cidr, description=desc, opts=child
        )
        gcp.compute.Firewall(
            f"{cid}-{name}-internal",
            network=net.name,
            direction="INGRESS",
            source_ranges=[cidr],
            allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
            description=desc,
            opts=child,
        )
        out[(name, 0)] = (net.id, sub.id)
    rdma = [nic for nic in layout if nic.network == "rdma"]
    if rdma:
        profile = pulumi.Output.concat("projects/", project, f"/global/networkProfiles/{args.zone}-vpc-roce")
        net = gcp.compute.Network(
            f"{cid}-rdma",
            auto_create_subnetworks=False,
            mtu=DATA_MTU,
            network_profile=profile,
            description=desc,
            opts=child,
        )
        for nic in rdma:
            sub = gcp.compute.Subnetwork(
                f"{cid}-rdma-subnet-{nic.subnet}",
                network=net.id,
                region=args.region,
                ip_cidr_range=f"10.60.{nic.subnet}.0/24",
                description=desc,
                opts=child,
            )
            out[("rdma", nic.subnet)] = (net.id, sub.id)
    return out


def build_gcp(parent: pulumi.Resource, args: ClusterArgs, user_data: dict[str, pulumi.Output[str]]) -> Built:
    """Create the cluster's GCP resources under ``parent``. ``user_data``: node name -> secret."""
    cid, desc = args.cluster_id, args.description()
    # An explicit provider: the plan's region and zone win over the stack's gcp:region/gcp:zone.
    place = gcp.Provider(f"{cid}-gcp", region=args.region, zone=args.zone, opts=pulumi.ResourceOptions(parent=parent))
    child = pulumi.ResourceOptions(parent=parent, provider=place)
    project = (
        gcp.config.project
        or gcp.organizations.get_client_config_output(opts=pulumi.InvokeOptions(parent=parent, provider=place)).project
    )
    labels = args.labels()
    network = gcp.compute.Network(f"{cid}-vpc", auto_create_subnetworks=False, description=desc, opts=child)
    subnet = gcp.compute.Subnetwork(
        f"{cid}-subnet", network=network.id, region=args.region, ip_cidr_range=SUBNET_CIDR, description=desc, opts=child
    )
    v4 = [c for c in args.allowed_cidrs if ":" not in c]
    v6 = [c for c in args.allowed_cidrs if ":" in c]
    for suffix, ranges in (("ssh", v4), ("ssh-v6", v6)):
        if ranges:
            gcp.compute.Firewall(
                f"{cid}-{suffix}",
                network=network.name,
                direction="INGRESS",
                source_ranges=ranges,
                target_tags=[cid],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                description=desc,
                opts=child,
            )
    gcp.compute.Firewall(
        f"{cid}-internal",
        network=network.name,
        direction="INGRESS",
        source_tags=[cid],
        target_tags=[cid],
        allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
        description=desc,
        opts=child,
    )
    layout = nic_layout(args.instance_type)
    extra = _extra_networks(args, layout, child, project)
    policy_link: pulumi.Output[str] | None = None
    if len(args.nodes) > 1:
        policy = gcp.compute.ResourcePolicy(
            f"{cid}-compact",
            region=args.region,
            group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                collocation="COLLOCATED", vm_count=len(args.nodes)
            ),
            description=desc,
            opts=child,
        )
        policy_link = policy.self_link
    metadata: dict[str, pulumi.Input[str]] = {"enable-oslogin": "FALSE"}
    if args.ssh_public_key:
        metadata["ssh-keys"] = pulumi.Output.from_input(args.ssh_public_key).apply(
            lambda key: f"{args.ssh_user}:{key.strip()}"
        )
    shared = None
    if args.shared_fs is not None:
        store = gcp.filestore.Instance(
            f"{cid}-filestore",
            location=args.zone,
            tier="BASIC_SSD",
            file_shares=gcp.filestore.InstanceFileSharesArgs(
                name="shared", capacity_gb=max(FILESTORE_MIN_GIB, math.ceil(args.shared_fs.size_gib))
            ),
            networks=[gcp.filestore.InstanceNetworkArgs(network=network.name, modes=["MODE_IPV4"])],
            labels=labels,
            description=desc,
            opts=child,
        )
        mount_path = args.shared_fs.mount_path
        shared = store.networks.apply(
            lambda nets: {
                "kind": "filestore",
                "target": f"{(nets[0].ip_addresses or [''])[0]}:/shared",
                "mount_path": mount_path,
            }
        )
        target = shared.apply(lambda fs: fs["target"])
        user_data = {
            name: pulumi.Output.all(text, target).apply(lambda v: with_shared_fs_target(v[0], v[1]))
            for name, text in user_data.items()
        }
    built: list[BuiltNode] = []
    for node in args.nodes:
        nics = []
        for nic in layout:
            if nic.network == "cluster":
                nics.append(
                    gcp.compute.InstanceNetworkInterfaceArgs(
                        network=network.id,
                        subnetwork=subnet.id,
                        nic_type="GVNIC",
                        access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
                    )
                )
            else:
                net_id, sub_id = extra[(nic.network, nic.subnet)]
                nics.append(
                    gcp.compute.InstanceNetworkInterfaceArgs(network=net_id, subnetwork=sub_id, nic_type=nic.nic_type)
                )
        node_metadata = dict(metadata)
        if node.name in user_data:
            node_metadata["user-data"] = user_data[node.name]
        instance = gcp.compute.Instance(
            node.name,
            name=node.name,
            machine_type=args.instance_type,
            zone=args.zone,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=args.image or DEFAULT_IMAGE, size=BOOT_DISK_GIB, type="pd-ssd"
                )
            ),
            network_interfaces=nics,
            scratch_disks=[
                gcp.compute.InstanceScratchDiskArgs(interface="NVME", size=LOCAL_SSD_GIB)
                for _ in range(LOCAL_SSDS.get(args.instance_type, 0))
            ],
            scheduling=_scheduling(args),
            resource_policies=policy_link,
            metadata=node_metadata,
            labels={**labels, NODE_TAG: node.name, ROLE_TAG: node.role, **args.lease_tags(), **args.run_tags()},
            tags=[cid],
            allow_stopping_for_update=False,
            description=desc,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(ignore_changes=args.kept_marks("labels"))),
        )
        interface = instance.network_interfaces.apply(lambda n: n[0])
        built.append(
            BuiltNode(
                node.name,
                node.role,
                interface.apply(lambda i: (i.access_configs[0].nat_ip or "") if i.access_configs else ""),
                interface.apply(lambda i: i.network_ip or ""),
                instance.id,
            )
        )
    return Built(built, shared, project)


__all__ = ["LOCAL_SSDS", "Nic", "build_gcp", "nic_layout", "provisioning_model"]
