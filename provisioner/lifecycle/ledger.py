"""The ledger: an append-only local file of what every cluster brought up from here planned, metered and
was billed, read by ``provisioner costs``.

``state_dir()/ledger.jsonl``, one JSON object per line, never rewritten (mode 0600). Each entry is
appended with one ``write`` on a file opened ``O_APPEND`` and fsynced before the call returns, so
a client killed at any point leaves every earlier entry whole; a torn last line (power lost
mid-write) is skipped by the reader, and the next append starts on a fresh line. Entries:

- ``cluster``: the cluster record as saved (provider, owner, engine, status, planned cents per
  term, created/expires) on every status change: what a killed client leaves behind;
- ``removed``: the record was forgotten (``down``, ``gc``, a failed create that bought nothing);
- ``metered``: cents per term from the provider's node times (provisioner.metering);
- ``billed``: the provider's own billing record for the cluster, with what differs from the catalog.

Every entry names the cluster (its name) and, since runs have ids, the run (``run``: the bring-up's
id, provisioner.lifecycle.state.new_run_id); a dry run's entries say ``local: true``. ``rows`` keys
by run, so a name used again is a new row. Entries written before runs had ids are read too: such
an entry belongs to the name's latest run, and a ``cluster`` entry after that run's ``removed``
begins another (``rows``).

Never a secret: ids, names, amounts and provider words only.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from provisioner.dirs import state_dir
from provisioner.errors import ProvisionerError
from provisioner.metering import Metered, planned_cents
from provisioner.money import usd_of_cents
from provisioner.untrusted import UntrustedJSONError, loads_bounded

if TYPE_CHECKING:
    from provisioner.lifecycle.state import ClusterRecord

LEDGER_VERSION = 1


def ledger_path() -> Path:
    return state_dir() / "ledger.jsonl"


def append(entry: Mapping[str, Any], path: Path | None = None) -> None:
    """Append one entry (one line, one write, fsynced). Raises ProvisionerError when the file cannot be written."""
    path = path or ledger_path()
    line = json.dumps({"v": LEDGER_VERSION, **entry}, sort_keys=True, default=str).encode() + b"\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_size and os.pread(fd, 1, os.fstat(fd).st_size - 1) != b"\n":
                line = b"\n" + line  # a torn last line stays on its own and is skipped on read
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ProvisionerError(f"cannot append to the ledger {path}: {exc.strerror}") from None


MAX_LINE_BYTES = 1024 * 1024
"""Longest ledger line read (a real entry is under 4 KB; a 100-node metered entry about 20 KB). A longer
line is skipped as unreadable without being held in memory."""


def read(path: Path | None = None, skipped: list[int] | None = None) -> list[dict[str, Any]]:
    """Every whole entry, oldest first. Unreadable lines (not bounded JSON, longer than ``MAX_LINE_BYTES``,
    not an entry) are skipped; their numbers (from 1) are added to ``skipped`` when given, so the reader can
    say costs may be missing. The file is opened without following a symbolic link: ProvisionerError for
    a link, or anything but a regular file, where the ledger belongs."""
    path = path or ledger_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        why = (
            "a symbolic link; refused (the ledger is read only as a regular file)"
            if exc.errno == errno.ELOOP
            else exc.strerror
        )
        raise ProvisionerError(f"cannot read the ledger {path}: {why}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ProvisionerError(f"cannot read the ledger {path}: not a regular file")
        entries = []
        for number, line in enumerate(_lines(handle), 1):
            try:
                entry = loads_bounded(line) if line is not None else None
            except UntrustedJSONError:
                entry = None
            if isinstance(entry, dict) and isinstance(entry.get("cluster"), str):
                entries.append(entry)
            elif (line is None or line.strip()) and skipped is not None:
                skipped.append(number)
    return entries


def _lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """The file's lines without their ends; None for a line over ``MAX_LINE_BYTES`` (read past, never kept)."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line.rstrip(b"\r\n")


def _iso(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.UTC).isoformat() if when is not None else None


def note_record(record: ClusterRecord, owner: str, at: dt.datetime) -> None:
    """A ``cluster`` entry for ``record`` as saved now."""
    plan = getattr(record, "plan", None)  # a record built without validation may lack one
    planned = (
        {}
        if plan is None
        else {
            "hourly_usd": str(plan.option.hourly_usd),
            "nodes": len(plan.nodes),
            "instance_type": plan.option.instance_type,
            "region": plan.option.region,
            "planned_cents": planned_cents(plan),
        }
    )
    append(
        {
            "kind": "cluster",
            "at": _iso(at),
            "cluster": record.cluster_id,
            **_run(getattr(record, "run_id", None), getattr(record, "local", False)),
            "provider": record.provider,
            "owner": owner,
            "engine": getattr(record, "engine", "direct"),
            "status": record.status,
            "created_at": _iso(record.created_at),
            "expires_at": _iso(record.expires_at),
            **planned,
            "node_ids": dict(record.node_ids),
            "max_cost_usd": None if getattr(record, "max_cost_usd", None) is None else str(record.max_cost_usd),
        }
    )


def _run(run: str | None, local: bool = False) -> dict[str, Any]:
    """The run fields of an entry: its run id when known, ``local`` for a dry run's."""
    return {**({"run": run} if run else {}), **({"local": True} if local else {})}


def last_cluster_entry(cluster_id: str, path: Path | None = None) -> dict[str, Any] | None:
    """The newest ``cluster`` entry of ``cluster_id`` (None when the ledger has none): what this machine
    last knew of a cluster of that name after ``down`` forgot its record."""
    found = [e for e in read(path) if e.get("kind") == "cluster" and e["cluster"] == cluster_id]
    return found[-1] if found else None


