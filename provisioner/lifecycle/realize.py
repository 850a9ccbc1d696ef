"""The direct engine: a Plan becomes running, bootstrapped nodes, and a cluster id becomes nothing.

``bring_up(plan, runtime=Runtime())`` blocks until the control plane reports every node ready:

1. cluster secrets from the state dir (``state.secrets_path``; created once, reused after);
2. the bootstrap rendered per role; one ``NodeSpec`` per ``plan.nodes`` entry with the user
   data its bootstrap method needs (cloud-init document, entrypoint script, or none for SSH),
   the cluster's public key, and the expiry (the adapter adds cluster/owner/expiry tags);
3. a record saved with status ``creating`` *before* the purchase, then the node ids;
4. ``create_nodes`` (idempotent on node names, so running ``up`` again adopts what exists),
   then waiting until every node runs, the SSH bootstrap where the plan says ``ssh``, and
   waiting until the head's control plane (``sinfo`` / ``kubectl get nodes``; plain SSH for
   ``control_plane: none``) lists every node ready;
5. the record saved with status ``up`` and the head address. Returns the record.

Failure: a create that raises leaves nothing (the adapter rolls back; ``bring_up`` re-lists
and deletes any leftover, then forgets the record) and the error propagates, so
``bring_up_first`` can move to the next option. A failure after the purchase tears the nodes
down when ``destroy_on_failure`` (burst does), else marks the record ``failed`` and raises
StackError naming the nodes left and ``provisioner down <id>``.

``tear_down(cluster_id)`` deletes every node carrying the cluster tag through the provider
API, waits until none is pending or running and forgets the record, secrets and key copy. Idempotent.
A reservation bought for the cluster that cannot be cancelled (an EC2 Capacity Block) is reported
as a ``reservation`` event: what remains, that it is already paid, and its end.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from provisioner.capabilities import Bootstrap
from provisioner.errors import CapacityError, ProviderError, ProvisionerError, StackError
from provisioner.lifecycle import readiness, state
from provisioner.lifecycle.access import ensure_firewall, remove_firewall
from provisioner.lifecycle.bootstrap_ssh import SshTarget
from provisioner.lifecycle.events import Emit, no_events
from provisioner.lifecycle.interrupts import Interrupts
from provisioner.lifecycle.remote import CLUSTER_USER, Remote, SshRemote, login_user, ssh_target, ssh_text
from provisioner.lifecycle.reservations import report_left
from provisioner.lifecycle.spend import budget_expiry
from provisioner.plan import Plan, PlanNode
from provisioner.providers.base import Node, NodeSpec, NodeStatus, Provider, SupportsTopology
from provisioner.realize.nodes import expiry_for
from provisioner.realize.nodes import node_specs as build_node_specs
from provisioner.secrets import ClusterSecrets, load_or_create_secrets

LIVE = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING})
BOOT_BOOTSTRAP_DONE = """#!/bin/bash
# Wait for the boot-time bootstrap to end (cloud-init on a VM; the start command's run, which
# holds the bootstrap lock, on a pod) so the SSH run does not race it.
# Not `cloud-init status --wait`: cloud-init 22.x reports done between two stages (before runcmd);
# boot-finished is written when its last stage ends.
if [ -d /run/systemd/system ] && command -v cloud-init >/dev/null; then
    for _ in $(seq 900); do [ -e /var/lib/cloud/instance/boot-finished ] && break; sleep 1; done
fi
if [ -e /run/provisioner/bootstrap.lock ] && command -v flock >/dev/null; then
    flock -w 900 /run/provisioner/bootstrap.lock true
