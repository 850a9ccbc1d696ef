"""The seal of a local dry run: a process acting on a local cluster (``up --local``) talks to that
cluster's lab and to no real provider, whatever credentials or URLs are set.

``seal_to(cluster, provider, url)`` (the lab is running: its fake at ``url``) or
``seal_to(cluster)`` (no lab runs: nothing may be asked) is called before any adapter is built;
from then on ``check(name)`` (``settings.api_url``, which every adapter reads its endpoint through) refuses every other
provider, and the sealed provider's base URL is the lab's. ``unseal()`` lifts it (each CLI run
starts unsealed). A plain module of state: no imports, so every layer can ask it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Seal:
    cluster: str
    provider: str | None
    url: str | None


_SEAL: list[Seal] = []


def seal_to(cluster: str, provider: str | None = None, url: str | None = None) -> None:
    """Seal this process to ``cluster``'s lab (``provider``'s fake at ``url``), or to nothing."""
    _SEAL[:] = [Seal(cluster, provider, url)]


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
    if seal.provider == name and seal.url:
        return seal.url
    where = f"its lab's {seal.provider} fake only" if seal.provider else "its lab is not running here, so nothing is"
    raise SealedError(f"cluster {seal.cluster} is a local dry run: no real provider is asked ({where})")


__all__ = ["Seal", "SealedError", "check", "seal_to", "sealed", "unseal"]
