"""GCP adapter: ``GCPProvider`` over Compute Engine v1 (google-cloud-compute, REST transport).

``CAPABILITIES`` is what the adapter can create today, each proven by the contract suite
against the GCP fake (``provisioner.testing.fakes.gcp_compute``):

- on-demand (STANDARD) and spot (SPOT, terminated by DELETE) VMs, several per cluster on the
  project's ``default`` VPC, where they reach each other at their internal addresses;
- cloud-init user data (``user-data`` metadata) and SSH keys (``ssh-keys`` metadata) at
  creation; labels (the project's tags) carrying cluster id, node name, owner and expiry.

Not declared (no proof in the contract suite yet, see docs/aws-gcp.md): compact placement
policies, GPUDirect/RDMA NIC layouts, ``max_run_duration`` self-termination, flex-start.
Credentials come from Application Default Credentials, never from an API key; the Google
libraries are imported by ``client.py`` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import InstanceMetadata, ProviderDocs, ProviderFacts, SdkCredentials, Teardown

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.ON_DEMAND,
        Capability.SPOT,
        Capability.MULTI_NODE,
        Capability.PRIVATE_NETWORK,
        Capability.USER_DATA,
        Capability.SSH_BOOTSTRAP,
        Capability.TAGS,
    }
)

FACTS = ProviderFacts(
    "gcp",
    fake="provisioner.testing.fakes.gcp_compute:GCPFake",
    refresh="cloud",
    stack="pulumi_gcp",
    capacity_codes=("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
    run_mark="`provisioner-run` label",
    docs=ProviderDocs(
        offers="a2-highgpu-1g/-8g, a2-ultragpu-8g (A100), a3-highgpu-8g and a3-megagpu-8g (H100), a3-ultragpu-8g "
        "(H200), a4-highgpu-8g (B200), g2-standard-4 to -96 (L4). On-demand and spot. Priced per zone.",
        regions="us-central1, us-east1, us-east4, us-east5, europe-west1, europe-west4",
        notes=(
            (Capability.PRIVATE_NETWORK, "(VPC)"),
            (Capability.SCRIPT_BOOTSTRAP, "(as startup user data)"),
            (Capability.TAGS, "(labels)"),
        ),
    ),
    private_cidrs=("10.32.0.0/11",),
    storage_scheme="gs",
    metadata=InstanceMetadata("gce", "http://metadata.google.internal"),
    shared_fs="filestore",
    flex_start=True,
    # a3-mega: GPUDirect-TCPXO; a3-high: GPUDirect-TCPX; a3-ultra/a4/a4x: RDMA through gIB
    nccl_profiles=(
        ("a3-megagpu", "tcpxo"),
        ("a3-highgpu", "tcpx"),
        ("a3-ultragpu", "gib"),
        ("a4-highgpu", "gib"),
        ("a4x-", "gib"),
    ),
    sdk_credentials=SdkCredentials(
        ("GOOGLE_APPLICATION_CREDENTIALS",),
        (("CLOUDSDK_CONFIG", ".config/gcloud", "application_default_credentials.json"),),
        "no Google credentials (GOOGLE_APPLICATION_CREDENTIALS or gcloud application-default login)",
    ),
    teardown=Teardown(
        "gcp",
        "poweroff",
        False,
        ttl="GCE itself: the adapter creates each node with scheduling.terminationTime = the expiry and "
        "instanceTerminationAction=DELETE, so the VM and its disk are deleted at the TTL; the node timer "
        "powers off as a backstop",
        idle="node idle check powers off: compute billing stops, the boot disk bills until the TTL deletes "
        "the VM or `provisioner gc --yes`",
        client_dies="nothing is lost: GCE deletes the VMs at the TTL (a cluster without a TTL waits for "
        "`provisioner gc --yes`)",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.gcp.provider import GCPProvider


def __getattr__(name: str) -> Any:
    if name == "GCPProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.gcp.provider import GCPProvider

        return GCPProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "FACTS", "GCPProvider"]
