"""Both engines keep the same promises on the way up: the same progress events and ``--json`` lines
for the same plan, the failover to the next-ranked option included.

``provisioner up SPEC --json`` runs twice against a fresh Lambda fake: once with ``--engine direct``
and once with ``--engine pulumi``, where a stand-in ``pulumi`` CLI plays the engine: its ``up``
buys the plan's nodes through the adapter as the stack's ``NeocloudNodes`` does (and, on a capacity
refusal, fails printing the adapter's traceback, which is what the dynamic provider's gRPC error
carries and pulumi prints); its ``destroy`` deletes them. SSH is a stand-in on both legs.

The events both engines emit (``SHARED``) must be equal field by field, in order, but for the
engine's own name in the ``engine`` event, the stack's ``outputs`` on the pulumi ``up`` event and
the wall-clock ``time``. Events only one engine has are named (``DIRECT_ONLY``, ``PULUMI_ONLY``):
the direct engine's purchase and SSH pass, which on the pulumi engine happen inside ``pulumi up``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support
from provisioner.lifecycle.pulumi_engine import capacity_in
from provisioner.providers.registry import facts
from tests.conftest import ROOT, need_shared
from tests.test_lifecycle_cli import FAKE_PULUMI
from tests.test_lifecycle_support import StandInRemote, instant_runtime, plans_for, served_fake

SPEC = """\
name: ev-lambda
gpus: {model: [H100], count: 16}
nodes: {count: 2}
control_plane: slurm
providers: {allow: [lambda]}
workload: {hours: 1}
access: {allowed_cidrs: [198.51.100.0/24]}
"""
SHARED = ("engine", "failover", "wait-running", "running", "wait-ready", "up")
DIRECT_ONLY = {"create", "cleanup", "bootstrap", "warning"}
PULUMI_ONLY = {"pulumi", "pulumi-output"}

STAND_IN = '''
def stand_in(args):
    """up: buy the plan's nodes through the adapter (as NeocloudNodes.create); destroy: delete them."""
    import traceback
    config = {{}}
    with open(os.environ["FAKE_PULUMI_LOG"]) as log:
        for line in log:
            call = json.loads(line)
            if call[:2] == ["config", "set-all"]:
                config = dict(w.split("=", 1) for w in call if w.startswith("provisioner:"))
    from provisioner.plan import load_plan
    from provisioner.providers.registry import get_provider
    from pathlib import Path
    plan = load_plan(Path(config["provisioner:plan"]))
    adapter = get_provider(plan.option.provider)
    if args[:1] == ["destroy"]:
        adapter.delete_nodes(plan.cluster_id)
        return
    from provisioner.realize.nodes import node_specs
    from provisioner.render import render_cluster
    from provisioner.secrets import load_secrets
    secrets = load_secrets(Path(config["provisioner:secretsFile"]))
    specs = node_specs(plan, render_cluster(plan, secrets), ssh_public_key=secrets.ssh_public_key, expires_at=None)
    try:
        adapter.create_nodes(plan.cluster_id, specs)
    except Exception:
        sys.stderr.write("error: update failed\\n  pulumi-python:dynamic:Resource (nodes):\\n    error: Exception "
                         "calling application: " + traceback.format_exc())
        sys.exit(255)
