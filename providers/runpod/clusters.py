"""RunPod Instant Clusters: the nodes of a cluster offer, bought as one cluster (``/v2/clusters``).

A cluster offer (instance type ``cluster_<n>x_<GPU>``, e.g. ``cluster_8x_H100-SXM``, purchase
``cluster`` in the catalog) is not a pod type: RunPod sells it as one Instant Cluster of 2-250
identical pods on a private overlay with a high-bandwidth fabric. How the Provider contract maps
onto it (``RunPodProvider`` dispatches here when a create asks for such a type):

- One call buys the whole cluster: every node of the request must have the same cluster
  type, data center, image and SSH key, and be on demand (RunPod sells no interruptible
  clusters). Anything else is refused with PlanError before a request.
- The RunPod cluster is named ``<cluster_id>``: that name is the idempotence key. A create
  first lists the account's clusters; a cluster of that name whose members carry
  ``PROVISIONER_CLUSTER=<cluster_id>`` is adopted instead of buying a second one. A cluster
  cannot grow: asking for a node it does not have is a PlanError naming what exists.
- Like pods, members carry ``PROVISIONER_CLUSTER``, ``PROVISIONER_OWNER`` and (with an expiry)
  ``PROVISIONER_EXPIRES`` in their environment, which is what ``list_owned``/gc read.
- Node names travel in ``PROVISIONER_NODES`` (comma-separated, in request order); the member
  of rank ``r`` (``pod.cluster.rank``, RunPod's NODE_RANK) is node ``r``, rank 0 being the
  primary. ``private_ip`` is the member's overlay address.
- User data must be a script (as for pods). The container configuration is the same for every
  member, so each node's script travels base64-encoded in ``PROVISIONER_USER_DATA_B64_<r>``
  (one ``PROVISIONER_USER_DATA_B64`` when all are equal) and the start command picks the one of
  its own ``NODE_RANK``, runs it in the background and hands over to the image's ``/start.sh``.
- A create whose answer is lost (timeout, 5xx) is reconciled by name like a pod launch. After
  the create, the call blocks until every member pod is listed (``MEMBERS_TIMEOUT_S``; not
  until they run); if they do not all appear, or listing them fails, the cluster is deleted
  and the error re-raised (if that delete fails too, the message says what is left and how
  to delete it).
- Members cannot be deleted one by one (RunPod answers 409): ``delete`` deletes whole
  clusters, and refuses (PlanError) to delete only some members of one. A gone cluster
  (404) is success.
"""

from __future__ import annotations

import base64
import logging
import re
import shlex
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from provisioner.errors import CapacityError, ClusterBusyError, PlanError, ProviderAPIError, ProviderError
from provisioner.providers.base import Bootstrap, Node, NodeSpec, expiry_text, owner_id
from provisioner.providers.orchestrate import with_note
from provisioner.providers.runpod import naming
from provisioner.providers.runpod.client import NAME
from provisioner.providers.runpod.models import Cluster, Pod
from provisioner.waiting import WaitTimeout, wait_until

if TYPE_CHECKING:
    from provisioner.providers.runpod.provider import RunPodProvider

log = logging.getLogger("provisioner.providers.runpod")

# The same variables as the pod path's (provider.py; a test keeps them equal).
CLUSTER_ENV = "PROVISIONER_CLUSTER"
NODES_ENV = "PROVISIONER_NODES"
INSTANCE_TYPE_ENV = "PROVISIONER_INSTANCE_TYPE"
USER_DATA_ENV = "PROVISIONER_USER_DATA_B64"
OWNER_ENV = "PROVISIONER_OWNER"
EXPIRES_ENV = "PROVISIONER_EXPIRES"
LEASE_ENV = "PROVISIONER_LEASE"
RUN_ENV = "PROVISIONER_RUN"
CLUSTER_TYPE = "TRAINING"
"""RunPod's generic distributed-training cluster: no managed Slurm/Ray, our bootstrap runs."""
MIN_PODS, MAX_PODS = 2, 250
MEMBERS_TIMEOUT_S = 120.0
"""How long a create waits for RunPod to list every member pod of a new cluster."""

_CLUSTER_TYPE = re.compile(r"^cluster_(?P<count>\d+)x_(?P<token>.+)$")


def is_cluster_type(instance_type: str) -> bool:
    """Whether ``instance_type`` names an Instant Cluster product (``cluster_8x_H100-SXM``)."""
    return _CLUSTER_TYPE.match(instance_type) is not None


