"""``provisioner up/down --engine pulumi`` of an EC2 Capacity Block plan: the block is bought (or
adopted) through the AWS adapter's own ``reserve`` before ``pulumi up`` and handed to the stack as
``provisioner:capacityReservationId``; ``down`` says the block remains paid, as the direct engine does.

The ``pulumi`` CLI is the logging stand-in of test_lifecycle_cli (the Automation API drives it);
AWS is the AWSFake on 127.0.0.1 over boto3 with dummy keys (tests/conftest.py), every request and
answer checked against botocore's shapes."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import boto3
import pytest

from provisioner.cli import main
from provisioner.lifecycle import pulumi_engine, state
from provisioner.lifecycle.realize import Runtime
from provisioner.plan import Plan, save_plan
from provisioner.providers.aws.provider import AWSProvider
from provisioner.testing.fakes.aws_ec2 import AWSFake
from provisioner.testing.fakes.base import RunningServer, serve
from tests.providers.test_aws_blocks import START, Clock

KEY = "provisioner:capacityReservationId"
BLOCK_END = "2026-11-28T11:30:00Z"  # the fake's block: 72 h from START


def _plans() -> tuple[Plan, Plan]:
    """(the 72 h p5 Capacity Block plan in us-east-1a at the fake's 31.464 USD per node-hour, ranked
    first under pricing.reservations; the same spec's on-demand instance plan)."""
    from provisioner.capabilities import Capability
    from provisioner.catalog import Catalog, ProviderInfo
    from provisioner.offer import Offer
    from provisioner.optimizer import resolve_plan
    from provisioner.spec import PROVIDER_NAMES, ClusterSpec

    hardware = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "vcpus": 192,
        "memory_gib": 2048,
        "local_nvme_gib": 30400,
        "fabric": "efa",
        "fabric_gbps": 3200,
        "max_nodes": 64,
        "interruptions_per_node_hour": 0.0,
        "interruption_basis": "test",
    }
    offers = [
        Offer.model_validate({**hardware, "price_per_hour_usd": "55.04"}),
        Offer.model_validate(
            {
                **hardware,
                "offer_id": "cb-0123456789abcdef0",
                "purchase": "reservation",
                "price_per_hour_usd": "31.464",
                "block_hours": 72,
                "block_start": "2026-11-25T11:30:00Z",
            }
        ),
    ]
    info = ProviderInfo.model_validate({"source": "test", "boot_minutes": 0})
    catalog = Catalog(
        as_of=dt.date(2026, 11, 22), origin="test", providers=dict.fromkeys(PROVIDER_NAMES, info), offers=offers
    )
    spec = ClusterSpec.model_validate(
        {
            "name": "lc-block",
            "gpus": {"count": 16},
            "workload": {"hours": 48},
            "pricing": {"reservations": True},
            "access": {"allowed_cidrs": ["198.51.100.0/24"]},
        }
    )
    result = resolve_plan(spec, catalog, dict.fromkeys(PROVIDER_NAMES, frozenset(Capability)))
    first, second = result.options[:2]
    assert first.offer.block_hours == 72 and not second.offer.block_hours
    return result.to_plan(first.rank), result.to_plan(second.rank)


BLOCK_PLAN, INSTANCE_PLAN = _plans()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    """The AWSFake with blocks active at once (no fake clock), the registry's adapter pointed at it."""
    with serve(AWSFake(api_key="testing")) as running:
        monkeypatch.setenv("PROVISIONER_AWS_API_URL", running.url)
        monkeypatch.setenv("PROVISIONER_AWS_REGIONS", "us-east-1")
        yield running
        assert running.app.validation_errors == []


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _config(calls: list[list[str]]) -> dict[str, str]:
    """The values of the last ``pulumi config set-all`` (its ``--plaintext key=value`` words)."""
    words = [call for call in calls if call[:2] == ["config", "set-all"]][-1]
    return dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))


def _routes(server: RunningServer) -> list[str]:
    return [call.route for call in server.app.calls]


def _saved(target: Plan, tmp_path: Path) -> str:
    path = tmp_path / f"{target.cluster_id}.json"
    save_plan(target, path)
    return str(path)


