"""Which listed nodes of a cluster name are this run's (docs/security.md, the run mark).

A provider lists a cluster by its name; an earlier bring-up of the same name may have left nodes
alive there. Two rules tell them apart, both from the record and each node's run mark
(``Node.run``):

- ``of_run``: this run's money, ``status`` and what ``down`` deletes. A marked node is this run's
  exactly when its mark is the record's run id; an unmarked one (Fluence, or bought before marks)
  when the record names it or it was launched since the run began (a killed ``up``'s purchase the
  record never learnt).
- ``healed_by_run``: what ``watch``/``burst`` may heal, replace or reach over SSH. A marked node as
  above; an unmarked one only when the record names it or the heal itself bought it: a launch time
  proves nothing about whose an unmarked node is, and a wrong guess would replace someone's node.

``other_runs_line`` is the one line ``down`` prints for what it left (with the gc command);
``name_taken`` why a heal must not buy a node's name again (another run's instance holds it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from provisioner.lifecycle.state import ClusterRecord
from provisioner.providers.base import Node, NodeStatus, owner_id
from provisioner.providers.orchestrate import gc_command
from provisioner.providers.ownership import LIVE

RUN_CLOCK_MARGIN = dt.timedelta(seconds=60)
"""How far a node's launch time (the provider's clock) may precede its run's record (this machine's)."""


def _marked(record: ClusterRecord, node: Node) -> bool | None:
    """True/False when the node's run mark decides (both it and the record carry a run id), else None."""
    if node.run is not None and record.run_id is not None:
        return node.run == record.run_id
    return None


def of_run(record: ClusterRecord, nodes: Sequence[Node]) -> list[Node]:
    """The listed nodes that are this run's money and this run's to show and delete. A node carrying a
    run mark (``Node.run``) is this run's exactly when the mark is the record's run id, whatever its
    times (an earlier or another bring-up of the same name, still alive, is not). A node without one
    (bought before runs were marked, or on Fluence) is when the record names it or it was launched since
    the run began (a replacement, a killed ``up``'s purchase); not when it ended, or was launched, before."""
    ours = set(record.node_ids.values())
    since = record.created_at - RUN_CLOCK_MARGIN
    kept = []
    for node in nodes:
        marked = _marked(record, node)
        if marked is not None:
            if marked:
                kept.append(node)
            continue
        if node.id not in ours:
            if node.ended_at is not None and node.ended_at <= record.created_at:
                continue
            if node.launched_at is not None and node.launched_at < since:
                continue
            if node.launched_at is None and node.status not in (NodeStatus.PENDING, NodeStatus.RUNNING):
                continue
        kept.append(node)
    return kept


def healed_by_run(record: ClusterRecord, nodes: Sequence[Node], bought: Collection[str] = ()) -> list[Node]:
    """The listed nodes a heal may take for this run's: marked with the record's run id, or (unmarked:
    Fluence, or bought before marks) named by the record or in ``bought`` (the ids the heal created)."""
    ours = {*record.node_ids.values(), *bought}
    kept = []
    for node in nodes:
        marked = _marked(record, node)
        if marked or (marked is None and node.id in ours):
            kept.append(node)
    return kept


def name_taken(record: ClusterRecord, nodes: Sequence[Node], name: str, bought: Collection[str] = ()) -> str | None:
    """Why a heal must not buy ``name`` again (None: it may): a live instance of this owner under that name
    is another run's (``healed_by_run`` leaves it out). On a provider without a run mark the create would
    adopt it as the replacement; on one with marks it refuses the create the same way."""
    mine = {n.id for n in healed_by_run(record, nodes, bought)}
    me = owner_id()
    for node in nodes:
        if node.name == name and node.id not in mine and node.owner == me and node.status in LIVE:
            return (
                f"{name} of {record.cluster_id} is taken by instance {node.id} of another run "
                f"(run {node.run or 'n/a'}); it is not adopted: remove it with: "
                f"{gc_command(record.provider, record.cluster_id)}"
            )
    return None


def other_runs_line(cluster_id: str, provider: str, others: Sequence[Node]) -> str:
    """One line naming the nodes of ``cluster_id`` that are another run's and were left, and the command
    that removes them (``gc --cluster``: naming the cluster is the decision to remove it)."""
    listed = ", ".join(f"{n.name} ({n.id}, run {n.run or 'n/a'})" for n in sorted(others, key=lambda n: n.name))
    return (
        f"not deleted: {len(others)} node(s) of {cluster_id} on {provider} of another run: {listed}; "
        f"remove with: {gc_command(provider, cluster_id)}"
    )


__all__ = ["RUN_CLOCK_MARGIN", "healed_by_run", "name_taken", "of_run", "other_runs_line"]
