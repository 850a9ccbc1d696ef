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
from provisioner.termtext import counted


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
    tables = [r.min_width for r in renderables if isinstance(r, Table) and r.min_width]
    console = _console(max([width, *tables]), color)
    for renderable in renderables:
        console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    # rich pads titled tables to the full width; trailing blanks only get in the way of diffs.
    return "\n".join(line.rstrip() for line in file.getvalue().splitlines()) + "\n"


_IDENTIFIER_COLUMNS = frozenset({"provider", "instance type", "region"})


def _narrowest(cell: str, whole: bool) -> tuple[int, int]:
    """(narrowest, widest) a cell can be drawn: its longest word, up to LONG_WORD (its longest line
    when ``whole``), its longest line."""
    lines = cell.splitlines() or [""]
    widest = max(len(line) for line in lines)
    if whole:
        return widest, widest
    return min(max((len(word) for line in lines for word in line.split()), default=0), LONG_WORD), widest


LONG_WORD = 24
"""A word of prose longer than this (a URL) may be cut across lines rather than widen its column."""
GAP = 2
"""Characters between two columns: the box's blank separator and one blank of right padding."""


def fit_columns(
    headers: Sequence[str],
    whole: Sequence[bool],
    rows: Sequence[Sequence[str]],
    width: int,
    droppable: Sequence[str] = (),
) -> tuple[list[int], list[int]]:
    """(kept column indexes, their widths) for a table that fits ``width`` without cutting a word or a
    ``whole`` cell (rich's own narrowing cuts them: ``privat``/``e``): the ``droppable`` headers go, in
    that order, until every kept column's longest word fits on one line; then the room left is shared
    out (each column gets its longest word at least, its widest line at most; their sum is over
    ``width`` only when nothing is left to drop)."""
    sizes = []
    for index, header in enumerate(headers):
        found = [_narrowest(header, False), *(_narrowest(row[index], whole[index]) for row in rows)]
        sizes.append((max(low for low, _ in found), max(high for _, high in found)))
    kept = list(range(len(headers)))
    for header in droppable:
        if sum(sizes[i][0] for i in kept) + GAP * (len(kept) - 1) <= width:
            break
        kept = [i for i in kept if headers[i] != header]
    room = max(0, width - GAP * (len(kept) - 1) - sum(sizes[i][0] for i in kept))
    widths = {i: sizes[i][0] for i in kept}
    # Water-filling: the least short first, each taking at most an equal share of what is left, so a
    # short wrap ("H200 x8") closes and two long prose columns split the rest evenly.
    order = sorted(kept, key=lambda i: sizes[i][1] - sizes[i][0])
    for n, i in enumerate(order):
        grow = min(sizes[i][1] - sizes[i][0], room // (len(order) - n))
        widths[i] += grow
        room -= grow
    return kept, [widths[i] for i in kept]


def _table(
    title: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Text]],
    width: int,
    droppable: Sequence[str] = (),
    caption: str = "",
) -> Table:
    """A table of ``rows`` that fits ``width`` (``fit_columns``); the caption names what was dropped."""
    # One blank between columns (right padding only) keeps 13 columns inside 120 characters.
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        show_edge=False,
        expand=False,
    )
    # Numbers and identifiers (copied into specs and consoles) never wrap; prose wraps between words.
    whole = [justify == "right" or name in _IDENTIFIER_COLUMNS for name, justify in columns]
    kept, widths = fit_columns(
        [name for name, _ in columns], whole, [[cell.plain for cell in row] for row in rows], width, droppable
    )
    for index, column_width in zip(kept, widths, strict=True):
        name, justify = columns[index]
        # The widths are fixed, so rich never narrows (cuts) a column; a header wraps between words.
        table.add_column(name, justify=justify, overflow="fold", width=column_width)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(row[index] for index in kept))
    needed = sum(widths) + GAP * (len(widths) - 1)
    if needed > width:  # nothing left to drop: drawn wider than asked (_render) rather than cut
        table.min_width = needed
    gone = [columns[index][0] for index in range(len(columns)) if index not in kept]
    note = f"not shown at {width} columns: {', '.join(gone)}" if gone else ""
    caption = "\n".join(part for part in (caption, note) if part)
    if caption:
        table.caption, table.caption_justify = caption, "left"
    return table


