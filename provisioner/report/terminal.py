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
from provisioner.plan import Option, PlanResult
from provisioner.report.view import (
    as_of_text,
    catalog_summary,
    examples_text,
    gpu_label,
    group_rejections,
    merge_variants,
    no_options_message,
    request_summary,
    sorted_rejections,
    usd,
    winner_summary,
)


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


def _table(title: str, columns: Sequence[tuple[str, str]]) -> Table:
    # One blank between columns (right padding only) keeps 13 columns inside 120 characters.
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False,
        show_edge=False, expand=False,
    )
    for name, justify in columns:
        # Numbers never wrap; names fold when the terminal is narrow.
        numeric = justify == "right"
        table.add_column(name, justify=justify, overflow="fold", no_wrap=numeric)  # type: ignore[arg-type]
    return table


_BREAKDOWN = ("compute", "storage", "egress", "interr.")
_OPTION_COLUMNS = (
    ("#", "right"), ("provider", "left"), ("region", "left"), ("instance type", "left"),
    ("per node", "left"), ("nodes", "right"), ("spot", "left"), ("$/h", "right"),
    *((name, "right") for name in _BREAKDOWN), ("total", "right"),
)
# Below this width the four breakdown columns are dropped rather than cut off.
FULL_TABLE_MIN_WIDTH = 118


def _amount(amount_usd: float) -> str:
    """USD without the sign: the caption gives the unit."""
    return usd(amount_usd).lstrip("$")


def _options_table(title: str, options: Sequence[Option], hours: float, width: int) -> Table:
    full = width >= FULL_TABLE_MIN_WIDTH
    columns = [c for c in _OPTION_COLUMNS if full or c[0] not in _BREAKDOWN]
    table = _table(title, columns)
    note = "" if full else f" (cost breakdown from {FULL_TABLE_MIN_WIDTH} columns)"
    table.caption = f"USD: $/h for the whole cluster, costs expected over {hours:g} h{note}"
    table.caption_justify = "left"
    for option in options:
        cost = option.cost
        cells = [
            str(option.rank), option.provider, option.region, option.instance_type,
            gpu_label(option.gpu_model, option.gpus_per_node), str(option.nodes),
            "yes" if option.spot else "no", _amount(option.hourly_usd),
        ]
        if full:
            cells += [_amount(cost.compute), _amount(cost.storage), _amount(cost.egress),
                      _amount(cost.interruption)]
        table.add_row(*(Text(cell) for cell in cells), Text(_amount(cost.total), style="bold"))
    return table


def render_table(
    result: PlanResult, options: Sequence[Option], *, explain: bool, color: bool, width: int
) -> str:
    """The full terminal report: header, winner, ranked and per-provider tables, rejections."""
    parts: list[RenderableType] = [
        Text(f"{result.spec.name}: {request_summary(result)}", style="bold"),
        Text(catalog_summary(result), style="dim"),
        Text(""),
    ]
    if options:
        parts.append(Text.assemble(("Cheapest: ", "bold green"), winner_summary(options[0])))
        parts.append(Text(""))
        title = f"Ranked options ({len(options)} of {len(result.options)})"
        hours = result.spec.workload.hours
        parts += [_options_table(title, options, hours, width), Text("")]
        parts += [_options_table("Best per provider", result.best_per_provider(), hours, width), Text("")]
    else:
        parts.append(Text(no_options_message(result), style="bold red"))
        parts.append(Text(""))
    parts.extend(_rejections(result, explain))
    return _render(parts, width, color)


def _rejections(result: PlanResult, explain: bool) -> list[RenderableType]:
    rejected = merge_variants(result.rejected)
    title = f"Rejected offers ({len(rejected)})"
    if not rejected:
        return [Text(f"{title}: none")]
    if explain:
        table = _table(title, (("provider", "left"), ("region", "left"), ("instance type", "left"),
                               ("reason", "left")))
        for item in sorted_rejections(rejected):
            table.add_row(Text(item.provider), Text(item.region), Text(item.instance_type), Text(item.reason))
        return [table]
    table = _table(title, (("offers", "right"), ("reason", "left"), ("examples", "left")))
    groups = group_rejections(rejected)
    for group in groups[:REASONS_SHOWN]:
        table.add_row(Text(str(group.count)), Text(group.reason), Text(examples_text(group)))
    rest = groups[REASONS_SHOWN:]
    more = f"{len(rest)} rarer reasons for {sum(g.count for g in rest)} more offers; " if rest else ""
    return [table, Text(f"({more}--explain lists every rejected offer)", style="dim")]


REASONS_SHOWN = 12
"""The most frequent rejection reasons shown without --explain (rich tables cost ~2 ms a row)."""


def _price(value: float | None) -> Text:
    return Text("-" if value is None else usd(value))


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
