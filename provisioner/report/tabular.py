"""Machine- and doc-friendly reports: JSON, CSV and Markdown.

JSON is a documented contract (docs/report-schema.json, ``report_version`` 2). Money is written
from the exact Decimal as a JSON number literal (``173.04``, never through float): parse it with
``json.loads(text, parse_float=decimal.Decimal)`` to keep it exact. CSV carries the same
unrounded values; Markdown rounds to cents for reading. Each function returns the whole
document as a string ending in a newline and never raises for a valid PlanResult.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from provisioner.offer import Offer
from provisioner.plan import Option, PlanResult, RejectedOffer
from provisioner.report import facts
from provisioner.report.facts import ReportMeta
from provisioner.report.rejections import rejected_total, rejection_groups
from provisioner.report.view import (
    COST_FIELDS,
    OPTION_FIELDS,
    ReportView,
    Row,
    as_of_text,
    examples_text,
)

REPORT_VERSION = 2

# Decimals travel through json.dumps as marked strings, then become bare number literals.
_MARK = "\x00decimal:"
_MARKED = re.compile(r'"\\u0000decimal:(-?[0-9]+(?:\.[0-9]+)?)"')


def _decimal(value: Decimal | None) -> str | None:
    """A Decimal as fixed-point text (no exponent), marked for ``_dumps``."""
    return None if value is None else _MARK + format(value, "f")


def _dumps(document: Any) -> str:
    return _MARKED.sub(r"\1", json.dumps(document, indent=2)) + "\n"


def option_record(option: Option, result: PlanResult) -> dict[str, Any]:
    """One option as the JSON report's object, keys in OPTION_FIELDS order plus ``cost``."""
    values: dict[str, Any] = {
        "rank": option.rank,
        "provider": option.provider,
        "region": option.region,
        "zone": option.zone,
        "instance_type": option.instance_type,
        "gpu_model": option.gpu_model,
        "gpus_per_node": option.gpus_per_node,
        "nodes": option.nodes,
        "spot": option.spot,
        "hourly_usd": _decimal(facts.hourly(option)),
        "usd_per_gpu_hour": _decimal(facts.usd_per_gpu_hour(option)),
        "expected_interruptions": float(option.expected_interruptions),
        "purchase": facts.purchase(option),
        "bootstrap": facts.bootstrap(option),
        "network": facts.network(option),
        "as_of": facts.option_as_of(option, result).isoformat(),
    }
    record = {name: values[name] for name in OPTION_FIELDS}
    record["cost"] = {
        name: _decimal(facts.cost_part(option, name))
        for name in (*COST_FIELDS, "boot_usd")
        if name in COST_FIELDS or getattr(option.cost, name, None) is not None
    }
    return record


def rejected_record(item: RejectedOffer) -> dict[str, Any]:
    record: dict[str, Any] = {
        "provider": item.provider,
        "instance_type": item.instance_type,
        "region": item.region,
        "reason": item.reason,
        "field": item.field,
    }
    stage = getattr(item, "stage", None)
    if stage is not None:
        record["stage"] = int(stage)
    return record


def render_json(result: PlanResult, options: Sequence[Option], *, explain: bool, meta: ReportMeta) -> str:
    """The JSON report (docs/report-schema.json). ``rejected`` lists every rejection only with explain."""
    dates = facts.price_dates(result, options, meta)
    decision = facts.decision(sorted(result.options, key=lambda option: option.rank))
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "spec": result.spec.name,
        "generated_at": meta.generated_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
        if meta.generated_at
        else None,
        "tool_version": meta.tool_version,
        "as_of": as_of_text(result.catalog_as_of),
        "catalog": result.catalog_origin,
        "provider_as_of": {name: date.isoformat() for name, date in sorted(facts.provider_as_of(result).items())},
        "warnings": facts.stale_warnings(dates),
        "assumptions": facts.assumptions(result.spec),
        "feasible_count": facts.feasible_count(result),
        "options": [option_record(option, result) for option in options],
        "decided_by": None
        if decision is None
        else {
            "term": decision.term,
            "margin_usd": _decimal(decision.margin_usd),
            "sentence": decision.sentence,
        },
        "quotes": [
            {
                "provider": q.provider,
                "instance_type": q.instance_type,
                "region": q.region,
                "gpu_model": q.gpu_model,
                "gpus_per_node": q.gpus_per_node,
                "nodes": q.nodes,
                "purchase": q.purchase,
                "hourly_usd": _decimal(q.hourly_usd),
                "how_to_obtain": q.how_to_obtain,
            }
            for q in facts.quotes(result)
        ],
        "rejected_count": rejected_total(result),
        "rejection_groups": [
            {
                "stage": g.stage,
                "stage_name": g.stage_name,
                "field": g.field,
                "reason": g.reason,
                "count": g.count,
                "examples": [rejected_record(item) for item in g.examples],
            }
            for g in rejection_groups(result)
        ],
    }
    if explain:
        document["rejected"] = [rejected_record(item) for item in result.rejected]
    return _dumps(document)


