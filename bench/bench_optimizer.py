"""Benchmark the optimizer's columnar core on synthetic offer tables.

Usage: python bench/bench_optimizer.py [--sizes 100000 1000000] [--repeat 7] [--seed 1]

Generates each table directly as numpy columns (building 10^6 pydantic Offers would
dominate the run), then times ``rank_table`` (median and best of ``--repeat`` runs) and
measures its peak traced memory with tracemalloc, in a separate pass so tracing does not
slow the timed runs. Also times ``resolve_plan`` end to end on a 500-offer Catalog.
Prints a Markdown table; paste it into docs/benchmarks.md ("Optimizer").
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from provisioner.costs import FABRICS
from provisioner.offer import Catalog, EgressTier, Offer, ProviderInfo
from provisioner.offer_table import OfferTable, rank_table
from provisioner.optimizer import resolve_plan
from provisioner.spec import ClusterSpec

PROVIDERS = ("aws", "gcp", "lambda", "runpod", "vastai", "fluence")
GPU_MODELS = ("H100", "H200", "A100", "B200", "L40S", "RTX4090", "GH200", "A10G")
REGIONS = (*(f"region-{i}" for i in range(40)), "us-east-1")


def provider_infos() -> dict[str, ProviderInfo]:
    tiers = [EgressTier(up_to_gb=10_240, usd_per_gb=0.09), EgressTier(up_to_gb=None, usd_per_gb=0.085)]
    return {
        name: ProviderInfo(
            source="synthetic",
            internet_egress_tiers=tiers if name in ("aws", "gcp") else [],
            free_egress_gb=100 if name == "aws" else 0,
            inter_region_usd_per_gb=0.02 if name in ("aws", "gcp") else 0,
            shared_storage_usd_per_gib_month=None if name in ("vastai", "fluence") else 0.2,
            boot_minutes=3 + i,
        )
        for i, name in enumerate(PROVIDERS)
    }


def synthetic_table(n: int, seed: int) -> OfferTable:
    """``n`` random offers as columns; ``key_rank`` is the generation order."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice(np.array([1, 2, 4, 8]), n)
    price = rng.uniform(0.3, 5.0, n) * gpus
    spot = np.where(rng.random(n) < 0.5, price * rng.uniform(0.3, 0.8, n), np.nan)
    return OfferTable(
        providers=PROVIDERS,
        regions=REGIONS,
        gpu_models=GPU_MODELS,
        provider_idx=rng.integers(0, len(PROVIDERS), n, dtype=np.int32),
        region_idx=rng.integers(0, len(REGIONS), n, dtype=np.int32),
        gpu_model_idx=rng.integers(0, len(GPU_MODELS), n, dtype=np.int32),
        gpus=gpus,
        gpu_memory_gib=rng.choice(np.array([24.0, 48.0, 80.0, 141.0]), n),
        local_nvme_gib=rng.choice(np.array([0.0, 500.0, 2000.0, 8000.0]), n),
        fabric_idx=rng.integers(0, len(FABRICS) - 1, n, dtype=np.int8),
        fabric_gbps=rng.choice(np.array([10.0, 100.0, 400.0, 3200.0]), n),
        price_per_hour_usd=np.where(rng.random(n) < 0.9, price, np.nan),
        spot_price_per_hour_usd=spot,
        billing_increment_s=rng.choice(np.array([1.0, 60.0, 3600.0]), n),
        billing_minimum_s=rng.choice(np.array([0.0, 60.0, 10800.0]), n),
        egress_usd_per_gb=rng.choice(np.array([0.0, 0.0, 0.01, 0.05]), n),
        ingress_usd_per_gb=rng.choice(np.array([0.0, 0.0, 0.01]), n),
        disk_usd_per_gib_hour=rng.choice(np.array([0.0, 0.0001]), n),
        interruptions_per_node_hour=rng.uniform(1e-4, 1e-3, n),
        spot_interruptions_per_node_hour=np.where(rng.random(n) < 0.8, rng.uniform(0.005, 0.05, n), np.nan),
        reliability=rng.uniform(0.6, 1.0, n),
        max_nodes=rng.choice(np.array([1, 2, 8, 64]), n),
        available=rng.random(n) < 0.95,
        key_rank=np.arange(n, dtype=np.int64),
    )


