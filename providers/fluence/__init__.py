"""Fluence adapter: ``FluenceProvider`` over the GPU Cloud API (plus the v2 VM API for CPU nodes).

``CAPABILITIES`` is what the adapter can create today for GPU nodes (read by the optimizer
through ``providers.registry.capabilities()`` without importing the adapter):

- on-demand GPU VMs only (Fluence sells no spot; a spot node is refused before buying),
  several per cluster;
- GPU VMs take no user data and no start command: the bootstrap runs over SSH after boot;
- no private network documented between GPU VMs (public ``domain`` only), no tags.

CPU nodes (``cpu-*``, the v2 VM API) additionally boot cloud-init user data
(``CPU_VM_CAPABILITIES``); no GPU offer is bought that way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import GC, WATCHDOG, ProviderDocs, ProviderFacts, Teardown

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.ON_DEMAND,
        Capability.MULTI_NODE,
        Capability.SSH_BOOTSTRAP,
    }
)
CPU_VM_CAPABILITIES: frozenset[Capability] = CAPABILITIES | {Capability.USER_DATA}

FACTS = ProviderFacts(
    "fluence",
    fake="provisioner.testing.fakes.fluence:FluenceFake",
    key_vars=("FLUENCE_API_KEY",),
    docs=ProviderDocs(
        offers="GPU Cloud VM plans: H100 (1x, 8x), H200 (1x, 8x), A100 80 GB (1x, 8x), L40S, RTX 4090, A10. Hourly "
        "billing, 3 h minimum, no spot.",
        regions="plan locations (US, dulles-usa-1, sanjose-usa-2, us-central-3, helsinki-fin-1)",
        notes=((Capability.USER_DATA, "(GPU VMs; `cpu-*` v2 VMs only)"),),
    ),
    teardown=Teardown(
        "fluence",
        "poweroff",
        False,
        ttl=f"{WATCHDOG}; the node timer powers off (stops GPU use, not the bill: Fluence has no "
        "instance-scoped credential and the account key is never put on a node)",
        idle=f"node idle check powers off (stops GPU use); {WATCHDOG}",
        client_dies=f"powered-off VMs keep billing until {GC}",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.fluence.provider import FluenceProvider


def __getattr__(name: str) -> Any:
    if name == "FluenceProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.fluence.provider import FluenceProvider

        return FluenceProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "CPU_VM_CAPABILITIES", "FACTS", "FluenceProvider"]
