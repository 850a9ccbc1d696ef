"""The seal of a local dry run: a process acting on a local cluster (``up --local``) talks to that
cluster's lab and to no real provider, whatever credentials or URLs are set.

``seal_to(cluster, {provider: url, ...})`` (the lab is running: each provider's fake at its URL;
one provider for ``up --local``, every node-backed fake for ``burst --local --recover anywhere``) or
``seal_to(cluster)`` (no lab runs: nothing may be asked) is called before any adapter is built;
from then on ``check(name)`` (``settings.api_url``, which every adapter reads its endpoint through)
refuses every provider the lab does not serve, and a served provider's base URL is its fake's.
``unseal()`` lifts it (each CLI run starts unsealed). A plain module of state: no imports, so every
layer can ask it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
    """Seal this process to ``cluster``'s lab (each provider's fake at its URL), or to nothing."""
    _SEAL[:] = [Seal(cluster, dict(urls or {}))]


def unseal() -> None:
    _SEAL.clear()


def sealed() -> Seal | None:
    return _SEAL[0] if _SEAL else None


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


__all__ = ["Seal", "SealedError", "check", "seal_to", "sealed", "unseal"]
