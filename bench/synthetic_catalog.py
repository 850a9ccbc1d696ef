"""Write a synthetic offer catalog of N offers as a columnar ``.npz`` (and optionally JSON).

Usage: python bench/synthetic_catalog.py N OUT.npz [--json OUT.json] [--seed 1]

Columns are generated directly with numpy (no Offer model per offer) and saved through
``provisioner.catalog.save_columnar``, so the file is exactly what ``--catalog FILE.npz`` reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np

from provisioner.catalog import TableCatalog, save_columnar
from provisioner.columns import ENUMS, IDS, TEXTS, OfferTable
from provisioner.offer import EgressTier, ProviderInfo

PROVIDERS = ("aws", "gcp", "lambda", "runpod", "vastai", "fluence")
GPU_MODELS = ("H100", "H200", "A100", "B200", "L40S", "RTX4090", "GH200", "A10G")
REGIONS = (*(f"region-{i}" for i in range(40)), "us-east-1")


def provider_infos() -> dict[str, ProviderInfo]:
    tiers = [EgressTier(up_to_gb=10_240, usd_per_gb=Decimal("0.09")), EgressTier(usd_per_gb=Decimal("0.085"))]
    return {
        name: ProviderInfo(
            source="synthetic",
            internet_egress_tiers=tiers if name in ("aws", "gcp") else [],
            free_egress_gb=100 if name == "aws" else 0,
            inter_region_usd_per_gb=Decimal("0.02") if name in ("aws", "gcp") else Decimal(0),
            shared_storage_usd_per_gib_month=None if name in ("vastai", "fluence") else Decimal("0.2"),
            boot_minutes=3 + i,
        )
        for i, name in enumerate(PROVIDERS)
    }


def synthetic_table(n: int, seed: int) -> OfferTable:
    rng = np.random.default_rng(seed)
    gpus = rng.choice(np.array([1, 2, 4, 8], dtype=np.int32), n)
    price = (rng.integers(3_000, 50_000, n) * 100 * gpus).astype(np.int64)  # micro-USD, cents precision
    spot = np.where(rng.random(n) < 0.5, price * rng.integers(3, 8, n) // 10, -1)
    names = {
        "provider": np.array([p.encode() for p in PROVIDERS]),
        "region": np.array([r.encode() for r in REGIONS]),
        "gpu_model": np.array([g.encode() for g in GPU_MODELS]),
        "instance_type": np.array([f"type-{i}".encode() for i in range(64)]),
        "zone": np.array([], "S1"),
        "offer_id": np.char.add(b"o", np.arange(n).astype("S9")),
        "interruption_basis": np.array([b"synthetic"]),
        "how_to_obtain": np.array([], "S1"),
        "source": np.array([], "S1"),
        "block_start": np.array([], "S1"),
    }
    v: dict[str, np.ndarray] = {
        "provider": rng.integers(0, len(PROVIDERS), n, dtype=np.int32),
        "region": rng.integers(0, len(REGIONS), n, dtype=np.int32),
        "gpu_model": rng.integers(0, len(GPU_MODELS), n, dtype=np.int32),
        "instance_type": rng.integers(0, 64, n, dtype=np.int32),
        "zone": np.full(n, -1, np.int32),
        "offer_id": np.arange(n, dtype=np.int32),
        "interruption_basis": np.zeros(n, np.int32),
        "how_to_obtain": np.full(n, -1, np.int32),
        "source": np.full(n, -1, np.int32),
        "block_start": np.full(n, -1, np.int32),
        "block_hours": np.zeros(n, np.int32),
        "gpus": gpus,
        "vcpus": np.full(n, 32, np.int32),
        "gpu_memory_gib": rng.choice(np.array([24.0, 48.0, 80.0, 141.0]), n),
        "memory_gib": np.full(n, 256.0),
        "local_nvme_gib": rng.choice(np.array([0.0, 500.0, 2000.0, 8000.0]), n),
        "fabric_gbps": rng.choice(np.array([10.0, 100.0, 400.0, 3200.0]), n),
        "billing_increment_s": rng.choice(np.array([1, 60, 3600], dtype=np.int64), n),
        "billing_minimum_s": rng.choice(np.array([0, 60, 10800], dtype=np.int64), n),
        "interruptions_per_node_hour": rng.uniform(1e-4, 1e-3, n),
        "spot_interruptions_per_node_hour": np.where(rng.random(n) < 0.8, rng.uniform(0.005, 0.05, n), np.nan),
        "reliability": rng.uniform(0.6, 1.0, n),
        "max_nodes": rng.choice(np.array([1, 2, 8, 64], np.int32), n),
        "min_nodes": np.ones(n, np.int32),
        "price_micro": np.where(rng.random(n) < 0.9, price, -1),
        "spot_price_micro": spot,
        "price_rest": np.zeros(n, np.int64),
        "spot_price_rest": np.zeros(n, np.int64),
        "egress_nano": rng.choice(np.array([0, 0, 10_000_000, 50_000_000], np.int64), n),
        "ingress_nano": rng.choice(np.array([0, 0, 10_000_000], np.int64), n),
        "disk_nano": rng.choice(np.array([0, 136_986], np.int64), n),
        "fabric": rng.integers(0, len(ENUMS["fabric"]) - 1, n, dtype=np.int8),
        "purchase": np.zeros(n, np.int8),
        "bootstrap": rng.integers(0, 3, n, dtype=np.int8),
        "network": rng.choice(np.array([0, 3], np.int8), n),
        "available": rng.random(n) < 0.95,
        "as_of_days": np.full(n, -1, np.int32),
    }
    both_missing = (v["price_micro"] < 0) & (v["spot_price_micro"] < 0)
    v["price_micro"][both_missing] = price[both_missing]
    v["key_rank"] = np.arange(n, dtype=np.int64)  # provider/region/type keys are random: any permutation is valid
    assert set(names) == set(IDS) | set(TEXTS)
    return OfferTable(values=v, names=names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    catalog = TableCatalog(
        as_of=dt.date(2026, 11, 22),
        origin=str(args.out),
        providers=provider_infos(),
        table=synthetic_table(args.n, args.seed),
    )
    save_columnar(catalog, args.out)
    if args.json:
        write_json(catalog, args.json)


def write_json(catalog: TableCatalog, path: Path) -> None:
    """The catalog as a JSON file, row by row from the columns (no Offer model: 10^6 rows in seconds)."""
    import json

    from provisioner.columns import NUMBERS, PRICE_RESTS, PRICES, RATES

    t = catalog.table
    v, n = t.values, len(t)
    fields: dict[str, list] = {}
    for name in (*IDS, *TEXTS):
        dictionary = t.dictionary(name)
        fields[name] = [None if c < 0 else dictionary[c] for c in v[name].tolist()]
    for name, (dtype, *_rest) in NUMBERS.items():
        fields[name] = [None if dtype == "float64" and x != x else x for x in v[name].tolist()]
    for name, column in PRICES.items():
        fields[name] = [
            None if m < 0 else f"{Decimal(m * 10**6 + r).scaleb(-12).normalize():f}"
            for m, r in zip(v[column].tolist(), v[PRICE_RESTS[column]].tolist(), strict=True)
        ]
    for name, column in RATES.items():
        fields[name] = [f"{Decimal(x).scaleb(-9).normalize():f}" for x in v[column].tolist()]
    for name, members in ENUMS.items():
        fields[name] = [str(members[c]) for c in v[name].tolist()]
    fields["available"] = v["available"].tolist()
    providers = {name: info.model_dump(mode="json", exclude_none=True) for name, info in catalog.providers.items()}
    with path.open("w", encoding="utf-8") as out:
        out.write(f'{{"as_of": "{catalog.as_of.isoformat()}", "providers": {json.dumps(providers)}, "offers": [\n')
        names = list(fields)
        for i, values in enumerate(zip(*(fields[k] for k in names), strict=True)):
            row = {k: x for k, x in zip(names, values, strict=True) if x is not None}
            out.write(("" if i == 0 else ",\n") + json.dumps(row))
        out.write("\n]}\n")
    assert n == len(fields["gpus"])


if __name__ == "__main__":
    main()
