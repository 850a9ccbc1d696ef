"""The import contract: the pure core never imports the shell (providers, stacks, lifecycle, the
fakes) or a cloud SDK, directly or through another module.

Checked on the source with ``ast`` (every import statement, function-level ones too), because
``provisioner.providers`` and ``provisioner.stacks`` live in other folders of the repository
(setup.py maps them) where graph tools that walk one package folder do not look.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "provisioner"
PURE = {
    "provisioner.spec", "provisioner.loader", "provisioner.catalog", "provisioner.optimizer",
    "provisioner.offer_table", "provisioner.costs", "provisioner.columns", "provisioner.money",
    "provisioner.offer", "provisioner.plan", "provisioner.capabilities", "provisioner.errors",
    "provisioner.render", "provisioner.report", "provisioner.metering",
}
# What the pure core may read from outside itself: the provider list (pure data) and templates.
ALLOWED = {"provisioner.providers.registry", "provisioner.templates", "provisioner.capabilities",
           "provisioner.secrets"}  # the cluster secrets model the renderer fills in
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
        name for name in _imports(path, module)
        if (name.startswith("provisioner.") and not _is_pure(name)
            and not any(name == a or name.startswith(f"{a}.") for a in ALLOWED))
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
    assert all(not n.startswith("provisioner.") or _is_pure(n) or n == "provisioner.providers.base"
               for n in names), names
    assert "TYPE_CHECKING" in registry.read_text(encoding="utf-8")