def wants_cluster(nodes: Sequence[NodeSpec]) -> bool:
    """Whether a create asks for cluster-product nodes (then ``create`` handles the whole call)."""
    return any(is_cluster_type(spec.instance_type) for spec in nodes)


def member_node(adapter: RunPodProvider, cluster_id: str, pod: Pod) -> Node:
    """The Node of one member pod: named by its rank, addressed on the cluster overlay."""
    node = adapter._node(cluster_id, pod)
    names = [name for name in pod.env.get(NODES_ENV, "").split(",") if name]
    rank = pod.cluster.rank if pod.cluster else None
    name = names[rank] if rank is not None and 0 <= rank < len(names) else f"~rank-pending-{pod.id}"
    return node.model_copy(update={"name": name, "private_ip": pod.cluster.ip if pod.cluster else None})


def create(
    adapter: RunPodProvider,
    cluster_id: str,
    nodes: Sequence[NodeSpec],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Node]:
    """Buy (or find) the Instant Cluster holding ``nodes``; see the module docstring.

    Blocks for the create call and until every member pod is listed. Raises PlanError for a
    request one cluster cannot serve (nothing bought), CapacityError/QuotaError/ProviderAPIError
    from RunPod (after deleting a cluster this call bought).
    """
    first = _check(nodes)
    names = [spec.name for spec in nodes]
    existing = _find(adapter, cluster_id)
    if existing is not None:  # members of a cluster still being placed are waited for, then named
        try:
            members = _members(adapter, existing, existing.compute.pod_count, clock, sleep)
        except WaitTimeout:
            raise ProviderAPIError(
                NAME,
                0,
                f"Instant Cluster {existing.id} named {cluster_id} exists but RunPod "
                f"did not list its {existing.compute.pod_count} member pods within "
                f"{MEMBERS_TIMEOUT_S:g}s; nothing was bought",
            ) from None
        return _adopted(adapter, cluster_id, existing, members, names, first.run)
    for key in dict.fromkeys(spec.ssh_public_key for spec in nodes if spec.ssh_public_key):
        adapter.ensure_ssh_key(cluster_id, key)
    body = _body(adapter, cluster_id, nodes, first)
    cluster = _launch(adapter, cluster_id, body)
    try:
        members = _members(adapter, cluster, len(nodes), clock, sleep)
    except (ProviderError, WaitTimeout) as exc:
        error = (
            exc
            if isinstance(exc, ProviderError)
            else ProviderAPIError(
                NAME,
                0,
                f"RunPod listed fewer than {len(nodes)} member pods of cluster {cluster.id} "
                f"within {MEMBERS_TIMEOUT_S:g}s",
            )
        )
        raise _rolled_back(adapter, error, cluster, first) from None
    by_name = {node.name: node for node in (member_node(adapter, cluster_id, pod) for pod in members)}
    return [by_name[name] for name in names]


def _members(
    adapter: RunPodProvider, cluster: Cluster, count: int, clock: Callable[[], float], sleep: Callable[[float], None]
) -> list[Pod]:
    """The cluster's member pods once ``count`` are listed with their ranks (raises WaitTimeout)."""
    return wait_until(
        lambda: [pod for pod in adapter.client.list_cluster_pods(cluster.id) if pod.cluster],
        lambda pods: len(pods) >= count and all(pod.cluster and pod.cluster.rank is not None for pod in pods),
        timeout_s=MEMBERS_TIMEOUT_S,
        interval_s=adapter.poll_interval_s,
        what=f"the members of {cluster.id}",
        clock=clock,
        sleep=sleep,
    )


def delete(adapter: RunPodProvider, cluster_id: str, node_ids: Sequence[str] | None) -> set[str]:
    """Delete this cluster's Instant Clusters that ``node_ids`` covers (every one when None).

    Returns the ids of the member pods handled here (the caller deletes the rest as pods).
    A cluster already gone is success. Raises PlanError (nothing deleted) when ``node_ids``
    names only some members of a cluster, and the first ProviderError after trying all.
    """
    clusters = [c for c in adapter.client.list_clusters() if c.name == cluster_id]
    handled: set[str] = set()
    chosen: list[Cluster] = []
    for cluster in clusters:
        try:
            members = {
                pod.id for pod in adapter.client.list_cluster_pods(cluster.id) if pod.env.get(CLUSTER_ENV) == cluster_id
            }
        except ProviderAPIError as exc:
            if exc.status == 404:
                continue
            raise
        if not members:
            continue  # a cluster of the same name that this project did not make
        asked = members if node_ids is None else members & set(node_ids)
        if asked and asked != members:
            raise PlanError(
                f"{NAME}: Instant Cluster {cluster.id} ({cluster_id}) can only be deleted whole: "
                f"{len(asked)} of its {len(members)} nodes were asked; nothing was deleted"
            )
        if asked:
            chosen.append(cluster)
            handled |= members
    errors: list[ProviderError] = []
    left = _delete_clusters(adapter, chosen, errors)
    if errors:
        raise with_note(errors[0], f"clusters not deleted: {', '.join(left)}")
    return handled


