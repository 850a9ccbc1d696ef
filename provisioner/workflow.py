"""Glue between the CLI and the pure core: pick the catalog, plan, report, save.

This is the shell layer: it reads files and the environment (the cache location),
the core modules it calls do not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import overload

from provisioner.capabilities import Capability
from provisioner.catalog import TableCatalog, load_bundled_catalog, load_catalog
from provisioner.catalog_model import Catalog
from provisioner.errors import CatalogError, NoFeasibleOfferError, SpecError
from provisioner.gpu_names import canonical_gpu
from provisioner.loader import load_spec, locate, spec_marks
from provisioner.plan import Plan, PlanResult, load_plan, save_plan
from provisioner.report.facts import ReportMeta
from provisioner.spec import ClusterSpec
from provisioner.termtext import say

CACHE_FILE = "catalog.json"


def cache_dir() -> Path:
    """Where `catalog refresh` writes: $PROVISIONER_CACHE_DIR or the platform's user cache dir."""
    override = os.environ.get("PROVISIONER_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("gpu-provisioner"))


@overload
def choose_catalog(catalog_path: None, warnings: list[str] | None = None) -> Catalog: ...
@overload
def choose_catalog(catalog_path: Path | None, warnings: list[str] | None = None) -> Catalog | TableCatalog: ...
def choose_catalog(catalog_path: Path | None, warnings: list[str] | None = None) -> Catalog | TableCatalog:
    """``--catalog FILE`` beats the refreshed cache, which beats the bundled snapshot.

    A JSON ``--catalog`` is compiled once into a columnar file under the cache dir. An
    unreadable refreshed cache raises CatalogError, unless ``warnings`` is given: then a line
    saying so is appended to it and the bundled snapshot is used (plan must not be blocked by
    a truncated cache).
    """
    if catalog_path is not None:
        return load_catalog(catalog_path, cache_dir=cache_dir())
    cached = cache_dir() / CACHE_FILE
    if cached.is_file():
        try:
            catalog = load_catalog(cached, models=True)  # refresh merges into it, whatever its size
            if isinstance(catalog, Catalog):
                return catalog
            raise CatalogError(f"{cached}: the refreshed cache must be a JSON catalog")
        except CatalogError as exc:
            if warnings is None:
                raise
            warnings.append(f"warning: {exc}; using the bundled catalog (run `provisioner catalog refresh`)")
    return load_bundled_catalog()


def adapter_capabilities() -> dict[str, frozenset[Capability]]:
    """What each provider's adapter in this installation can create (the optimizer's adapter gate)."""
    from provisioner.providers import registry

    return registry.capabilities()


def resolve(
    spec: ClusterSpec, catalog: Catalog | TableCatalog, spec_path: Path, *, keep: int = 50, explain: bool = False
) -> PlanResult:
    """Plan ``spec``; when nothing fits, raise a SpecError at the field that ruled out the last offers."""
    from provisioner.optimizer import resolve_plan

    _warn_dataset_region(spec, catalog, spec_path)
    try:
        return resolve_plan(spec, catalog, adapter_capabilities(), keep=keep, explain=explain)
    except NoFeasibleOfferError as exc:
        located = _located(exc, spec_path)
        located.no_fit = exc  # type: ignore[attr-defined]  # --explain renders its rejections
        raise located from None


def _warn_dataset_region(spec: ClusterSpec, catalog: Catalog | TableCatalog, spec_path: Path) -> None:
    """One located warning line on stderr for a dataset region the catalog does not know (a typo)."""

    from provisioner.cost_terms import dataset_region_warning

    found = dataset_region_warning(spec, catalog.offer_table())
    if found is not None:
        field, message = found
        line, column = locate(field, spec_marks(spec_path.read_text(encoding="utf-8"), str(spec_path)))
        say(f"warning: {SpecError(message, path=field, file=str(spec_path), line=line, column=column)}", err=True)


def _located(exc: NoFeasibleOfferError, spec_path: Path) -> SpecError:
    from provisioner.optimizer import quoted_note, relaxed_note

    groups = getattr(exc, "rejection_groups", None) or []
    group = getattr(exc, "blamed", None) or (groups[0] if groups else None)  # optimizer.blamed_group
    if group is None or not group.examples:
        error = SpecError(str(exc), file=str(spec_path))
        error.exit_code = NoFeasibleOfferError.exit_code
        return error
    blamed = group.examples[0]
    field = group.field or ""
    marks = spec_marks(spec_path.read_text(encoding="utf-8"), str(spec_path))
    line, column = locate(field, marks) if field else (1, 1)
    count = sum(group.count for group in groups)
    message = (
        f"no offer fits: {blamed.reason} ({blamed.provider} {blamed.instance_type}; "
        f"{count} rejected, see --explain){quoted_note(getattr(exc, 'quotes', None) or [])}"
        f"{relaxed_note(getattr(exc, 'relaxations', None) or [])}"
    )
    error = SpecError(message, path=field, file=str(spec_path), line=line, column=column)
    error.exit_code = NoFeasibleOfferError.exit_code  # located like a spec error; the spec is valid: exit 3
    return error


def plan_report(
    spec_paths: list[Path],
    *,
    catalog_path: Path | None,
    fmt: str,
    top: int,
    explain: bool,
    save_plan_to: Path | None,
) -> str:
    """Render the comparison for each spec (a JSON list for several specs in JSON format)."""

    from provisioner.report import render_report
    from provisioner.report.facts import unplannable_result

    meta = report_meta()
    warnings: list[str] = []
    catalog = choose_catalog(catalog_path, warnings)
    for line in warnings:
        say(line, err=True)
    results = []
    for path in spec_paths:
        spec = load_spec(path)
        try:
            results.append(resolve(spec, catalog, path, keep=max(top, 50), explain=explain))
        except SpecError as error:
            no_fit = getattr(error, "no_fit", None)
            if no_fit is not None and (explain or getattr(no_fit, "quotes", None)):
                # the CLI prints this report (every rejection under --explain; the quote-only
                # products that fit, with how to obtain them), then the error line (exit 3)
                empty = unplannable_result(spec, catalog.as_of, catalog.origin, no_fit)
                error.report = render_report(  # type: ignore[attr-defined]
                    empty,
                    fmt,
                    top=top,
                    explain=True,
                    width=terminal_width(),
                    meta=meta,
                )
            raise
    if save_plan_to is not None:
        save_plan(results[0].to_plan(), save_plan_to)
    if fmt == "json" and len(results) > 1:
        docs = [json.loads(render_report(result, "json", top=top, explain=explain, meta=meta)) for result in results]
        return json.dumps(docs, indent=2) + "\n"
    width = terminal_width()
    return "\n".join(render_report(result, fmt, top=top, explain=explain, width=width, meta=meta) for result in results)


def report_meta() -> ReportMeta:
    """What reports print that the pure core cannot know: now (UTC) and this package's version.

    The version is ``provisioner.__version__`` (a test holds it equal to the installed package's
    metadata): asking importlib.metadata scans every installed distribution and parses its METADATA
    with the email package, 10-25 ms of every plan."""
    import datetime as dt

    from provisioner import __version__

    return ReportMeta(generated_at=dt.datetime.now(dt.UTC), tool_version=__version__)


def terminal_width() -> int:
    """The terminal's width, or 150 columns when output goes to a file or pipe."""
    import shutil

    return max(shutil.get_terminal_size((150, 40)).columns, 80)


def plan_from_source(source: Path, *, catalog_path: Path | None) -> Plan:
    """A saved plan (JSON) as is, or the winning plan for a spec (YAML)."""
    if source.suffix == ".json":
        return load_plan(source)
    return resolve(load_spec(source), choose_catalog(catalog_path), source, keep=1).to_plan()


def catalog_listing(*, catalog_path: Path | None, provider: str | None, gpu: str | None, fmt: str) -> str:
    from provisioner.report import render_catalog

    catalog = choose_catalog(catalog_path)
    offers = [
        offer
        for offer in catalog.offers
        if (provider is None or offer.provider == provider)
        and (gpu is None or canonical_gpu(offer.gpu_model) == canonical_gpu(gpu))
    ]
    return render_catalog(offers, fmt, as_of=catalog.as_of, origin=catalog.origin, width=terminal_width())


def load_topology(path: Path) -> dict[str, list[str]]:
    """A topology file: ``{node name: [outermost switch, ..., leaf switch]}``. SpecError when malformed."""
    import yaml

    from provisioner.loader import MAX_DEPTH, deep_nesting_at, syntax_error

    try:
        text = path.read_text(encoding="utf-8")
        deep = deep_nesting_at(text)
        if deep is not None:
            raise SpecError(
                f"the document nests more than {MAX_DEPTH} levels deep", file=str(path), line=deep[0], column=deep[1]
            )
        data = yaml.safe_load(text)
    except OSError as exc:
        raise SpecError(f"cannot read topology: {exc.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise SpecError("cannot read topology: not UTF-8 text", file=str(path)) from None
    except yaml.MarkedYAMLError as exc:  # the file's line and column, as for a spec
        raise syntax_error(exc, str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"cannot read topology: {' '.join(str(exc).split())}", file=str(path)) from None
    valid = isinstance(data, dict) and all(
        isinstance(node, str)
        and isinstance(switches, list)
        and switches
        and all(isinstance(s, str) and s for s in switches)
        for node, switches in data.items()
    )
    if not valid:
        raise SpecError("a topology maps each node name to a non-empty list of switch names", file=str(path))
    topology: dict[str, list[str]] = data
    return topology