fi
"""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _get_provider(name: str) -> Provider:
    from provisioner.providers.registry import get_provider

    return get_provider(name)


@dataclass(frozen=True)
class Timeouts:
    running_s: float = 900.0
    ready_s: float = 1200.0
    deleted_s: float = 600.0
    interval_s: float = 5.0
    max_interval_s: float = 30.0


@dataclass
class Runtime:
    """Everything ``bring_up``/``tear_down`` reach the outside through; every field has a default.

    ``remote``: commands on nodes (default: OpenSSH with the cluster key, see ``remote``);
    ``provider_for``: adapter by name (default: the registry, configured from the environment);
    ``now`` (UTC datetimes for records and expiry), ``clock``/``sleep`` (polling);
    ``interrupts``: held during the purchase so Ctrl-C never lands mid-launch.
    """

    remote: Remote | None = None
    provider_for: Callable[[str], Provider] = _get_provider
    emit: Emit = no_events
    now: Callable[[], dt.datetime] = utc_now
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    timeouts: Timeouts = field(default_factory=Timeouts)
    interrupts: Interrupts | None = None
    touched: set[str] = field(default_factory=set)
    """Providers a purchase was attempted on (what a cleanup must look at)."""
    _providers: dict[str, Provider] = field(default_factory=dict, repr=False)

    def provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = self.provider_for(name)
        return self._providers[name]

    def held(self) -> AbstractContextManager[None]:
        return self.interrupts.deferred() if self.interrupts is not None else nullcontext()

    def wait(self, poll: Callable[[], list[Node]], done: Callable[[list[Node]], bool], *, timeout_s: float,
             what: str) -> list[Node]:
        from provisioner.waiting import wait_until

        return wait_until(poll, done, timeout_s=timeout_s, interval_s=self.timeouts.interval_s,
                          max_interval_s=self.timeouts.max_interval_s, what=what, clock=self.clock,
                          sleep=self.sleep)


def node_specs(plan: Plan, secrets: ClusterSecrets, rendered: Mapping[str, str],
               expires_at: dt.datetime | None) -> list[NodeSpec]:
    """One NodeSpec per planned node (``provisioner.realize.nodes.node_specs``, the builder the
    Pulumi stack uses too), with the cluster's public key. Pure."""
    return build_node_specs(plan, rendered, ssh_public_key=secrets.ssh_public_key, expires_at=expires_at)


def node_address(node: Node) -> str | None:
    return node.public_ip or node.private_ip


def head_target(record: state.ClusterRecord, nodes: Sequence[Node], user: str = CLUSTER_USER) -> SshTarget:
    """Where to reach the head node of a running cluster. ProvisionerError when it has no address.
    Falls back to port 22 of the recorded head address when the provider no longer lists the head."""
    head = record.plan.head.name
    for node in nodes:
        target = ssh_target(node, user, head) if node.name == head else None
        if target is not None:
            return target
    if record.head_address:
        return SshTarget(host=record.head_address, node_name=head, user=user)
    raise ProvisionerError(f"cluster {record.cluster_id}: the head node {head} has no address yet")


def ssh_dir(cluster_id: str) -> Path:
    """Where the cluster's key file and known_hosts live while it exists (removed by tear_down)."""
    return state.clusters_dir() / "ssh" / cluster_id


def default_remote(cluster_id: str, secrets: ClusterSecrets) -> Remote:
    """OpenSSH with the cluster key, written under the state dir (``clusters/ssh/<cluster_id>``, 0700)."""
    return SshRemote.for_cluster(secrets, ssh_dir(cluster_id))


def cluster_secrets(cluster_id: str) -> ClusterSecrets:
    secrets, _ = load_or_create_secrets(state.secrets_path(cluster_id))
    return secrets


def live(nodes: Sequence[Node]) -> list[Node]:
    return [node for node in nodes if node.status in LIVE]