# ----- helpers ------------------------------------------------------------------------------------
def _check(nodes: Sequence[NodeSpec]) -> NodeSpec:
    """The request's first node, after refusing what one Instant Cluster cannot be (PlanError)."""
    first = nodes[0]
    why = ""
    if not all(is_cluster_type(spec.instance_type) for spec in nodes):
        why = "cluster-product nodes cannot be mixed with pods in one create"
    elif (
        len(
            {
                (spec.instance_type, spec.region, spec.image, spec.ssh_public_key, spec.disk_gib, spec.expires_at)
                for spec in nodes
            }
        )
        > 1
    ):
        why = "every node of an Instant Cluster has the same type, data center, image, disk, SSH key and expiry"
    elif any(spec.spot for spec in nodes):
        why = "Instant Clusters are sold on demand only (no interruptible clusters)"
    elif not MIN_PODS <= len(nodes) <= MAX_PODS:
        why = f"an Instant Cluster has {MIN_PODS}-{MAX_PODS} nodes ({len(nodes)} asked)"
    elif len({spec.name for spec in nodes}) != len(nodes) or any("," in spec.name for spec in nodes):
        why = "node names must be unique and contain no comma"
    elif any(spec.user_data and spec.bootstrap is not Bootstrap.SCRIPT for spec in nodes):
        why = "a container runs user data only as a script (bootstrap 'script')"
    if why:
        raise PlanError(f"{NAME}: {first.instance_type}: {why}; nothing was bought")
    return first


def _find(adapter: RunPodProvider, cluster_id: str) -> Cluster | None:
    """This project's cluster named ``cluster_id`` (its members carry our cluster variable)."""
    for cluster in adapter.client.list_clusters():
        if cluster.name != cluster_id:
            continue
        try:
            pods = adapter.client.list_cluster_pods(cluster.id)
        except ProviderAPIError as exc:
            if exc.status == 404:  # deleted between the two calls
                continue
            raise
        if not pods or any(pod.env.get(CLUSTER_ENV) == cluster_id for pod in pods):
            return cluster  # members not listed yet: a cluster being created under our name
    return None


def _adopted(
    adapter: RunPodProvider, cluster_id: str, cluster: Cluster, members: list[Pod], names: list[str], run: str | None
) -> list[Node]:
    found = {node.name: node for node in (member_node(adapter, cluster_id, pod) for pod in members)}
    earlier = sorted({node.run for node in found.values() if node.run and run and node.run != run})
    if earlier:  # an earlier run of the name left it: never adopted into this run (providers.rivals)
        raise ClusterBusyError(
            f"{NAME}: Instant Cluster {cluster.id} named {cluster_id} is of an earlier run ({', '.join(earlier)}); "
            f"it is not adopted: remove it with: provisioner gc --provider {NAME} --cluster {cluster_id} --yes"
        )
    missing = [name for name in names if name not in found]
    if missing:
        raise PlanError(
            f"{NAME}: Instant Cluster {cluster.id} named {cluster_id} exists with nodes "
            f"{', '.join(sorted(found))} and cannot grow to hold {', '.join(missing)}: "
            "delete it first; nothing was bought"
        )
    return [found[name] for name in names]


def _gpu_id(adapter: RunPodProvider, spec: NodeSpec) -> tuple[str, int]:
    match = _CLUSTER_TYPE.match(spec.instance_type)
    assert match is not None  # checked by _check
    count, token = int(match["count"]), match["token"]
    gpu_id = spec.offer_id.replace("+", " ") if spec.offer_id else naming.gpu_id_for_token(token)
    if gpu_id is None:
        gpu_id = next(
            (gpu.id for gpu in adapter.client.list_gpu_types().gpus if naming.derived_token_matches(token, gpu.name)),
            None,
        )
    if gpu_id is None:
        raise CapacityError(NAME, f"RunPod has no GPU type for cluster type {spec.instance_type}")
    return gpu_id, count


