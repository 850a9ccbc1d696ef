"""The contract every provider adapter passes, run against its fake on a real 127.0.0.1 socket.

One parametrized suite for all providers with a ``harness_<name>.py`` (see harness.py).
Every request and response the fake sees is validated against the provider's OpenAPI spec;
the ``serve_fake`` fixture fails the test if any was invalid.
"""

from __future__ import annotations

import importlib.util
import logging
import uuid

import pytest

from provisioner.errors import (
    CapacityError,
    ClusterBusyError,
    CredentialsError,
    ProviderAPIError,
    ProviderError,
    QuotaError,
    RateLimitError,
)
from provisioner.offer import Offer
from provisioner.providers.base import Capability, NodeStatus
from provisioner.providers.registry import REGISTRY, facts, provider_class
from tests.providers.contract import Rig, cluster, harness_names, wait_gone, wait_running
from tests.providers.harness import VirtualTime, limiters


@pytest.mark.parametrize("name", harness_names())
def test_registry_names_the_adapter(name: str) -> None:
    cls = provider_class(name)
    assert cls.name == name
    assert cls.capabilities and all(isinstance(c, Capability) for c in cls.capabilities)
    for method in ("check_credentials", "list_offers", "create_nodes", "get_nodes", "delete_nodes"):
        assert callable(getattr(cls, method, None)), f"{name} lacks {method}"


def test_registry_unknown_or_absent_adapter_is_a_key_error() -> None:
    with pytest.raises(KeyError, match=r"known: .*lambda"):
        provider_class("no-such-cloud")
    packages = {name: target.split(":")[0].rsplit(".", 1)[0] for name, target in REGISTRY.items()}
    absent = [name for name, package in packages.items() if importlib.util.find_spec(package) is None]
    for name in absent:  # registered ahead of their adapter (aws and gcp come later)
        with pytest.raises(KeyError, match="no adapter"):
            provider_class(name)


