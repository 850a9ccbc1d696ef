"""Cold `provisioner plan --format json` from process start to printed report.

Usage: python bench/bench_cli.py [--runs 11] [--sizes 100000 1000000] [--json-sizes 100000 1000000]
       [--workdir DIR] [--peer-python VENV/bin/python] [--skip-bundled]

1. Every example spec on the bundled catalog.
2. A typical spec (bench/bench_optimizer.py's SPEC) on synthetic columnar catalogs of each size
   (written once by bench/synthetic_catalog.py into --workdir), with the peak RSS of the run.
3. The first plan on a JSON catalog of each --json-sizes never seen before (read by
   provisioner.catalog_json, then compiled into the cache), and the next one from that cache;
   wall and CPU seconds (median and min) and the peak RSS, under the import floor's own. With
   --peer-python, the same offers read by SkyPilot from a separate virtual environment
   (bench/peer_skypilot.py).
First the machine's baselines: a bare interpreter, and one importing only the libraries a plan
needs before any project code runs (FLOOR). Each bundled plan is run alternately with the floor
and printed with how far its median wall and CPU seconds are over that floor's. Each run is a
fresh interpreter, timed with perf_counter around subprocess.run by a parent of its own, which
also reads its CPU seconds (user + sys) and peak RSS (ru_maxrss); we report medians and minima.
Targets (issue 18): first plan on a new 100,000-offer JSON catalog <= 0.8 s and <= 300 MB, on
1,000,000 <= 6 s and <= 1.5 GB; from the compiled cache <= 0.3 s at 10^5; bundled within 0.15 s
of the import floor. The load average is printed: the machine is shared.

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
        subprocess.run(
            [sys.executable, "-m", "provisioner.cli", "plan", *args, "--format", "json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        samples.append(time.perf_counter() - start)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    return samples, peak


FLOOR = (
    "import os; os.environ.update(OPENBLAS_NUM_THREADS='1', PYDANTIC_DISABLE_PLUGINS='__all__'); "
    "import numpy, yaml, pydantic; from pydantic import BaseModel, Field; "
    "import pydantic._internal._generate_schema"
)
"""What a plan imports before any of this project's code runs: numpy (the columnar cost model), PyYAML
(the spec) and pydantic (the models; fixed by the design), with the CLI's own start-up settings."""


def measured(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MiB) of one run of ``command``, through a child of its own: ru_maxrss of
    the children is the largest so far, so each run is measured by a fresh parent."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        f"subprocess.run({command!r}, stdout=subprocess.DEVNULL, check=True); w = time.perf_counter() - t; "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(w, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    wall, cpu, peak = map(float, out.stdout.split())
    return wall, cpu, peak


def first_touch(spec: Path, catalog: Path, runs: int, workdir: Path) -> tuple[list[tuple[float, float, float]], ...]:
    """Plans on a JSON catalog never seen before (a fresh compiled cache each run), then from the cache."""
    import shutil

    first, cached = [], []
    env = {**os.environ, "PROVISIONER_CACHE_DIR": str(workdir / "cache-json")}
    command = [
        sys.executable,
        "-m",
        "provisioner.cli",
        "plan",
        str(spec),
        "--catalog",
        str(catalog),
        "--format",
        "json",
    ]
    for _ in range(runs):
        shutil.rmtree(workdir / "cache-json", ignore_errors=True)
        first.append(measured(command, env))
        cached.append(measured(command, env))
    return first, cached


