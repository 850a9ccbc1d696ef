"""Burn-in: bf16 matmul (burst, then sustained), HBM copy, pinned host<->device copies, NCCL.

torch is an optional import: without it, or without a CUDA device, ``run_burnin`` returns a
result whose ``skipped`` says why, and the node check reports the burn-in as skipped instead
of failing. ``device="cpu"`` with tiny sizes runs the same loops on a CPU, which is how the
tests exercise them; the verdicts (reference.py) are pure and need no torch at all.

Order and budget (defaults): a 3 s burst from idle (one block: after ~0.25 s a healthy H100 SXM
is already at its power cap, so this figure is judged against a reference measured the same
way, reference.CHECK_METHOD), then 60 s sustained in 5 s windows,
then ~1 s of copies and ~1 s of all-reduce, so the whole node check stays under 90 s. Per-GPU
times come from CUDA events on each GPU's stream; all GPUs are loaded at once, as a training
step loads them, so a node's shared power and cooling are part of the test.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.validation.model import BurnInResult, GpuMetrics


@dataclass(frozen=True)
class BurnInConfig:
    matmul_n: int = 8192
    burst_s: float = 3.0
    sustained_s: float = 60.0
    window_s: float = 5.0
    copy_bytes: int = 1 << 30
    pinned_bytes: int = 1 << 28
    nccl_bytes: int = 1 << 30
    repeats: int = 5
    device: str = "cuda"  # "cpu": the same loops on the CPU, for tests

    def tiny(self) -> BurnInConfig:
        """CPU-test sizes: seconds become tenths, GiB become KiB."""
        return BurnInConfig(
            matmul_n=64,
            burst_s=0.05,
            sustained_s=0.2,
            window_s=0.05,
            copy_bytes=1 << 16,
            pinned_bytes=1 << 14,
            nccl_bytes=1 << 14,
            repeats=2,
            device="cpu",
        )


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Devices:
    """Per-device timing: CUDA events on each GPU, or the wall clock on the CPU."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch = torch
        self.cuda = device == "cuda"
        self.names = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if self.cuda else ["cpu"]

    def sync(self) -> None:
        if self.cuda:
            for name in self.names:
                self.torch.cuda.synchronize(name)

    def timed(self, work: Callable[[str], None]) -> list[float]:
        """Run ``work(device)`` on every device at once; seconds each device took."""
        if not self.cuda:
            start = time.perf_counter()
            for name in self.names:
                work(name)
            return [time.perf_counter() - start] * len(self.names)
        torch = self.torch
        events = []
        for name in self.names:
            with torch.cuda.device(name):
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                events.append((begin, end))
        for name in self.names:
            with torch.cuda.device(name):
                work(name)
        for name, (_, end) in zip(self.names, events, strict=True):
            with torch.cuda.device(name):
                end.record()
        self.sync()
        return [begin.elapsed_time(end) / 1000.0 for begin, end in events]


def _matmul_windows(
    devices: _Devices,
    n: int,
    duration_s: float,
    window_s: float,
    clock: Callable[[], float],
    probe: Callable[[], None] | None,
) -> list[list[float]]:
    """TFLOP/s per window per device, windows of about ``window_s`` for ``duration_s``."""
    torch = devices.torch
    operands = {
        name: (
            torch.randn(n, n, device=name, dtype=torch.bfloat16),
            torch.randn(n, n, device=name, dtype=torch.bfloat16),
            torch.empty(n, n, device=name, dtype=torch.bfloat16),
        )
        for name in devices.names
    }

    def one(name: str) -> None:
        a, b, out = operands[name]
        torch.mm(a, b, out=out)

    devices.timed(one)  # warm-up: library handles and kernel selection are not measured
    iterations = 3

    def step(name: str) -> None:
        for _ in range(iterations):
            one(name)

    per_step = max(devices.timed(step)) / iterations  # calibration: how many steps fill a window
    iterations = max(1, int(window_s / max(per_step, 1e-6)))
    flop = 2.0 * n**3 * iterations

    windows: list[list[float]] = [[] for _ in devices.names]
    deadline = clock() + duration_s
    while True:
        for i, seconds in enumerate(devices.timed(step)):
            windows[i].append(flop / max(seconds, 1e-9) / 1e12)
        if probe is not None:
            probe()
        if clock() >= deadline:
            return windows


def _copy_tbps(devices: _Devices, nbytes: int, repeats: int) -> list[float]:
    """Device-to-device copy, counting read + write (as bench.json's hbm_copy_tbps_rw does)."""
    torch = devices.torch
    buffers = {
        name: (torch.empty(nbytes, dtype=torch.uint8, device=name), torch.empty(nbytes, dtype=torch.uint8, device=name))
        for name in devices.names
    }
    results = []
    for name in devices.names:
        src, dst = buffers[name]
        dst.copy_(src)
        seconds = _one_device(devices, name, _repeat(repeats, dst.copy_, src))
        results.append(2 * nbytes * repeats / max(seconds, 1e-9) / 1e12)
    return results


def _repeat(repeats: int, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], None]:
    def work() -> None:
        for _ in range(repeats):
            op(*args, **kwargs)

    return work


def _one_device(devices: _Devices, name: str, work: Callable[[], object]) -> float:
    if not devices.cuda:
        start = time.perf_counter()
        work()
        return time.perf_counter() - start
    torch = devices.torch
    with torch.cuda.device(name):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        work()
        end.record()
        torch.cuda.synchronize(name)
    return float(begin.elapsed_time(end)) / 1000.0


