"""The burn-in loops on the CPU with tiny sizes (skipped without torch), and its graceful skips.

Figures on a CPU mean nothing; these tests check the loops produce one figure per metric
and per device, the sustained phase calls the probe each window, and the verdict code reads
the result. Timing is never asserted.
"""

from __future__ import annotations

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