def bring_up(plan: Plan, runtime: Runtime | None = None, *, expires_at: dt.datetime | None = None,
             ttl_s: float | None = None, max_cost_usd: Decimal | None = None,
             destroy_on_failure: bool = False, lease: bool = False, on_budget: str = "warn") -> state.ClusterRecord:
    """Create, boot and bootstrap ``plan``'s nodes; block until the control plane lists each ready.

    Idempotent on the cluster id: a second call adopts the nodes that exist. ``expires_at``
    defaults to now + ``ttl_s`` or the spec's TTL. Raises the adapter's ProviderError when the
    purchase fails (nothing left), ProvisionerError (StackError naming what remains) after it,
    and lets KeyboardInterrupt through (the record stays, so ``down`` and ``gc`` find the nodes).
    ``lease``: the record is bound to this process (burst): once it dies, ``gc`` collects the nodes.
    """
    rt = runtime or Runtime()
    cluster_id = plan.cluster_id
    existing = state.load_record(cluster_id)
    if existing is not None and existing.plan.option != plan.option and existing.status != "creating":
        raise ProvisionerError(f"cluster {cluster_id} already exists on {existing.provider} "
                               f"({existing.plan.option.instance_type}); run: provisioner down {cluster_id}")
    secrets = cluster_secrets(cluster_id)
    from provisioner.render import render_cluster

    rendered = render_cluster(plan, secrets)
    now = rt.now()
    expires_at = budget_expiry(plan, now, expires_at or expiry_for(plan, now, ttl_s), max_cost_usd, on_budget)
    record = state.ClusterRecord(
        cluster_id=cluster_id, provider=plan.option.provider, engine="direct", plan=plan,
        created_at=existing.created_at if existing else now, expires_at=expires_at,
        max_cost_usd=max_cost_usd, on_budget=on_budget, status="creating",
        lease_pid=os.getpid() if lease else None, lease_host=socket.gethostname() if lease else None)
    state.save_record(record)
    provider = rt.provider(plan.option.provider)
    option = plan.option
    rt.emit("create", message=f"creating {option.nodes} x {option.instance_type} on {option.provider} "
            f"{option.region} (${option.hourly_usd}/h) for cluster {cluster_id}", cluster=cluster_id,
            provider=option.provider, region=option.region, instance_type=option.instance_type,
            nodes=option.nodes, hourly_usd=option.hourly_usd)
    rt.touched.add(option.provider)
    try:
        with rt.held():
            ensure_firewall(provider, plan)
            created = provider.create_nodes(cluster_id, node_specs(plan, secrets, rendered, expires_at))
    except ProviderError as exc:
        _clear_failed_try(rt, provider, record, exc)
        raise
    except Exception as exc:  # a bug or an answer nothing expected: nodes may exist, say so
        state.save_record(record.model_copy(update={"status": "failed"}))
        raise StackError(f"bringing up {cluster_id} failed unexpectedly ({type(exc).__name__}); nodes may exist "
                         f"on {record.provider}; remove with: provisioner down {cluster_id} --engine direct") from exc
    record = record.model_copy(update={"node_ids": {node.name: node.id for node in created}})
    state.save_record(record)
    try:
        return _finish(rt, provider, plan, record, secrets)
    except ProvisionerError as exc:
        return _failed(rt, provider, record, exc, destroy_on_failure)
    except Exception as exc:  # not a ProvisionerError: still never a stuck record or an unnamed node
        return _failed(rt, provider, record, StackError(f"unexpected {type(exc).__name__}"), destroy_on_failure,
                       cause=exc)


def _clear_failed_try(rt: Runtime, provider: Provider, record: state.ClusterRecord, error: ProviderError) -> None:
    """After a failed create: delete whatever the provider still lists, wait, forget the record.

    When that cleanup fails too (the provider cannot list or delete), the record stays, marked
    ``failed``, so ``down`` and ``gc`` can find the nodes, and the create's own error (which
    says instances may exist and how to remove them) is what the caller raises."""
    try:
        left = live(provider.get_nodes(record.cluster_id))
        if left:
            rt.emit("cleanup", message=f"deleting {len(left)} node(s) left by the failed create",
                    cluster=record.cluster_id, nodes=[node.name for node in left])
            provider.delete_nodes(record.cluster_id, [node.id for node in left])
            rt.wait(lambda: provider.get_nodes(record.cluster_id), lambda nodes: not live(nodes),
                    timeout_s=rt.timeouts.deleted_s, what=f"the nodes of {record.cluster_id} to be deleted")
    except ProvisionerError as cleanup:
        state.save_record(record.model_copy(update={"status": "failed"}))
        rt.emit("error", message=f"cleanup after the failed create failed too ({cleanup}); the record of "
                f"{record.cluster_id} is kept for provisioner down / gc", cluster=record.cluster_id)
        return
    remove_firewall(rt.emit, provider, record.cluster_id)
    state.remove_record(record.cluster_id)  # nothing was bought: the next try starts clean


