"""Cold `provisioner plan` from process start to printed report, on the bundled catalog.

Usage: python bench/bench_cli.py [RUNS]   (default 21 runs per example)

Each run is a fresh interpreter (`python -m provisioner.cli plan SPEC`), timed with
perf_counter around subprocess.run; we report the median, min and max per example.
Target (issue 2): median <= 0.4 s.

The project's modules are byte-compiled first, as `pip install .` does: with an editable
install and PYTHONDONTWRITEBYTECODE=1 (set on these machines) every run would otherwise
recompile them, which is not what a user's machine does.
"""

from __future__ import annotations

import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def time_plan(spec: Path, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "provisioner.cli", "plan", str(spec)],
                       check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    for package in ("provisioner", "providers"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    print(f"{'example':32} {'median s':>9} {'min s':>7} {'max s':>7}")
    for spec in sorted((ROOT / "examples").glob("*.yaml")):
        samples = time_plan(spec, runs)
        print(f"{spec.stem:32} {statistics.median(samples):9.3f} {min(samples):7.3f} {max(samples):7.3f}")


if __name__ == "__main__":
    main()