@pytest.mark.parametrize(("name", "sdk"), [("aws", "boto3"), ("gcp", "requests.adapters")])
def test_an_adapter_without_its_sdk_is_one_line_naming_the_extra(
    name: str, sdk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain ``pip install .`` has no [cloud] extra: ``up`` on AWS/GCP ended in a ModuleNotFoundError traceback."""
    import sys

    from provisioner.errors import ProviderError

    package = REGISTRY[name].split(":")[0].rsplit(".", 1)[0]
    for loaded in [m for m in sys.modules if m.startswith(f"{package}.")]:
        parent, _, attr = loaded.rpartition(".")
        if hasattr(sys.modules.get(parent), attr):  # the failed import rebinds it: put the first one back after
            monkeypatch.setattr(sys.modules[parent], attr, getattr(sys.modules[parent], attr))
        monkeypatch.delitem(sys.modules, loaded)  # imported again, as in a fresh process
    monkeypatch.setitem(sys.modules, sdk, None)  # "not installed"
    with pytest.raises(
        ProviderError,
        match=rf"^{name}: the {name} adapter needs the cloud SDKs, not installed here "
        rf"\(no module '{sdk}'\): pip install 'gpu-provisioner\[cloud\]'$",
    ):
        provider_class(name)


def test_offers_parse(rig: Rig) -> None:
    offers = rig.provider().list_offers(rig.harness.offer_query)
    assert offers, "the fake sells something; list_offers found nothing"
    for offer in offers:
        assert isinstance(offer, Offer)
        assert offer.provider == rig.harness.name
        assert offer.gpus >= 1 and offer.gpu_memory_gib > 0
        assert offer.price_per_hour_usd is not None or offer.spot_price_per_hour_usd is not None
        assert offer.gpu_model and offer.gpu_model == offer.gpu_model.strip()


def test_round_trip(rig: Rig) -> None:
    provider, cid = rig.provider(), cluster()
    specs = rig.harness.node_specs(2, "n")
    created = provider.create_nodes(cid, specs)
    assert sorted(n.name for n in created) == sorted(s.name for s in specs)
    assert {n.cluster_id for n in created} == {cid}
    listed = provider.get_nodes(cid)
    assert sorted(n.id for n in listed) == sorted(n.id for n in created)
    assert all(n.status in (NodeStatus.PENDING, NodeStatus.RUNNING) for n in listed)
    assert all(n.provider_state for n in listed)
    assert provider.get_nodes(cluster()) == []
    running = wait_running(provider, cid)
    assert len(running) == 2
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert rig.harness.instances() == 0
    assert rig.harness.launches() == 2
    provider.delete_nodes(cid, [n.id for n in created])  # already gone: still success
    provider.delete_nodes(cid)
    assert rig.harness.instances() == 0


RUN_A, RUN_B = "20261128-101500-0a1b2c", "20261128-221500-3d4e5f"


def test_run_mark_round_trips_and_another_runs_node_is_never_adopted(rig: Rig) -> None:
    """Each node carries the run id it was bought for where the provider can hold one (``FACTS.run_mark``;
    the fake validates the request that writes it and echoes it in its listing); a create for another
    run of the same cluster refuses the node that run left instead of adopting it (nothing bought)."""
    provider, cid = rig.provider(), cluster()
    specs = [spec.model_copy(update={"run": RUN_A}) for spec in rig.harness.node_specs(2, "n")]
    provider.create_nodes(cid, specs)
    carries = facts()[rig.harness.name].run_mark is not None
    assert [n.run for n in provider.get_nodes(cid)] == [RUN_A if carries else None] * 2
    again = [spec.model_copy(update={"run": RUN_B}) for spec in specs]
    if carries:
        with pytest.raises(ClusterBusyError, match=f"earlier run \\({RUN_A}\\).*gc --provider"):
            provider.create_nodes(cid, again)
    else:  # no mark to tell the runs apart by: the same names are the same nodes (the record tells runs apart)
        provider.create_nodes(cid, again)
    assert rig.harness.launches() == 2
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert rig.harness.instances() == 0


def test_slow_boot_reports_pending_until_the_node_boots(rig: Rig) -> None:
    h = rig.harness
    provider, cid = rig.provider(), cluster()
    h.app.faults.inject("slow_boot", times=None, polls=6)
    provider.create_nodes(cid, h.node_specs(1, "n"))
    first = provider.get_nodes(cid)
    assert [n.status for n in first] == [NodeStatus.PENDING]
    polls = 1
    while (nodes := provider.get_nodes(cid)) and nodes[0].status == NodeStatus.PENDING and polls < 40:
        polls += 1
    assert [n.status for n in nodes] == [NodeStatus.RUNNING]
    assert polls >= 2, "a slow boot was reported running at once"
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert h.instances() == 0


def test_create_twice_launches_once(rig: Rig) -> None:
    provider, cid = rig.provider(), cluster()
    specs = rig.harness.node_specs(2, "n")
    first = provider.create_nodes(cid, specs)
    second = provider.create_nodes(cid, specs)
    assert sorted(n.id for n in first) == sorted(n.id for n in second)
    assert rig.harness.launches() == 2
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert rig.harness.instances() == 0


def test_create_launches_only_the_missing_nodes(rig: Rig) -> None:
    provider, cid = rig.provider(), cluster()
    specs = rig.harness.node_specs(3, "n")
    first = {n.name: n.id for n in provider.create_nodes(cid, specs[:2])}
    grown = {n.name: n.id for n in provider.create_nodes(cid, specs)}
    assert sorted(grown) == sorted(s.name for s in specs)
    assert {name: grown[name] for name in first} == first, "existing nodes were replaced"
    assert rig.harness.launches() == 3
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert rig.harness.instances() == 0


def test_create_adopts_after_launch_timeout(rig: Rig) -> None:
    """The fake carries the launch out, and its answer reaches the adapter as its HTTP library's
    own read timeout (an in-process transport: no real timeout is waited out, none can be missed)."""
    h = rig.harness
    provider, cid = rig.provider(in_process=True), cluster()
    lost = h.app.faults.inject("lose_answer", route=h.launch_route, times=1)
    specs = h.node_specs(2, "n")
    created = provider.create_nodes(cid, specs)
    assert lost.fired == 1
    assert sorted(n.name for n in created) == sorted(s.name for s in specs)
    assert h.launches() == 2, "a launch the client did not hear about was bought twice"
    assert h.instances() == 2
    provider.delete_nodes(cid)
    wait_gone(provider, cid)
    assert h.instances() == 0


def test_lost_launch_answer_with_failing_listing_fails_closed(rig: Rig) -> None:
    """The launch happens but its answer is lost, and every listing after it fails: unless the
    adapter can find the instance without listing (GCP gets it by its name) and reports it, the
    error must say that instances may exist, name the cluster and the command that removes
    them, and that command (gc, in process) must then leave nothing behind."""
    from provisioner.lifecycle.gc import collect_garbage

    h = rig.harness
    provider, cid = rig.provider(), cluster()
    failing_lists = {"kind": "http_error", "route": h.list_route, "times": None, "status": 503}
    h.app.faults.inject("lose_answer", route=h.launch_route, times=1, then=failing_lists)
    try:
        made = provider.create_nodes(cid, h.node_specs(1, "n"))
    except ProviderError as exc:
        message = str(exc)
        assert f"instances may exist in cluster {cid}" in message
        assert f"provisioner gc --provider {h.name} --cluster {cid} --yes" in message
    else:
        assert [n.name for n in made] == ["n0"], "a create that succeeded must report the node it made"
    assert h.launches() == 1 and h.instances() == 1, "the launch whose answer was lost did not happen"
    h.app.faults.clear()
    report = collect_garbage(provider=h.name, cluster_id=cid, delete=True, adapters={h.name: provider}, records=[])
    assert report.exit_code == 0 and len(report.deleted) == 1
    wait_gone(provider, cid)
    assert h.instances() == 0


def test_rollback_on_partial_capacity(rig: Rig) -> None:
    h = rig.harness
    provider, cid = rig.provider(), cluster()
    h.app.faults.inject("capacity_after", route=h.launch_route, times=None, k=1, partial=True)
    specs = h.node_specs(3, "n")
    with pytest.raises(CapacityError) as caught:
        provider.create_nodes(cid, specs)
    assert specs[0].instance_type in str(caught.value) and specs[0].region in str(caught.value)
    assert h.launches() == 1, "launches went on after capacity ran out"
    assert h.instances() == 0, "rollback left instances behind"
    gone = (NodeStatus.STOPPING, NodeStatus.TERMINATED)
    assert [n for n in provider.get_nodes(cid) if n.status not in gone] == []


def test_delete_ignores_ids_of_another_cluster(rig: Rig) -> None:
    provider, mine, theirs = rig.provider(), cluster(), cluster()
    provider.create_nodes(mine, rig.harness.node_specs(1, "m"))
    (other,) = provider.create_nodes(theirs, rig.harness.node_specs(1, "t"))
    provider.delete_nodes(mine, [other.id])
    assert [(n.id, n.status in (NodeStatus.PENDING, NodeStatus.RUNNING)) for n in provider.get_nodes(theirs)] == [
        (other.id, True)
    ], "deleting by id reached into another cluster"
    provider.delete_nodes(mine)
    provider.delete_nodes(theirs)
    wait_gone(provider, mine)
    wait_gone(provider, theirs)
    assert rig.harness.instances() == 0


def test_delete_missing_is_noop(rig: Rig) -> None:
    provider = rig.provider()
    provider.delete_nodes(cluster())
    provider.delete_nodes(cluster(), ["does-not-exist-0000"])
    assert rig.harness.instances() == 0


def test_rate_limits_respected(rig: Rig) -> None:
    """Every HTTP request the fake sees took a token from a bucket with the scaled limits, and
    the bucket made the adapter wait: on virtual time, so no wall clock or thread timing counts.

    The test makes many more requests than a burst allows, so an adapter that ignored its
    limiter (or spent one token on a call that sends several pages) would fail here.
    """
    h = rig.harness
    limits = h.scaled_limits
    time = VirtualTime()
    provider, cid = rig.provider(pacing=time), cluster()
    while len(h.app.calls) < 12:  # twelve listings where a listing is one request; fewer where it is several
        provider.list_offers(h.offer_query)
    provider.create_nodes(cid, h.node_specs(2, "n"))
    for _ in range(4):
        provider.get_nodes(cid)
    provider.delete_nodes(cid)
    requests, launches = limiters(provider)
    assert (requests.rate_per_s, requests.burst) == (limits.requests_per_s, limits.burst)
    sent = len(h.app.calls)
    assert sent > limits.burst + 5
    assert requests.granted == sent  # one token per HTTP request, pages and retries included
    assert time.now >= (sent - limits.burst) / limits.requests_per_s - 1e-9
    if limits.launches_per_s:
        assert launches is not None
        assert (launches.rate_per_s, launches.burst) == (limits.launches_per_s, limits.launch_burst)
        assert launches.granted == len(h.app.calls_of(h.launch_route))


def test_launches_are_spaced_by_the_launch_limit(rig: Rig) -> None:
    """Separate clusters cannot share a batch, so each create is its own launch call, and each
    launch past the burst waits for the launch bucket (virtual time: no wall clock counts). A
    provider that publishes no launch limit of its own (RunPod: its launches share the request
    bucket) has no launch bucket at all. Decided here, not at collection, where knowing it would
    build every harness (each imports its SDK: ~7 CPU-s per worker)."""
    h = rig.harness
    limits = h.scaled_limits
    time = VirtualTime()
    provider = rig.provider(pacing=time)
    clusters = [cluster() for _ in range(int(limits.launch_burst) + 2)]
    for cid in clusters:
        provider.create_nodes(cid, h.node_specs(1, "n"))
    launched = len(h.app.calls_of(h.launch_route))
    assert launched == len(clusters)
    _, launches = limiters(provider)
    if not limits.launches_per_s:
        assert launches is None
    else:
        assert launches is not None and launches.granted == launched
        assert time.now >= (launched - limits.launch_burst) / limits.launches_per_s - 1e-9
    for cid in clusters:
        provider.delete_nodes(cid)
    for cid in clusters:
        wait_gone(provider, cid)


def test_invalid_key_is_credentials_error(rig: Rig) -> None:
    provider = rig.provider(api_key="definitely-not-the-key")
    with pytest.raises(CredentialsError):
        provider.check_credentials()
    with pytest.raises(CredentialsError):
        provider.list_offers(rig.harness.offer_query)
    rig.provider().check_credentials()


def test_invalid_key_fault_is_credentials_error(rig: Rig) -> None:
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    rig.app.faults.inject("invalid_key", route=rig.harness.offers_route, message=f"Invalid user key {probe}")
    with pytest.raises(CredentialsError) as caught:
        rig.provider().list_offers(rig.harness.offer_query)
    assert probe in str(caught.value), "the provider's own message was dropped"


def test_insufficient_balance_is_quota_error(rig: Rig) -> None:
    h = rig.harness
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    h.app.faults.inject(
        "insufficient_balance",
        route=h.balance_fault_route,
        times=None,
        message=f"Insufficient balance to deploy ({probe})",
    )
    with pytest.raises(QuotaError) as caught:
        rig.provider().create_nodes(cluster(), h.node_specs(1, "n"))
    assert probe in str(caught.value), "the provider's own message was dropped"
    assert h.instances() == 0


def test_other_api_errors_carry_status_and_message(rig: Rig) -> None:
    h = rig.harness
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    h.app.faults.inject(
        "http_error", route=h.offers_route, times=None, status=502, message=f"upstream unavailable {probe}"
    )
    with pytest.raises(ProviderAPIError) as caught:
        rig.provider().list_offers(h.offer_query)
    assert caught.value.status == 502 and probe in str(caught.value)
    assert "\n" not in str(caught.value)


def test_429_with_retry_after_is_retried(rig: Rig) -> None:
    h = rig.harness
    h.app.faults.inject("rate_limit", route=h.offers_route, times=1, retry_after_s=0.05)
    assert rig.provider().list_offers(h.offer_query)
    statuses = [c.status for c in h.app.calls_of(h.offers_route)]
    assert statuses[0] == 429 and statuses[-1] == 200


def test_429_forever_is_rate_limit_error(rig: Rig) -> None:
    h = rig.harness
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    h.app.faults.inject(
        "rate_limit", route=h.offers_route, times=None, retry_after_s=0.02, message=f"Too many requests {probe}"
    )
    with pytest.raises(RateLimitError) as caught:
        rig.provider().list_offers(h.offer_query)
    assert caught.value.retry_after_s == pytest.approx(0.02)
    assert probe in str(caught.value), "the provider's own message was dropped"
    assert len(h.app.calls_of(h.offers_route)) == rig.retry.attempts


def test_500_on_get_is_retried(rig: Rig) -> None:
    h = rig.harness
    h.app.faults.inject("http_error", route=h.list_route, times=1, status=500)
    assert rig.provider().get_nodes(cluster()) == []
    statuses = [c.status for c in h.app.calls_of(h.list_route)]
    assert statuses[:2] == [500, 200]


def test_canary_key_never_leaks(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    h = rig.harness
    canary = f"CANARY{uuid.uuid4().hex}"
    h.app.api_key = canary
    caplog.set_level(logging.DEBUG)
    provider = rig.provider(api_key=canary)
    texts = [repr(provider), str(provider)]
    provider.list_offers(h.offer_query)
    cid = cluster()
    provider.create_nodes(cid, h.node_specs(1, "n"))
    provider.delete_nodes(cid)
    h.app.faults.inject("rate_limit", route=h.offers_route, times=None, retry_after_s=0.01)
    h.app.faults.inject("insufficient_balance", route=h.balance_fault_route, times=None)
    for action in (
        lambda: provider.list_offers(h.offer_query),
        lambda: provider.create_nodes(cluster(), h.node_specs(1, "n")),
    ):
        with pytest.raises(ProviderError) as caught:
            action()
        texts += [str(caught.value), repr(caught.value), repr(caught.value.__cause__)]
    h.app.faults.clear()
    wrong = f"CANARY{uuid.uuid4().hex}"
    with pytest.raises(CredentialsError) as caught_key:
        rig.provider(api_key=wrong).check_credentials()
    texts += [str(caught_key.value), repr(caught_key.value)]
    # The fake server's own access log (werkzeug) is not ours to police.
    texts += [r.getMessage() for r in caplog.records if not r.name.startswith("werkzeug")]
    joined = "\n".join(texts)
    assert canary not in joined and wrong not in joined
