"""A ``pulumi up`` that failed for capacity: told apart so both engines fail over alike."""

from __future__ import annotations

import re

from provisioner.errors import CapacityError, StackError


class StackCapacityError(CapacityError):
    """``pulumi up`` failed because a provider had no capacity: the adapter's CapacityError inside the
    program (the dynamic provider's gRPC error carries its traceback, whose last line pulumi prints),
    with the same provider and message the direct engine sees, or an official resource's capacity
    code (``FACTS.capacity_codes``), so both engines fail over alike
    (``provisioner.realize.failover``). ``left`` is the StackError naming what the stack still holds
    and how to remove it, raised instead when no option is left."""

    def __init__(self, provider: str, message: str, left: StackError) -> None:
        super().__init__(provider, message)
        self.left = left


_CAPACITY_LINE = re.compile(r"provisioner\.errors\.CapacityError: ([a-z0-9_]+): (.+)$")


def capacity_in(text: str, provider: str = "", codes: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(provider, message) of the last ``provisioner.errors.CapacityError`` a traceback in ``text`` shows
    (the adapter's, inside a dynamic resource); else, when ``text`` names one of ``codes`` (the
    provider's ``FACTS.capacity_codes``: pulumi-aws/gcp's own errors), ``provider`` and that code with
    the line naming it. None otherwise."""
    found = [m for line in text.splitlines() if (m := _CAPACITY_LINE.search(line.strip()))]
    if found:
        return found[-1].group(1), found[-1].group(2).strip()
    named = [line.strip() for line in text.splitlines() if any(code in line for code in codes)]
    return (provider, named[-1][:300]) if named else None


__all__ = ["StackCapacityError", "capacity_in"]
