"""Cost after purchase on the fakes: status mid-run, planned vs actual at ``down``, budgets, reconciliation."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import PlanError
from provisioner.lifecycle import ledger, state
from provisioner.lifecycle.realize import bring_up, cluster_nodes, tear_down
from provisioner.lifecycle.spend import budget_expiry, budget_state, cost_so_far
from provisioner.metering import Metered
from tests.conftest import need_shared
from tests.fast_limits import fast_limits
from tests.test_lifecycle_support import (
    LAMBDA_SPEC,
    StandInRemote,
    fast_cli_env,
    instant_runtime,
    plans_for,
    served_fake,
)
from tests.test_render_slurm import make_plan

T0 = dt.datetime(2026, 11, 26, 1, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_budget_stop_becomes_the_expiry_and_refuses_a_budget_below_the_first_period() -> None:
    plan = make_plan(nodes=2, billing_increment_s=1, price_per_hour_usd=1.1)
    later = T0 + dt.timedelta(hours=5)
    assert budget_expiry(plan, T0, later, Decimal("0.3"), "stop") == T0 + dt.timedelta(seconds=490)
    assert budget_expiry(plan, T0, later, Decimal("0.3"), "warn") == later
    assert budget_expiry(plan, T0, None, None, "stop") is None
    hourly = make_plan(nodes=1, billing_increment_s=3600, billing_minimum_s=10800, price_per_hour_usd=0.29)
    with pytest.raises(PlanError, match="does not cover the first billed period"):
        budget_expiry(hourly, T0, None, Decimal("0.5"), "stop")


def test_budget_warnings_at_50_80_100() -> None:
    plan = make_plan(nodes=1)
    record = state.ClusterRecord(
        cluster_id="llm-pretrain",
        provider="aws",
        plan=plan,
        created_at=T0,
        max_cost_usd=Decimal("0.3"),
        on_budget="stop",
    )

    def spent(cents: int) -> Metered:
        return Metered(terms={"compute": cents, "storage": 0, "egress": None, "interruption": 0})

    assert budget_state(record, spent(14)).message is None  # type: ignore[union-attr]
    assert budget_state(record, spent(15)).message == "budget: 50 % reached ($0.15 of $0.30)"  # type: ignore[union-attr]
    assert budget_state(record, spent(24)).level == 80  # type: ignore[union-attr]
    assert budget_state(record, spent(30)).message == (  # type: ignore[union-attr]
        "budget: 100 % reached ($0.30 of $0.30); the cluster is stopped at its budget (on-budget stop)"
    )
    assert budget_state(record.model_copy(update={"max_cost_usd": None}), spent(30)) is None


def test_lambda_status_mid_run_and_planned_vs_actual_at_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[node.name for node in plan.nodes])
    events: list[dict[str, Any]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        runtime = instant_runtime(remote, events)
        app.clock = runtime.now
        record = bring_up(plan, runtime, max_cost_usd=Decimal("20.03"))
        runtime.sleep(1800)  # half an hour on the injected clock
        record, nodes = cluster_nodes(record.cluster_id, runtime)
        now = runtime.now()
        cost = cost_so_far(runtime.provider("lambda"), record, nodes, now)
        price = plan.option.offer.price_per_hour_usd
        assert price is not None
        launched = {when for when, event in app.audit.events if event["action"] == "launched"}
        assert len(launched) == 1  # both nodes in one launch call
        run_s = -(-(now - launched.pop()) // dt.timedelta(seconds=1))
        minutes = -(-run_s // 60)  # Lambda bills per started minute
        expected = (price * 2 * minutes * 60 / 3600).quantize(Decimal("0.01"))
        assert Decimal(cost.so_far.total_cents) / 100 == expected
        # the listing has no launch time; the log has
        assert cost.so_far.sources == ("lambda audit-events, 1.10.0 shape",)
        assert cost.projected.total_cents >= cost.so_far.total_cents
        assert cost.budget is not None and cost.budget.level == 50  # 12.36 of 20.03
        secrets = json.loads(state.secrets_path(record.cluster_id).read_text())

        tear_down(record.cluster_id, runtime)
    written = ledger.ledger_path().read_text()  # canary: the ledger never holds a secret or the API key
    from tests.test_lifecycle_support import API_KEYS

    assert API_KEYS["lambda"] not in written
    values = [value for value in secrets.values() if isinstance(value, str) and len(value) > 8]
    assert values and all(value not in written for value in values)
    (settled,) = [e for e in events if e["event"] == "cost"]
    assert "planned vs actual" in settled["message"] and "compute" in settled["message"]
    assert settled["metered"]["sources"] == ["lambda audit-events, 1.10.0 shape"]  # the terminate events end the spans
    terms = settled["planned_vs_actual"]["terms"]
    assert terms["compute"]["planned_usd"] == str(plan.option.cost.compute)
    assert terms["egress"]["actual_usd"] is None
    (row,) = ledger.rows(ledger.read())
    assert row.status == "removed" and row.metered_cents is not None and row.metered_cents > 0


def _run(app: Any, plan: Any, run_s: float, **runtime_options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Up, ``run_s`` on the injected clock (the fake's too), status, down: (status cost, events)."""
    remote = StandInRemote(nodes=[node.name for node in plan.nodes])
    events: list[dict[str, Any]] = []
    runtime = instant_runtime(remote, events, **runtime_options)
    app.clock = runtime.now  # the fake stamps and bills on the same injected clock
    record = bring_up(plan, runtime)
    runtime.sleep(run_s)
    record, nodes = cluster_nodes(record.cluster_id, runtime)
    cost = cost_so_far(runtime.provider(plan.option.provider), record, nodes, runtime.now())
    tear_down(record.cluster_id, runtime)
    return cost, events


