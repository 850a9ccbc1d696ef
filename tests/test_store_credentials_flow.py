"""The checkpoint store's credentials reach every node that joins later, on both engines:

- a heal's replacement (lifecycle/heal.py): it rejoins through the SSH pass, which writes them again;
- a moved run (lifecycle/recover.py): the new cluster's nodes get them before the checkpoint is
  restored there (the restore script sources the file);
- the Pulumi engine's ``ClusterTopology`` step, through the real gRPC dynamic provider process: the
  values come from that process's environment (as the Pulumi CLI's, which inherits the user's), never
  from the step's inputs or outputs, so Pulumi's state never holds them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from provisioner.lifecycle.heal import Healer, HealOptions, same_layout
from provisioner.lifecycle.realize import bring_up
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.render.checkpoint_sync import CREDENTIALS_FILE
from provisioner.stacks.topology import ClusterTopologyProvider
from tests.conftest import need_shared
from tests.file_remote import FileRemote, pushed
from tests.test_heal import SchedulerRemote
from tests.test_lifecycle_support import instant_runtime, plans_for, served_fake
from tests.test_recover import SPEC as MOVE_SPEC
from tests.test_recover import Run, make_run, no_lambda_capacity  # noqa: F401  (make_run: a fixture)
from tests.test_stack_grpc import _dict, _struct, dynamic_provider
from tests.test_stack_topology import SLURM_AWS, URN, Cloud, _planned, aws_cloud, aws_fake  # noqa: F401
from tests.test_store_credentials import CREDS, KEY_ID, SECRET, SPEC, STORE_ENV, assert_delivered, needles


def is_credentials(script: str) -> bool:
    return CREDENTIALS_FILE in script and "base64 -d" in script


class Recording(SchedulerRemote):
    """The stand-in head that keeps every script and command, in order, by node."""

    def __init__(self, nodes: list[str]) -> None:
        super().__init__(nodes=nodes, healthy=True)
        self.log: list[tuple[str, str, Any]] = []

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        super().bootstrap(target, script, timeout_s=timeout_s)
        self.log.append((target.node_name, "bootstrap", script))

    def run(self, target: SshTarget, argv: Any, *, timeout_s: float = 60.0) -> Any:
        self.log.append((target.node_name, "run", tuple(argv)))
        return super().run(target, argv, timeout_s=timeout_s)

    def scripts(self, node: str) -> list[str]:
        return [what for name, kind, what in self.log if name == node and kind == "bootstrap"]


def test_a_replacement_gets_them_when_it_rejoins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plans = plans_for(SPEC, tmp_path)
    names = [n.name for n in plans[0].nodes]
    remote = Recording(names)
    with served_fake("lambda", monkeypatch) as (app, _server):
        rt = instant_runtime(remote, [], environ=STORE_ENV)
        record = bring_up(plans[0], rt)
        healer = Healer(rt, record, remote, same_layout(plans[0], plans), HealOptions(retry_s=1.0))
        before = len(remote.scripts(names[1]))
        old = record.node_ids[names[1]]
        app.set_status(old, "preempted")  # type: ignore[attr-defined]
        assert healer.step() == [names[1]]
        assert healer.record.node_ids[names[1]] != old
    rejoined = remote.scripts(names[1])[before:]
    assert sum(map(is_credentials, rejoined)) == 1  # the replacement got them
    assert_delivered(rejoined, tmp_path / "replacement")


def test_a_moved_run_gets_them_before_its_checkpoint_is_restored(
    make_run: Callable[..., Run],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for key, value in STORE_ENV.items():
        monkeypatch.setenv(key, value)
    spec = MOVE_SPEC.replace(
        "checkpoint: {remote: s3://ckpt-bucket/runs/mv, size_gb: 200}",
        CREDS.strip().replace("remote: s3://ckpt-bucket/runs,", "remote: s3://ckpt-bucket/runs/mv, size_gb: 200,"),
    )
    assert "CKPT_SECRET" in spec
    run = make_run(spec=spec)
    log: list[tuple[str, str, Any]] = []
    bootstrap, command = run.remote.bootstrap, run.remote.run

    def recorded_bootstrap(target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        log.append((target.node_name, "bootstrap", script))
        bootstrap(target, script, timeout_s=timeout_s)

    def recorded_run(target: SshTarget, argv: Any, *, timeout_s: float = 60.0) -> Any:
        log.append((target.node_name, "run", tuple(argv)))
        return command(target, argv, timeout_s=timeout_s)

    run.remote.bootstrap = recorded_bootstrap  # type: ignore[method-assign]
    run.remote.run = recorded_run  # type: ignore[method-assign]
    run.rt.sleep(3600)
    no_lambda_capacity(run)
    run.lam.set_status(run.lambda_ids()[1], "preempted")  # type: ignore[attr-defined]
    new = run.mover.step(run.healer)
    assert new.record.cluster_id == "mv-m1" and run.live() == {"lambda": 0, "runpod": 2}
    for node in new.plan.nodes:
        mine = [(kind, what) for name, kind, what in log if name == node.name]
        delivered = next(i for i, (kind, what) in enumerate(mine) if kind == "bootstrap" and is_credentials(what))
        restored = next(i for i, (kind, what) in enumerate(mine) if kind == "run" and "rclone copy" in " ".join(what))
        assert delivered < restored, node.name
        assert_delivered([w for k, w in mine if k == "bootstrap"], tmp_path / "moved" / node.name)
        assert all(KEY_ID not in " ".join(what) for kind, what in mine if kind == "run")  # never on a command line
    said = json.dumps(run.events, default=str)
    assert not any(needle in said for needle in needles())


@pytest.fixture
def creds_grpc(aws_cloud: Cloud, tmp_path: Path) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:  # noqa: F811
    """The dynamic provider process with the store's credentials in its environment (and the fake's URL)."""
    path = os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])
    with dynamic_provider(tmp_path, {**aws_cloud.env, **STORE_ENV, "PYTHONPATH": path}) as stub:
        yield stub


def test_the_pulumi_step_writes_them_from_its_environment_never_from_its_state(
    aws_cloud: Cloud,  # noqa: F811
    creds_grpc: provider_pb2_grpc.ResourceProviderStub,
    tmp_path: Path,
) -> None:
    plan = _planned(SLURM_AWS + CREDS)
    assert [n.name for n in plan.nodes] == [n.name for n in aws_cloud.plan.nodes]
    folder = tmp_path / "pushed"
    folder.mkdir()
    props = {**aws_cloud.props(), "plan_json": plan.dumps()}
    props["__provider"] = serialize_provider(
        ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(folder)))
    )
    checked = creds_grpc.Check(provider_pb2.CheckRequest(urn=URN, olds=_struct({}), news=_struct(props)))
    assert list(checked.failures) == []
    created = creds_grpc.Create(provider_pb2.CreateRequest(urn=URN, properties=checked.inputs))
    outs = _dict(created.properties)
    assert outs["bootstrapped"] == [n.name for n in plan.nodes]
    for node in plan.nodes:
        scripts = pushed(folder, node.name)
        assert [is_credentials(s) for s in scripts] == [False, True, False]  # wait, credentials, bootstrap
        assert_delivered(scripts, tmp_path / "nodes" / node.name)
    stored = json.dumps([_dict(checked.inputs), outs], default=str)  # what Pulumi keeps in its state
    assert "CKPT_SECRET" in stored and not any(needle in stored for needle in needles())
    assert SECRET not in (tmp_path / "provider.log").read_text(errors="replace")


def test_the_pulumi_step_without_the_variables_fails_in_one_line(
    aws_cloud: Cloud,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In process: the step's error names the variable (StackError, the one-line form Pulumi shows)."""
    from provisioner.errors import StackError

    for key in STORE_ENV:
        monkeypatch.delenv(key, raising=False)
    plan = _planned(SLURM_AWS + CREDS)
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(tmp_path)))
    with pytest.raises(StackError, match=r"checkpoint\.credentials_env: CKPT_KEY_ID is not set") as info:
        provider.create({**aws_cloud.props(), "plan_json": plan.dumps()})
    assert "\n" not in str(info.value)
    assert list(tmp_path.glob("*.sh")) == []  # no node was reached
