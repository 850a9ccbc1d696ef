"""The ledger and ``provisioner costs``: append-only, whole lines after a kill, grouping, formats, unrecorded."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import ledger, state
from provisioner.lifecycle.costs_report import group, select, unrecorded
from tests.test_render_slurm import make_plan

NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "alice")
    return tmp_path / "state"


def test_entries_append_as_whole_lines_and_a_torn_line_is_skipped() -> None:
    ledger.append({"kind": "removed", "cluster": "a", "at": NOW.isoformat()})
    path = ledger.ledger_path()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path, "ab") as handle:
        handle.write(b'{"kind": "metered", "cluster": "a", "total')  # power lost mid-write
    ledger.append({"kind": "removed", "cluster": "b", "at": NOW.isoformat()})
    assert [e["cluster"] for e in ledger.read()] == ["a", "b"]
    assert path.read_bytes().count(b"\n") == 3  # the torn line stays on a line of its own


def test_a_killed_client_leaves_its_cluster_in_the_ledger_and_gc_does_not_erase_it(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(make_plan(nodes=2, price_per_hour_usd=2.49).dumps(), encoding="utf-8")
    script = (
        "import datetime as dt, os, signal, sys\n"
        "from pathlib import Path\n"
        "from provisioner.lifecycle import state\n"
        "from provisioner.plan import load_plan\n"
        "plan = load_plan(Path(sys.argv[1]))\n"
        "state.save_record(state.ClusterRecord(cluster_id=plan.cluster_id, provider='aws', plan=plan,\n"
        "    created_at=dt.datetime(2026, 11, 26, 11, tzinfo=dt.UTC), node_ids={'llm-pretrain-0': 'i-1'}))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(plan_file)], env=os.environ.copy(), check=False)
    assert done.returncode == -signal.SIGKILL
    state.remove_record("llm-pretrain")  # what gc does once it has deleted the nodes
    assert state.load_record("llm-pretrain") is None
    (row,) = ledger.rows(ledger.read())
    # planned: make_plan's CostBreakdown (compute 1.00); the ledger keeps it after the record is gone
    assert (row.cluster, row.provider, row.owner, row.status, row.planned_cents) == (
        "llm-pretrain",
        "aws",
        "alice",
        "removed",
        100,
    )


def _rows() -> list[ledger.Row]:
    return [
        ledger.Row(
            "c1",
            provider="runpod",
            owner="alice",
            created_at="2026-11-25T12:00:00+00:00",
            planned_cents=10,
            metered_cents=7,
            billed_cents=7,
        ),
        ledger.Row(
            "c2",
            provider="runpod",
            owner="bob",
            created_at="2026-11-20T12:00:00+00:00",
            planned_cents=20,
            metered_cents=None,
        ),
        ledger.Row(
            "c3",
            provider="aws",
            owner="alice",
            created_at="2026-11-26T11:00:00+00:00",
            planned_cents=1,
            metered_cents=2,
            billed_cents=3,
            differences=["EC2 bills 60 s at least"],
        ),
    ]


def test_since_and_grouping_sum_exact_cents() -> None:
    week = select(_rows(), 7 * 86400, NOW)
    day = select(_rows(), 86400, NOW)
    assert [r.cluster for r in week] == ["c1", "c2", "c3"] and [r.cluster for r in day] == ["c1", "c3"]
    by_provider = group(week, "provider")
    assert by_provider == [
        {
            "key": "runpod",
            "cluster": "c1,c2",
            "clusters": 2,
            "planned_usd": "0.30",
            "metered_usd": "0.07",
            "billed_usd": "0.07",
            "status": "-",
            "local": False,
            "notes": "",
        },
        {
            "key": "aws",
            "cluster": "c3",
            "clusters": 1,
            "planned_usd": "0.01",
            "metered_usd": "0.02",
            "billed_usd": "0.03",
            "status": "-",
            "local": False,
            "notes": "EC2 bills 60 s at least",
        },
    ]
    assert [(g["key"], g["planned_usd"]) for g in group(week, "owner")] == [("alice", "0.11"), ("bob", "0.20")]


def test_unrecorded_clusters_are_listed() -> None:
    rows = unrecorded({"c1"}, lambda: [("runpod", "c1"), ("lambda", "stray"), ("lambda", "stray")])
    assert [(r.cluster, r.provider, r.recorded) for r in rows] == [("stray", "lambda", False)]
    assert group(rows, "cluster")[0]["notes"] == "unrecorded"


def test_costs_command_formats(capsys: pytest.CaptureFixture[str]) -> None:
    plan = make_plan(nodes=1, price_per_hour_usd=0.29)
    record = state.ClusterRecord(cluster_id="llm-pretrain", provider="aws", plan=plan, created_at=NOW, status="up")
    state.save_record(record)
    ledger.append({"kind": "metered", "cluster": "llm-pretrain", "at": NOW.isoformat(), "total_cents": 87})
    ledger.append(
        {
            "kind": "billed",
            "cluster": "llm-pretrain",
            "at": NOW.isoformat(),
            "total_cents": 88,
            "source": "aws GetCostAndUsage",
            "differences": [],
        }
    )
    assert main(["costs", "-f", "json", "--by", "provider"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == [
        {
            "key": "aws",
            "cluster": "llm-pretrain",
            "clusters": 1,
            "planned_usd": "1.00",
            "metered_usd": "0.87",
            "billed_usd": "0.88",
            "status": "up",
            "local": False,
            "notes": "",
        }
    ]
    assert main(["costs", "-f", "csv", "--by", "cluster"]) == 0
    (line,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (line["key"], line["metered_usd"], line["billed_usd"]) == ("llm-pretrain", "0.87", "0.88")
    assert main(["costs", "--by", "cluster"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["cluster", "n", "planned", "metered", "billed", "status", "notes"]
    assert table[1].split() == ["llm-pretrain", "1", "$1.00", "$0.87", "$0.88", "up"]
    assert main(["costs"]) == 0  # each run: this record was written before runs had ids
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["run", "cluster", "n", "planned", "metered", "billed", "status", "notes"]
    assert table[1].split() == ["n/a", "llm-pretrain", "1", "$1.00", "$0.87", "$0.88", "up"]
    assert main(["costs", "--since", "soon"]) == 2
    assert "--since" in capsys.readouterr().err


def test_a_hand_edited_ledger_is_read_not_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"kind": "metered", "cluster": "a", "total_cents": "lots"}\n[1, 2]\n'
        '{"kind": "billed", "cluster": "a", "total_cents": 5, "differences": "x"}\n'
        '{"kind": "cluster", "cluster": "a", "planned_cents": {"compute": 1.5}}\nnot json\n'
    )
    (row,) = ledger.rows(ledger.read())
    assert (row.metered_cents, row.billed_cents, row.differences, row.planned_cents) == (None, 5, [], None)
    assert main(["costs"]) == 0
    out, err = capsys.readouterr()
    assert "$0.05" in out  # what could be read is summed, and the lines that could not are said (never silent)
    assert err == (f"note: {path}: skipped 2 unreadable lines (2, 5); the costs above may miss what they held\n")


def test_an_entry_is_on_disk_before_append_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ledger is the record of money spent: an entry must survive a power cut right after append
    # returns, so the file is fsynced (or fdatasynced) after its last write.
    events: list[tuple[str, int]] = []
    real = {name: getattr(os, name) for name in ("write", "fsync", "fdatasync")}

    def spy(name: str) -> Any:
        def call(fd: int, *args: Any) -> Any:
            events.append((name, os.fstat(fd).st_ino))
            return real[name](fd, *args)

        return call

    for name in real:
        monkeypatch.setattr(os, name, spy(name))
    ledger.append({"kind": "removed", "cluster": "a", "at": NOW.isoformat()})
    ledger.append({"kind": "removed", "cluster": "b", "at": NOW.isoformat()})
    for name, function in real.items():
        monkeypatch.setattr(os, name, function)
    inode = os.stat(ledger.ledger_path()).st_ino
    mine = [kind for kind, ino in events if ino == inode]
    assert [e["cluster"] for e in ledger.read()] == ["a", "b"]
    assert mine and mine[-1] in ("fsync", "fdatasync"), mine
    writes = [i for i, kind in enumerate(mine) if kind == "write"]
    syncs = [i for i, kind in enumerate(mine) if kind != "write"]
    assert len(syncs) >= 2 and all(any(s > w for s in syncs) for w in writes)
