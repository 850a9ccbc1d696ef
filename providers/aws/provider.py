"""``AWSProvider``: EC2 GPU instances behind the common Provider interface.

How the contract maps onto EC2:

- Offers: one per (GPU instance type, availability zone where it is offered), from
  DescribeInstanceTypes (GPU, EFA, NVMe facts), DescribeInstanceTypeOfferings, the latest
  DescribeSpotPriceHistory price of that zone and the Pricing API's on-demand price (exact,
  Decimal). A type with neither price is not offered. Fabric ``efa`` where the type supports
  EFA, with the sum of its network cards' bandwidth. Only what ``create_nodes`` can buy.
- ``quote_offers`` (what ``catalog refresh`` adds): the Capacity Blocks for ML on offer for
  those types, as reservation offers (``capacity_blocks``): quote-only unless the spec sets
  ``pricing.reservations``. Nodes asking for a block (``NodeSpec.capacity_block_hours``) are
  launched into one bought first (``blocks``: PurchaseCapacityBlock, then RunInstances with
  MarketType capacity-block targeting the reservation); ``reserve`` is that purchase alone (what the
  pulumi engine calls before ``pulumi up``); ``reservations_left`` says what outlives
  ``delete_nodes`` (a block cannot be cancelled).
- Cluster membership is the tag ``provisioner-cluster=<cluster_id>``; a node's identity is
  the tag ``provisioner-node=<name>`` (also ``Name=<cluster_id>-<name>``). Owner and expiry
  go on as ``provisioner-owner`` / ``provisioner-expires`` when known, so ``gc`` finds them.
- One RunInstances per node (MinCount = MaxCount = 1), with
  ``InstanceInitiatedShutdownBehavior=terminate`` so a TTL's ``shutdown`` stops billing.
  Create goes through providers.orchestrate: idempotent on (cluster, node name); a launch
  whose answer is lost (timeout, 5xx) is never retried: the cluster is re-listed and the
  instance tagged with that node is adopted; all-or-nothing rollback; when something may
  remain the error names the cluster and ``provisioner gc --provider aws --cluster ID --yes``.
  Every instance carries the owner tag (``owner`` or providers.base.owner_id) and, when the
  NodeSpec has one, the expiry tag.
- ``topology`` maps running nodes to their DescribeInstanceTopology network nodes (Slurm
  topology.conf through ``provisioner.render``).
- EFA (``network``): a create of several nodes of a type with an EFA layout (``efa``) makes or
  adopts the cluster's placement group (strategy cluster; none in a Capacity Block) and its
  self-referencing security group, and launches every such node with one EFA interface per
  network card in that group, in one zone, with an Elastic IP on its primary interface when it has
  several (EC2 assigns those no public address). ``delete_nodes`` of such a cluster waits (up to
  ``release_timeout_s``) for its instances to terminate, then releases the addresses and deletes both
  groups; what is still in use is logged and deleted by the next ``delete_nodes``.
- Statuses (``instances.STATUS``): pending -> pending, running -> running,
  shutting-down/stopping/stopped -> stopping, terminated -> terminated. Delete of a gone node is
  success; delete does not wait.
- Quotas (see ``quotas``): ``create_nodes`` first sums the vCPUs the missing nodes need per
  Service Quotas code and region and raises QuotaError (code + increase command) when that
  plus what running instances use exceeds the quota: nothing is bought. ``quota_headroom``
  records the same per code for ``catalog refresh``, so ``plan`` can refuse up front.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar

from provisioner.capabilities import Purchase
from provisioner.errors import PlanError, ProviderError, QuotaError
from provisioner.offer import Offer, QuotaHeadroom
from provisioner.providers import settings
from provisioner.providers.adapter import require_capabilities
from provisioner.providers.aws import CAPABILITIES, billing, instances
from provisioner.providers.aws.account import AccountQuotas
from provisioner.providers.aws.blocks import Block, CapacityBlocks
from provisioner.providers.aws.capacity_blocks import sells_blocks
from provisioner.providers.aws.client import AWSClient
from provisioner.providers.aws.images import Images
from provisioner.providers.aws.launch import (
    EC2_USER_DATA_MAX_BYTES,
    EXPIRES_TAG,
    METADATA_OPTIONS,
    OWNER_TAG,
    RunLauncher,
    ec2_user_data,
    key_name,
    node_tags,
)
from provisioner.providers.aws.listing import block_offers, instance_offers, on_demand_prices
from provisioner.providers.aws.models import (
    GpuInstanceType,
    gpu_instance_type,
    latest_spot_prices,
    tag_map,
    zones_by_type,
)
from provisioner.providers.aws.network import EfaNetwork, EfaPlacement, efa_zones_of
from provisioner.providers.aws.quotas import QuotaShortfall
from provisioner.providers.base import (
    CLUSTER_TAG,
    NODE_TAG,
    Capability,
    Node,
    NodeSpec,
    OfferQuery,
    OwnedNode,
    owner_id,
)
from provisioner.providers.billing import Billed
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.providers.orchestrate import answer, create
from provisioner.providers.screening import OfferScreen

log = logging.getLogger("provisioner.providers.aws")

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
"""Regions asked when neither the query nor ``PROVISIONER_AWS_REGIONS`` names any."""


class AWSProvider:
    """EC2 adapter. ``session`` is a ``boto3.Session`` (default: boto3's standard credential
    chain); ``endpoint_url`` (or ``PROVISIONER_AWS_API_URL``) points every service at one URL;
    ``regions`` (or ``PROVISIONER_AWS_REGIONS``, comma-separated) are listed and searched."""

    name: ClassVar[str] = "aws"
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES

    def __init__(
        self,
        session: Any = None,
        *,
        regions: Sequence[str] | None = None,
        endpoint_url: str | None = None,
        limits: RateLimits | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        image_id: str | None = None,
        owner: str | None = None,
        poll_interval_s: float = 5.0,
        capacity_blocks: bool = True,
        now: Callable[[], dt.datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        release_timeout_s: float = 600.0,
    ) -> None:
        env_regions = [r.strip() for r in os.environ.get("PROVISIONER_AWS_REGIONS", "").split(",") if r.strip()]
        self.regions: tuple[str, ...] = tuple(regions or env_regions or DEFAULT_REGIONS)
        self.endpoint_url = endpoint_url or settings.api_url("aws", "") or None
        self.client = AWSClient(
            session, endpoint_url=self.endpoint_url, limits=limits, timeout_s=timeout_s, retry=retry
        )
        self.images = Images(self.client, image_id or os.environ.get("PROVISIONER_AWS_IMAGE_ID") or None)
        self.owner: str | None = owner
        self.poll_interval_s = poll_interval_s
        self.capacity_blocks = capacity_blocks
        self.quotas = AccountQuotas(self.client, self.gpu_types)
        self.blocks = CapacityBlocks(
            self.client,
            now=now or (lambda: dt.datetime.now(dt.UTC)),
            sleep=sleep,
            poll_interval_s=poll_interval_s,
            owner=owner or owner_id(),
        )
        self._block_of: dict[str, Block] = {}
        self.dropped_offers: dict[str, int] = {}
        self._cluster_regions: dict[str, set[str]] = {}
        self.network = EfaNetwork(self.client)
        self._efa: dict[tuple[str, str], EfaPlacement] = {}
        self._ssh_groups: dict[tuple[str, str], str] = {}  # (cluster, region) -> its own security group
        self._sleep = sleep
        self.release_timeout_s = release_timeout_s

    def __repr__(self) -> str:
        return f"AWSProvider(regions={list(self.regions)!r}, endpoint_url={self.endpoint_url!r})"

    def close(self) -> None:
        self.client.close()

    # ----- read-only ------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raise CredentialsError unless EC2 accepts the credentials (one DescribeRegions)."""
        self.client.caller_identity(self.regions[0])

    def gpu_types(self, region: str, instance_types: list[str] | None = None) -> list[GpuInstanceType]:
        """GPU instance types sold in ``region`` (NVIDIA only), sorted by name."""
        found = (gpu_instance_type(item) for item in self.client.describe_instance_types(region, instance_types))
        return sorted((t for t in found if t is not None), key=lambda t: t.instance_type)

    def on_demand_prices(self, region: str, instance_types: Iterable[str]) -> dict[str, Decimal]:
        """Linux on-demand USD/hour per type in ``region`` from the Pricing API (exact)."""
        return on_demand_prices(self.client, region, instance_types)

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """One offer per (GPU type, zone) with a price; see the module docstring. Read-only."""
        wanted = {g.upper() for g in query.gpu_models}
        offers: list[Offer] = []
        dropped: dict[str, int] = {}
        for region in query.regions or self.regions:
            types = [
                t for t in self.gpu_types(region) if (not wanted or t.gpu_model in wanted) and t.gpus >= query.min_gpus
            ]
            if not types:
                continue
            names = [t.instance_type for t in types]
            zones = zones_by_type(self.client.describe_instance_type_offerings(region, names))
            spot = (
                latest_spot_prices(self.client.describe_spot_price_history(region, names))
                if query.spot is not False
                else {}
            )
            on_demand = self.on_demand_prices(region, names) if query.spot is not True else {}
            screen = OfferScreen(self.name)
            offers += screen.build(
                types,
                functools.partial(
                    instance_offers, region=region, zones=zones, on_demand=on_demand, spot=spot, query=query
                ),
            )
            for reason, count in screen.dropped.items():
                dropped[reason] = dropped.get(reason, 0) + count
        self.dropped_offers = dropped
        return sorted((o for o in offers if o.reliability >= query.min_reliability), key=lambda o: o.key)

    def quote_offers(self, offers: Sequence[Offer]) -> list[Offer]:
        """Capacity Blocks for ML on offer for the block-capable types among ``offers`` (one probe per
        type and region), as quote-only reservation offers; none when ``capacity_blocks`` is off.
        Read-only: nothing is purchased."""
        if not self.capacity_blocks:
            return []
        first = {
            (o.region, o.instance_type): o
            for o in reversed(offers)
            if o.provider == self.name and o.purchase == Purchase.INSTANCE and sells_blocks(o.instance_type)
        }
        return OfferScreen(self.name).build(
            sorted(first.values(), key=lambda o: o.key), functools.partial(block_offers, self.client)
        )

    # ----- quotas (``account.AccountQuotas``) ----------------------------------------------------
    def quota_vcpus(self, region: str, code: str) -> float | None:
        """The quota's value in vCPUs; None when Service Quotas does not know the code there."""
        return self.quotas.quota_vcpus(region, code)

    def used_vcpus(self, region: str) -> dict[tuple[str, bool], int]:
        """vCPUs of pending/running instances in ``region`` by (quota code, spot). Read-only."""
        return self.quotas.used_vcpus(region)

    def quota_shortfalls(self, requests: Iterable[tuple[str, str, int, bool]]) -> list[QuotaShortfall]:
        """(instance type, region, node count, spot) requests, summed per code and region, that exceed
        what the quota leaves after running instances; each names the code and the increase command."""
        return self.quotas.shortfalls(requests)

    def quota_headroom(self, offers: Sequence[Offer]) -> list[QuotaHeadroom]:
        """What each vCPU quota leaves in the offers' regions, for ``catalog refresh``. Read-only."""
        return self.quotas.headroom(offers)

    def check_quota(self, instance_type: str, region: str, count: int, spot: bool) -> None:
        """Raise QuotaError (quota code + increase command) when ``count`` nodes exceed the quota."""
        self.check_quotas(
            [NodeSpec(name=f"n{i}", instance_type=instance_type, region=region, spot=spot) for i in range(count)]
        )

    def check_quotas(self, nodes: Sequence[NodeSpec]) -> None:
        """Raise QuotaError for the first quota ``nodes`` together would exceed. Read-only; called
        by ``create_nodes`` before anything is bought."""
        counts = Counter((node.instance_type, node.region, node.spot) for node in nodes)
        for short in self.quota_shortfalls([(t, r, n, s) for (t, r, s), n in sorted(counts.items())]):
            raise QuotaError(self.name, short.reason)

    def _missing(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[NodeSpec]:
        """The nodes of ``nodes`` the cluster does not have live yet (what a create would buy)."""
        present = {
            (region, tag_map(i).get(NODE_TAG))
            for region in sorted({n.region for n in nodes})
            for i in self._members(cluster_id, region, live=True)
        }
        return [n for n in nodes if (n.region, n.name) not in present]

    # ----- SSH keys -------------------------------------------------------------------------
    def ensure_ssh_key(self, name: str, public_key: str, region: str | None = None) -> str:
        """Import ``public_key`` as key pair ``name`` in ``region`` unless it exists."""
        region = region or self.regions[0]
        if self.client.describe_key_pairs(region, [name]):
            return name
        return self.client.import_key_pair(region, name, public_key, [{"Key": "provisioner", "Value": "ssh-key"}])

    # ----- the cluster's own security group (SupportsFirewall; network.ensure_ssh_group) ---------
    def ensure_firewall(self, cluster_id: str, allowed_cidrs: Sequence[str], region: str) -> str:
        """The cluster's security group in ``region`` (tcp/22 from ``allowed_cidrs``, all within the
        group): every later launch of the cluster there gets it instead of the VPC's ``default`` group.
        Idempotent. Call before ``create_nodes``. PlanError, ProviderError."""
        tags = {CLUSTER_TAG: cluster_id, OWNER_TAG: self.owner or owner_id()}
        group_id = self.network.ensure_ssh_group(cluster_id, region, allowed_cidrs, tags)
        self._ssh_groups[(cluster_id, region)] = group_id
        self._cluster_regions.setdefault(cluster_id, set()).add(region)
        return group_id

    def remove_firewall(self, cluster_id: str) -> None:
        """Delete the cluster's groups once its instances are terminated (``delete_nodes`` does the
        same); what is still in use is left for the next call. Gone already is success."""
        self._release(cluster_id, sorted(set(self.regions) | self._cluster_regions.get(cluster_id, set())), wait=True)
        for key in [key for key in self._ssh_groups if key[0] == cluster_id]:
            del self._ssh_groups[key]

    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create the nodes not yet present (by name); all-or-nothing; see the module docstring.

        Blocks for the API calls only (not for boot). Raises PlanError (before any request) for
        what the adapter cannot create, CapacityError, QuotaError, CredentialsError,
        RateLimitError or ProviderAPIError.
        """
        require_capabilities(self.name, self.capabilities, nodes)
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique within a cluster")
        efa_zones = efa_zones_of(nodes)
        self._cluster_regions.setdefault(cluster_id, set()).update(n.region for n in nodes)
        missing = self._missing(cluster_id, nodes)
        # a quota refusal (and below, a missing image) before anything is bought; Capacity Block
        # instances run in capacity already bought, not under the on-demand quotas (UNVERIFIED)
        self.check_quotas([n for n in missing if not n.capacity_block_hours])
        for spec in missing:
            self.images.for_node(spec)
        in_block = [n for n in nodes if n.capacity_block_hours]
        if not in_block:
            self._ensure_efa(cluster_id, nodes, efa_zones, None)
            ids = self._create(cluster_id, nodes)
            return answer(self.name, cluster_id, nodes, ids, lambda: self.get_nodes(cluster_id))
        block = self.reserve(cluster_id, in_block)
        try:  # from here on the block is paid: every error says so, and none is a CapacityError (no failover)
            self._ensure_efa(cluster_id, nodes, efa_zones, block)
            ids = self._create(cluster_id, nodes)
            return answer(self.name, cluster_id, nodes, ids, lambda: self.get_nodes(cluster_id))
        except ProviderError as exc:
            raise ProviderError(self.name, f"{exc.message}; {block.bought()}") from exc

    def _ensure_efa(
        self, cluster_id: str, nodes: Sequence[NodeSpec], zones: dict[str, str | None], block: Block | None
    ) -> None:
        """Make or adopt the EFA placement of each region in ``zones`` (``network``)."""
        first = {n.region: n for n in reversed(nodes)}
        for region, zone in sorted(zones.items()):
            in_block = block is not None and bool(first[region].capacity_block_hours)
            self._efa[(cluster_id, region)] = self.network.ensure(
                cluster_id,
                region,
                block.zone if in_block and block is not None else zone,
                node_tags(self, cluster_id, first[region], node=False),
                placement=not in_block,
            )

    def _create(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> dict[str, str]:
        """``orchestrate.create``; after a failure (the instances rolled back) the cluster's EFA groups
        are released too, best effort."""
        try:
            return create(RunLauncher(self, cluster_id, nodes), nodes)
        except ProviderError:
            if any(key[0] == cluster_id for key in self._efa):
                try:
                    self._release(cluster_id, sorted({n.region for n in nodes}))
                except ProviderError as cleanup:
                    log.error("aws: could not release the EFA groups of %s: %s", cluster_id, cleanup.message)
            raise

    def reserve(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> Block:
        """The cluster's active Capacity Block for ``nodes`` (every one asking for it): adopted by its
        cluster tag, else bought, then waited for until active (``CapacityBlocks.ensure``). What
        ``create_nodes`` does first for such nodes, and what the pulumi engine calls before ``pulumi up``
        (the stack launches into the block, never buys one). Blocks until the block starts. Raises
        PlanError (nodes that ask for no block, or for different ones) or CapacityError before a purchase;
        after one, a ProviderError saying what was bought (``Block.bought``)."""
        require_capabilities(self.name, self.capabilities, nodes)
        if not nodes or not all(n.capacity_block_hours for n in nodes):
            raise PlanError("aws: reserve() is for nodes that ask for a Capacity Block; nothing was bought")
        self._cluster_regions.setdefault(cluster_id, set()).update(n.region for n in nodes)
        block = self._block_of[cluster_id] = self.blocks.ensure(cluster_id, nodes)
        return block

    def reservations_left(self, cluster_id: str) -> list[str]:
        """What ``down``/``gc`` say about the cluster's Capacity Blocks that still hold capacity: one
        sentence each (paid, not cancellable, its end). Read-only."""
        regions = sorted(set(self.regions) | self._cluster_regions.get(cluster_id, set()))
        return [block.notice() for region in regions for block in self.blocks.find(cluster_id, region)]

    def list_owned(self) -> list[OwnedNode]:
        """Every live instance carrying the cluster tag in the adapter's regions, with owner and expiry."""
        return instances.owned(self.client, self.name, self.regions)

    # ----- read / delete --------------------------------------------------------------------
    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every instance tagged with the cluster in the adapter's regions (and any region this
        adapter created the cluster's nodes in), terminated ones included while EC2 lists them."""
        regions = sorted(set(self.regions) | self._cluster_regions.get(cluster_id, set()))
        return [
            instances.to_node(self.name, cluster_id, region, i)
            for region in regions
            for i in self._members(cluster_id, region)
        ]

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        """``SupportsLeaseRenewal``: the RENEWED_TAG of the cluster's instances under ``lease`` (instances.renew)."""
        return instances.renew(self.client, self.get_nodes(cluster_id), lease, owner, at)

    def topology(self, cluster_id: str) -> dict[str, list[str]]:
        """{node name: [network node, ...]} (outermost first) of the cluster's running instances
        from DescribeInstanceTopology: what ``provisioner.render``'s ``topology=`` turns into Slurm's
        topology.conf. Instances EC2 gives no topology for (types without it, not yet running) are
        left out. Read-only."""
        regions = sorted(set(self.regions) | self._cluster_regions.get(cluster_id, set()))
        return instances.topology(self.client, cluster_id, regions)

    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Terminate the cluster's instances (those in ``node_ids`` when given). Already gone is
        success; ids of another cluster are ignored. Does not wait."""
        regions = sorted(set(self.regions) | self._cluster_regions.get(cluster_id, set()))
        for region in regions:
            ids = [
                str(i["InstanceId"])
                for i in self._members(cluster_id, region, live=True)
                if node_ids is None or i["InstanceId"] in node_ids
            ]
            if ids:
                instances.terminate(self.client, region, ids)
        if node_ids is None or not any(self._members(cluster_id, region, live=True) for region in regions):
            self._release(cluster_id, regions, wait=True)

    def _release(self, cluster_id: str, regions: Sequence[str], *, wait: bool = False) -> None:
        """Delete the cluster's EFA placement and security groups (``network.release``) in ``regions``;
        with ``wait``, first wait up to ``release_timeout_s`` for its instances to terminate (only where
        such groups exist). What is still in use is logged and left for the next ``delete_nodes``."""
        for region in regions:

            def remaining(region: str = region) -> int:
                return sum(
                    1 for i in self._members(cluster_id, region) if i.get("State", {}).get("Name") != "terminated"
                )

            def count(region: str = region) -> int:
                waited = 0.0
                while wait and remaining() and waited < self.release_timeout_s:
                    self._sleep(self.poll_interval_s)
                    waited += self.poll_interval_s
                return remaining()

            left = self.network.release(cluster_id, region, count)
            if left:
                log.warning(
                    "aws: left %s of cluster %s in %s (instances not yet terminated); the adapter's next "
                    "delete_nodes of the cluster deletes them",
                    ", ".join(left),
                    cluster_id,
                    region,
                )
            self._efa.pop((cluster_id, region), None)

    def _members(self, cluster_id: str, region: str, *, live: bool = False) -> list[dict[str, Any]]:
        return instances.members(self.client, cluster_id, region, live=live)

    def billed(self, cluster_id: str, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
        """``SupportsBilling``: Cost Explorer's cost of the cluster's tag (providers.aws.billing)."""
        return billing.billed(self.client, cluster_id, start, end)


__all__ = [
    "CLUSTER_TAG",
    "DEFAULT_REGIONS",
    "EC2_USER_DATA_MAX_BYTES",
    "EXPIRES_TAG",
    "METADATA_OPTIONS",
    "NODE_TAG",
    "OWNER_TAG",
    "AWSProvider",
    "ec2_user_data",
    "key_name",
]
