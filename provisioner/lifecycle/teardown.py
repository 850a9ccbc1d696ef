"""The direct engine's ``down``: a cluster's nodes of this run deleted, owner-checked, and the cluster forgotten.

``tear_down(cluster_id)`` holds the cluster (lifecycle.lease), deletes through the provider API
the nodes of the cluster that carry this owner's mark (providers.ownership.delete_owned: other
owners' nodes are never deleted, unmarked ones only with ``force_unowned``) and, with a local
record, only this run's (lifecycle.runs.of_run: the record's run mark; unmarked nodes, Fluence's,
by the record's node ids and launch times): a node an earlier run of the name left alive is not
deleted but named in one line with the ``gc`` command that removes it. Without a record (a
rescue after it was lost) no run is known: every node of the name this owner has is deleted,
whatever its run, and the output says so. Waits until none of the deleted nodes is pending or
running and forgets the record, secrets and key copy. Idempotent. A reservation bought for the
cluster that cannot be cancelled (an EC2 Capacity Block) is reported as a ``reservation`` event.
"""

from __future__ import annotations

from provisioner.errors import UsageError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import state
from provisioner.lifecycle.access import remove_firewall
from provisioner.lifecycle.reservations import report_left
from provisioner.lifecycle.runs import of_run, other_runs_line
from provisioner.providers.base import Node
from provisioner.providers.orchestrate import gc_command
from provisioner.providers.ownership import Deletion, delete_owned
from provisioner.realize.launch import wait_deleted
from provisioner.realize.runtime import Runtime


def tear_down(
    cluster_id: str, runtime: Runtime | None = None, *, provider: str | None = None, force_unowned: bool = False
) -> list[str]:
    """Delete this run's nodes of ``cluster_id`` that this owner made, through its provider's API, and
    forget the cluster (the module docstring says which nodes).

    The provider comes from the local record, else ``provider``. Holds the cluster's lock
    (ClusterBusyError while another ``up``/``down``/``gc`` holds it). Another owner's nodes are kept,
    and unmarked ones unless ``force_unowned``; each kept node is reported (``kept`` event); another
    run's, in one ``other-runs`` event. Blocks until none of the deleted nodes is pending or running.
    Idempotent: an already-gone cluster returns []. Returns the deleted ids. Raises UsageError when
    neither a record nor ``provider`` names where the cluster lives.
    """
    rt = runtime or Runtime()
    with cluster_lease.hold(cluster_id, "down"):
        return _tear_down(cluster_id, rt, provider, force_unowned)


def _tear_down(cluster_id: str, rt: Runtime, provider: str | None, force_unowned: bool) -> list[str]:
    record = state.load_record(cluster_id)
    name = record.provider if record is not None else provider
    if name is None:
        raise UsageError(
            f"no record of cluster {cluster_id} here; name its provider (--provider) or run: provisioner gc",
            option="--provider",
        )
    if record is not None:
        state.save_record(record.model_copy(update={"status": "deleting"}))
    adapter = rt.provider(name)
    ours = None if record is None else (lambda node: bool(of_run(record, [node])))
    deletion = delete_owned(adapter, cluster_id, force_unowned=force_unowned, select=ours)
    left = list(deletion.deleted)
    rt.emit(
        "teardown",
        message=f"deleting {len(left)} node(s) of {cluster_id} on {name}" + ("" if record else _unrecorded(left)),
        cluster=cluster_id,
        provider=name,
        nodes=[node.name for node in left],
        runs=sorted({node.run or "n/a" for node in left}),
    )
    _report_left(rt, cluster_id, name, deletion)
    if left:
        wait_deleted(rt.wait, adapter, cluster_id, timeout_s=rt.timeouts.deleted_s, ids={node.id for node in left})
    if record is not None and left:  # planned vs actual, the ledger, the provider's billing record
        from provisioner.lifecycle.spend import emit_settled

        emit_settled(rt.emit, adapter, record, left, rt.now())
    remove_firewall(rt.emit, adapter, cluster_id)
    state.remove_record(cluster_id)
    said = (
        f"cluster {cluster_id} is down ({len(left)} node(s) deleted)"
        if left or record is not None
        else f"nothing left of cluster {cluster_id} on {name}"
    )
    rt.emit("down", message=said, cluster=cluster_id, deleted=[node.id for node in left])
    report_left(rt, adapter, cluster_id, name)  # a paid Capacity Block outlives its instances
    return [node.id for node in left]


def _unrecorded(left: list[Node]) -> str:
    """What a ``down`` with no record here deletes, said (no run is known: every run's nodes of the name)."""
    if not left:
        return ""
    runs = ", ".join(sorted({node.run or "n/a" for node in left}))
    return f": no record here, so every node of the name you own is deleted, whatever its run (run {runs})"


def report_kept(rt: Runtime, cluster_id: str, deletion: Deletion, provider: str | None = None) -> None:
    """A ``kept`` event for each node the owner-checked delete would not touch, and why."""
    where = f" on {provider}" if provider else ""
    for node, why in deletion.kept:
        rt.emit(
            "kept",
            message=f"not deleted: {node.name} ({node.id}) of {cluster_id}{where}: {why}",
            cluster=cluster_id,
            node=node.name,
            id=node.id,
            why=why,
        )


def _report_left(rt: Runtime, cluster_id: str, name: str, deletion: Deletion) -> None:
    report_kept(rt, cluster_id, deletion, name)
    if deletion.others:
        rt.emit(
            "other-runs",
            message=other_runs_line(cluster_id, name, deletion.others),
            cluster=cluster_id,
            nodes=[{"name": n.name, "id": n.id, "run": n.run} for n in deletion.others],
            command=gc_command(name, cluster_id),
        )


__all__ = ["report_kept", "tear_down"]
