"""The direct engine: a Plan becomes running, bootstrapped nodes, and a cluster id becomes nothing.

``bring_up(plan, runtime=Runtime())`` blocks until the control plane reports every node ready:

1. cluster secrets from the state dir (``state.secrets_path``; created once, reused after);
2. the realize input (``realize.inputs.realize_input``, what the Pulumi program builds from too):
   the bootstrap rendered per role and one ``NodeSpec`` per ``plan.nodes`` entry with the user
   data its bootstrap method needs (cloud-init document, entrypoint script, or none for SSH),
   the cluster's public key, owner, expiry and this call's lease mark (the adapter writes them
   as cluster/owner/expiry/lease tags);
3. a record saved with status ``creating`` *before* the purchase, then the node ids;
4. ``create_nodes`` (idempotent on node names, so running ``up`` again adopts what exists),
   then waiting until every node runs, the SSH bootstrap where the plan says ``ssh``, and
   waiting until the head's control plane (``sinfo`` / ``kubectl get nodes``; plain SSH for
   ``control_plane: none``) lists every node ready;
5. the record saved with status ``up`` and the head address. Returns the record.

The whole of ``bring_up`` holds the cluster (lifecycle.lease: an exclusive lock with a
heartbeat; a second ``up``/``down`` of the cluster is refused, naming the holder) and every node
is launched with this call's lease mark (providers.ownership.LeaseMark), so a ``gc`` on this
machine collects the nodes of an ``up`` that died in ``creating``, and another machine sees
who is building the cluster.

Failure: a create that raises leaves nothing (the adapter rolls back; ``bring_up`` re-lists
and deletes any leftover carrying this call's lease and owner marks, never another's, then
forgets the record) and the error propagates, so
``bring_up_first`` can move to the next option. A failure after the purchase tears the nodes
down when ``destroy_on_failure`` (burst does), else marks the record ``failed`` and raises
StackError naming the nodes left and ``provisioner down <id>``.

``tear_down(cluster_id)`` (lifecycle/teardown.py) deletes this run's nodes of the cluster,
owner-checked, and forgets it. Idempotent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from provisioner.errors import (
    ClusterBusyError,
    CredentialsError,
    ProviderError,
    ProvisionerError,
    StackError,
    UsageError,
)
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import lease_renewal, state
from provisioner.lifecycle.access import ensure_firewall, remove_firewall
from provisioner.lifecycle.runs import of_run
from provisioner.lifecycle.spend import budget_expiry
from provisioner.lifecycle.teardown import tear_down
from provisioner.lifecycle.unchanged import nothing_to_do
from provisioner.money import usd_text
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeSpec, Provider, owner_id
from provisioner.providers.ownership import delete_owned
from provisioner.realize import readiness
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.failover import first_that_fits
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.inputs import RunFacts, realize_input
from provisioner.realize.launch import LIVE, unanswerable, wait_deleted, wait_running
from provisioner.realize.nodes import expiry_for
from provisioner.realize.nodes import node_specs as build_node_specs
from provisioner.realize.remote import CLUSTER_USER, Remote, SshRemote, ssh_target, ssh_text
from provisioner.realize.runtime import Runtime, Timeouts, utc_now
from provisioner.realize.sshpass import ssh_pass, ssh_pass_nodes, switch_paths
from provisioner.secrets import ClusterSecrets, load_or_create_secrets


def node_specs(
    plan: Plan, secrets: ClusterSecrets, rendered: Mapping[str, str], expires_at: dt.datetime | None
) -> list[NodeSpec]:
    """One NodeSpec per planned node from already rendered files (``realize.nodes.node_specs``), with
    the cluster's public key and each node's host key token. Pure. ``up`` and ``heal`` build theirs
    with ``realize.inputs.realize_input``, which renders too."""
    return build_node_specs(
        plan,
        rendered,
        ssh_public_key=secrets.ssh_public_key,
        expires_at=expires_at,
        hostkey_tokens=hostkey_tokens(plan, secrets),
    )


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


def default_remote(plan: Plan, secrets: ClusterSecrets) -> Remote:
    """OpenSSH with the cluster key, written under the state dir (``clusters/ssh/<cluster_id>``, 0700),
    and the cluster's known_hosts there: host keys pinned by each node's proof (``realize.hostkeys``)."""
    return SshRemote.for_cluster(secrets, state.ssh_dir(plan.cluster_id), plan=plan)


def cluster_secrets(cluster_id: str) -> ClusterSecrets:
    secrets, _ = load_or_create_secrets(state.secrets_path(cluster_id))
    return secrets


def live(nodes: Sequence[Node]) -> list[Node]:
    return [node for node in nodes if node.status in LIVE]


def bring_up(
    plan: Plan,
    runtime: Runtime | None = None,
    *,
    expires_at: dt.datetime | None = None,
    ttl_s: float | None = None,
    max_cost_usd: Decimal | None = None,
    destroy_on_failure: bool = False,
    lease: bool = False,
    on_budget: str = "warn",
    local: bool = False,
    run_id: str | None = None,
) -> state.ClusterRecord:
    """Create, boot and bootstrap ``plan``'s nodes; block until the control plane lists each ready.

    Idempotent on the cluster id: a second call adopts the nodes that exist (and keeps the record's
    run id; a new bring-up gets ``run_id``, else a new one, ``state.new_run_id``: a run moved to
    another cluster keeps its id, lifecycle/recover.py). ``local``: a dry run's (``up
    --local``), marked so in the record and the ledger. ``expires_at``
    defaults to now + ``ttl_s`` or the spec's TTL. Raises the adapter's ProviderError when the
    purchase fails (nothing left), ProvisionerError (StackError naming what remains) after it,
    and lets KeyboardInterrupt through (the record stays, so ``down`` and ``gc`` find the nodes).
    ``lease``: the record is bound to this process (burst): once it dies, ``gc`` collects
    the nodes. Raises ClusterBusyError (nothing bought) when another process holds the cluster or
    its nodes carry another owner's or another live create's marks.
    """
    rt = runtime or Runtime()
    with cluster_lease.hold(plan.cluster_id, "up") as mark:
        record = _bring_up(
            plan,
            rt,
            mark.token(),
            expires_at=expires_at,
            ttl_s=ttl_s,
            max_cost_usd=max_cost_usd,
            destroy_on_failure=destroy_on_failure,
            lease=lease,
            on_budget=on_budget,
            local=local,
            run_id=run_id,
        )
        if not lease:  # up is done: its record holds the cluster now (a burst renews until its teardown)
            lease_renewal.release(plan.cluster_id)
        return record


def _bring_up(
    plan: Plan,
    rt: Runtime,
    token: str,
    *,
    expires_at: dt.datetime | None,
    ttl_s: float | None,
    max_cost_usd: Decimal | None,
    destroy_on_failure: bool,
    lease: bool,
    on_budget: str,
    local: bool = False,
    run_id: str | None = None,
) -> state.ClusterRecord:
    cluster_id = plan.cluster_id
    existing = state.load_record(cluster_id)
    if existing is not None and existing.plan.option != plan.option and existing.status != "creating":
        raise UsageError(
            f"cluster {cluster_id} already exists on {existing.provider} "
            f"({existing.plan.option.instance_type}); run: provisioner down {cluster_id}"
        )
    secrets = cluster_secrets(cluster_id)
    now = rt.now()
    expires_at = budget_expiry(plan, now, expires_at or expiry_for(plan, now, ttl_s), max_cost_usd, on_budget)
    run_id = existing.run_id if existing is not None else run_id or state.new_run_id(now)  # a moved run keeps its id
    # The one realize input (the Pulumi program builds its nodes from the same function).
    specs = list(realize_input(plan, secrets, RunFacts(owner_id(), expires_at, lease=token, run=run_id)).specs)
    record = state.ClusterRecord(
        cluster_id=cluster_id,
        provider=plan.option.provider,
        engine="direct",
        plan=plan,
        created_at=existing.created_at if existing else now,
        expires_at=expires_at,
        max_cost_usd=max_cost_usd,
        on_budget=on_budget,
        status="creating",
        lease_id=token,
        lease_pid=os.getpid() if lease else None,
        lease_host=socket.gethostname() if lease else None,
        run_id=run_id,
        local=local or (existing is not None and existing.local),
    )
    provider = rt.provider(plan.option.provider)  # a missing API key fails here, before any record exists
    refuse_rejected_key(provider, plan.option.provider)  # and a rejected one here
    if nothing_to_do(plan, existing, provider):  # up again, unchanged: no "creating", no second bootstrap
        assert existing is not None
        rt.emit("up", message=f"cluster {cluster_id} is up as planned: nothing to do", cluster=cluster_id)
        return existing
    if rt.remote is None and not record.local:  # real SSH would wait on a plain fake's unanswerable nodes
        refuse_plain_fake(plan.option.provider)
    state.save_record(record)
    option = plan.option
    rt.emit(
        "create",
        message=f"creating {option.nodes} x {option.instance_type} on {option.provider} "
        f"{option.region} ({usd_text(option.hourly_usd)}/h) for cluster {cluster_id} (run {record.run})"
        + (" as a local dry run" if record.local else ""),
        cluster=cluster_id,
        run=record.run_id,
        local=record.local,
        provider=option.provider,
        region=option.region,
        instance_type=option.instance_type,
        nodes=option.nodes,
        hourly_usd=option.hourly_usd,
    )
    rt.touched.add(option.provider)
    try:
        with rt.held():
            ensure_firewall(provider, plan)
            created = provider.create_nodes(cluster_id, specs)
        lease_renewal.start(provider, cluster_id, token, owner_id(), rt.now())  # renewed while this holds it
    except (ProviderError, ClusterBusyError) as exc:
        _clear_failed_try(rt, provider, record, exc)
        raise
    except Exception as exc:  # a bug or an answer nothing expected: nodes may exist, say so
        state.save_record(record.model_copy(update={"status": "failed"}))
        raise StackError(
            f"bringing up {cluster_id} failed unexpectedly ({type(exc).__name__}); nodes may exist "
            f"on {record.provider}; remove with: provisioner down {cluster_id} --engine direct"
        ) from exc
    record = record.model_copy(update={"node_ids": {node.name: node.id for node in created}})
    try:  # bought: from here on every failure (the ledger's too) names the nodes and the down command
        state.save_record(record)
        return _finish(rt, provider, plan, record, secrets)
    except ProvisionerError as exc:
        return _failed(rt, provider, record, exc, destroy_on_failure)
    except Exception as exc:  # not a ProvisionerError: still never a stuck record or an unnamed node
        return _failed(
            rt, provider, record, StackError(f"unexpected {type(exc).__name__}"), destroy_on_failure, cause=exc
        )


def refuse_plain_fake(name: str) -> None:
    """UsageError before anything is bought when ``name``'s URL is this tool's fake provider, whose nodes
    are documentation addresses that never boot: an ``up`` there would buy, then wait on SSH for nothing.
    ``up --local`` boots the same plan's nodes on this machine behind a fake whose nodes do boot."""
    from provisioner.providers.settings import plain_fake

    url = plain_fake(name)
    if url is not None:
        raise UsageError(
            f"PROVISIONER_{name.upper()}_API_URL ({url}) is the tool's fake {name} provider, whose nodes "
            "never boot: nothing was bought; for a dry run that boots the nodes here: provisioner up SPEC --local"
        )


