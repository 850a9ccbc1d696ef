"""Real ``provisioner up`` / ``down`` wall time per neocloud, the Pulumi engine beside the direct one.

Usage: PROVISIONER_PULUMI_BIN=DIR python bench/bench_pulumi_engine.py [--providers lambda runpod vastai fluence]

Each run is the installed CLI in a fresh machine of its own (tests.pulumi_lab.Machine: state dir,
PULUMI_HOME and file backend in a temporary folder) against the provider's fake on 127.0.0.1, with
the plan tests/test_pulumi_real.py brings up; SSH goes to the recording stand-in, so the figures are
the engine's own cost plus the fake's pace (each fake's instances take a few polls to run, at the
adapters' own poll interval). The load average is printed: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest

from provisioner.plan import save_plan
from tests.pulumi_lab import Machine, plan_of
from tests.test_lifecycle_support import API_KEYS, served_fake


def one(name: str, engine: str, bin_dir: Path, folder: Path) -> tuple[float, float]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")
        plan = plan_of(name, folder)
        plan_file = folder / "plan.json"
        save_plan(plan, plan_file)
        with served_fake(name, monkeypatch) as (app, server):
            prefix = f"PROVISIONER_{name.upper()}"
            fake = {f"{prefix}_API_URL": server.url, f"{prefix}_API_KEY": os.environ[f"{prefix}_API_KEY"]}
            user = Machine(folder / "m", bin_dir, fake, nodes=[n.name for n in plan.nodes])
            try:
                start = time.perf_counter()
                up = user.cli("up", str(plan_file), "--engine", engine)
                up_s = time.perf_counter() - start
                assert up.code == 0, up.err[-2000:]
                start = time.perf_counter()
                down = user.cli("down", plan.cluster_id)
                down_s = time.perf_counter() - start
                assert down.code == 0 and app.instance_count() == 0, down.err[-2000:]
            finally:
                user.close()
    return up_s, down_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--providers", nargs="+", default=["lambda", "runpod", "vastai", "fluence"])
    args = parser.parse_args()
    bin_dir = Path(os.environ["PROVISIONER_PULUMI_BIN"])
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    for name in args.providers:
        row = []
        for engine in ("direct", "pulumi"):
            with tempfile.TemporaryDirectory() as folder:
                up_s, down_s = one(name, engine, bin_dir, Path(folder))
            row.append(f"{engine}: up {up_s:.1f} s, down {down_s:.1f} s")
        print(f"{name}: {'; '.join(row)}; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
