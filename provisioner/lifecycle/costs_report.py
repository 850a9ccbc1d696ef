"""``provisioner costs``: what clusters planned, metered and were billed, from the ledger.

Reads the local append-only ledger (provisioner.lifecycle.ledger); ``--since`` keeps clusters
created (or last noted) within that long; ``--by`` shows each run (a bring-up: the default) or sums
per cluster name, provider or owner; dry runs (``up --local``) are never summed with spending and
are listed apart, after it; ``-f``
prints a table, JSON or CSV. With ``--live`` it also asks every provider with credentials (as
``gc`` does, read-only) for the tool's clusters there and lists the ones the ledger has no entry
for as ``unrecorded``: bought from another machine, or before the ledger existed.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from provisioner import cliargs
from provisioner.errors import UsageError
from provisioner.money import usd_of_cents, usd_text
from provisioner.termtext import counted, say

if TYPE_CHECKING:  # the parser registers `costs` at every start; the ledger (and metering) load on use
    from provisioner.lifecycle import ledger

GROUPINGS = ("run", "cluster", "provider", "owner")
COST_FORMATS = ("table", "json", "csv")
COLUMNS = ("key", "cluster", "clusters", "planned_usd", "metered_usd", "billed_usd", "status", "local", "notes")
"""``clusters``: how many runs (bring-ups) the line sums; ``cluster``: their cluster names."""


def _when(text: object) -> dt.datetime | None:
    if not text or not isinstance(text, str):  # a hand-edited ledger line may hold a number here
        return None
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def select(rows: Iterable[ledger.Row], since_s: float | None, now: dt.datetime) -> list[ledger.Row]:
    """Rows created or last noted within ``since_s`` seconds of ``now`` (all when None)."""
    if since_s is None:
        return list(rows)
    cut = now - dt.timedelta(seconds=since_s)
    return [r for r in rows if any(w is not None and w >= cut for w in (_when(r.created_at), _when(r.last_at)))]


def _sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _key(row: ledger.Row, by: str, index: int) -> tuple[bool, str]:
    """(dry run, key) of ``row`` under ``by``: a dry run never shares a line with spending, and each
    run is its own line (one written before runs had ids too: ``index`` keeps them apart)."""
    if by == "run":
        return row.local, row.run or f"n/a#{index}"
    return row.local, str(getattr(row, by)) or "-"


def group(rows: Sequence[ledger.Row], by: str) -> list[dict[str, Any]]:
    """One line per ``by`` key: the sums of each amount (None where no run has one), in first-seen
    order, spending first, then dry runs (``local``)."""
    keyed: dict[tuple[bool, str], list[ledger.Row]] = {}
    for index, row in enumerate(rows):
        keyed.setdefault(_key(row, by, index), []).append(row)

    def usd(cents: int | None) -> str | None:
        return None if cents is None else str(usd_of_cents(cents))

    out = []
    for (local, key), members in sorted(keyed.items(), key=lambda item: item[0][0]):  # stable: first-seen order kept
        notes = sorted({d for r in members for d in r.differences} | {"unrecorded" for r in members if not r.recorded})
        out.append(
            {
                "key": key.partition("#")[0] if by == "run" else key,
                "cluster": ",".join(dict.fromkeys(r.cluster for r in members)),
                "clusters": len(members),
                "planned_usd": usd(_sum([r.planned_cents for r in members])),
                "metered_usd": usd(_sum([r.metered_cents for r in members])),
                "billed_usd": usd(_sum([r.billed_cents for r in members])),
                "status": ",".join(sorted({r.status or "-" for r in members})),
                "local": local,
                "notes": "; ".join(notes),
            }
        )
    return out


def unrecorded(
    known: set[str], live: Callable[[], Iterable[tuple[str, ...]]], runs: set[tuple[str, str]] | None = None
) -> list[ledger.Row]:
    """What ``live()`` finds at a provider ((provider, cluster) or (provider, cluster, run mark)) that the
    ledger does not know: a cluster name it has no entry of, or, given ``runs`` (the ledger's (cluster,
    run) pairs), a run of a known name it has none of (an earlier bring-up's node still alive)."""
    from provisioner.lifecycle import ledger

    seen: dict[tuple[str, str], str] = {}
    for found in live():
        provider, cluster, run = found[0], found[1], (found[2] if len(found) > 2 else None)
        if cluster not in known or (run is not None and runs is not None and (cluster, run) not in runs):
            seen.setdefault((cluster, run or ""), provider)
    return [
        ledger.Row(cluster, run=run or None, provider=provider, status="at provider", recorded=False)
        for (cluster, run), provider in sorted(seen.items())
    ]


def _live_clusters(provider: str | None) -> tuple[list[tuple[str, ...]], list[str]]:
    from provisioner.lifecycle.gc import collect_garbage

    report = collect_garbage(provider=provider, delete=False)
    found: list[tuple[str, ...]] = [
        (item.provider, item.cluster_id, item.run) if item.run else (item.provider, item.cluster_id)
        for item in report.leftovers
    ]
    found += [(name, cluster) for name, cluster, _why in report.kept]
    problems = [f"{name}: {why}" for name, why in {**report.skipped, **report.unlisted}.items()]
    return found, problems


def render(lines: list[dict[str, Any]], fmt: str, by: str) -> str:
    if fmt == "json":
        return json.dumps({"by": by, "rows": lines}, indent=2) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(lines)
        return buffer.getvalue()
    if not lines:
        return "no clusters in the ledger\n"
    header = ("run", "cluster", *HEADER) if by == "run" else (by, *HEADER)
    cells = [header] + [(*_first(r, by), *_cells(r)) for r in lines]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def text(row: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"

    spending = [text(row) for row, line in zip(cells[1:], lines, strict=True) if not line["local"]]
    dry = [text(row) for row, line in zip(cells[1:], lines, strict=True) if line["local"]]
    out = [text(header), *spending]
    if dry:  # what a dry run would have cost is no spending: apart, and said so
        out += ["dry runs (up --local: nothing was bought, amounts are what the plan would cost):\n", *dry]
    return "".join(out)


HEADER = ("n", "planned", "metered", "billed", "status", "notes")


def _first(line: dict[str, Any], by: str) -> tuple[str, ...]:
    return (str(line["key"]), line["cluster"]) if by == "run" else (str(line["key"]),)


def _cells(line: dict[str, Any]) -> tuple[str, ...]:
    money = (line["planned_usd"], line["metered_usd"], line["billed_usd"])
    return (
        str(line["clusters"]),
        *(usd_text(v) for v in money),
        line["status"],
        line["notes"],
    )


def costs(
    since: str | None = None,
    by: str = "run",
    fmt: str = "table",
    live: bool = False,
    provider: str | None = None,
    now: Callable[[], dt.datetime] | None = None,
) -> int:
    """What clusters planned, metered and were billed, from the local ledger (with --live: unrecorded ones too)."""
    from provisioner.lifecycle import ledger
    from provisioner.lifecycle.command_support import parse_duration

    if by not in GROUPINGS:
        raise UsageError(f"must be one of {', '.join(GROUPINGS)}", option="--by")
    since_s = parse_duration(since, option="--since") if since else None
    at = (now or (lambda: dt.datetime.now(dt.UTC)))()
    skipped: list[int] = []
    entries = ledger.read(skipped=skipped)
    rows = select(ledger.rows(entries), since_s, at)
    problems: list[str] = []
    if live:
        found, problems = _live_clusters(provider)
        runs = {(str(e["cluster"]), str(e["run"])) for e in entries if e.get("run")}
        rows += unrecorded({e["cluster"] for e in entries}, lambda: found, runs)
    say(render(group(rows, by), fmt, by), end="")
    for problem in problems:
        say(f"not checked for unrecorded clusters: {problem}", err=True)
    if skipped:  # a torn last line (power lost mid-append) or a damaged file: say costs may be missing
        shown = ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else "")
        say(
            f"note: {ledger.ledger_path()}: skipped {counted(len(skipped), 'unreadable line')} ({shown}); "
            "the costs above may miss what they held",
            err=True,
        )
    return 0


def add_command(group_: cliargs.Commands) -> None:
    cmd = cliargs.command(group_, "costs", costs)
    cmd.add_argument("--since", help="Only clusters created or noted within this long (7d, 12h).")
    cmd.add_argument(
        "--by",
        choices=GROUPINGS,
        default="run",
        help="Each run, a bring-up (default), or sums per cluster name, provider or owner.",
    )
    cmd.add_argument("--format", "-f", choices=COST_FORMATS, default="table", dest="fmt", help="table, json or csv.")
    cliargs.flag(
        cmd, "--live", "Also ask the providers (read-only, as gc does) for clusters the ledger lacks.", negatable=False
    )
    cmd.add_argument("--provider", type=cliargs.provider_name, help="With --live: only this provider.")


__all__ = ["add_command", "costs", "group", "render", "select", "unrecorded"]