def refuse_rejected_key(provider: Provider, name: str) -> None:
    """CredentialsError, saying nothing was bought and what to set, when the provider rejects the
    credentials (one read-only request), before any record is saved or anything is bought. Any
    other failure of that request is left to the create, which retries and cleans up after itself."""
    from provisioner.providers.settings import credentials_fix

    try:
        provider.check_credentials()
    except CredentialsError as exc:
        raise CredentialsError(
            exc.provider, f"{exc.message}; nothing was bought: {credentials_fix(name)} and run the command again"
        ) from None
    except ProviderError:
        pass


def _clear_failed_try(
    rt: Runtime, provider: Provider, record: state.ClusterRecord, error: ProviderError | ClusterBusyError
) -> None:
    """After a failed create: delete what the provider still lists of this call's launches (this
    owner's mark and this call's lease mark: a concurrent create's nodes are never touched), wait,
    forget the record.

    When that cleanup fails too (the provider cannot list or delete), the record stays, marked
    ``failed``, so ``down`` and ``gc`` can find the nodes, and the create's own error (which
    says instances may exist and how to remove them) is what the caller raises."""
    try:
        left = delete_owned(provider, record.cluster_id, lease=record.lease_id).deleted
        if left:
            ids = {node.id for node in left}
            rt.emit(
                "cleanup",
                message=f"deleted {len(left)} node(s) left by the failed create",
                cluster=record.cluster_id,
                nodes=[node.name for node in left],
            )
            wait_deleted(rt.wait, provider, record.cluster_id, timeout_s=rt.timeouts.deleted_s, ids=ids)
    except ProvisionerError as cleanup:
        state.save_record(record.model_copy(update={"status": "failed"}))
        rt.emit(
            "error",
            message=f"cleanup after the failed create failed too ({cleanup}); the record of "
            f"{record.cluster_id} is kept for provisioner down / gc",
            cluster=record.cluster_id,
        )
        return
    remove_firewall(rt.emit, provider, record.cluster_id)
    state.remove_record(record.cluster_id)  # nothing was bought: the next try starts clean


