"""What an adapter supplies to ``providers.orchestrate.create`` for one ``create_nodes`` call: a
``Launcher`` (list the cluster's ``Member``s, launch a batch, terminate ids, and optional hooks),
so the adopt, rollback and fail-closed rules live once, in ``orchestrate``.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.providers.base import Node, NodeSpec, owner_id


@dataclass(frozen=True)
class Member:
    """One live instance of the cluster as its provider lists it.

    ``name`` is the node name (None: bought but not named yet, adoptable by type and region);
    ``owner``/``lease``/``run`` the owner, lease and run marks it carries (None: none), ``renewed_at``
    when its lease was last renewed (None: not renewed).
    """

    id: str
    name: str | None
    instance_type: str = ""
    region: str = ""
    owner: str | None = None
    lease: str | None = None
    renewed_at: dt.datetime | None = None
    run: str | None = None

    @classmethod
    def of(cls, node: Node, name: str | None = None) -> Member:
        return cls(
            node.id,
            name or node.name,
            node.instance_type,
            node.region,
            node.owner,
            node.lease,
            node.renewed_at,
            node.run,
        )


class Launcher(ABC):
    """What one adapter supplies for one ``create_nodes`` call. Subclasses override the first three.

    ``workers``: batches launched at once (1: in order). The optional hooks default to nothing.
    ``relaunch_on_5xx``: see below; off unless the provider is known not to act on a 5xx.
    """

    provider: str = ""
    workers: int = 1
    relaunch_on_5xx = False
    """Whether a definite 500/502/503 with nothing appeared means the provider did not act (launch once more)."""
    rival_wait_s = 15.0
    """How long a create that won a race waits for the loser's instances to go before yielding itself."""
    rival_poll_s = 0.5
    carries_lease = True
    """Whether launched instances show the lease mark back (False: Fluence, whose names have no room);
    without it two racing creates are told apart by instance ids (providers.rivals)."""

    def __init__(self, provider: str, cluster_id: str) -> None:
        self.provider = provider
        self.cluster_id = cluster_id
        self.owner = owner_id()
        """The owner mark this call's instances carry (an adapter with its own owner sets it)."""
        self.lease: str | None = None
        """This call's lease mark (from the NodeSpecs; None: the caller holds no lease)."""
        self.run: str | None = None
        """The run id this call's nodes are bought for (from the NodeSpecs; None: no run mark)."""

    def mine(self, member: Member) -> bool:
        """Whether ``member`` carries this call's owner mark and, where it has one, its lease mark."""
        return member.owner == self.owner and (member.lease is None or self.lease is None or member.lease == self.lease)

    @abstractmethod
    def members(self) -> list[Member]:
        """The cluster's live (not terminating/terminated) instances. Read-only."""

    @abstractmethod
    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        """Buy ``batch``; the new ids in the batch's order (fewer: capacity ran out part-way)."""

    @abstractmethod
    def terminate(self, ids: Sequence[str]) -> list[str]:
        """Delete ``ids`` (gone already is success); return the ids that could not be deleted."""

    def prepare(self, missing: Sequence[NodeSpec]) -> None:
        """Resolve everything the launches need before anything is bought (may raise)."""
        return None  # optional hook: nothing by default

    def batches(self, missing: Sequence[NodeSpec]) -> list[list[NodeSpec]]:
        """How the missing nodes are launched: one node per launch unless overridden."""
        return [[spec] for spec in missing]

    def adopt(self, member_id: str, spec: NodeSpec) -> None:
        """Make an unnamed member ``spec``'s node (e.g. rename it). Called from a launch thread."""
        return None  # optional hook: nothing by default

    def finish(self) -> None:
        """Called once every batch launched; raise to roll the call back (e.g. a rename failed)."""
        return None  # optional hook: nothing by default

    def abort(self) -> None:
        """Called before a rollback: stop background work that would touch the instances."""
        return None  # optional hook: nothing by default

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        return f"{len(batch)} x {spec.instance_type} in {spec.region or 'any region'}"

    def capacity_hint(self) -> str:
        """Appended to a CapacityError (e.g. where capacity is now); best effort, '' if unknown."""
        return ""


__all__ = ["Launcher", "Member"]
