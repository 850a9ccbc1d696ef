"""Who can reach a cluster's SSH port: the lines ``plan`` and ``up`` print about ``access.allowed_cidrs``.

- ``open_to_all``: a CIDR set that covers every IPv4 or every IPv6 address, however it is split
  (``[0.0.0.0/1, 128.0.0.0/1]`` is ``0.0.0.0/0``): the networks of each family are collapsed
  (``ipaddress.collapse_addresses``) and compared with the whole family.
- ``UNFILTERED``: providers where nothing applies ``allowed_cidrs``: no provider firewall the
  tool can set, and the node is a container (no CAP_NET_ADMIN, so no node firewall): its sshd is
  published on a public port to every address, and the cluster's SSH key is the only guard.
  tests/test_exposure.py pins this set against the adapters.

Pure: no network, no clock.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from provisioner.providers.registry import facts

UNFILTERED: dict[str, str] = {name: found.unfiltered_ssh for name, found in facts().items() if found.unfiltered_ssh}
"""Provider -> why ``access.allowed_cidrs`` cannot be applied there (each provider's
``FACTS.unfiltered_ssh``, providers/descriptor.py)."""

_WHOLE = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))


def open_to_all(cidrs: Iterable[str]) -> bool:
    """Whether ``cidrs`` together cover every IPv4 address or every IPv6 address (host bits ignored).

    Raises ValueError for an entry that is not a CIDR block (the spec refuses those first)."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for text in cidrs:
        network = ipaddress.ip_network(text.strip(), strict=False)
        if isinstance(network, ipaddress.IPv4Network):
            v4.append(network)
        else:
            v6.append(network)
    whole_v4 = bool(v4) and _WHOLE[0] in list(ipaddress.collapse_addresses(v4))
    whole_v6 = bool(v6) and _WHOLE[1] in list(ipaddress.collapse_addresses(v6))
    return whole_v4 or whole_v6


def unfiltered_lines(providers: Iterable[str]) -> list[str]:
    """One line per provider in ``providers`` (in order, once each) that cannot apply ``allowed_cidrs``."""
    return [
        f"SSH: {name} cannot apply access.allowed_cidrs ({UNFILTERED[name]}); the cluster's SSH key is the only guard"
        for name in dict.fromkeys(providers)
        if name in UNFILTERED
    ]


def exposure_lines(cidrs: Sequence[str], providers: Iterable[str]) -> list[str]:
    """What the spec's SSH rule means: open to every address (one line), then one line per provider
    in ``providers`` that cannot apply it. Empty ``cidrs`` (closed) says nothing here: the plan
    report and ``up``'s refusal word that case."""
    lines = []
    if cidrs and open_to_all(cidrs):
        lines.append(f"SSH: open to every address (access.allowed_cidrs {', '.join(c.strip() for c in cidrs)})")
    return lines + unfiltered_lines(providers)


__all__ = ["UNFILTERED", "exposure_lines", "open_to_all", "unfiltered_lines"]