def test_runpod_metered_from_pod_times_and_reconciled_with_its_billing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    from provisioner.testing.fakes.runpod import DEFAULT_GPUS
    from tests.test_lifecycle_support import runpod_plan

    plan = runpod_plan(tmp_path)
    price = plan.option.offer.price_per_hour_usd  # the catalog's $0.44; the fake sells at $0.69 by default
    gpus = [
        {**g, "price": {**g["price"], "secure": float(price)}} if g["id"] == "NVIDIA GeForce RTX 4090" else g
        for g in DEFAULT_GPUS
    ]
    with served_fake("runpod", monkeypatch, gpus=gpus) as (app, _server):
        cost, events = _run(app, plan, 7 * 3600 + 0.3)
    assert cost.so_far.sources == ("provider",)  # the pod's createdAt
    (settled,) = [e for e in events if e["event"] == "cost"]
    billed = settled["billed"]
    assert billed["source"] == "runpod GET /v2/billing/pods" and billed["within_1_percent"] is True
    metered = Decimal(settled["metered"]["total_usd"])
    assert abs(Decimal(billed["total_usd"]) - metered) <= metered / 100
    assert "billed $" in settled["message"] and "within 1 %" in settled["message"]
    (row,) = ledger.rows(ledger.read())
    assert row.billed_cents == int(Decimal(billed["total_usd"]) * 100) and row.billed_source == billed["source"]


def test_runpod_bill_at_another_price_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    from tests.test_lifecycle_support import runpod_plan

    plan = runpod_plan(tmp_path)  # priced at the catalog's $0.44/h; the fake bills its own $0.69/h
    with served_fake("runpod", monkeypatch) as (app, _server):
        _cost, events = _run(app, plan, 3600)
    (settled,) = [e for e in events if e["event"] == "cost"]
    assert settled["billed"]["within_1_percent"] is False
    assert settled["metered"]["total_usd"] == "0.44"  # 3600 s + the bring-up's few seconds at $0.44/h
    notes = settled["billed"]["differences"]
    assert any("the bill implies $0.69" in note and "the plan $0.4400" in note for note in notes), notes


def repriced(plan: Any, usd_per_hour: Decimal) -> Any:
    """``plan`` as a fresh ``catalog refresh`` would price it: the offer at ``usd_per_hour`` per node."""
    offer = plan.option.offer.model_copy(update={"price_per_hour_usd": usd_per_hour})
    option = plan.option.model_copy(update={"offer": offer, "hourly_usd": usd_per_hour * plan.option.nodes})
    return plan.model_copy(update={"option": option})


