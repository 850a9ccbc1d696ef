"""Run the real node check on a GPU machine and compare its figures with the reference.

Usage: python bench/bench_validation.py [--sustained-s 60] [--out FILE] [-- extra node-check args]

Runs ``provisioner node check --json`` as a user would (a fresh process, the real
nvidia-smi, dmesg, dcgmi when present, and torch), times it end to end, and prints one
line per figure: measured, reference, ratio (the issue's bar: within 5 % of the reference),
plus the node's status and wall time (the budget: at most 90 s with 60 s sustained).
Needs torch with CUDA on the machine; without them it reports the burn-in as skipped.
The figures and the time go into docs/benchmarks.md, "Node validation".
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from provisioner.validation.model import NodeReport  # noqa: E402
from provisioner.validation.reference import UNITS, reference_for  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sustained-s", type=float, default=60.0)
    parser.add_argument("--out", type=Path, help="also write the node report JSON here")
    parser.add_argument("extra", nargs="*", help="more `node check` arguments (after --)")
    args = parser.parse_args()
    command = [sys.executable, "-m", "provisioner.cli", "node", "check", "--json", "--sustained-s",
               f"{args.sustained_s:g}", *args.extra]
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
    print(f"host {platform.node()}  status {report.status.value} (exit {done.returncode})  "
          f"{report.gpu_count} x {report.gpu_model}  wall {wall_s:.1f} s (check's own clock {report.duration_s:.1f} s)")
    for finding in report.problems():
        print(f"  {finding.severity.label}: {finding.code}: {finding.message}")
    burnin = report.burnin
    if burnin is None or burnin.skipped:
        print(f"burn-in skipped: {burnin.skipped if burnin else 'no GPU state'}")
        return 0
    reference = reference_for(report.gpu_name)
    print(f"{'gpu':>3}  {'metric':<24} {'measured':>10} {'reference':>10} {'ratio':>6}")
    for gpu in burnin.gpus:
        for metric, unit in UNITS.items():
            value = getattr(gpu, metric, None)
            if value is None:
                continue
            ref = getattr(reference, metric, None) if reference else None
            ratio = f"{value / ref:.1%}" if ref else "-"
            print(f"{gpu.index:>3}  {metric:<24} {value:>10.2f} {ref if ref else '-':>10} {ratio:>6}  {unit}")
    if burnin.nccl_busbw_gbps is not None:
        print(f"NCCL all-reduce busbw over {burnin.nccl_gpus} GPUs: {burnin.nccl_busbw_gbps:.1f} GB/s")
    print("sustained windows (TFLOP/s, slowest GPU): " + ", ".join(f"{v:.0f}" for v in burnin.sustained_windows_tflops))
    print(json.dumps({"wall_s": round(wall_s, 1), "status": report.status.value}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
