"""``GCPProvider``: Compute Engine GPU VMs behind the common Provider interface.

How the contract maps onto Compute Engine:

- Offers: one per (accelerator-optimized machine type with bundled GPUs, zone), from
  machineTypes.list and acceleratorTypes.list per zone (GPU model and memory from the
  accelerator type). On-demand and spot prices come from the Cloud Billing Catalog's Compute
  Engine SKUs (GPU + vCPU + RAM, see ``billing``); a machine type no SKU set prices falls back
  to the bundled catalog's row, and each offer's ``source`` says which it is. A type priced by
  neither is not offered. N1 VMs with attachable GPUs are not offered.
- Cluster membership is the label ``provisioner-cluster=<cluster_id>``; the node's identity is
  the instance name ``<cluster_id>-<node name>`` (unique per zone), so a retried insert finds
  the instance (HTTP 409) instead of buying a second one. Owner and expiry labels when given.
- Spot nodes: ``provisioningModel=SPOT`` with ``instanceTerminationAction=DELETE``; every GPU VM
  has ``onHostMaintenance=TERMINATE``. User data and SSH keys go in metadata (``user-data``,
  ``ssh-keys`` as ``ubuntu:<key>``); the NIC is on the ``default`` network with a NAT address,
  the instance tagged with the cluster id, which the cluster's own firewall rules aim at
  (``SupportsFirewall``, ``providers.gcp.firewall``: SSH from ``allowed_cidrs``, the cluster's
  nodes among themselves, everything else denied).
- Create goes through providers.orchestrate: all-or-nothing (instances this call inserted are
  deleted and the error names what was tried); when something may remain (a lost answer no
  listing could check, a failed cleanup) the error names the cluster and
  ``provisioner gc --provider gcp --cluster ID --yes``. Expiry goes on as the label
  ``provisioner-expires`` in providers.base.expiry_label form (labels take no ``:``).
- Statuses: PROVISIONING/STAGING/PENDING -> pending, RUNNING -> running, STOPPING/SUSPENDING/
  DEPROVISIONING/STOPPED/SUSPENDED -> stopping, TERMINATED -> terminated, REPAIRING -> failed.
- Quotas (``quotas``): ``create_nodes`` first sums the GPUs the missing nodes need per regional
  metric (``NVIDIA_H100_GPUS``, ``PREEMPTIBLE_NVIDIA_H100_GPUS``, ...) and raises QuotaError
  naming it when that exceeds limit minus usage (regions.get): nothing is inserted.
  ``quota_headroom`` records the same for ``catalog refresh``, so ``plan`` can refuse first.
- ``instances``: the insert body of a node, the Node of an instance, the create call's Launcher.
- ``topology`` turns the instances' ``resourceStatus.physicalHostTopology`` (cluster, block,
  subblock) into the switch paths ``provisioner.render`` writes to Slurm's topology.conf.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, ClassVar

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.errors import PlanError, ProviderAPIError, ProviderError, QuotaError
from provisioner.metering import NodeUsage
from provisioner.offer import Offer, QuotaHeadroom
from provisioner.providers import settings
from provisioner.providers.adapter import require_capabilities
from provisioner.providers.base import (
    CLUSTER_TAG,
    EXPIRES_TAG,
    NODE_TAG,
    OWNER_TAG,
    Capability,
    Node,
    NodeSpec,
    OfferQuery,
    OwnedNode,
    owner_id,
    parse_expiry,
)
from provisioner.providers.billing import Billed
from provisioner.providers.gcp import CAPABILITIES, firewall, pricecheck
from provisioner.providers.gcp.account import AccountQuotas
from provisioner.providers.gcp.billing import COMPUTE_SERVICE, SkuPrices, sku_prices
from provisioner.providers.gcp.client import GCPClient, is_not_found
from provisioner.providers.gcp.instances import GONE, SETTLING, InstanceLauncher, instance_body, node_of, renew
from provisioner.providers.gcp.models import (
    GPU_MODELS,
    GpuMachineType,
    bundled_offers,
    gpu_machine_type,
    leaf,
    switch_path,
    typical_offer,
    zone_region,
)
from provisioner.providers.gcp.quotas import QUOTA_METRICS, GpuQuotaShortfall
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.orchestrate import answer, create
from provisioner.providers.screening import OfferScreen

log = logging.getLogger(__name__)
DEFAULT_REGIONS = ("us-central1",)


class GCPProvider:
    """Compute Engine adapter. ``project`` (or ``PROVISIONER_GCP_PROJECT`` / ``GOOGLE_CLOUD_PROJECT``)
    and ``credentials`` (default: Application Default Credentials); ``endpoint`` (or
    ``PROVISIONER_GCP_API_URL``) replaces compute.googleapis.com; ``zones`` (or
    ``PROVISIONER_GCP_ZONES``) are the zones listed for offers; without either, every zone of the
    query's regions (else ``DEFAULT_REGIONS``) is, as regions.get lists them. ``http_adapter``: see GCPClient."""

    name: ClassVar[str] = "gcp"
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES

    def __init__(
        self,
        project: str | None = None,
        credentials: Any = None,
        *,
        zones: Sequence[str] | None = None,
        endpoint: str | None = None,
        limits: RateLimits | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        image: str | None = None,
        owner: str | None = None,
        poll_interval_s: float = 5.0,
        http_adapter: Any = None,
    ) -> None:
        project = project or os.environ.get("PROVISIONER_GCP_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT")
        endpoint = endpoint or settings.api_url("gcp", "") or None
        if credentials is None and os.environ.get("PROVISIONER_GCP_CREDENTIALS") == "anonymous":
            if not endpoint:
                raise PlanError(
                    "gcp: PROVISIONER_GCP_CREDENTIALS=anonymous is for a local endpoint only; set "
                    "PROVISIONER_GCP_API_URL too"
                )
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        if credentials is None:
            import google.auth
            import google.auth.exceptions

            try:
                credentials, found = google.auth.default()
            except google.auth.exceptions.DefaultCredentialsError as exc:
                from provisioner.errors import CredentialsError

                raise CredentialsError("gcp", f"no Application Default Credentials: {exc}") from None
            project = project or found
        if not project:
            raise PlanError("gcp: no project: set PROVISIONER_GCP_PROJECT or GOOGLE_CLOUD_PROJECT")
        env_zones = [z.strip() for z in os.environ.get("PROVISIONER_GCP_ZONES", "").split(",") if z.strip()]
        self.zones: tuple[str, ...] = tuple(zones or env_zones or (f"{r}-a" for r in DEFAULT_REGIONS))
        self.discover_zones = not (zones or env_zones)
        self.project = project
        self.endpoint = endpoint
        self.billing_endpoint = os.environ.get("PROVISIONER_GCP_BILLING_URL") or endpoint
        self.client = GCPClient(
            project,
            credentials,
            endpoint=self.endpoint,
            billing_endpoint=self.billing_endpoint,
            limits=limits,
            timeout_s=timeout_s,
            retry=retry,
            http_adapter=http_adapter,
        )
        self.image = image or os.environ.get("PROVISIONER_GCP_IMAGE") or None
        self.owner = owner
        self.poll_interval_s = poll_interval_s
        self.dropped_offers: dict[str, int] = {}
        self.quotas = AccountQuotas(self.client, self.gpu_machine_types, project)

    def __repr__(self) -> str:
        return f"GCPProvider(project={self.project!r}, endpoint={self.endpoint!r})"

    def close(self) -> None:
        """Nothing to release: the REST transports close with the process."""

    # ----- read-only ----------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raise CredentialsError unless Compute Engine accepts the credentials (one regions.get)."""
        self.client.region(zone_region(self.zones[0]))

    def region_zones(self, regions: Iterable[str]) -> list[str]:
        """Every zone of ``regions`` (regions.get), sorted. Read-only."""
        return sorted(leaf(url) for region in sorted(set(regions)) for url in self.client.region(region).zones)

    def gpu_machine_types(self, zone: str) -> list[GpuMachineType]:
        """Machine types in ``zone`` with bundled NVIDIA GPUs (deprecated ones skipped)."""
        accelerators = {a.name: a for a in self.client.accelerator_types(zone)}
        found = (gpu_machine_type(machine, accelerators, zone) for machine in self.client.machine_types(zone))
        return sorted((m for m in found if m is not None), key=lambda m: m.machine_type)

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """One offer per (GPU machine type, zone) with a price; see the module docstring. Read-only."""
        wanted = {g.upper() for g in query.gpu_models}
        zones = (
            self.region_zones(query.regions or DEFAULT_REGIONS)
            if self.discover_zones
            else [z for z in self.zones if not query.regions or zone_region(z) in query.regions]
        )
        screen = OfferScreen(self.name)
        offers: list[Offer] = []
        prices = self.sku_prices({zone_region(z) for z in zones}) if zones else SkuPrices({})
        for zone in zones:
            kinds = [
                m
                for m in self.gpu_machine_types(zone)
                if (not wanted or m.gpu_model in wanted) and m.gpus >= query.min_gpus
            ]
            offers += screen.build(kinds, lambda m: self._offer(m, query, prices))
        self.dropped_offers = dict(screen.dropped)
        return sorted((o for o in offers if o.reliability >= query.min_reliability), key=lambda o: o.key)

    def sku_prices(self, regions: Iterable[str]) -> SkuPrices:
        """Compute Engine's Cloud Billing Catalog SKUs for ``regions``, indexed (``billing``). Read-only."""
        return sku_prices(self.client.skus(COMPUTE_SERVICE), regions)

    def _offer(self, kind: GpuMachineType, query: OfferQuery, prices: SkuPrices) -> list[Offer]:
        """The offer for one machine type in one zone: priced from SKUs when every part of it is
        (source says so), else from the bundled catalog's row (source says that), else none."""
        priced, as_of = bundled_offers()
        region = zone_region(kind.zone)
        template = priced.get((kind.machine_type, region))
        memory = Decimal(kind.memory_gib)  # MiB / 1024: exact in binary, so exact here
        billed = [
            prices.machine_price(kind.machine_type, kind.accelerator, kind.gpus, kind.vcpus, memory, region, s)
            for s in (False, True)
        ]
        if any(billed):
            price, spot = billed
            source, dated = (
                "machine type live from Compute Engine; price from Cloud Billing Catalog SKUs (GPU + "
                "vCPU + RAM, local SSD not included)",
                None,
            )
        elif template is not None:
            price, spot = template.price_per_hour_usd, template.spot_price_per_hour_usd
            source, dated = (
                (
                    "machine type live from Compute Engine; price from the bundled catalog (no Cloud Billing "
                    "SKU priced this machine type)"
                ),
                template.as_of or as_of or None,
            )
        else:
            return []
        price = price if query.spot is not True else None
        spot = spot if query.spot is not False else None
        if price is None and spot is None:
            return []
        base = template or typical_offer()
        facts = {
            "zone": kind.zone,
            "region": region,
            "instance_type": kind.machine_type,
            "gpu_model": kind.gpu_model,
            "gpus": kind.gpus,
            "gpu_memory_gib": kind.gpu_memory_gib,
            "vcpus": kind.vcpus,
            "memory_gib": kind.memory_gib,
            "local_nvme_gib": kind.local_ssd_gib,
            "price_per_hour_usd": price,
            "spot_price_per_hour_usd": spot,
            "purchase": Purchase.INSTANCE,
            "bootstrap": Bootstrap.CLOUD_INIT,
            "network": Network.PRIVATE,
            "as_of": dated,
            "source": source,
        }
        if base is None:  # no GCP row at all to take interruption rates, egress and billing terms from
            return []
        return [base.model_copy(update={**facts, "offer_id": None, "max_nodes": base.max_nodes if template else 16})]

    # ----- quotas (``account.AccountQuotas``) -----------------------------------------------------
    def quota_shortfalls(self, requests: Iterable[tuple[str, str, int, bool]]) -> list[GpuQuotaShortfall]:
        """(machine type, zone, node count, spot) requests, summed per regional GPU metric, that exceed
        what is left of it (limit minus usage). Read-only."""
        return self.quotas.shortfalls(requests)

    def quota_headroom(self, offers: Sequence[Offer]) -> list[QuotaHeadroom]:
        """What each regional GPU quota leaves in the offers' regions, for ``catalog refresh``. Read-only."""
        return self.quotas.headroom(offers)

    def check_quota(self, machine_type: str, zone: str, count: int, spot: bool) -> None:
        """Raise QuotaError naming the quota metric and where to ask for more."""
        for short in self.quota_shortfalls([(machine_type, zone, count, spot)]):
            raise QuotaError(self.name, short.reason)

    def check_quotas(self, nodes: Sequence[NodeSpec]) -> None:
        """Raise QuotaError for the first regional GPU quota ``nodes`` together exceed (nodes without
        a zone are left to ``create_nodes``' own refusal). Read-only; called before any insert."""
        counts: dict[tuple[str, str, bool], int] = {}
        for node in nodes:
            if node.zone:
                key = (node.instance_type, node.zone, node.spot)
                counts[key] = counts.get(key, 0) + 1
        for short in self.quota_shortfalls([(t, z, n, s) for (t, z, s), n in sorted(counts.items())]):
            raise QuotaError(self.name, short.reason)

    # ----- create -------------------------------------------------------------------------------
    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create the nodes not yet present (by instance name); all-or-nothing.

        Blocks for the insert operations (not for boot). Raises PlanError before any request for
        what cannot be created (no zone, no image, a tag that is not a valid label), CapacityError,
        QuotaError, CredentialsError, RateLimitError or ProviderAPIError.
        """
        require_capabilities(self.name, self.capabilities, nodes)
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique within a cluster")
        bodies = [(spec, instance_body(cluster_id, spec, image=self.image, owner=self.owner)) for spec in nodes]
        present = {i.name for _, i in self._members(cluster_id) if i.status not in GONE}
        self.check_quotas([spec for spec, body in bodies if body["name"] not in present])  # before any insert
        ids = create(InstanceLauncher(self, cluster_id, bodies), nodes)
        return answer(self.name, cluster_id, nodes, ids, lambda: self.get_nodes(cluster_id))

    def list_owned(self) -> list[OwnedNode]:
        """Every instance carrying the cluster label (stopped ones too: their disks bill), with its
        owner and expiry labels."""
        found = []
        for zone, instance in self.client.list_instances(f"labels.{CLUSTER_TAG}:*"):
            cluster_id = instance.labels.get(CLUSTER_TAG)
            if cluster_id and instance.status not in SETTLING:  # stopped VMs still bill their disks
                found.append(
                    OwnedNode(
                        node_of(cluster_id, zone, instance),
                        instance.labels.get(OWNER_TAG),
                        parse_expiry(instance.labels.get(EXPIRES_TAG)),
                    )
                )
        return found

    # ----- read / delete ------------------------------------------------------------------------
    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every instance labelled with the cluster, in any zone of the project."""
        return [node_of(cluster_id, zone, i) for zone, i in self._members(cluster_id)]

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        """``SupportsLeaseRenewal``: the RENEWED_TAG label of the cluster's instances (instances.renew)."""
        return renew(self, cluster_id, lease, owner, at)

    def topology(self, cluster_id: str) -> dict[str, list[str]]:
        """{node name: [cluster, block, subblock switch]} of the cluster's running instances (see
        ``models.switch_path``): what ``provisioner.render``'s ``topology=`` turns into Slurm's
        topology.conf. Instances GCE shows no placement for are left out. Read-only."""
        found: dict[str, list[str]] = {}
        for _, instance in self._members(cluster_id):
            path, name = switch_path(instance), instance.labels.get(NODE_TAG, "")
            if instance.status == "RUNNING" and name and path:
                found[name] = path
        return found

    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Delete the cluster's instances (``node_ids`` are instance names). Gone is success;
        names of another cluster are ignored. Does not wait. A stopped VM (status TERMINATED)
        is deleted too: its disks bill until it is; one already stopping or being deleted is left
        to finish (a later call deletes it once stopped). Once no instance of the cluster is left
        outside deletion, its firewall rules (this owner's) go too: ``gc`` removes them this way."""
        staying = 0
        for zone, instance in self._members(cluster_id):
            if instance.status in SETTLING:
                continue
            if node_ids is not None and instance.name not in node_ids:
                staying += 1
                continue
            try:
                self.client.delete_instance(zone, instance.name)
            except ProviderAPIError as exc:
                if not is_not_found(exc):
                    raise
        if not staying:
            try:
                self.remove_firewall(cluster_id)
            except ProviderError as exc:  # the instances are what must go; down names the rules again
                log.warning(
                    "gcp: the firewall rules of %s stay (%s); provisioner down %s removes them",
                    cluster_id,
                    exc,
                    cluster_id,
                )

    # ----- the cluster's firewall rules (SupportsFirewall; providers.gcp.firewall) ----------------
    def ensure_firewall(self, cluster_id: str, allowed_cidrs: Sequence[str], region: str) -> str:
        """The cluster's rules on the default network (SSH from ``allowed_cidrs``, every protocol between
        the cluster's nodes, everything else denied). GCE rules are global: ``region`` is not used.
        Idempotent. Call before ``create_nodes``. ClusterBusyError (another owner's rule), ProviderError."""
        return firewall.ensure(self.client, cluster_id, allowed_cidrs, self.owner or owner_id())

    def remove_firewall(self, cluster_id: str) -> None:
        """Delete this owner's rules of the cluster; another owner's (or unmarked) ones are left. Gone is success."""
        firewall.remove(self.client, cluster_id, self.owner or owner_id())

    def _members(self, cluster_id: str) -> list[tuple[str, Any]]:
        return list(self.client.list_instances(f'labels.{CLUSTER_TAG} = "{cluster_id}"'))

    def price_check(self, usages: Sequence[NodeUsage], offer: Offer, spot: bool) -> Billed:
        """``SupportsPriceCheck``: the spans at today's SKU prices, GCE's rule (providers.gcp.pricecheck)."""
        return pricecheck.price_check(self, usages, offer, spot)


__all__ = [
    "DEFAULT_REGIONS",
    "GPU_MODELS",
    "NODE_TAG",
    "QUOTA_METRICS",
    "GCPProvider",
    "GpuMachineType",
    "GpuQuotaShortfall",
]
