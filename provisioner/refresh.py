"""`provisioner catalog refresh`: live offers from the providers into a dated cache.

Shell layer (network, clock, files). Each provider is asked independently and concurrently.
The result is merged per provider into the catalog in use (the cache, else the bundled one):

- a provider not refreshed keeps its offers and its own ``ProviderInfo.as_of``;
- a refreshed provider gets its live offers and today's ``as_of``; the products its live API
  does not list (cluster products, reservations, sales-led offers) are kept, each marked with
  the ``source`` and ``as_of`` it came from (a kind the live answer does list, e.g. AWS
  Capacity Blocks as reservations, is replaced like instances);
- a provider whose refresh fails, or yields no valid offer, keeps its previous offers and is
  named in ``RefreshResult.failed`` (the command exits non-zero);
- provider answers are untrusted: offers with unsafe identifiers or absurd numbers are
  dropped (counted in ``RefreshResult.dropped``), never raised, never written;
- the cache is written atomically (temporary file + ``os.replace``); a cache that cannot be
  read (truncated, hand-edited) is replaced from the bundled catalog, with a warning;
- prices from the tool's own fake providers (a ``PROVISIONER_<NAME>_API_URL`` whose
  ``/_fake/about`` answers) never enter that cache: such a refresh writes ``FAKE_CACHE_FILE``
  beside it, which ``plan --catalog`` reads.

The cache keeps the provider facts (egress tiers, storage prices) of the catalog it
refreshes, since offer APIs do not publish them.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.capabilities import Purchase
from provisioner.catalog import dump_catalog, load_bundled_catalog, load_catalog
from provisioner.catalog_model import Catalog
from provisioner.errors import CatalogError, ProviderError
from provisioner.offer import Offer, ProviderInfo, QuotaHeadroom
from provisioner.providers import registry
from provisioner.termtext import counted
from provisioner.workflow import CACHE_FILE, cache_dir, choose_catalog

LIVE_PROVIDERS = tuple(name for name, found in registry.facts().items() if found.refresh == "live")
"""Refreshed by default when their API key is set."""
CLOUD_PROVIDERS = tuple(name for name, found in registry.facts().items() if found.refresh == "cloud")
"""Refreshed only when named (``--provider aws``): their credentials come from the SDKs' standard
chains, not an API key, so having some is no sign the user wants them asked. They also record
account quota headroom (``ProviderInfo.quotas``) the optimizer checks."""
LISTED_PURCHASES = frozenset({Purchase.INSTANCE, Purchase.POD})
"""What the live offer APIs list; other products of a refreshed provider are kept as they were."""
_LIVE_PREFIX = re.compile(r"^Live offers from the \w+ API on \d{4}-\d{2}-\d{2}[^.]*\. (Kept from before: )?")


def _configured(name: str) -> bool:
    from provisioner.providers.settings import credentials_missing

    return credentials_missing(name) is None


@dataclass
class Fetched:
    """One provider's live answer: its screened offers and what was dropped, by reason."""

    offers: list[Offer]
    dropped: Counter[str] = field(default_factory=Counter)
    quotas: list[QuotaHeadroom] | None = None
    """Quota headroom for the offers' regions, from adapters that can read it (None: not read)."""
    quota_error: str | None = None
    """Why the adapter could not read its quotas (e.g. no permission); the offers still count."""


def fetch_offers(name: str) -> Fetched:
    """All live offers of one provider, screened (its HTTP client closed afterwards).

    Raises ProviderError subclasses when the provider cannot be asked or answers with an error.
    """
    from provisioner.providers.base import OfferQuery
    from provisioner.providers.registry import get_provider
    from provisioner.providers.screening import OfferScreen

    provider = get_provider(name)
    quotas, quota_error = None, None
    try:
        offers = provider.list_offers(OfferQuery())
        dropped: Counter[str] = Counter(getattr(provider, "dropped_offers", None) or {})
        quote = getattr(provider, "quote_offers", None)  # aws: Capacity Blocks, listed but never bought
        if callable(quote):
            offers = [*offers, *quote(offers)]
        headroom = getattr(provider, "quota_headroom", None)  # aws, gcp: quotas read before anything is bought
        if callable(headroom):
            try:
                quotas = list(headroom([o for o in offers if o.provider == name]))
            except ProviderError as exc:  # quotas are a help to plan; create checks them again anyway
                quota_error = exc.message
    finally:
        close = getattr(provider, "close", None)
        if callable(close):
            close()
    screen = OfferScreen(name)  # again here: whatever an adapter let through is checked once more
    kept = screen.screen(offer for offer in offers if offer.provider == name)
    dropped.update(screen.dropped)
    foreign = sum(1 for offer in offers if offer.provider != name)
    if foreign:
        dropped["offer of another provider"] += foreign
    return Fetched(kept, dropped, quotas, quota_error)


