"""A provider is one package: no module outside it names a provider (every list comes from the registry).

Adding a provider touches its package (adapter, ``CAPABILITIES`` and ``FACTS`` in its light
``__init__``: providers/descriptor.py), its fake, one line of ``providers.registry.REGISTRY``, its
catalog rows and its docs row. This test reads every module of the installed package for string
constants that are a provider's name (``"aws"``, ``"runpod"``, ...) and fails on one outside the
provider's own package, its fake and the registry, and it reads the per-provider tables of the
README and docs (``DOC_TABLES``), which must list exactly the registered providers in registry
order, with the cells the descriptors hold equal to them (a provider's docs row is its row there).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from provisioner.providers.descriptor import ProviderFacts
from provisioner.providers.registry import REGISTRY, facts

from tests import import_graph
from tests.conftest import UPDATE_GOLDEN

ROOT = Path(__file__).resolve().parents[1]
OWN = {"provisioner.providers.registry"}
NOT_YET: dict[str, str] = {}
"""Modules still naming a provider, with why (empty: the NIC names, spot-notice endpoints and
flex-start moved into the descriptors)."""


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
                                    "provisioner.realize.nodes", "provisioner.render.fabric",
                                    "provisioner.render.views", "provisioner.validation.watch",
                                    "provisioner.validation.watch_cli", "provisioner.stacks.model"])
def test_the_lists_that_were_spelled_out_are_derived(module: str) -> None:
    assert _named(module) == set(), module


def _template_names(text: str) -> set[str]:
    """Provider names quoted inside the Jinja tags of a template (``{% if c.provider == "aws" %}``)."""
    tags = re.findall(r"{[{%].*?[%}]}", text, flags=re.S)
    return {name for tag in tags for name in re.findall(r"[\"']([a-z_]+)[\"']", tag) if name in REGISTRY}


def test_no_template_branches_on_a_provider_name() -> None:
    root = ROOT / "templates"
    found = {str(path.relative_to(root)): sorted(names) for path in sorted(root.rglob("*.j2"))
             if (names := _template_names(path.read_text(encoding="utf-8")))}
    assert not found, f"branch on a FACTS field (c.metadata, c.shared_fs, t.node_action...) instead: {found}"
    assert _template_names('{% elif c.provider == "gcp" %}') == {"gcp"}  # the scan sees one


def test_the_scan_sees_a_provider_name() -> None:
    assert _named("provisioner.providers.runpod") == {"runpod"}  # its FACTS: the scan must find it


# --- the README's and the docs' per-provider tables ------------------------------------------------

DOC_TABLES = {
    ("README.md", "| provider | what enforces the TTL"): "teardown",
    ("docs/teardown.md", "| provider | what enforces the TTL"): "teardown",
    ("docs/catalog.md", "| provider | offers |"): "names",
    ("docs/catalog.md", "| adapter | on-demand | spot |"): "names",
}
"""(file, the table's header line start) -> what its rows must equal: ``names`` (one row per provider,
first cell its name) or ``teardown`` (the rows are ``FACTS.teardown``'s cells, generated: run this
test with UPDATE_GOLDEN=1 to write them)."""


def _table(path: str, header: str) -> list[list[str]]:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def _write_teardown_rows(path: str, header: str) -> None:
    """UPDATE_GOLDEN=1: the table's rows written from each provider's ``FACTS.teardown`` (generated)."""
    lines = (ROOT / path).read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    lines[start:end] = [f"| `{name}` | {found.teardown.ttl} | {found.teardown.idle} | {found.teardown.client_dies} |"
                        for name, found in facts().items()]
    (ROOT / path).write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.parametrize(("path", "header"), list(DOC_TABLES))
def test_doc_tables_list_exactly_the_registered_providers(path: str, header: str) -> None:
    if UPDATE_GOLDEN and DOC_TABLES[(path, header)] == "teardown":
        _write_teardown_rows(path, header)
    rows = _table(path, header)
    assert [row[0].strip("`") for row in rows] == list(REGISTRY), f"{path}: one row per provider, registry order"
    if DOC_TABLES[(path, header)] == "teardown":
        assert rows == [[f"`{name}`", found.teardown.ttl, found.teardown.idle, found.teardown.client_dies]
                        for name, found in facts().items()], f"{path}: the rows are each provider's FACTS.teardown"


def test_environment_doc_names_every_key_variable() -> None:
    text = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `LAMBDA_API_KEY`"))
    named = re.findall(r"`([A-Z_]+)`", row.split(" | ")[0])
    assert named == [var for found in facts().values() for var in found.key_vars]


def test_a_doc_table_missing_a_provider_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = tmp_path
    (fake_root / "docs").mkdir()
    text = (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")
    (fake_root / "docs" / "catalog.md").write_text(re.sub(r"(?m)^\| `?fluence`? \|.*\n", "", text), encoding="utf-8")
    monkeypatch.setitem(globals(), "ROOT", fake_root)
    with pytest.raises(AssertionError, match="one row per provider"):
        test_doc_tables_list_exactly_the_registered_providers("docs/catalog.md", "| provider | offers |")


# --- the provider-specific behaviours that moved into the descriptors, pinned row by row ------------

@pytest.mark.parametrize(("provider", "instance_type", "profile", "ifname"), [
    ("gcp", "a3-megagpu-8g", "tcpxo", "enp0s12"),
    ("gcp", "a3-highgpu-8g", "tcpx", "eth0"),
    ("gcp", "a3-ultragpu-8g", "gib", "enp0s19,enp192s20"),
    ("gcp", "a4-highgpu-8g", "gib", "enp0s19,enp192s20"),
    ("gcp", "a2-ultragpu-8g", "tcp", "^lo,docker0"),
    ("aws", "p5.48xlarge", "efa", "^lo,docker0"),
    ("runpod", "cluster_8x_H100-SXM", "infiniband", "ens1"),
    ("lambda", "gpu_8x_h100_sxm5", "tcp", "^lo,docker0"),
])
def test_nic_layouts_and_fast_nics_come_from_the_descriptors(provider: str, instance_type: str, profile: str,
                                                             ifname: str) -> None:
    from provisioner.catalog import load_bundled_catalog
    from provisioner.render.fabric import fabric_profile, nccl_env

    offer = next(o for o in load_bundled_catalog().offers
                 if o.provider == provider and o.instance_type == instance_type)
    assert fabric_profile(offer) == profile
    assert nccl_env(offer).get("NCCL_SOCKET_IFNAME") == ifname


def test_spot_notice_endpoints_and_choices_come_from_the_descriptors(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.cli import main
    from provisioner.validation.watch import spot_notice, spot_providers

    asked: list[str] = []

    def fetch(method: str, url: str, headers: dict[str, str]) -> tuple[int, str]:
        asked.append(url)
        return 404, ""

    assert sorted(spot_providers()) == ["aws", "gcp"]
    assert spot_notice("aws", fetch) is None and spot_notice("gcp", fetch) is None
    assert asked == ["http://169.254.169.254/latest/api/token", "http://169.254.169.254/latest/meta-data/spot/instance-action",
                     "http://metadata.google.internal/computeMetadata/v1/instance/preempted"]
    assert main(["node", "watch", "--spot", "lambda", "--once"]) == 2
    assert "must be one of aws, gcp, none" in capsys.readouterr().err
