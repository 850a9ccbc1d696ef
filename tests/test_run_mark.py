"""The run mark in use (issue 27 item 1): a node of the same cluster name but another run, still alive at
the provider, is not this run's. ``status`` lists it apart, never as this run's node; this run's money
(``status``'s so far, ``down``'s final metering in the ledger) leaves it out; ``gc`` collects it as a
node whose run has no record here; ``costs --live`` lists its run as unrecorded.

Two runs of one name on the Lambda fake (whose listing gives no launch time, so only the mark tells the
runs apart): run B is brought up; a node run A bought under the same name (``worker-9``: run A's plan was
bigger; its record is gone, its ``up`` exited) is still alive.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support, ledger
from provisioner.lifecycle.gc import collect_garbage
from provisioner.lifecycle.realize import bring_up, cluster_secrets, tear_down
from provisioner.lifecycle.state import remove_record, state_dir
from provisioner.providers.base import SupportsLeaseRenewal, owner_id
from provisioner.providers.ownership import LeaseMark, host_slug, place_slug
from provisioner.realize.inputs import RunFacts, realize_input
from tests.conftest import need_shared
from tests.test_gc import rig_for
from tests.test_lifecycle_support import (
    FLUENCE_SPEC,
    LAMBDA_SPEC,
    StandInRemote,
    instant_runtime,
    plans_for,
    served_fake,
)

SPEC = LAMBDA_SPEC.replace("lc-lambda", "two-runs")
RUN_A = "20261123-090000-0a1b2c"
START = dt.datetime(2026, 11, 24, 9, 0, tzinfo=dt.UTC)
GONE_PID = 9_999_999
"""Above any pid_max: the pid of run A's ``up``, which exited."""


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    return tmp_path / "state"


def _billed_cents(app: Any, node_ids: set[str], price: Decimal) -> int:
    """What Lambda bills ``node_ids`` by the fake's own audit log: each launch .. terminate span rounded
    up to whole minutes, at ``price`` per hour, rounded once to cents."""
    spans: dict[str, list[Any]] = {}
    for when, event in app.audit.events:
        node_id = event["resource_lrns"][0].rpartition(":")[2]
        if node_id in node_ids:
            spans.setdefault(node_id, []).append(when)
    assert set(spans) == node_ids and all(len(times) == 2 for times in spans.values()), spans
    seconds = sum(math.ceil((end - start).total_seconds() / 60) * 60 for start, end in spans.values())
    return int((price * seconds / 3600 * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


@dataclass
class TwoRuns:
    """Run B brought up on the Lambda fake, with run A's ``worker-9`` alive beside it."""

    app: Any
    runtime: Any
    adapter: Any
    plan: Any
    record: Any
    old: Any
    lease: LeaseMark
    events: list[dict[str, Any]]

    @property
    def ours(self) -> set[str]:
        return set(self.record.node_ids.values())

    def alive(self) -> set[str]:
        return {n.id for n in self.adapter.get_nodes(self.plan.cluster_id) if n.status.value in ("pending", "running")}


@contextlib.contextmanager
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoRuns]:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(SPEC, tmp_path)[0]
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        runtime = instant_runtime(StandInRemote(nodes=[node.name for node in plan.nodes]), events)
        app.clock = runtime.now
        monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: runtime)
        record = bring_up(plan, runtime)  # run B
        assert record.run_id is not None and record.run_id != RUN_A

        # Run A's node, as its up launched it: its run mark, its lease (this host, this state dir, gone).
        adapter = runtime.provider("lambda")
        lease = LeaseMark(host_slug(), GONE_PID, runtime.now().replace(microsecond=0), place_slug(state_dir()))
        facts = RunFacts(owner_id(), None, lease=lease.token(), run=RUN_A)
        spec = realize_input(plan, cluster_secrets(plan.cluster_id), facts).specs[-1]
        (old,) = adapter.create_nodes(plan.cluster_id, [spec.model_copy(update={"name": "worker-9"})])
        runtime.sleep(1801)  # both bill meanwhile
        events.clear()
        yield TwoRuns(app, runtime, adapter, plan, record, old, lease, events)