def test_vastai_metered_from_start_date_and_reconciled_with_its_charges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    from tests.test_lifecycle_endpoint import VAST_SPEC
    from tests.test_lifecycle_support import API_KEYS

    monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")
    plan = next(p for p in plans_for(VAST_SPEC, tmp_path, count=20) if p.option.region == "US")
    with served_fake("vastai", monkeypatch) as (app, _server):
        first_cost, first = _run(app, plan, 600)  # the catalog's price: the charge names the difference
        (instance_price,) = {span.usd_per_hour for span in app.meter.spans.values()}
        app.meter.clear()
        cost, events = _run(app, repriced(plan, instance_price), 5 * 3600 + 7.7)
    assert cost.so_far.sources == ("provider",)  # the contract's start_date
    (settled,) = [e for e in events if e["event"] == "cost"]
    billed = settled["billed"]
    assert billed["source"] == "vastai GET /api/v0/charges/" and billed["within_1_percent"] is True, billed
    assert "Vast.ai rounds each contract's amount to $0.001" in billed["differences"]
    assert settled["planned_vs_actual"]["terms"]["egress"]["actual_usd"] == "0.00"  # Vast bills bandwidth: measured
    assert "egress from the bill" in settled["metered"]["sources"]
    assert first_cost.so_far.total_cents >= 0 and [e["event"] for e in first].count("cost") == 1


def test_fluence_hour_periods_reconciled_and_its_refund_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "fluence")
    from tests.test_lifecycle_support import FLUENCE_SPEC

    plan = next(p for p in plans_for(FLUENCE_SPEC, tmp_path, count=10) if p.option.region == "dulles-usa-1")
    with served_fake("fluence", monkeypatch) as (app, _server):
        _, short = _run(app, plan, 3000)  # under an hour: Fluence refunds the reserve, the catalog keeps 3 h
        (price,) = {span.usd_per_hour for span in app.meter.spans.values()}
        app.meter.clear()
        cost, events = _run(app, repriced(plan, price), 4 * 3600 + 1800)
    assert cost.so_far.sources == ("provider",)  # created_at of the GPU VM
    (settled,) = [e for e in events if e["event"] == "cost"]
    assert settled["metered"]["sources"] == ["provider"]  # an ENDED VM's updated_at ends its span
    billed = settled["billed"]
    assert billed["source"] == "fluence GET /v1/billing/charges/aggregated" and billed["within_1_percent"], billed
    (first,) = [e for e in short if e["event"] == "cost"]
    assert first["metered"]["nodes"][0]["billed_s"] == 10800  # the catalog's 3 h minimum
    assert any("refunds the 2 h reserve" in note for note in first["billed"]["differences"])
    assert first["billed"]["within_1_percent"] is False


def test_aws_metered_from_launch_times_and_reconciled_with_cost_explorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.testing.fakes.aws_ec2 import AWSFake
    from provisioner.testing.fakes.base import serve
    from tests.test_lifecycle_pulumi_blocks import INSTANCE_PLAN

    with serve(AWSFake(api_key="testing")) as running:
        monkeypatch.setenv("PROVISIONER_AWS_API_URL", running.url)
        monkeypatch.setenv("PROVISIONER_AWS_REGIONS", "us-east-1")
        monkeypatch.setenv("PROVISIONER_AWS_IMAGE_ID", "ami-12c6146b")  # an image moto ships
        from provisioner.providers.registry import get_provider

        cost, events = _run(
            running.app,
            INSTANCE_PLAN,
            26 * 3600 + 0.1,  # over midnight: two CE days
            provider_for=fast_limits(get_provider),
        )
        assert running.app.validation_errors == []
    assert cost.so_far.sources == ("provider",)  # LaunchTime
    # 2 x p5.48xlarge at $55.04/h for 26 h and the bring-up's seconds
    assert Decimal(2 * 55.04 * 26).quantize(Decimal("0.01")) <= Decimal(cost.so_far.total_cents) / 100
    (settled,) = [e for e in events if e["event"] == "cost"]
    assert settled["metered"]["sources"] == ["provider"]  # the terminated instances' StateTransitionReason
    billed = settled["billed"]
    assert billed["source"].startswith("aws ce GetCostAndUsage") and billed["within_1_percent"] is True, billed
    # CE buckets by day and the fake rounds each bucket's seconds up: a few cents apart, named by nothing else
    assert abs(Decimal(billed["total_usd"]) - Decimal(settled["metered"]["total_usd"])) <= Decimal("0.10")
    assert any("cost allocation tag" in note for note in billed["differences"])


