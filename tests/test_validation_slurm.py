"""``provisioner validate`` drains a straggler on a real slurmctld, and never the last node in service.

The cluster is test_slurm_real's: munged, slurmctld and one slurmd started as our children
from the rendered 2-node config (node 0 answers; node 1 is a placeholder nobody answers for,
so Slurm holds it as not responding). The node check itself cannot run here (no GPU), so
``srun`` is a stand-in on PATH that prints each node's report; every ``scontrol`` call is
the real one, and ``scontrol show node`` is what the assertions read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.validation.model import EXIT_DEGRADED, EXIT_FAILED, Finding, NodeReport, Severity
from provisioner.validation.reference import judge_burnin
from tests import test_slurm_real
from tests.test_validation import _reference_run

pytestmark = [pytest.mark.system, pytest.mark.slow]

slurm_cluster = test_slurm_real.slurm_cluster  # the same fixture, started afresh for this module
NODE0, NODE1 = test_slurm_real.NODES


def _show(env: dict[str, str], node: str) -> tuple[str, str]:
    """(State, Reason) as ``scontrol show node`` prints them."""
    out = subprocess.run(
        ["scontrol", "show", "node", node], env=env, capture_output=True, text=True, timeout=10, check=True
    ).stdout
    state = re.search(r"State=(\S+)", out)
    reason = re.search(r"Reason=(.*?)(?: \[[^\]]*\])?$", out, re.MULTILINE)
    return (state.group(1) if state else ""), (reason.group(1).strip() if reason else "")


@pytest.fixture
def validate_env(
    slurm_cluster: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, dict[str, str]]]:
    """SLURM_CONF for the real scontrol; a stand-in srun printing reports/<node>.json."""
    _, env = slurm_cluster
    bin_dir, reports = tmp_path / "bin", tmp_path / "reports"
    bin_dir.mkdir()
    reports.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(f'#!/bin/sh\nnode="${{3#--nodelist=}}"\nexec {shutil.which("cat")} "{reports}/$node.json"\n')
    srun.chmod(0o755)
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        yield reports, env
    finally:
        for node in (NODE0, NODE1):  # leave both nodes as the fixture made them
            subprocess.run(
                ["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                env=env,
                capture_output=True,
                timeout=10,
                check=False,
            )


def _straggler_report(node: str) -> str:
    """What node check reports for a node whose GPU 7 runs 7 % under its seven peers."""
    run = _reference_run(8, matmul_sustained_tflops=0.93 * 669.9)
    return NodeReport(
        node=node, gpu_model="H100", gpu_count=8, burnin=run, findings=judge_burnin(run, "NVIDIA H100 80GB HBM3")
    ).to_json()


def _healthy_report(node: str) -> str:
    return NodeReport(node=node, gpu_model="H100", gpu_count=8, burnin=_reference_run(8)).to_json()


def _failed_report(node: str) -> str:
    return NodeReport(
        node=node,
        gpu_model="H100",
        gpu_count=8,
        findings=[Finding(code="xid.79", severity=Severity.FAILED, gpu=3, message="XID 79 on GPU 3")],
    ).to_json()


def test_straggler_is_drained_with_its_reason(
    validate_env: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    reports, env = validate_env
    (reports / f"{NODE0}.json").write_text(_healthy_report(NODE0))
    (reports / f"{NODE1}.json").write_text(_straggler_report(NODE1))
    code = main(["validate", "--nodes", f"{NODE0},{NODE1}", "--via", "slurm", "--no-burnin"])
    out = capsys.readouterr().out
    assert code == EXIT_DEGRADED, out
    state, reason = _show(env, NODE1)
    assert "DRAIN" in state
    assert reason == "provisioner validate: degraded: straggler.gpu.matmul_sustained"
    assert "DRAIN" not in _show(env, NODE0)[0]
    assert re.search(rf"^{NODE1}\s+degraded.*\sdrained\s", out, re.MULTILINE)


def test_last_node_in_service_is_not_drained_silently(
    validate_env: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    reports, env = validate_env
    subprocess.run(
        ["scontrol", "update", f"NodeName={NODE1}", "State=DRAIN", "Reason=maintenance"],
        env=env,
        check=True,
        timeout=10,
    )
    (reports / f"{NODE0}.json").write_text(_failed_report(NODE0))
    (reports / f"{NODE1}.json").write_text(_healthy_report(NODE1))
    code = main(["validate", "--nodes", f"{NODE0},{NODE1}", "--via", "slurm", "--no-burnin"])
    out = capsys.readouterr().out
    assert code == EXIT_FAILED
    assert "DRAIN" not in _show(env, NODE0)[0]
    assert f"note: refused to drain {NODE0}: it is the last node in service" in out
    assert re.search(rf"^{NODE0}\s+failed.*\srefused\s", out, re.MULTILINE)
    assert _show(env, NODE1)[1] == "maintenance"  # the operator's drain is left alone

    code = main(["validate", "--nodes", f"{NODE0},{NODE1}", "--via", "slurm", "--no-burnin", "--force"])
    capsys.readouterr()
    assert code == EXIT_FAILED
    state, reason = _show(env, NODE0)
    assert "DRAIN" in state and reason == "provisioner validate: failed: xid.79"
