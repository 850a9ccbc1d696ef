"""The same synthetic catalog read by a widely used peer, SkyPilot, for bench/bench_cli.py.

Usage: python bench/peer_skypilot.py CATALOG.npz HOME  (writes HOME/.sky/catalogs/v8/lambda/vms.csv)

SkyPilot keeps its offers as one CSV per cloud and loads it with pandas in every process; its
optimizer asks the catalog for the instance types that carry N accelerators, cheapest first
(``sky.catalog.get_instance_type_for_accelerator``), then their hourly cost. We write every
synthetic offer as a row of its Lambda catalog (columns of SkyPilot's schema v8; instance type
and offer id joined so each row is its own type) and time that query from a fresh interpreter
of a separate virtual environment with ``pip install skypilot`` (QUERY). The CSV carries a fresh
mtime, so SkyPilot reads it as it is and fetches nothing. It is not our plan: no egress, storage,
budgets or multi-node fitting, so it is the peer's cost of a first look at a catalog this size.
"""

from __future__ import annotations

import sys
from pathlib import Path

QUERY = (
    "import sky.catalog as c; t, _ = c.get_instance_type_for_accelerator('H100', 8, clouds='lambda'); "
    "print(len(t), t[0], c.get_hourly_cost(t[0], use_spot=False, region=None, zone=None, clouds='lambda'))"
)
FLOOR = "import sky.catalog, pandas"
"""The peer's import floor: its catalog module and pandas, no catalog read."""
SCHEMA = "v8"
"""SkyPilot's catalog schema (``sky.skylet.constants.CATALOG_SCHEMA_VERSION`` of 0.14)."""


def write_csv(catalog: Path, home: Path) -> Path:
    """The columnar ``catalog`` as SkyPilot's ``lambda/vms.csv`` under ``home``; its path."""
    from provisioner.catalog import load_columnar

    table = load_columnar(catalog).table
    v = table.values

    def texts(name: str) -> list[str]:
        names = table.dictionary(name)
        return [names[c] if c >= 0 else "" for c in v[name].tolist()]

    types, ids, regions, models = texts("instance_type"), texts("offer_id"), texts("region"), texts("gpu_model")
    path = home / ".sky" / "catalogs" / SCHEMA / "lambda" / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,GpuInfo\n")
        for i, (micro, gpus, vcpus, memory) in enumerate(
            zip(
                v["price_micro"].tolist(),
                v["gpus"].tolist(),
                v["vcpus"].tolist(),
                v["memory_gib"].tolist(),
                strict=True,
            )
        ):
            price = "" if micro < 0 else f"{micro // 10**6}.{micro % 10**6:06d}"
            out.write(f"{types[i]}-{ids[i]},{models[i]},{gpus},{vcpus},{memory},{price},,{regions[i]},\n")
    return path


if __name__ == "__main__":
    print(write_csv(Path(sys.argv[1]), Path(sys.argv[2])))
