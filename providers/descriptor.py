"""What a provider package declares about itself, next to its ``CAPABILITIES``: its ``FACTS``.

Every layer that needs a per-provider fact reads it from here through
``providers.registry.facts()`` instead of keeping its own list of provider names: the key
variables (``providers.settings``), how ``catalog refresh`` treats it, which stack builder
realizes it (``stacks/``), how its nodes end themselves (``render.teardown``), the login user of
its images (``realize.nodes``), its fake server (``testing.fakes``), its stack's private
address range, its NCCL interface and NIC layouts (``render.fabric``), its instance metadata service
(the node's name, the spot notice: ``validation.watch``), how its nodes mount the shared filesystem
whether it offers flex-start (``stacks.model``), and the prose of its row in each docs table that
lists providers (``docs``; the tables are generated from the descriptors). Pure data:
importing this module (or a provider package's ``__init__``) imports no adapter, SDK or HTTP
client, so the pure core may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from provisioner.capabilities import Capability

NodeAction = Literal["poweroff", "runpod-delete", "vastai-delete"]
WATCHDOG = "the client's watchdog deletes the instances through the API"
GC = "`provisioner gc --yes` deletes them"


@dataclass(frozen=True)
class Teardown:
    """How one provider's clusters end. ``ttl``/``idle``/``client_dies`` are docs/teardown.md's columns."""

    provider: str
    node_action: NodeAction
    node_stops_bill: bool  # whether the node's own action ends the bill, without the client
    ttl: str
    idle: str
    client_dies: str


@dataclass(frozen=True)
class SdkCredentials:
    """Where an SDK's credential chain looks (AWS, GCP), to tell without a request whether any is set."""

    variables: tuple[str, ...]
    """Any of these set means configured."""
    files: tuple[tuple[str, str, str], ...]
    """Credential files: (variable overriding the path, default path under the home directory, file
    name inside that path, "" when the path is the file itself)."""
    hint: str
    """What to set, for the message when none is."""


@dataclass(frozen=True)
class InstanceMetadata:
    """Its VMs' instance metadata service: where a node reads its instance name
    (``templates/cloud-init/identity.sh.j2``) and, on spot, its reclaim notice (``provisioner node
    watch --spot``, validation.watch)."""

    protocol: Literal["imds", "gce"]
    """``imds``: EC2 IMDSv2 (a token, then ``tags/instance/Name``, ``spot/instance-action``); ``gce``:
    GCE's ``instance/name``, ``instance/preempted`` with ``Metadata-Flavor: Google``."""
    url: str
    """The service's base URL, as seen from the node."""


@dataclass(frozen=True)
class ProviderDocs:
    """The prose of its rows in the docs tables that list providers; every other cell is derived
    (the bundled catalog's offer count, ``CAPABILITIES``' yes/no, ``Teardown``, ``key_vars``). The
    tables are written from these by ``UPDATE_GOLDEN=1 python -m pytest tests/test_provider_lists.py``
    and checked against them otherwise."""

    offers: str
    """docs/catalog.md, the bundled catalog table's "what": what its catalog rows hold."""
    regions: str
    """docs/catalog.md, the same table's "regions"."""
    notes: tuple[tuple[Capability, str], ...] = ()
    """docs/catalog.md, the adapter table: said after the yes/no of a capability (``(VPC)``)."""


@dataclass(frozen=True)
class ProviderFacts:
    """One provider's facts (see the module docstring)."""

    name: str
    teardown: Teardown
    fake: str
    """The fake API server, ``"module:Class"`` (``provisioner.testing.fakes``)."""
    key_vars: tuple[str, ...] = ()
    """The provider's own API key variable(s), after ``PROVISIONER_<P>_API_KEY``; () where the
    credentials come from an SDK's chain (AWS, GCP)."""
    refresh: Literal["live", "cloud"] = "live"
    """``live``: refreshed by default when its key is set; ``cloud``: only when named."""
    stack: Literal["pulumi_aws", "pulumi_gcp", "neocloud"] = "neocloud"
    """Which builder of ``stacks/`` realizes it: the official ``pulumi_aws``/``pulumi_gcp`` resources
    (``stacks/aws.py``, ``stacks/gcp.py``) or ``neocloud`` (the ``NeocloudNodes`` dynamic resource
    through the adapter)."""
    login_user: str = "ubuntu"
    """Who its images let in first (the SSH bootstrap's user)."""
    private_cidrs: tuple[str, ...] = ()
    """The address space of the network its stack creates (the node firewall admits it)."""
    sdk_credentials: SdkCredentials | None = None
    """Where its SDK finds credentials, when it takes no API key (``key_vars`` empty)."""
    storage_scheme: str | None = None
    """The URL scheme of its object store (``s3``, ``gs``): a dataset there leaves from this provider."""
    unfiltered_ssh: str | None = None
    """Why ``access.allowed_cidrs`` cannot be applied there (no provider firewall the tool can set,
    and a container node has no firewall of its own), as ``plan``/``up`` say it; None: it can."""
    nccl_ifname: str | None = None
    """The data-plane interface its multi-node images document for NCCL's socket traffic
    (``render.fabric``); None: every interface but loopback and docker."""
    nccl_profiles: tuple[tuple[str, str], ...] = ()
    """Instance-type prefixes whose NIC layout needs its own NCCL transport, as (prefix, profile)
    (``render.fabric.fabric_profile``: ``tcpxo``, ``tcpx``, ``gib``); others go by the offer's fabric."""
    metadata: InstanceMetadata | None = None
    """Its instance metadata service (the node's name, the spot reclaim notice); None: none a node
    can ask (the stack passes the node's name in its environment or the name is the hostname)."""
    shared_fs: Literal["nfs", "lustre", "filestore", "platform"] = "nfs"
    """How a node mounts the managed shared filesystem (``templates/cloud-init/shared-fs.sh.j2``):
    FSx for Lustre, Filestore NFS, a directory the platform attaches (``platform_fs_dir``) or a plain
    NFS export."""
    platform_fs_dir: str | None = None
    """Where the platform attaches its filesystems by name, with ``shared_fs="platform"``."""
    flex_start: bool = False
    """Whether its stack can queue for capacity (GCP's flex-start provisioning model, ``stacks.model``)."""
    capacity_codes: tuple[str, ...] = ()
    """Its API's error codes that mean "no capacity" (its SDK adapter maps them to CapacityError; the
    pulumi engine finds them in pulumi-aws/pulumi-gcp's error text and fails over as on CapacityError)."""
    run_mark: str | None = None
    """Where its nodes carry the run id of the bring-up that bought them (``providers.base.RUN_TAG``;
    docs/security.md); None: nowhere (Fluence: a name has no room), the record's node ids tell runs apart."""
    docs: ProviderDocs | None = None
    """Its docs rows' prose (every provider declares one: tests/test_provider_lists.py)."""


__all__ = [
    "GC",
    "WATCHDOG",
    "InstanceMetadata",
    "NodeAction",
    "ProviderDocs",
    "ProviderFacts",
    "SdkCredentials",
    "Teardown",
]