def _finish(rt: Runtime, provider: Provider, plan: Plan, record: state.ClusterRecord,
            secrets: ClusterSecrets) -> state.ClusterRecord:
    cluster_id = plan.cluster_id
    wanted = {node.name for node in plan.nodes}

    def running(nodes: list[Node]) -> bool:
        failed = [node.name for node in nodes if node.name in wanted and node.status is NodeStatus.FAILED]
        if failed:
            raise StackError(f"node(s) {', '.join(failed)} of {cluster_id} failed to start")
        up = {node.name for node in nodes if node.status is NodeStatus.RUNNING}
        return wanted <= up

    rt.emit("wait-running", message=f"waiting for {len(wanted)} node(s) to run", cluster=cluster_id)
    nodes = rt.wait(lambda: provider.get_nodes(cluster_id), running, timeout_s=rt.timeouts.running_s,
                    what=f"the nodes of {cluster_id} to run")
    by_name = {node.name: node for node in nodes}
    head = by_name[plan.head.name]
    record = record.model_copy(update={"head_address": node_address(head),
                                       "node_ids": {name: node.id for name, node in by_name.items()
                                                    if name in wanted}})
    state.save_record(record)
    rt.emit("running", message=f"every node runs; head {plan.head.name} at {node_address(head)}",
            cluster=cluster_id, head_address=node_address(head),
            nodes={name: node_address(node) for name, node in sorted(by_name.items()) if name in wanted})
    remote = rt.remote or default_remote(cluster_id, secrets)
    # A node's boot-time bootstrap (user data, start command) could not know the other nodes'
    # addresses, nor on Lambda/RunPod its own name: with more than one node, every node gets the
    # bootstrap again over SSH, rendered with the addresses now known (one-off steps are skipped).
    ssh_pass(rt, remote, provider, plan, secrets, by_name)
    rt.emit("wait-ready", message=f"waiting for the {plan.spec.control_plane.value} control plane to list "
            f"every node ready", cluster=cluster_id)
    readiness.wait_ready(plan, remote, by_name, rt)
    record = record.model_copy(update={"status": "up"})
    state.save_record(record)
    login = ssh_target(head, CLUSTER_USER)
    rt.emit("up", message=f"cluster {cluster_id} is up: ssh {ssh_text(login) if login else '-'} "
            f"(provisioner ssh {cluster_id})", cluster=cluster_id, head_address=record.head_address,
            hourly_usd=plan.option.hourly_usd,
            expires_at=record.expires_at.isoformat() if record.expires_at else None)
    return record


def ssh_pass_nodes(plan: Plan) -> list[PlanNode]:
    """The nodes the SSH pass bootstraps once every node runs, head first: every node of a
    multi-node plan, else the ones bootstrapped over SSH only. Pure."""
    return [node for node in plan.nodes if node.bootstrap is Bootstrap.SSH or len(plan.nodes) > 1]


@dataclass(frozen=True)
class SshPass:
    """What ``ssh_pass`` did: the nodes it bootstrapped, the switch topology it rendered (None:
    one flat switch) and the files rendered for it (secret ones included: never an output)."""

    nodes: tuple[str, ...] = ()
    topology: dict[str, list[str]] | None = None
    rendered: Mapping[str, str] = field(default_factory=dict, repr=False)


