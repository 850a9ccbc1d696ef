"""The GCP direct engine's per-cluster firewall rules (providers/gcp/firewall.py) against the GCPFake.

Every rule is pinned field by field as the fake stored it (what GCE would hold); idempotence,
a changed ``allowed_cidrs``, another owner's rule of the same name (refused, never touched),
deletion by ``remove_firewall`` (deny rule last) and by ``delete_nodes`` once the whole cluster
is deleting (the path ``gc`` takes); the instances carry the tag the rules aim at; the fake
refuses what GCE refuses (each rule of ``firewall_problems`` on its own); and ``up``/``down`` on
the direct engine make the rules before the first instance and remove them after the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from provisioner.errors import ClusterBusyError
from provisioner.providers.base import SupportsFirewall
from provisioner.testing.fakes import gcp_compute as harness_gcp
from provisioner.testing.fakes.base import RunningServer, serve
from provisioner.testing.fakes.gcp_firewall import firewall_problems

OWNER = "fw-owner"
MARK = f"provisioner-cluster=fwc provisioner-owner={OWNER}"


@pytest.fixture
def fake() -> Iterator[RunningServer]:
    harness = harness_gcp.contract_harness()
    with serve(harness.app) as running:
        yield running
        assert running.app.validation_errors == []


def _adapter(fake: RunningServer, owner: str = OWNER) -> Any:
    return harness_gcp.contract_provider(api_key=harness_gcp.CONTRACT_TOKEN, base_url=fake.url, owner=owner)


def _stored(fake: RunningServer) -> dict[str, dict[str, Any]]:
    return {
        name: {k: v for k, v in rule.items() if k not in ("id", "selfLink", "kind", "name")}
        for name, rule in fake.app.firewall.rules.items()
    }


def _writes(fake: RunningServer) -> list[tuple[str, str]]:
    return [
        (c.method, c.path.rsplit("/", 1)[-1]) for c in fake.app.calls if c.method != "GET" and "firewalls" in c.path
    ]


def test_the_rules_admit_ssh_from_the_allowed_cidrs_and_the_cluster_only(fake: RunningServer) -> None:
    adapter = _adapter(fake)
    assert isinstance(adapter, SupportsFirewall)
    assert (
        adapter.ensure_firewall("fwc", ["203.0.113.7/32", "198.51.100.0/24", "2001:db8::/48"], "us-central1")
        == "fwc-fw-deny"
    )
    common = {"network": "global/networks/default", "direction": "INGRESS", "targetTags": ["fwc"], "description": MARK}
    assert _stored(fake) == {
        "fwc-fw-ssh": {
            **common,
            "priority": 900,
            "sourceRanges": ["198.51.100.0/24", "203.0.113.7/32"],
            "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
        },
        "fwc-fw-internal": {**common, "priority": 900, "sourceTags": ["fwc"], "allowed": [{"IPProtocol": "all"}]},
        "fwc-fw-deny": {**common, "priority": 910, "sourceRanges": ["0.0.0.0/0"], "denied": [{"IPProtocol": "all"}]},
    }
    assert _writes(fake) == [("POST", "firewalls")] * 3
    adapter.ensure_firewall("fwc", ["198.51.100.0/24", "203.0.113.7/32"], "us-east4")  # same rules: nothing sent
    assert _writes(fake) == [("POST", "firewalls")] * 3
    adapter.ensure_firewall("fwc", ["192.0.2.0/28"], "us-central1")  # a new source: the SSH rule replaced
    assert _stored(fake)["fwc-fw-ssh"]["sourceRanges"] == ["192.0.2.0/28"]
    assert _writes(fake)[3:] == [("DELETE", "fwc-fw-ssh"), ("POST", "firewalls")]
    assert set(_stored(fake)) == {"fwc-fw-ssh", "fwc-fw-internal", "fwc-fw-deny"}


def test_ipv6_only_sources_make_no_ssh_rule_but_still_close_the_nodes(fake: RunningServer) -> None:
    _adapter(fake).ensure_firewall("fwc", ["2001:db8::/48"], "us-central1")
    assert sorted(_stored(fake)) == ["fwc-fw-deny", "fwc-fw-internal"]


def test_another_owners_rule_is_refused_and_never_touched(fake: RunningServer) -> None:
    _adapter(fake, owner="someone-else").ensure_firewall("fwc", ["203.0.113.7/32"], "us-central1")
    before = _stored(fake)
    with pytest.raises(ClusterBusyError, match="fwc-fw-ssh exists and is not marked as fw-owner's"):
        _adapter(fake).ensure_firewall("fwc", ["198.51.100.0/24"], "us-central1")
    _adapter(fake).remove_firewall("fwc")
    assert _stored(fake) == before
    fake.app.firewall.rules["fwc-fw-deny"]["description"] = "made by hand"  # unmarked: kept too
    _adapter(fake, owner="someone-else").remove_firewall("fwc")
    assert list(_stored(fake)) == ["fwc-fw-deny"]


def test_remove_deletes_the_deny_rule_last_and_gone_is_success(fake: RunningServer) -> None:
    adapter = _adapter(fake)
    adapter.ensure_firewall("fwc", ["203.0.113.7/32"], "us-central1")
    adapter.remove_firewall("fwc")
    assert _stored(fake) == {}
    assert [w for w in _writes(fake) if w[0] == "DELETE"] == [
        ("DELETE", "fwc-fw-ssh"),
        ("DELETE", "fwc-fw-internal"),
        ("DELETE", "fwc-fw-deny"),
    ]
    adapter.remove_firewall("fwc")


def test_instances_carry_the_tag_and_deleting_the_whole_cluster_removes_the_rules(fake: RunningServer) -> None:
    adapter = _adapter(fake)
    adapter.ensure_firewall("fwc", ["203.0.113.7/32"], "us-central1")
    nodes = adapter.create_nodes("fwc", harness_gcp.contract_node_specs(2))
    assert all(inst["tags"] == {"items": ["fwc"]} for inst in fake.app.instances.values())
    adapter.delete_nodes("fwc", [nodes[0].id])  # one of two (a heal's replacement): the rules stay
    assert len(_stored(fake)) == 3
    adapter.delete_nodes("fwc", [nodes[1].id])  # the last one (gc's path): they go
    assert _stored(fake) == {}


BAD = {
    "name": ({"name": "Bad_Name"}, "is not RFC 1035"),
    "direction": ({"direction": "SIDEWAYS"}, "direction"),
    "priority": ({"priority": 70000}, "outside 0..65535"),
    "network": ({"network": "networks/default"}, "network"),
    "both": ({"denied": [{"IPProtocol": "all"}]}, "exactly one of allowed and denied"),
    "neither": ({"allowed": []}, "exactly one of allowed and denied"),
    "protocol": ({"allowed": [{"IPProtocol": "tcpx"}]}, "protocol 'tcpx'"),
    "ports": ({"allowed": [{"IPProtocol": "icmp", "ports": ["22"]}]}, "ports on protocol 'icmp'"),
    "range": ({"sourceRanges": ["203.0.113.7/24"]}, "is not a network"),
    "no source": ({"sourceRanges": []}, "needs sourceRanges or sourceTags"),
    "tag": ({"targetTags": ["Fw C"]}, "tag 'Fw C'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_fake_refuses_what_gce_refuses(case: str) -> None:
    good = {
        "name": "fwc-fw-ssh",
        "network": "global/networks/default",
        "direction": "INGRESS",
        "priority": 900,
        "sourceRanges": ["203.0.113.7/32"],
        "targetTags": ["fwc"],
        "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
    }
    assert firewall_problems(good) == []
    change, expected = BAD[case]
    problems = firewall_problems({**good, **change})
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_refused_rule_is_a_provider_error_and_logged_as_a_validation_problem(fake: RunningServer) -> None:
    from provisioner.errors import ProviderAPIError

    with pytest.raises(ProviderAPIError):  # the strict fake answers a refused body with its validation status
        _adapter(fake).ensure_firewall("Bad_Cluster", ["203.0.113.7/32"], "us-central1")
    assert fake.app.firewall.rules == {}
    (problem,) = fake.app.validation_errors
    assert "name 'Bad_Cluster-fw-ssh' is not RFC 1035" in problem and "tag 'Bad_Cluster'" in problem
    fake.app.validation_errors.clear()  # the fixture's check is for the good paths


def test_up_makes_the_rules_before_the_first_instance_and_down_removes_them_with_the_last(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provisioner.lifecycle.realize import bring_up, tear_down
    from tests.test_engine_matrix import Case, _plan, served
    from tests.test_lifecycle_support import StandInRemote, instant_runtime

    for key, value in {
        "PROVISIONER_STATE_DIR": str(tmp_path / "state"),
        "PROVISIONER_OWNER": OWNER,
        "PROVISIONER_GCP_IMAGE": harness_gcp.CONTRACT_IMAGE,
    }.items():
        monkeypatch.setenv(key, value)
    plan = _plan("gcp", Case(2, False, False), tmp_path, control_planes=("slurm",))
    plan = plan.model_copy(
        update={
            "spec": plan.spec.model_copy(
                update={"access": plan.spec.access.model_copy(update={"allowed_cidrs": ["198.51.100.0/24"]})}
            )
        }
    )
    cid = plan.cluster_id
    with served("gcp", monkeypatch) as fake:
        app = fake.harness.app
        runtime = instant_runtime(
            StandInRemote(nodes=[n.name for n in plan.nodes]), provider_for=lambda _name: fake.adapter()
        )
        bring_up(plan, runtime)
        writes = [(c.method, c.route) for c in app.calls if c.method != "GET"]
        assert writes[:5] == [("POST", "firewall_insert")] * 3 + [("POST", "insert")] * 2
        assert app.firewall.rules[f"{cid}-fw-ssh"]["sourceRanges"] == ["198.51.100.0/24"]
        assert all(inst["tags"] == {"items": [cid]} for inst in app.instances.values())
        tear_down(cid, instant_runtime(StandInRemote(), provider_for=lambda _name: fake.adapter()))
        assert app.instance_count() == 0 and app.firewall.rules == {}


def test_gc_of_an_unrecorded_cluster_removes_its_instances_and_its_rules(
    fake: RunningServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed up leaves instances and rules with no record: ``gc --yes`` removes both; another
    owner's cluster of the same id keeps its rules (and its instances)."""
    import datetime as dt

    from provisioner.lifecycle.gc import collect_garbage

    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", OWNER)
    adapter = _adapter(fake)
    adapter.ensure_firewall("fwc", ["203.0.113.7/32"], "us-central1")
    from tests.test_gc import gone_here

    adapter.create_nodes("fwc", gone_here(harness_gcp.contract_node_specs(2)))  # its up is gone
    other = _adapter(fake, owner="someone-else")
    other.ensure_firewall("fwo", ["203.0.113.7/32"], "us-central1")
    other.create_nodes("fwo", harness_gcp.contract_node_specs(1, "o"))
    now = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
    report = collect_garbage(adapters={"gcp": adapter}, records=[], delete=True, now=lambda: now)
    assert sorted(x.name for x in report.deleted) == ["n0", "n1"]
    assert sorted(_stored(fake)) == ["fwo-fw-deny", "fwo-fw-internal", "fwo-fw-ssh"]
    assert [n.name for n in adapter.get_nodes("fwo")] == ["o0"]
