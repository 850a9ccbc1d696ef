"""The engine matrix's create-request comparison through the real Pulumi CLI (issue 25 item 6).

One Lambda node (no control plane, so no SSH pass to the fake's documentation addresses) is bought
twice, each time from a fresh fake: by the direct engine (``bring_up`` with a stand-in for SSH, as in
tests/test_engine_matrix.py), then by the Pulumi engine's ``up`` (``lifecycle.pulumi_engine.up``: the
Automation API driving the CLI ``.ci/build-pulumi`` built, the program run by the language host, the
node created by ``NeocloudNodes`` in the dynamic-provider plugin's process), holding the cluster as
``provisioner up`` does. The fake's create request must be the direct engine's field by field, each
engine's lease mark included (spelled ``<lease>``) and the run mark (``provisioner up`` passes its run
id: the same here); ``pulumi_engine.down`` leaves no instance.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import pulumi_engine, state
from provisioner.secrets import load_or_create_secrets, save_secrets
from tests.pulumi_real import pulumi_engine as real_engine
from tests.test_engine_matrix import EXPIRES, LEASE, Case, _direct, _plan, differing, served


def test_the_real_engine_sends_the_direct_engines_create_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = real_engine(tmp_path)
    for key, value in engine.env.items():  # the CLI on PATH, its own home and backend, this interpreter
        monkeypatch.setenv(key, value)
    plan = _plan("lambda", Case(1, False, True), tmp_path, control_planes=("none",))
    secrets, _ = load_or_create_secrets(state.secrets_path(plan.cluster_id))
    with served("lambda", monkeypatch) as direct:
        direct_lease, run = _direct(direct, plan, EXPIRES)
        expected = direct.creates(direct_lease)
    assert len(expected) == 1 and LEASE in str(expected) and run in str(expected)
    save_secrets(state.secrets_path(plan.cluster_id), secrets)  # down forgot them: both engines use the same
    with served("lambda", monkeypatch) as other, cluster_lease.hold(plan.cluster_id, "up") as mark:
        pulumi_engine.up(plan, backend=engine.backend_url, expires_at=EXPIRES, run_id=run)
        assert other.harness.instances() == 1
        creates = other.creates(mark.token())
        assert pulumi_engine.down(plan.cluster_id, backend=engine.backend_url)
        assert other.harness.instances() == 0
    assert [c[:2] for c in creates] == [c[:2] for c in expected]
    assert differing(expected[0][2], creates[0][2]) == []