def test_cli_status_costs_live_and_a_killed_clients_cluster_after_gc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """up --max-cost --on-budget stop makes the budget the expiry; status --json carries the cost; a client
    killed after buying leaves a record gc collects, and the ledger keeps the cluster; costs --live lists a
    cluster found at the provider that the ledger never saw."""
    import json

    from provisioner.cli import main
    from provisioner.lifecycle.gc import collect_garbage

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (_app, _server):
        runtime = instant_runtime(StandInRemote(nodes=[node.name for node in plan.nodes]))
        record = bring_up(plan, runtime, max_cost_usd=Decimal("1.01"), on_budget="stop")
        # the budget lasts a few minutes of the plan's compute: the expiry is the last second it covers
        deadline = budget_expiry(plan, record.created_at, None, Decimal("1.01"), "stop")
        assert record.expires_at == deadline and record.on_budget == "stop"
        assert main(["status", record.cluster_id, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert set(doc["cost"]) == {"so_far", "projected", "planned_end", "budget"}
        assert doc["cost"]["budget"]["max_cost_usd"] == "1.01" and doc["cost"]["budget"]["on_budget"] == "stop"
        assert main(["status", "--json"]) == 0  # the listing asks no provider: the ledger's last metered amount
        (row,) = json.loads(capsys.readouterr().out)
        assert row["metered_usd"] == doc["cost"]["so_far"]["total_usd"]

        # as a killed client leaves it: nodes bought, a record, no down. gc (past the expiry) collects it.
        provider = runtime.provider("lambda")
        after = (deadline or record.created_at) + dt.timedelta(seconds=1)
        report = collect_garbage(adapters={"lambda": provider}, delete=True, now=lambda: after)
        assert report.records_removed == [record.cluster_id] and state.load_record(record.cluster_id) is None
        assert main(["costs", "-f", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert [(r["key"], r["cluster"], r["status"]) for r in rows] == [(record.run_id, record.cluster_id, "removed")]
        assert rows[0]["planned_usd"] == str(plan.option.cost.total)

        from provisioner.testing.fakes.lambda_ import contract_node_specs as node_specs

        provider.create_nodes("stray", node_specs(1, "s"))  # bought elsewhere: no ledger entry here
        assert main(["costs", "--live", "--provider", "lambda", "-f", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert [(r["key"], r["cluster"], r["status"], r["notes"]) for r in rows] == [
            (record.run_id, record.cluster_id, "removed", ""),
            ("n/a", "stray", "at provider", "unrecorded"),
        ]


def test_burst_end_prints_planned_vs_actual_and_on_budget_warn_lets_the_job_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.lifecycle.burst import BurstOptions, run_burst

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plans = plans_for(LAMBDA_SPEC, tmp_path)

    def job() -> None:  # ten minutes on the injected clock, which the burst's watchdog polls advance
        import time

        end = runtime.now() + dt.timedelta(minutes=10)
        while runtime.now() < end:
            time.sleep(0.001)

    remote = StandInRemote(nodes=[n.name for n in plans[0].nodes], healthy=True, job_exit=0, on_job=job)
    events: list[dict[str, Any]] = []
    options = BurstOptions(max_cost_usd=Decimal("0.01"), on_budget="warn", poll_s=60)  # spent in seconds
    with served_fake("lambda", monkeypatch) as (app, _server):
        runtime = instant_runtime(remote, events)
        app.clock = runtime.now
        assert run_burst(plans, ["srun", "hostname"], options, runtime) == 0  # not stopped: warn
    assert not [e for e in events if e["event"] == "watchdog"]
    warned = [e["message"].split(" reached")[0] for e in events if e["event"] == "budget"]
    assert warned == ["budget: 100 %"]  # the first look was already past the cap: one line, not three
    (settled,) = [e for e in events if e["event"] == "cost"]
    assert settled["metered"]["sources"] == ["lambda audit-events, 1.10.0 shape"]
    assert Decimal(settled["planned_vs_actual"]["actual_usd"]) > Decimal("0.01")


def test_burst_watchdog_warns_once_per_level_exactly() -> None:
    from provisioner.lifecycle.burst import Watchdog

    # $3.6/h is $0.001 a second; a $0.3 budget: 50 % at 150 s, 80 % at 240 s, 100 % at 300 s
    dog = Watchdog(T0, hourly_usd=Decimal("3.6"), expires_at=None, max_cost_usd=None, warn_cost_usd=Decimal("0.3"))
    seen = [dog.warning(T0 + dt.timedelta(seconds=s)) for s in (149, 150, 151, 239.999, 240, 299, 300, 900)]
    assert [None if w is None else w.split(" reached")[0] for w in seen] == [
        None,
        "budget: 50 %",
        None,
        None,
        "budget: 80 %",
        None,
        "budget: 100 %",
        None,
    ]
    assert dog.reason(T0 + dt.timedelta(hours=9)) is None  # warn never stops


def test_pulumi_down_prints_planned_vs_actual(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pulumi engine's destroy deletes without listing: down lists the nodes first, bills them after."""
    import json

    from provisioner.cli import main
    from provisioner.lifecycle import pulumi_engine
    from provisioner.testing.fakes.lambda_ import contract_node_specs as node_specs

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (_app, _server):
        from provisioner.providers.registry import get_provider

        adapter = get_provider("lambda")
        adapter.create_nodes(plan.cluster_id, node_specs(2))
        state.save_record(
            state.ClusterRecord(
                cluster_id=plan.cluster_id,
                provider="lambda",
                engine="pulumi",
                plan=plan,
                created_at=dt.datetime.now(dt.UTC),
                status="up",
            )
        )
        # stands in for `pulumi destroy` (the Pulumi CLI is not here): the stack's nodes go
        monkeypatch.setattr(pulumi_engine, "down", lambda cluster_id, **_: adapter.delete_nodes(cluster_id))
        assert main(["down", plan.cluster_id, "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events][-2:] == ["cost", "down"]
    assert set(events[-2]["planned_vs_actual"]["terms"]) == {"compute", "storage", "egress", "interruption"}


def test_fake_billing_routes_answer_in_the_providers_shapes() -> None:
    """Each fake's billing route, asked directly, validates against the provider's spec (strict fakes answer
    599 otherwise) and bills what its injected clock ran."""
    import json

    import httpx

    from provisioner.testing.fakes import make_fake
    from provisioner.testing.fakes.base import FakeTransport

    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    need_shared("provider-apis", "fluence")
    now = [T0]
    runpod = make_fake("runpod", api_key="k")
    runpod.clock = lambda: now[0]
    runpod.meter.start("pod1", "2.49")
    runpod.meter.start("m1", "3.99", cluster="c1")
    now[0] = T0 + dt.timedelta(hours=1, seconds=1)
    with httpx.Client(
        transport=FakeTransport(runpod), base_url="http://runpod.test", headers={"Authorization": "Bearer k"}
    ) as client:
        pods = client.get(
            "/v2/billing/pods",
            params={"bucketSize": "hour", "startTime": "2026-11-26T00:00:00Z", "endTime": "2026-11-26T03:00:00Z"},
        ).json()
        clusters = client.get("/v2/billing/clusters", params={"clusterId": "c1"}).json()
    assert runpod.validation_errors == []
    # per second: 3601 s at $2.49/h = $2.49069..., split 3600 s + 1 s over two hour buckets
    assert [(r["podId"], r["totalAmount"]) for r in pods["records"]] == [("pod1", 2.49), ("pod1", 0.000692)]
    assert clusters["metadata"]["totals"]["totalAmount"] == 3.991108  # 3601 s at $3.99/h, one day bucket
    fluence = make_fake("fluence", api_key="k")
    fluence.clock = lambda: now[0]
    now[0] = T0 + dt.timedelta(minutes=30)
    fluence.meter.start("7c0f1d1e-0000-4000-8000-000000000001", "0.29")
    now[0] = T0 + dt.timedelta(hours=1, seconds=1)
    with httpx.Client(
        transport=FakeTransport(fluence), base_url="http://fluence.test", headers={"X-API-KEY": "k"}
    ) as client:
        rows = client.get(
            "/v1/billing/charges/aggregated", params={"startDate": "2026-11-26", "endDate": "2026-11-26"}
        ).json()
        history = client.get("/v2/billing/get_history").json()
    assert fluence.validation_errors == []
    # started 01:30, now 02:00:01: 31 minutes, yet the 01:00 and 02:00 clock-hour periods, $0.29 each
    assert [(r["totalUsageHours"], r["totalCost"]) for r in rows] == [("2", "0.58")]
    assert history["items"] == []
    need_shared("provider-apis", "vastai", "openapi.yaml")
    vast = make_fake("vastai", api_key="k")
    vast.clock = lambda: now[0]
    vast.meter.start("31000000", "0.38")
    now[0] = T0 + dt.timedelta(hours=3)
    with httpx.Client(
        transport=FakeTransport(vast), base_url="http://vast.test", headers={"Authorization": "Bearer k"}
    ) as client:
        day = json.dumps({"day": {"gte": 1795651200, "lte": 1795737599}})  # 2026-11-26, UTC
        charges = client.get("/api/v0/charges/", params={"select_filters": day}).json()
        invoices = client.get("/api/v1/invoices/", params={"select_filters": json.dumps({"when": {"gte": 0}})}).json()
    assert vast.validation_errors == []
    # started 02:00:01, now 04:00: 7199 s at $0.38/h = $0.759894... -> 0.76 (Vast rounds to 3 decimals)
    assert [(c["source"], c["amount"]) for c in charges["results"]] == [("instance-31000000", 0.76)]
    assert invoices["results"] == []


def test_a_killed_up_leaves_its_cluster_in_the_ledger_after_gc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed CLI's ``up`` is SIGKILLed once it has bought the nodes; ``gc --cluster`` deletes them
    and forgets the record; ``costs`` still lists the cluster with what it planned. The child's adapters
    run at 100x Lambda's published pace (``fast_cli_env``), as ``served_fake`` makes this process's."""
    import signal
    import subprocess
    import sys
    import time

    from provisioner.cli import main
    from provisioner.plan import save_plan

    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    save_plan(plan, tmp_path / "plan.json")
    with served_fake("lambda", monkeypatch) as (app, _server):
        app.boots_nodes = True  # past up's question to the fake (it refuses a plain one before buying)
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "provisioner.cli",
                "up",
                str(tmp_path / "plan.json"),
                "--engine",
                "direct",
                "--json",
            ],
            env=fast_cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(e.get("node_ids") for e in ledger.read()):
                time.sleep(0.05)  # polls a file another process writes: no timing is asserted
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert app.instance_count() == 2 and state.load_record(plan.cluster_id) is not None
        assert main(["gc", "--provider", "lambda", "--cluster", plan.cluster_id, "--yes"]) == 0
        assert app.instance_count() == 0 and state.load_record(plan.cluster_id) is None
    (row,) = ledger.rows(ledger.read())
    assert (row.cluster, row.provider, row.owner, row.status) == (plan.cluster_id, "lambda", "tester", "removed")
    assert row.planned_cents == int(plan.option.cost.total * 100)


def test_aws_capacity_block_is_metered_and_billed_as_its_upfront_fee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.providers.registry import get_provider
    from provisioner.testing.fakes.aws_ec2 import AWSFake
    from provisioner.testing.fakes.base import serve
    from tests.test_lifecycle_pulumi_blocks import BLOCK_PLAN

    with serve(AWSFake(api_key="testing")) as running:
        monkeypatch.setenv("PROVISIONER_AWS_API_URL", running.url)
        monkeypatch.setenv("PROVISIONER_AWS_REGIONS", "us-east-1")
        monkeypatch.setenv("PROVISIONER_AWS_IMAGE_ID", "ami-12c6146b")
        # 10 minutes of a 72 h block
        _cost, events = _run(running.app, BLOCK_PLAN, 600, provider_for=fast_limits(get_provider))
        assert running.app.validation_errors == []
    (settled,) = [e for e in events if e["event"] == "cost"]
    # 2 nodes x $31.464/h x 72 h = $4530.816 -> $4530.82, whatever ran; the bill is the fee, charged when bought
    assert settled["metered"]["total_usd"] == "4530.82"
    assert settled["billed"]["total_usd"] == "4530.82" and settled["billed"]["within_1_percent"] is True
