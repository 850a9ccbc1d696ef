"""The Vast.ai adapter: marketplace asks in, labelled single-host instances out.

Vast has no tags: every instance this adapter rents carries the label
``<cluster_id>/<node name>/owner=<owner>/lease=<lease mark>/renewed=<stamp>/run=<run id>``
(providers.vastai.labels), which is how ``get_nodes`` finds a cluster and whose it is
(``parse_label`` reads it strictly: cluster and node names never contain ``/``, so one cluster's
nodes are never mistaken for another's; a label without the ``owner=`` part,
``research/notebook`` say, parses as an instance with no owner mark, which is never deleted
without ``--force-unowned``). Vast rents one host per ask, so an n-node cluster is n asks of the
same shape in one country.

``create_nodes`` is idempotent on (cluster_id, node name), all-or-nothing, and issues the
rent calls concurrently (bounded by the client's rate limits); see its docstring.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

from provisioner.errors import CapacityError, ProviderError
from provisioner.offer import Offer
from provisioner.providers.adapter import RestAdapter, require_capabilities
from provisioner.providers.base import (
    Bootstrap,
    Capability,
    Node,
    NodeSpec,
    NodeStatus,
    OfferQuery,
    OwnedNode,
    expiry_label,
    owner_id,
)
from provisioner.providers.billing import Billed
from provisioner.providers.orchestrate import Launcher, Member, answer, create
from provisioner.providers.vastai import CAPABILITIES, billing
from provisioner.providers.vastai import offers as vast_offers
from provisioner.providers.vastai.client import PROVIDER, VastClient
from provisioner.providers.vastai.labels import cluster_label, label_renewed, label_run, parse_label
from provisioner.providers.vastai.models import BundleOffer, Instance
from provisioner.termtext import counted

log = logging.getLogger("provisioner.providers.vastai")
T = TypeVar("T")

DEFAULT_IMAGE = "vastai/base-image:@vastai-automatic-tag"  # the spec's default image
MAX_WORKERS = 16
USER_DATA_PATH = "/var/lib/provisioner/user-data"
_PENDING = {None, "", "created", "loading", "scheduling", "rebooting", "unknown"}
_STOPPED = {"stopped", "exited", "frozen"}


def node_status(instance: Instance) -> NodeStatus:
    """Vast's ``actual_status``/``intended_status`` -> NodeStatus (raw state kept by the caller)."""
    actual, intended = instance.actual_status, instance.intended_status
    message = (instance.status_msg or "").lower()
    if actual == "offline" or "error" in message or "failed" in message:
        return NodeStatus.FAILED
    if actual == "running":
        return NodeStatus.STOPPING if intended == "stopped" else NodeStatus.RUNNING
    if actual in _STOPPED:
        return NodeStatus.STOPPING
    if actual in _PENDING:
        return NodeStatus.PENDING
    return NodeStatus.FAILED


def onstart_script(user_data: str, *, script: bool) -> str:
    """A Vast ``onstart`` command that installs ``user_data`` and runs it.

    Vast containers do not run cloud-init on their own: a script (``script``: the NodeSpec's
    bootstrap is ``script``) is executed; a cloud-init document is handed to cloud-init when the
    image has it. The payload
    travels base64-encoded so no quoting in it can break the command.
    """
    encoded = base64.b64encode(user_data.encode()).decode()
    path = shlex.quote(USER_DATA_PATH)
    run = (
        f"{path}"
        if script
        else f"(command -v cloud-init >/dev/null && cloud-init --file {path} init "
        f"&& cloud-init --file {path} modules --mode=config "
        f"&& cloud-init --file {path} modules --mode=final)"
    )
    return (
        f"mkdir -p {shlex.quote(USER_DATA_PATH.rsplit('/', 1)[0])} && echo {encoded} | base64 -d > {path} "
        f"&& chmod 700 {path} && {run}"
    )


