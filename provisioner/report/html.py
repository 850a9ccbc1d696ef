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

from provisioner.plan import Option, PlanResult
from provisioner.report.view import (
    COST_PARTS,
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


def build_chart(options: Sequence[Option]) -> Chart:
    """Stacked horizontal bars, one per option, scaled so the dearest fills BAR_AREA_W."""
    max_total = max((max(option.cost.total, 0.0) for option in options), default=0.0)
    scale = BAR_AREA_W / max_total if max_total > 0 else 0.0
    bars = []
    for index, option in enumerate(options):
        x = float(LABEL_W)
        segments = []
        for part in COST_PARTS:
            width = max(getattr(option.cost, part), 0.0) * scale
            if width <= 0:
                continue
            segments.append(Segment(
                part=part, x=round(x, 2), width=round(width, 2), amount=usd(getattr(option.cost, part)),
                color=SEGMENT_COLORS[part], labelled=width >= MIN_LABELLED_SEGMENT_W,
            ))
            x += width
        bars.append(Bar(
            rank=option.rank,
            y=LEGEND_H + index * ROW_H,
            label=_clip(f"#{option.rank} {option.provider} {option.region} {option.instance_type}"),
            total=usd(option.cost.total),
            width=round(x - LABEL_W, 2),
            segments=tuple(segments),
        ))
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
class Row:
    rank: int
    provider: str
    region: str
    zone: str
    instance_type: str
    gpus: str
    nodes: int
    spot: str
    hourly: str
    compute: str
    storage: str
    egress: str
    interruption: str
    total: str


def _row(option: Option) -> Row:
    cost = option.cost
    return Row(
        rank=option.rank, provider=option.provider, region=option.region, zone=option.zone or "",
        instance_type=option.instance_type, gpus=gpu_label(option.gpu_model, option.gpus_per_node),
        nodes=option.nodes, spot="yes" if option.spot else "no", hourly=usd(option.hourly_usd),
        compute=usd(cost.compute), storage=usd(cost.storage), egress=usd(cost.egress),
        interruption=usd(cost.interruption), total=usd(cost.total),
    )


@functools.cache
def _template() -> jinja2.Template:
    source = resources.files("provisioner.templates").joinpath(TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    return env.from_string(source)


def render_html(result: PlanResult, options: Sequence[Option], *, explain: bool) -> str:
    """The whole page as one string. Raises nothing for a valid PlanResult."""
    rejected = merge_variants(result.rejected)
    return _template().render(
        title=f"Cost comparison: {result.spec.name}",
        request=request_summary(result),
        catalog=catalog_summary(result),
        winner=winner_summary(options[0]) if options else None,
        empty_message=no_options_message(result),
        shown=len(options),
        total_options=len(result.options),
        rows=[_row(option) for option in options],
        best=[_row(option) for option in result.best_per_provider()],
        chart=build_chart(options),
        rejected_count=len(rejected),
        groups=[(g.reason, g.count, examples_text(g)) for g in group_rejections(rejected)],
        all_rejected=sorted_rejections(rejected),
        explain=explain,
    ) + "\n"


__all__ = ["build_chart", "render_html"]
