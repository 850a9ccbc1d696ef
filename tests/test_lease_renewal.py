"""Leases renewed on the nodes where the provider lets marks change, and gc judging them by their last
renewal (issue 28 item 3).

AWS (CreateTags/DeleteTags on moto), GCP (instances.setLabels with the label fingerprint on the REST
fake) and Vast.ai (``PUT /api/v0/instances/{id}/`` with a new label on the spec-validated fake) carry
``provisioner-renewed``; gc without a local record collects a lease of another machine only once its
last renewal (never its start) is over LEASE_MAX_S old. The schedule runs on the hold's heartbeat,
driven here by ``lease.beat_now`` on a fake clock: no sleeps.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import ProviderAPIError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import lease_renewal, state
from provisioner.lifecycle.burst import BurstOptions, run_burst
from provisioner.lifecycle.gc import collect_garbage
from provisioner.lifecycle.realize import bring_up
from provisioner.providers.base import Provider, SupportsLeaseRenewal
from provisioner.providers.ownership import LEASE_MAX_S, LeaseMark
from tests.test_gc import rig_for
from tests.test_lifecycle_support import (
    EPOCH,
    LAMBDA_SPEC,
    StandInRemote,
    fast_provider,
    instant_runtime,
    plans_for,
    served_fake,
)

START = dt.datetime(2026, 11, 24, 9, 0, tzinfo=dt.UTC)
RENEWING = ["aws", "gcp", "vastai"]


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    yield


def _rig(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    rig = rig_for(name)
    for key, value in rig.harness.env:
        monkeypatch.setenv(key, value)
    return rig


def _launch(rig: Any, cluster: str, mark: LeaseMark, n: int = 1) -> str:
    token = mark.token()
    specs = [s.model_copy(update={"lease": token}) for s in rig.harness.node_specs(n, cluster[:1])]
    rig.provider.create_nodes(cluster, specs)
    return token


@pytest.mark.parametrize("name", RENEWING)
def test_gc_judges_another_machines_lease_by_its_last_renewal(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Three clusters of this owner from another machine, all started at 09:00, none recorded here.
    # "renewed": its holder renewed it at 12:00 (3 h after the start); "stale": renewed only at its
    # launch (its holder died); "released": its up finished and removed the renewal mark. gc --yes at
    # 12:30 (3.5 h after every start, past LEASE_MAX_S) deletes "stale" alone. A gc that read the
    # start instead of the renewal would delete "renewed" too.
    rig = _rig(name, monkeypatch)
    provider = rig.provider
    assert isinstance(provider, SupportsLeaseRenewal)
    renewed = _launch(rig, "renewed", LeaseMark("build-box-7", 4242, START, "a1b2c3"), 2)
    stale = _launch(rig, "stale", LeaseMark("build-box-7", 4243, START, "a1b2c3"))
    released = _launch(rig, "released", LeaseMark("build-box-7", 4244, START, "a1b2c3"))
    assert provider.renew_lease("renewed", renewed, "tester", START) == 2  # right after the launch
    assert provider.renew_lease("renewed", renewed, "tester", START + dt.timedelta(hours=3)) == 2
    assert provider.renew_lease("stale", stale, "tester", START) == 1
    assert provider.renew_lease("released", released, "tester", START) == 1
    assert provider.renew_lease("released", released, "tester", None) == 1
    assert provider.renew_lease("renewed", renewed, "someone-else", START) == 0  # never another owner's
    at = START + dt.timedelta(hours=3, minutes=30)
    assert (at - START).total_seconds() > LEASE_MAX_S

    report = collect_garbage(adapters={name: provider}, records=[], delete=True, now=lambda: at)

    assert [(x.cluster_id, x.why) for x in report.deleted] == [
        (
            "stale",
            "no local record; its lease (pid 4243 on build-box-7 since 2026-11-24T09:00:00Z) was last renewed at "
            "2026-11-24T09:00:00Z, over 2 h before: its holder is gone",
        )
    ]
    kept = {cluster: why for _, cluster, why in report.kept}
    assert kept == {
        "renewed": "no local record; its lease (pid 4242 on build-box-7 since 2026-11-24T09:00:00Z) was renewed at "
        "2026-11-24T12:00:00Z: its holder is alive",
        "released": "no local record; its lease (pid 4244 on build-box-7 since 2026-11-24T09:00:00Z) names another "
        "machine, which may hold its record and be using it; remove it with: provisioner gc --cluster released --yes",
    }
    assert sorted(n.name for n in provider.get_nodes("renewed") if n.status.value != "terminated") == ["r0", "r1"]
    assert report.exit_code == 0
    # Once its holder stops renewing too, "renewed" goes as well, 2 h after its last renewal.
    later = START + dt.timedelta(hours=5, seconds=1)
    again = collect_garbage(adapters={name: provider}, records=[], delete=True, now=lambda: later)
    assert sorted((x.cluster_id, x.name) for x in again.deleted) == [("renewed", "r0"), ("renewed", "r1")]


def test_a_renewal_is_on_the_nodes_as_the_provider_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The marks as each fake stores them: the GCP label and Vast label part in the label-safe form.
    gcp, vast = _rig("gcp", monkeypatch), _rig("vastai", monkeypatch)
    mark = LeaseMark("build-box-7", 4242, START, "a1b2c3")
    for rig in (gcp, vast):
        token = _launch(rig, "c1", mark)
        rig.provider.renew_lease("c1", token, "tester", START + dt.timedelta(minutes=10))
    (labels,) = [body["labels"] for body in gcp.fake.instances.values()]
    assert labels["provisioner-renewed"] == "20261124t091000z" and labels["provisioner-lease"] == mark.token()
    assert vast.fake.state()["labels"] == [f"c1/c0/owner=tester/lease={mark.token()}/renewed=20261124t091000z"]
    assert gcp.fake.validation_errors == [] and vast.fake.validation_errors == []


def test_gcp_set_labels_refuses_a_stale_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake checks the fingerprint as the Compute API does (412, nothing changed); the adapter reads
    # the instance again once and sets its labels with the new fingerprint.
    rig = _rig("gcp", monkeypatch)
    token = _launch(rig, "c1", LeaseMark("build-box-7", 4242, START, "a1b2c3"))
    (zone, name), body = next(iter(rig.fake.instances.items()))
    client = rig.provider.client
    first = client.get_instance(zone, name)
    body["labels"]["team"] = "ml"  # someone labels the VM after it was read
    with pytest.raises(ProviderAPIError) as refused:
        client.set_labels(zone, name, {**first.labels, "x": "y"}, first.label_fingerprint)
    assert refused.value.status == 412 and "x" not in body["labels"]
    rig.provider.renew_lease("c1", token, "tester", START)  # listing, then a change under it: read again
    assert body["labels"]["team"] == "ml" and body["labels"]["provisioner-renewed"] == "20261124t090000z"


def test_the_holder_renews_on_its_heartbeat_schedule_and_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = _rig("vastai", monkeypatch)
    with cluster_lease.hold("c1", "up", now=lambda: START) as mark:
        token = _launch(rig, "c1", mark)

        def renewed() -> dt.datetime | None:
            (node,) = rig.provider.get_nodes("c1")
            return node.renewed_at

        renewal = lease_renewal.start(rig.provider, "c1", token, "tester", START)
        assert renewal is not None and renewed() == START  # at once, right after the launch
        for minutes, expected in [(5, 0), (9, 0), (10, 10), (19, 10), (31, 31), (40, 31), (41, 41)]:
            assert cluster_lease.beat_now("c1", START + dt.timedelta(minutes=minutes))
            assert renewed() == START + dt.timedelta(minutes=expected), minutes
        assert lease_renewal.release("c1") == 1
        assert renewed() is None
        cluster_lease.beat_now("c1", START + dt.timedelta(hours=1))
        assert renewed() is None  # released: no more renewals
    assert not cluster_lease.beat_now("c1", START)  # the hold is over


class _Blocking:
    """Renewals wait on ``go`` before they land (a slow provider); the release does not."""

    name = "vastai"

    def __init__(self) -> None:
        self.entered, self.go = threading.Event(), threading.Event()
        self.landed: list[dt.datetime | None] = []

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        if at is not None:
            self.entered.set()
            assert self.go.wait(30)
        self.landed.append(at)
        return 1


def test_a_renewal_in_flight_never_lands_after_the_release() -> None:
    # The heartbeat thread is renewing when up finishes: the release waits for it, so the nodes end
    # without a renewal mark (one landing after the release would go stale and let another
    # machine's gc take a cluster in use). Without the lock the release lands first: [None, START].
    adapter = _Blocking()
    renewal = lease_renewal.Renewal(adapter, "vastai", "c1", "h-1-20261124t090000z", "tester")
    beat = threading.Thread(target=renewal, args=(START,))
    beat.start()
    assert adapter.entered.wait(30)
    release = threading.Thread(target=renewal.release)
    release.start()
    release.join(1)  # blocked behind the renewal with the fix; done at once without it
    adapter.go.set()
    beat.join(30)
    release.join(30)
    assert adapter.landed == [START, None]
    renewal(START + dt.timedelta(hours=1))
    assert adapter.landed == [START, None]  # released: no renewal after it


class _Recording:
    """A Lambda adapter that also renews (Lambda cannot change marks): what the realize core asks of a
    renewing provider, recorded with how many nodes existed at each call."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.calls: list[tuple[str, str, dt.datetime | None, int]] = []

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    def renew_lease(self, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
        live = len(self._inner.get_nodes(cluster_id))
        self.calls.append((cluster_id, lease, at, live))
        return live


def test_up_renews_right_after_buying_and_releases_when_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    remote = StandInRemote(nodes=[n.name for n in plan.nodes])
    made: list[_Recording] = []

    def provider_for(name: str) -> Any:
        made.append(_Recording(fast_provider(name)))
        return made[-1]

    with served_fake("lambda", monkeypatch):
        record = bring_up(plan, instant_runtime(remote, provider_for=provider_for))
    calls = [call for adapter in made for call in adapter.calls]
    assert [(c, lease, at, live) for c, lease, at, live in calls] == [
        ("lc-lambda", record.lease_id, EPOCH, 2),  # the first renewal: both nodes bought
        ("lc-lambda", record.lease_id, None, 2),  # released: the record holds the cluster now
    ]


def test_a_burst_renews_through_its_job_and_never_releases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plans = plans_for(LAMBDA_SPEC, tmp_path)
    made: list[_Recording] = []

    def provider_for(name: str) -> Any:
        made.append(_Recording(fast_provider(name)))
        return made[-1]

    def job() -> None:  # three hours into the job: the hold's heartbeat still renews
        assert cluster_lease.beat_now("lc-lambda", EPOCH + dt.timedelta(hours=3))

    remote = StandInRemote(nodes=[n.name for n in plans[0].nodes], healthy=True, on_job=job)
    with served_fake("lambda", monkeypatch) as (app, _):
        runtime = instant_runtime(remote, provider_for=provider_for)
        code = run_burst(plans, ["srun", "hostname"], BurstOptions(), runtime)
        assert code == 0 and app.instance_count() == 0
    ats = [at for adapter in made for _, _, at, _ in adapter.calls]
    assert ats[0] is not None and ats[-1] == EPOCH + dt.timedelta(hours=3) and None not in ats
    assert state.load_record("lc-lambda") is None
