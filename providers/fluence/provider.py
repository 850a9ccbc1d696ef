"""``FluenceProvider``: Fluence GPU Cloud VMs behind the common Provider interface.

How the contract maps onto Fluence:

- Offers: every option of ``GET /gpu/plans/vms`` is one Offer (``offer_id`` = option id,
  ``region`` = option location, ``instance_type`` = a plan-style shape name, see
  naming.shape_name). Billing is hourly and prepaid with ``upfront_hours`` (3) taken at
  deploy: ``billing_increment_s`` 3600, ``billing_minimum_s`` = upfront_hours x 3600. No
  spot. Egress is 0 because Fluence documents no bandwidth charge (flagged as undocumented
  in ``interruption_basis``). Interruption rate, reliability, fabric speed and max_nodes come
  from the bundled catalog's Fluence entries (the API has none of them).
- Membership: Fluence has no tags; the instance name ``<cluster mark>-<node>`` (1-25 chars
  of ``[a-z0-9-]``, deterministic, see providers.fluence.naming) is the only mark.
- create: one ``POST /gpu/instances/vms`` per node (the API has no batch), after every node
  was resolved to an option, OS image and SSH key (nothing is bought if one cannot be).
  Adopt-after-timeout (by instance name), rollback and the fail-closed error are
  providers.orchestrate's; a 5xx deploy is never deployed again.
- GPU nodes cannot take user data (the GPU deploy has no such field): a GPU node with
  ``user_data`` is refused with PlanError before anything is created. CPU nodes
  (``instance_type`` ``cpu-*``) go through the v2 VM API with cloud-init, see cpu_vms.
- Statuses: INITIALIZED -> pending, ACTIVE -> running, FAILED -> failed, ENDED -> terminated.
  FAILED and ENDED instances are never billed; create launches a fresh one in their place.
- delete: Fluence terminates only ACTIVE instances. INITIALIZED ones are waited for (with
  provisioner.waiting.wait_until, at most ``active_wait_s``) and then terminated, because
  terminating a booting instance is impossible and leaving it would bill the prepaid hours
  anyway. A 404, or a refusal for an instance that is already ENDED/FAILED, is success.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import statistics
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import ClassVar

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.errors import (
    CapacityError,
    PlanError,
    ProviderAPIError,
    ProvisionerError,
)
from provisioner.offer import Offer
from provisioner.providers.adapter import RestAdapter, require_capabilities
from provisioner.providers.base import Capability, Node, NodeSpec, NodeStatus, OfferQuery, OwnedNode, owner_id
from provisioner.providers.billing import Billed, provider_time
from provisioner.providers.fluence import CAPABILITIES, CPU_VM_CAPABILITIES, billing, cpu_vms
from provisioner.providers.fluence.client import FluenceClient, is_not_active, is_not_found
from provisioner.providers.fluence.models import CreateVmRequest, DeployRequest, Instance, PlanGroup, PlanOption
from provisioner.providers.fluence.naming import canonical_gpu, instance_name, node_of, shape_name, vram_gib
from provisioner.providers.orchestrate import Launcher, Member, answer, create
from provisioner.waiting import wait_until

log = logging.getLogger("provisioner.providers.fluence")

DEFAULT_INTERRUPTIONS_PER_NODE_HOUR = 0.0005
"""Used when the bundled catalog has no Fluence offer: the catalog's estimate for Fluence."""
EGRESS_NOTE = "egress: none documented by Fluence, assumed 0 (undocumented)"
PREFERRED_IMAGES = ("Ubuntu Server 22.04", "ubuntu22.04")

STATUS = {
    "INITIALIZED": NodeStatus.PENDING,
    "ACTIVE": NodeStatus.RUNNING,
    "FAILED": NodeStatus.FAILED,
    "ENDED": NodeStatus.TERMINATED,
}
GONE = frozenset({"FAILED", "ENDED"})


