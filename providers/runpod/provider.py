"""The RunPod adapter: offers from the v2 catalog, pods as nodes.

Pods are containers, not VMs. How the adapter maps the Provider contract onto them:

- A node is one pod named ``<cluster_id>-<node name>``. v2 pods have no tags or labels, so
  the cluster id, node name and instance type also travel as environment variables
  (``PROVISIONER_CLUSTER`` etc.); ``get_nodes`` selects on the variable, not the name, so
  cluster ``a`` never picks up the pods of cluster ``a-b``.
- ``user_data`` cannot run through cloud-init in a container. It must be a script (``#!``;
  anything else, cloud-config included, is refused with PlanError before a pod is bought). It
  is passed base64-encoded in ``PROVISIONER_USER_DATA_B64`` and the pod's start command runs
  it in the background, then hands over to the image's own ``/start.sh`` (which starts sshd
  on RunPod images), or sleeps when there is none.
- On-demand pods use REST v2 ``POST /v2/pods``. Spot pods use GraphQL ``podRentInterruptable``
  because v2 has no interruptible create; both show up in ``GET /v2/pods``.
- v2 pods have no tags: the cluster, the owner (``PROVISIONER_OWNER``) and the expiry
  (``PROVISIONER_EXPIRES``, ISO-8601 UTC) travel as environment variables, which the list
  call returns; ``list_owned`` reads them for ``provisioner gc``.
- Create goes through providers.orchestrate (adopt by name after a lost answer, one more
  launch after a definite 5xx, rollback, the fail-closed error naming the gc command).
- SSH keys are account-wide on RunPod: ``ensure_ssh_key`` adds the key to the account's set
  (a full-replacement PUT, so it re-reads first) and pods start with ``startSsh``.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from provisioner.capabilities import Bootstrap
from provisioner.errors import CapacityError, ProviderAPIError, ProviderError
from provisioner.offer import Offer
from provisioner.providers.adapter import RestAdapter, require_capabilities
from provisioner.providers.base import (
    Capability,
    Node,
    NodeSpec,
    NodeStatus,
    OfferQuery,
    OwnedNode,
    expiry_text,
    owner_id,
    parse_expiry,
)
from provisioner.providers.billing import Billed, provider_time
from provisioner.providers.orchestrate import Launcher, Member, answer, create, with_note
from provisioner.providers.runpod import CAPABILITIES, billing, clusters, naming
from provisioner.providers.runpod.client import NAME, RunPodClient
from provisioner.providers.runpod.models import GpuType, Pod
from provisioner.providers.runpod.offers import gpu_offers

log = logging.getLogger("provisioner.providers.runpod")

CLUSTER_ENV = "PROVISIONER_CLUSTER"
NODE_ENV = "PROVISIONER_NODE"
INSTANCE_TYPE_ENV = "PROVISIONER_INSTANCE_TYPE"
OWNER_ENV = "PROVISIONER_OWNER"
EXPIRES_ENV = "PROVISIONER_EXPIRES"
LEASE_ENV = "PROVISIONER_LEASE"
RUN_ENV = "PROVISIONER_RUN"
USER_DATA_ENV = "PROVISIONER_USER_DATA_B64"
DEFAULT_IMAGE = naming.DEFAULT_IMAGE

STATUS_MAP = {
    "PROVISIONING": NodeStatus.PENDING,
    "STARTING": NodeStatus.PENDING,
    "RUNNING": NodeStatus.RUNNING,
    # EXITED: the container stopped; the pod still exists and bills its disk.
    "EXITED": NodeStatus.STOPPING,
    "ERROR": NodeStatus.FAILED,
    "TERMINATED": NodeStatus.TERMINATED,
}
# RunPod publishes no per-host score; hosts under 98 % 30-day uptime leave the pool, and
# Secure Cloud runs in RunPod's own data centers.
LAUNCH_WORKERS = 8
"""Pods created concurrently: enough to use the limiter's burst; the limiter sets the pace."""


class _Target(NamedTuple):
    """What one pod's launch asks for: RunPod GPU id, GPU count, cloud, spot bid per GPU (None:
    on-demand)."""

    gpu_id: str
    gpus: int
    cloud: str
    bid_per_gpu: float | None


