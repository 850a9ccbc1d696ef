"""Lambda Cloud adapter: ``LambdaProvider`` over the ``/api/v1`` REST API.

``CAPABILITIES`` is what the adapter can create today; it is read by the optimizer through
``providers.registry.capabilities()`` without importing the adapter (httpx, models):

- on-demand instances only (Lambda sells no spot; a spot node is refused before buying);
- several instances per cluster, which reach each other over the region's private network
  (``private_ip``; reference: provider-apis.md 1.4 "instances in same region talk over
  private IP");
- cloud-init user data and SSH keys at launch, tags at launch.

Not: 1-Click Clusters (reserved through Lambda's console/sales, no launch API), InfiniBand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import GC, WATCHDOG, ProviderDocs, ProviderFacts, Teardown

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.ON_DEMAND,
        Capability.MULTI_NODE,
        Capability.PRIVATE_NETWORK,
        Capability.USER_DATA,
        Capability.SSH_BOOTSTRAP,
        Capability.TAGS,
    }
)

FACTS = ProviderFacts(
    "lambda",
    fake="provisioner.testing.fakes.lambda_:LambdaFake",
    key_vars=("LAMBDA_API_KEY",),
    run_mark="`provisioner-run` tag",
    docs=ProviderDocs(
        offers="1x/2x/4x/8x H100 SXM, A100 40 GB (1x, 8x), 8x A100 80 GB, GH200, 1x/2x/8x B200; 1-Click Cluster H100 "
        "and B200 with InfiniBand. On-demand only.",
        regions="us-east-1, us-south-2/3, us-west-1/2/3, us-midwest-1, us-east-3, europe-central-1, asia-south-1, "
        "australia-east-1",
        notes=(
            (Capability.SCRIPT_BOOTSTRAP, "(as cloud-init user data)"),
            (Capability.CLUSTER_PRODUCT, "(1CC has no API)"),
        ),
    ),
    shared_fs="platform",
    platform_fs_dir="/lambda/nfs",
    teardown=Teardown(
        "lambda",
        "poweroff",
        False,
        ttl=f"{WATCHDOG}; the node timer powers off (stops GPU use, not the bill: Lambda has no "
        "instance-scoped credential and the account key is never put on a node)",
        idle=f"node idle check powers off (stops GPU use); {WATCHDOG}",
        client_dies=f"powered-off instances keep billing until {GC}",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.lambda_.provider import LambdaProvider


def __getattr__(name: str) -> Any:
    if name == "LambdaProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.lambda_.provider import LambdaProvider

        return LambdaProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "FACTS", "LambdaProvider"]
