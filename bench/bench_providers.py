"""Bring up 32 nodes on every provider fake that exists and compare with the rate-limit bound.

Usage: ``python bench/bench_providers.py [--nodes 32] [--providers vastai,lambda] [--write-docs]``

For each provider whose fake hands the contract suite a harness (``contract_harness()`` in
the fake's module; Lambda, RunPod, Vast.ai and Fluence by default), the harness's fake is
served on a real 127.0.0.1 socket with a fixed per-call latency by route kind (``LATENCY_S``,
150-400 ms, the range of these providers' public APIs from a nearby region) and the adapter runs at the provider's
published rate limits times ``SCALE[name]`` (chosen so each run takes seconds to tens of
seconds, not minutes; Lambda's 1 launch / 12 s is otherwise minutes per launch call).
Instances in the fakes boot at once (``boot_polls = 0``): this measures the adapter, not
a host's boot.

Measured: wall time of ``create_nodes`` plus ``wait_until`` (polling ``get_nodes`` every
0.25 s) until all nodes are running.

Lower bound: what the rate limits and the unavoidable sequential calls impose, using the
calls the adapter actually made while creating (``calls`` column; so an adapter that makes
needless calls is visible there, and one that issues them serially shows in the ratio):

    bound = max((calls - burst) / requests_per_s, (launch calls - launch burst) / launches_per_s)
            + latency(list) + latency(launch) + latency(list)

(one listing before launching for idempotence, the last launch's answer, one confirming
poll). Target: measured / bound <= 1.2 for every provider.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import math
import os
import platform
import re
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from provisioner.errors import ProvisionerError  # noqa: E402
from provisioner.providers.base import NodeStatus  # noqa: E402
from provisioner.providers.http import RetryPolicy  # noqa: E402
from provisioner.testing.fakes.base import serve  # noqa: E402
from provisioner.waiting import wait_until  # noqa: E402

PROVIDERS = ("lambda", "runpod", "vastai", "fluence")
LATENCY_S = {"offers": 0.40, "launch": 0.35, "list": 0.20, "get": 0.15, "delete": 0.25, "keys": 0.15, "other": 0.15}
# Published limits x SCALE: Lambda 12 req/s, 1 launch/s; RunPod 3.2 req/s; Vast.ai 4 req/s,
# 2 launches/s; Fluence 8 req/s, 2 launches/s.
SCALE = {"lambda": 12.0, "runpod": 4.0, "vastai": 2.0, "fluence": 4.0}
TARGET_RATIO = 1.2
DOC = ROOT / "docs" / "benchmarks.md"
BENCH_DATE = "2026-11-22"


@dataclass
class Result:
    provider: str
    nodes: int
    scale: float
    calls: int
    launch_calls: int
    create_s: float
    measured_s: float
    bound_s: float
    note: str = ""
    diagnosis: str = ""

    @property
    def ratio(self) -> float:
        return self.measured_s / self.bound_s if self.bound_s else math.inf


def load(name: str) -> Any:
    """The provider's Harness, or None when it is absent or cannot run here (reason printed)."""
    from tests.providers.contract import harness_names, load_harness

    if name not in harness_names():
        return None

    try:
        return load_harness(name)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pytest.skip() in a harness is a BaseException
        print(f"{name}: harness unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def run_one(name: str, nodes: int) -> Result | None:
    harness = load(name)
    if harness is None:
        return None
    app = harness.app
    app.latency_s = dict(LATENCY_S)
    app.boot_polls = 0
    if hasattr(app, "option_capacity"):  # Fluence's fake stocks 8 machines per shape by default
        app.option_capacity = max(app.option_capacity, nodes)
    limits = harness.published_limits.scaled(SCALE.get(name, harness.scale))
    server = serve(app)
    try:
        provider = harness.make_provider(
            api_key=harness.api_key,
            base_url=server.url,
            limits=limits,
            timeout_s=30.0,
            retry=RetryPolicy(attempts=5, base_delay_s=0.2),
        )
        cluster_id = f"bench{uuid.uuid4().hex[:6]}"
        specs = harness.node_specs(nodes, "b")
        started = time.monotonic()
        created = provider.create_nodes(cluster_id, specs)
        create_s = time.monotonic() - started
        calls_during_create = len(app.calls)
        launch_calls = len(app.calls_of(harness.launch_route))
        diagnosis = diagnose(app.calls, app.calls_of(harness.launch_route), limits)
        wait_until(
            lambda: provider.get_nodes(cluster_id),
            lambda found: len(found) == nodes and all(n.status == NodeStatus.RUNNING for n in found),
            timeout_s=600,
            interval_s=0.25,
            max_interval_s=0.25,
            what=f"{name} nodes running",
        )
        measured_s = time.monotonic() - started
        provider.delete_nodes(cluster_id)
        # Some providers keep terminated instances listed (Fluence's ENDED): count the live ones.
        left = [
            n
            for n in wait_until(
                lambda: provider.get_nodes(cluster_id),
                lambda found: all(n.status == NodeStatus.TERMINATED for n in found),
                timeout_s=120,
                interval_s=0.25,
                what="cleanup",
            )
            if n.status != NodeStatus.TERMINATED
        ]
        live = harness.instances()
        note = (
            ""
            if len(created) == nodes and not left and live == 0
            else f"created {len(created)}, left {len(left)} (fake: {live} live)"
        )
        if app.validation_errors:
            note += f" {len(app.validation_errors)} OpenAPI validation errors"
    finally:
        server.stop()
    rate_s = max((calls_during_create - limits.burst) / limits.requests_per_s, 0.0)
    if limits.launches_per_s:
        rate_s = max(rate_s, (launch_calls - limits.launch_burst) / limits.launches_per_s)
    bound_s = rate_s + LATENCY_S["list"] + LATENCY_S["launch"] + LATENCY_S["list"]
    return Result(
        name,
        nodes,
        SCALE.get(name, harness.scale),
        calls_during_create,
        launch_calls,
        create_s,
        measured_s,
        bound_s,
        note.strip(),
        diagnosis,
    )


def diagnose(calls: list[Any], launches: list[Any], limits: Any) -> str:
    """Why a run may exceed its bound, read from the fake's call log (completion times).

    ``serial`` when the median gap between launch answers is at least the launch latency
    although the limits allowed them closer together; ``stalls`` when launches wait on
    other calls in between (gaps much longer than the launch rate needs).
    """
    if len(launches) < 2:
        return "one launch call"
    times = sorted(c.t for c in launches)
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    median = gaps[len(gaps) // 2]
    launch_rate = min(limits.requests_per_s, limits.launches_per_s or limits.requests_per_s)
    between = [c for c in calls if times[0] < c.t < times[-1] and c not in launches]
    if median >= 0.9 * LATENCY_S["launch"] and 1 / launch_rate < 0.9 * LATENCY_S["launch"]:
        return f"serial launches: median gap {median:.2f} s ~ one launch latency; rate allows {1 / launch_rate:.2f} s"
    if median > 1.3 / launch_rate and between:
        return (
            f"launches spaced {median:.2f} s (rate allows {1 / launch_rate:.2f} s) with {len(between)} "
            "other calls in between, issued serially"
        )
    return f"rate-bound: median launch gap {median:.2f} s, rate allows {1 / launch_rate:.2f} s"


def table(results: list[Result]) -> str:
    lines = [
        "| provider | nodes | limit scale | calls (launch) | create s | create+running s | bound s | ratio "
        "| diagnosis |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        flag = "" if r.ratio <= TARGET_RATIO else " (over target)"
        extra = f" {r.note}" if r.note else ""
        lines.append(
            f"| {r.provider} | {r.nodes} | x{r.scale:g} | {r.calls} ({r.launch_calls}) | "
            f"{r.create_s:.2f} | {r.measured_s:.2f} | {r.bound_s:.2f} | {r.ratio:.2f}{flag}{extra} | "
            f"{r.diagnosis} |"
        )
    return "\n".join(lines)


def section(results: list[Result], missing: list[str], failed: dict[str, str]) -> str:
    machine = (
        f"{platform.machine()} {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )
    absent = f" Not run (no harness yet): {', '.join(missing)}." if missing else ""
    absent += "".join(f" {name} failed: {reason}." for name, reason in failed.items())
    return (
        "## Providers\n\n"
        f"`python bench/bench_providers.py --write-docs`, {BENCH_DATE} (run at "
        f"{dt.datetime.now().strftime('%H:%M')}), {machine}. The CPU is shared with other engineers' "
        "work, so wall times carry some noise.\n\n"
        f"32 nodes per provider against its fake served on 127.0.0.1, per-call latency by route kind "
        f"{', '.join(f'{k} {int(v * 1000)} ms' for k, v in LATENCY_S.items())}; published rate limits times "
        "the scale shown; instances boot at once. *create+running* is `create_nodes` plus polling "
        "`get_nodes` until all run. *bound* = max((calls - burst) / request rate, (launch calls - launch "
        "burst) / launch rate) + list + launch + list latency. Target ratio <= 1.2. Lambda and RunPod "
        "limits are the published ones; Vast.ai publishes only its search limit and Fluence none, so their "
        "rows use the adapters' own conservative limits (`VAST_LIMITS`, fluence `LIMITS`). A note after "
        "the ratio flags a run that left live instances in the fake or broke the OpenAPI spec."
        f"{absent}\n\n{table(results)}\n"
    )


def write_docs(text: str) -> None:
    """Replace (or append) the ``## Providers`` section of docs/benchmarks.md, leaving others alone."""
    current = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Benchmarks\n\n"
    pattern = re.compile(r"^## Providers\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text + "\n", current, count=1)
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(updated.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--write-docs", action="store_true", help="update the Providers section of docs/benchmarks.md")
    args = parser.parse_args(argv)
    results: list[Result] = []
    missing: list[str] = []
    failed: dict[str, str] = {}
    for name in [p.strip() for p in args.providers.split(",") if p.strip()]:
        print(f"{name}: bringing up {args.nodes} nodes ...", flush=True)
        try:
            result = run_one(name, args.nodes)
        except ProvisionerError as exc:  # one provider's refusal must not hide the others' results
            print(f"{name}: FAILED: {exc}", flush=True)
            failed[name] = str(exc)
            continue
        if result is None:
            missing.append(name)
            continue
        results.append(result)
        print(
            f"{name}: {result.measured_s:.2f}s measured, bound {result.bound_s:.2f}s, ratio {result.ratio:.2f}",
            flush=True,
        )
    print(table(results))
    if args.write_docs:
        write_docs(section(results, missing, failed))
    return 0 if not failed and all(r.ratio <= TARGET_RATIO and not r.note for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
