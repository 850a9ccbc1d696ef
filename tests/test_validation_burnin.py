"""The burn-in loops on a real CPU build of torch with tiny sizes, and its graceful skips.

The torch path runs on Debian's python3-torch (CI installs it; required under
REQUIRE_SYSTEM_TOOLS=1) through tests/torch_cpu_worker.py, and the CUDA path on a numpy
stand-in with simulated GPUs. Figures on a CPU mean nothing; these tests check the loops produce one figure per metric
and per device, the sustained phase calls the probe each window, and the verdict code reads
the result. Timing is never asserted.
"""

from __future__ import annotations

import json
import site
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.validation.burnin import BurnInConfig, run_burnin
from provisioner.validation.model import BurnInResult
from provisioner.validation.reference import judge_burnin
from tests.conftest import ROOT, skip_or_fail


def test_missing_torch_skips_the_burnin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    result = run_burnin(BurnInConfig().tiny())
    assert result == BurnInResult(skipped="torch is not installed")
    (finding,) = judge_burnin(result, "NVIDIA H100 80GB HBM3")
    assert finding.code == "burnin.skipped" and "torch is not installed" in finding.message


def _system_torch_python() -> str | None:
    """An interpreter of this venv's Python version with Debian's CPU torch (python3-torch)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in dict.fromkeys([getattr(sys, "_base_executable", ""), f"/usr/bin/python{version}", "/usr/bin/python3"]):
        if not exe or not Path(exe).exists():
            continue
        probe = subprocess.run(
            [exe, "-I", "-c", "import sys, torch; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return exe
    return None


@pytest.fixture(scope="module")
def real_torch() -> dict[str, Any]:
    """The burn-in run on a real CPU build of torch (tests/torch_cpu_worker.py), once per module.

    CI installs Debian's python3-torch (.ci/run); without it this skips, or fails under
    REQUIRE_SYSTEM_TOOLS=1. The venv is a plain one, so the worker runs on the system interpreter
    with the venv's site-packages for the project's own libraries."""
    exe = _system_torch_python()
    if exe is None:
        skip_or_fail(
            f"needs Debian's python3-torch for Python {sys.version_info.major}.{sys.version_info.minor} "
            "(a CPU build of torch; installed by .ci/run)"
        )
    sites = [path for path in site.getsitepackages() if Path(path).is_dir()]
    done = subprocess.run(
        [exe, "-I", str(ROOT / "tests" / "torch_cpu_worker.py"), str(ROOT), *sites],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_worker_ran_the_system_torch(real_torch: dict[str, Any]) -> None:
    assert real_torch["torch_file"].startswith("/usr/lib/python3/dist-packages/torch/")


def test_cpu_burnin_on_real_torch_measures_every_metric(real_torch: dict[str, Any]) -> None:
    result = BurnInResult.model_validate(real_torch["cpu"])
    assert result.skipped is None
    (gpu,) = result.gpus
    assert gpu.matmul_burst_tflops is not None and gpu.matmul_burst_tflops >= 0
    assert gpu.matmul_sustained_tflops is not None and gpu.matmul_sustained_tflops >= 0
    assert gpu.hbm_copy_tbps is not None and gpu.hbm_copy_tbps > 0
    assert gpu.h2d_gbps is None and gpu.d2h_gbps is None  # no pinned memory without CUDA
    assert result.nccl_busbw_gbps is None  # one device: no all-reduce
    assert real_torch["probes"] == len(result.sustained_windows_tflops) >= 1
    config = BurnInConfig().tiny()
    assert (result.matmul_n, result.burst_s, result.window_s, result.copy_bytes, result.pinned_bytes) == (
        config.matmul_n,
        config.burst_s,
        config.window_s,
        config.copy_bytes,
        config.pinned_bytes,
    )
    # A CPU is no H100, and it measured another way than the reference: the datasheet floor says so.
    codes = {(f["code"], f["severity"]) for f in real_torch["cpu_findings"]}
    assert {
        ("burnin.method_differs", "info"),
        ("burnin.matmul_burst", "failed"),
        ("burnin.matmul_sustained", "failed"),
    } <= codes


def test_cuda_requested_on_a_cpu_torch_is_skipped(real_torch: dict[str, Any]) -> None:
    assert real_torch["no_cuda"]["skipped"] == "no CUDA device visible to torch"


def test_multinode_allreduce_runs_under_torch_distributed(real_torch: dict[str, Any]) -> None:
    # One gloo rank: the bus bandwidth is 0 by definition (nothing crosses a link), but the path runs.
    assert real_torch["gloo_busbw"] == 0.0


def test_cuda_path_runs_on_simulated_gpus() -> None:
    """The CUDA code path (per-GPU events, pinned copies, single-process all-reduce) on a numpy
    stand-in for torch with 2 simulated GPUs: it runs in CI, where torch is not installed."""
    from tests.fake_torch import FakeTorch

    fake = FakeTorch(gpus=2)
    probes: list[int] = []
    config = BurnInConfig().tiny()
    result = run_burnin(
        BurnInConfig(**{**config.__dict__, "device": "cuda"}), torch_module=fake, probe=lambda: probes.append(1)
    )
    assert result.skipped is None
    assert [g.index for g in result.gpus] == [0, 1]
    assert fake.devices_used >= {"cuda:0", "cuda:1"}
    for gpu in result.gpus:  # figures on a CPU are tiny (they may round to 0.0): measured, not judged
        measured = (
            gpu.matmul_burst_tflops,
            gpu.matmul_sustained_tflops,
            gpu.hbm_copy_tbps,
            gpu.h2d_gbps,
            gpu.d2h_gbps,
        )  # the pinned copies are measured per GPU on the CUDA path only
        assert all(value is not None and value >= 0 for value in measured), measured
    assert result.nccl_gpus == 2 and result.nccl_busbw_gbps is not None and result.nccl_busbw_gbps > 0
    assert fake.calls["all_reduce"] == config.repeats + 1  # one warm-up, then the timed repeats
    assert fake.calls["pinned"] == 1
    assert len(probes) == len(result.sustained_windows_tflops) >= 1
    # the node-wide sustained curve is the slowest GPU's
    slowest = min(result.gpus, key=lambda g: g.matmul_sustained_tflops or 0.0)
    assert statistics.median(result.sustained_windows_tflops) == pytest.approx(
        slowest.matmul_sustained_tflops, abs=0.01
    )


def test_no_gpu_visible_is_skipped_on_the_stand_in() -> None:
    from tests.fake_torch import FakeTorch

    assert run_burnin(BurnInConfig(sustained_s=1), torch_module=FakeTorch(gpus=0)).skipped == (
        "no CUDA device visible to torch"
    )
