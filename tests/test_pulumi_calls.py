"""How many ``pulumi`` processes each ``provisioner`` command starts on the pulumi engine (docs/benchmarks.md,
"Pulumi calls per command"): each one is a Go process, and each that decrypts the stack's secrets
derives the passphrase's key first (about a second of CPU). ``lifecycle.pulumi_stack`` keeps them down:
one ``stack export`` per command without ``--show-secrets``, one ``stack output`` without it,
``pulumi version`` only when the CLI on PATH changed, ``config rm-all`` only for keys the stack's
config holds. The stand-in CLI (tests/test_lifecycle_cli.py's FAKE_PULUMI, conftest's ``fake_pulumi``)
logs each call; the provider is the Lambda fake on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import command_support
from provisioner.realize.nodes import node_specs
from provisioner.render import render_cluster
from provisioner.secrets import ClusterSecrets
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    monkeypatch.setenv("FAKE_PULUMI_STACKS", "1")  # the stand-in knows which stacks exist


def _calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _verbs(calls: list[list[str]]) -> list[str]:
    """Each call as its command words (``stack export``), flags and values left out."""
    return [" ".join(word for word in call[:2] if not word.startswith("-") and "=" not in word) for call in calls]


def test_each_command_starts_the_fewest_pulumi_processes_and_none_decrypts(
    tmp_path: Path, fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    spec = tmp_path / "lc.yaml"
    spec.write_text(LAMBDA_SPEC, encoding="utf-8")
    remote = StandInRemote(nodes=[n.name for n in plan.nodes])
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    per_command: dict[str, list[list[str]]] = {}
    with served_fake("lambda", monkeypatch) as (_app, _server):
        # What the stand-in pulumi's up stands for: the stack's NeocloudNodes bought the plan's nodes.
        secrets = ClusterSecrets.generate("lc-lambda")
        specs = node_specs(plan, render_cluster(plan, secrets), ssh_public_key=secrets.ssh_public_key, expires_at=None)
        instant_runtime(remote).provider("lambda").create_nodes(plan.cluster_id, specs)
        for name, argv in [
            ("up", ["up", str(spec), "--json"]),
            ("outputs", ["outputs", "lc-lambda", "--json"]),
            ("up again", ["up", str(spec), "--json"]),
            ("down", ["down", "lc-lambda", "--json"]),
        ]:
            before = len(_calls(fake_pulumi))
            assert main(argv) == 0, capsys.readouterr().err
            per_command[name] = _calls(fake_pulumi)[before:]
    capsys.readouterr()
    update = ["up", "stack output", "stack history"]
    assert {name: _verbs(calls) for name, calls in per_command.items()} == {
        # a new stack: not read (it is empty); no config file in the workspace yet: the keys up does
        # not set are removed, in one call
        "up": ["version", "stack select", "stack init", "config rm-all", "config set-all", *update],
        "outputs": ["stack select", "stack output"],
        # the CLI's version was checked by the first up; the config file holds none of the keys
        "up again": ["stack select", "stack export", "config set-all", *update],
        "down": ["stack select", "stack export", "destroy", "stack history", "stack rm"],
    }
    every = [call for calls in per_command.values() for call in calls]
    assert not [call for call in every if "--show-secrets" in call]
    # one stack per cluster, named in every call about a stack
    assert all("lc-lambda" in call for call in every if call[0] not in ("version",))


def test_the_state_is_read_again_decrypted_only_when_an_input_the_engine_reads_is_a_secret() -> None:
    from provisioner.lifecycle.pulumi_stack import SECRET_SIG, _hides_a_read_input

    secret = {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}
    plain_nodes = {"inputs": {"nodes": [{"name": "n0", "owner": "alice", "run": "r1"}], "user_data": secret}}
    assert not _hides_a_read_input({"resources": [plain_nodes]})  # the user data is a secret: not read
    for key in ("nodes", "tags", "labels"):
        hidden = {"inputs": {key: secret}}
        assert _hides_a_read_input({"resources": [plain_nodes, hidden]}), key
        assert _hides_a_read_input({"pending_operations": [{"type": "creating", "resource": hidden}]}), key
    assert not _hides_a_read_input({})