@dataclass
class RefreshResult:
    """What a refresh did: one summary line per provider (and the cache written), and failures.

    ``failed`` maps each provider that kept its previous offers to why (an error, or no valid
    offer); ``dropped`` maps a provider to the offers refused as untrusted data, by reason;
    ``refreshed`` lists the providers whose offers were replaced; ``cache`` is the file written
    (None when nothing was written); ``warnings`` are lines worth printing (an unreadable cache).
    """

    lines: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    refreshed: list[str] = field(default_factory=list)
    cache: Path | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return "\n".join([*self.warnings, *self.lines])

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        if self.failed:
            raise ProviderError(
                ", ".join(self.failed),
                f"refresh failed; the cache keeps the offers it had for {'it' if len(self.failed) == 1 else 'each'}",
            )


def _base_catalog(result: RefreshResult, *, fake: bool = False) -> Catalog:
    """What a refresh merges into: the cache in use (for fake prices: the fake cache, else the
    bundled catalog, never the real cache)."""
    if fake:
        path = cache_dir() / FAKE_CACHE_FILE
        try:
            found = load_catalog(path, models=True) if path.is_file() else None
        except CatalogError as exc:
            result.warnings.append(f"warning: {exc}; starting again from the bundled catalog")
            found = None
        return found if isinstance(found, Catalog) else load_bundled_catalog()
    try:
        return choose_catalog(None)
    except CatalogError as exc:
        result.warnings.append(f"warning: {exc}; starting again from the bundled catalog")
        return load_bundled_catalog()


def _dropped_text(dropped: Counter[str]) -> str:
    if not dropped:
        return ""
    reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(dropped.items()))
    return f"; dropped {sum(dropped.values())} untrusted offer(s): {reasons}"


def merge_refreshed(
    base: Catalog,
    fresh: dict[str, list[Offer]],
    today: dt.date,
    origin: str,
    quotas: Mapping[str, list[QuotaHeadroom] | None] | None = None,
) -> Catalog:
    """``base`` with each provider in ``fresh`` replaced by its live offers (see module docstring);
    a provider in ``quotas`` gets that quota headroom (None: none, the old ones are dropped), the
    others keep what they had.

    Every provider's ``as_of`` is written explicitly, so the catalog's own ``as_of`` (the day
    the file was written) never dates a provider that was not refreshed. Pure.
    """
    infos: dict[str, ProviderInfo] = {}
    for name, info in base.providers.items():
        infos[name] = info if info.as_of is not None else info.model_copy(update={"as_of": base.as_of})
    offers: list[Offer] = []
    listed = {name: LISTED_PURCHASES | {o.purchase for o in live} for name, live in fresh.items()}
    for offer in base.offers:
        if offer.provider not in fresh:
            offers.append(offer)
        elif offer.purchase not in listed[offer.provider]:  # the live API does not list it: keep, dated
            dated = infos.get(offer.provider)
            offers.append(
                offer.model_copy(
                    update={
                        "as_of": offer.as_of or (dated.as_of if dated else base.as_of),
                        "source": offer.source or f"{base.origin} catalog (the live API does not list this product)",
                    }
                )
            )
    for name, live in fresh.items():
        offers.extend(live)
        previous = infos.get(name)
        kept = _LIVE_PREFIX.sub("", previous.source) if previous else ""
        source = f"Live offers from the {name} API on {today.isoformat()}. " + (
            f"Kept from before: {kept}" if kept else ""
        )
        infos[name] = (
            previous.model_copy(update={"as_of": today, "source": source.strip()})
            if previous
            else ProviderInfo(source=source.strip(), as_of=today)
        )
        if quotas and name in quotas:
            read = quotas[name]
            infos[name] = infos[name].model_copy(update={"quotas": None if read is None else list(read)})
    return Catalog(as_of=today, origin=origin, providers=infos, offers=offers)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