'''


def _stand_in_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    text = FAKE_PULUMI.replace(
        'if args[:1] == ["version"]:',
        STAND_IN + 'if args[:1] in (["up"], ["destroy"]):\n    stand_in(args)\nelif args[:1] == ["version"]:',
    )
    script = folder / "pulumi"
    script.write_text(text.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PULUMI_LOG", str(tmp_path / "pulumi.log"))
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    # The stand-in's adapters at 100x the published limits, as served_fake builds the in-process ones.
    monkeypatch.setenv("PYTHONPATH", f"{ROOT / 'tests' / 'fixtures' / 'fast_cli'}:{ROOT}")


def _up(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], refuse_first: bool
) -> tuple[list[dict[str, Any]], int]:
    folder = tmp_path / engine
    folder.mkdir()
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder / "state"))
    spec = folder / "ev-lambda.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plans = plans_for(SPEC, folder)
    remote = StandInRemote(nodes=[n.name for n in plans[0].nodes])
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    if engine == "pulumi":
        _stand_in_pulumi(folder, monkeypatch)
    with served_fake("lambda", monkeypatch) as (app, _server):
        first = plans[0].option  # the best option's type: capacity in its region at the fake, or none
        regions = app.capacity[first.instance_type]  # type: ignore[attr-defined]
        if refuse_first:
            regions.discard(first.region)
        else:
            regions.add(first.region)
        capsys.readouterr()
        assert main(["up", str(spec), "--json", "--engine", engine]) == 0, capsys.readouterr().err
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        bought = app.instance_count()
        assert main(["down", "ev-lambda"]) == 0
        assert app.instance_count() == 0
    return events, bought


def _shared(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "time"} for e in events if e["event"] in SHARED]


@pytest.mark.parametrize("refuse_first", [True], ids=["failover"])  # [False] too: the same, less the failover
def test_both_engines_emit_the_same_events(
    refuse_first: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    direct, direct_bought = _up("direct", tmp_path, monkeypatch, capsys, refuse_first)
    pulumi, pulumi_bought = _up("pulumi", tmp_path, monkeypatch, capsys, refuse_first)
    assert direct_bought == pulumi_bought == 2
    assert {e["event"] for e in direct} - set(SHARED) <= DIRECT_ONLY
    assert {e["event"] for e in pulumi} - set(SHARED) <= PULUMI_ONLY
    ours, theirs = _shared(direct), _shared(pulumi)
    kinds = [e["event"] for e in ours]
    assert kinds == [e["event"] for e in theirs]
    assert kinds == ["engine", *(["failover"] if refuse_first else []), "wait-running", "running", "wait-ready", "up"]
    assert (ours[0]["engine"], theirs[0]["engine"]) == ("direct", "pulumi")
    assert theirs[-1].pop("outputs") == {"headAddress": "198.51.100.7"}  # the stand-in stack's outputs
    for mine, other in zip(ours[1:], theirs[1:], strict=True):
        assert mine == other, f"{mine['event']}: the engines differ"
    if refuse_first:
        failover = ours[1]
        assert failover["attempt"] == 1 and "capacity" in failover["error"].lower()
        assert failover["message"].startswith("try 1 of 3: lambda: ") and "nothing left behind" in failover["message"]
    assert ours[-1]["message"].startswith("cluster ev-lambda is up: ssh ")


def test_a_capacity_error_is_read_from_the_dynamic_providers_traceback() -> None:
    text = (
        "error: update failed\n    error: Exception calling application: Traceback (most recent call last):\n"
        '  File "/x/stacks/neocloud.py", line 167, in create\n'
        "provisioner.errors.CapacityError: lambda: Not enough capacity to fulfill launch request.\n"
    )
    assert capacity_in(text) == ("lambda", "Not enough capacity to fulfill launch request.")
    assert capacity_in("error: update failed: lambda: no capacity for gpu_4x_h100_sxm5") is None  # no traceback
    assert capacity_in("provisioner.errors.QuotaError: lambda: over quota") is None
    # pulumi-aws/gcp report the cloud's own error code (the form assumed: their SDKs' error text).
    aws = (
        "  aws:ec2/instance:Instance (c-0):\n    error: creating EC2 Instance: operation error EC2: RunInstances, "
        "api error InsufficientInstanceCapacity: We currently do not have sufficient p5.48xlarge capacity\n"
    )
    assert capacity_in(aws, "aws", facts()["aws"].capacity_codes) == ("aws", aws.splitlines()[1].strip())
    gcp = "    error: googleapi: Error 503: ZONE_RESOURCE_POOL_EXHAUSTED in us-central1-a, zoneResourcePoolExhausted\n"
    assert capacity_in(gcp, "gcp", facts()["gcp"].capacity_codes)[0] == "gcp"  # type: ignore[index]
    assert capacity_in(aws, "gcp", facts()["gcp"].capacity_codes) is None  # another provider's code
    assert capacity_in("error: VcpuLimitExceeded", "aws", facts()["aws"].capacity_codes) is None  # a quota