@lru_cache(maxsize=1)
def _catalog_defaults() -> tuple[float, float, str, dict[str, tuple[float, int]]]:
    """(interruptions/node-hour, reliability, basis, {instance_type: (fabric_gbps, max_nodes)})."""
    try:
        from provisioner.catalog import load_bundled_catalog

        offers = [o for o in load_bundled_catalog().offers if o.provider == "fluence"]
    except Exception:  # the catalog is optional context, never a reason to fail listing
        offers = []
    if not offers:
        return DEFAULT_INTERRUPTIONS_PER_NODE_HOUR, 0.97, "documented default", {}
    rate = statistics.median(o.interruptions_per_node_hour for o in offers)
    reliability = statistics.median(o.reliability for o in offers)
    shapes = {o.instance_type: (o.fabric_gbps, o.max_nodes) for o in offers}
    return rate, reliability, f"bundled catalog typical value ({offers[0].interruption_basis})", shapes


def key_name(public_key: str) -> str:
    """Stable SSH key name derived from the key material, reused across runs."""
    material = " ".join(public_key.split()[:2])
    return f"provisioner-{hashlib.sha1(material.encode()).hexdigest()[:16]}"


def option_shape(group: PlanGroup, gpus: int, option: PlanOption) -> str:
    g = group.gpu_model
    return shape_name(g.model, g.vram, g.interface, gpus, int(option.vcpu.count), option.memory.gib, option.storage.gib)


def instance_shape(instance: Instance) -> str:
    if instance.resources is None:
        return ""
    s, g = instance.resources.supply, instance.resources.gpu_model
    return shape_name(g.model, g.vram, g.interface, s.gpu_count, int(s.vcpu.count), s.memory.gib, s.storage.gib)


