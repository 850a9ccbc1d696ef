"""A provider is one package: no module outside it names a provider (every list comes from the registry).

Adding a provider touches its package (adapter, ``CAPABILITIES`` and ``FACTS`` in its light
``__init__``: providers/descriptor.py), its fake, one line of ``providers.registry.REGISTRY``, its
catalog rows and its docs row. This test reads every module of the installed package for string
constants that are a provider's name (``"aws"``, ``"runpod"``, ...) and fails on one outside the
provider's own package, its fake and the registry, except the places listed in ``NOT_YET`` with the
reason each still names one (each is a provider-specific behaviour, not a list of providers).
"""

from __future__ import annotations

import ast

import pytest
from provisioner.providers.descriptor import ProviderFacts
from provisioner.providers.registry import REGISTRY, facts

from tests import import_graph

OWN = {"provisioner.providers.registry"}
NOT_YET = {
    "provisioner.render.fabric": "the fast NIC names of RunPod Instant Clusters and GCP's RDMA VPC layout",
    "provisioner.validation.watch": "the spot-notice metadata endpoints of AWS and GCP",
    "provisioner.validation.watch_cli": "the --spot choices (the metadata endpoints above)",
    "provisioner.stacks.model": "flex-start is a GCP provisioning model",
}


def _owner_package(module: str) -> str | None:
    for name, target in REGISTRY.items():
        package = target.partition(":")[0].rsplit(".", 1)[0]
        if module == package or module.startswith(f"{package}."):
            return name
    return None


def _fake_modules() -> set[str]:
    return {found.fake.partition(":")[0] for found in facts().values()}


def _named(module: str) -> set[str]:
    tree = ast.parse(import_graph.modules()[module].read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and node.value in REGISTRY and id(node) not in docstrings}


def _offenders() -> dict[str, set[str]]:
    fakes = _fake_modules()
    found = {}
    for module in import_graph.modules():
        if module in OWN or _owner_package(module) is not None or module in fakes:
            continue
        names = _named(module)
        if names:
            found[module] = names
    return found


def test_no_module_outside_a_provider_package_names_a_provider() -> None:
    offenders = _offenders()
    new = {module: sorted(names) for module, names in offenders.items() if module not in NOT_YET}
    assert not new, f"derive these from providers.registry.facts() instead of naming providers: {new}"
    gone = set(NOT_YET) - set(offenders)
    assert not gone, f"no longer names a provider; drop from NOT_YET: {gone}"


def test_every_provider_package_declares_its_facts() -> None:
    found = facts()
    assert list(found) == list(REGISTRY)
    for name, declared in found.items():
        assert isinstance(declared, ProviderFacts) and declared.name == name == declared.teardown.provider
        assert declared.fake.partition(":")[0] in import_graph.modules()


@pytest.mark.parametrize("module", ["provisioner.providers.settings", "provisioner.refresh", "provisioner.spec",
                                    "provisioner.stacks.neocloud", "provisioner.stacks.cluster",
                                    "provisioner.stacks.program", "provisioner.stacks.topology",
                                    "provisioner.render.teardown", "provisioner.testing.fakes",
                                    "provisioner.realize.nodes"])
def test_the_lists_that_were_spelled_out_are_derived(module: str) -> None:
    assert _named(module) == set(), module


def test_the_scan_sees_a_provider_name() -> None:
    assert _named("provisioner.render.fabric")  # a place NOT_YET lists: the scan must find it
