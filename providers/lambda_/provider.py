"""``LambdaProvider``: Lambda Cloud on-demand VMs behind the common Provider interface.

How the contract maps onto Lambda:

- Cluster membership is the tag ``provisioner-cluster=<cluster_id>``; a node's identity is
  the instance name ``<cluster_id>-<node name>`` (names are the only per-instance field
  Lambda lets us change after launch, tags are fixed per launch request).
- Nodes with the same type, region, image, user data and SSH key are launched in one
  request with ``quantity`` (the launch endpoint allows one call per 12 s). A batch is
  launched under the placeholder name ``<cluster_id>-~unassigned`` and each instance is
  then renamed to its node (a batch of one is launched under its own name, no rename).
  Renames run on a small thread pool while the next batch launches, so the shared rate
  limiter, not request latency, sets the pace. Instances of the cluster still bearing
  the placeholder (a rename that never happened, a launch whose answer was lost) are
  adopted by the next create instead of launching more.
- Adopt-after-timeout, all-or-nothing rollback and the fail-closed error are
  providers.orchestrate's; this module supplies the launch (a batch, then renames), the
  listing and terminate (not waited for: Lambda stops billing at terminate). A 5xx on a
  launch is never launched again. Every instance carries the cluster, owner and expiry tags
  (providers.base).
- Statuses: booting -> pending, active -> running, unhealthy -> failed, terminating ->
  stopping, terminated/preempted -> terminated. No spot market (a spot NodeSpec is refused
  before anything is bought), no InfiniBand on-demand. Disk size is fixed by the instance
  type (the launch API has no disk field), so ``NodeSpec.disk_gib`` is not sent.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import statistics
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import ClassVar

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.errors import ProviderAPIError, ProviderError
from provisioner.metering import NodeUsage
from provisioner.offer import Offer
from provisioner.providers.adapter import RestAdapter, require_capabilities
from provisioner.providers.base import (
    CLUSTER_TAG,
    EXPIRES_TAG,
    LEASE_TAG,
    OWNER_TAG,
    RUN_TAG,
    Capability,
    Node,
    NodeSpec,
    NodeStatus,
    OfferQuery,
    OwnedNode,
    parse_expiry,
)
from provisioner.providers.lambda_ import CAPABILITIES, audit, firewall
from provisioner.providers.lambda_.client import LambdaClient, is_not_found
from provisioner.providers.lambda_.launch import GONE, MAX_BATCH, PLACEHOLDER, BatchLauncher
from provisioner.providers.lambda_.models import (
    Instance,
    InstanceTypesItem,
)
from provisioner.providers.orchestrate import answer, create

log = logging.getLogger("provisioner.providers.lambda")

DEFAULT_INTERRUPTIONS_PER_NODE_HOUR = 0.000158
"""Used when the bundled catalog has no Lambda offer: the catalog's seed value for Lambda."""
BILLING_INCREMENT_S = 60  # one-minute increments, no minimum (Lambda billing docs)

_STATUS = {
    "booting": NodeStatus.PENDING,
    "active": NodeStatus.RUNNING,
    "unhealthy": NodeStatus.FAILED,
    "terminating": NodeStatus.STOPPING,
    "terminated": NodeStatus.TERMINATED,
    "preempted": NodeStatus.TERMINATED,
}
_GPU_ALIASES = {"TESLA V100": "V100", "RTX 6000": "RTX6000", "A6000": "RTXA6000"}
_MEMORY = re.compile(r"\((\d+(?:\.\d+)?)\s*GB")


def canonical_gpu(gpu_description: str) -> str:
    """``"H100 (80 GB SXM5)"`` -> ``"H100"``; ``"Tesla V100 (16 GB)"`` -> ``"V100"``."""
    head = gpu_description.split("(")[0].strip().upper()
    return _GPU_ALIASES.get(head, head.replace(" ", ""))


def gpu_memory_gib(gpu_description: str) -> float | None:
    found = _MEMORY.search(gpu_description)
    return float(found.group(1)) if found else None


@lru_cache(maxsize=1)
def _catalog_defaults() -> tuple[float, str, dict[str, tuple[float, int]]]:
    """(typical interruptions/node-hour, basis, {instance_type: (fabric_gbps, max_nodes)}) for Lambda."""
    try:
        from provisioner.catalog import load_bundled_catalog

        offers = [o for o in load_bundled_catalog().offers if o.provider == "lambda"]
    except Exception:  # the catalog is optional context, never a reason to fail listing
        offers = []
    if not offers:
        return DEFAULT_INTERRUPTIONS_PER_NODE_HOUR, "documented default", {}
    rate = statistics.median(o.interruptions_per_node_hour for o in offers)
    shapes = {o.instance_type: (o.fabric_gbps, o.max_nodes) for o in offers}
    return rate, f"bundled catalog typical value ({offers[0].interruption_basis})", shapes


