"""Plain-text tables for node and cluster reports (JSON comes from the models themselves)."""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.termtext import counted
from provisioner.validation.model import NodeReport, Severity


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(header, widths, strict=True)).rstrip()]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return lines


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_node(report: NodeReport) -> str:
    """The node's status line, its findings (worst first, info last) and burn-in figures per GPU."""
    lines = [
        f"{report.node}: {report.status.value} ({report.gpu_count} x {report.gpu_model or 'no GPU'}, "
        f"{report.duration_s:.0f} s)"
    ]
    findings = sorted(report.findings, key=lambda f: (-f.severity, f.gpu if f.gpu is not None else -1, f.code))
    shown = [f for f in findings if f.severity > Severity.INFO] + [f for f in findings if f.severity is Severity.INFO]
    if shown:
        lines.append("")
        lines += _table(
            ["severity", "check", "gpu", "action", "message"],
            [
                [f.severity.label, f.code, "-" if f.gpu is None else str(f.gpu), f.action.value, f.message]
                for f in shown
            ],
        )
    burnin = report.burnin
    if burnin is not None and not burnin.skipped and burnin.gpus:
        lines.append("")
        lines += _table(
            ["gpu", "burst TFLOP/s", "sustained TFLOP/s", "HBM TB/s", "H2D GB/s", "D2H GB/s"],
            [
                [
                    str(g.index),
                    _fmt(g.matmul_burst_tflops),
                    _fmt(g.matmul_sustained_tflops),
                    _fmt(g.hbm_copy_tbps, 2),
                    _fmt(g.h2d_gbps),
                    _fmt(g.d2h_gbps),
                ]
                for g in burnin.gpus
            ],
        )
        if burnin.nccl_busbw_gbps is not None:
            gpus = counted(burnin.nccl_gpus, "GPU")
            lines.append(f"NCCL all-reduce bus bandwidth ({gpus}): {burnin.nccl_busbw_gbps:.1f} GB/s")
    return "\n".join(lines) + "\n"


def render_cluster(
    nodes: Sequence[NodeReport], drained: Sequence[str] = (), refused: Sequence[str] = (), messages: Sequence[str] = ()
) -> str:
    """One row per node: status, slowest-GPU figures and its problems; then the actions taken."""
    rows = []
    for node in nodes:
        gpus = node.burnin.gpus if node.burnin and not node.burnin.skipped else []

        def slowest(metric: str, gpus: Sequence[object] = gpus) -> float | None:
            values = [getattr(g, metric) for g in gpus if getattr(g, metric) is not None]
            return min(values) if values else None

        action = "drained" if node.node in drained else ("refused" if node.node in refused else "")
        problems = ", ".join(sorted(node.problem_codes())) or "-"
        rows.append(
            [
                node.node,
                node.status.value,
                f"{node.gpu_count} x {node.gpu_model or '?'}",
                _fmt(slowest("matmul_sustained_tflops")),
                _fmt(slowest("hbm_copy_tbps"), 2),
                _fmt(node.burnin.nccl_busbw_gbps if node.burnin else None),
                action or "-",
                problems,
            ]
        )
    lines = _table(["node", "status", "gpus", "sustained TFLOP/s", "HBM TB/s", "NCCL GB/s", "action", "problems"], rows)
    lines += [f"note: {message}" for message in messages]
    return "\n".join(lines) + "\n"


__all__ = ["render_cluster", "render_node"]
