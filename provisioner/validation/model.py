"""What a node check finds, and how findings roll up into a node and a cluster status.

A ``Finding`` is one observation with a stable ``code`` (``ecc.volatile_uncorrectable``,
``xid.79``, ``burnin.matmul_sustained``) and a severity. The worst severity decides the node's
status, and the status decides the exit code of ``provisioner node check`` and
``provisioner validate``:

====== ========= =====================================================================
exit   status    meaning
====== ========= =====================================================================
0      healthy   every check passed (``info``/``warn`` findings may be present)
10     degraded  usable, but slower or in need of a reset soon (a straggler, a PCIe
                 link below its maximum, persistence mode off, XID 63/94)
11     failed    do not schedule work here (uncorrectable ECC, remap failure, HW
                 thermal slowdown, a missing GPU, XID 48/79/95, burn-in far below reference)
====== ========= =====================================================================

Reports are pydantic models so a node's JSON, collected over srun/kubectl/ssh, is parsed
back with the same schema it was written with.
"""

from __future__ import annotations

import json
from enum import IntEnum, StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from provisioner.untrusted import loads_bounded

EXIT_HEALTHY = 0
EXIT_DEGRADED = 10
EXIT_FAILED = 11
REPORT_VERSION = 1


class Severity(IntEnum):
    """Ordered: a higher value is worse. ``warn`` is reported but leaves the node healthy."""

    INFO = 0
    WARN = 1
    DEGRADED = 2
    FAILED = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Status(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    FAILED = "failed"

    @property
    def exit_code(self) -> int:
        return {Status.HEALTHY: EXIT_HEALTHY, Status.DEGRADED: EXIT_DEGRADED, Status.FAILED: EXIT_FAILED}[self]

    @property
    def rank(self) -> int:
        return {Status.HEALTHY: 0, Status.DEGRADED: 1, Status.FAILED: 2}[self]


class Action(StrEnum):
    """What an operator (or ``validate --drain``) should do about a finding."""

    NONE = "none"
    RESTART_JOB = "restart_job"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    DRAIN = "drain"
    REPLACE_NODE = "replace_node"
    FIX_CONFIG = "fix_config"


class Finding(BaseModel):
    """One observation. ``gpu`` is the GPU index (None: the node as a whole)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    severity: Severity
    message: str
    gpu: int | None = None
    action: Action = Action.NONE
    value: float | None = None
    threshold: float | None = None

    @field_serializer("severity")
    def _severity_label(self, severity: Severity) -> str:
        return severity.label

    @field_validator("severity", mode="before")
    @classmethod
    def _severity_from_label(cls, value: Any) -> Any:
        return Severity[value.upper()] if isinstance(value, str) and value.upper() in Severity.__members__ else value


class GpuMetrics(BaseModel):
    """Burn-in figures for one GPU (None: not measured)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    matmul_burst_tflops: float | None = None
    matmul_sustained_tflops: float | None = None
    hbm_copy_tbps: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None


class BurnInResult(BaseModel):
    """What the burn-in measured. ``skipped`` says why it did not run (no torch, no CUDA)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skipped: str | None = None
    gpus: list[GpuMetrics] = Field(default_factory=list)
    nccl_busbw_gbps: float | None = None
    nccl_gpus: int = 0
    sustained_windows_tflops: list[float] = Field(default_factory=list)
    duration_s: float = 0.0
    # How it measured (reference.Method); None in reports written before these were recorded.
    matmul_n: int | None = None
    burst_s: float | None = None
    window_s: float | None = None
    copy_bytes: int | None = None
    pinned_bytes: int | None = None


def status_of(findings: list[Finding]) -> Status:
    worst = max((f.severity for f in findings), default=Severity.INFO)
    if worst is Severity.FAILED:
        return Status.FAILED
    if worst is Severity.DEGRADED:
        return Status.DEGRADED
    return Status.HEALTHY


class NodeReport(BaseModel):
    """Everything ``provisioner node check`` found on one node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "provisioner.node-report"
    version: int = REPORT_VERSION
    node: str
    gpu_model: str | None = None  # canonical (H100)
    gpu_name: str | None = None  # as nvidia-smi names it (NVIDIA H100 80GB HBM3)
    gpu_count: int = 0
    findings: list[Finding] = Field(default_factory=list)
    burnin: BurnInResult | None = None
    duration_s: float = 0.0

    @property
    def status(self) -> Status:
        return status_of(self.findings)

    def problems(self) -> list[Finding]:
        """Findings that make the node degraded or failed, worst first."""
        bad = [f for f in self.findings if f.severity >= Severity.DEGRADED]
        return sorted(bad, key=lambda f: -f.severity)

    def problem_codes(self) -> set[str]:
        return {f.code for f in self.problems()}

    def with_findings(self, extra: list[Finding]) -> NodeReport:
        return self.model_copy(update={"findings": [*self.findings, *extra]})

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["status"] = self.status.value
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> NodeReport:
        data = loads_bounded(text)  # a node's answer: bounded (provisioner.untrusted)
        if isinstance(data, dict):
            data.pop("status", None)
        return cls.model_validate(data)


__all__ = [
    "EXIT_DEGRADED",
    "EXIT_FAILED",
    "EXIT_HEALTHY",
    "Action",
    "BurnInResult",
    "Finding",
    "GpuMetrics",
    "NodeReport",
    "Severity",
    "Status",
    "status_of",
]