FAKE_CACHE_FILE = "fake-catalog.json"
"""Where a refresh that asked one of the tool's fake providers writes, in ``cache_dir()``: never the
cache ``plan`` reads on its own."""


def _fakes(names: Sequence[str]) -> list[str]:
    """The providers among ``names`` whose URL is the tool's fake."""
    from provisioner.providers.settings import fake_about

    return [name for name in names if fake_about(name) is not None]


def refresh_catalog(
    providers: Sequence[str] | None = None,
    *,
    today: dt.date | None = None,
    clock: Callable[[], dt.date] | None = None,
    fetch: Callable[[str], Fetched] | None = None,
) -> RefreshResult:
    """Refresh ``providers`` (default: every live provider with a key set) and write the cache.

    Providers are asked concurrently and independently; see the module docstring for how the
    answers are merged. ``today``/``clock`` date the refreshed providers (default: the UTC date);
    ``fetch`` replaces ``fetch_offers`` (tests). Raises ProviderError before any request for an
    unknown provider or when no key is set; a provider's failure is reported in the result.
    """
    names = list(dict.fromkeys(providers)) if providers else [n for n in LIVE_PROVIDERS if _configured(n)]
    unknown = [name for name in names if name not in (*LIVE_PROVIDERS, *CLOUD_PROVIDERS)]
    if unknown:
        raise ProviderError(unknown[0], f"live refresh is supported for {', '.join(LIVE_PROVIDERS + CLOUD_PROVIDERS)}")
    if not names:
        keys = [found.key_vars[0] for name in LIVE_PROVIDERS if (found := registry.facts()[name]).key_vars]
        raise ProviderError(
            "catalog",
            f"no provider has an API key set: set {', '.join(keys[:-1])} or {keys[-1]}, "
            f"or name {' or '.join(CLOUD_PROVIDERS)} with --provider (read with their SDK's "
            "credentials)",
        )
    result = RefreshResult()
    faked = _fakes(names)
    base = _base_catalog(result, fake=bool(faked))
    fetcher = fetch or fetch_offers

    def ask(name: str) -> Fetched | ProviderError:
        try:
            return fetcher(name)
        except ProviderError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        answers = dict(zip(names, pool.map(ask, names), strict=True))
    fresh: dict[str, list[Offer]] = {}
    quotas: dict[str, list[QuotaHeadroom] | None] = {}
    for name, answer in answers.items():
        if isinstance(answer, ProviderError):
            result.failed[name] = answer.message
            result.lines.append(f"{name}: failed: {answer.message}; kept its previous offers")
            continue
        if answer.dropped:
            result.dropped[name] = dict(answer.dropped)
        if not answer.offers:
            why = "no valid offer" + _dropped_text(answer.dropped)
            result.failed[name] = why
            result.lines.append(f"{name}: failed: {why}; kept its previous offers")
            continue
        fresh[name] = answer.offers
        if answer.quotas is not None or answer.quota_error is not None:
            quotas[name] = answer.quotas
        quota_note = "" if answer.quotas is None else f", {counted(len(answer.quotas), 'quota')} read"
        if answer.quota_error is not None:
            quota_note = f", quotas not read ({answer.quota_error}; plan checks none, create still does)"
        offers = counted(len(answer.offers), "offer")
        result.lines.append(f"{name}: {offers}{quota_note}{_dropped_text(answer.dropped)}")
    result.refreshed = list(fresh)
    if fresh:
        path = cache_dir() / (FAKE_CACHE_FILE if faked else CACHE_FILE)
        stamp = today or (clock() if clock else dt.datetime.now(dt.UTC).date())
        merged = merge_refreshed(base, fresh, stamp, str(path), quotas)
        write_atomically(path, dump_catalog(merged))
        result.cache = path
        result.lines.append(f"wrote {path} ({counted(len(merged.offers), 'offer')}, {', '.join(fresh)} as of {stamp})")
        if faked:
            result.lines.append(
                f"fake prices ({', '.join(faked)} at the tool's fake): not the cache plan reads; "
                f"plan on them with: provisioner plan SPEC --catalog {path}"
            )
    return result


__all__ = [
    "CLOUD_PROVIDERS",
    "FAKE_CACHE_FILE",
    "LIVE_PROVIDERS",
    "Fetched",
    "RefreshResult",
    "fetch_offers",
    "merge_refreshed",
    "refresh_catalog",
    "write_atomically",
]