class VastAIProvider(RestAdapter[VastClient]):
    """Vast.ai through its REST API (``console.vast.ai/api``). Construction reads the environment."""

    name: ClassVar[str] = PROVIDER
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES
    client_class = VastClient

    # -- read-only ------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raises CredentialsError if the key is rejected."""
        self.client.current_user()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """Rentable asks matching ``query`` (CLI default filters, best score first). One search call."""
        asks = self.client.search_offers(vast_offers.query_body(query))
        asks = [ask for ask in asks if vast_offers.matches(ask, query)]
        usable = vast_offers.usable(asks)
        counts = vast_offers.shape_counts(usable)
        return self._screened(usable, lambda ask: [vast_offers.to_offer(ask, counts[vast_offers.shape_of(ask)])])

    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every instance labelled for ``cluster_id`` (all pages of the instance list)."""
        return [self._node(cluster_id, inst) for inst in self._cluster_instances(cluster_id)]

    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Add ``public_key`` to the account unless present (Vast keys have no names; matched by text)."""
        wanted = " ".join(public_key.split()[:2])
        for key in self.client.list_ssh_keys():
            if " ".join(key.text.split()[:2]) == wanted:
                return str(key.id)
        log.info("vastai: registering ssh key %s", name)
        return str(self.client.create_ssh_key(public_key.strip()).id)

    # -- create ---------------------------------------------------------------------------
    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Rent one ask per node, label it ``<cluster_id>/<name>``, return the nodes (pending).

        Idempotent: names already labelled in the account are adopted, not rented again.
        One offer search per (instance type, region, spot) group; a node's ``offer_id`` is
        rented when that ask is still listed, otherwise another ask of the same shape. Rent
        calls run concurrently through providers.orchestrate: a rent that times out or gets a
        5xx is reconciled by listing (an instance that appeared is adopted; after a definite
        500/502/503 with nothing appeared the rent is tried once more); if any node cannot be
        rented, every instance this call made is destroyed and the error is raised
        (CapacityError names the types, regions and counts tried); when something may remain
        the error names the cluster and the gc command. Does not wait for boot.
        """
        require_capabilities(PROVIDER, self.capabilities, nodes)
        names = [spec.name for spec in nodes]
        if len(set(names)) != len(names):
            raise ProviderError(PROVIDER, f"duplicate node names in {names}")
        launcher = _Launcher(self, cluster_id)
        ids = create(launcher, nodes)
        return answer(
            PROVIDER, cluster_id, nodes, ids, lambda: [self._node(cluster_id, inst) for inst in launcher.listed]
        )

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        """``SupportsLeaseRenewal``: rewrite the label of each instance of ``cluster_id`` with this
        ``owner`` and ``lease`` with ``/renewed=<at>`` (without it when ``at`` is None), one
        ``PUT /api/v0/instances/{id}/`` each (a label set is idempotent)."""
        count = 0
        for instance in self._cluster_instances(cluster_id):
            parsed = parse_label(instance.label)
            if parsed is None or parsed[2] != owner or parsed[3] != lease:
                continue
            stamp = expiry_label(at) if at is not None else None
            run = label_run(instance.label)  # the run mark stays as the create wrote it
            self.client.set_label(instance.id, cluster_label(cluster_id, parsed[1], owner, lease, stamp, run))
            count += 1
        return count

    def list_owned(self) -> list[OwnedNode]:
        """Every instance whose label parses (``parse_label``), with the owner it names (None when
        it names none). Vast has no tags: the expiry is the cluster record's."""
        found = []
        for instance in self.client.iter_instances():
            parsed = parse_label(instance.label)
            if parsed is not None:
                node = self._node(parsed[0], instance)
                found.append(OwnedNode(node, node.owner))
        return found

    def _assign_asks(self, todo: Sequence[NodeSpec]) -> dict[str, tuple[int, float | None]]:
        """node name -> (ask id, bid $/h or None). Raises CapacityError before renting anything."""
        plan: dict[str, tuple[int, float | None]] = {}
        groups: dict[tuple[str, str, bool], list[NodeSpec]] = {}
        for spec in todo:
            groups.setdefault((spec.instance_type, spec.region, spec.spot), []).append(spec)
        for (instance_type, region, spot), specs in groups.items():
            given = list(dict.fromkeys(int(s.offer_id) for s in specs if s.offer_id and s.offer_id.isdigit()))
            # Always search: on a marketplace a planned ask is often rented by someone else
            # by the time the plan is applied (and bundled-catalog ids never rent). Planned
            # asks still listed are kept; the others are replaced by asks of the same shape,
            # cheapest first (then most reliable), not in Vast's score order, so the extra
            # asks cost what the plan priced, or close.
            found = sorted(
                self._search_asks(instance_type, region, spot),
                key=lambda a: (
                    (a.min_bid if spot and a.min_bid is not None else a.dph_total),
                    -(a.reliability or 0.0),
                    a.id,
                ),
            )
            by_id: dict[int, BundleOffer] = {ask.id: ask for ask in found}
            candidates = [i for i in given if i in by_id] + [i for i in by_id if i not in given]
            if len(candidates) < len(specs):
                raise CapacityError(
                    PROVIDER,
                    f"only {len(candidates)} rentable asks of {instance_type} in "
                    f"{region}{' (interruptible)' if spot else ''} for {counted(len(specs), 'node')}; "
                    "nothing rented",
                )
            chosen: dict[str, int] = {}
            for spec in specs:  # a node keeps its own offer when it is still rentable
                own = int(spec.offer_id) if spec.offer_id and spec.offer_id.isdigit() else None
                if own in candidates and own not in chosen.values():
                    chosen[spec.name] = own
            spare = iter([i for i in candidates if i not in chosen.values()])
            for spec in specs:
                ask_id = chosen.get(spec.name) or next(spare)
                ask = by_id.get(ask_id)
                bid = None
                if spec.spot:
                    bid = spec.bid_usd_per_hour or (ask.min_bid or ask.dph_total if ask else None) or 0.001
                    bid = min(max(bid, 0.001), 128.0)
                plan[spec.name] = (ask_id, bid)
        return plan

    def _search_asks(self, instance_type: str, region: str, spot: bool) -> list[BundleOffer]:
        shape = vast_offers.parse_instance_type(instance_type)
        if shape is None:
            raise ProviderError(PROVIDER, f"instance type {instance_type!r} is not a Vast shape like 8x_H100_SXM")
        count, gpu_name = shape
        body = vast_offers.search_body(
            spot=spot, gpu_names=[gpu_name], num_gpus=count, regions=[region] if region and region != "unknown" else []
        )
        return [
            ask
            for ask in self.client.search_offers(body)
            if ask.rentable
            and not ask.rented
            and ask.gpu_name == gpu_name
            and ask.num_gpus == count
            and (not region or region == "unknown" or vast_offers.region_of(ask.geolocation)[0] == region)
        ]

    def _rent_body(self, cluster_id: str, spec: NodeSpec, bid: float | None) -> dict[str, Any]:
        # The official client's create body (vastai/api/instances.py build_create_instance_payload):
        # ``client_id`` "me" and ``env`` an object of variables (it turns "-e K=V" into {"K": "V"}).
        # The fields it sends as null or false (extra, image_login, python_utf8, ...) are left out:
        # the server's defaults, and the spec requires only ``image``.
        body: dict[str, Any] = {
            "client_id": "me",
            "image": spec.image or DEFAULT_IMAGE,
            "label": cluster_label(cluster_id, spec.name, spec.owner or owner_id(), spec.lease, run=spec.run),
            "disk": float(max(1, round(spec.disk_gib * 1.073741824))),  # Vast sizes disks in GB
            "runtype": "ssh",  # the CLI's default runtype (the SDK leaves it to the server, which picks ssh)
            "env": {"PROVISIONER_CLUSTER": cluster_id, "PROVISIONER_NODE": spec.name},
        }
        if spec.user_data:
            body["onstart"] = onstart_script(spec.user_data, script=spec.bootstrap is Bootstrap.SCRIPT)
        if bid is not None:
            body["price"] = round(bid, 6)
        else:
            body["cancel_unavail"] = True  # on-demand: fail fast (410) instead of waiting for the host
        return body

    def _destroy(self, instance_ids: Sequence[int]) -> list[int]:
        """Destroy ``instance_ids``; return those still present afterwards (one verifying list)."""
        if not instance_ids:
            return []
        outcomes = _run_all(self.client.destroy_instance, list(instance_ids))
        suspect = [i for i, o in zip(instance_ids, outcomes, strict=True) if isinstance(o, ProviderError)]
        try:
            alive = {inst.id for inst in self.client.iter_instances()}
        except ProviderError:
            return suspect
        return [i for i in instance_ids if i in alive]

    # -- delete ---------------------------------------------------------------------------
    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Destroy the cluster's instances (only ``node_ids`` if given). Gone already is success.

        Only instances labelled for this cluster are touched; ids that are not (any more)
        are treated as already deleted. Does not wait.
        """
        ids = [inst.id for inst in self._cluster_instances(cluster_id)]
        if node_ids is not None:
            wanted = {str(i) for i in node_ids}
            ids = [i for i in ids if str(i) in wanted]
        errors = [o for o in _run_all(self.client.destroy_instance, ids) if isinstance(o, ProviderError)]
        if errors:
            raise errors[0]

    # -- helpers --------------------------------------------------------------------------
    def _cluster_instances(self, cluster_id: str) -> list[Instance]:
        return [
            inst
            for inst in self.client.iter_instances()
            if (parsed := parse_label(inst.label)) is not None and parsed[0] == cluster_id
        ]

    @staticmethod
    def _name(cluster_id: str, instance: Instance) -> str:
        parsed = parse_label(instance.label)
        return parsed[1] if parsed is not None and parsed[0] == cluster_id else ""

    def _node(self, cluster_id: str, instance: Instance) -> Node:
        region = instance.country_code or (
            vast_offers.region_of(instance.geolocation)[0] if instance.geolocation else ""
        )
        private = (instance.local_ipaddrs or "").split()
        ssh_host, ssh_port = instance.ssh_endpoint() or (None, 22)
        parsed = parse_label(instance.label)
        return Node(
            provider=PROVIDER,
            id=str(instance.id),
            name=self._name(cluster_id, instance),
            cluster_id=cluster_id,
            status=node_status(instance),
            instance_type=vast_offers.instance_type_of(instance.num_gpus or 0, instance.gpu_name or "")
            if instance.gpu_name
            else "",
            region=region,
            public_ip=instance.public_ipaddr or None,
            private_ip=private[0] if private else None,
            provider_state=instance.actual_status or "provisioning",  # Vast: null while provisioning
            ssh_host=ssh_host,
            ssh_port=ssh_port,
            launched_at=dt.datetime.fromtimestamp(instance.start_date, dt.UTC) if instance.start_date else None,
            owner=parsed[2] if parsed else None,
            lease=parsed[3] if parsed else None,
            renewed_at=label_renewed(instance.label),
            run=label_run(instance.label),
        )

    def billed(self, cluster_id: str, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
        """``SupportsBilling``: Vast.ai's charges of the cluster's contracts (providers.vastai.billing)."""
        return billing.billed(self.client, node_ids, start, end)


def _run_all(fn: Callable[[Any], T], items: Iterable[Any]) -> list[T | ProviderError]:
    """``fn`` over ``items`` on a small thread pool; ProviderErrors are returned, not raised."""
    items = list(items)

    def call(item: Any) -> T | ProviderError:
        try:
            return fn(item)
        except ProviderError as exc:
            return exc

    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(items)), thread_name_prefix="vastai") as pool:
        return list(pool.map(call, items))


class _Launcher(Launcher):
    """One ``create_nodes`` call: one rent per node, the asks chosen before anything is rented."""

    workers = MAX_WORKERS
    relaunch_on_5xx = True  # Vast rents nothing on a 5xx it answers (a lost answer is status 0)

    def __init__(self, provider: VastAIProvider, cluster_id: str) -> None:
        super().__init__(PROVIDER, cluster_id)
        self.adapter = provider
        self.plan: dict[str, tuple[int, float | None]] = {}
        self.listed: list[Instance] = []  # the latest listing: create_nodes answers from it, polling no more

    def members(self) -> list[Member]:
        self.listed = self.adapter._cluster_instances(self.cluster_id)
        return [Member.of(self.adapter._node(self.cluster_id, inst)) for inst in self.listed]

    def prepare(self, missing: Sequence[NodeSpec]) -> None:
        for public_key in sorted({spec.ssh_public_key for spec in missing if spec.ssh_public_key}):
            self.adapter.ensure_ssh_key(f"{self.cluster_id}-key", public_key)
        self.plan = self.adapter._assign_asks(missing)

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        (spec,) = batch
        ask_id, bid = self.plan[spec.name]
        body = self.adapter._rent_body(self.cluster_id, spec, bid)
        return [str(self.adapter.client.create_instance(ask_id, body).new_contract)]

    def terminate(self, ids: Sequence[str]) -> list[str]:
        return [str(i) for i in self.adapter._destroy([int(i) for i in ids])]

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        ask = self.plan.get(spec.name, (None, None))[0]
        return f"{spec.instance_type} in {spec.region or 'any region'} (ask {ask})"


__all__ = [
    "VastAIProvider",
    "cluster_label",
    "label_renewed",
    "label_run",
    "node_status",
    "onstart_script",
    "parse_label",
]
