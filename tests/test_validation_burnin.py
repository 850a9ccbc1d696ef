"""The burn-in loops on the CPU with tiny sizes (skipped without torch), and its graceful skips.

Figures on a CPU mean nothing; these tests check the loops produce one figure per metric
and per device, the sustained phase calls the probe each window, and the verdict code reads
the result. Timing is never asserted.
"""

from __future__ import annotations

import statistics
import sys

import pytest

from provisioner.validation.burnin import BurnInConfig, multinode_allreduce_busbw, run_burnin
from provisioner.validation.model import BurnInResult
from provisioner.validation.reference import judge_burnin


def test_missing_torch_skips_the_burnin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    result = run_burnin(BurnInConfig().tiny())
    assert result == BurnInResult(skipped="torch is not installed")
    (finding,) = judge_burnin(result, "NVIDIA H100 80GB HBM3")
    assert finding.code == "burnin.skipped" and "torch is not installed" in finding.message


def test_cpu_burnin_measures_every_metric() -> None:
    pytest.importorskip("torch", reason="torch is not installed (optional; pip install torch for the CPU test)")
    probes: list[int] = []
    result = run_burnin(BurnInConfig().tiny(), probe=lambda: probes.append(1))
    assert result.skipped is None
    (gpu,) = result.gpus
    assert gpu.matmul_burst_tflops is not None and gpu.matmul_burst_tflops > 0
    assert gpu.matmul_sustained_tflops is not None and gpu.matmul_sustained_tflops > 0
    assert gpu.hbm_copy_tbps is not None and gpu.hbm_copy_tbps > 0
    assert gpu.h2d_gbps is None and gpu.d2h_gbps is None  # no pinned memory without CUDA
    assert result.nccl_busbw_gbps is None  # one device: no all-reduce
    assert len(probes) == len(result.sustained_windows_tflops) >= 1
    # A CPU is no H100: the bands must say so.
    assert {f.code for f in judge_burnin(result, "NVIDIA H100 80GB HBM3")} >= {"burnin.matmul_burst",
                                                                                "burnin.matmul_sustained"}


def test_cuda_requested_without_cuda_is_skipped() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert run_burnin(BurnInConfig(sustained_s=1)).skipped == "no CUDA device visible to torch"


def test_multinode_allreduce_runs_under_torch_distributed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="torch is not installed")
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    # One rank: the bus bandwidth is 0 by definition (nothing crosses a link), but the path runs.
    assert multinode_allreduce_busbw(nbytes=1 << 12, repeats=2, backend="gloo") == 0.0


def test_cuda_path_runs_on_simulated_gpus() -> None:
    """The CUDA code path (per-GPU events, pinned copies, single-process all-reduce) on a numpy
    stand-in for torch with 2 simulated GPUs: it runs in CI, where torch is not installed."""
    from tests.fake_torch import FakeTorch

    fake = FakeTorch(gpus=2)
    probes: list[int] = []
    config = BurnInConfig().tiny()
    result = run_burnin(BurnInConfig(**{**config.__dict__, "device": "cuda"}), torch_module=fake,
                        probe=lambda: probes.append(1))
    assert result.skipped is None
    assert [g.index for g in result.gpus] == [0, 1]
    assert fake.devices_used >= {"cuda:0", "cuda:1"}
    for gpu in result.gpus:  # figures on a CPU are tiny (they may round to 0.0): measured, not judged
        measured = (gpu.matmul_burst_tflops, gpu.matmul_sustained_tflops, gpu.hbm_copy_tbps, gpu.h2d_gbps,
                    gpu.d2h_gbps)  # the pinned copies are measured per GPU on the CUDA path only
        assert all(value is not None and value >= 0 for value in measured), measured
    assert result.nccl_gpus == 2 and result.nccl_busbw_gbps is not None and result.nccl_busbw_gbps > 0
    assert fake.calls["all_reduce"] == config.repeats + 1  # one warm-up, then the timed repeats
    assert fake.calls["pinned"] == 1
    assert len(probes) == len(result.sustained_windows_tflops) >= 1
    # the node-wide sustained curve is the slowest GPU's
    slowest = min(result.gpus, key=lambda g: g.matmul_sustained_tflops or 0.0)
    assert statistics.median(result.sustained_windows_tflops) == pytest.approx(slowest.matmul_sustained_tflops,
                                                                               abs=0.01)


def test_no_gpu_visible_is_skipped_on_the_stand_in() -> None:
    from tests.fake_torch import FakeTorch

    assert run_burnin(BurnInConfig(sustained_s=1), torch_module=FakeTorch(gpus=0)).skipped == (
        "no CUDA device visible to torch")
