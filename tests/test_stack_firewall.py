"""The provider firewall dynamic resource (stacks/firewall.py) against the Lambda fake.

Lambda attaches firewall rulesets at launch only, so the ruleset must exist before the nodes
and outlive them: ``GpuCluster`` makes the nodes depend on the firewall, and the engine
creates in that order and deletes in the reverse. This drives both dynamic providers in that
order against the fake and checks what the fake stored.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from provisioner.errors import ProviderError
from provisioner.stacks.firewall import NeocloudFirewallProvider, has_firewall
from tests.test_stack_neocloud import Rig, _rig


@pytest.fixture
def lam(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from _rig("lambda", monkeypatch)


def _rules(rig: Rig) -> list[tuple[str, str, list[int], str]]:
    rulesets = list(rig.harness.app.firewall.rulesets.values())  # type: ignore[attr-defined]
    return [
        (r["name"], rule["protocol"], rule["port_range"], rule["source_network"])
        for r in rulesets
        for rule in r["rules"]
    ]


def test_ruleset_before_the_nodes_and_after_them(lam: Rig) -> None:
    assert has_firewall("lambda") and not has_firewall("runpod")
    nodes = lam.props(2, cluster_id="fwtest", user_data=None)
    region = nodes["nodes"][0]["region"]
    walls = NeocloudFirewallProvider(lam.provider.adapter_options)
    props: dict[str, Any] = {
        "provider": "lambda",
        "cluster_id": "fwtest",
        "region": region,
        "allowed_cidrs": ["203.0.113.0/24"],
    }
    created = walls.create(props)
    outs = created.outs or {}
    assert created.id == "lambda/fwtest/firewall" and outs["firewall_id"]
    assert _rules(lam) == [("provisioner-fwtest", "tcp", [22, 22], "203.0.113.0/24")]
    assert walls.create(props).outs == outs  # idempotent: found by name, not a second ruleset
    made = lam.provider.create(nodes).outs or {}
    launched = [lam.harness.app.instances[i] for i in made["node_ids"]]  # type: ignore[attr-defined]
    assert all(body["firewall_rulesets"] == [{"id": outs["firewall_id"]}] for body in launched)

    news = {**props, "allowed_cidrs": ["198.51.100.7/32", "203.0.113.0/24"]}
    diff = walls.diff(created.id, outs, news)
    assert diff.changes is True and diff.replaces == []  # rules change in place
    outs = walls.update(created.id, outs, news).outs or {}
    assert sorted(_rules(lam)) == [
        ("provisioner-fwtest", "tcp", [22, 22], "198.51.100.7/32"),
        ("provisioner-fwtest", "tcp", [22, 22], "203.0.113.0/24"),
    ]
    assert walls.diff(created.id, outs, {**news, "region": "other-1"}).replaces == ["region"]

    with pytest.raises(ProviderError):  # still in use: Lambda refuses, nothing is lost
        walls.delete(created.id, outs)
    lam.provider.delete("x", made)
    walls.delete(created.id, outs)
    assert _rules(lam) == [] and lam.harness.instances() == 0
    walls.delete(created.id, outs)  # gone already is success


def test_the_pickled_firewall_provider_holds_no_key(lam: Rig) -> None:
    walls = NeocloudFirewallProvider({**lam.provider.adapter_options, "api_key": lam.canary_key})
    raw = base64.b64decode(serialize_provider(walls))
    assert lam.canary_key.encode() not in raw and b"httpx" not in raw
    assert set(vars(dill.loads(raw))) == {"adapter_options"}