CSV_HEADER = (*OPTION_FIELDS, *(f"cost_{name}" for name in COST_FIELDS), "how_to_obtain")


def render_csv(result: PlanResult, options: Sequence[Option]) -> str:
    """Header plus one row per option, then one per quote-only product that fits (no rank, no
    costs, ``how_to_obtain`` filled); booleans as ``true``/``false``, a missing zone empty, exact money."""
    import csv  # here, not at the top: a JSON report does not need it

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for option in options:
        record = option_record(option, result)
        cost = record.pop("cost")
        row = [_csv_cell(record[name]) for name in OPTION_FIELDS]
        row += [_csv_cell(cost[name]) for name in COST_FIELDS]
        writer.writerow([*row, ""])
    for q in facts.quotes(result):
        record = {
            "provider": q.provider,
            "region": q.region,
            "instance_type": q.instance_type,
            "gpu_model": q.gpu_model,
            "gpus_per_node": q.gpus_per_node,
            "nodes": q.nodes,
            "spot": False,
            "hourly_usd": _decimal(q.hourly_usd),
            "purchase": q.purchase,
        }
        row = [_csv_cell(record.get(name)) for name in OPTION_FIELDS]
        writer.writerow([*row, *("" for _ in COST_FIELDS), q.how_to_obtain or ""])
    return buffer.getvalue()


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).removeprefix(_MARK)


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
    "#",
    "Provider",
    "Region",
    "Instance type",
    "GPUs/node",
    "Nodes",
    "Spot",
    "Network",
    "$/h (cluster)",
    "$/GPU-h",
    "Compute",
    "Storage",
    "Egress",
    "Interruption",
    "Total",
)
_RANKED_RIGHT = {0, 5, 8, 9, 10, 11, 12, 13, 14}


def _ranked_row(row: Row) -> list[object]:
    region = f"{row.region}: {', '.join(row.regions)}" if row.folded else row.region
    return [
        row.rank,
        row.provider,
        region,
        row.instance_type,
        row.gpus,
        row.nodes,
        "yes" if row.spot else "no",
        row.network,
        facts.usd(row.hourly),
        facts.usd(row.per_gpu_hour),
        *(facts.usd(row.amount(part)) for part in COST_FIELDS),
    ]


def render_markdown(view: ReportView) -> str:
    lines = [
        f"# {_md(view.title)}",
        "",
        f"{_md(view.request)}; {_md(view.catalog)}.",
        "",
        f"**Assumptions:** {_md(view.assumptions)}.",
        "",
        f"**Price dates:** {_md(view.price_dates_text or 'none ranked')}; {_md(view.generated)}.",
        "",
    ]
    # One quote each, a blank line between: consecutive "> " lines are one paragraph in Markdown.
    lines += [line for warning in view.warnings for line in (f"> **Warning:** {_md(warning)}", "")]
    if view.rows:
        lines += [f"**Cheapest:** {_md(view.winner)}", ""]
        if view.why:
            lines += [f"**Why #1:** {_md(view.why)}", ""]
        lines += [f"## {view.ranked_title}", ""]
        lines += _md_table(_RANKED_HEADER, [_ranked_row(row) for row in view.rows], _RANKED_RIGHT)
        lines += ["", f"USD: $/h for the whole cluster, costs expected over {view.hours:g} h.", ""]
        lines += ["## Best per provider", ""]
        lines += _md_table(_RANKED_HEADER, [_ranked_row(row) for row in view.best], _RANKED_RIGHT)
    else:
        lines.append(f"**{_md(view.empty_message)}**")
    if view.quotes:
        lines += ["", f"## Quote only ({len(view.quotes)}): not ranked, cannot be bought by this tool", ""]
        lines += _md_table(
            ("Provider", "Instance type", "Region", "GPUs/node", "Nodes", "Purchase", "$/h", "How to obtain"),
            [
                [
                    q.provider,
                    q.instance_type,
                    q.region,
                    f"{q.gpu_model} x{q.gpus_per_node}",
                    q.nodes,
                    q.purchase,
                    facts.usd(q.hourly_usd),
                    q.how_to_obtain,
                ]
                for q in view.quotes
            ],
            {4, 6},
        )
    lines += ["", f"## Rejected offers ({view.rejected_count})", ""]
    if not view.rejected_count:
        lines.append("None.")
    else:
        grouped = [[g.count, g.stage_label, g.field or "-", g.reason, examples_text(g)] for g in view.groups]
        lines += _md_table(("Offers", "Stage", "Spec field", "Reason", "Examples"), grouped, {0})
    if view.explain and view.rejected:
        every = [[r.provider, r.region, r.instance_type, r.field or "-", r.reason] for r in view.rejected]
        lines += ["", "### Every rejected offer", ""]
        lines += _md_table(("Provider", "Region", "Instance type", "Spec field", "Reason"), every, set())
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
    "REPORT_VERSION",
    "option_record",
    "render_catalog_json",
    "render_csv",
    "render_json",
    "render_markdown",
]