def test_an_earlier_runs_node_alive_under_the_same_name_is_not_this_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with two_runs(tmp_path, monkeypatch) as runs:
        plan, record, old, ours = runs.plan, runs.record, runs.old, runs.ours
        price = plan.option.offer.price_per_hour_usd
        assert price is not None
        assert main(["status", plan.cluster_id, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert sorted(node["id"] for node in doc["live"]) == sorted(ours)
        assert [(n["name"], n["id"], n["run"]) for n in doc["other_runs"]] == [("worker-9", old.id, RUN_A)]
        assert {node["id"] for node in doc["cost"]["so_far"]["nodes"]} == ours
        assert main(["status", plan.cluster_id]) == 0
        shown = capsys.readouterr().out
        assert f"  not this run's: worker-9  running  {old.id}  (run {RUN_A}; provisioner gc lists it)" in shown

        report = collect_garbage(adapters={"lambda": runs.adapter}, now=runs.runtime.now)
        assert [(item.node_id, item.run) for item in report.leftovers] == [(old.id, RUN_A)]
        (why,) = [item.why for item in report.leftovers]
        assert why == (
            f"no local record, and its up ({runs.lease.describe()}, this state dir) is gone "
            f"(the node is of run {RUN_A}; the record here is of run {record.run_id})"
        )

        assert main(["costs", "--live", "-f", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert sorted((row["key"], row["cluster"], row["notes"]) for row in rows) == [
            (RUN_A, plan.cluster_id, "unrecorded"),
            (record.run_id, plan.cluster_id, ""),
        ]

        tear_down(plan.cluster_id, runs.runtime)  # run B's nodes go, and run B pays for its own only
        (row,) = [r for r in ledger.rows(ledger.read()) if r.run == record.run_id]
        assert row.metered_cents == _billed_cents(runs.app, ours, price)


def test_down_deletes_this_runs_nodes_and_names_another_runs_with_the_gc_that_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with two_runs(tmp_path, monkeypatch) as runs:
        cid, old = runs.plan.cluster_id, runs.old
        assert runs.alive() == {*runs.ours, old.id}
        assert main(["down", cid]) == 0
        assert runs.alive() == {old.id}  # run A's node is not this run's to delete
        (teardown,) = [e for e in runs.events if e["event"] == "teardown"]
        assert (teardown["message"], teardown["runs"]) == (
            f"deleting 2 node(s) of {cid} on lambda",
            [runs.record.run_id],
        )
        (other,) = [e for e in runs.events if e["event"] == "other-runs"]
        command = f"provisioner gc --provider lambda --cluster {cid} --yes"
        assert other["message"] == (
            f"not deleted: 1 node(s) of {cid} on lambda of another run: worker-9 ({old.id}, run {RUN_A}); "
            f"remove with: {command}"
        )
        assert (other["nodes"], other["command"]) == ([{"name": "worker-9", "id": old.id, "run": RUN_A}], command)
        assert [e["message"] for e in runs.events if e["event"] == "down"] == [
            f"cluster {cid} is down (2 node(s) deleted)"
        ]

        assert main(command.split()[1:]) == 0  # the printed command does remove it
        assert runs.alive() == set()


def test_down_with_no_record_deletes_every_run_of_the_name_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rescue after a lost record: no run is known here, so every node of the name this owner has goes.
    with two_runs(tmp_path, monkeypatch) as runs:
        cid = runs.plan.cluster_id
        remove_record(cid)
        assert main(["down", cid, "--provider", "lambda"]) == 0
        assert runs.alive() == set()
        (teardown,) = [e for e in runs.events if e["event"] == "teardown"]
        both = sorted([RUN_A, runs.record.run_id])
        assert teardown["message"] == (
            f"deleting 3 node(s) of {cid} on lambda: no record here, so every node of the name you own is "
            f"deleted, whatever its run (run {', '.join(both)})"
        )
        assert teardown["runs"] == both
        assert [e for e in runs.events if e["event"] == "other-runs"] == []


@pytest.mark.parametrize("name", ["aws", "gcp", "vastai"])
def test_a_lease_renewal_keeps_the_run_mark_the_create_wrote(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A renewal rewrites the node's marks where they can change (the Vast label whole); the run stays.
    rig = rig_for(name)
    for key, value in rig.harness.env:
        monkeypatch.setenv(key, value)
    token = LeaseMark("build-box-7", 4242, START, "a1b2c3").token()
    (spec,) = rig.harness.node_specs(1, "c")
    rig.provider.create_nodes("c1", [spec.model_copy(update={"lease": token, "run": RUN_A})])
    assert isinstance(rig.provider, SupportsLeaseRenewal)
    assert rig.provider.renew_lease("c1", token, "tester", START + dt.timedelta(minutes=10)) == 1
    (node,) = rig.provider.get_nodes("c1")
    assert (node.run, node.lease, node.renewed_at) == (RUN_A, token, START + dt.timedelta(minutes=10))
    if name == "vastai":
        assert rig.fake.state()["labels"] == [f"c1/c0/owner=tester/lease={token}/renewed=20261124t091000z/run={RUN_A}"]


def test_down_on_fluence_tells_the_runs_apart_by_the_records_ids_and_launch_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fluence has no room for a run mark: a VM an earlier run left under the name (launched an hour before
    # this run's record, not named by it) is not this run's to delete.
    need_shared("provider-apis", "fluence")
    plan = next(p for p in plans_for(FLUENCE_SPEC, tmp_path, count=10) if p.option.region == "dulles-usa-1")
    cid = plan.cluster_id
    events: list[dict[str, Any]] = []
    with served_fake("fluence", monkeypatch) as (app, _server):
        runtime = instant_runtime(StandInRemote(nodes=[node.name for node in plan.nodes]), events)
        app.clock = runtime.now
        monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: runtime)
        adapter = runtime.provider("fluence")
        spec = realize_input(plan, cluster_secrets(cid), RunFacts(owner_id(), None)).specs[0]
        (old,) = adapter.create_nodes(cid, [spec.model_copy(update={"name": "lc-fluence-9"})])
        runtime.sleep(3600)
        record = bring_up(plan, runtime)
        assert old.id not in record.node_ids.values() and old.run is None
        assert main(["down", cid]) == 0
        alive = {n.id for n in adapter.get_nodes(cid) if n.status.value in ("pending", "running")}
        assert alive == {old.id}
        (other,) = [e for e in events if e["event"] == "other-runs"]
        assert other["message"] == (
            f"not deleted: 1 node(s) of {cid} on fluence of another run: lc-fluence-9 ({old.id}, run n/a); "
            f"remove with: provisioner gc --provider fluence --cluster {cid} --yes"
        )


def test_outputs_and_ssh_reach_this_runs_head_not_another_runs_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An instance of run A under the head's own name (listed after this run's): outputs and ssh name
    # this run's head, never the other run's address.
    import copy

    from provisioner.providers.base import RUN_TAG

    with two_runs(tmp_path, monkeypatch) as runs:
        head = runs.plan.head.name
        ours = runs.app.instances[runs.record.node_ids[head]]
        twin = copy.deepcopy(ours)
        twin.update(id="0123456789abcdef0123456789abcdef", ip="198.51.100.250", private_ip="10.9.9.9")
        twin["tags"] = [{**t, "value": RUN_A} if t["key"] == RUN_TAG else t for t in twin["tags"]]
        runs.app.instances[twin["id"]] = twin
        assert main(["outputs", runs.plan.cluster_id, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["nodes"][head] == ours["ip"]
        assert main(["ssh", runs.plan.cluster_id, "--print"]) == 0
        printed = capsys.readouterr().out
        assert ours["ip"] in printed and "198.51.100.250" not in printed
