"""What the heal loop (lifecycle/heal.py) goes by: its options, its refusals, and which options a
replacement may fail over to. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from provisioner.errors import ProvisionerError
from provisioner.plan import Plan
from provisioner.providers.base import NodeStatus

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
BILLING = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.FAILED})


@dataclass(frozen=True)
class HealOptions:
    max_replacements: int = 3
    unreachable_s: float = 300.0
    create_attempts: int = 4
    retry_s: float = 10.0


class HealLimit(ProvisionerError):
    """A replacement was refused (limit, TTL, budget); the event says which and what it would cost."""


class ReplacementLost(ProvisionerError):
    """The replacement itself failed or was reclaimed while it booted (a second fault)."""


def node_hourly(plan: Plan) -> Decimal:
    return plan.option.hourly_usd / plan.option.nodes


def same_layout(plan: Plan, others: Sequence[Plan]) -> list[Plan]:
    """The alternates a replacement may fail over to: same provider, GPU model and GPUs per node."""
    option = plan.option
    return [
        p
        for p in others
        if p.option != option
        and p.option.provider == option.provider
        and p.option.gpu_model == option.gpu_model
        and p.option.gpus_per_node == option.gpus_per_node
        and p.option.nodes == option.nodes
    ]


__all__ = [
    "BILLING",
    "RETRYABLE_STATUS",
    "HealLimit",
    "HealOptions",
    "ReplacementLost",
    "node_hourly",
    "same_layout",
]
