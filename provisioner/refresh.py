"""`provisioner catalog refresh`: live offers from the providers into a dated cache.

Shell layer (network, clock, files). Each provider is asked independently and concurrently; one
provider's failure does not lose the others' fresh prices. The cache keeps the
provider facts (egress tiers, storage prices) of the catalog it refreshes, since
offer APIs do not publish them.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from provisioner.catalog import dump_catalog, merge_catalogs
from provisioner.errors import ProviderError
from provisioner.offer import Catalog, Offer
from provisioner.workflow import CACHE_FILE, cache_dir, choose_catalog

LIVE_PROVIDERS = ("lambda", "runpod", "vastai", "fluence")


def _configured(name: str) -> bool:
    from provisioner.providers.settings import NATIVE_KEY_VARS

    prefix = f"PROVISIONER_{name.upper()}"
    return any(os.environ.get(var) for var in (f"{prefix}_API_KEY", NATIVE_KEY_VARS.get(name, "")))


def fetch_offers(name: str) -> list[Offer]:
    """All live offers of one provider (its HTTP client closed afterwards). Raises ProviderError subclasses."""
    from provisioner.providers.base import OfferQuery
    from provisioner.providers.registry import get_provider

    provider = get_provider(name)
    try:
        return provider.list_offers(OfferQuery())
    finally:
        close = getattr(provider, "close", None)
        if callable(close):
            close()


@dataclass
class RefreshResult:
    """What a refresh did: one summary line per provider (and the cache written), and failures."""

    lines: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        return "\n".join(self.lines)

    def raise_for_failures(self) -> None:
        if self.failed:
            raise ProviderError(", ".join(self.failed), "refresh failed; the cache keeps their previous offers")


def _fetch(name: str) -> list[Offer] | ProviderError:
    try:
        return fetch_offers(name)
    except ProviderError as exc:
        return exc


def refresh_catalog(providers: Sequence[str] | None = None, *, today: dt.date | None = None) -> RefreshResult:
    """Refresh ``providers`` (default: every live provider with a key set) and write the cache.

    Providers are asked concurrently and independently: the cache is written with every
    provider that answered, and the result lists those that failed (``raise_for_failures``).
    Raises ProviderError before any request for an unknown provider or when no key is set.
    """
    names = list(providers) if providers else [name for name in LIVE_PROVIDERS if _configured(name)]
    unknown = [name for name in names if name not in LIVE_PROVIDERS]
    if unknown:
        raise ProviderError(unknown[0], f"live refresh is supported for {', '.join(LIVE_PROVIDERS)}")
    if not names:
        raise ProviderError("catalog", "no provider has an API key set; set e.g. LAMBDA_API_KEY or pass --provider")
    base = choose_catalog(None)
    result = RefreshResult()
    fresh: list[Offer] = []
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        answers = dict(zip(names, pool.map(_fetch, names), strict=True))
    for name, answer in answers.items():
        if isinstance(answer, ProviderError):
            result.failed[name] = answer.message
            result.lines.append(f"{name}: failed: {answer.message}")
        else:
            fresh.extend(answer)
            result.lines.append(f"{name}: {len(answer)} offers")
    refreshed = [name for name in names if name not in result.failed]
    if refreshed:
        path = cache_dir() / CACHE_FILE
        stamp = today or dt.datetime.now(dt.UTC).date()
        update = Catalog(as_of=stamp, origin=str(path), providers=base.providers, offers=fresh)
        merged = merge_catalogs(base, update, refreshed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_catalog(merged), encoding="utf-8")
        result.lines.append(f"wrote {path} ({len(merged.offers)} offers, as of {stamp})")
    return result


__all__ = ["LIVE_PROVIDERS", "RefreshResult", "fetch_offers", "refresh_catalog"]