def _finish(
    rt: Runtime, provider: Provider, plan: Plan, record: state.ClusterRecord, secrets: ClusterSecrets
) -> state.ClusterRecord:
    cluster_id = plan.cluster_id
    wanted = {node.name for node in plan.nodes}
    ours = set(record.node_ids.values())  # what create_nodes made or adopted: never a rival's same-named node
    rt.emit("wait-running", message=f"waiting for {len(wanted)} node(s) to run", cluster=cluster_id)
    nodes = wait_running(rt.wait, provider, cluster_id, wanted, timeout_s=rt.timeouts.running_s, ids=ours)
    by_name = {node.name: node for node in nodes}
    head = by_name[plan.head.name]
    record = record.model_copy(
        update={
            "head_address": node_address(head),
            "node_ids": {name: node.id for name, node in by_name.items() if name in wanted},
        }
    )
    state.save_record(record)
    _emit_running(rt, plan, by_name)
    refuse_unanswerable(rt, plan, (by_name[node.name] for node in plan.nodes))
    remote = rt.remote or default_remote(plan, secrets)
    # A node's boot-time bootstrap (user data, start command) could not know the other nodes'
    # addresses, nor on Lambda/RunPod its own name: with more than one node, every node gets the
    # bootstrap again over SSH, rendered with the addresses now known (one-off steps are skipped).
    ssh_pass(rt, remote, provider, plan, secrets, by_name)
    rt.emit(
        "wait-ready",
        message=f"waiting for the {plan.spec.control_plane.value} control plane to list every node ready",
        cluster=cluster_id,
    )
    readiness.wait_ready(plan, remote, by_name, rt)
    record = record.model_copy(update={"status": "up"})
    state.save_record(record)
    emit_up(rt, plan, head, record.expires_at)
    return record


