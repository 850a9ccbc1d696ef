"""Issue 28, item 7: a hostile proxy rewrites every answer of each neocloud fake while the commands run.

For each of Lambda, RunPod, Vast.ai and Fluence a cluster is brought up through the proxy (answers
untouched), a colleague's instance is planted beside it, then for each way of spoiling an answer
(tests/hostile_proxy.MODES: deep nesting, 16 MiB + 1, NaN/Infinity, wrong types, control
characters, truncated) ``status``, ``gc --yes``, ``costs --live``, ``watch --once`` and ``down``
run with every answer spoiled. Each must end with its documented exit code and, when it fails, one
line naming the provider; never a traceback or a raw escape; the colleague's instance is never
deleted; and the cluster's record is forgotten only once none of its nodes is left (nothing lost).
Then, with honest answers again, ``down`` removes the cluster, its record, secrets and key.

Before issue 28 the first mode alone gave a RecursionError traceback from every one of these
commands (tests/test_hostile_inputs.py pins that case on its own).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up
from provisioner.plan import Plan
from tests.hostile_proxy import MODES, served_hostile
from tests.providers.contract import load_harness
from tests.test_killed_up import NEOCLOUDS, SPEC_FILES, plan_for
from tests.test_lifecycle_support import API_KEYS, StandInRemote, fast_provider, instant_runtime

LIVE = ("pending", "running")
EXIT_CODES = {  # README's table: 4 a provider failed; watch --once: 1 a node not replaced, 5 a fake's addresses
    "status": {0, 4},
    "gc": {0, 4},
    "costs": {0},
    "watch": {1, 4, 5},
    "down": {0, 4},
}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")


def up(plan: Plan) -> None:
    """``plan`` brought up now (its TTL runs from the wall clock: ``gc`` has no reason to collect it)."""
    runtime = instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes]), now=lambda: dt.datetime.now(dt.UTC))
    bring_up(plan, runtime)


def live_ids(name: str, cluster_id: str, owner: str = "tester") -> set[str]:
    """What the provider lists as live for ``cluster_id`` to ``owner`` (asked through the proxy while it
    is honest; Fluence finds a cluster by a name that holds its owner)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROVISIONER_OWNER", owner)
        return {n.id for n in fast_provider(name).get_nodes(cluster_id) if n.status.value in LIVE}


def one_line_error(text: str, name: str) -> bool:
    lines = [line for line in text.splitlines() if line.startswith("error:")]
    return len(lines) == 1 and lines[0].startswith(f"error: {name}: ")


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_every_command_ends_in_one_line_under_every_hostile_answer(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import need_shared

    need_shared("provider-apis", name, SPEC_FILES[name])
    plan = plan_for(name, tmp_path)
    cid = plan.cluster_id
    with served_hostile(name, monkeypatch) as (app, proxy, _server):
        up(plan)
        monkeypatch.setenv("PROVISIONER_OWNER", "bob")  # a colleague's instance in the same account
        (theirs,) = fast_provider(name).create_nodes("theirs", load_harness(name).node_specs(1, "n"))
        monkeypatch.setenv("PROVISIONER_OWNER", "tester")
        capsys.readouterr()
        seen: list[tuple[str, str, int]] = []
        for mode in sorted(MODES, key=lambda m: m == "control"):  # the one down may finish through: last
            for argv in (
                ["status", cid],
                ["gc", "--provider", name, "--yes"],
                ["costs", "--live", "--provider", name],
                ["watch", cid, "--once"],
                ["down", cid],
            ):
                proxy.mode = mode
                try:
                    code = main(argv)
                finally:
                    proxy.mode = None
                out, err = capsys.readouterr()
                where = (name, mode, argv[0], code, err[-500:])
                seen.append((mode, argv[0], code))
                assert code in EXIT_CODES[argv[0]], where
                assert "Traceback" not in out + err and "\x1b" not in out + err, where
                if code == 4 and argv[0] != "gc":
                    assert one_line_error(err, name), where
                if code == 4 and argv[0] == "gc":
                    assert f"FAILED to list {name}: {name}: " in out, where
                assert theirs.id in live_ids(name, "theirs", "bob"), ("a colleague's instance was deleted", where)
                if state.load_record(cid) is None:
                    assert not live_ids(name, cid), ("the record went while nodes still run", where)
        refused = [s for s in seen if s[0] in ("deep", "huge", "truncated") and s[1] in ("status", "down")]
        assert refused and all(code == 4 for _, _, code in refused), refused
        assert main(["down", cid]) == 0  # what control characters left, or the whole cluster
        assert not live_ids(name, cid) and theirs.id in live_ids(name, "theirs", "bob")
        assert state.load_record(cid) is None and not state.secrets_path(cid).exists()
        assert not state.ssh_dir(cid).exists()
        assert app.validation_errors == []
