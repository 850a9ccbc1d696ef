"""The one small interface every provider adapter implements.

Contract (checked by tests/providers/contract.py for every adapter):

- ``list_offers`` is read-only and returns ``provisioner.offer.Offer`` objects.
- ``create_nodes`` is idempotent on (cluster_id, node name): a retry finds the nodes it
  already launched instead of buying more. If it cannot create all of them it deletes
  the ones it made and raises (``CapacityError`` naming what was tried). It fails closed:
  when a cleanup fails, or a launch's answer was lost and no listing could say what it
  bought, the error says that instances may exist, names the cluster and gives
  ``provisioner gc --provider P --cluster ID --yes``. One implementation for every adapter:
  providers.orchestrate.
- ``get_nodes`` is the source of truth, found by the cluster tag/label/name, with a
  normalized ``NodeStatus``.
- ``delete_nodes`` of an already-gone node succeeds. It does not wait; callers use
  ``provisioner.waiting.wait_until`` with ``get_nodes``.
- Every SDK/HTTP error is mapped into ``provisioner.errors`` inside the adapter's client.

How a node is known to be the tool's (what ``provisioner gc`` reads back):

- Where the provider has tags or labels (Lambda, AWS, GCP) every node carries three:
  ``CLUSTER_TAG`` (the cluster id), ``OWNER_TAG`` (``owner_id()``: who launched it, so two
  people sharing an account never collect each other's clusters) and, when the NodeSpec has
  an ``expires_at``, ``EXPIRES_TAG`` (ISO-8601 UTC, ``2026-11-24T02:00:00Z``; GCP writes
  the label-safe ``expiry_label`` form). The adapter adds them itself; a caller does not.
- RunPod pods carry the same three as environment variables (``PROVISIONER_CLUSTER``,
  ``PROVISIONER_OWNER``, ``PROVISIONER_EXPIRES``), which its list call returns.
- Vast.ai and Fluence have nothing but a name: the cluster and owner are learnt from it, parsed
  strictly (Vast: label ``<cluster>/<node>/owner=<owner>/lease=<lease>``; Fluence: the mark
  before the first ``-`` is a hash of cluster id and owner, see providers.fluence.naming) and the
  expiry from the local cluster record (provisioner.lifecycle.state). A Fluence name does not
  say its cluster, so gc touches Fluence instances only of clusters it has a record of or is named.
- Every node also carries its owner mark and the lease mark of the create that launched it
  (``LEASE_TAG``; RunPod ``PROVISIONER_LEASE``; Vast ``lease=``; Fluence none) back on
  ``Node.owner``/``Node.lease``: providers.ownership decides from them what a delete may take.
- And the run id of the bring-up that bought it (``RUN_TAG``; RunPod ``PROVISIONER_RUN``; Vast
  ``run=``; Fluence none: its record's node ids tell its runs apart) back on ``Node.run``: a
  node of the same cluster name but another run is never counted or shown as this run's.
- Adapters that can list every node of the tool at once implement ``SupportsGc``.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from provisioner.capabilities import Bootstrap, Capability
from provisioner.offer import Offer
from provisioner.providers.addresses import host_text, ip_text

CLUSTER_TAG = "provisioner-cluster"
"""Tag/label key (or name prefix where a provider has no tags) marking a cluster's nodes."""
OWNER_TAG = "provisioner-owner"
"""Tag/label key naming who launched the node (``owner_id()``)."""
EXPIRES_TAG = "provisioner-expires"
"""Tag/label key: when the node's cluster expires, ISO-8601 UTC (``2026-11-24T02:00:00Z``)."""
NODE_TAG = "provisioner-node"
"""Tag/label key naming the node (its PlanNode name) where the provider has tags."""
ROLE_TAG = "provisioner-role"
"""Tag/label key naming the node's role (``head``/``worker``) where the provider has tags."""
LEASE_TAG = "provisioner-lease"
"""Tag/label key: the lease of the ``up`` that launched the node (providers.ownership.LeaseMark)."""
RENEWED_TAG = "provisioner-renewed"
"""Tag/label key: when the lease's holder last renewed it (``expiry_label`` form); absent once the
holder released it or where marks cannot be updated (providers.ownership, lifecycle.lease_renewal)."""
RUN_TAG = "provisioner-run"
"""Tag/label key: the run id of the bring-up that bought the node (lifecycle.state.new_run_id,
``20261128-215721-a1b2c3``: already a valid tag value, GCP label value and Vast.ai label part)."""
_OWNER_SAFE = re.compile(r"[^a-z0-9_-]+")


def owner_id() -> str:
    """Who launches nodes from here: ``$PROVISIONER_OWNER``, else ``user-host``.

    Lowercase ``[a-z0-9_-]``, at most 63 characters, so it is a valid tag value and GCP label.
    """
    raw = os.environ.get("PROVISIONER_OWNER") or f"{getpass.getuser()}-{socket.gethostname().split('.')[0]}"
    return _OWNER_SAFE.sub("-", raw.lower()).strip("-")[:63] or "unknown"