def key_name(public_key: str) -> str:
    """Stable SSH key name derived from the key material, reused across runs."""
    material = " ".join(public_key.split()[:2])
    return f"provisioner-{hashlib.sha1(material.encode()).hexdigest()[:16]}"


class LambdaProvider(RestAdapter[LambdaClient]):
    """Lambda Cloud adapter. Calls may come from several threads (the client and its limiters
    are thread-safe); ``create_nodes`` itself renames from a private thread pool."""

    name: ClassVar[str] = "lambda"
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES
    client_class = LambdaClient

    def node_usage(
        self, cluster_id: str, node_ids: Mapping[str, str], since: dt.datetime | None = None
    ) -> list[NodeUsage]:
        """``SupportsUsage``: launch and termination times from the audit log (providers.lambda_.audit)."""
        return audit.node_usage(self.client, node_ids, since)

    # ----- read-only ------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raise CredentialsError if Lambda rejects the key (one GET /ssh-keys)."""
        self.client.list_ssh_keys()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """One offer per (GPU instance type, region with capacity now). Lambda has no spot."""
        if query.spot:
            return []
        rows = self.client.instance_type_rows()
        offers = self._screened(rows.values(), lambda row: self._offers(InstanceTypesItem.model_validate(row)))
        wanted = {g.upper() for g in query.gpu_models}
        return sorted(
            (
                o
                for o in offers
                if (not wanted or o.gpu_model.upper() in wanted)
                and (not query.regions or o.region in query.regions)
                and o.gpus >= query.min_gpus
                and o.reliability >= query.min_reliability
            ),
            key=lambda o: o.key,
        )

    def _offers(self, item: InstanceTypesItem) -> list[Offer]:
        itype = item.instance_type
        memory = gpu_memory_gib(itype.gpu_description)
        if itype.specs.gpus <= 0 or memory is None:
            return []
        rate, basis, shapes = _catalog_defaults()
        fabric_gbps, max_nodes = shapes.get(itype.name, (0.0, 1))
        return [
            Offer(
                provider=self.name,
                instance_type=itype.name,
                region=region.name,
                gpu_model=canonical_gpu(itype.gpu_description),
                gpus=itype.specs.gpus,
                gpu_memory_gib=memory,
                vcpus=itype.specs.vcpus,
                memory_gib=itype.specs.memory_gib,
                local_nvme_gib=itype.specs.storage_gib,
                fabric_gbps=fabric_gbps,
                price_per_hour_usd=itype.price_cents_per_hour / 100,
                billing_increment_s=BILLING_INCREMENT_S,
                interruptions_per_node_hour=rate,
                interruption_basis=basis,
                max_nodes=max_nodes,
                purchase=Purchase.INSTANCE,
                bootstrap=Bootstrap.CLOUD_INIT,
                network=Network.PRIVATE,
            )
            for region in item.regions_with_capacity_available
        ]

    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every instance tagged with the cluster (including ones being terminated)."""
        return [self._node(cluster_id, i) for i in self._members(cluster_id)]

    # ----- SSH keys -------------------------------------------------------------------------
    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Register ``public_key`` as ``name`` unless a key with that name or material exists.

        Two ``up`` runs at once may both find it absent: the one whose add is refused (Lambda
        answers 400 for a name that exists) lists again and uses the key the other registered."""
        material = public_key.split()[:2]

        def existing() -> str | None:
            for key in self.client.list_ssh_keys():
                if key.name == name or key.public_key.split()[:2] == material:
                    return key.name
            return None

        found = existing()
        if found is not None:
            return found
        try:
            return self.client.add_ssh_key(name, public_key).name
        except ProviderAPIError as exc:
            if exc.status != 400 or (found := existing()) is None:
                raise
            return found

    def _key_for(self, spec: NodeSpec) -> str:
        if spec.ssh_public_key:
            return self.ensure_ssh_key(key_name(spec.ssh_public_key), spec.ssh_public_key)
        keys = self.client.list_ssh_keys()
        if not keys:
            raise ProviderAPIError(
                self.name,
                400,
                "a launch needs exactly one SSH key and the account has none: give the node an ssh_public_key",
            )
        return keys[0].name

    # ----- firewall (providers/lambda_/firewall.py) -----------------------------------------
    def ensure_firewall(self, cluster_id: str, allowed_cidrs: Sequence[str], region: str) -> str:
        """The id of the cluster's ruleset in ``region`` admitting SSH (tcp/22) only from ``allowed_cidrs``.

        Idempotent (found by name, rules replaced when they differ). Call it before
        ``create_nodes``: Lambda attaches rulesets at launch only, and every launch of the cluster
        in that region attaches it. Raises PlanError for a bad CIDR, ProviderError subclasses.
        """
        return firewall.ensure(self.client, cluster_id, allowed_cidrs, region)

    def remove_firewall(self, cluster_id: str) -> None:
        """Delete the cluster's rulesets in every region, after its instances are gone (Lambda
        refuses to delete one in use). Gone already is success."""
        firewall.remove(self.client, cluster_id)

    # ----- create ---------------------------------------------------------------------------
    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create the nodes not yet present (by name); all-or-nothing through providers.orchestrate.

        Blocks for the launch and rename calls only (not for boot). Raises CapacityError,
        QuotaError, CredentialsError, RateLimitError or ProviderAPIError (naming what may remain
        and the gc command when a lost answer or a failed cleanup leaves doubt).
        """
        require_capabilities(self.name, self.capabilities, nodes)  # e.g. spot: refused, never bought on demand
        ids = create(BatchLauncher(self, cluster_id), nodes)
        return answer(self.name, cluster_id, nodes, ids, lambda: self.get_nodes(cluster_id))

    def _capacity_hint(self) -> str:
        try:
            items = self.client.instance_types()
        except ProviderError:
            return ""
        regions = {name: [r.name for r in item.regions_with_capacity_available] for name, item in items.items()}
        return "; capacity now: " + ", ".join(f"{n} in {'/'.join(r)}" for n, r in sorted(regions.items()) if r)

    def list_owned(self) -> list[OwnedNode]:
        """Every live instance carrying the cluster tag, with its owner and expiry tags."""
        found = []
        for instance in self.client.list_instances():
            cluster_id = instance.tag(CLUSTER_TAG)
            if cluster_id and instance.status not in GONE:
                found.append(
                    OwnedNode(
                        self._node(cluster_id, instance),
                        instance.tag(OWNER_TAG),
                        parse_expiry(instance.tag(EXPIRES_TAG)),
                    )
                )
        return found

    # ----- delete ---------------------------------------------------------------------------
    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Terminate the cluster's instances (those in ``node_ids`` when given). Already gone is
        success. Does not wait for them to disappear."""
        targets = [
            i.id for i in self._members(cluster_id) if i.status not in GONE and (node_ids is None or i.id in node_ids)
        ]
        if targets:
            self._terminate(targets)

    def _terminate(self, ids: list[str]) -> None:
        try:
            self.client.terminate(ids)
        except ProviderAPIError as exc:
            if not is_not_found(exc):
                raise
            # One id vanished meanwhile and Lambda rejects the whole call: retry the survivors.
            alive = {i.id for i in self.client.list_instances() if i.status not in GONE}
            survivors = [i for i in ids if i in alive]
            if survivors:
                self.client.terminate(survivors)

    # ----- helpers --------------------------------------------------------------------------
    def _members(self, cluster_id: str) -> list[Instance]:
        return [i for i in self.client.list_instances() if i.tag(CLUSTER_TAG) == cluster_id]

    @staticmethod
    def _node_name(cluster_id: str, instance: Instance) -> str:
        name = instance.name or ""
        return name.removeprefix(f"{cluster_id}-") if name.startswith(f"{cluster_id}-") else name

    @staticmethod
    def _fits(instance: Instance, spec: NodeSpec) -> bool:
        itype = instance.instance_type.name if instance.instance_type else ""
        region = instance.region.name if instance.region else ""
        return itype == spec.instance_type and region == spec.region and instance.status not in GONE

    def _node(self, cluster_id: str, instance: Instance) -> Node:
        return Node(
            provider=self.name,
            id=instance.id,
            name=self._node_name(cluster_id, instance),
            cluster_id=cluster_id,
            status=_STATUS.get(instance.status, NodeStatus.PENDING),
            instance_type=instance.instance_type.name if instance.instance_type else "",
            region=instance.region.name if instance.region else "",
            public_ip=instance.ip,
            private_ip=instance.private_ip,
            provider_state=instance.status,
            owner=instance.tag(OWNER_TAG),
            lease=instance.tag(LEASE_TAG),
            run=instance.tag(RUN_TAG),
        )


__all__ = ["MAX_BATCH", "PLACEHOLDER", "LambdaProvider", "canonical_gpu", "key_name"]
