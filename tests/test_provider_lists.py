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
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import ProviderDocs, ProviderFacts
from provisioner.providers.registry import REGISTRY, capabilities, facts
from tests import import_graph
from tests.conftest import UPDATE_GOLDEN

ROOT = Path(__file__).resolve().parents[1]
OWN = {"provisioner.providers.registry"}
NOT_YET: dict[str, str] = {
    "provisioner.spec_checkpoint": "a checkpoint store's URL scheme names whose egress a download pays "
    "(s3:// AWS, gs:// GCP); the pure spec layer cannot read the registry: to move into FACTS as each "
    "provider's object-store scheme",
}
"""Modules still naming a provider, with why (the NIC names, spot-notice endpoints and flex-start
moved into the descriptors)."""


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
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in REGISTRY and id(node) not in docstrings
    }


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
        assert declared.docs is not None, f"{name}: FACTS.docs (its docs rows' prose)"
    from tests.providers.contract import fakes_without_harness, harness_names

    assert harness_names() == sorted(REGISTRY)
    assert fakes_without_harness() == []  # every fake hands the contract suite its contract_harness()


@pytest.mark.parametrize(
    "module",
    [
        "provisioner.providers.settings",
        "provisioner.refresh",
        "provisioner.spec",
        "provisioner.stacks.neocloud",
        "provisioner.stacks.cluster",
        "provisioner.stacks.program",
        "provisioner.stacks.topology",
        "provisioner.render.teardown",
        "provisioner.testing.fakes",
        "provisioner.realize.nodes",
        "provisioner.render.fabric",
        "provisioner.render.views",
        "provisioner.validation.watch",
        "provisioner.validation.watch_cli",
        "provisioner.stacks.model",
    ],
)
def test_the_lists_that_were_spelled_out_are_derived(module: str) -> None:
    assert _named(module) == set(), module


def _template_names(text: str) -> set[str]:
    """Provider names quoted inside the Jinja tags of a template (``{% if c.provider == "aws" %}``)."""
    tags = re.findall(r"{[{%].*?[%}]}", text, flags=re.S)
    return {name for tag in tags for name in re.findall(r"[\"']([a-z_]+)[\"']", tag) if name in REGISTRY}


def test_no_template_branches_on_a_provider_name() -> None:
    root = ROOT / "templates"
    found = {
        str(path.relative_to(root)): sorted(names)
        for path in sorted(root.rglob("*.j2"))
        if (names := _template_names(path.read_text(encoding="utf-8")))
    }
    assert not found, f"branch on a FACTS field (c.metadata, c.shared_fs, t.node_action...) instead: {found}"
    assert _template_names('{% elif c.provider == "gcp" %}') == {"gcp"}  # the scan sees one


def test_the_scan_sees_a_provider_name() -> None:
    assert _named("provisioner.providers.runpod") == {"runpod"}  # its FACTS: the scan must find it


# --- the README's and the docs' per-provider tables: generated from the descriptors ------------------