def _body(adapter: RunPodProvider, cluster_id: str, nodes: Sequence[NodeSpec], first: NodeSpec) -> dict[str, Any]:
    """The ``CreateClusterRequest``: one container configuration for every member."""
    gpu_id, per_pod = _gpu_id(adapter, first)
    env = {
        CLUSTER_ENV: cluster_id,
        NODES_ENV: ",".join(spec.name for spec in nodes),
        INSTANCE_TYPE_ENV: first.instance_type,
        OWNER_ENV: first.owner or owner_id(),
    }
    if first.expires_at is not None:
        env[EXPIRES_ENV] = expiry_text(first.expires_at)
    if first.lease:
        env[LEASE_ENV] = first.lease
    if first.run:
        env[RUN_ENV] = first.run
    scripts = [spec.user_data or "" for spec in nodes]
    if len(set(scripts)) == 1 and scripts[0]:
        env[USER_DATA_ENV] = base64.b64encode(scripts[0].encode()).decode()
    elif any(scripts):
        env |= {
            f"{USER_DATA_ENV}_{rank}": base64.b64encode(script.encode()).decode()
            for rank, script in enumerate(scripts)
            if script
        }
    body: dict[str, Any] = {
        "name": cluster_id,
        "type": CLUSTER_TYPE,
        "compute": {"gpuTypeId": gpu_id, "gpuCountPerPod": per_pod, "podCount": len(nodes)},
        "image": first.image or naming.DEFAULT_IMAGE,
        "disk": first.disk_gib,
        "env": env,
        "ports": ["22/tcp"],
        "startSsh": True,
    }
    if any(scripts):
        body["args"] = start_command()
    if first.region and first.region != "any":
        body["dataCenterIds"] = [first.region]
    return body


def start_command() -> str:
    """The members' start command: run this rank's bootstrap script, then the image's own start."""
    script = (
        f'data="$(printenv {USER_DATA_ENV}_${{NODE_RANK:-0}} || printenv {USER_DATA_ENV})";'
        ' echo "$data" | base64 -d > /run/provisioner-user-data'
        " && chmod +x /run/provisioner-user-data"
        " && (nohup /run/provisioner-user-data > /var/log/provisioner-user-data.log 2>&1 &);"
        " if [ -x /start.sh ]; then exec /start.sh; else exec sleep infinity; fi"
    )
    return f"bash -c {shlex.quote(script)}"


def _launch(adapter: RunPodProvider, cluster_id: str, body: dict[str, Any]) -> Cluster:
    """``POST /v2/clusters``; a lost answer is reconciled by name, never bought twice."""
    for attempt in (1, 2):
        try:
            log.info(
                "runpod: creating Instant Cluster %s (%s x%d pods)",
                cluster_id,
                body["compute"]["gpuTypeId"],
                body["compute"]["podCount"],
            )
            return adapter.client.create_cluster(body)
        except ProviderAPIError as exc:
            if exc.status and exc.status < 500:
                raise
            adopted = _find(adapter, cluster_id)
            if adopted is not None:
                log.warning("runpod: cluster create ended with %s; adopted cluster %s", exc.message, adopted.id)
                return adopted
            # A timeout or 504 may still be creating it: creating again could buy two clusters.
            if attempt == 2 or exc.status in (0, 504):
                raise
            log.warning("runpod: cluster create ended with %s and none appeared; creating again", exc.message)
    raise AssertionError("unreachable")


def _delete_clusters(adapter: RunPodProvider, clusters: Sequence[Cluster], errors: list[ProviderError]) -> list[str]:
    left: list[str] = []
    for cluster in clusters:
        try:
            adapter.client.delete_cluster(cluster.id)
        except ProviderError as exc:
            if isinstance(exc, ProviderAPIError) and exc.status == 404:
                continue
            left.append(cluster.id)
            errors.append(exc)
    return left


def _rolled_back(adapter: RunPodProvider, exc: ProviderError, cluster: Cluster, spec: NodeSpec) -> ProviderError:
    errors: list[ProviderError] = []
    left = _delete_clusters(adapter, [cluster], errors)
    note = f"Instant Cluster {cluster.id} ({spec.instance_type} in {spec.region or 'any data center'})"
    if left:
        note += (
            f" could not be deleted and still exists (delete with: curl -X DELETE "
            f"{adapter.base_url}/v2/clusters/{cluster.id})"
        )
    else:
        note += " was deleted"
    return with_note(exc, note)


__all__ = [
    "MEMBERS_TIMEOUT_S",
    "NODES_ENV",
    "create",
    "delete",
    "is_cluster_type",
    "member_node",
    "start_command",
    "wants_cluster",
]
