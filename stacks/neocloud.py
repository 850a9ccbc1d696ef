"""Pulumi dynamic resources for the neoclouds (Lambda, RunPod, Vast.ai, Fluence).

These providers have no (maintained) Pulumi package, so a ``NeocloudNodes`` resource is
realized by the same adapter the CLI uses (``providers.registry.get_provider``): one
adapter, two drivers.

Pulumi pickles the ``NeocloudNodesProvider`` instance (with dill) into the stack state,
so it holds no client and no credential: every operation builds a fresh adapter, which
reads its API key and endpoint from the environment (``providers.settings``), and closes
it afterwards.

Operations and what they guarantee:

- ``check``: the provider is a neocloud, the node list is non-empty with unique names
  and every node parses as a ``providers.base.NodeSpec``.
- ``create``: ``create_nodes`` (idempotent on cluster id + node name, so a retried
  ``pulumi up`` never buys twice), then waits until every node runs
  (``realize.launch.wait_running``, as the direct engine). If they do not,
  the nodes are deleted and a ``StackError`` is raised, so nothing bills outside state.
- ``diff``: replacement when the provider, cluster id, any node's instance type or region
  (or spot flag, image, disk) changes, or the user data changes (it only runs at boot);
  adding or removing whole nodes, or a node a refresh found gone, is an in-place update.
- ``update``: creates the missing nodes, deletes the stack's ones no longer listed, waits.
- ``read``: the stack's live nodes (the user data's digest kept); an empty cluster reads as gone.
- ``delete``: ``delete_owned`` (this owner's nodes of the stack), then waits until none of them is pending or running
  (``realize.launch.wait_deleted``, as the direct engine's ``down``).

``user_data`` (one text for every node, or a mapping node name -> text, e.g. a head's and
the workers' bootstrap) enters as a Pulumi secret and is never part of the outputs: the
state keeps only its SHA-256, which is what ``diff`` compares.

Through the engine's gRPC path every number arrives as a float (``gpus: 8`` -> ``8.0``):
each operation first coerces the integer fields back (``normalize_props``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi.dynamic
from pydantic import ValidationError

from provisioner.errors import StackError
from provisioner.providers.base import Node, NodeSpec, NodeStatus, Provider
from provisioner.providers.ownership import delete_owned
from provisioner.providers.registry import facts, get_provider
from provisioner.realize.launch import wait_deleted, wait_running, waiter
from provisioner.waiting import WaitTimeout

NEOCLOUDS = frozenset(name for name, found in facts().items() if found.stack == "neocloud")
DEFAULT_READY_TIMEOUT_S = 1800.0
DEFAULT_DELETE_TIMEOUT_S = 600.0
# A change to any of these node fields means a different machine: replace, never update.
REPLACING_NODE_FIELDS = ("instance_type", "region", "zone", "spot", "image", "disk_gib", "gpus", "offer_id")
_OUTPUTS = ("node_ids", "node_names", "public_ips", "private_ips", "user_data_sha256")
_INT_NODE_FIELDS = ("gpus", "disk_gib")


def _sha256(user_data: str | Mapping[str, str] | None) -> str:
    if not user_data:
        return ""
    text = user_data if isinstance(user_data, str) else json.dumps(dict(user_data), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _as_int(value: Any) -> Any:
    """2.0 -> 2 (what a Struct number becomes); anything else unchanged, for check to judge."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def normalize_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with the integer node fields made ints again. Pure; idempotent."""
    out = dict(props)
    nodes = out.get("nodes")
    if isinstance(nodes, list | tuple):
        out["nodes"] = [
            {k: (_as_int(v) if k in _INT_NODE_FIELDS else v) for k, v in node.items()}
            if isinstance(node, Mapping)
            else node
            for node in nodes
        ]
    return out


def _user_data_for(props: Mapping[str, Any], name: str) -> str | None:
    user_data = props.get("user_data")
    if isinstance(user_data, Mapping):
        return user_data.get(name) or None
    return user_data or None


def _specs(props: Mapping[str, Any]) -> list[NodeSpec]:
    return [
        NodeSpec(**{**dict(node), "user_data": _user_data_for(props, node["name"])})
        for node in props.get("nodes") or []
    ]


def _outputs(props: Mapping[str, Any], nodes: Sequence[Node]) -> dict[str, Any]:
    """The state Pulumi records: the inputs minus user_data, plus what the nodes became."""
    wanted = [node["name"] for node in props.get("nodes") or []]
    by_name = {node.name: node for node in nodes}
    present = [by_name[name] for name in wanted if name in by_name]
    outs = {key: value for key, value in props.items() if key != "user_data" and key not in _OUTPUTS}
    outs.update(
        node_ids=[node.id for node in present],
        node_names=[node.name for node in present],
        public_ips=[node.public_ip or "" for node in present],
        private_ips=[node.private_ip or "" for node in present],
        user_data_sha256=_sha256(props.get("user_data")),
    )
    return outs