# A typical request: most offers fail some check; a few percent are priced and ranked.
SPEC = ClusterSpec.model_validate({
    "name": "bench",
    "gpus": {"model": ["H100", "H200", "A100"], "count": 16, "min_memory_gib": 40},
    "interconnect": {"fabric": "ethernet", "min_gbps_per_node": 100},
    "storage": {"checkpoint_nvme_gib_per_node": 400, "shared": {"kind": "managed", "size_gib": 2000}},
    "pricing": {"mode": "either", "max_total_usd": 20000},
    "reliability": {"min_score": 0.7},
    "workload": {"hours": 24, "dataset": {"size_gb": 2000, "location": "aws:us-east-1"}, "results_out_gb": 50},
})
# The worst case for the sort: 8 GPUs of any kind, spot or on-demand, so most candidates are feasible.
PERMISSIVE = ClusterSpec.model_validate({"name": "bench-all", "gpus": {"count": 8}, "pricing": {"mode": "either"}})


def bench_core(spec: ClusterSpec, n: int, repeat: int, seed: int) -> dict[str, float]:
    table = synthetic_table(n, seed)
    infos = provider_infos()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ranking = rank_table(spec, table, infos)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    rank_table(spec, table, infos)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    table_bytes = sum(getattr(table, f).nbytes for f in table.__dataclass_fields__ if f.endswith(
        ("_idx", "_gib", "_usd", "_s", "_gb", "_hour", "gpus", "reliability", "max_nodes", "available", "key_rank")
    ))
    return {
        "n": n, "median_ms": statistics.median(times) * 1e3, "best_ms": min(times) * 1e3,
        "peak_mib": peak / 2**20, "table_mib": table_bytes / 2**20,
        "feasible": len(ranking.order), "candidates": len(ranking),
    }


def _price(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def bench_resolve(n: int, repeat: int) -> float:
    table = synthetic_table(n, 7)
    infos = provider_infos()
    offers = [
        Offer(
            provider=PROVIDERS[table.provider_idx[i]], instance_type=f"type-{i}", region=REGIONS[table.region_idx[i]],
            gpu_model=GPU_MODELS[table.gpu_model_idx[i]], gpus=int(table.gpus[i]),
            gpu_memory_gib=float(table.gpu_memory_gib[i]), vcpus=8, memory_gib=64,
            local_nvme_gib=float(table.local_nvme_gib[i]), fabric=FABRICS[table.fabric_idx[i]],
            fabric_gbps=float(table.fabric_gbps[i]), price_per_hour_usd=_price(table.price_per_hour_usd[i]),
            spot_price_per_hour_usd=_price(table.spot_price_per_hour_usd[i]),
            interruptions_per_node_hour=float(table.interruptions_per_node_hour[i]),
            interruption_basis="synthetic", max_nodes=int(table.max_nodes[i]),
        )
        for i in range(n)
    ]
    catalog = Catalog(as_of=dt.date(2026, 11, 22), providers=infos, offers=offers)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        resolve_plan(SPEC, catalog)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cold_start_ms(code: str, repeat: int) -> float:
    """Median wall time of a fresh interpreter running ``code`` (process start included)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


COLD_PLAN = (
    "from provisioner.catalog import load_bundled_catalog; from provisioner.optimizer import resolve_plan; "
    "from provisioner.spec import ClusterSpec; "
    "resolve_plan(ClusterSpec(name='cold', gpus={'count': 8}, pricing={'mode': 'either'}), load_bundled_catalog())"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print("| spec | offers | candidates | feasible | median ms | best ms | peak traced MiB | table MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, spec in (("typical", SPEC), ("permissive", PERMISSIVE)):
        for n in args.sizes:
            r = bench_core(spec, n, args.repeat, args.seed)
            print(f"| {label} | {r['n']:,} | {r['candidates']:,} | {r['feasible']:,} | {r['median_ms']:.1f} | "
                  f"{r['best_ms']:.1f} | {r['peak_mib']:.0f} | {r['table_mib']:.0f} |")
    print(f"\nresolve_plan, 500-offer Catalog: median {bench_resolve(500, args.repeat):.1f} ms")
    print(f"cold start, median of {args.repeat} fresh interpreters:")
    for label, code in (("python -c pass", "pass"), ("import numpy", "import numpy"),
                        ("import provisioner.optimizer", "import provisioner.optimizer"),
                        ("resolve_plan on the bundled catalog", COLD_PLAN)):
        print(f"  {label}: {cold_start_ms(code, args.repeat):.0f} ms")
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