_BREAKDOWN = ("compute", "storage", "egress", "interr.")
_OPTION_COLUMNS = (
    ("#", "right"),
    ("provider", "left"),
    ("region", "left"),
    ("instance type", "left"),
    ("per node", "left"),
    ("nodes", "right"),
    ("spot", "left"),
    ("network", "left"),
    ("$/h", "right"),
    ("$/GPU-h", "right"),
    *((name, "right") for name in _BREAKDOWN),
    ("total", "right"),
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
    note = "" if full else f" (cost breakdown from {FULL_TABLE_MIN_WIDTH} columns)"
    folded = [f"#{row.rank}: {', '.join(row.regions)}" for row in rows if row.folded]
    regions = f"\nsame offer and price in several regions: {'; '.join(folded)}" if folded else ""
    cells = []
    for row in rows:
        line = [
            str(row.rank),
            row.provider,
            row.region,
            row.instance_type,
            row.gpus,
            str(row.nodes),
            "yes" if row.spot else "no",
            _NETWORK_SHORT.get(row.network, row.network),
            _amount(row.hourly),
            _amount(row.per_gpu_hour),
        ]
        if full:
            line += [_amount(row.compute), _amount(row.storage), _amount(row.egress), _amount(row.interruption)]
        cells.append([*(Text(cell) for cell in line), Text(_amount(row.total), style="bold")])
    return _table(
        title,
        columns,
        cells,
        width,
        ("$/GPU-h", "spot", "per node", "network", "nodes"),
        caption=f"USD: $/h for the whole cluster, costs expected over {hours:g} h{note}{regions}",
    )


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
        parts += [_quotes_table(view, width), Text("")]
    parts.extend(_rejections(view, width))
    return _render(parts, width, color)


def _quotes_table(view: ReportView, width: int) -> Table:
    rows = [
        [
            Text(q.provider),
            Text(q.instance_type),
            Text(q.region),
            Text(gpu_label(q.gpu_model, q.gpus_per_node)),
            Text(str(q.nodes)),
            Text(q.purchase),
            Text(_amount(q.hourly_usd)),
            Text(q.how_to_obtain),
        ]
        for q in view.quotes
    ]
    return _table(
        f"Quote only ({len(view.quotes)}): not ranked, cannot be bought by this tool",
        (
            ("provider", "left"),
            ("instance type", "left"),
            ("region", "left"),
            ("per node", "left"),
            ("nodes", "right"),
            ("purchase", "left"),
            ("$/h", "right"),
            ("how to obtain", "left"),
        ),
        rows,
        width,
        ("per node", "nodes", "purchase"),
    )


def _rejections(view: ReportView, width: int) -> list[RenderableType]:
    title = f"Rejected offers ({view.rejected_count})"
    if not view.rejected_count:
        return [Text(f"{title}: none")]
    groups = view.groups if view.explain else view.groups[:REASONS_SHOWN]
    rows = [
        [
            Text(str(group.count)),
            Text(group.stage_label),
            Text(group.field or "-"),
            Text(group.reason),
            Text(examples_text(group)),
        ]
        for group in groups
    ]
    table = _table(
        title,
        (("offers", "right"), ("stage", "left"), ("spec field", "left"), ("reason", "left"), ("examples", "left")),
        rows,
        width,
        ("stage", "examples"),
    )
    parts: list[RenderableType] = [table]
    if view.explain and view.rejected:
        every = _table(
            f"Every rejected offer ({len(view.rejected)})",
            (("provider", "left"), ("region", "left"), ("instance type", "left"), ("reason", "left")),
            [
                [Text(item.provider), Text(item.region), Text(item.instance_type), Text(item.reason)]
                for item in view.rejected
            ],
            width,
        )
        parts += [Text(""), every]
    elif not view.explain:
        rest = view.groups[REASONS_SHOWN:]
        more = (
            f"{counted(len(rest), 'rarer reason')} for {counted(sum(g.count for g in rest), 'more offer')}; "
            if rest
            else ""
        )
        parts.append(Text(f"({more}--explain lists every rejected offer)", style="dim"))
    return parts


REASONS_SHOWN = 12
"""The most frequent rejection reasons shown without --explain (rich tables cost ~2 ms a row)."""


def _price(value: object) -> Text:
    return Text("-" if value is None else usd(money(value)))


def render_catalog_table(offers: Sequence[Offer], as_of: dt.date | str, origin: str, *, width: int) -> str:
    """Every offer as one row, in the order given."""
    title = f"{counted(len(offers), 'offer')}; prices as of {as_of_text(as_of)} from {origin}"
    rows = [
        [
            Text(offer.provider),
            Text(offer.instance_type),
            Text(offer.region),
            Text(gpu_label(offer.gpu_model, offer.gpus)),
            Text(f"{offer.gpu_memory_gib:g} GiB"),
            Text(f"{offer.fabric.value}/{offer.fabric_gbps:g}"),
            _price(offer.price_per_hour_usd),
            _price(offer.spot_price_per_hour_usd),
            Text(f"${offer.egress_usd_per_gb:.3f}"),
            Text(f"{offer.reliability:.3f}"),
        ]
        for offer in offers
    ]
    table = _table(
        title,
        (
            ("provider", "left"),
            ("instance type", "left"),
            ("region", "left"),
            ("GPU x count", "left"),
            ("GPU mem", "right"),
            ("fabric/Gbps", "left"),
            ("on-demand $/h", "right"),
            ("spot $/h", "right"),
            ("egress $/GB", "right"),
            ("reliability", "right"),
        ),
        rows,
        width,
        ("reliability", "egress $/GB", "GPU mem", "fabric/Gbps", "spot $/h"),
    )
    return _render([table], width, color=False)


__all__ = ["fit_columns", "render_catalog_table", "render_table"]