class FluenceProvider(RestAdapter[FluenceClient]):
    """Fluence GPU Cloud adapter. Thread-compatible, not thread-safe (one client, one limiter)."""

    name: ClassVar[str] = "fluence"
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES
    client_class = FluenceClient
    active_wait_s: float = 1800.0
    """Longest ``delete_nodes`` waits for an INITIALIZED instance to become deletable."""

    # ----- read-only ------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raise CredentialsError if Fluence rejects the key (one GET /ssh_keys)."""
        self.client.list_ssh_keys()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """One offer per deployable GPU VM option. Fluence has no spot tier."""
        if query.spot:
            return []
        offers = self._screened(self.client.vm_plans().data, self._offers)
        wanted = {canonical_gpu(g) for g in query.gpu_models}
        return sorted(
            (
                o
                for o in offers
                if (not wanted or o.gpu_model in wanted)
                and (not query.regions or o.region in query.regions)
                and o.gpus >= query.min_gpus
                and o.reliability >= query.min_reliability
            ),
            key=lambda o: o.key,
        )

    def _offers(self, group: PlanGroup) -> list[Offer]:
        memory = vram_gib(group.gpu_model.vram)
        if memory is None or memory <= 0:
            return []
        rate, reliability, basis, shapes = _catalog_defaults()
        offers = []
        for level in group.availability_by_number:
            for option in level.options:
                if level.gpu_count <= 0 or option.vcpu.count <= 0 or option.memory.gib <= 0:
                    continue
                shape = option_shape(group, level.gpu_count, option)
                fabric_gbps, max_nodes = shapes.get(shape, (10.0 if level.gpu_count else 0.0, 1))
                offers.append(
                    Offer(
                        provider=self.name,
                        instance_type=shape,
                        region=option.location,
                        offer_id=option.id,
                        gpu_model=canonical_gpu(group.gpu_model.model),
                        gpus=level.gpu_count,
                        gpu_memory_gib=memory,
                        vcpus=int(option.vcpu.count),
                        memory_gib=option.memory.gib,
                        local_nvme_gib=option.storage.gib,
                        fabric_gbps=fabric_gbps,
                        price_per_hour_usd=option.pricing.hour,
                        billing_increment_s=3600,
                        billing_minimum_s=max(option.pricing.upfront_hours, 1) * 3600,
                        egress_usd_per_gb=0.0,
                        interruptions_per_node_hour=rate,
                        interruption_basis=f"{basis}; {EGRESS_NOTE}",
                        reliability=reliability,
                        max_nodes=max_nodes,
                        purchase=Purchase.INSTANCE,
                        bootstrap=Bootstrap.SSH,
                        network=Network.NONE,
                    )
                )
        return offers

    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every GPU instance and v2 VM whose name carries the cluster mark (ENDED ones included)."""
        nodes = [self._node(cluster_id, i) for i in self._members(cluster_id)]
        return nodes + [cpu_vms.to_node(cluster_id, vm) for vm in cpu_vms.members(self.client, cluster_id)]

    # ----- SSH keys -------------------------------------------------------------------------
    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Register ``public_key`` as ``name`` unless that name or key material exists; return the name."""
        material = " ".join(public_key.split()[:2])
        for key in self.client.list_ssh_keys():
            if key.name == name or key.material == material:
                return key.name
        self.client.add_ssh_key(name, public_key)
        return name

    def _public_key(self, spec: NodeSpec) -> str:
        if spec.ssh_public_key:
            self.ensure_ssh_key(key_name(spec.ssh_public_key), spec.ssh_public_key)
            return spec.ssh_public_key
        active = [k for k in self.client.list_ssh_keys() if k.active and k.material]
        if not active:
            raise PlanError(
                "fluence: a GPU VM needs an SSH key and the account has none: give the node an ssh_public_key"
            )
        return active[0].publicKey or active[0].public_key

    # ----- create ---------------------------------------------------------------------------
    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create the nodes not yet present (by name); all-or-nothing through providers.orchestrate.

        Blocks for the deploy calls only (not for boot). Raises PlanError (a node Fluence
        cannot serve as specified), CapacityError, QuotaError, CredentialsError,
        RateLimitError or ProviderAPIError (naming what may remain and the gc command when a
        lost answer or a failed cleanup leaves doubt).
        """
        # No spot, no user data on GPU VMs (bootstrap them over SSH; cpu-* v2 VMs boot cloud-init).
        require_capabilities(
            self.name,
            self.capabilities,
            nodes,
            per_node=lambda s: CPU_VM_CAPABILITIES if cpu_vms.is_cpu_vm(s) else self.capabilities,
        )
        names = {spec.name: instance_name(cluster_id, spec.name) for spec in nodes}
        if len(names) != len(nodes) or len(set(names.values())) != len(nodes):
            raise PlanError("fluence: node names must be unique within a cluster (after shortening to 25 chars)")
        ids = create(_Launcher(self, cluster_id, nodes, names), nodes)
        spec_of = {node_of(cluster_id, full): spec_name for spec_name, full in names.items()}

        def listed() -> list[Node]:
            return [
                node.model_copy(update={"name": spec_of[node.name]})
                for node in self.get_nodes(cluster_id)
                if node.name in spec_of
            ]

        return answer(self.name, cluster_id, nodes, ids, listed)

    def list_owned(self) -> list[OwnedNode]:
        """Fluence names carry no tool mark (see providers.base): nothing is claimed from names alone.

        gc asks ``get_nodes`` for the clusters it has records of, or is named, instead.
        """
        return []

    def _prepare(self, specs: list[NodeSpec], names: dict[str, str]) -> list[tuple[NodeSpec, DeployRequest]]:
        """Resolve option, OS image and SSH key of every GPU spec before anything is bought."""
        if not specs:
            return []
        groups = self.client.vm_plans().data
        options = [
            (option_shape(g, level.gpu_count, o), o)
            for g in groups
            for level in g.availability_by_number
            for o in level.options
        ]
        keys: dict[str | None, str] = {}
        requests = []
        for spec in specs:
            if spec.offer_id:
                fits = [o for _, o in options if o.id == spec.offer_id]
            else:
                fits = sorted(
                    (o for shape, o in options if shape == spec.instance_type and o.location == spec.region),
                    key=lambda o: (o.pricing.hour, o.id),
                )
            if not fits:
                seen = sorted({f"{s} in {o.location}" for s, o in options if s == spec.instance_type})
                raise CapacityError(
                    self.name,
                    f"Plan no longer available: no {spec.instance_type} option "
                    f"{spec.offer_id or ''} in {spec.region}; available now: "
                    f"{', '.join(seen) or 'none'}",
                )
            option = fits[0]
            image = spec.image or next(
                (i for p in PREFERRED_IMAGES for i in option.os_options if i.startswith(p)),
                option.os_options[0] if option.os_options else "Ubuntu Server 22.04",
            )
            if option.os_options and image not in option.os_options:
                raise PlanError(
                    f"fluence: node {spec.name!r}: OS image {image!r} is not offered by option "
                    f"{option.id}; available: {', '.join(option.os_options)}"
                )
            if spec.ssh_public_key not in keys:
                keys[spec.ssh_public_key] = self._public_key(spec)
            requests.append(
                (
                    spec,
                    DeployRequest(
                        plan_id=option.id, name=names[spec.name], ssh_key=keys[spec.ssh_public_key], os_image=image
                    ),
                )
            )
        return requests

    # ----- delete ---------------------------------------------------------------------------
    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Terminate the cluster's nodes (those in ``node_ids`` when given). Already gone is success.

        Blocks only while a targeted GPU instance is still INITIALIZED (see module docstring).
        """
        targets = [
            i.id for i in self._members(cluster_id) if i.status not in GONE and (node_ids is None or i.id in node_ids)
        ]
        if targets:
            self._terminate(targets)
        for vm in cpu_vms.members(self.client, cluster_id):
            if vm.status not in cpu_vms.GONE and (node_ids is None or vm.id in node_ids):
                cpu_vms.terminate(self.client, vm.id)

    def _terminate(self, ids: list[str]) -> None:
        """Terminate GPU instances, first waiting for INITIALIZED ones to become ACTIVE."""
        for _ in range(3):
            states = self._await_settled(ids)
            refused = []
            for instance_id in ids:
                if states.get(instance_id, "ENDED") in GONE:
                    continue
                try:
                    self.client.terminate(instance_id)
                except ProviderAPIError as exc:
                    if is_not_found(exc):
                        continue
                    if not is_not_active(exc):
                        raise
                    refused.append(instance_id)
            if not refused:
                return
            ids = refused
        raise ProviderAPIError(
            self.name, 400, f"instances {', '.join(ids)} could not be terminated: they never became ACTIVE"
        )

    def _await_settled(self, ids: list[str]) -> dict[str, str]:
        """Status by id once none of ``ids`` is INITIALIZED any more (missing ids count as ENDED)."""

        def poll() -> dict[str, str]:
            wanted = set(ids)
            return {i.id: i.status for i in self.client.list_instances() if i.id in wanted}

        return wait_until(
            poll,
            lambda states: "INITIALIZED" not in states.values(),
            timeout_s=self.active_wait_s,
            interval_s=self.poll_interval_s,
            max_interval_s=max(self.poll_interval_s, 30.0),
            what="Fluence instances to become ACTIVE before termination",
        )

    # ----- helpers --------------------------------------------------------------------------
    def _members(self, cluster_id: str) -> list[Instance]:
        return [i for i in self.client.list_instances() if node_of(cluster_id, i.name) is not None]

    def _node(self, cluster_id: str, instance: Instance) -> Node:
        return Node(
            provider=self.name,
            id=instance.id,
            name=node_of(cluster_id, instance.name) or instance.name,
            cluster_id=cluster_id,
            status=STATUS.get(instance.status, NodeStatus.PENDING),
            instance_type=instance_shape(instance),
            region=instance.location,
            public_ip=instance.domain if instance.domain and _is_ip(instance.domain) else None,
            provider_state=instance.status,
            launched_at=provider_time(instance.created_at),
            ended_at=provider_time(instance.updated_at) if instance.status == "ENDED" else None,
            owner=owner_id() if node_of(cluster_id, instance.name) else None,
        )  # the mark names the owner

    def billed(self, cluster_id: str, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
        """``SupportsBilling``: Fluence's aggregated charges of the cluster's VMs (providers.fluence.billing)."""
        return billing.billed(self.client, node_ids, start, end)


class _Launcher(Launcher):
    """One ``create_nodes`` call: one deploy per node (GPU VMs, then v2 CPU VMs), resolved first."""

    carries_lease = False  # a name has no room for it: a racing create of the same owner is told by ids

    def __init__(
        self, provider: FluenceProvider, cluster_id: str, nodes: Sequence[NodeSpec], names: dict[str, str]
    ) -> None:
        super().__init__(provider.name, cluster_id)
        self.adapter = provider
        self.names = names  # node name -> instance name
        self.spec_of = {full: spec_name for spec_name, full in names.items()}
        self.with_cpu = any(cpu_vms.is_cpu_vm(s) for s in nodes)
        self.requests: dict[str, tuple[str, DeployRequest | CreateVmRequest]] = {}
        self.api_of: dict[str, str] = {}  # instance id -> "gpu" | "v2"

    def members(self) -> list[Member]:
        found = []
        for i in self.adapter._members(self.cluster_id):
            if i.status not in GONE:
                self.api_of[i.id] = "gpu"
                found.append(Member(i.id, self.spec_of.get(i.name, i.name), owner=self.owner))
        if self.with_cpu:
            for vm in cpu_vms.members(self.adapter.client, self.cluster_id):
                if vm.status not in cpu_vms.GONE:
                    self.api_of[vm.id] = "v2"
                    found.append(Member(vm.id, self.spec_of.get(vm.name, vm.name), owner=self.owner))
        return found

    def prepare(self, missing: Sequence[NodeSpec]) -> None:
        gpu = self.adapter._prepare([s for s in missing if not cpu_vms.is_cpu_vm(s)], self.names)
        cpu_specs = [s for s in missing if cpu_vms.is_cpu_vm(s)]
        cpu = cpu_vms.prepare(self.adapter.client, cpu_specs, self.names)
        self.requests = {spec.name: ("gpu", request) for spec, request in gpu}
        self.requests.update({spec.name: ("v2", request) for spec, request in zip(cpu_specs, cpu, strict=True)})

    def batches(self, missing: Sequence[NodeSpec]) -> list[list[NodeSpec]]:
        return [[s] for s in missing if not cpu_vms.is_cpu_vm(s)] + [[s] for s in missing if cpu_vms.is_cpu_vm(s)]

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        (spec,) = batch
        api, request = self.requests[spec.name]
        if isinstance(request, DeployRequest):
            node_id = self.adapter.client.deploy(request)
        else:
            node_id = cpu_vms.launch(self.adapter.client, request, self.cluster_id)
        self.api_of[node_id] = api
        return [node_id]

    def terminate(self, ids: Sequence[str]) -> list[str]:
        left = []
        for node_id in ids:
            try:
                if self.api_of.get(node_id, "gpu") == "gpu":
                    self.adapter._terminate([node_id])
                else:
                    cpu_vms.terminate(self.adapter.client, node_id)
            except ProvisionerError:
                left.append(node_id)
        return left

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        request = self.requests.get(spec.name, ("gpu", None))[1]
        if isinstance(request, DeployRequest):
            return f"{spec.instance_type} (option {request.plan_id}) in {spec.region}"
        if request is not None:
            return f"v2 VM {request.configurationId} in cluster {request.clusterId}"
        return f"{spec.instance_type} in {spec.region}"


def _is_ip(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 4 and all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)


__all__ = ["FluenceProvider", "instance_shape", "key_name", "option_shape"]
