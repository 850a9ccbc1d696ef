"""The import contract: the pure core never imports the shell (providers, stacks, lifecycle, the
fakes) or a cloud SDK, directly or through another module.

Checked on the source with ``ast`` (every import statement, function-level ones too), because
``provisioner.providers`` and ``provisioner.stacks`` live in other folders of the repository
(setup.py maps them) where graph tools that walk one package folder do not look.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import import_graph

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "provisioner"
PURE = {
    "provisioner.spec",
    "provisioner.spec_checkpoint",
    "provisioner.gpu_names",
    "provisioner.loader",
    "provisioner.catalog",
    "provisioner.catalog_json",
    "provisioner.catalog_model",
    "provisioner.offer_columns",
    "provisioner.written_numbers",
    "provisioner.offer_checks",
    "provisioner.variant_checks",
    "provisioner.optimizer",
    "provisioner.rejection_reasons",
    "provisioner.offer_table",
    "provisioner.cost_terms",
    "provisioner.costs",
    "provisioner.columns",
    "provisioner.money",
    "provisioner.offer",
    "provisioner.plan",
    "provisioner.capabilities",
    "provisioner.errors",
    "provisioner.render",
    "provisioner.report",
    "provisioner.metering",
    "provisioner.termtext",
    "provisioner.collector",
    "provisioner.exposure",
    "provisioner.suggest",
    "provisioner.relaxation",
    "provisioner.untrusted",
}
# What the pure core may read from outside itself: the provider list (pure data) and templates.
ALLOWED = {
    "provisioner.providers.registry",
    "provisioner.providers.descriptor",  # provider facts: pure data
    "provisioner.templates",
    "provisioner.capabilities",
    "provisioner.secrets",
}  # the cluster secrets model the renderer fills in
FORBIDDEN_EXTERNAL = ("httpx", "boto3", "botocore", "google", "pulumi", "moto", "subprocess", "socket")


def _is_pure(module: str) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in PURE)


def _modules() -> dict[str, Path]:
    found = {}
    for path in CORE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if _is_pure(name):
            found[name] = path
    return found


def _imports(path: Path, module: str) -> set[str]:
    names = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
    return names


@pytest.mark.parametrize(("module", "path"), sorted(_modules().items()))
def test_pure_module_imports_only_the_core(module: str, path: Path) -> None:
    bad = sorted(
        name
        for name in _imports(path, module)
        if (
            name.startswith("provisioner.")
            and not _is_pure(name)
            and not any(name == a or name.startswith(f"{a}.") for a in ALLOWED)
        )
        or name.split(".")[0] in FORBIDDEN_EXTERNAL
    )
    assert not bad, f"{module} imports {bad}: the pure core must not reach the shell or the network"


def test_the_contract_sees_the_core() -> None:
    modules = _modules()
    assert {"provisioner.spec", "provisioner.optimizer", "provisioner.render.views"} <= set(modules)
    assert "provisioner.providers.registry" in _imports(modules["provisioner.spec"], "provisioner.spec")


def test_the_registry_the_core_reads_imports_no_adapter() -> None:
    registry = ROOT / "providers" / "registry.py"
    names = _imports(registry, "provisioner.providers.registry")
    # providers.base is named for type checking only (the Provider protocol, under TYPE_CHECKING)
    assert all(
        not n.startswith("provisioner.")
        or _is_pure(n)
        or n in ("provisioner.providers.base", "provisioner.providers.descriptor")
        for n in names
    ), names
    assert "TYPE_CHECKING" in registry.read_text(encoding="utf-8")


# ----- transitive: what loading and using a module may run (tests/import_graph.py) ----------------
REGISTRY = "provisioner.providers.registry"
"""Pure data for the core: its own imports are checked, but it is not followed through the adapters
it names (it imports one only when asked for it by name, which the pure core never does)."""
SHELL = ("provisioner.lifecycle", "provisioner.stacks", "provisioner.cli", "provisioner.workflow")
LAYERS = {
    # layer: what no module of it may reach, however indirectly
    "provisioner.realize": ("provisioner.lifecycle", "provisioner.stacks", "provisioner.cli"),
    "provisioner.stacks": ("provisioner.lifecycle", "provisioner.cli"),
    "provisioner.providers": ("provisioner.lifecycle", "provisioner.stacks", "provisioner.realize", "provisioner.cli"),
}


def _allowed_for_core(name: str) -> bool:
    return (
        _is_pure(name)
        or any(name == a or name.startswith(f"{a}.") for a in ALLOWED)
        or name in ("provisioner", "provisioner.providers")
    )  # the packages on the way (their eager imports are followed)


def _pure_modules() -> list[str]:
    return sorted(name for name in import_graph.modules() if _is_pure(name))


@pytest.mark.parametrize("module", _pure_modules())
def test_pure_module_reaches_only_the_core_transitively(module: str) -> None:
    via = import_graph.reach(module, stop=frozenset({REGISTRY}))
    bad = sorted(import_graph.chain(via, name) for name in via if not _allowed_for_core(name))
    assert not bad, f"{module} reaches the shell: {bad[:3]}"
    net = sorted({f"{name}: {ext}" for name in via for ext in import_graph.external(name) & set(FORBIDDEN_EXTERNAL)})
    assert not net, f"{module} reaches the network or a cloud SDK: {net[:3]}"


def _layer_modules() -> list[tuple[str, str]]:
    return sorted(
        (layer, name)
        for name in import_graph.modules()
        for layer in LAYERS
        if name == layer or name.startswith(f"{layer}.")
    )


@pytest.mark.parametrize(("layer", "module"), _layer_modules())
def test_layer_reaches_no_upper_layer_transitively(layer: str, module: str) -> None:
    via = import_graph.reach(module, stop=frozenset({REGISTRY}))
    bad = sorted(
        import_graph.chain(via, name)
        for name in via
        if any(name == up or name.startswith(f"{up}.") for up in LAYERS[layer])
    )
    assert not bad, f"{module} ({layer}) reaches an upper layer: {bad[:3]}"


def test_the_graph_follows_function_imports_import_module_and_parents_but_not_type_checking() -> None:
    # The top package's lazy __getattr__ loads its exports by name (import_module): importing a name
    # from it reaches them; a module that only sits below it runs its module level only.
    assert "provisioner.optimizer" in import_graph.reach("provisioner")
    assert "provisioner.optimizer" not in import_graph.reach("provisioner.money")
    # The registry names every adapter for import_module: followed unless stopped.
    assert "provisioner.providers.aws.provider" in import_graph.reach(REGISTRY)
    stopped = import_graph.reach("provisioner.spec", stop=frozenset({REGISTRY}))
    assert REGISTRY in stopped and "provisioner.providers.aws.provider" not in stopped
    # A function-level import counts (lifecycle.cli imports its command modules inside functions).
    assert "provisioner.lifecycle.up_command" in import_graph.edges("provisioner.lifecycle.cli").every
    assert "provisioner.lifecycle.up_command" not in import_graph.edges("provisioner.lifecycle.cli").eager
    # Under TYPE_CHECKING: never run, not an edge (registry names providers.base only for typing).
    assert "provisioner.providers.base" not in import_graph.edges(REGISTRY).every
    # The stacks and the realize core are in the graph (their folders are mapped by setup.py).
    assert {"provisioner.stacks.cluster", "provisioner.realize.sshpass", "provisioner.providers.base"} <= set(
        import_graph.modules()
    )


def test_every_source_folder_is_an_installed_package() -> None:
    """A folder of modules without ``__init__.py`` works from a checkout (a namespace package) and
    from an editable install, but setup.py's ``find_packages`` leaves it out of the wheel: a plain
    ``pip install .`` then fails with ModuleNotFoundError (``provisioner.local`` broke status,
    outputs, ssh and down that way)."""
    from setuptools import find_packages

    for prefix, folder in import_graph.FOLDERS.items():
        found = {folder / Path(*name.split(".")) for name in find_packages(folder)} | {folder}
        for source in folder.rglob("*.py"):
            if "__pycache__" in source.parts or (
                prefix == "provisioner" and source.relative_to(folder).parts[0] in ("providers", "stacks")
            ):
                continue
            assert source.parent in found, f"{source.parent.relative_to(ROOT)}: no __init__.py, not installed"


# ----- cycles and layers over what running a module loads (tests/import_graph.py: loads) -------------
COMMANDS = {
    # the command layer: argparse registration and the command bodies; they may import any layer
    "provisioner.cli",
    "provisioner.lifecycle.cli",
    "provisioner.lifecycle.command_support",
    "provisioner.lifecycle.up_command",
    "provisioner.lifecycle.burst_command",
    "provisioner.lifecycle.down_command",
    "provisioner.lifecycle.look_commands",
    "provisioner.lifecycle.costs_report",
    "provisioner.lifecycle.watch",
    "provisioner.validation.cli",
    "provisioner.validation.watch_cli",
}
ORDER = ("core", "providers", "refresh", "testing", "validation", "realize", "local", "stacks", "lifecycle", "commands")
"""Bottom to top (docs/dev/architecture.md): a module may load its own layer and the ones below."""
CORE_DATA = {"provisioner.providers", "provisioner.providers.registry", "provisioner.providers.descriptor"}


def layer_of(node: str) -> str:
    module = node.partition("@")[0]
    if module in COMMANDS:
        return "commands"
    if module in CORE_DATA or module == "provisioner":
        return "core"
    if module == "provisioner.refresh":
        return "refresh"
    part = module.split(".")[1]
    return part if part in ORDER else "core"


def test_no_runtime_import_cycles() -> None:
    assert import_graph.cycles() == []


def test_no_module_loads_a_higher_layer() -> None:
    up = sorted(
        f"{source} ({layer_of(source)}) -> {target} ({layer_of(target)})"
        for source in import_graph.modules()
        for target in import_graph.loads(source)
        if ORDER.index(layer_of(target)) > ORDER.index(layer_of(source))
    )
    assert up == []


def test_cycles_and_layers_see_function_level_imports_and_packages() -> None:
    # The checks above can fail: a function-level import back up is an edge, and two modules that
    # load each other are a cycle; a name a package binds at module level runs only its __init__.
    assert "provisioner.lifecycle.up_command" in import_graph.loads("provisioner.lifecycle.cli")
    assert "provisioner.lifecycle.command_support" in import_graph.loads("provisioner.validation.cli")
    assert layer_of("provisioner.validation.cli") == "commands" and layer_of("provisioner.validation.node") == (
        "validation"
    )
    assert "provisioner.catalog_model" in import_graph.loads("provisioner.catalog_json")
    assert "provisioner.catalog_json" not in import_graph.loads("provisioner.catalog_model")
    # a parent package runs its module level only; a module's own parents are never an edge
    assert "provisioner.providers@init" in import_graph.loads("provisioner.lifecycle.burst")
    assert "provisioner.providers" not in import_graph.loads("provisioner.lifecycle.burst")
    assert "provisioner.providers.aws@init" not in import_graph.loads("provisioner.providers.aws.client")


ARCHITECTURE = ROOT / "docs" / "dev" / "architecture.md"


def test_the_architecture_page_names_only_files_that_exist_and_the_layers_in_order() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:provisioner|providers|stacks|tests)/[\w/]*?\.py)`", text))
    folders = set(re.findall(r"`((?:provisioner|providers|stacks)/[\w/]*/)`", text))
    assert len(named) > 40 and len(folders) > 5  # the page is read, not skipped
    assert sorted(p for p in named | folders if not (ROOT / p).exists()) == []
    rows = re.findall(r"^\| (\w+) \|", text, flags=re.MULTILINE)
    assert tuple(r for r in rows if r != "layer") == ORDER
    commands = {f"provisioner/{m.removeprefix('provisioner.').replace('.', '/')}.py" for m in COMMANDS}
    assert commands <= named, sorted(commands - named)