def last_provider(cluster_id: str, path: Path | None = None) -> str | None:
    """The provider of the newest ``cluster`` entry of ``cluster_id`` (None when the ledger has none):
    where a cluster brought up from here lived after ``down`` forgot its record."""
    entry = last_cluster_entry(cluster_id, path)
    provider = entry.get("provider") if entry is not None else None
    return provider if isinstance(provider, str) else None


def last_was_local(cluster_id: str, path: Path | None = None) -> bool:
    """Whether the newest bring-up of ``cluster_id`` from here was a dry run (``up --local``)."""
    entry = last_cluster_entry(cluster_id, path)
    return entry is not None and entry.get("local") is True


def note_removed(cluster_id: str, at: dt.datetime, *, run: str | None = None, local: bool = False) -> None:
    append({"kind": "removed", "at": _iso(at), "cluster": cluster_id, **_run(run, local)})


def note_metered(
    cluster_id: str, metered: Metered, at: dt.datetime, *, final: bool, run: str | None = None, local: bool = False
) -> None:
    append(
        {
            "kind": "metered",
            "at": _iso(at),
            "cluster": cluster_id,
            **_run(run, local),
            "final": final,
            "terms_cents": metered.terms,
            "total_cents": metered.total_cents,
            "rule": metered.rule,
            "sources": list(metered.sources),
            "nodes": [
                {"id": n.node_id, "name": n.name, "term": n.term, "run_s": n.run_s, "billed_s": n.billed_s}
                for n in metered.nodes
            ],
        }
    )


def note_billed(
    cluster_id: str,
    billed_cents: int,
    source: str,
    differences: Iterable[str],
    at: dt.datetime,
    *,
    run: str | None = None,
) -> None:
    append(
        {
            "kind": "billed",
            "at": _iso(at),
            "cluster": cluster_id,
            **_run(run),
            "total_cents": billed_cents,
            "source": source,
            "differences": list(differences),
        }
    )


@dataclass
class Row:
    """One bring-up (run) of a cluster as the ledger knows it: the latest of each kind of entry.
    ``cluster`` is the name; ``run`` the run's id (None: written before runs had ids)."""

    cluster: str
    run: str | None = None
    local: bool = False
    provider: str = ""
    owner: str = ""
    status: str = ""
    created_at: str | None = None
    last_at: str | None = None
    planned_cents: int | None = None
    metered_cents: int | None = None
    billed_cents: int | None = None
    billed_source: str | None = None
    differences: list[str] = field(default_factory=list)
    recorded: bool = True

    def as_json(self) -> dict[str, Any]:
        def usd(cents: int | None) -> str | None:
            return None if cents is None else str(usd_of_cents(cents))

        return {
            "cluster": self.cluster,
            "run": self.run,
            "local": self.local,
            "provider": self.provider,
            "owner": self.owner,
            "status": self.status,
            "created_at": self.created_at,
            "last_at": self.last_at,
            "planned_usd": usd(self.planned_cents),
            "metered_usd": usd(self.metered_cents),
            "billed_usd": usd(self.billed_cents),
            "billed_source": self.billed_source,
            "differences": self.differences,
            "recorded": self.recorded,
        }


def _cents(value: object) -> int | None:
    """A whole number of cents from an entry; None for anything else (a hand-edited line is not fatal)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _row_of(entry: Mapping[str, Any], found: dict[tuple[str, str | int], Row], latest: dict[str, Row]) -> Row:
    """The row ``entry`` belongs to: its run's; for an entry without a run id (written before runs had
    ids), the name's latest row, or a new one when there is none or a ``cluster`` entry follows the
    latest row's ``removed`` (a bring-up again under the name)."""
    name = entry["cluster"]
    run = entry.get("run")
    if isinstance(run, str) and run:
        row = found.get((name, run))
        if row is None:
            row = found[(name, run)] = Row(name, run=run)
    else:
        row_or_none = latest.get(name)
        if row_or_none is None or (entry.get("kind") == "cluster" and row_or_none.status == "removed"):
            row_or_none = found[(name, len(found))] = Row(name)
        row = row_or_none
    latest[name] = row
    if entry.get("local") is True:
        row.local = True
    return row


def rows(entries: Iterable[Mapping[str, Any]]) -> list[Row]:
    """One row per run of a cluster, in the order each first appears. Values of the wrong type are skipped."""
    found: dict[tuple[str, str | int], Row] = {}
    latest: dict[str, Row] = {}
    for entry in entries:
        row = _row_of(entry, found, latest)
        kind, at = entry.get("kind"), entry.get("at")
        row.last_at = at if isinstance(at, str) else row.last_at
        if kind == "cluster":
            row.provider, row.owner = str(entry.get("provider", "")), str(entry.get("owner", ""))
            created = entry.get("created_at")
            row.status, row.created_at = str(entry.get("status", "")), created if isinstance(created, str) else None
            planned = entry.get("planned_cents")
            if isinstance(planned, dict) and all(_cents(v) is not None for v in planned.values()):
                row.planned_cents = sum(planned.values())
        elif kind == "removed":
            row.status = "removed"
        elif kind == "metered" and _cents(entry.get("total_cents")) is not None:
            row.metered_cents = entry["total_cents"]
        elif kind == "billed" and _cents(entry.get("total_cents")) is not None:
            row.billed_cents, row.billed_source = entry["total_cents"], str(entry.get("source", ""))
            differences = entry.get("differences")
            row.differences = [str(d) for d in differences] if isinstance(differences, list) else []
    return list(found.values())


__all__ = [
    "Row",
    "append",
    "last_cluster_entry",
    "last_provider",
    "last_was_local",
    "ledger_path",
    "note_billed",
    "note_metered",
    "note_record",
    "note_removed",
    "read",
    "rows",
]
