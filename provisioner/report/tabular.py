"""Machine- and doc-friendly reports: JSON, CSV and Markdown.

JSON and CSV carry every option's numbers unrounded (consumers compare them with the
plan); Markdown rounds to cents for reading. Each function returns the whole document
as a string ending in a newline and never raises for a valid PlanResult.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Sequence
from typing import Any

from provisioner.offer import Offer
from provisioner.plan import Option, PlanResult, RejectedOffer
from provisioner.report.view import (
    COST_FIELDS,
    OPTION_FIELDS,
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


def option_record(option: Option) -> dict[str, Any]:
    """One option as the JSON report's dict, keys in OPTION_FIELDS order plus ``cost``."""
    record: dict[str, Any] = {name: getattr(option, name) for name in OPTION_FIELDS}
    record["cost"] = {name: getattr(option.cost, name) for name in COST_FIELDS}
    return record


def rejected_record(item: RejectedOffer) -> dict[str, str]:
    return {
        "provider": item.provider,
        "instance_type": item.instance_type,
        "region": item.region,
        "reason": item.reason,
    }


def render_json(result: PlanResult, options: Sequence[Option]) -> str:
    document = {
        "spec": result.spec.name,
        "as_of": as_of_text(result.catalog_as_of),
        "catalog": result.catalog_origin,
        "options": [option_record(option) for option in options],
        "rejected": [rejected_record(item) for item in result.rejected],
    }
    return json.dumps(document, indent=2) + "\n"


CSV_HEADER = (*OPTION_FIELDS, *(f"cost_{name}" for name in COST_FIELDS))


def render_csv(options: Sequence[Option]) -> str:
    """Header plus one row per option; booleans as ``true``/``false``, a missing zone empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for option in options:
        record = option_record(option)
        cost = record.pop("cost")
        row = [_csv_cell(record[name]) for name in OPTION_FIELDS]
        row += [_csv_cell(cost[name]) for name in COST_FIELDS]
        writer.writerow(row)
    return buffer.getvalue()


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _md(text: object) -> str:
    """Make text safe inside a GitHub pipe-table cell: no pipes, newlines or raw tags."""
    value = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return " ".join(value.split())


def _md_table(header: Sequence[str], rows: Sequence[Sequence[object]], right: set[int]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows]
    return lines


_RANKED_HEADER = (
    "#", "Provider", "Region", "Instance type", "GPUs/node", "Nodes", "Spot", "$/h (cluster)",
    "Compute", "Storage", "Egress", "Interruption", "Total",
)
_RANKED_RIGHT = {0, 5, 7, 8, 9, 10, 11, 12}


def _ranked_row(option: Option) -> list[object]:
    cost = option.cost
    return [
        option.rank, option.provider, option.region, option.instance_type,
        gpu_label(option.gpu_model, option.gpus_per_node), option.nodes, "yes" if option.spot else "no",
        usd(option.hourly_usd), usd(cost.compute), usd(cost.storage), usd(cost.egress),
        usd(cost.interruption), usd(cost.total),
    ]


def render_markdown(result: PlanResult, options: Sequence[Option], *, explain: bool) -> str:
    lines = [
        f"# Cost comparison: {_md(result.spec.name)}",
        "",
        f"{_md(request_summary(result))}; {_md(catalog_summary(result))}.",
        "",
    ]
    if options:
        lines += [f"**Cheapest:** {_md(winner_summary(options[0]))}", ""]
        lines += [f"## Ranked options ({len(options)} of {len(result.options)})", ""]
        lines += _md_table(_RANKED_HEADER, [_ranked_row(o) for o in options], _RANKED_RIGHT)
        lines += ["", "## Best per provider", ""]
        best = result.best_per_provider()
        lines += _md_table(_RANKED_HEADER, [_ranked_row(o) for o in best], _RANKED_RIGHT)
    else:
        lines.append(f"**{no_options_message(result)}**")
    rejected = merge_variants(result.rejected)
    lines += ["", f"## Rejected offers ({len(rejected)})", ""]
    if not rejected:
        lines.append("None.")
    elif explain:
        every = [[r.provider, r.region, r.instance_type, r.reason] for r in sorted_rejections(rejected)]
        lines += _md_table(("Provider", "Region", "Instance type", "Reason"), every, set())
    else:
        grouped = [[g.reason, g.count, examples_text(g)] for g in group_rejections(rejected)]
        lines += _md_table(("Reason", "Offers", "Examples"), grouped, {1})
    return "\n".join(lines) + "\n"


def render_catalog_json(offers: Sequence[Offer], as_of: dt.date | str, origin: str) -> str:
    document = {
        "as_of": as_of_text(as_of),
        "catalog": origin,
        "offers": [offer.model_dump(mode="json") for offer in offers],
    }
    return json.dumps(document, indent=2) + "\n"


__all__ = [
    "CSV_HEADER",
    "option_record",
    "render_catalog_json",
    "render_csv",
    "render_json",
    "render_markdown",
]