def expiry_text(when: dt.datetime) -> str:
    """``when`` as the EXPIRES_TAG value: ISO-8601 UTC to the second, ``Z`` suffix."""
    if when.tzinfo is None:
        raise ValueError("expiry must be timezone-aware")
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expiry_label(when: dt.datetime) -> str:
    """``when`` in a label-safe form (GCP labels: lowercase, no ``:``): ``20261124t020000z``."""
    return expiry_text(when).replace("-", "").replace(":", "").lower()


def parse_expiry(text: str | None) -> dt.datetime | None:
    """An EXPIRES_TAG value in either form back to an aware UTC datetime; None if absent or unreadable."""
    if not text:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y%m%dt%H%M%Sz"):
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def tool_tags(
    cluster_id: str,
    expires_at: dt.datetime | None,
    owner: str | None = None,
    role: str | None = None,
    lease: str | None = None,
    run: str | None = None,
) -> dict[str, str]:
    """The tags every node of ``cluster_id`` carries where the provider has tags (the role's, the
    create's lease mark and the bring-up's run id when known)."""
    tags = {CLUSTER_TAG: cluster_id, OWNER_TAG: owner or owner_id()}
    if expires_at is not None:
        tags[EXPIRES_TAG] = expiry_text(expires_at)
    if role is not None:
        tags[ROLE_TAG] = role
    if lease:
        tags[LEASE_TAG] = lease
    if run:
        tags[RUN_TAG] = run
    return tags


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
    """One node to create. ``name`` is unique within the cluster and is the idempotence key.

    ``role`` and ``bootstrap`` say what the node is and how it runs the cluster bootstrap, as
    typed fields (built from the Plan by ``provisioner.realize.nodes``): user data is only
    accepted with ``bootstrap`` ``cloud_init`` (a cloud-init document) or ``script`` (an
    entrypoint script), and an adapter never guesses which from the text.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    role: Literal["head", "worker"] | None = None
    bootstrap: Bootstrap | None = Field(
        None,
        description="How the node runs its bootstrap: what ``user_data`` is (cloud_init: a cloud-init "
        "document; script: a script to run at boot) or ssh (no user data; bootstrapped over SSH).",
    )
    owner: str | None = Field(None, description="Who launches it (OWNER_TAG); None: ``owner_id()``.")
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
    capacity_block_hours: int | None = Field(
        None,
        gt=0,
        description="Launch into a reservation bought for the cluster first (an EC2 Capacity Block "
        "of this many hours, paid upfront, non-refundable); needs Capability.RESERVATION.",
    )
    capacity_block_usd_per_hour: Decimal | None = Field(
        None,
        gt=0,
        description="The most the block may cost per node-hour (the planned price): a dearer "
        "offering is refused before anything is bought.",
    )
    tags: Mapping[str, str] = Field(default_factory=dict)
    expires_at: dt.datetime | None = Field(
        None,
        description="When the cluster expires (aware). Written as EXPIRES_TAG where the provider "
        "has tags; needs no TAGS capability.",
    )
    lease: str | None = Field(
        None,
        description="The lease token of the create that launches the node (LeaseMark.token()), "
        "written where the provider shows it back (LEASE_TAG, RunPod env, Vast label).",
    )
    run: str | None = Field(
        None,
        description="The run id of the bring-up that buys the node (lifecycle.state.new_run_id), "
        "written where the provider shows it back (RUN_TAG, RunPod env, Vast label); None: no run.",
    )

    @model_validator(mode="after")
    def _user_data_matches_bootstrap(self) -> NodeSpec:
        if self.user_data and self.bootstrap not in (Bootstrap.CLOUD_INIT, Bootstrap.SCRIPT):
            raise ValueError(
                f"node {self.name}: user data needs bootstrap 'cloud_init' or 'script', "
                f"not {self.bootstrap.value if self.bootstrap else None!r}"
            )
        return self


_Address = Annotated[str, AfterValidator(ip_text)]  # Node's own fields: adapters hand over checked ones
_Host = Annotated[str, AfterValidator(host_text)]


class Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    id: str
    name: str
    cluster_id: str
    status: NodeStatus
    instance_type: str = ""
    region: str = ""
    public_ip: _Address | None = None
    private_ip: _Address | None = None
    provider_state: str = Field("", description="The provider's own state string, unmapped.")
    ssh_host: _Host | None = Field(
        None,
        description="Where this machine reaches the node's sshd when that is "
        "not its public address: a container's published port (RunPod, Vast.ai) or "
        "a provider's SSH proxy. None: the public (else private) address.",
    )
    ssh_port: int = Field(
        22,
        ge=1,
        le=65535,
        description="The port of the node's sshd as reached from here "
        "(a container provider maps 22/tcp to another port).",
    )
    launched_at: dt.datetime | None = Field(
        None,
        description="When the provider says the node was launched "
        "(billing starts); None: its listing does not say (docs/costs.md).",
    )
    ended_at: dt.datetime | None = Field(
        None,
        description="When the provider says the node was terminated, for a terminated node it still lists; else None.",
    )
    owner: str | None = Field(
        None,
        description="The owner mark the node carries (OWNER_TAG, RunPod env, the "
        "Vast label, the Fluence name's mark); None: it carries none.",
    )
    lease: str | None = Field(
        None,
        description="The lease mark of the create that launched it (LEASE_TAG); "
        "None where there is none or the provider cannot carry one (Fluence).",
    )
    renewed_at: dt.datetime | None = Field(
        None,
        description="When the lease's holder last renewed it (RENEWED_TAG, the Vast label's renewed= "
        "part); None: not renewed (released, or a provider whose marks cannot change).",
    )
    run: str | None = Field(
        None,
        description="The run id of the bring-up that bought it (RUN_TAG, RunPod env, the Vast "
        "label); None where it carries none (bought before runs had marks, or on Fluence).",
    )

    def ssh_endpoint(self) -> tuple[str, int] | None:
        """``(host, port)`` to SSH to: ``ssh_host`` else the public, else the private address, with
        ``ssh_port``. None while the node has no address yet."""
        host = self.ssh_host or self.public_ip or self.private_ip
        return (host, self.ssh_port) if host else None


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


@dataclass(frozen=True)
class OwnedNode:
    """A node found by ``SupportsGc.list_owned``: the node and what its tags (or name) say."""

    node: Node
    owner: str | None = None
    expires_at: dt.datetime | None = None


@runtime_checkable
class SupportsGc(Protocol):
    def list_owned(self) -> list[OwnedNode]:
        """Every live node of every cluster the tool made on this account (by tag, env or name).
        Read-only. Terminated nodes are left out."""


@runtime_checkable
class SupportsLeaseRenewal(Protocol):
    """Providers whose marks can change after launch (AWS tags, GCP labels, the Vast.ai label)."""

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        """Mark the nodes of ``cluster_id`` that carry ``lease`` and ``owner`` as renewed ``at``
        (RENEWED_TAG), or with ``at`` None remove that mark (released). Returns how many nodes were
        marked. Idempotent; touches no other node; raises the adapter's ProviderError."""


