"""The one polling helper: wait until a condition holds, or time out.

Providers never write their own wait loops; the CLI, burst runner and stacks call
``wait_until`` with a provider's ``get_nodes``. Clock and sleep are injectable so
tests run without real waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from provisioner.errors import ProvisionerError

T = TypeVar("T")


class WaitTimeout(ProvisionerError):
    """The condition did not hold before the deadline. ``last`` is the last value seen."""

    def __init__(self, message: str, last: object = None) -> None:
        self.last = last
        super().__init__(message)


def wait_until(
    poll: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout_s: float,
    interval_s: float = 5.0,
    max_interval_s: float = 30.0,
    what: str = "condition",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``poll`` until ``done(value)``; return that value.

    The interval grows by half each round up to ``max_interval_s``. Blocks the caller.
    Raises WaitTimeout after ``timeout_s``; exceptions from ``poll`` propagate.
    """
    deadline = clock() + timeout_s
    delay = interval_s
    while True:
        value = poll()
        if done(value):
            return value
        remaining = deadline - clock()
        if remaining <= 0:
            raise WaitTimeout(f"timed out after {timeout_s:g}s waiting for {what}", last=value)
        sleep(min(delay, remaining))
        delay = min(delay * 1.5, max_interval_s)


__all__ = ["WaitTimeout", "wait_until"]
