"""The Pulumi engine's ``up`` renews its lease on the nodes the stack creates (issue 28's renewal).

``lifecycle.pulumi_engine.up`` holds the cluster as ``provisioner up`` does; the real CLI
``.ci/build-pulumi`` built runs the program, whose dynamic provider buys a Vast.ai node on the
spec-validated fake with the up's lease mark in its label. Once pulumi reports the node created,
the hold's heartbeat is driven 10 minutes on (``lease.beat_now`` on the runtime's fake clock): the
renewal lists the cluster, finds the new node under the lease and writes ``/renewed=`` into its
label (``PUT /api/v0/instances/{id}/``, the official client's ``label_instance`` route). When the
update has succeeded the lease is released: the label is the create's again.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import pulumi_engine
from provisioner.lifecycle.lease_renewal import RENEW_S
from provisioner.providers.base import Node
from tests.pulumi_real import pulumi_engine as real_engine
from tests.test_engine_matrix import EXPIRES, OWNER, Case, _plan, served
from tests.test_lifecycle_support import StandInRemote, instant_runtime

pytestmark = [pytest.mark.slow]


def test_a_pulumi_up_renews_its_lease_on_the_nodes_it_creates_and_releases_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = real_engine(tmp_path)
    for key, value in engine.env.items():  # the CLI on PATH, its own home and backend, this interpreter
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", OWNER)
    plan = _plan("vastai", Case(1, False, True), tmp_path, control_planes=("none",))
    cluster = plan.cluster_id
    seen: list[tuple[dt.datetime, list[Node]]] = []
    with served("vastai", monkeypatch) as fake:
        adapter = fake.adapter()
        rt = instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes]), provider_for=lambda _name: adapter)

        def emit(event: str, /, *, message: str, **fields: Any) -> None:
            if event == "pulumi-output" and "-nodes created" in message and not seen:
                rt.sleep(RENEW_S)  # the update is 10 min in when its node exists
                assert cluster_lease.beat_now(cluster, rt.now())
                seen.append((rt.now(), adapter.get_nodes(cluster)))

        rt.emit = emit
        with cluster_lease.hold(cluster, "up", now=rt.now) as mark:
            pulumi_engine.up(plan, backend=engine.backend_url, emit=emit, expires_at=EXPIRES, runtime=rt)
            assert len(seen) == 1, "pulumi never said the nodes were created"
            at, during = seen[0]
            assert [(n.lease, n.renewed_at) for n in during] == [(mark.token(), at)]
            after = adapter.get_nodes(cluster)
            assert [(n.id, n.lease, n.renewed_at) for n in after] == [(during[0].id, mark.token(), None)]
            labels = [c for c in fake.harness.app.calls if c.route == "manage"]
            assert len(labels) == 2  # the renewal, then the release
            assert pulumi_engine.down(cluster, backend=engine.backend_url)
        assert fake.harness.instances() == 0
