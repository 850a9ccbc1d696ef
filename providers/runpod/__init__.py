"""RunPod adapter: REST v2 (GraphQL only for spot pods and spot prices).

``CAPABILITIES`` is what the adapter can create today (read by the optimizer through
``providers.registry.capabilities()`` without importing the adapter):

- on-demand and spot (interruptible) pods, several per cluster;
- pods are containers on separate hosts: the bootstrap runs as a script (the pod's start
  command), and SSH is reachable after boot (``startSsh``); no cloud-init;
- no private network between pods (global networking is not requested), no tags;
- Instant Clusters (``/v2/clusters``, ``providers.runpod.clusters``): the catalog's cluster
  products (``cluster_8x_H100-SXM``...) are bought whole, their members on the cluster's own
  private overlay (CLUSTER_PRODUCT).

Not: FABRIC_IB. The catalog rates Instant Clusters 1600-3200 Gbps, but RunPod's docs never say
InfiniBand or RoCE, so a spec asking for a named RDMA fabric is not served by them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import ProviderDocs, ProviderFacts, Teardown

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.ON_DEMAND,
        Capability.SPOT,
        Capability.MULTI_NODE,
        Capability.SCRIPT_BOOTSTRAP,
        Capability.SSH_BOOTSTRAP,
        Capability.CLUSTER_PRODUCT,
    }
)

FACTS = ProviderFacts(
    "runpod",
    fake="provisioner.testing.fakes.runpod:RunPodFake",
    key_vars=("RUNPOD_API_KEY",),
    unfiltered_ssh="a pod's sshd is published on a mapped public port to every address",
    login_user="root",
    run_mark="`PROVISIONER_RUN` env (pods; Instant Clusters: every member)",
    docs=ProviderDocs(
        offers="Secure and Community pods: H100 (SXM, PCIe), H200, B200, A100 80 GB (SXM, PCIe), L40S, RTX 4090, with"
        " spot (interruptible) prices; Instant Clusters of 8x H100/H200/B200/A100.",
        regions="Secure by data center (US-KS-2, US-TX-3, EU-RO-1, CA-MTL-1); Community by country (US, CA, SE, CZ)",
        notes=(
            (Capability.PRIVATE_NETWORK, "(pods); Instant Clusters have their own private network"),
            (Capability.CLUSTER_PRODUCT, "(Instant Clusters, `/v2/clusters`)"),
        ),
    ),
    nccl_ifname="ens1",  # Instant Clusters: ens1..ens8 are the fast NICs, eth0 is internet only
    teardown=Teardown(
        "runpod",
        "runpod-delete",
        True,
        ttl="node timer deletes its own pod: DELETE /v2/pods/$RUNPOD_POD_ID with the pod-scoped "
        "RUNPOD_API_KEY RunPod injects (Instant Cluster pods refuse this, 409: watchdog and gc)",
        idle="node idle check deletes its own pod the same way",
        client_dies="nothing is lost for standalone pods; Instant Cluster pods wait for `provisioner gc --yes`",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.runpod.provider import RunPodProvider


def __getattr__(name: str) -> Any:
    if name == "RunPodProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.runpod.provider import RunPodProvider

        return RunPodProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "FACTS", "RunPodProvider"]
