"""The terminal report and catalog listing, drawn with rich into a string.

Nothing is printed: a private Console writes to a StringIO at a fixed width, with no
colour unless asked, so output is the same on every terminal and in tests. Every
value from a spec, catalog or provider goes in as ``Text`` so brackets in it are never
read as rich markup.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from provisioner.offer import Offer
from provisioner.report.facts import money, usd
from provisioner.report.view import ReportView, Row, as_of_text, examples_text, gpu_label


def _console(width: int, color: bool) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
        soft_wrap=False,
    )


def _render(renderables: Sequence[RenderableType], width: int, color: bool) -> str:
    console = _console(width, color)
    for renderable in renderables:
        console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    # rich pads titled tables to the full width; trailing blanks only get in the way of diffs.
    return "\n".join(line.rstrip() for line in file.getvalue().splitlines()) + "\n"


_IDENTIFIER_COLUMNS = frozenset({"provider", "instance type"})


def _table(title: str, columns: Sequence[tuple[str, str]]) -> Table:
    # One blank between columns (right padding only) keeps 13 columns inside 120 characters.
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False,
        show_edge=False, expand=False,
    )
    for name, justify in columns:
        # Numbers and identifiers (copied into specs and consoles) never wrap; prose folds when narrow.
        whole = justify == "right" or name in _IDENTIFIER_COLUMNS
        table.add_column(name, justify=justify, overflow="fold", no_wrap=whole)  # type: ignore[arg-type]
    return table


_BREAKDOWN = ("compute", "storage", "egress", "interr.")
_OPTION_COLUMNS = (
    ("#", "right"), ("provider", "left"), ("region", "left"), ("instance type", "left"),
    ("per node", "left"), ("nodes", "right"), ("spot", "left"), ("network", "left"), ("$/h", "right"),
    ("$/GPU-h", "right"), *((name, "right") for name in _BREAKDOWN), ("total", "right"),
)
# Below this width the four breakdown columns are dropped rather than cut off.
FULL_TABLE_MIN_WIDTH = 140
_NETWORK_SHORT = {"cluster_fabric": "cluster fabric"}


def _amount(amount_usd: object) -> str:
    """USD without the sign: the caption gives the unit."""
    return usd(amount_usd).lstrip("$")


def _options_table(title: str, rows: Sequence[Row], hours: float, width: int) -> Table:
    full = width >= FULL_TABLE_MIN_WIDTH
    columns = [c for c in _OPTION_COLUMNS if full or c[0] not in _BREAKDOWN]
    table = _table(title, columns)
    note = "" if full else f" (cost breakdown from {FULL_TABLE_MIN_WIDTH} columns)"
    folded = [f"#{row.rank}: {', '.join(row.regions)}" for row in rows if row.folded]
    regions = f"\nsame offer and price in several regions: {'; '.join(folded)}" if folded else ""
    table.caption = f"USD: $/h for the whole cluster, costs expected over {hours:g} h{note}{regions}"
    table.caption_justify = "left"
    for row in rows:
        cells = [
            str(row.rank), row.provider, row.region, row.instance_type, row.gpus, str(row.nodes),
            "yes" if row.spot else "no", _NETWORK_SHORT.get(row.network, row.network), _amount(row.hourly),
            _amount(row.per_gpu_hour),
        ]
        if full:
            cells += [_amount(row.compute), _amount(row.storage), _amount(row.egress), _amount(row.interruption)]
        table.add_row(*(Text(cell) for cell in cells), Text(_amount(row.total), style="bold"))
    return table


def render_table(view: ReportView, *, color: bool, width: int) -> str:
    """The full terminal report: header, assumptions, winner and why, ranked, per-provider and quote-only
    tables, grouped rejections (every one with explain)."""
    parts: list[RenderableType] = [
        Text(f"{view.title.removeprefix('Cost comparison: ')}: {view.request}", style="bold"),
        Text(f"assumes {view.assumptions}"),
        Text(f"{view.catalog}; provider price dates: {view.price_dates_text or 'none ranked'}", style="dim"),
        Text(view.generated, style="dim"),
    ]
    parts += [Text.assemble(("warning: ", "bold yellow"), warning) for warning in view.warnings]
    parts.append(Text(""))
    if view.rows and view.winner:
        parts.append(Text.assemble(("Cheapest: ", "bold green"), view.winner))
        if view.why:
            parts.append(Text.assemble(("Why #1: ", "bold"), view.why))
        parts.append(Text(""))
        parts += [_options_table(view.ranked_title, view.rows, view.hours, width), Text("")]
        parts += [_options_table("Best per provider", view.best, view.hours, width), Text("")]
    else:
        parts.append(Text(view.empty_message, style="bold red"))
        parts.append(Text(""))
    if view.quotes:
        parts += [_quotes_table(view), Text("")]
    parts.extend(_rejections(view))
    return _render(parts, width, color)


def _quotes_table(view: ReportView) -> Table:
    table = _table(f"Quote only ({len(view.quotes)}): not ranked, cannot be bought by this tool", (
        ("provider", "left"), ("instance type", "left"), ("region", "left"), ("per node", "left"),
        ("nodes", "right"), ("purchase", "left"), ("$/h", "right"), ("how to obtain", "left"),
    ))
    for q in view.quotes:
        table.add_row(Text(q.provider), Text(q.instance_type), Text(q.region),
                      Text(gpu_label(q.gpu_model, q.gpus_per_node)), Text(str(q.nodes)), Text(q.purchase),
                      Text(_amount(q.hourly_usd)), Text(q.how_to_obtain))
    return table


def _rejections(view: ReportView) -> list[RenderableType]:
    title = f"Rejected offers ({view.rejected_count})"
    if not view.rejected_count:
        return [Text(f"{title}: none")]
    table = _table(title, (("offers", "right"), ("stage", "left"), ("spec field", "left"), ("reason", "left"),
                           ("examples", "left")))
    groups = view.groups if view.explain else view.groups[:REASONS_SHOWN]
    for group in groups:
        table.add_row(Text(str(group.count)), Text(group.stage_label), Text(group.field or "-"),
                      Text(group.reason), Text(examples_text(group)))
    parts: list[RenderableType] = [table]
    if view.explain and view.rejected:
        every = _table(f"Every rejected offer ({len(view.rejected)})", (
            ("provider", "left"), ("region", "left"), ("instance type", "left"), ("reason", "left")))
        for item in view.rejected:
            every.add_row(Text(item.provider), Text(item.region), Text(item.instance_type), Text(item.reason))
        parts += [Text(""), every]
    elif not view.explain:
        rest = view.groups[REASONS_SHOWN:]
        more = f"{len(rest)} rarer reasons for {sum(g.count for g in rest)} more offers; " if rest else ""
        parts.append(Text(f"({more}--explain lists every rejected offer)", style="dim"))
    return parts


REASONS_SHOWN = 12
"""The most frequent rejection reasons shown without --explain (rich tables cost ~2 ms a row)."""


def _price(value: object) -> Text:
    return Text("-" if value is None else usd(money(value)))


def render_catalog_table(offers: Sequence[Offer], as_of: dt.date | str, origin: str, *, width: int) -> str:
    """Every offer as one row, in the order given."""
    title = f"{len(offers)} offers; prices as of {as_of_text(as_of)} from {origin}"
    table = _table(title, (
        ("provider", "left"), ("instance type", "left"), ("region", "left"), ("GPU x count", "left"),
        ("GPU mem", "right"), ("fabric/Gbps", "left"), ("on-demand $/h", "right"), ("spot $/h", "right"),
        ("egress $/GB", "right"), ("reliability", "right"),
    ))
    for offer in offers:
        table.add_row(
            Text(offer.provider), Text(offer.instance_type), Text(offer.region),
            Text(gpu_label(offer.gpu_model, offer.gpus)), Text(f"{offer.gpu_memory_gib:g} GiB"),
            Text(f"{offer.fabric.value}/{offer.fabric_gbps:g}"), _price(offer.price_per_hour_usd),
            _price(offer.spot_price_per_hour_usd), Text(f"${offer.egress_usd_per_gb:.3f}"),
            Text(f"{offer.reliability:.3f}"),
        )
    return _render([table], width, color=False)


__all__ = ["render_catalog_table", "render_table"]