def test_up_buys_the_block_once_and_hands_its_id_to_the_stack(
    tmp_path: Path, fake_pulumi: Path, aws: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    target = _saved(BLOCK_PLAN, tmp_path)
    assert main(["up", target, "--engine", "pulumi", "--no-wait", "--json"]) == 0
    (bought,) = aws.app.reservations.values()
    assert (bought["kind"], bought["zone"], bought["count"], bought["hours"]) == ("p5.48xlarge", "us-east-1a", 2, 72)
    assert bought["fee"] == Decimal("4530.816") and bought["tags"]["provisioner-cluster"] == "lc-block"
    calls = _calls(fake_pulumi)
    assert _config(calls)[KEY] == bought["id"]
    # bought before the stack was asked to launch into it: the id is set before `pulumi up`
    assert [c[0] for c in calls].index("up") > max(i for i, c in enumerate(calls) if c[:2] == ["config", "set-all"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events if e["event"] in ("reserve", "reserved", "pulumi", "up")] == [
        "reserve",
        "reserved",
        "pulumi",
        "up",
    ]
    assert "RunInstances" not in _routes(aws)  # the stack launches the nodes, not the adapter

    # a second up adopts the block by its tag: nothing more is bought, the stack gets the same id
    assert main(["up", target, "--engine", "pulumi", "--no-wait", "--json"]) == 0
    assert _routes(aws).count("PurchaseCapacityBlock") == 1 and len(aws.app.reservations) == 1
    assert _config(_calls(fake_pulumi))[KEY] == bought["id"]


def test_down_says_the_block_remains_paid_as_the_direct_engine_does(
    tmp_path: Path, fake_pulumi: Path, aws: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["up", _saved(BLOCK_PLAN, tmp_path), "--engine", "pulumi", "--no-wait", "--json"]) == 0
    (bought,) = aws.app.reservations.values()
    capsys.readouterr()
    assert main(["down", "lc-block", "--json"]) == 0  # the record says pulumi
    assert any(c[:1] == ["destroy"] for c in _calls(fake_pulumi))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events][-2:] == ["down", "reservation"]
    # the sentence the direct engine's down prints (the adapter's Block.notice)
    assert events[-1]["message"] == (
        f"EC2 Capacity Block {bought['id']} (2 x p5.48xlarge in us-east-1a, paid upfront, non-refundable) remains "
        f"until {BLOCK_END}: it is already paid and AWS cannot cancel it; its instances are terminated, nothing "
        "more is charged for the block itself"
    )
    assert state.load_record("lc-block") is None


def test_a_plan_that_is_not_a_block_buys_nothing_and_clears_the_key(
    tmp_path: Path, fake_pulumi: Path, aws: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # the workspace's config file of the stack as a block plan's up left it
    kept = pulumi_engine.work_dir() / "Pulumi.lc-block.yaml"
    kept.write_text(json.dumps({"config": {KEY: "cr-0123456789abcdef0", "provisioner:plan": "p"}}), encoding="utf-8")
    assert main(["up", _saved(INSTANCE_PLAN, tmp_path), "--engine", "pulumi", "--no-wait", "--json"]) == 0
    assert aws.app.calls == [] and aws.app.reservations == {}  # not one AWS request
    calls = _calls(fake_pulumi)
    assert KEY not in _config(calls)
    # a stack once of a block plan forgets it (one call for every key this up does not set that the file holds)
    assert [c for c in calls if c[:2] == ["config", "rm-all"]] == [["config", "rm-all", "--stack", "lc-block", KEY]]
    capsys.readouterr()
    assert main(["down", "lc-block", "--json"]) == 0
    assert "reservation" not in [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()]
    # no reservation is asked about; the listings are down's: before the destroy, for planned vs actual,
    # and after it, for a node the stack did not hold (pulumi_engine.down's sweep)
    assert [c.route for c in aws.app.calls] == ["DescribeInstances", "DescribeInstances"]


def test_a_pulumi_failure_after_the_purchase_says_what_was_bought(
    tmp_path: Path,
    fake_pulumi: Path,
    aws: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_PULUMI_UP", "fail")
    assert main(["up", _saved(BLOCK_PLAN, tmp_path), "--engine", "pulumi"]) == 5
    err = capsys.readouterr().err
    (bought,) = aws.app.reservations.values()
    assert "Traceback" not in err
    err = err.splitlines()[-1]  # the error: one line, after the progress lines
    assert err.startswith("error: ") and "pulumi up of lc-block failed: error: update failed" in err
    # the direct engine's words (Block.bought)
    assert (
        f"bought before this failure: EC2 Capacity Block {bought['id']} (2 x p5.48xlarge in us-east-1a, "
        f"$4530.816 paid upfront, non-refundable), ends {BLOCK_END}; it cannot be cancelled and stays paid: "
        "run provisioner up again to launch into it"
    ) in err

    # no record was kept (the stack failed), yet down learns from the kept plan that it was a block
    assert main(["down", "lc-block"]) == 0
    assert f"EC2 Capacity Block {bought['id']}" in capsys.readouterr().err


def test_up_waits_until_the_block_starts_before_pulumi_up(fake_pulumi: Path) -> None:
    clock = Clock(START - dt.timedelta(hours=2))
    with serve(AWSFake(api_key="testing", now=clock.now)) as running:
        provider = AWSProvider(
            boto3.Session(region_name="us-east-1"),
            regions=["us-east-1"],
            endpoint_url=running.url,
            poll_interval_s=1800.0,
            now=clock.now,
            sleep=clock.sleep,
        )
        pulumi_engine.up(BLOCK_PLAN, runtime=Runtime(provider_for=lambda name: provider))
        assert running.app.validation_errors == []
    (bought,) = running.app.reservations.values()
    assert clock.at >= START and clock.slept >= 2 * 3600  # scheduled for 2 h, then active
    assert _config(_calls(fake_pulumi))[KEY] == bought["id"]


def test_a_block_on_offer_only_above_the_plan_is_refused_before_pulumi_runs(
    tmp_path: Path, fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dearer = {("p5.48xlarge", "us-east-1a"): "40.00"}
    with serve(AWSFake(api_key="testing", capacity_blocks=dearer)) as running:
        monkeypatch.setenv("PROVISIONER_AWS_API_URL", running.url)
        assert main(["up", _saved(BLOCK_PLAN, tmp_path), "--engine", "pulumi"]) == 3
        assert running.app.reservations == {}
    assert "nothing was bought: plan again" in capsys.readouterr().err
    assert not any(c[:1] == ["up"] for c in _calls(fake_pulumi))
