"""What the pulumi engine does about a previous engine that was killed (issue 25 item 4).

- ``unlocked``: an update after stopping the dynamic-provider servers a killed engine of this
  state dir left running (``stack_lock.stop_orphans``), and, when the backend refuses it for a
  lock a dead engine of this host left, after removing that lock (``pulumi cancel``); any other
  lock is one line naming it (``stack_lock.StackLock.refusal``).
- ``clear_pending``: before ``up``, a stack holding a killed engine's pending operations is
  refreshed with its pending creates dropped. A dropped create's nodes are not lost: the
  neoclouds' ``NeocloudNodes`` create is idempotent on node names and adopts them.
- ``sweep``: after ``down`` destroyed the stack, the adapter deletes any node of the cluster
  still there that this owner made (``providers.ownership.delete_owned``) for the stack's run
  (``stack_runs``, the record's): one a killed engine created but never recorded; another run's
  node of the name is named, not deleted. Waits until they are gone; a provider that cannot be asked is a
  warning naming ``provisioner gc``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.errors import ProvisionerError, StackLockedError
from provisioner.lifecycle.stack_lock import lock_in, stop_orphans
from provisioner.providers.base import Node
from provisioner.realize.events import Emit


@dataclass(frozen=True)
class Where:
    """The stack an update is about: its cluster, its backend's URL and this state dir's workspace."""

    cluster_id: str
    backend_url: str
    work_dir: Path


def unlocked(auto: Any, stack: Any, where: Where, run: Callable[[], Any]) -> Any:
    """``run()`` (an update of ``stack``) as the module docstring says. StackError for a live lock."""
    stop_orphans(where.work_dir)
    try:
        return run()
    except auto.errors.CommandError as exc:
        lock = lock_in(str(exc))
        if lock is None:
            raise
        if not lock.stale():
            raise StackLockedError(lock.refusal(where.cluster_id, where.backend_url)) from None
    stack.cancel()
    return run()


def pending(stack: Any) -> list[str]:
    """``kind name`` of each pending operation the stack's state holds (a killed engine's). ``stack.state()``
    (``pulumi_stack.EngineStack``) is read once per command until an update: ``owners``, ``stack_runs``
    and this share one ``pulumi stack export``."""
    deployment = stack.state()
    out = []
    for operation in deployment.get("pending_operations") or []:
        urn = str((operation.get("resource") or {}).get("urn", ""))
        out.append(f"{operation.get('type', '?')} {urn.rsplit('::', 1)[-1]}")
    return out


def clear_pending(auto: Any, stack: Any, where: Where, emit: Emit) -> list[str]:
    """Refresh ``stack`` dropping its pending creates, when it holds pending operations (a warning says
    so, once the refresh was let through: a live engine's are refused with its lock). Returns them."""
    found: list[str] = unlocked(auto, stack, where, lambda: pending(stack))
    if not found:
        return found
    unlocked(
        auto,
        stack,
        where,
        lambda: stack.refresh(
            clear_pending_creates=True,
            on_output=lambda line: emit("pulumi-output", message=line.rstrip()),
            color="never",
        ),
    )
    emit(
        "warning",
        message=f"stack {where.cluster_id} held pending operations of an engine that was stopped: "
        f"{', '.join(found)}; refreshed, the pending creates dropped (their nodes are adopted by name)",
        cluster=where.cluster_id,
    )
    return found


def owners(stack: Any) -> list[str]:
    """The owners the stack's neocloud nodes are created for (their ``owner`` input), pending creates
    included: whom ``sweep`` deletes for when a teammate destroys the stack. [] when unreadable."""
    found: set[str] = set()
    for entry in _entries(stack):  # unreadable: [] (sweep then deletes for this machine's owner)
        nodes = (entry.get("inputs") or {}).get("nodes")
        for node in nodes if isinstance(nodes, list) else []:
            if isinstance(node, dict) and isinstance(node.get("owner"), str):
                found.add(node["owner"])
    return sorted(found)


def stack_runs(stack: Any) -> set[str]:
    """The run ids the stack's nodes were bought for: the neocloud nodes' ``run`` input, the AWS/GCP
    instances' run tag or label. Empty when unreadable or run by hand (no run)."""
    from provisioner.providers.base import RUN_TAG

    found: set[str] = set()
    for entry in _entries(stack):
        inputs = entry.get("inputs") or {}
        nodes = inputs.get("nodes")
        marks = [n.get("run") for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
        marks += [
            (inputs.get(prop) or {}).get(RUN_TAG) for prop in ("tags", "labels") if isinstance(inputs.get(prop), dict)
        ]
        found.update(mark for mark in marks if isinstance(mark, str) and mark)
    return found


def _entries(stack: Any) -> list[dict[str, Any]]:
    """The state's resources and pending operations' resources ([] when unreadable)."""
    try:
        deployment = stack.state()
    except Exception:  # best effort: the callers fall back to what they know without it
        return []
    return [
        *(deployment.get("resources") or []),
        *[(op.get("resource") or {}) for op in deployment.get("pending_operations") or []],
    ]


def sweep(
    provider: str,
    cluster_id: str,
    emit: Emit,
    owners: list[str] | None = None,
    select: Callable[[Node], bool] | None = None,
) -> None:
    """Delete (and wait out) every node of ``cluster_id`` that ``owners`` (default: this machine's
    ``owner_id()``) still have at ``provider`` and ``select`` accepts (the stack's run: another run's
    node of the name is named in one ``other-runs`` line with the gc that removes it, not deleted)."""
    from provisioner.lifecycle.realize import Runtime
    from provisioner.lifecycle.runs import other_runs_line
    from provisioner.providers.ownership import delete_owned
    from provisioner.realize.launch import wait_deleted

    runtime = Runtime(emit=emit)
    try:
        adapter = runtime.provider(provider)
        whose: list[str | None] = [*owners] if owners else [None]
        done = [delete_owned(adapter, cluster_id, owner=owner, select=select) for owner in whose]
        deleted = {n.id for deletion in done for n in deletion.deleted}
        others = {n.id: n for deletion in done for n in deletion.others}
    except ProvisionerError as exc:  # the stack is gone; say how to look again rather than fail
        emit(
            "warning",
            message=f"could not check {provider} for nodes of {cluster_id} the stack did not hold ({exc}); "
            f"look again with: provisioner gc --provider {provider}",
            cluster=cluster_id,
        )
        return
    if others:
        emit(
            "other-runs",
            message=other_runs_line(cluster_id, provider, list(others.values())),
            cluster=cluster_id,
            nodes=[{"name": n.name, "id": n.id, "run": n.run} for n in others.values()],
        )
    if deleted:
        emit(
            "warning",
            message=f"deleted {len(deleted)} node(s) of {cluster_id} the stack did not hold (a stopped engine's)",
            cluster=cluster_id,
        )
        wait_deleted(runtime.wait, adapter, cluster_id, timeout_s=runtime.timeouts.deleted_s, ids=deleted)


__all__ = ["Where", "clear_pending", "owners", "pending", "stack_runs", "sweep", "unlocked"]