def _pinned_gbps(devices: _Devices, nbytes: int, repeats: int) -> list[tuple[float, float]]:
    """(H2D, D2H) GB/s per GPU from pinned host memory, one GPU at a time."""
    torch = devices.torch
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    results = []
    for name in devices.names:
        device = torch.empty(nbytes, dtype=torch.uint8, device=name)
        device.copy_(host, non_blocking=True)
        h2d = _one_device(devices, name, _repeat(repeats, device.copy_, host, non_blocking=True))
        d2h = _one_device(devices, name, _repeat(repeats, host.copy_, device, non_blocking=True))
        results.append((nbytes * repeats / h2d / 1e9, nbytes * repeats / d2h / 1e9))
    return results


def busbw_gbps(nbytes: int, seconds: float, ranks: int) -> float:
    """All-reduce bus bandwidth (nccl-tests' definition): algbw x 2(n-1)/n."""
    if ranks < 2 or seconds <= 0:
        return 0.0
    return nbytes / seconds / 1e9 * 2 * (ranks - 1) / ranks


def _nccl_busbw(devices: _Devices, nbytes: int, repeats: int) -> float | None:
    """Single-process all-reduce across this node's GPUs (torch.cuda.nccl)."""
    if not devices.cuda or len(devices.names) < 2:
        return None
    torch = devices.torch
    tensors = [torch.ones(nbytes // 2, dtype=torch.bfloat16, device=name) for name in devices.names]
    torch.cuda.nccl.all_reduce(tensors)
    devices.sync()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.cuda.nccl.all_reduce(tensors)
    devices.sync()
    return busbw_gbps(nbytes, (time.perf_counter() - start) / repeats, len(devices.names))


def multinode_allreduce_busbw(nbytes: int = 1 << 30, repeats: int = 5, backend: str = "nccl") -> float:
    """All-reduce bus bandwidth across every rank of a torch.distributed launch (torchrun, srun).

    Reads the usual RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT environment. Each rank drives
    ``LOCAL_RANK``'s GPU (or the CPU with backend ``gloo``). Blocks until every rank is done.
    """
    torch = _import_torch()
    if torch is None:
        raise RuntimeError("torch is not installed")
    import torch.distributed as dist

    dist.init_process_group(backend)
    try:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if backend == "nccl" else "cpu"
        tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        dist.all_reduce(tensor)
        if backend == "nccl":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            dist.all_reduce(tensor)
        if backend == "nccl":
            torch.cuda.synchronize(device)
        return busbw_gbps(nbytes, (time.perf_counter() - start) / repeats, dist.get_world_size())
    finally:
        dist.destroy_process_group()


def run_burnin(
    config: BurnInConfig | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    probe: Callable[[], None] | None = None,
    torch_module: Any = None,
) -> BurnInResult:
    """Run the burn-in on every visible GPU (or the CPU). Blocks for about burst_s + sustained_s.

    Never raises for a missing torch or CUDA: the result says ``skipped`` and why. ``probe`` is
    called after each sustained window (the node check samples nvidia-smi there).
    """
    config = config or BurnInConfig()
    torch = torch_module if torch_module is not None else _import_torch()
    if torch is None:
        return BurnInResult(skipped="torch is not installed")
    if config.device == "cuda" and not torch.cuda.is_available():
        return BurnInResult(skipped="no CUDA device visible to torch")
    started = clock()
    devices = _Devices(torch, config.device)
    burst = _matmul_windows(devices, config.matmul_n, config.burst_s, config.burst_s, clock, None)
    sustained = _matmul_windows(devices, config.matmul_n, config.sustained_s, config.window_s, clock, probe)
    copies = _copy_tbps(devices, config.copy_bytes, config.repeats)
    pinned = _pinned_gbps(devices, config.pinned_bytes, config.repeats) if devices.cuda else []
    nccl = _nccl_busbw(devices, config.nccl_bytes, config.repeats)
    gpus = []
    for i in range(len(devices.names)):
        gpus.append(
            GpuMetrics(
                index=i,
                matmul_burst_tflops=round(statistics.mean(burst[i]), 2),
                matmul_sustained_tflops=round(statistics.median(sustained[i]), 2),
                hbm_copy_tbps=round(copies[i], 4),
                h2d_gbps=round(pinned[i][0], 2) if pinned else None,
                d2h_gbps=round(pinned[i][1], 2) if pinned else None,
            )
        )
    # The node-wide sustained curve: the slowest GPU's windows (it sets the step time).
    slowest = min(range(len(gpus)), key=lambda i: gpus[i].matmul_sustained_tflops or 0.0)
    return BurnInResult(
        gpus=gpus,
        nccl_busbw_gbps=None if nccl is None else round(nccl, 2),
        nccl_gpus=len(devices.names) if nccl is not None else 0,
        sustained_windows_tflops=[round(v, 2) for v in sustained[slowest]],
        duration_s=round(clock() - started, 2),
        matmul_n=config.matmul_n,
        burst_s=config.burst_s,
        window_s=config.window_s,
        copy_bytes=config.copy_bytes,
        pinned_bytes=config.pinned_bytes,
    )


__all__ = ["BurnInConfig", "busbw_gbps", "multinode_allreduce_busbw", "run_burnin"]