class RunPodProvider(RestAdapter[RunPodClient]):
    """RunPod adapter (see module docstring). Holds a client; never prints its key."""

    name: ClassVar[str] = NAME
    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES
    client_class = RunPodClient

    # -- read-only ---------------------------------------------------------------------------
    def check_credentials(self) -> None:
        """Raise CredentialsError if the key is rejected (one authenticated GET)."""
        self.client.get_ssh_keys()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """One offer per (GPU type, cloud, pod GPU count, data center with stock).

        Stock comes from the catalog's per-data-center availability for one GPU, so a
        larger pod can still fail for capacity at create time.
        """
        spot = {} if query.spot is False else {p.id: p for p in self.client.list_spot_prices()}
        wanted = {model.upper() for model in query.gpu_models}

        def offers_of(gpu: GpuType) -> list[Offer]:
            model = naming.gpu_model(gpu.id, gpu.name)
            if wanted and model.upper() not in wanted:
                return []
            offers: list[Offer] = []
            for cloud in ("SECURE", "COMMUNITY"):
                spot_price = spot.get(gpu.id)
                per_gpu_spot = None
                if spot_price is not None:
                    per_gpu_spot = (
                        spot_price.secure_spot_price if cloud == "SECURE" else spot_price.community_spot_price
                    )
                offers.extend(gpu_offers(gpu, model, cloud, per_gpu_spot, query))
            return offers

        return self._screened(self.client.list_gpu_types().gpus, offers_of)

    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every pod carrying ``PROVISIONER_CLUSTER=<cluster_id>`` (Instant Cluster members too), by name."""
        nodes = [
            clusters.member_node(self, cluster_id, pod) if pod.cluster else self._node(cluster_id, pod)
            for pod in self.client.list_pods(include_cluster_pods=True)
            if pod.env.get(CLUSTER_ENV) == cluster_id
        ]
        return sorted(nodes, key=lambda node: node.name)

    def _node(self, cluster_id: str, pod: Pod) -> Node:
        prefix = f"{cluster_id}-"
        name = pod.env.get(NODE_ENV) or pod.name.removeprefix(prefix)
        gpu_type = pod.env.get(INSTANCE_TYPE_ENV)
        if not gpu_type and pod.gpu:
            gpu_type = naming.instance_type(pod.gpu.id, pod.gpu.id, pod.gpu.count, pod.cloud)
        private_ip = pod.global_networking.ip if pod.global_networking else None
        ssh_host, ssh_port = pod.ssh_endpoint() or (None, 22)
        return Node(
            provider=NAME,
            id=pod.id,
            name=name,
            cluster_id=cluster_id,
            status=STATUS_MAP.get(pod.status, NodeStatus.PENDING),
            instance_type=gpu_type or "",
            region=pod.data_center_id or "",
            public_ip=pod.public_ip(),
            private_ip=private_ip,
            provider_state=pod.status,
            ssh_host=ssh_host,
            ssh_port=ssh_port,
            launched_at=provider_time(pod.created_at),
            owner=pod.env.get(OWNER_ENV),
            lease=pod.env.get(LEASE_ENV),
            run=pod.env.get(RUN_ENV),
        )

    def billed(self, cluster_id: str, node_ids: Mapping[str, str], start: dt.datetime, end: dt.datetime) -> Billed:
        """``SupportsBilling``: RunPod's billing record of the cluster's pods (providers.runpod.billing)."""
        return billing.billed(self.client, node_ids, start, end)

    # -- mutations ----------------------------------------------------------------------------
    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Add ``public_key`` (commented ``name``) to the account's keys unless present; return name."""
        parts = public_key.split()
        if len(parts) < 2:
            raise ProviderAPIError(NAME, 0, f"ssh key {name!r} is not an authorized_keys line")
        keys = self.client.get_ssh_keys()
        if any(key.split()[:2] == parts[:2] for key in keys):
            return name
        self.client.put_ssh_keys([*keys, f"{parts[0]} {parts[1]} {name}"])
        return name

    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create every missing pod of the cluster; idempotent on (cluster_id, node name).

        Lists the cluster first and skips names that exist. Pods are created from a small
        thread pool, so the client's rate limiter, not request latency, spaces the calls.
        A launch that times out or gets a 5xx is reconciled by listing again and adopting
        the pod if it appeared; only a definite 5xx (not a timeout or 504, where the pod may
        still be on its way) is launched once more. If a launch fails, no further launch starts; the pods made
        here (including those whose launch was already in flight) are deleted and the error
        is re-raised (CapacityError names the GPU type, data center and counts); if that
        cleanup fails too, the message lists the pods left and how to delete them.
        Does not wait for the pods to run.
        """
        # Pods are containers: nothing would run cloud-config, so it is refused before buying.
        require_capabilities(NAME, self.capabilities, nodes)
        if clusters.wants_cluster(nodes):  # an Instant Cluster product is bought whole: see clusters.py
            return clusters.create(self, cluster_id, nodes)
        names = [spec.name for spec in nodes]
        if len(set(names)) != len(names):
            raise ProviderAPIError(NAME, 0, f"node names must be unique within a cluster: {names}")
        launcher = _Launcher(self, cluster_id)
        ids = create(launcher, nodes)
        return answer(NAME, cluster_id, nodes, ids, lambda: launcher.listed)

    def list_owned(self) -> list[OwnedNode]:
        """Every pod carrying ``PROVISIONER_CLUSTER`` (the env is RunPod's tags), with owner and expiry."""
        found = []
        for pod in self.client.list_pods(include_cluster_pods=True):
            cluster_id = pod.env.get(CLUSTER_ENV)
            if cluster_id and pod.status != "TERMINATED":
                node = clusters.member_node(self, cluster_id, pod) if pod.cluster else self._node(cluster_id, pod)
                found.append(OwnedNode(node, pod.env.get(OWNER_ENV), parse_expiry(pod.env.get(EXPIRES_ENV))))
        return found

    def _targets(self, specs: Sequence[NodeSpec]) -> dict[str, _Target]:
        """What each node's launch asks for, resolved before anything is bought (one catalog or
        spot-price lookup per distinct instance type, not one per pod)."""
        resolved: dict[tuple[str, str | None, int], tuple[str, int, str]] = {}
        floors: dict[tuple[str, str], float] = {}
        targets: dict[str, _Target] = {}
        for spec in specs:
            key = (spec.instance_type, spec.offer_id, spec.gpus)
            if key not in resolved:
                resolved[key] = self._resolve(spec)
            gpu_id, count, cloud = resolved[key]
            if spec.spot and not spec.bid_usd_per_hour and (gpu_id, cloud) not in floors:
                floors[gpu_id, cloud] = self._spot_floor(gpu_id, cloud)
            bid = (
                None
                if not spec.spot
                else (spec.bid_usd_per_hour / count if spec.bid_usd_per_hour else floors[gpu_id, cloud])
            )
            targets[spec.name] = _Target(gpu_id, count, cloud, bid)
        return targets

    def _launch_once(self, cluster_id: str, spec: NodeSpec, target: _Target) -> Pod:
        gpu_id, count, cloud, bid = target
        env = {
            CLUSTER_ENV: cluster_id,
            NODE_ENV: spec.name,
            INSTANCE_TYPE_ENV: spec.instance_type,
            OWNER_ENV: spec.owner or owner_id(),
        }
        if spec.expires_at is not None:
            env[EXPIRES_ENV] = expiry_text(spec.expires_at)
        if spec.lease:
            env[LEASE_ENV] = spec.lease
        if spec.run:
            env[RUN_ENV] = spec.run
        args = ""
        if spec.user_data:
            env[USER_DATA_ENV] = base64.b64encode(spec.user_data.encode()).decode()
            if spec.bootstrap is Bootstrap.SCRIPT:
                args = _start_command()
        pod_name = f"{cluster_id}-{spec.name}"
        image = spec.image or DEFAULT_IMAGE
        center = spec.region if spec.region and spec.region != "any" else None
        log.info("runpod: launching %s (%s x%d, %s, %s)", pod_name, gpu_id, count, cloud, center or "any")
        if bid is not None:
            graphql_input: dict[str, Any] = {
                "name": pod_name,
                "imageName": image,
                "gpuTypeId": gpu_id,
                "cloudType": cloud,
                "gpuCount": count,
                "containerDiskInGb": spec.disk_gib,
                "volumeInGb": 0,
                "startSsh": True,
                "ports": "22/tcp",
                "dockerArgs": args,
                "bidPerGpu": round(bid, 4),
                "env": [{"key": key, "value": value} for key, value in env.items()],
            }
            if center:
                graphql_input["dataCenterId"] = center
            pod_id = self.client.rent_interruptible(graphql_input)
            try:
                return self.client.get_pod(pod_id)
            except ProviderError as exc:
                # The pod is bought: report it (so a rollback can delete it) rather than lose its id.
                log.warning("runpod: spot pod %s created but not readable yet (%s)", pod_id, exc.message)
                return Pod(
                    id=pod_id,
                    name=pod_name,
                    status="PROVISIONING",
                    env=env,
                    cloud=cloud,
                    dataCenterId=center,
                    gpu={"id": gpu_id, "count": count},
                )
        body: dict[str, Any] = {
            "name": pod_name,
            "image": image,
            "gpu": {"id": gpu_id, "count": count},
            "cloud": cloud,
            "disk": spec.disk_gib,
            "env": env,
            "ports": ["22/tcp"],
            "startSsh": True,
        }
        if args:
            body["args"] = args
        if center:
            body["dataCenterIds"] = [center]
        return self.client.create_pod(body)

    def _spot_floor(self, gpu_id: str, cloud: str) -> float:
        for price in self.client.list_spot_prices():
            if price.id == gpu_id:
                floor = price.secure_spot_price if cloud == "SECURE" else price.community_spot_price
                if floor:
                    return floor
        raise CapacityError(NAME, f"RunPod sells no interruptible {gpu_id} in {cloud} cloud")

    def _resolve(self, spec: NodeSpec) -> tuple[str, int, str]:
        """(RunPod gpu id, GPU count, cloud) for a node spec."""
        parsed = naming.parse_instance_type(spec.instance_type)
        offer_gpu = spec.offer_id.replace("+", " ") if spec.offer_id else None  # offers write ' ' as '+'
        if parsed is None:  # a raw RunPod gpu id
            return offer_gpu or spec.instance_type, spec.gpus, "SECURE"
        count, token, cloud = parsed
        gpu_id = offer_gpu or naming.gpu_id_for_token(token)
        if gpu_id is None:
            gpu_id = next(
                (gpu.id for gpu in self.client.list_gpu_types().gpus if naming.derived_token_matches(token, gpu.name)),
                None,
            )
        if gpu_id is None:
            raise CapacityError(NAME, f"RunPod has no GPU type for instance type {spec.instance_type}")
        return gpu_id, count, cloud

    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Terminate the given pods (all of the cluster's when None). Gone already is success.

        Only pods carrying this cluster's id are touched: an id of another cluster (or of a pod
        not made by us) is ignored like an id that is already gone. Raises the first error after
        trying every pod; the message names the pods left.
        """
        in_clusters = clusters.delete(self, cluster_id, node_ids)  # Instant Clusters go whole
        members = [node.id for node in self.get_nodes(cluster_id) if node.id not in in_clusters]
        wanted = set(members if node_ids is None else node_ids)
        ids = [pod_id for pod_id in members if pod_id in wanted]
        errors: list[ProviderError] = []
        left = self._delete_ids(ids, errors)
        if errors:
            raise with_note(errors[0], f"pods not deleted: {', '.join(left)}")

    def _delete_ids(self, ids: Sequence[str], errors: list[ProviderError] | None = None) -> list[str]:
        left: list[str] = []
        for pod_id in ids:
            try:
                self.client.delete_pod(pod_id)
            except ProviderAPIError as exc:
                if exc.status == 404:
                    continue
                left.append(pod_id)
                if errors is not None:
                    errors.append(exc)
            except ProviderError as exc:
                left.append(pod_id)
                if errors is not None:
                    errors.append(exc)
        return left


class _Launcher(Launcher):
    """One ``create_nodes`` call: one pod per node from a small pool (the rate limiter sets the pace)."""

    workers = LAUNCH_WORKERS
    relaunch_on_5xx = True  # a definite 5xx from RunPod creates no pod; a timeout or 504 may

    def __init__(self, provider: RunPodProvider, cluster_id: str) -> None:
        super().__init__(NAME, cluster_id)
        self.adapter = provider
        self.targets: dict[str, _Target] = {}
        self.listed: list[Node] = []  # the latest listing: create_nodes answers from it

    def members(self) -> list[Member]:
        # A TERMINATED pod still listed is gone for our purposes: its node is launched anew.
        self.listed = [n for n in self.adapter.get_nodes(self.cluster_id) if n.status != NodeStatus.TERMINATED]
        return [Member.of(n) for n in self.listed]

    def prepare(self, missing: Sequence[NodeSpec]) -> None:
        for key in dict.fromkeys(spec.ssh_public_key for spec in missing if spec.ssh_public_key):
            self.adapter.ensure_ssh_key(self.cluster_id, key)
        self.targets = self.adapter._targets(missing)  # may raise; nothing is bought yet

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        (spec,) = batch
        return [self.adapter._launch_once(self.cluster_id, spec, self.targets[spec.name]).id]

    def terminate(self, ids: Sequence[str]) -> list[str]:
        return self.adapter._delete_ids(ids)

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        return f"{spec.instance_type} in {spec.region or 'any data center'}"


def _start_command() -> str:
    script = (
        f'echo "${USER_DATA_ENV}" | base64 -d > /run/provisioner-user-data'
        " && chmod +x /run/provisioner-user-data"
        " && (nohup /run/provisioner-user-data > /var/log/provisioner-user-data.log 2>&1 &);"
        " if [ -x /start.sh ]; then exec /start.sh; else exec sleep infinity; fi"
    )
    return f"bash -c {shlex.quote(script)}"


__all__ = ["CLUSTER_ENV", "DEFAULT_IMAGE", "NODE_ENV", "STATUS_MAP", "RunPodProvider"]
