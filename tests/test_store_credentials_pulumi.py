"""The checkpoint store's credentials on the real Pulumi engine, through the installed CLI: ``up`` of a
Lambda plan that names them, on a machine of its own (``tests.pulumi_lab.Machine``: state dir,
PULUMI_HOME and file backend in the test's tmp dir). The stack's SSH pass (``ClusterTopology``, in
the engine's dynamic-provider process) runs the credentials script on every node before its
bootstrap, and no byte of the values is anywhere in that machine's files afterwards: not in the
stack's state or its history, the record, the ledger, the CLI's output or errors. ``down`` ends it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.plan import save_plan
from tests.pulumi_lab import Machine, engine_dir
from tests.test_lifecycle_support import LAMBDA_SPEC, plans_for, served_fake
from tests.test_store_credentials import CREDS, STORE_ENV, needles

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def files(folder: Path) -> dict[str, str]:
    return {str(p): p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file()}


def test_the_real_engine_delivers_them_and_keeps_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    engine = engine_dir()
    plan = plans_for(LAMBDA_SPEC + CREDS, tmp_path)[0]
    plan_file = tmp_path / "plan.json"
    save_plan(plan, plan_file)
    names = [node.name for node in plan.nodes]
    with served_fake("lambda", monkeypatch) as (app, server):
        user = Machine(
            folder=tmp_path / "alice",
            bin_dir=engine,
            fake_env={
                "PROVISIONER_LAMBDA_API_URL": server.url,
                "PROVISIONER_LAMBDA_API_KEY": os.environ["PROVISIONER_LAMBDA_API_KEY"],
                **STORE_ENV,
            },
            nodes=names,
        )
        try:
            up = user.cli("up", str(plan_file), "--json", "--engine", "pulumi")
            assert up.code == 0, up.err[-4000:]
            assert app.instance_count() == len(names)
            scripts = [note for note in user.ssh_notes() if "bootstrap" in note]
            for name in names:  # wait for cloud-init, the credentials, the bootstrap
                assert len([note for note in scripts if note["node"] == name]) == 3, scripts
            kept = files(user.folder)  # the stack's state and history while it lives
            down = user.cli("down", plan.cluster_id, "--json")
            assert down.code == 0, down.err[-4000:]
            kept |= {f"after down: {k}": v for k, v in files(user.folder).items()}
        finally:
            user.close()
    assert any("checkpoint" in text and "CKPT_SECRET" in text for text in kept.values())  # the names are there
    for where, text in {**kept, "up stdout": up.out, "up stderr": up.err}.items():
        assert not any(needle in text for needle in needles()), f"a store credential is in {where}"
