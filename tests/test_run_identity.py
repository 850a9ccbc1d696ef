"""One identity per bring-up (issue 27 item 1): every ``up`` gets a run id beside its cluster name, and the
record, the ledger, ``status`` and ``costs`` are per run, so using a name again never merges or carries
over money. Ledgers and records written before runs had ids are still read."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support, ledger, state
from provisioner.lifecycle.realize import bring_up, tear_down
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake
from tests.test_render_slurm import make_plan

SPEC = LAMBDA_SPEC.replace("lc-lambda", "tiny-lambda")
RUN_S = (61, 1801, 3 * 3600 + 5)  # three runs of different lengths: money that cannot be confused


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    return tmp_path / "state"


def _lambda_cents(app: Any, node_ids: set[str], price: Decimal) -> int:
    """What Lambda bills the instances ``node_ids`` by the fake's own audit log: each launched ..
    terminated span rounded up to whole minutes, at ``price`` per hour, once rounded to cents."""
    spans: dict[str, list[dt.datetime]] = {}
    for when, event in app.audit.events:
        node_id = event["resource_lrns"][0].rpartition(":")[2]
        if node_id in node_ids:
            spans.setdefault(node_id, []).append(when)
    assert set(spans) == node_ids and all(len(times) == 2 for times in spans.values()), spans
    seconds = sum(math.ceil((end - start).total_seconds() / 60) * 60 for start, end in spans.values())
    return int((price * seconds / 3600 * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def test_three_bring_ups_of_one_name_are_three_runs_in_costs_and_status_carries_nothing_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(SPEC, tmp_path)[0]
    price = plan.option.offer.price_per_hour_usd
    assert price is not None
    runs: list[tuple[str, int]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        runtime = instant_runtime(StandInRemote(nodes=[node.name for node in plan.nodes]))
        app.clock = runtime.now
        monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: runtime)  # the CLI's clock too
        for run_s in RUN_S:
            record = bring_up(plan, runtime)
            assert record.run_id is not None and record.run_id not in [run for run, _ in runs]
            runtime.sleep(run_s)
            assert main(["status", record.cluster_id, "--json"]) == 0  # a metered entry mid-run
            capsys.readouterr()
            tear_down(record.cluster_id, runtime)
            runs.append((record.run_id, _lambda_cents(app, set(record.node_ids.values()), price)))
        assert len({cents for _, cents in runs}) == 3, runs

        # A fourth bring-up: the listing shows no money until this run is metered, never an earlier run's.
        fresh = bring_up(plan, runtime)
        assert main(["status", "--json"]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert (listed["cluster"], listed["run"], listed["metered_usd"]) == ("tiny-lambda", fresh.run_id, None)
        assert main(["status", "tiny-lambda", "--json"]) == 0
        so_far = json.loads(capsys.readouterr().out)["cost"]["so_far"]["total_usd"]
        assert main(["status", "--json"]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert listed["metered_usd"] == so_far and Decimal(so_far) < Decimal(runs[0][1]) / 100
        tear_down(fresh.cluster_id, runtime)

    assert main(["costs", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    shown = [(r["key"], r["cluster"], r["clusters"], r["metered_usd"], r["status"]) for r in rows]
    expected = [(run, "tiny-lambda", 1, f"{Decimal(cents) / 100:.2f}", "removed") for run, cents in runs]
    assert shown[:3] == expected
    assert (shown[3][0], shown[3][1]) == (fresh.run_id, "tiny-lambda") and len(shown) == 4
    planned = str(plan.option.cost.total)
    assert all(r["planned_usd"] == planned for r in rows)  # each run's own plan, never summed into one row

    assert main(["costs", "-f", "json", "--by", "cluster"]) == 0  # grouped by name: the four runs summed
    (by_name,) = json.loads(capsys.readouterr().out)["rows"]
    total_cents = sum(cents for _, cents in runs) + round(Decimal(shown[3][3]) * 100)
    assert (by_name["key"], by_name["clusters"]) == ("tiny-lambda", 4)
    assert Decimal(by_name["metered_usd"]) == Decimal(total_cents) / 100
    assert Decimal(by_name["planned_usd"]) == 4 * plan.option.cost.total

    assert main(["costs"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["run", "cluster", "n"]
    assert [line.split()[:2] for line in table[1:]] == [[run, "tiny-lambda"] for run, _ in [*runs, (fresh.run_id, 0)]]


def test_a_ledger_written_before_runs_had_ids_is_read_one_row_per_bring_up() -> None:
    def entry(kind: str, **fields: Any) -> dict[str, Any]:
        return {"v": 1, "kind": kind, "cluster": "old", "at": "2026-11-20T10:00:00+00:00", **fields}

    lines = [
        entry("cluster", provider="lambda", status="creating", planned_cents={"compute": 100}),
        entry("cluster", provider="lambda", status="up", planned_cents={"compute": 100}),
        entry("metered", total_cents=7),
        entry("removed"),
        entry("cluster", provider="lambda", status="up", planned_cents={"compute": 250}),
        entry("metered", total_cents=19),
        # a newer client's run of the same name, and an entry without an id after it (its run's)
        entry("cluster", provider="lambda", status="up", run="20261121-090000-abcdef", planned_cents={"compute": 5}),
        entry("metered", total_cents=3),
    ]
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = ledger.rows(ledger.read())
    assert [(r.cluster, r.run, r.status, r.planned_cents, r.metered_cents) for r in rows] == [
        ("old", None, "removed", 100, 7),
        ("old", None, "up", 250, 19),
        ("old", "20261121-090000-abcdef", "up", 5, 3),
    ]


def test_a_record_written_before_runs_had_ids_loads_and_keeps_no_id(tmp_path: Path) -> None:
    record = state.ClusterRecord(
        cluster_id="old", provider="aws", plan=make_plan(nodes=1), created_at=dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    )
    document = json.loads(record.model_dump_json())
    del document["run_id"], document["local"]  # as an older client wrote it
    path = state.record_path("old")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    loaded = state.load_record("old")
    assert loaded is not None and (loaded.run_id, loaded.local, loaded.run) == (None, False, "n/a")


def test_run_ids_are_label_safe_and_differ_within_one_second() -> None:
    now = dt.datetime(2026, 11, 28, 18, 48, 3, 999999, tzinfo=dt.UTC)
    ids = {state.new_run_id(now) for _ in range(50)}
    assert len(ids) == 50
    for run in ids:
        assert run.startswith("20261128-184803-") and len(run) == 22
        assert run == run.lower() and set(run) <= set("0123456789abcdef-")
    with pytest.raises(ValueError):
        state.ClusterRecord(
            cluster_id="x1", provider="aws", plan=make_plan(nodes=1), created_at=now, run_id="../../etc"
        )
