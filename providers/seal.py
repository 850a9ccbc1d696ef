"""The seal of a local dry run: a process acting on a local cluster (``up --local``) talks to that
cluster's lab and to no real provider, whatever credentials or URLs are set.

``seal_to(cluster, {provider: url, ...})`` (the lab is running: each provider's fake at its URL;
one provider for ``up --local``, every node-backed fake for ``burst --local --recover anywhere``) or
``seal_to(cluster)`` (no lab runs: nothing may be asked) is called before any adapter is built;
from then on ``check(name)`` (``settings.api_url``, which every adapter reads its endpoint through)
refuses every provider the lab does not serve, and a served provider's base URL is its fake's.
``unseal()`` lifts it (each CLI run starts unsealed). A plain module of state (standard library
imports only), so every layer can ask it.

The seal is also in this process's environment (``PROVISIONER_SEAL``, JSON), so the processes it
starts are sealed the same way: the Pulumi engine's language host, program and dynamic providers
(``up --local --engine pulumi``). A value that cannot be read seals to nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

SEAL_ENV = "PROVISIONER_SEAL"
"""The seal as the processes this one starts inherit it."""


@dataclass(frozen=True)
class Seal:
    cluster: str
    urls: Mapping[str, str] = field(default_factory=dict)
    """Provider -> the base URL of its fake in the lab; empty: nothing may be asked."""

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted(self.urls))

    @property
    def provider(self) -> str | None:
        """The one provider the lab serves (None: none, or several)."""
        return self.providers[0] if len(self.urls) == 1 else None


_SEAL: list[Seal] = []


def seal_to(cluster: str, urls: Mapping[str, str] | None = None) -> None:
    """Seal this process, and every process it starts from now on, to ``cluster``'s lab (each
    provider's fake at its URL), or to nothing."""
    _SEAL[:] = [Seal(cluster, dict(urls or {}))]
    os.environ[SEAL_ENV] = json.dumps({"cluster": cluster, "urls": dict(urls or {})})


def unseal() -> None:
    _SEAL.clear()
    os.environ.pop(SEAL_ENV, None)


def sealed() -> Seal | None:
    if _SEAL:
        return _SEAL[0]
    inherited = os.environ.get(SEAL_ENV)
    return None if inherited is None else _inherited(inherited)


def _inherited(text: str) -> Seal:
    """The seal a parent process passed down; one that cannot be read allows nothing."""
    try:
        data = json.loads(text)
        urls = data["urls"]
        if (
            isinstance(data["cluster"], str)
            and isinstance(urls, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in urls.items())
        ):
            return Seal(data["cluster"], urls)
    except (ValueError, KeyError, TypeError):
        pass
    return Seal("(unreadable " + SEAL_ENV + ")", {})


class SealedError(Exception):
    """A real provider was about to be asked by a process acting on a local dry run."""


def check(name: str) -> str | None:
    """The base URL ``name`` must use while sealed (None: not sealed). Raises SealedError for a
    provider the seal does not allow."""
    seal = sealed()
    if seal is None:
        return None
    url = seal.urls.get(name)
    if url:
        return url
    names = seal.providers
    if not names:
        where = "its lab is not running here, so nothing is"
    elif len(names) == 1:
        where = f"its lab's {names[0]} fake only"
    else:
        where = f"its lab's {', '.join(names[:-1])} and {names[-1]} fakes only"
    raise SealedError(f"cluster {seal.cluster} is a local dry run: no real provider is asked ({where})")


__all__ = ["SEAL_ENV", "Seal", "SealedError", "check", "seal_to", "sealed", "unseal"]