def ssh_pass(rt: Runtime, remote: Remote, provider: Provider, plan: Plan, secrets: ClusterSecrets,
             by_name: dict[str, Node]) -> SshPass:
    """Once every node runs (``by_name``: the provider's nodes by name): ask the provider for its
    switch topology (``switch_paths``), render again with it and the nodes' addresses, and run each
    ``ssh_pass_nodes`` bootstrap over SSH (Slurm topology.conf, Kubernetes rack/block labels).
    The direct engine and the stacks' ``ClusterTopology`` step both call this. Blocks; raises
    what ``Remote.bootstrap`` raises (BootstrapError) and StackError for a node without an address."""
    nodes = ssh_pass_nodes(plan)
    if not nodes:
        return SshPass()
    topology = switch_paths(rt, provider, plan)
    rendered = _ssh_bootstrap(rt, remote, plan, secrets, by_name, nodes, topology)
    return SshPass(tuple(node.name for node in nodes), topology, rendered)


def switch_paths(rt: Runtime, provider: Provider, plan: Plan) -> dict[str, list[str]] | None:
    """The provider's placement of the nodes ({node: [switch, ...]}, outermost first: AWS
    DescribeInstanceTopology, GCE physical hosts) when it knows every node; else None (Slurm then
    gets one flat switch). A provider that cannot tell is not an error."""
    if not isinstance(provider, SupportsTopology):
        return None
    try:
        found = provider.topology(plan.cluster_id)
    except ProvisionerError as exc:
        rt.emit("warning", message=f"no switch topology from {plan.option.provider} ({exc}); Slurm gets one "
                "flat switch", cluster=plan.cluster_id)
        return None
    names = {node.name for node in plan.nodes}
    if set(found) != names:
        return None
    return found


def _ssh_bootstrap(rt: Runtime, remote: Remote, plan: Plan, secrets: ClusterSecrets, by_name: dict[str, Node],
                   ssh_nodes: Sequence[PlanNode], topology: Mapping[str, Sequence[str]] | None = None,
                   ) -> Mapping[str, str]:
    """Render again with the nodes' addresses (now known) and the provider's switch topology, and
    run each role's script over SSH. Returns the rendered files."""
    from provisioner.render import render_cluster

    addresses = {name: node.private_ip or node.public_ip or "" for name, node in by_name.items()}
    rendered = render_cluster(plan, secrets, node_addresses={k: v for k, v in addresses.items() if v},
                              topology=topology)
    user = login_user(plan.option.provider)
    for node in ssh_nodes:  # head first: plan order
        target = ssh_target(by_name[node.name], user, node.name)
        if target is None:
            raise StackError(f"node {node.name} has no address to bootstrap over SSH")
        rt.emit("bootstrap", message=f"bootstrapping {node.name} over SSH ({ssh_text(target)})",
                cluster=plan.cluster_id, node=node.name)
        if node.bootstrap is not Bootstrap.SSH:
            remote.bootstrap(target, BOOT_BOOTSTRAP_DONE)
        remote.bootstrap(target, rendered[f"bootstrap/{node.role}.sh"])
    return rendered


def _failed(rt: Runtime, provider: Provider, record: state.ClusterRecord, exc: ProvisionerError,
            destroy: bool, cause: BaseException | None = None) -> state.ClusterRecord:
    if destroy:
        rt.emit("error", message=f"bring-up failed ({exc}); tearing down", cluster=record.cluster_id)
        tear_down(record.cluster_id, rt)
        raise exc from cause
    state.save_record(record.model_copy(update={"status": "failed"}))
    try:
        left = live(provider.get_nodes(record.cluster_id))
        names = ", ".join(f"{node.name} ({node.id})" for node in left) or "none listed"
    except ProvisionerError:  # the listing fails too (the same bad answer): name what the record knows
        names = ", ".join(f"{name} ({node_id})" for name, node_id in sorted(record.node_ids.items())) or "unknown"
    raise StackError(f"bringing up {record.cluster_id} failed: {exc}; still on {record.provider}: {names}; "
                     f"remove with: provisioner down {record.cluster_id} --engine direct") from (cause or exc)