def _emit_running(rt: Runtime, plan: Plan, by_name: Mapping[str, Node]) -> None:
    head = by_name[plan.head.name]
    rt.emit(
        "running",
        message=f"every node runs; head {plan.head.name} at {node_address(head)}",
        cluster=plan.cluster_id,
        head_address=node_address(head),
        nodes={node.name: node_address(by_name[node.name]) for node in sorted(plan.nodes, key=lambda n: n.name)},
    )


def emit_up(rt: Runtime, plan: Plan, head: Node, expires_at: dt.datetime | None, **extra: object) -> None:
    """The ``up`` event both engines end with (the pulumi engine adds its stack's ``outputs``)."""
    login = ssh_target(head, CLUSTER_USER)
    rt.emit(
        "up",
        message=f"cluster {plan.cluster_id} is up: ssh {ssh_text(login) if login else '-'} "
        f"(provisioner ssh {plan.cluster_id})",
        cluster=plan.cluster_id,
        head_address=node_address(head),
        hourly_usd=plan.option.hourly_usd,
        expires_at=expires_at.isoformat() if expires_at else None,
        **extra,
    )


def refuse_unanswerable(rt: Runtime, plan: Plan, nodes: Iterable[Node]) -> None:
    """StackError at once when real SSH (no injected remote) would wait on documentation addresses (a
    fake provider's nodes), instead of after the SSH and readiness timeouts (``up``, ``watch``)."""
    silent = unanswerable(nodes) if rt.remote is None else []
    if silent:
        raise StackError(
            f"node(s) {', '.join(silent)} of {plan.cluster_id} have documentation (TEST-NET) "
            f"addresses where no machine will ever answer SSH: is PROVISIONER_"
            f"{plan.option.provider.upper()}_API_URL a fake provider without nodes?"
        )


