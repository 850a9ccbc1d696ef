"""50 seeded random-fault creates per neocloud provider, each followed by ``gc --yes``.

Faults (provisioner.testing.fakes.base): 429s, 5xx, lost answers (the fake performs the call
and drops the answer, as a read timeout or a dropped connection), failing lists, capacity
after k, insufficient balance, and failing deletes during the rollback. After each create:

- a create either returns every node or raises a ProviderError (never anything else);
- no launch is duplicated: the fake launched at most as many instances as nodes were asked;
- fail closed: an error that does not say "instances may exist" left no live instance of the
  cluster behind, and one that does names the gc command;
- after ``collect_garbage(delete=True)`` (faults cleared) the fake holds no live instance.

In process (``FakeTransport``), no real sleeps (retry sleep injected, limits lifted), OpenAPI
validation off (the contract suite checks shapes; this one checks behaviour, fast).
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import ProviderError
from provisioner.lifecycle.gc import collect_garbage
from provisioner.lifecycle.state import ClusterRecord
from provisioner.providers.base import NodeStatus, Provider
from provisioner.providers.http import RateLimits, RetryPolicy
from provisioner.testing.fakes.base import FakeApp, FakeTransport
from tests.providers.contract import load_harness, neocloud_names
from tests.providers.harness import Harness
from tests.test_gc import gone_here

ROUNDS = 50
NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
FAST = RetryPolicy(attempts=3, base_delay_s=0.0, max_delay_s=0.0, sleep=lambda _: None)
UNLIMITED = RateLimits(1e6, 1e6, 1e6, 1e6)
LIVE = (NodeStatus.PENDING, NodeStatus.RUNNING)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))  # gc's locks and lease place


@dataclass
class Rig:
    harness: Harness
    fake: FakeApp
    provider: Provider


def rig_for(name: str) -> Rig:
    harness = load_harness(name)
    fake = type(harness.app)(api_key=harness.api_key, validate=False)
    harness.app = fake
    fake.sleep = lambda _: None
    provider = harness.make_provider(
        api_key=harness.api_key,
        base_url=f"http://{name}.test",
        transport=FakeTransport(fake),
        limits=UNLIMITED,
        timeout_s=5.0,
        retry=FAST,
    )
    return Rig(harness, fake, provider)


def random_faults(rng: random.Random, h: Harness, nodes: int) -> list[dict[str, Any]]:
    """One to three faults drawn from the menu, on the launch, list, delete or any route."""

    def where() -> str | None:
        return rng.choice([h.launch_route, h.launch_route, h.list_route, "delete", None])

    menu = [
        lambda: {"kind": "rate_limit", "route": where(), "times": rng.randint(1, 4), "retry_after_s": 0},
        lambda: {
            "kind": "http_error",
            "route": where(),
            "times": rng.randint(1, 3),
            "status": rng.choice([500, 502, 503, 504]),
        },
        lambda: {
            "kind": "lose_answer",
            "route": h.launch_route,
            "times": rng.randint(1, 2),
            "after": rng.randint(0, nodes - 1),
            "as_timeout": rng.random() < 0.5,
        },
        lambda: {
            "kind": "lose_answer",
            "route": rng.choice([h.list_route, "delete"]),
            "times": rng.randint(1, 2),
            "as_timeout": rng.random() < 0.5,
        },
        lambda: {
            "kind": "http_error",
            "route": h.list_route,
            "times": rng.randint(1, 6),
            "status": 503,
            "after": rng.randint(0, 2),
        },
        lambda: {
            "kind": "capacity_after",
            "route": h.launch_route,
            "times": None,
            "k": rng.randint(0, nodes - 1),
            "partial": rng.random() < 0.5,
        },
        lambda: {"kind": "insufficient_balance", "route": h.balance_fault_route, "times": 1},
        lambda: {"kind": "http_error", "route": "delete", "times": rng.randint(1, 4), "status": 500},
    ]
    return [rng.choice(menu)() for _ in range(rng.randint(1, 3))]


def live(provider: Provider, cluster_id: str) -> list[str]:
    return [n.id for n in provider.get_nodes(cluster_id) if n.status in LIVE]


@pytest.mark.parametrize("name", neocloud_names())
def test_random_fault_creates_leave_nothing_behind(name: str) -> None:
    rig = rig_for(name)
    outcomes = {"created": 0, "failed": 0, "may_exist": 0}
    for round_no in range(ROUNDS):
        rng = random.Random(f"{name}-{round_no}")
        cluster_id = f"rf{round_no}"
        nodes = rng.randint(1, 3)
        faults = random_faults(rng, rig.harness, nodes)
        for fault in faults:
            spec = dict(fault)
            rig.fake.faults.inject(spec.pop("kind"), **spec)
        before = rig.fake.launched
        context = f"round {round_no} ({nodes} nodes, faults {faults})"
        try:
            # launched under the lease of an up from this state dir that is gone: gc's proof without a record
            made = rig.provider.create_nodes(cluster_id, gone_here(rig.harness.node_specs(nodes, "n")))
        except ProviderError as exc:
            message, made = str(exc), None
        rig.fake.faults.clear()
        assert rig.fake.launched - before <= nodes, f"a launch was duplicated: {context}"
        if made is not None:
            outcomes["created"] += 1
            assert sorted(n.name for n in made) == [f"n{i}" for i in range(nodes)], context
            assert len(live(rig.provider, cluster_id)) == nodes, context
        elif "instances may exist" in message:
            outcomes["may_exist"] += 1
            assert f"provisioner gc --provider {name} --cluster {cluster_id} --yes" in message, context
        else:
            outcomes["failed"] += 1
            assert live(rig.provider, cluster_id) == [], f"an error claimed a clean rollback: {context}: {message}"
        # Fluence names carry no tool mark: there gc finds a cluster through its (expired) record,
        # as it would after a killed `burst`; elsewhere every other cluster is an unrecorded orphan.
        recorded = name == "fluence" or round_no % 2 == 0
        records = (
            [
                ClusterRecord.model_construct(
                    cluster_id=cluster_id,
                    provider=name,
                    status="creating",
                    expires_at=NOW - dt.timedelta(seconds=1),
                    node_ids={},
                    created_at=NOW - dt.timedelta(hours=1),
                )
            ]
            if recorded
            else []
        )
        report = collect_garbage(adapters={name: rig.provider}, records=records, delete=True, now=lambda: NOW)
        assert report.exit_code == 0 and report.failed == [], f"gc failed after {context}: {report.render()}"
        assert rig.fake.instance_count() == 0, f"gc left instances after {context}: {report.render()}"
    # The menu must actually reach every outcome, or the test proves less than it says.
    assert all(outcomes.values()), outcomes
