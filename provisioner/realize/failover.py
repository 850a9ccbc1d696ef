"""Failover over a spec's ranked options, the one loop both engines run.

``first_that_fits(plans, attempt, cleared, emit=..., max_tries=3)`` calls ``attempt(plan)`` on
each ranked plan in turn and returns the first result. Only a ``CapacityError`` moves on, and
only once ``cleared(plan)`` says nothing of that try is left (the direct engine: its create
rolled back and no record is kept; the pulumi engine: the try's stack was destroyed); each move
is one ``failover`` event naming the error and the next option. Any other error, a try that could
not be cleared, or the last try's CapacityError propagates. Blocks as long as the tries do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from provisioner.errors import CapacityError, ProvisionerError
from provisioner.plan import Plan
from provisioner.realize.events import Emit

T = TypeVar("T")


def first_that_fits(
    plans: Sequence[Plan],
    attempt: Callable[[Plan], T],
    cleared: Callable[[Plan], bool],
    *,
    emit: Emit,
    max_tries: int = 3,
) -> T:
    """``attempt`` the first plan that finds capacity, at most ``max_tries`` (see the module docstring)."""
    tries = list(plans)[:max_tries]
    if not tries:
        raise ProvisionerError("no option to bring up")
    for number, plan in enumerate(tries, 1):
        try:
            return attempt(plan)
        except CapacityError as exc:
            if number == len(tries) or not cleared(plan):
                raise
            nxt = tries[number].option
            emit(
                "failover",
                message=f"try {number} of {len(tries)}: {exc}; nothing left behind; trying "
                f"{nxt.provider} {nxt.instance_type} in {nxt.region}",
                cluster=plan.cluster_id,
                attempt=number,
                error=str(exc),
                next_provider=nxt.provider,
                next_region=nxt.region,
                next_instance_type=nxt.instance_type,
            )
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["first_that_fits"]
