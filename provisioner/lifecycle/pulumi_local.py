"""``up --local --engine pulumi``: the local twin's lab under the pulumi engine (docs/stacks.md, "The
local twin on the real engine"). A lab that was not running has none of the cluster's nodes, so
what the state dir kept of an earlier lab's (its stack, its nodes' pinned host keys) is dropped
before a new lab starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.plan import Plan
    from provisioner.realize.events import Emit


def local_plans(plans: list[Plan], emit: Emit, max_tries: int) -> list[Plan]:
    """``lab.local_plans`` for the pulumi engine. A lab that was not running has none of the cluster's
    nodes: a stack kept from an earlier lab (killed, or this machine restarted) is forgotten first, or
    pulumi would take its recorded nodes for live ones and make none; so are the host keys pinned for
    them, which the new nodes' (proven by the stack's SSH pass, in its own known_hosts) would not match
    at the same addresses."""
    from provisioner.lifecycle import pulumi_engine, state
    from provisioner.local import lab

    cluster_id = plans[0].cluster_id
    if lab.lab_for(cluster_id) is None:
        (state.ssh_dir(cluster_id) / "known_hosts").unlink(missing_ok=True)
        if pulumi_engine.forget(cluster_id):
            emit("local", message=f"local: forgot the stack of {cluster_id}'s earlier lab (its nodes went with it)")
    return lab.local_plans(plans, emit, max_tries)


__all__ = ["local_plans"]
