"""Vast.ai adapter: marketplace asks rented through the REST API (see provider.py).

``CAPABILITIES`` is what the adapter can create today (read by the optimizer through
``providers.registry.capabilities()`` without importing the adapter):

- on-demand and interruptible (bid) instances, several per cluster (one ask each);
- instances are containers on separate hosts: the bootstrap runs as the ``onstart`` script,
  and SSH is reachable after boot (``runtype: ssh``); no cloud-init (images rarely have it);
- no private network between hosts, no tags (the label names the cluster).
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
    }
)

FACTS = ProviderFacts(
    "vastai",
    fake="provisioner.testing.fakes.vastai:VastAIFake",
    key_vars=("VAST_API_KEY",),
    unfiltered_ssh="an instance's sshd is published on a mapped public port to every address",
    login_user="root",
    run_mark="the label's `run=` part",
    docs=ProviderDocs(
        offers="Representative marketplace asks: H100, H200, B200, A100, RTX 4090, L40S, A10, each with an "
        "`offer_id`, host `reliability` from 0.60 to 0.997, per-GB egress and ingress, and an interruptible "
        "bid price.",
        regions="by country (US, CA, DE, SE, NL, PL, FR, CZ, JP, TW, IN)",
        notes=((Capability.SPOT, "(bids)"),),
    ),
    teardown=Teardown(
        "vastai",
        "vastai-delete",
        True,
        ttl="node timer deletes its own instance: DELETE /api/v0/instances/$CONTAINER_ID/ with the "
        "instance's CONTAINER_API_KEY Vast.ai injects",
        idle="node idle check deletes its own instance the same way",
        client_dies="nothing is lost when the API accepted the delete; otherwise `provisioner gc --yes`",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.vastai.provider import VastAIProvider


def __getattr__(name: str) -> Any:
    if name == "VastAIProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.vastai.provider import VastAIProvider

        return VastAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "FACTS", "VastAIProvider"]