ADAPTER_COLUMNS = (
    Capability.ON_DEMAND,
    Capability.SPOT,
    Capability.MULTI_NODE,
    Capability.PRIVATE_NETWORK,
    Capability.USER_DATA,
    Capability.SCRIPT_BOOTSTRAP,
    Capability.SSH_BOOTSTRAP,
    Capability.TAGS,
    Capability.CLUSTER_PRODUCT,
)
"""docs/catalog.md's adapter table, column by column after the name."""
NUMBERS = {5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def _docs(found: ProviderFacts) -> ProviderDocs:
    assert found.docs is not None, f"provider {found.name}: its FACTS declare no docs (providers/descriptor.py)"
    return found.docs


def _offer_counts() -> Counter[str]:
    from provisioner.catalog import load_bundled_catalog

    return Counter(offer.provider for offer in load_bundled_catalog().offers)


def _teardown_row(name: str, found: ProviderFacts) -> list[str]:
    return [f"`{name}`", found.teardown.ttl, found.teardown.idle, found.teardown.client_dies]


def _catalog_row(name: str, found: ProviderFacts) -> list[str]:
    return [f"`{name}`", str(_offer_counts()[name]), _docs(found).offers, _docs(found).regions]


def _adapter_row(name: str, found: ProviderFacts) -> list[str]:
    declared, notes = capabilities()[name], dict(_docs(found).notes)
    cells = [
        ("yes" if column in declared else "no") + (f" {notes[column]}" if column in notes else "")
        for column in ADAPTER_COLUMNS
    ]
    return [name, *cells]


DOC_TABLES: dict[tuple[str, str], Callable[[str, ProviderFacts], list[str]]] = {
    ("README.md", "| provider | what enforces the TTL"): _teardown_row,
    ("docs/teardown.md", "| provider | what enforces the TTL"): _teardown_row,
    ("docs/catalog.md", "| provider | offers |"): _catalog_row,
    ("docs/catalog.md", "| adapter | on-demand | spot |"): _adapter_row,
}
"""(file, the table's header line start) -> its row for one provider. Every row is generated from the
descriptors (``FACTS.teardown``, ``FACTS.docs``, ``CAPABILITIES``, ``FACTS.key_vars``) and the bundled
catalog: ``UPDATE_GOLDEN=1 python -m pytest tests/test_provider_lists.py`` writes them; otherwise the
files must equal what would be written. A provider's docs row is its ``FACTS``, written once."""
KEY_VARS_ROW = "| those adapters | the API key, under the provider's own name |"
"""docs/environment.md: the row whose first cell is every provider's own key variable."""
PROVIDER_NAMES_LEAD = "`<P>` is a provider name in capitals, one of:"
"""docs/environment.md: the line after this one lists every provider's ``<P>``."""
CATALOG_COUNT = re.compile(r"^\d+ offers from \w+ providers:$")


def _table_span(lines: list[str], header: str) -> tuple[int, int]:
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    return start, next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))


def _rendered(path: str) -> str:
    """``path`` with every generated row (and the catalog's offer count line) as the descriptors say."""
    lines = (ROOT / path).read_text(encoding="utf-8").split("\n")
    for (table_path, header), row in DOC_TABLES.items():
        if table_path == path:
            start, end = _table_span(lines, header)
            lines[start:end] = ["| " + " | ".join(row(name, found)) + " |" for name, found in facts().items()]
    for i, line in enumerate(lines):
        if i and lines[i - 1].endswith(PROVIDER_NAMES_LEAD):
            lines[i] = ", ".join(f"`{name.upper().rstrip('_')}`" for name in REGISTRY) + "."
        if KEY_VARS_ROW in line:
            keys = ", ".join(f"`{var}`" for found in facts().values() for var in found.key_vars)
            lines[i] = f"| {keys} " + line[line.index(KEY_VARS_ROW) :]
        if path == "docs/catalog.md" and CATALOG_COUNT.match(line):
            lines[i] = _count_line(sum(_offer_counts().values()), len(facts()))
    return "\n".join(lines)


def _count_line(offers: int, providers: int) -> str:
    return f"{offers} offers from {NUMBERS.get(providers, str(providers))} providers:"


def _table(path: str, header: str) -> list[list[str]]:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    start, end = _table_span(lines, header)
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines[start:end]]


GENERATED = sorted({path for path, _ in DOC_TABLES} | {"docs/environment.md"})


@pytest.mark.parametrize("path", GENERATED)
def test_generated_docs_rows_equal_the_descriptors(path: str) -> None:
    if UPDATE_GOLDEN:
        (ROOT / path).write_text(_rendered(path), encoding="utf-8")
    text = (ROOT / path).read_text(encoding="utf-8")
    assert text == _rendered(path), f"{path}: rows differ from the descriptors (UPDATE_GOLDEN=1 writes them)"
    for table_path, header in DOC_TABLES:
        if table_path == path:
            rows = _table(path, header)
            assert [row[0].strip("`") for row in rows] == list(REGISTRY), f"{path}: one row per provider"


