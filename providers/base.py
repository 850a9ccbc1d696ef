"""The one small interface every provider adapter implements.

Contract (checked by tests/providers/contract.py for every adapter):

- ``list_offers`` is read-only and returns ``provisioner.offer.Offer`` objects.
- ``create_nodes`` is idempotent on (cluster_id, node name): a retry finds the nodes it
  already launched instead of buying more. If it cannot create all of them it deletes
  the ones it made and raises (``CapacityError`` naming what was tried); if even that
  cleanup fails, the error lists what remains and how to remove it.
- ``get_nodes`` is the source of truth, found by the cluster tag/label/name, with a
  normalized ``NodeStatus``.
- ``delete_nodes`` of an already-gone node succeeds. It does not wait; callers use
  ``provisioner.waiting.wait_until`` with ``get_nodes``.
- Every SDK/HTTP error is mapped into ``provisioner.errors`` inside the adapter's client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from provisioner.capabilities import Capability
from provisioner.offer import Offer

CLUSTER_TAG = "provisioner-cluster"
"""Tag/label key (or name prefix where a provider has no tags) marking a cluster's nodes."""


class NodeStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    TERMINATED = "terminated"
    FAILED = "failed"


class OfferQuery(BaseModel):
    """Narrows ``list_offers``; empty fields mean no filter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_models: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    min_gpus: int = 1
    spot: bool | None = None
    min_reliability: float = 0.0


class NodeSpec(BaseModel):
    """One node to create. ``name`` is unique within the cluster and is the idempotence key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    instance_type: str
    region: str
    zone: str | None = None
    offer_id: str | None = None
    gpus: int = 1
    image: str | None = None
    disk_gib: int = 100
    ssh_public_key: str | None = None
    user_data: str | None = Field(None, repr=False)
    spot: bool = False
    bid_usd_per_hour: float | None = None
    tags: Mapping[str, str] = Field(default_factory=dict)


class Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    id: str
    name: str
    cluster_id: str
    status: NodeStatus
    instance_type: str = ""
    region: str = ""
    public_ip: str | None = None
    private_ip: str | None = None
    provider_state: str = Field("", description="The provider's own state string, unmapped.")


@runtime_checkable
class Provider(Protocol):
    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]]

    def check_credentials(self) -> None:
        """Raise CredentialsError if the key is missing or rejected. Read-only."""

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """Live offers matching ``query``. Read-only."""

    def create_nodes(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> list[Node]:
        """Create (or find) every node; all-or-nothing as described in the module docstring."""

    def get_nodes(self, cluster_id: str) -> list[Node]:
        """Every node of the cluster that the provider still knows about."""

    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        """Request deletion of the given nodes (all of the cluster's when None). Idempotent."""


@runtime_checkable
class SupportsSshKeys(Protocol):
    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Register the key if absent; return the provider's key id/name."""


__all__ = [
    "CLUSTER_TAG",
    "Capability",
    "Node",
    "NodeSpec",
    "NodeStatus",
    "OfferQuery",
    "Provider",
    "SupportsSshKeys",
]
