"""Read and write offer catalogs: the bundled snapshot, a user file, or the refreshed cache.

A catalog file is JSON (or YAML) matching ``provisioner.offer.Catalog``. Which file
is used is decided by the caller (the CLI): ``--catalog FILE`` beats the refreshed
cache, which beats the bundled snapshot. Nothing here touches the network.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from provisioner.errors import CatalogError
from provisioner.offer import Catalog, Offer

BUNDLED = "bundled"


def load_bundled_catalog() -> Catalog:
    """The snapshot shipped inside the package."""
    text = resources.files("provisioner.data").joinpath("catalog.json").read_text(encoding="utf-8")
    return parse_catalog(text, BUNDLED)


def load_catalog(path: str | Path) -> Catalog:
    """A catalog file. Raises CatalogError naming the file and the first bad field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read catalog: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_catalog(text, str(path))


def parse_catalog(text: str, origin: str) -> Catalog:
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise CatalogError(f"{origin}: not valid JSON/YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{origin}: a catalog is a mapping with as_of, providers and offers")
    data["origin"] = origin
    try:
        catalog = Catalog.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CatalogError(f"{origin}: {where}: {first['msg']}") from None
    missing = sorted({offer.provider for offer in catalog.offers} - set(catalog.providers))
    if missing:
        raise CatalogError(f"{origin}: offers from {', '.join(missing)} but no providers entry for them")
    return catalog


def dump_catalog(catalog: Catalog) -> str:
    data = catalog.model_dump(mode="json", exclude={"origin"}, exclude_none=True)
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def merge_catalogs(base: Catalog, fresh: Catalog, providers: list[str]) -> Catalog:
    """``base`` with every offer of ``providers`` replaced by ``fresh``'s (a partial refresh)."""
    keep: list[Offer] = [offer for offer in base.offers if offer.provider not in providers]
    infos = dict(base.providers)
    infos.update({name: info for name, info in fresh.providers.items() if name in providers})
    offers = keep + [offer for offer in fresh.offers if offer.provider in providers]
    return Catalog(as_of=fresh.as_of, origin=fresh.origin, providers=infos, offers=offers)


__all__ = ["BUNDLED", "dump_catalog", "load_bundled_catalog", "load_catalog", "merge_catalogs", "parse_catalog"]