def test_the_generated_rows_are_pinned() -> None:
    """The generator itself, on rows written out by hand (a changed renderer must fail here)."""
    found = facts()
    assert _adapter_row("vastai", found["vastai"]) == [
        "vastai",
        "yes",
        "yes (bids)",
        "yes",
        "no",
        "no",
        "yes",
        "yes",
        "no",
        "no",
    ]
    assert _adapter_row("gcp", found["gcp"])[4:9] == [
        "yes (VPC)",
        "yes",
        "no (as startup user data)",
        "yes",
        "yes (labels)",
    ]
    assert _catalog_row("fluence", found["fluence"])[:2] == ["`fluence`", "11"]
    assert _catalog_row("aws", found["aws"])[:2] == ["`aws`", "34"]
    environment = _rendered("docs/environment.md")
    assert "| `LAMBDA_API_KEY`, `RUNPOD_API_KEY`, `VAST_API_KEY`, `FLUENCE_API_KEY`" in environment  # later ones after
    assert f"{PROVIDER_NAMES_LEAD}\n`AWS`, `GCP`, `LAMBDA`, `RUNPOD`, `VASTAI`, `FLUENCE`" in environment
    assert _count_line(154, 6) == "154 offers from six providers:" and _count_line(160, 11) == (
        "160 offers from 11 providers:"
    )


def test_environment_doc_names_every_key_variable() -> None:
    text = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if KEY_VARS_ROW in line)
    named = re.findall(r"`([A-Z_]+)`", row.split(" | ")[0])
    assert named == [var for found in facts().values() for var in found.key_vars]


def test_a_doc_table_missing_a_provider_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = tmp_path
    (fake_root / "docs").mkdir()
    text = (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")
    (fake_root / "docs" / "catalog.md").write_text(re.sub(r"(?m)^\| `?fluence`? \|.*\n", "", text), encoding="utf-8")
    monkeypatch.setitem(globals(), "ROOT", fake_root)
    monkeypatch.setitem(globals(), "UPDATE_GOLDEN", False)  # the broken copy is checked, not rewritten
    with pytest.raises(AssertionError, match="rows differ from the descriptors"):
        test_generated_docs_rows_equal_the_descriptors("docs/catalog.md")


# --- the provider-specific behaviours that moved into the descriptors, pinned row by row ------------


@pytest.mark.parametrize(
    ("provider", "instance_type", "profile", "ifname"),
    [
        ("gcp", "a3-megagpu-8g", "tcpxo", "enp0s12"),
        ("gcp", "a3-highgpu-8g", "tcpx", "eth0"),
        ("gcp", "a3-ultragpu-8g", "gib", "enp0s19,enp192s20"),
        ("gcp", "a4-highgpu-8g", "gib", "enp0s19,enp192s20"),
        ("gcp", "a2-ultragpu-8g", "tcp", "^lo,docker0"),
        ("aws", "p5.48xlarge", "efa", "^lo,docker0"),
        ("runpod", "cluster_8x_H100-SXM", "infiniband", "ens1"),
        ("lambda", "gpu_8x_h100_sxm5", "tcp", "^lo,docker0"),
    ],
)
def test_nic_layouts_and_fast_nics_come_from_the_descriptors(
    provider: str, instance_type: str, profile: str, ifname: str
) -> None:
    from provisioner.catalog import load_bundled_catalog
    from provisioner.render.fabric import fabric_profile, nccl_env

    offer = next(
        o for o in load_bundled_catalog().offers if o.provider == provider and o.instance_type == instance_type
    )
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
    assert asked == [
        "http://169.254.169.254/latest/api/token",
        "http://169.254.169.254/latest/meta-data/spot/instance-action",
        "http://metadata.google.internal/computeMetadata/v1/instance/preempted",
    ]
    assert main(["node", "watch", "--spot", "lambda", "--once"]) == 2
    assert "must be one of aws, gcp, none" in capsys.readouterr().err
