"""The v2 VM path (``/v2/vms``, OpenAPI 0.10.0): CPU nodes that need cloud-init user data.

Why two APIs: Fluence's GPU Cloud deploy (``POST /gpu/instances/vms``) takes a plan, a name,
one SSH key and an OS image, and nothing else: no user data, no start command. The newer
v2 VM API takes ``cloudInit.userData`` (up to 16 KiB) but sells only CPU configurations
(``cpu-regular-4vcpu-8gb`` ...). So a node whose ``instance_type`` is a v2 configuration
slug (``cpu-*``) or configuration id goes here, which is how a cluster gets, e.g., a
cloud-init-bootstrapped Slurm controller next to GPU Cloud workers. GPU nodes never do.

Mapping: ``region`` names a v2 cluster (its name, such as ``Cloudless``, or its id; empty
means the first cluster the account sees); the boot disk is a new NVMe volume of
``disk_gib`` with ``image`` as its ``osImage`` URL (Fluence's default image when None); the
VM name follows providers.fluence.naming like GPU nodes. ``sshKeys`` is left empty: the v1
SSH-key endpoints accept only JWT sessions, not API keys, so keys travel in the user data.
"""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.errors import PlanError, ProviderAPIError
from provisioner.providers.base import Node, NodeSpec, NodeStatus, owner_id
from provisioner.providers.fluence.client import PROVIDER, FluenceClient, is_not_found
from provisioner.providers.fluence.models import BootDisk, CloudInit, CreateVmRequest, UserVm
from provisioner.providers.fluence.naming import node_of

STATUS = {
    "new": NodeStatus.PENDING,
    "launching": NodeStatus.PENDING,
    "launched": NodeStatus.RUNNING,
    "updating": NodeStatus.RUNNING,
    "restarting": NodeStatus.PENDING,
    "softRebooting": NodeStatus.PENDING,
    "failed": NodeStatus.FAILED,
    "terminating": NodeStatus.STOPPING,
    "terminated": NodeStatus.TERMINATED,
    "suspending": NodeStatus.STOPPING,
    "suspended": NodeStatus.STOPPING,
    "unknown": NodeStatus.PENDING,
}
GONE = frozenset({"terminating", "terminated", "failed"})


def is_cpu_vm(spec: NodeSpec) -> bool:
    """Whether ``spec`` is served by the v2 VM API (see module docstring)."""
    return spec.instance_type.startswith("cpu-")


def members(client: FluenceClient, cluster_id: str) -> list[UserVm]:
    return [vm for vm in client.list_vms() if node_of(cluster_id, vm.name) is not None]


def to_node(cluster_id: str, vm: UserVm, region: str = "") -> Node:
    return Node(
        provider=PROVIDER,
        id=vm.id,
        name=node_of(cluster_id, vm.name) or vm.name,
        cluster_id=cluster_id,
        status=STATUS.get(vm.status, NodeStatus.PENDING),
        instance_type=vm.configurationSlug or vm.configurationId,
        region=region or vm.clusterId,
        provider_state=vm.status,
        owner=owner_id() if node_of(cluster_id, vm.name) else None,
    )


def prepare(client: FluenceClient, specs: Sequence[NodeSpec], names: dict[str, str]) -> list[CreateVmRequest]:
    """Resolve cluster and configuration for every spec (read-only); raise PlanError if one is unknown."""
    if not specs:
        return []
    clusters = client.clusters()
    configurations = client.vm_configurations()
    requests = []
    for spec in specs:
        cluster = next((c for c in clusters if spec.region in (c.id, c.name)), None)
        if cluster is None and not spec.region and clusters:
            cluster = clusters[0]
        config = next((c for c in configurations if spec.instance_type in (c.slug, c.id)), None)
        if cluster is None or config is None:
            what = "cluster " + repr(spec.region) if cluster is None else "configuration " + repr(spec.instance_type)
            known = [c.name for c in clusters] if cluster is None else [c.slug for c in configurations]
            raise PlanError(f"fluence: node {spec.name!r}: unknown v2 {what}; known: {', '.join(known) or 'none'}")
        name = names[spec.name]
        requests.append(
            CreateVmRequest(
                clusterId=cluster.id,
                name=name,
                configurationId=config.id,
                bootDisk=BootDisk(
                    clusterId=cluster.id, name=f"{name}-boot", volumeGb=spec.disk_gib, osImage=spec.image
                ),
                cloudInit=CloudInit(userData=spec.user_data) if spec.user_data else None,
            )
        )
    return requests


def launch(client: FluenceClient, request: CreateVmRequest, cluster_id: str) -> str:
    """Create one VM; on a lost answer (timeout/5xx) adopt a VM of that name instead of buying twice."""
    try:
        return client.create_vm(request).id
    except ProviderAPIError as exc:
        if exc.status and exc.status < 500:
            raise
        found = [vm.id for vm in members(client, cluster_id) if vm.name == request.name and vm.status not in GONE]
        if not found:
            raise
        return found[0]


def terminate(client: FluenceClient, vm_id: str) -> None:
    """Terminate one VM; an unknown or already terminated VM is success."""
    try:
        client.terminate_vm(vm_id)
    except ProviderAPIError as exc:
        if is_not_found(exc):
            return
        alive = {vm.id for vm in client.list_vms() if vm.status not in GONE}
        if vm_id in alive:
            raise


__all__ = ["GONE", "STATUS", "is_cpu_vm", "launch", "members", "prepare", "terminate", "to_node"]
