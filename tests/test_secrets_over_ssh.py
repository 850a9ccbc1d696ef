"""Secrets travel only over the SSH pass (issue 16, items 3 and 7).

``up`` on the direct engine against each neocloud fake, with a Slurm and a Kubernetes cluster;
then every request body and every response the fake logged (``FakeApp.exchanges``) is searched
for the cluster's munge key, k3s token and SSH private key: as written, and base64-encoded at
each byte alignment (RunPod and Vast.ai ship the boot script base64-encoded, AWS user data is
base64). None may appear. The same run proves the stress landed: the fake launched the planned
nodes with boot data, and the SSH pass carried the secret to every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from provisioner.providers.redact import base64_forms

from provisioner.lifecycle.realize import bring_up, cluster_secrets, tear_down
from provisioner.realize.bootstrap_ssh import SshTarget
from tests.conftest import need_shared
from tests.test_lifecycle_support import (
    FLUENCE_SPEC,
    LAMBDA_SPEC,
    RUNPOD_SPEC,
    StandInRemote,
    instant_runtime,
    plans_for,
    runpod_plan,
    served_fake,
)
from tests.test_render_cloudinit import readable

SPECS = {
    "lambda-slurm": ("lambda", LAMBDA_SPEC, "openapi-1.10.0.json"),
    "lambda-k8s": ("lambda", LAMBDA_SPEC.replace("control_plane: slurm", "control_plane: kubernetes"),
                   "openapi-1.10.0.json"),
    "runpod-slurm": ("runpod", RUNPOD_SPEC, None),
    "fluence-slurm": ("fluence", FLUENCE_SPEC, None),
}


class RecordingRemote(StandInRemote):
    """The stand-in remote, keeping every script the SSH pass ran (by node)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        super().__init__(nodes=nodes)
        self.scripts: dict[str, list[str]] = {}

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        super().bootstrap(target, script, timeout_s=timeout_s)
        self.scripts.setdefault(target.node_name, []).append(script)


def _needles(secret: str) -> list[str]:
    return [secret, *base64_forms(secret)]


def test_the_search_finds_a_secret_in_base64_user_data() -> None:
    """The check can fail: a munge key inside base64-encoded user data, at any offset, is found."""
    import base64

    key = base64.b64encode(b"k" * 64).decode()
    for prefix in ("", "x", "xy"):
        body = base64.b64encode(f"{prefix}#!/bin/sh\necho {key}\n".encode()).decode()
        assert any(needle in body for needle in _needles(key))


@pytest.mark.parametrize("case", sorted(SPECS))
def test_no_secret_reaches_the_provider(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, spec, openapi = SPECS[case]
    if openapi:
        need_shared("provider-apis", name, openapi)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    if "allowed_cidrs" not in spec:
        spec += "access: {allowed_cidrs: [198.51.100.0/24]}\n"
    plan = runpod_plan(tmp_path) if name == "runpod" else plans_for(spec, tmp_path)[0]
    assert plan.option.provider == name
    with served_fake(name, monkeypatch) as (app, _server):
        remote = RecordingRemote([n.name for n in plan.nodes])
        bring_up(plan, instant_runtime(remote))
        secrets = cluster_secrets(plan.cluster_id)
        control = plan.spec.control_plane.value
        shared = (secrets.munge_key_b64 if control == "slurm" else secrets.k3s_token).get_secret_value()
        # The stress landed: every planned node was bought, and the SSH pass gave each the secret.
        assert app.launched == len(plan.nodes) and len(app.exchanges) > len(plan.nodes)
        assert sorted(remote.scripts) == sorted(n.name for n in plan.nodes)
        assert all(any(shared in readable(s) for s in scripts) for scripts in remote.scripts.values())
        tear_down(plan.cluster_id, instant_runtime(StandInRemote()))
        assert app.instance_count() == 0
    needles = [needle for value in secrets.values() for needle in _needles(value)]
    for exchange in app.exchanges:
        for text in exchange.texts():
            assert not any(needle in text for needle in needles), f"a secret crossed {exchange.method} {exchange.path}"
    boot = [b.boot for b in app.bought.values()]
    assert all(not any(needle in text for needle in needles) for text in boot)
