"""The EFA interface layout of an EC2 instance type: one table, read by the direct adapter
(``providers.aws.network``) and the Pulumi stack (``stacks/aws.py``). Pure, stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

EFA_INTERFACES = {
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p6-b200.48xlarge": 8,
    "g5.48xlarge": 1,
    "g6e.12xlarge": 1,
    "g6e.24xlarge": 2,
    "g6e.48xlarge": 4,
}
"""EFA interfaces per instance type: one per network card (EC2 User Guide, "Maximize network
bandwidth on Amazon EC2 instances with multiple network cards"). Types not listed get one ENA."""


@dataclass(frozen=True)
class Interface:
    """One network interface an instance launches with."""

    network_card_index: int
    device_index: int
    interface_type: str  # "efa" (EFA with ENA), "efa-only", or "interface" (ENA)


def efa_layout(instance_type: str) -> tuple[Interface, ...]:
    """The interfaces a node of ``instance_type`` launches with. Pure.

    As documented for multi-card EFA types (p5/p5e: 32, p5en: 16, p6-b200: 8, p4d: 4): the
    primary is network card 0, device index 0, an EFA with ENA (it carries the node's IP);
    each further card gets one EFA-only interface at device index 1. A type without EFA gets
    a single ENA interface.
    """
    count = EFA_INTERFACES.get(instance_type, 0)
    if count == 0:
        return (Interface(0, 0, "interface"),)
    return (Interface(0, 0, "efa"), *(Interface(card, 1, "efa-only") for card in range(1, count)))


def has_efa(instance_type: str) -> bool:
    """Whether ``instance_type`` launches with EFA interfaces (it is in ``EFA_INTERFACES``)."""
    return EFA_INTERFACES.get(instance_type, 0) > 0


__all__ = ["EFA_INTERFACES", "Interface", "efa_layout", "has_efa"]
