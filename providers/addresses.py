"""Addresses a provider hands back: checked before they reach ssh argv, /etc/hosts or a terminal.

``ip_text``/``host_text`` refuse anything but a canonical IP (or a DNS host name); ``ip_or_none``/
``host_or_none`` and the ``IpText``/``HostText`` field types are what an adapter's models keep of
an address field: the checked value, else None (never the whole answer refused).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import BeforeValidator

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)


def ip_text(value: str) -> str:
    """``value`` as a canonical IP address; ValueError for anything else. An address from a provider
    reaches ssh argv, /etc/hosts and the terminal: a space, a newline or an escape sequence in it is
    refused where the adapter reads it."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError("not an IP address") from None


def host_text(value: str) -> str:
    """``value`` as an IP address or a DNS host name (an SSH proxy's); ValueError otherwise."""
    try:
        return ip_text(value)
    except ValueError:
        if _HOSTNAME.match(value):
            return value
        raise ValueError("not an IP address or host name") from None


def ip_or_none(value: object) -> str | None:
    """What an adapter keeps of an address field: the canonical IP, else None. A malformed address is
    no address (the node is then unreachable, which ``up`` reports with the remove command), never
    the whole answer refused: ``down`` and ``gc`` must still list the node to delete it."""
    return _kept(value, ip_text)


def host_or_none(value: object) -> str | None:
    """``ip_or_none`` for fields that may also hold a host name."""
    return _kept(value, host_text)


def _kept(value: object, canonical: Callable[[str], str]) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return canonical(value)
    except ValueError:
        return None


IpText = Annotated[str | None, BeforeValidator(ip_or_none)]
"""A provider model's address field: a canonical IP or None (see ``ip_or_none``)."""
HostText = Annotated[str | None, BeforeValidator(host_or_none)]


__all__ = ["HostText", "IpText", "host_or_none", "host_text", "ip_or_none", "ip_text"]
