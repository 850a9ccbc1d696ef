"""Cold `provisioner plan --format json` from process start to printed report.

Usage: python bench/bench_cli.py [--runs 11] [--sizes 100000 1000000] [--workdir DIR]

1. Every example spec on the bundled catalog.
2. A typical spec (bench/bench_optimizer.py's SPEC) on synthetic columnar catalogs of each size
   (written once by bench/synthetic_catalog.py into --workdir), with the peak RSS of the run.
First the machine's baselines: a bare interpreter, and one importing only the libraries a plan
needs before any project code runs (FLOOR). Each run is a fresh interpreter timed with
perf_counter around subprocess.run; we report the median, min and max, and the largest peak
RSS (ru_maxrss of the children). Targets (issue 7): bundled <= 0.35 s, 100,000 offers
<= 0.45 s, 1,000,000 offers <= 2.5 s and <= 1 GB.

The project's modules are byte-compiled first, as `pip install .` does (with
PYTHONDONTWRITEBYTECODE=1, as on these machines, every run would otherwise recompile them).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = """\
name: bench
gpus: {model: [H100, H200, A100], count: 16, min_memory_gib: 40}
interconnect: {fabric: ethernet, min_gbps_per_node: 100}
storage: {checkpoint_nvme_gib_per_node: 400, shared: {kind: managed, size_gib: 2000}}
pricing: {mode: either, max_total_usd: 20000}
reliability: {min_score: 0.7}
workload: {hours: 24, dataset: {size_gb: 2000, location: "aws:us-east-1"}, results_out_gb: 50}
"""


def time_plan(args: list[str], runs: int) -> tuple[list[float], float]:
    samples, peak = [], 0.0
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "provisioner.cli", "plan", *args, "--format", "json"],
                       check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    return samples, peak


FLOOR = ("import os; os.environ.update(OPENBLAS_NUM_THREADS='1', PYDANTIC_DISABLE_PLUGINS='__all__'); "
         "import numpy, yaml, pydantic; from pydantic import BaseModel, Field; "
         "import pydantic._internal._generate_schema")
"""What a plan imports before any of this project's code runs: numpy (the columnar cost model), PyYAML
(the spec) and pydantic (the models; fixed by the design), with the CLI's own start-up settings."""


def time_python(code: str, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return samples


def row(label: str, samples: list[float], peak: float | None = None) -> str:
    rss = "" if peak is None else f" {peak:9.0f}"
    return f"{label:34} {statistics.median(samples):9.3f} {min(samples):7.3f} {max(samples):7.3f}{rss}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "provisioner-bench")
    args = parser.parse_args()
    for package in ("provisioner", "providers", "stacks", "templates"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    os.environ["PROVISIONER_CACHE_DIR"] = str(args.workdir / "cache")
    print(f"{'baseline':34} {'median s':>9} {'min s':>7} {'max s':>7}")
    print(row("python -c pass", time_python("pass", args.runs)))
    print(row("import floor (numpy, yaml, pydantic)", time_python(FLOOR, args.runs)))
    print(f"\n{'plan --format json':34} {'median s':>9} {'min s':>7} {'max s':>7}")
    for spec in sorted((ROOT / "examples").glob("*.yaml")):
        print(row(f"{spec.stem} (bundled)", time_plan([str(spec)], args.runs)[0]))
    args.workdir.mkdir(parents=True, exist_ok=True)
    spec = args.workdir / "spec.yaml"
    spec.write_text(SPEC)
    print(f"\n{'synthetic catalog':34} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9}")
    for n in args.sizes:
        catalog = args.workdir / f"offers-{n}.npz"
        if not catalog.is_file():
            subprocess.run([sys.executable, str(ROOT / "bench" / "synthetic_catalog.py"), str(n), str(catalog)],
                           check=True)
        samples, peak = time_plan([str(spec), "--catalog", str(catalog)], args.runs)
        print(row(f"{n:,} offers (.npz)", samples, peak))


if __name__ == "__main__":
    main()
