"""Benchmark the cost model (``offer_table.rank_table``) on synthetic columnar offer tables.

Usage: python bench/bench_optimizer.py [--sizes 100000 1000000] [--repeat 7] [--seed 1]

Tables come from ``bench/synthetic_catalog.py`` (numpy columns, no Offer models). Times
``rank_table`` (median and best of ``--repeat`` runs), its peak traced memory (tracemalloc, in a
separate pass), and ``resolve_plan`` end to end (options, quotes, rejection groups) on the same
table. Prints a Markdown table; paste it into docs/benchmarks.md ("Optimizer").
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_catalog import provider_infos, synthetic_table

from provisioner.capabilities import Capability
from provisioner.catalog import TableCatalog
from provisioner.offer_table import rank_table
from provisioner.optimizer import resolve_plan
from provisioner.spec import PROVIDER_NAMES, ClusterSpec

# A typical request: most offers fail some check; a few percent are priced and ranked.
SPEC = ClusterSpec.model_validate(
    {
        "name": "bench",
        "gpus": {"model": ["H100", "H200", "A100"], "count": 16, "min_memory_gib": 40},
        "interconnect": {"fabric": "ethernet", "min_gbps_per_node": 100},
        "storage": {"checkpoint_nvme_gib_per_node": 400, "shared": {"kind": "managed", "size_gib": 2000}},
        "pricing": {"mode": "either", "max_total_usd": 20000},
        "reliability": {"min_score": 0.7},
        "workload": {"hours": 24, "dataset": {"size_gb": 2000, "location": "aws:us-east-1"}, "results_out_gb": 50},
    }
)
# The worst case: 8 GPUs of any kind, spot or on-demand, so most candidates are priced and feasible.
PERMISSIVE = ClusterSpec.model_validate({"name": "bench-all", "gpus": {"count": 8}, "pricing": {"mode": "either"}})
CAPS = dict.fromkeys(PROVIDER_NAMES, frozenset(Capability))


def bench(spec: ClusterSpec, n: int, repeat: int, seed: int) -> dict[str, float]:
    table = synthetic_table(n, seed)
    infos = provider_infos()
    catalog = TableCatalog(as_of=dt.date(2026, 11, 22), origin="synthetic", providers=infos, table=table)
    core, full = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        ranking = rank_table(spec, table, infos, CAPS)
        core.append(time.perf_counter() - start)
        start = time.perf_counter()
        resolve_plan(spec, catalog, CAPS)
        full.append(time.perf_counter() - start)
    tracemalloc.start()
    resolve_plan(spec, catalog, CAPS)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    table_bytes = sum(a.nbytes for a in table.values.values()) + sum(a.nbytes for a in table.names.values())
    return {
        "n": n,
        "core_ms": statistics.median(core) * 1e3,
        "best_ms": min(core) * 1e3,
        "resolve_ms": statistics.median(full) * 1e3,
        "peak_mib": peak / 2**20,
        "table_mib": table_bytes / 2**20,
        "feasible": ranking.feasible_count,
        "candidates": len(ranking.stage),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print(
        "| spec | offers | candidates | feasible | rank_table median ms | best ms | resolve_plan median ms "
        "| peak traced MiB | table MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, spec in (("typical", SPEC), ("permissive", PERMISSIVE)):
        for n in args.sizes:
            r = bench(spec, n, args.repeat, args.seed)
            print(
                f"| {label} | {r['n']:,} | {r['candidates']:,} | {r['feasible']:,} | {r['core_ms']:.1f} | "
                f"{r['best_ms']:.1f} | {r['resolve_ms']:.1f} | {r['peak_mib']:.0f} | {r['table_mib']:.0f} |"
            )


if __name__ == "__main__":
    main()
