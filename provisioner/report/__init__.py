"""Cost-comparison reports for a PlanResult, and the catalog listing.

``render_report`` is the one entry point the CLI uses for ``provisioner plan``; it is
pure (no I/O, no clock) and returns the whole document as a string. Formats:

- ``table``: rich terminal tables (``color``/``width`` apply only here);
- ``json`` / ``csv``: machine-readable, unrounded numbers, fixed field order;
- ``markdown``: GitHub pipe tables for pull requests and docs;
- ``html``: one self-contained page with an inline SVG stacked bar chart.

``top`` limits the ranked options shown; when None, the human formats (table,
markdown, html) show 10 rows (identical offers in several regions fold into one) and the
machine formats (json, csv) show every option the result holds. Rejections are grouped by
stage and reason (count, spec field, examples); ``explain`` adds every rejected offer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.report.facts import ReportMeta
from provisioner.report.view import build_view, shown_options

if TYPE_CHECKING:
    from provisioner.offer import Offer
    from provisioner.plan import PlanResult

# Each format's module is imported when used: rich (table) and jinja2 (html) cost tens of
# milliseconds at start-up, which a cold `provisioner plan -f json` should not pay.

REPORT_FORMATS = ("table", "json", "csv", "markdown", "html")
CATALOG_FORMATS = ("table", "json")


def render_report(
    result: PlanResult,
    fmt: str,
    *,
    top: int | None = None,
    explain: bool = False,
    color: bool = False,
    width: int = 120,
    meta: ReportMeta | None = None,
) -> str:
    """Render ``result`` as ``fmt``. Raises ValueError for an unknown format or top < 1.

    ``meta`` carries what only the shell knows (generation time, tool version); the reports
    print it and warn about ranked providers' prices older than 7 days at that time.
    """
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(REPORT_FORMATS)}")
    meta = meta or ReportMeta()
    if fmt in ("json", "csv"):
        from provisioner.report import tabular

        options = shown_options(result, top, default=None)
        if fmt == "json":
            return tabular.render_json(result, options, explain=explain, meta=meta)
        return tabular.render_csv(result, options)
    view = build_view(result, top, explain=explain, meta=meta)
    if fmt == "table":
        from provisioner.report.terminal import render_table

        return render_table(view, color=color, width=width)
    if fmt == "html":
        from provisioner.report.html import render_html

        return render_html(view)
    from provisioner.report.tabular import render_markdown

    return render_markdown(view)


def render_catalog(offers: Sequence[Offer], fmt: str, as_of: dt.date | str, origin: str, *, width: int = 140) -> str:
    """List ``offers`` (in the given order) as a ``table`` or ``json``. Raises ValueError otherwise."""
    if fmt == "table":
        from provisioner.report.terminal import render_catalog_table

        return render_catalog_table(offers, as_of, origin, width=width)
    if fmt == "json":
        from provisioner.report.tabular import render_catalog_json

        return render_catalog_json(offers, as_of, origin)
    raise ValueError(f"unknown catalog format {fmt!r}; expected one of {', '.join(CATALOG_FORMATS)}")


__all__ = ["CATALOG_FORMATS", "REPORT_FORMATS", "ReportMeta", "render_catalog", "render_report"]
