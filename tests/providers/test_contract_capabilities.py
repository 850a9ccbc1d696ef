"""Capabilities are honest: each one an adapter declares is proven against its fake, and each
one it does not declare is refused before any request (or, where a NodeSpec cannot ask for it,
shown absent in the fake).

Run for every provider with a ``harness_<name>.py`` and every ``Capability``. The evidence is
the fake's ``bought`` record of each launch (``provisioner.testing.fakes.base.Bought``): what
the provider was asked to sell, what the instance gets at boot, its tags, keys and network.
A capability declared without a proof here fails: declaring is a promise this suite checks.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from provisioner.errors import PlanError
from provisioner.providers.base import Bootstrap, Capability, Node, NodeSpec, Provider
from provisioner.providers.registry import capabilities, provider_class
from provisioner.testing.fakes.base import Bought
from tests.providers.contract import Rig, cluster, harness_names, wait_running

CAPABILITIES = sorted(Capability)
NODE_SPEC_CAPABILITIES = {
    Capability.SPOT,
    Capability.ON_DEMAND,
    Capability.MULTI_NODE,
    Capability.USER_DATA,
    Capability.SCRIPT_BOOTSTRAP,
    Capability.TAGS,
    Capability.RESERVATION,
}
"""What a NodeSpec can ask for: an adapter without it must refuse the request before any call."""


def _probe() -> str:
    return f"probe-{uuid.uuid4().hex[:10]}"


def _revealed(text: str) -> str:
    """``text`` plus every base64 token in it decoded (adapters ship scripts base64-encoded)."""
    decoded = []
    for token in re.findall(r"[A-Za-z0-9+/=]{16,}", text):
        try:
            decoded.append(base64.b64decode(token, validate=True).decode())
        except (binascii.Error, UnicodeDecodeError):
            continue
    return "\n".join([text, *decoded])


def _one(rig: Rig, **update: object) -> NodeSpec:
    return rig.harness.node_specs(1, "n")[0].model_copy(update=update)


def _create(rig: Rig, specs: list[NodeSpec]) -> tuple[Provider, list[Node], list[Bought]]:
    provider = rig.provider()
    nodes = provider.create_nodes(cluster(), specs)
    assert sorted(n.name for n in nodes) == sorted(s.name for s in specs)
    return provider, nodes, [rig.app.bought[n.id] for n in nodes]


def _running(provider: Provider, nodes: list[Node]) -> list[Node]:
    return wait_running(provider, nodes[0].cluster_id, len(nodes))


# ----- proofs of declared capabilities -------------------------------------------------------
def prove_on_demand(rig: Rig) -> None:
    _, _, (bought,) = _create(rig, [_one(rig, spot=False)])
    assert bought.interruptible is False


def prove_spot(rig: Rig) -> None:
    _, _, (bought,) = _create(rig, [_one(rig, spot=True)])
    assert bought.interruptible is True, "a spot node was bought on demand"


def prove_reservation(rig: Rig) -> None:
    """A node asking for a block runs in a reservation bought for its cluster (the fake's record)."""
    _, nodes, (bought,) = _create(rig, [_one(rig, capacity_block_hours=24)])
    blocks = getattr(rig.app, "reservations", {})
    assert [b["used"] for b in blocks.values()] == [{nodes[0].id}], "the node was not launched into a bought block"
    assert bought.interruptible is False


def prove_multi_node(rig: Rig) -> None:
    _, nodes, bought = _create(rig, rig.harness.node_specs(3, "m"))
    assert len({n.id for n in nodes}) == 3 and len(bought) == 3
    assert rig.harness.launches() == 3


def prove_private_network(rig: Rig) -> None:
    provider, nodes, bought = _create(rig, rig.harness.node_specs(2, "p"))
    networks = {b.private_network for b in bought}
    assert len(networks) == 1 and None not in networks, f"nodes are not on one private network: {networks}"
    running = {n.id: n for n in _running(provider, nodes)}
    ips = [running[b.instance_id].private_ip for b in bought]
    assert ips == [b.private_ip for b in bought] and all(ips) and len(set(ips)) == 2
    assert all(ipaddress.ip_address(ip or "").is_private for ip in ips)


def prove_user_data(rig: Rig) -> None:
    probe = _probe()
    user_data = f"#cloud-config\nruncmd:\n  - [touch, /run/{probe}]\n"
    _, _, (bought,) = _create(rig, [_one(rig, bootstrap=Bootstrap.CLOUD_INIT, user_data=user_data)])
    assert user_data in _revealed(bought.boot)


def prove_script_bootstrap(rig: Rig) -> None:
    probe = _probe()
    script = f"#!/bin/sh\necho {probe} > /run/probe\n"
    _, _, (bought,) = _create(rig, [_one(rig, bootstrap=Bootstrap.SCRIPT, user_data=script)])
    assert script in _revealed(bought.boot), "the bootstrap script never reached the provider"


def prove_ssh_bootstrap(rig: Rig) -> None:
    spec = _one(rig)
    assert spec.ssh_public_key, "the harness's node specs carry an SSH key"
    provider, nodes, (bought,) = _create(rig, [spec])
    material = spec.ssh_public_key.split()[:2]
    assert any(key.split()[:2] == material for key in bought.ssh_public_keys), "the node's key was not installed"
    (node,) = _running(provider, nodes)
    assert node.public_ip, "a running node has no address to SSH to"


def prove_tags(rig: Rig) -> None:
    probe = _probe()
    _, _, (bought,) = _create(rig, [_one(rig, tags={"team": probe})])
    assert bought.tags.get("team") == probe


def prove_cluster_product(rig: Rig) -> None:
    """The provider's cluster product from the bundled catalog (what the plan ranks) is bought as one
    product: every node a member of the same one, on its own private network at distinct addresses."""
    from provisioner.capabilities import Purchase
    from provisioner.catalog import load_bundled_catalog

    offer = next(
        o for o in load_bundled_catalog().offers if o.provider == rig.harness.name and o.purchase is Purchase.CLUSTER
    )
    specs = [
        _one(rig).model_copy(
            update={
                "name": f"c{i}",
                "instance_type": offer.instance_type,
                "gpus": offer.gpus,
                "region": offer.region,
                "offer_id": offer.offer_id,
            }
        )
        for i in range(max(offer.min_nodes, 2))
    ]
    provider, nodes, bought = _create(rig, specs)
    products = {b.cluster_product for b in bought}
    assert len(products) == 1 and None not in products, f"nodes were not bought as one cluster product: {products}"
    assert len({b.private_network for b in bought}) == 1 and bought[0].private_network is not None
    assert rig.harness.launches() == len(specs)
    running = {n.id: n for n in _running(provider, nodes)}
    ips = [running[b.instance_id].private_ip for b in bought]
    assert ips == [b.private_ip for b in bought] and len(set(ips)) == len(specs)
    assert all(ipaddress.ip_address(ip or "").is_private for ip in ips)


def prove_fabric_efa(rig: Rig) -> None:
    """Several nodes of the harness's EFA type launch with an EFA interface on each network card
    (card 0 the primary, device 0; the others device 1), all in one cluster placement group the
    provider made for the cluster (the fake's ``launch_network`` and ``placement_groups`` records)."""
    _, nodes, _ = _create(rig, rig.harness.node_specs(2, "e"))
    app: Any = rig.app  # the AWS fake's records; a fake without them fails here
    launched = [app.launch_network[n.id] for n in nodes]
    for record in launched:
        nics = sorted(record["interfaces"], key=lambda nic: nic["NetworkCardIndex"])
        assert nics and all(nic["InterfaceType"] in ("efa", "efa-only") for nic in nics), nics
        assert [nic["NetworkCardIndex"] for nic in nics] == list(range(len(nics)))
        assert [nic["DeviceIndex"] for nic in nics] == [0] + [1] * (len(nics) - 1)
    (group,) = {record["placement"].get("GroupName") for record in launched}
    made = [g for g in app.placement_groups.values() if g["name"] == group]
    assert [g["strategy"] for g in made] == ["cluster"], f"no cluster placement group {group!r}"


PROOFS: dict[Capability, Callable[[Rig], None]] = {
    Capability.ON_DEMAND: prove_on_demand,
    Capability.SPOT: prove_spot,
    Capability.RESERVATION: prove_reservation,
    Capability.MULTI_NODE: prove_multi_node,
    Capability.PRIVATE_NETWORK: prove_private_network,
    Capability.CLUSTER_PRODUCT: prove_cluster_product,
    Capability.USER_DATA: prove_user_data,
    Capability.SCRIPT_BOOTSTRAP: prove_script_bootstrap,
    Capability.SSH_BOOTSTRAP: prove_ssh_bootstrap,
    Capability.TAGS: prove_tags,
    Capability.FABRIC_EFA: prove_fabric_efa,
}


# ----- refusals of undeclared ones ------------------------------------------------------------
def asking_for(rig: Rig, capability: Capability) -> list[NodeSpec]:
    """Node specs that need ``capability`` (and otherwise only what the harness's nodes need)."""
    if capability is Capability.MULTI_NODE:
        return rig.harness.node_specs(2, "m")
    update: dict[str, object] = {
        Capability.SPOT: {"spot": True},
        Capability.ON_DEMAND: {"spot": False},
        Capability.USER_DATA: {"bootstrap": Bootstrap.CLOUD_INIT, "user_data": "#cloud-config\nruncmd: [[true]]\n"},
        Capability.SCRIPT_BOOTSTRAP: {"bootstrap": Bootstrap.SCRIPT, "user_data": "#!/bin/sh\ntrue\n"},
        Capability.TAGS: {"tags": {"team": "ml"}},
        Capability.RESERVATION: {"capacity_block_hours": 24},
    }[capability]
    return [_one(rig, **update)]


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_capability_is_honest(rig: Rig, capability: Capability) -> None:
    declared = provider_class(rig.harness.name).capabilities
    if capability in declared:
        proof = PROOFS.get(capability)
        assert proof is not None, f"{rig.harness.name} declares {capability} but this suite has no proof of it"
        proof(rig)
    elif capability is Capability.SCRIPT_BOOTSTRAP and Capability.USER_DATA in declared:
        prove_script_bootstrap(rig)  # cloud-init runs a '#!' user-data script: accepted as user data
    elif capability in NODE_SPEC_CAPABILITIES:
        with pytest.raises(PlanError, match=rig.harness.name):
            rig.provider().create_nodes(cluster(), asking_for(rig, capability))
        assert rig.app.calls == [], "a request went out before the refusal"
        assert rig.harness.launches() == 0
    elif capability is Capability.PRIVATE_NETWORK:
        _, _, bought = _create(rig, rig.harness.node_specs(2, "p"))
        assert {b.private_network for b in bought} == {None}, "nodes share a private network: declare it"
    else:
        pytest.skip(f"{capability} is not declared and a NodeSpec cannot ask for it (the optimizer gates it)")


@pytest.mark.parametrize("name", harness_names())
def test_registry_reports_what_the_adapter_declares(name: str) -> None:
    assert capabilities()[name] == provider_class(name).capabilities


def test_registry_capabilities_cover_every_provider_without_importing_adapters() -> None:
    """Every registered provider declares what it can create; reading that imports no adapter."""
    code = (
        "import sys; from provisioner.providers.registry import REGISTRY, capabilities; c = capabilities(); "
        "assert list(c) == list(REGISTRY), c; assert all(c.values()), c; "
        "heavy = [m for m in sys.modules if m.startswith('httpx') or m.endswith('.provider')]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_live_offers_say_how_they_are_bought_like_the_bundled_catalog(rig: Rig) -> None:
    """What list_offers returns is creatable by the adapter, and described as the catalog does."""
    from provisioner.capabilities import BOOTSTRAP_CAPABILITY, Network, Purchase
    from provisioner.catalog import load_bundled_catalog

    declared = provider_class(rig.harness.name).capabilities
    offers = rig.provider().list_offers(rig.harness.offer_query)
    assert offers
    for offer in offers:
        assert offer.purchase in (Purchase.INSTANCE, Purchase.POD), offer.purchase
        assert BOOTSTRAP_CAPABILITY[offer.bootstrap] in declared
        assert (offer.network is Network.PRIVATE) == (Capability.PRIVATE_NETWORK in declared)
    bundled = {
        (o.purchase, o.bootstrap, o.network, o.min_nodes)
        for o in load_bundled_catalog().offers
        if o.provider == rig.harness.name
        and o.purchase in (Purchase.INSTANCE, Purchase.POD)
        and BOOTSTRAP_CAPABILITY[o.bootstrap] in declared
    }
    assert {(o.purchase, o.bootstrap, o.network, o.min_nodes) for o in offers} <= bundled