def bring_up_first(plans: Sequence[Plan], runtime: Runtime | None = None, *, max_tries: int = 3,
                   **options: object) -> state.ClusterRecord:
    """``bring_up`` the first plan whose purchase finds capacity, trying at most ``max_tries``.

    Only a CapacityError moves on (each try reported as a ``failover`` event, nothing left
    from it: ``bring_up`` deletes leftovers and checks the provider lists none); any other
    error, or the last try's CapacityError, propagates.
    """
    rt = runtime or Runtime()
    tries = list(plans)[:max_tries]
    if not tries:
        raise ProvisionerError("no option to bring up")
    for attempt, plan in enumerate(tries, 1):
        try:
            return bring_up(plan, rt, **options)  # type: ignore[arg-type]
        except CapacityError as exc:
            # bring_up listed the provider and deleted any leftover; a kept record means it could
            # not, and nothing more is bought while nodes of this try may exist.
            if attempt == len(tries) or state.load_record(plan.cluster_id) is not None:
                raise
            exc_text = str(exc)
            nxt = tries[attempt].option
            rt.emit("failover", message=f"try {attempt} of {len(tries)}: {exc_text}; nothing left behind; trying "
                    f"{nxt.provider} {nxt.instance_type} in {nxt.region}", cluster=plan.cluster_id,
                    attempt=attempt, error=exc_text, next_provider=nxt.provider, next_region=nxt.region,
                    next_instance_type=nxt.instance_type)
    raise AssertionError("unreachable")  # pragma: no cover


def tear_down(cluster_id: str, runtime: Runtime | None = None, *, provider: str | None = None) -> list[str]:
    """Delete every node of ``cluster_id`` through its provider's API and forget the cluster.

    The provider comes from the local record, else ``provider``. Blocks until no node is
    pending or running. Idempotent: an already-gone cluster returns []. Returns the deleted ids.
    Raises ProvisionerError when neither a record nor ``provider`` names where the cluster lives.
    """
    rt = runtime or Runtime()
    record = state.load_record(cluster_id)
    name = record.provider if record is not None else provider
    if name is None:
        raise ProvisionerError(f"no record of cluster {cluster_id} here; name its provider (--provider) or "
                               f"run: provisioner gc")
    if record is not None:
        state.save_record(record.model_copy(update={"status": "deleting"}))
    adapter = rt.provider(name)
    left = live(adapter.get_nodes(cluster_id))
    rt.emit("teardown", message=f"deleting {len(left)} node(s) of {cluster_id} on {name}", cluster=cluster_id,
            provider=name, nodes=[node.name for node in left])
    if left:
        adapter.delete_nodes(cluster_id)
        rt.wait(lambda: adapter.get_nodes(cluster_id), lambda nodes: not live(nodes),
                timeout_s=rt.timeouts.deleted_s, what=f"the nodes of {cluster_id} to be deleted")
    if record is not None and left:  # planned vs actual, the ledger, the provider's billing record
        from provisioner.lifecycle.spend import emit_settled

        emit_settled(rt.emit, adapter, record, left, rt.now())
    remove_firewall(rt.emit, adapter, cluster_id)
    state.remove_record(cluster_id)
    shutil.rmtree(ssh_dir(cluster_id), ignore_errors=True)  # the copy of the cluster key goes too
    rt.emit("down", message=f"cluster {cluster_id} is down ({len(left)} node(s) deleted)", cluster=cluster_id,
            deleted=[node.id for node in left])
    report_left(rt, adapter, cluster_id, name)  # a paid Capacity Block outlives its instances
    return [node.id for node in left]


def cluster_nodes(cluster_id: str, runtime: Runtime | None = None) -> tuple[state.ClusterRecord, list[Node]]:
    """The local record and what the provider lists now. ProvisionerError without a record."""
    rt = runtime or Runtime()
    record = state.load_record(cluster_id)
    if record is None:
        raise ProvisionerError(f"no record of cluster {cluster_id} here (see provisioner status)")
    return record, rt.provider(record.provider).get_nodes(cluster_id)


__all__ = ["LIVE", "Runtime", "Timeouts", "bring_up", "bring_up_first", "cluster_nodes", "cluster_secrets",
           "default_remote", "expiry_for", "head_target", "live", "node_address", "node_specs", "ssh_pass",
           "ssh_pass_nodes", "switch_paths", "tear_down", "utc_now"]
