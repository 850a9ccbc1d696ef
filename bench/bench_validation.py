"""Run the real node check on a GPU machine and compare its figures with the reference.

Usage: python bench/bench_validation.py [--sustained-s 60] [--out FILE] [--summary FILE]
                                        [--label NAME] [--expect healthy,degraded] [-- extra node-check args]

Runs ``provisioner node check --json`` as a user would (a fresh process, the real
nvidia-smi, dmesg, dcgmi when present, and torch), times it end to end, and prints one
line per figure: measured, what it is judged against (the measured reference, measured the
same way, or the datasheet floor) and the ratio, plus the node's status and wall time (the
budget: at most 90 s with 60 s sustained). ``--summary`` writes all of that as JSON, with a
Markdown row for docs/benchmarks.md ("Node validation"). Needs torch with CUDA on the
machine; without them it reports the burn-in as skipped. bench/device_validation.sh runs it
alone and while a second process loads the GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from provisioner.validation.datasheet import MEMORY_FLOOR  # noqa: E402
from provisioner.validation.model import NodeReport  # noqa: E402
from provisioner.validation.reference import METRICS, UNITS, datasheet_for, reference_for  # noqa: E402


def _judged_against(report: NodeReport) -> dict[str, dict[str, Any]]:
    """Per metric: the figure it is judged against, and what that figure is."""
    reference, sheet = reference_for(report.gpu_name), datasheet_for(report.gpu_name)
    against: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        value = getattr(reference, metric, None) if reference else None
        if value:
            against[metric] = {"value": value, "kind": f"{reference.key} reference" if reference else ""}
        elif sheet and metric.startswith("matmul"):
            against[metric] = {
                "value": round(sheet.bf16_dense_tflops * sheet.matmul_floor, 3),
                "kind": f"{sheet.key} datasheet floor",
            }
        elif sheet and metric == "hbm_copy_tbps":
            against[metric] = {
                "value": round(sheet.memory_tbps * MEMORY_FLOOR, 3),
                "kind": f"{sheet.key} datasheet floor",
            }
    return against


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    try:
        import torch

        found["torch"] = str(torch.__version__)
        found["cuda"] = str(torch.version.cuda)
    except ImportError:
        found["torch"] = "not installed"
    return found


def summarize(report: NodeReport, label: str, wall_s: float, exit_code: int, expect: list[str]) -> dict[str, Any]:
    """What a benchmarks.md entry needs: the GPU, the verdict, the figures and their ratios."""
    against = _judged_against(report)
    gpus = []
    burnin = report.burnin
    for gpu in burnin.gpus if burnin and not burnin.skipped else []:
        figures = {}
        for metric in METRICS:
            value = getattr(gpu, metric)
            if value is None:
                continue
            ref = against.get(metric)
            figures[metric] = {
                "value": value,
                "unit": UNITS[metric],
                "against": ref,
                "ratio": round(value / ref["value"], 4) if ref else None,
            }
        gpus.append({"index": gpu.index, "figures": figures})
    status = report.status.value
    return {
        "label": label,
        "host": platform.node(),
        "gpu_name": report.gpu_name,
        "gpu_count": report.gpu_count,
        "status": status,
        "exit_code": exit_code,
        "expected": expect,
        "as_expected": (status in expect) if expect else None,
        "wall_s": round(wall_s, 1),
        "check_duration_s": report.duration_s,
        "burnin_skipped": burnin.skipped if burnin else "no GPU state",
        "problems": [f"{f.severity.label}: {f.code}: {f.message}" for f in report.problems()],
        "gpus": gpus,
        "sustained_windows_tflops": burnin.sustained_windows_tflops if burnin else [],
        "versions": _versions(),
    }


def markdown_row(summary: dict[str, Any]) -> str:
    """``| run | GPU | status | wall | burst | sustained | HBM | H2D / D2H |`` for the slowest GPU."""

    def cell(metric: str, digits: int) -> str:
        values = [g["figures"][metric] for g in summary["gpus"] if metric in g["figures"]]
        if not values:
            return "-"
        worst = min(values, key=lambda f: f["value"])
        ratio = f" ({worst['ratio']:.0%})" if worst["ratio"] is not None else ""
        return f"{worst['value']:.{digits}f}{ratio}"

    return (
        f"| {summary['label']} | {summary['gpu_count']} x {summary['gpu_name']} | {summary['status']} "
        f"(exit {summary['exit_code']}) | {summary['wall_s']:.1f} s | {cell('matmul_burst_tflops', 1)} | "
        f"{cell('matmul_sustained_tflops', 1)} | {cell('hbm_copy_tbps', 3)} | "
        f"{cell('h2d_gbps', 1)} / {cell('d2h_gbps', 1)} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sustained-s", type=float, default=60.0)
    parser.add_argument("--out", type=Path, help="also write the node report JSON here")
    parser.add_argument("--summary", type=Path, help="write the figures, ratios and verdict as JSON here")
    parser.add_argument("--label", default="node check", help="name of this run in the summary")
    parser.add_argument("--expect", default="", help="comma-separated statuses this run should end in")
    parser.add_argument("extra", nargs="*", help="more `node check` arguments (after --)")
    args = parser.parse_args()
    command = [
        sys.executable,
        "-m",
        "provisioner.cli",
        "node",
        "check",
        "--json",
        "--sustained-s",
        f"{args.sustained_s:g}",
        *args.extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - start
    try:
        report = NodeReport.from_json(done.stdout)
    except ValueError:
        print(f"node check gave no report (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
        return 1
    if args.out:
        args.out.write_text(report.to_json())
    summary = summarize(report, args.label, wall_s, done.returncode, [s for s in args.expect.split(",") if s])
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"[{args.label}] host {summary['host']}  status {summary['status']} (exit {done.returncode})  "
        f"{report.gpu_count} x {report.gpu_name}  wall {wall_s:.1f} s (check's own clock {report.duration_s:.1f} s)"
        + (f"  expected {args.expect}: {'yes' if summary['as_expected'] else 'NO'}" if args.expect else "")
    )
    for problem in summary["problems"]:
        print(f"  {problem}")
    if summary["burnin_skipped"]:
        print(f"burn-in skipped: {summary['burnin_skipped']}")
    print(f"{'gpu':>3}  {'metric':<24} {'measured':>10} {'against':>10} {'ratio':>7}  what")
    for gpu in summary["gpus"]:
        for metric, figure in gpu["figures"].items():
            against = figure["against"]
            ratio = f"{figure['ratio']:.1%}" if figure["ratio"] is not None else "-"
            print(
                f"{gpu['index']:>3}  {metric:<24} {figure['value']:>10.2f} "
                f"{against['value'] if against else '-':>10} {ratio:>7}  {against['kind'] if against else ''}"
            )
    if report.burnin and report.burnin.nccl_busbw_gbps is not None:
        print(f"NCCL all-reduce busbw over {report.burnin.nccl_gpus} GPUs: {report.burnin.nccl_busbw_gbps:.1f} GB/s")
    if summary["sustained_windows_tflops"]:
        print(
            "sustained windows (TFLOP/s, slowest GPU): "
            + ", ".join(f"{v:.0f}" for v in summary["sustained_windows_tflops"])
        )
    print(markdown_row(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
