"""The HTML report: one self-contained page with tables and an inline SVG cost chart.

The page loads nothing: no external CSS, scripts, fonts or images, and a
Content-Security-Policy of ``default-src 'none'`` makes the browser refuse any fetch
that slips in. All text goes through Jinja2 autoescaping. Chart geometry is computed
here (pure arithmetic), so the template only places numbers it is given.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import jinja2

from provisioner.report.facts import COST_PARTS, usd
from provisioner.report.view import ReportView, Row, examples_text

TEMPLATE = "report.html.j2"

# Chart layout in SVG user units (px at 100% zoom).
LABEL_W = 320
BAR_AREA_W = 460
TOTAL_W = 110
ROW_H = 30
BAR_H = 20
LEGEND_H = 34
MIN_LABELLED_SEGMENT_W = 64  # narrower segments get only a tooltip, not a text label

SEGMENT_COLORS = {
    "compute": "#4c78a8",
    "storage": "#f58518",
    "egress": "#54a24b",
    "interruption": "#e45756",
}


@dataclass(frozen=True)
class Segment:
    part: str
    x: float
    width: float
    amount: str
    color: str
    labelled: bool


@dataclass(frozen=True)
class Bar:
    rank: int
    y: float
    label: str
    total: str
    width: float
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    label_w: int
    bar_h: int
    bars: tuple[Bar, ...]
    legend: tuple[tuple[str, str], ...]


def build_chart(rows: Sequence[Row]) -> Chart:
    """Stacked horizontal bars, one per row, scaled so the dearest fills BAR_AREA_W."""
    max_total = max((max(float(row.total), 0.0) for row in rows), default=0.0)
    scale = BAR_AREA_W / max_total if max_total > 0 else 0.0
    bars = []
    for index, row in enumerate(rows):
        x = float(LABEL_W)
        segments = []
        for part in COST_PARTS:
            width = max(float(row.amount(part)), 0.0) * scale  # drawing only: geometry may be float
            if width <= 0:
                continue
            segments.append(
                Segment(
                    part=part,
                    x=round(x, 2),
                    width=round(width, 2),
                    amount=usd(row.amount(part)),
                    color=SEGMENT_COLORS[part],
                    labelled=width >= MIN_LABELLED_SEGMENT_W,
                )
            )
            x += width
        bars.append(
            Bar(
                rank=row.rank,
                y=LEGEND_H + index * ROW_H,
                label=_clip(f"#{row.rank} {row.provider} {row.region} {row.instance_type}"),
                total=usd(row.total),
                width=round(x - LABEL_W, 2),
                segments=tuple(segments),
            )
        )
    return Chart(
        width=LABEL_W + BAR_AREA_W + TOTAL_W,
        height=LEGEND_H + len(bars) * ROW_H + 6,
        label_w=LABEL_W,
        bar_h=BAR_H,
        bars=tuple(bars),
        legend=tuple((part, SEGMENT_COLORS[part]) for part in COST_PARTS),
    )


def _clip(text: str, limit: int = 40) -> str:
    """Keep chart labels inside the label column (the table below has the full text)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(frozen=True)
class HtmlRow:
    rank: int
    provider: str
    region: str
    regions: str
    zone: str
    instance_type: str
    gpus: str
    nodes: int
    spot: str
    network: str
    hourly: str
    per_gpu_hour: str
    compute: str
    storage: str
    egress: str
    interruption: str
    total: str


def _row(row: Row) -> HtmlRow:
    return HtmlRow(
        rank=row.rank,
        provider=row.provider,
        region=row.region,
        regions=", ".join(row.regions) if row.folded else "",
        zone=row.zone,
        instance_type=row.instance_type,
        gpus=row.gpus,
        nodes=row.nodes,
        spot="yes" if row.spot else "no",
        network=row.network,
        hourly=usd(row.hourly),
        per_gpu_hour=usd(row.per_gpu_hour),
        compute=usd(row.compute),
        storage=usd(row.storage),
        egress=usd(row.egress),
        interruption=usd(row.interruption),
        total=usd(row.total),
    )


@functools.cache
def _template() -> jinja2.Template:
    source = resources.files("provisioner.templates").joinpath(TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(source)


def render_html(view: ReportView) -> str:
    """The whole page as one string. Raises nothing for a valid view."""
    return (
        _template().render(
            view=view,
            rows=[_row(row) for row in view.rows],
            best=[_row(row) for row in view.best],
            chart=build_chart(view.rows),
            quotes=[(q, usd(q.hourly_usd)) for q in view.quotes],
            groups=[(g, examples_text(g)) for g in view.groups],
        )
        + "\n"
    )


__all__ = ["build_chart", "render_html"]