@runtime_checkable
class SupportsFirewall(Protocol):
    """The provider's own firewall for ``access.allowed_cidrs`` (Lambda's firewall rulesets, the AWS
    cluster security group, the GCP cluster firewall rules)."""

    def ensure_firewall(self, cluster_id: str, allowed_cidrs: Sequence[str], region: str) -> str:
        """Admit SSH (tcp/22) to the cluster's nodes in ``region`` only from ``allowed_cidrs``;
        return the provider's firewall id. Idempotent. Call before ``create_nodes`` (the firewall
        is attached to nodes at launch)."""

    def remove_firewall(self, cluster_id: str) -> None:
        """Remove the cluster's firewall in every region once its nodes are gone. Gone already is success."""


@runtime_checkable
class SupportsTopology(Protocol):
    def topology(self, cluster_id: str) -> dict[str, list[str]]:
        """{node name: [switch, ...]} (outermost first) of the cluster's running nodes, as the
        provider places them (AWS DescribeInstanceTopology, GCE physical hosts). Read-only."""


class Reservation(Protocol):
    """A reservation bought for a cluster before its nodes (an EC2 Capacity Block)."""

    @property
    def reservation_id(self) -> str:
        """The provider's id of it (what a launch targets)."""

    def bought(self) -> str:
        """What an error after the purchase says was bought: what, its fee, its end, that it stays paid."""


@runtime_checkable
class SupportsReservations(Protocol):
    def reserve(self, cluster_id: str, nodes: Sequence[NodeSpec]) -> Reservation:
        """The reservation ``nodes`` ask for (``NodeSpec.capacity_block_hours``): the cluster's own when
        one exists, else bought; blocks until it holds capacity. What ``create_nodes`` does first for
        such nodes; the pulumi engine calls it before ``pulumi up``. Raises PlanError/CapacityError
        before a purchase; after one, a ProviderError whose message is ``Reservation.bought``'s."""

    def reservations_left(self, cluster_id: str) -> list[str]:
        """One sentence per reservation bought for the cluster that outlives its nodes (an EC2
        Capacity Block cannot be cancelled): what it is, that it is paid, when it ends. Read-only."""


@runtime_checkable
class SupportsSshKeys(Protocol):
    def ensure_ssh_key(self, name: str, public_key: str) -> str:
        """Register the key if absent; return the provider's key id/name."""


__all__ = [
    "CLUSTER_TAG",
    "EXPIRES_TAG",
    "LEASE_TAG",
    "NODE_TAG",
    "OWNER_TAG",
    "RENEWED_TAG",
    "ROLE_TAG",
    "RUN_TAG",
    "Bootstrap",
    "Capability",
    "Node",
    "NodeSpec",
    "NodeStatus",
    "OfferQuery",
    "OwnedNode",
    "Provider",
    "Reservation",
    "SupportsFirewall",
    "SupportsGc",
    "SupportsLeaseRenewal",
    "SupportsReservations",
    "SupportsSshKeys",
    "SupportsTopology",
    "expiry_label",
    "expiry_text",
    "owner_id",
    "parse_expiry",
    "tool_tags",
]
