"""What an adapter can create, and how offers say how they are bought, booted and networked.

The core reads these to decide whether an option is buyable (an option is ranked only when
its provider's adapter declares every capability the option needs); adapters declare them
(``Provider.capabilities``) and enforce them (refuse, never degrade). Pure: enums only.
"""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """Something an adapter can do. A contract test proves each declared one against the fake."""

    ON_DEMAND = "on_demand"
    SPOT = "spot"
    MULTI_NODE = "multi_node"
    PRIVATE_NETWORK = "private_network"
    CLUSTER_PRODUCT = "cluster_product"
    PLACEMENT = "placement"
    FABRIC_IB = "fabric_ib"
    FABRIC_EFA = "fabric_efa"
    FABRIC_ROCE = "fabric_roce"
    SELF_TERMINATE = "self_terminate"
    USER_DATA = "user_data"
    """Boots cloud-init user data (``Bootstrap.CLOUD_INIT``)."""
    SCRIPT_BOOTSTRAP = "script_bootstrap"
    """Runs a bootstrap script as the container/VM entrypoint (``Bootstrap.SCRIPT``)."""
    SSH_BOOTSTRAP = "ssh_bootstrap"
    """Gives SSH access after boot so the bootstrap runs over SSH (``Bootstrap.SSH``)."""
    TAGS = "tags"
    RESERVATION = "reservation"
    """Buys a reservation ahead of the run and launches into it (AWS EC2 Capacity Blocks for ML, asked
    by ``NodeSpec.capacity_block_hours``); the optimizer ranks such offers only when the spec sets
    ``pricing.reservations``."""
    SHARED_FS = "shared_fs"


class Purchase(StrEnum):
    """How an offer is bought. RESERVATION and SALES are quote-only (listed, never ranked), except a
    reservation with a known block length (``Offer.block_hours``) when the spec sets
    ``pricing.reservations`` and the provider's adapter declares ``Capability.RESERVATION``."""

    INSTANCE = "instance"
    POD = "pod"
    CLUSTER = "cluster"
    RESERVATION = "reservation"
    SALES = "sales"

    @property
    def quote_only(self) -> bool:
        return self in (Purchase.RESERVATION, Purchase.SALES)


class Bootstrap(StrEnum):
    """How a node of this offer runs the cluster bootstrap."""

    CLOUD_INIT = "cloud_init"
    SCRIPT = "script"
    SSH = "ssh"


class Network(StrEnum):
    """How nodes of one cluster bought from this offer reach each other."""

    PRIVATE = "private"
    """The provider's private network (VPC, a region's private LAN)."""
    PARTITION = "partition"
    """A dedicated partition of nodes (e.g. an IB partition) the provider sets up."""
    CLUSTER_FABRIC = "cluster_fabric"
    """The cluster product's own fabric (RunPod Instant Clusters, Lambda 1-Click Clusters)."""
    NONE = "none"
    """Separate hosts with public addresses only: no private path between nodes."""

    @property
    def private(self) -> bool:
        return self is not Network.NONE


BOOTSTRAP_CAPABILITY: dict[Bootstrap, Capability] = {
    Bootstrap.CLOUD_INIT: Capability.USER_DATA,
    Bootstrap.SCRIPT: Capability.SCRIPT_BOOTSTRAP,
    Bootstrap.SSH: Capability.SSH_BOOTSTRAP,
}

__all__ = ["BOOTSTRAP_CAPABILITY", "Bootstrap", "Capability", "Network", "Purchase"]
