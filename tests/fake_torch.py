"""A stand-in for the slice of torch the burn-in uses, backed by numpy, with N simulated GPUs.

torch is an optional dependency that CI does not install (a CUDA wheel is gigabytes), so the
burn-in's loops would otherwise run nowhere in CI. This module answers ``torch.cuda.*``
(device count, device contexts, timing events, synchronize, ``nccl.all_reduce``) and the
tensor calls (``randn``, ``empty``, ``ones``, ``mm(out=)``, ``copy_``) with real numpy work on
the CPU, so the CUDA code path of ``run_burnin`` runs end to end: per-device events, pinned
copies, the single-process all-reduce. The figures mean nothing; tests assert structure and the
work actually done (``FakeTorch.calls``), never timing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

bfloat16 = "bfloat16"
float32 = "float32"
uint8 = "uint8"
_NUMPY = {bfloat16: np.float32, float32: np.float32, uint8: np.uint8}


class Tensor:
    def __init__(self, array: np.ndarray, device: str, owner: FakeTorch) -> None:
        self.array, self.device, self._owner = array, device, owner

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        self._owner.calls["copy"] += 1
        np.copyto(self.array, src.array)
        return self


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None

    def record(self) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: _Event) -> float:
        assert self.at is not None and end.at is not None, "event not recorded"
        return (end.at - self.at) * 1000.0  # milliseconds, as CUDA events report


class _Nccl:
    def __init__(self, owner: FakeTorch) -> None:
        self._owner = owner

    def all_reduce(self, tensors: Sequence[Tensor]) -> None:
        self._owner.calls["all_reduce"] += 1
        total = sum(t.array for t in tensors)
        for tensor in tensors:
            np.copyto(tensor.array, total)


class _Cuda:
    Event = _Event

    def __init__(self, owner: FakeTorch, gpus: int) -> None:
        self._owner, self._gpus = owner, gpus
        self.nccl = _Nccl(owner)
        self.current: str | None = None

    def is_available(self) -> bool:
        return self._gpus > 0

    def device_count(self) -> int:
        return self._gpus

    def synchronize(self, device: str | None = None) -> None:
        self._owner.calls["synchronize"] += 1

    @contextmanager
    def device(self, name: str) -> Iterator[None]:
        assert name.startswith("cuda:") and int(name[5:]) < self._gpus, f"no such device {name}"
        previous, self.current = self.current, name
        try:
            yield
        finally:
            self.current = previous


class FakeTorch:
    """``FakeTorch(gpus=2)`` is passed to ``run_burnin(..., torch_module=...)``."""

    bfloat16, float32, uint8 = bfloat16, float32, uint8

    def __init__(self, gpus: int = 2) -> None:
        self.calls: Counter[str] = Counter()
        self.devices_used: set[str] = set()
        self.cuda = _Cuda(self, gpus)
        self._rng = np.random.default_rng(7)

    def _tensor(self, array: np.ndarray, device: str) -> Tensor:
        self.devices_used.add(device)
        return Tensor(array, device, self)

    def randn(self, *shape: int, device: str = "cpu", dtype: str = float32) -> Tensor:
        return self._tensor(self._rng.standard_normal(shape).astype(_NUMPY[dtype]), device)

    def empty(self, *shape: int, dtype: str = float32, device: str = "cpu", pin_memory: bool = False) -> Tensor:
        if pin_memory:
            self.calls["pinned"] += 1
        return self._tensor(np.zeros(shape, dtype=_NUMPY[dtype]), device)

    def ones(self, *shape: int, dtype: str = float32, device: str = "cpu") -> Tensor:
        return self._tensor(np.ones(shape, dtype=_NUMPY[dtype]), device)

    def mm(self, a: Tensor, b: Tensor, out: Tensor) -> Tensor:
        assert a.device == b.device == out.device, "operands on different devices"
        self.calls["mm"] += 1
        np.matmul(a.array, b.array, out=out.array)
        return out

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the burn-in used torch.{name}, which FakeTorch does not provide")