class NeocloudNodesProvider(pulumi.dynamic.ResourceProvider):
    """CRUD for a set of neocloud nodes through the project's adapters.

    Holds only ``adapter_options``: plain, picklable constructor options for the adapter
    (``limits``, ``retry``, ``timeout_s``, ``poll_interval_s``), never a key or a client.
    """

    def __init__(self, adapter_options: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        options = dict(adapter_options or {})
        forbidden = sorted(set(options) & {"api_key", "transport"})
        if forbidden:
            raise StackError(f"NeocloudNodes: {forbidden} must not be stored in Pulumi state")
        self.adapter_options = options

    def _adapter(self, name: str) -> Provider:
        if name not in NEOCLOUDS:
            raise StackError(f"NeocloudNodes: provider must be one of {sorted(NEOCLOUDS)}, not {name!r}")
        return get_provider(name, **self.adapter_options)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        news = normalize_props(news)
        failures: list[pulumi.dynamic.CheckFailure] = []
        if news.get("provider") not in NEOCLOUDS:
            failures.append(pulumi.dynamic.CheckFailure("provider", f"must be one of {sorted(NEOCLOUDS)}"))
        if not news.get("cluster_id"):
            failures.append(pulumi.dynamic.CheckFailure("cluster_id", "must be a non-empty string"))
        nodes = news.get("nodes") or []
        names = [node.get("name") for node in nodes if isinstance(node, Mapping)]
        if not nodes:
            failures.append(pulumi.dynamic.CheckFailure("nodes", "at least one node is required"))
        elif len(set(names)) != len(nodes):
            failures.append(pulumi.dynamic.CheckFailure("nodes", "every node needs a unique name"))
        for index, node in enumerate(nodes):
            try:
                NodeSpec(**dict(node))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                failures.append(pulumi.dynamic.CheckFailure(f"nodes[{index}].{where}", str(first["msg"])))
            except (TypeError, ValueError) as exc:
                failures.append(pulumi.dynamic.CheckFailure(f"nodes[{index}]", str(exc)))
        return pulumi.dynamic.CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        props = normalize_props(props)
        adapter = self._adapter(props["provider"])
        try:
            nodes = self._realize(adapter, props, rollback=True)
        finally:
            close_adapter(adapter)
        return pulumi.dynamic.CreateResult(f"{props['provider']}/{props['cluster_id']}", _outputs(props, nodes))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        olds, news = normalize_props(olds), normalize_props(news)
        replaces = [key for key in ("provider", "cluster_id") if olds.get(key) != news.get(key)]
        old_nodes = {node["name"]: node for node in olds.get("nodes") or []}
        for node in news.get("nodes") or []:
            old = old_nodes.get(node["name"])
            if old is not None and any(old.get(f) != node.get(f) for f in REPLACING_NODE_FIELDS):
                replaces.append("nodes")
                break
        if olds.get("user_data_sha256", "") != _sha256(news.get("user_data")):
            replaces.append("user_data")
        wanted = [n["name"] for n in news.get("nodes") or []]
        # A node gone at the provider (a refresh read the set without it) is bought again in place.
        lost = olds.get("node_names") is not None and not set(wanted) <= set(olds["node_names"])
        changed = bool(replaces) or lost or [n["name"] for n in olds.get("nodes") or []] != wanted
        return pulumi.dynamic.DiffResult(changes=changed, replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        news = normalize_props(news)
        adapter = self._adapter(news["provider"])
        try:
            keep = {node["name"] for node in news.get("nodes") or []}
            listed = stack_nodes(olds, adapter.get_nodes(news["cluster_id"]))  # never another run's of the name
            gone = [node.id for node in listed if node.name not in keep]
            if gone:  # replaced nodes: only the stack owner's (providers.ownership)
                delete_owned(adapter, news["cluster_id"], gone, owner=stack_owner(news))
            nodes = self._realize(adapter, news, rollback=False)
        finally:
            close_adapter(adapter)
        return pulumi.dynamic.UpdateResult(_outputs(news, nodes))

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        props = normalize_props(props)
        adapter = self._adapter(props["provider"])
        try:
            listed = stack_nodes(props, adapter.get_nodes(props["cluster_id"]))
            nodes = [n for n in listed if n.status != NodeStatus.TERMINATED]
        finally:
            close_adapter(adapter)
        if not nodes:
            return pulumi.dynamic.ReadResult(None, {})
        outs = {**props, **_outputs(props, nodes)}
        if "user_data" not in props:  # the engine reads with the recorded outputs: only the hash
            outs["user_data_sha256"] = props.get("user_data_sha256", "")
        return pulumi.dynamic.ReadResult(id_, outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        adapter = self._adapter(props["provider"])
        cluster_id = props["cluster_id"]
        try:
            # The stack's owner (its nodes' typed field), not this machine's: a teammate may destroy a
            # stack on a shared backend; never another owner's node.
            owner = stack_owner(props)
            theirs = {n.id for n in stack_nodes(props, adapter.get_nodes(cluster_id))}  # not another run's
            deletion = delete_owned(adapter, cluster_id, owner=owner, select=lambda node: node.id in theirs)
            ids = {node.id for node in deletion.deleted}
            wait_deleted(
                waiter(_interval(adapter)),
                adapter,
                cluster_id,
                timeout_s=float(props.get("delete_timeout_s") or DEFAULT_DELETE_TIMEOUT_S),
                ids=ids,
            )
        except WaitTimeout as exc:
            left = ", ".join(f"{n.id} ({n.provider_state})" for n in exc.last or [])  # type: ignore[attr-defined]
            raise StackError(f"{props['provider']}: nodes of {cluster_id} still exist after delete: {left}") from None
        finally:
            close_adapter(adapter)

    def _realize(self, adapter: Provider, props: Mapping[str, Any], *, rollback: bool) -> list[Node]:
        """create_nodes, then wait until every listed node runs (rolling back on failure if asked):
        the direct engine's own wait (``realize.launch.wait_running``)."""
        cluster_id = props["cluster_id"]
        specs = _specs(props)
        wanted = {spec.name for spec in specs}
        made = {node.id for node in adapter.create_nodes(cluster_id, specs)}  # bought or adopted: this run's
        try:
            nodes = wait_running(
                waiter(_interval(adapter)),
                adapter,
                cluster_id,
                wanted,
                timeout_s=float(props.get("ready_timeout_s") or DEFAULT_READY_TIMEOUT_S),
                ids=made,
            )
            return [node for node in nodes if node.name in wanted]
        except (WaitTimeout, StackError) as exc:
            note = ""
            if rollback:
                delete_owned(adapter, cluster_id, sorted(made))
                note = "; its nodes were deleted"
            raise StackError(f"{props['provider']} cluster {cluster_id}: {exc}{note}") from None


def stack_nodes(props: Mapping[str, Any], nodes: Sequence[Node]) -> list[Node]:
    """The listed nodes that are the stack's: the ids it recorded, or its nodes' run mark (another run of
    the cluster's name may have left nodes alive under it); all of them when it recorded neither."""
    ids = set(props.get("node_ids") or [])
    runs = {str(n["run"]) for n in props.get("nodes") or [] if isinstance(n, Mapping) and n.get("run")}
    if not ids and not runs:
        return list(nodes)
    return [node for node in nodes if node.id in ids or (node.run is not None and node.run in runs)]


def stack_owner(props: Mapping[str, Any]) -> str | None:
    """The owner the stack's nodes were created for (their ``owner`` field); None: ``owner_id()``."""
    return next((str(n["owner"]) for n in props.get("nodes") or [] if isinstance(n, Mapping) and n.get("owner")), None)


def _interval(adapter: Provider) -> float:
    return float(getattr(adapter, "poll_interval_s", 5.0))


def close_adapter(adapter: Provider) -> None:
    """Close ``adapter``'s client if it has one; a failure to close never fails the operation."""
    close = getattr(adapter, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


class NeocloudNodes(pulumi.dynamic.Resource, module="provisioner", name="NeocloudNodes"):
    """A cluster's nodes on one neocloud, created by the project's adapter.

    ``nodes`` are plain dicts with ``providers.base.NodeSpec`` fields (without
    ``user_data``); ``user_data`` (one text for every node, or node name -> text) is always
    a secret.
    Outputs, in the order of ``nodes``: ``node_ids``, ``node_names``, ``public_ips`` and
    ``private_ips`` ("" where a node has none).
    """

    node_ids: pulumi.Output[list[str]]
    node_names: pulumi.Output[list[str]]
    public_ips: pulumi.Output[list[str]]
    private_ips: pulumi.Output[list[str]]
    user_data_sha256: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        provider: str,
        cluster_id: str,
        nodes: Sequence[Mapping[str, Any]],
        user_data: pulumi.Input[str] | pulumi.Input[Mapping[str, str]] | None = None,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        adapter_options: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {
            "provider": provider,
            "cluster_id": cluster_id,
            "nodes": [{k: v for k, v in dict(node).items() if k != "user_data"} for node in nodes],
            "user_data": pulumi.Output.secret(user_data) if user_data is not None else None,
            "ready_timeout_s": ready_timeout_s,
            **{name: None for name in _OUTPUTS},
        }
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=["user_data"])
        super().__init__(
            NeocloudNodesProvider(adapter_options),
            resource_name,
            props,
            pulumi.ResourceOptions.merge(opts, secret_opts),
        )


__all__ = ["NEOCLOUDS", "NeocloudNodes", "NeocloudNodesProvider", "close_adapter", "normalize_props", "stack_nodes"]
