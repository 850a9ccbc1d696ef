"""`provisioner catalog refresh`: live offers from the providers into a dated cache.

Shell layer (network, clock, files). Each provider is asked independently; one
provider's failure does not lose the others' fresh prices. The cache keeps the
provider facts (egress tiers, storage prices) of the catalog it refreshes, since
offer APIs do not publish them.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence

from provisioner.catalog import dump_catalog, merge_catalogs
from provisioner.errors import ProviderError
from provisioner.offer import Catalog, Offer
from provisioner.workflow import CACHE_FILE, cache_dir, choose_catalog

LIVE_PROVIDERS = ("lambda", "runpod", "vastai", "fluence")


def _configured(name: str) -> bool:
    from providers.settings import NATIVE_KEY_VARS

    prefix = f"PROVISIONER_{name.upper()}"
    return any(os.environ.get(var) for var in (f"{prefix}_API_KEY", NATIVE_KEY_VARS.get(name, "")))


def fetch_offers(name: str) -> list[Offer]:
    """All live offers of one provider (its HTTP client closed afterwards). Raises ProviderError subclasses."""
    from providers.base import OfferQuery
    from providers.registry import get_provider

    provider = get_provider(name)
    try:
        return provider.list_offers(OfferQuery())
    finally:
        close = getattr(provider, "close", None)
        if callable(close):
            close()


def refresh_catalog(providers: Sequence[str] | None = None, *, today: dt.date | None = None) -> str:
    """Refresh ``providers`` (default: every live provider with a key set); return a summary.

    Writes the cache even when some providers fail, then raises ProviderError naming them.
    """
    names = list(providers) if providers else [name for name in LIVE_PROVIDERS if _configured(name)]
    unknown = [name for name in names if name not in LIVE_PROVIDERS]
    if unknown:
        raise ProviderError(unknown[0], f"live refresh is supported for {', '.join(LIVE_PROVIDERS)}")
    if not names:
        raise ProviderError("catalog", "no provider has an API key set; set e.g. LAMBDA_API_KEY or pass --provider")
    base = choose_catalog(None)
    lines: list[str] = []
    fresh: list[Offer] = []
    failed: dict[str, str] = {}
    for name in names:
        try:
            offers = fetch_offers(name)
        except ProviderError as exc:
            failed[name] = exc.message
            lines.append(f"{name}: failed: {exc.message}")
            continue
        fresh.extend(offers)
        lines.append(f"{name}: {len(offers)} offers")
    refreshed = [name for name in names if name not in failed]
    path = cache_dir() / CACHE_FILE
    if refreshed:
        stamp = today or dt.datetime.now(dt.UTC).date()
        update = Catalog(as_of=stamp, origin=str(path), providers=base.providers, offers=fresh)
        merged = merge_catalogs(base, update, refreshed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_catalog(merged), encoding="utf-8")
        lines.append(f"wrote {path} ({len(merged.offers)} offers, as of {stamp})")
    if failed:
        print("\n".join(lines))
        raise ProviderError(", ".join(failed), "refresh failed; the cache keeps their previous offers")
    return "\n".join(lines)


__all__ = ["LIVE_PROVIDERS", "fetch_offers", "refresh_catalog"]