def await_stack(plan: Plan, rt: Runtime) -> dict[str, Node]:
    """After ``pulumi up`` made ``plan``'s nodes: what the direct engine does once it bought them. Waits
    until every node runs (found by the provider's tags, env or names, as ``get_nodes`` always does)
    and until the control plane lists every node ready; the stack's ``ClusterTopology`` step ran the
    SSH pass already, on every provider. Blocks; raises StackError (nodes that never run or answer,
    documentation addresses) and NotReadyError. Returns the nodes by name."""
    cluster_id = plan.cluster_id
    provider = rt.provider(plan.option.provider)
    wanted = {node.name for node in plan.nodes}
    rt.emit("wait-running", message=f"waiting for {len(wanted)} node(s) to run", cluster=cluster_id)
    nodes = wait_running(rt.wait, provider, cluster_id, wanted, timeout_s=rt.timeouts.running_s)
    by_name = {node.name: node for node in nodes if node.name in wanted}
    _emit_running(rt, plan, by_name)
    refuse_unanswerable(rt, plan, (by_name[node.name] for node in plan.nodes))
    secrets = cluster_secrets(cluster_id)
    remote = rt.remote or default_remote(plan, secrets)
    rt.emit(
        "wait-ready",
        message=f"waiting for the {plan.spec.control_plane.value} control plane to list every node ready",
        cluster=cluster_id,
    )
    readiness.wait_ready(plan, remote, by_name, rt)
    return by_name


def _failed(
    rt: Runtime,
    provider: Provider,
    record: state.ClusterRecord,
    exc: ProvisionerError,
    destroy: bool,
    cause: BaseException | None = None,
) -> state.ClusterRecord:
    if destroy:
        rt.emit("error", message=f"bring-up failed ({exc}); tearing down", cluster=record.cluster_id)
        tear_down(record.cluster_id, rt)
        raise exc from cause
    with contextlib.suppress(ProvisionerError):  # a record or ledger that cannot be written: still name the nodes
        state.save_record(record.model_copy(update={"status": "failed"}))
    try:
        left = live(provider.get_nodes(record.cluster_id))
        names = ", ".join(f"{node.name} ({node.id})" for node in left) or "none listed"
    except ProvisionerError:  # the listing fails too (the same bad answer): name what the record knows
        names = ", ".join(f"{name} ({node_id})" for name, node_id in sorted(record.node_ids.items())) or "unknown"
    raise StackError(
        f"bringing up {record.cluster_id} failed: {exc}; still on {record.provider}: {names}; "
        f"remove with: provisioner down {record.cluster_id} --engine direct"
    ) from (cause or exc)


def bring_up_first(
    plans: Sequence[Plan], runtime: Runtime | None = None, *, max_tries: int = 3, **options: object
) -> state.ClusterRecord:
    """``bring_up`` the first plan whose purchase finds capacity, trying at most ``max_tries``
    (``provisioner.realize.failover.first_that_fits``, the loop the pulumi engine runs too).

    Only a CapacityError moves on (each try reported as a ``failover`` event, nothing left
    from it: ``bring_up`` deletes leftovers and checks the provider lists none; a kept record
    means it could not, and nothing more is bought while nodes of that try may exist); any other
    error, or the last try's CapacityError, propagates.
    """
    rt = runtime or Runtime()
    return first_that_fits(
        plans,
        lambda plan: bring_up(plan, rt, **options),  # type: ignore[arg-type]
        lambda plan: state.load_record(plan.cluster_id) is None,
        emit=rt.emit,
        max_tries=max_tries,
    )


def cluster_nodes(
    cluster_id: str, runtime: Runtime | None = None, *, this_run: bool = False
) -> tuple[state.ClusterRecord, list[Node]]:
    """The local record and what the provider lists now (``this_run``: only this run's nodes, as ``status``
    counts them, lifecycle.runs.of_run: what ``ssh``/``outputs``/``validate`` may take for a node; a
    pulumi record names no node ids). ProvisionerError without a record."""
    rt = runtime or Runtime()
    record = state.load_record(cluster_id)
    if record is None:
        raise UsageError(f"no record of cluster {cluster_id} here (see provisioner status)")
    nodes = rt.provider(record.provider).get_nodes(cluster_id)
    return record, of_run(record, nodes) if this_run else nodes


__all__ = [
    "LIVE",
    "Runtime",
    "Timeouts",
    "await_stack",
    "bring_up",
    "bring_up_first",
    "cluster_nodes",
    "cluster_secrets",
    "default_remote",
    "expiry_for",
    "head_target",
    "live",
    "node_address",
    "node_specs",
    "refuse_unanswerable",
    "ssh_pass",
    "ssh_pass_nodes",
    "switch_paths",
    "tear_down",
    "utc_now",
]
