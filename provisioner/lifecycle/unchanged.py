"""An ``up`` of a cluster that is already up as planned: nothing to buy, nothing to bootstrap.

``up`` is idempotent on the cluster id, so a second one adopted the live nodes, said ``creating
...`` and ran the bootstrap again over SSH. When the local record says the cluster is up with the
same option and node list, and its provider lists every node running, there is nothing to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.lifecycle.state import ClusterRecord
    from provisioner.plan import Plan
    from provisioner.providers.base import Provider


def nothing_to_do(plan: Plan, existing: ClusterRecord | None, provider: Provider) -> bool:
    """Whether ``existing`` is ``plan`` brought up already: status up, the same option and nodes,
    every node listed running at ``provider`` (one listing; a provider error means "look again")."""
    from provisioner.errors import ProviderError
    from provisioner.providers.base import NodeStatus

    if existing is None or existing.status != "up" or existing.plan.option != plan.option:
        return False
    if [n.name for n in existing.plan.nodes] != [n.name for n in plan.nodes]:
        return False
    try:
        nodes = provider.get_nodes(plan.cluster_id)
    except ProviderError:
        return False
    running = {node.name for node in nodes if node.status == NodeStatus.RUNNING}
    return all(node.name in running for node in plan.nodes)


__all__ = ["nothing_to_do"]