def peer(python: str, npz: Path, runs: int, workdir: Path) -> tuple[list[tuple[float, float, float]], ...]:
    """SkyPilot's first look at the same offers (bench/peer_skypilot.py), and its import floor."""
    sys.path.insert(0, str(ROOT / "bench"))
    from peer_skypilot import FLOOR as PEER_FLOOR
    from peer_skypilot import QUERY, write_csv

    home = workdir / f"peer-home-{npz.stem}"
    csv = write_csv(npz, home)
    env = {**os.environ, "HOME": str(home), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    query, floor = [], []
    for _ in range(runs):
        os.utime(csv)  # fresh: SkyPilot fetches a catalog older than its pull interval
        query.append(measured([python, "-c", QUERY], env))
        floor.append(measured([python, "-c", PEER_FLOOR], env))
    return query, floor


def line(label: str, samples: list[tuple[float, float, float]]) -> str:
    walls, cpus, peaks = zip(*samples, strict=True)
    return (
        f"{label:40} {statistics.median(walls):8.3f} {min(walls):7.3f} {statistics.median(cpus):8.3f} "
        f"{min(cpus):7.3f} {max(peaks):9.0f}"
    )


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def row(label: str, samples: list[float], peak: float | None = None) -> str:
    rss = "" if peak is None else f" {peak:9.0f}"
    return f"{label:34} {statistics.median(samples):9.3f} {min(samples):7.3f} {max(samples):7.3f}{rss}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument(
        "--json-sizes",
        type=int,
        nargs="*",
        default=[100_000],
        help="first plan on a new JSON catalog of each size, then from its compiled cache",
    )
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "provisioner-bench")
    parser.add_argument(
        "--peer-python",
        help="python of a separate venv with `pip install skypilot`: "
        "time the peer on the same offers (bench/peer_skypilot.py)",
    )
    parser.add_argument("--skip-bundled", action="store_true", help="only the synthetic catalogs")
    args = parser.parse_args()
    for package in ("provisioner", "providers", "stacks", "templates"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    os.environ["PROVISIONER_CACHE_DIR"] = str(args.workdir / "cache")
    print(
        f"{'baseline':40} {'wall med':>8} {'min':>7} {'CPU med':>8} {'min':>7} {'peak MiB':>9}   "
        f"(load before: {load()})"
    )
    print(line("python -c pass", [measured([sys.executable, "-c", "pass"]) for _ in range(args.runs)]))
    print(
        line(
            "import floor (numpy, yaml, pydantic)", [measured([sys.executable, "-c", FLOOR]) for _ in range(args.runs)]
        )
    )
    if not args.skip_bundled:
        print(
            f"\n{'plan --format json, bundled catalog':40} {'wall med':>8} {'min':>7} {'CPU med':>8} {'min':>7} "
            f"{'peak MiB':>9}   over the floor run beside it: wall med, CPU med"
        )
    for spec in [] if args.skip_bundled else sorted((ROOT / "examples").glob("*.yaml")):
        command = [sys.executable, "-m", "provisioner.cli", "plan", str(spec), "--format", "json"]
        floor, samples = [], []
        for _ in range(args.runs):  # interleaved, so both see the same load
            floor.append(measured([sys.executable, "-c", FLOOR]))
            samples.append(measured(command))
        over = [statistics.median(s[i] for s in samples) - statistics.median(f[i] for f in floor) for i in (0, 1)]
        print(f"{line(spec.stem, samples)}   {over[0]:+.3f} {over[1]:+.3f}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    spec = args.workdir / "spec.yaml"
    spec.write_text(SPEC)
    print(f"\n{'synthetic catalog':34} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9}")
    for n in args.sizes:
        catalog = args.workdir / f"offers-{n}.npz"
        if not catalog.is_file():
            subprocess.run(
                [sys.executable, str(ROOT / "bench" / "synthetic_catalog.py"), str(n), str(catalog)], check=True
            )
        samples, peak = time_plan([str(spec), "--catalog", str(catalog)], args.runs)
        print(row(f"{n:,} offers (.npz)", samples, peak))
    if args.json_sizes:
        print(
            f"\n{'first plan on a new JSON catalog':40} {'wall med':>8} {'min':>7} {'CPU med':>8} {'min':>7} "
            f"{'peak MiB':>9}   (load before: {load()})"
        )
        print(
            line(
                "import floor (numpy, yaml, pydantic)",
                [measured([sys.executable, "-c", FLOOR]) for _ in range(args.runs)],
            )
        )
    for n in args.json_sizes:
        catalog = args.workdir / f"offers-{n}.json"
        npz = args.workdir / f"offers-{n}-for-json.npz"
        if not catalog.is_file():
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "bench" / "synthetic_catalog.py"),
                    str(n),
                    str(npz),
                    "--json",
                    str(catalog),
                ],
                check=True,
            )
        first, cached = first_touch(spec, catalog, args.runs, args.workdir)
        print(line(f"{n:,} offers (.json, first plan)", first))
        print(line(f"{n:,} offers (.json, from cache)", cached))
        if args.peer_python:
            query, floor = peer(args.peer_python, npz, args.runs, args.workdir)
            print(line(f"{n:,} offers, peer (SkyPilot catalog)", query))
            print(line("peer import floor (sky.catalog, pandas)", floor))
    print(f"\nload average after: {load()} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
