"""A real ``pulumi up`` / ``pulumi destroy`` of stacks/ against the RunPod fake, where the engine exists.

The Pulumi engine (the ``pulumi`` CLI) cannot be installed on the machine this project is
developed on (no package in PyPI, npm or Debian ships the binary; see docs/stacks.md), so
this test runs only where ``pulumi`` is on PATH and skips otherwise. The skip does not go
through ``need_tool``: the engine is not one of the system tools CI installs, so
``REQUIRE_SYSTEM_TOOLS=1`` does not turn it into a failure.

Where it runs it is the whole path: the engine starts the Python program, the program plans
nothing (a saved plan), registers ``GpuCluster``, the engine starts the dynamic provider,
which buys the nodes from the fake through the RunPod adapter; ``destroy`` removes them.
Only the neocloud path can run offline: the AWS/GCP provider plugins are downloads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.plan import save_plan
from tests.test_stack_cluster import example, plan_on
from tests.test_stack_neocloud import Rig, _rig

STACKS = Path(__file__).resolve().parents[1] / "stacks"
PULUMI = shutil.which("pulumi")

pytestmark = pytest.mark.skipif(
    PULUMI is None,
    reason="needs the Pulumi engine (`pulumi` CLI) on PATH; it cannot be installed here "
    "(not a system tool: REQUIRE_SYSTEM_TOOLS does not require it)",
)


@pytest.fixture
def runpod(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from _rig("runpod", monkeypatch)


def _pulumi(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(PULUMI), *args, "--non-interactive", "--cwd", str(STACKS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"pulumi {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def test_pulumi_up_and_destroy_on_the_runpod_fake(runpod: Rig, tmp_path: Path) -> None:
    # One node without a control plane: the stack has no SSH pass step (realize.sshpass.ssh_pass_nodes),
    # which would SSH to the fake's documentation addresses (tests/test_engine_matrix.py drives the step).
    spec = example("burst-4090-marketplace.yaml")
    plan = plan_on(
        spec.model_copy(
            update={
                "nodes": spec.nodes.model_copy(update={"count": 1}),
                "gpus": spec.gpus.model_copy(update={"count": 1}),
            }
        ),
        "runpod",
    )
    assert len(plan.nodes) == 1 and plan.spec.control_plane.value == "none"
    plan_path = tmp_path / "plan.json"
    save_plan(plan, plan_path)
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "test",
        "PULUMI_HOME": str(tmp_path / "home"),
    }
    (tmp_path / "state").mkdir()
    stack = "stacktest"
    _pulumi(env, "stack", "init", stack)
    try:
        _pulumi(env, "config", "set", "--stack", stack, "provisioner:plan", str(plan_path))
        _pulumi(env, "config", "set", "--stack", stack, "provisioner:owner", "ci")
        _pulumi(env, "up", "--yes", "--skip-preview", "--stack", stack)
        outputs = json.loads(_pulumi(env, "stack", "output", "--json", "--stack", stack))
        assert [n["name"] for n in outputs["nodes"]] == [n.name for n in plan.nodes]
        assert outputs["hourly_usd"] == str(plan.option.hourly_usd)
        assert runpod.harness.instances() == len(plan.nodes)
        state = _pulumi(env, "stack", "export", "--stack", stack)
        assert runpod.canary_key not in state and "MUNGE" not in state
    finally:
        _pulumi(env, "destroy", "--yes", "--skip-preview", "--stack", stack)
        _pulumi(env, "stack", "rm", "--yes", stack)
    assert runpod.harness.instances() == 0
