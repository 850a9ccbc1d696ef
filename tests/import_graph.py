"""The installed package's import graph, read from the source with ``ast`` (no module is imported).

``provisioner.providers`` and ``provisioner.stacks`` live in other folders of the repository
(setup.py maps them), which graph tools that walk one package folder do not see; this reads
all three. An edge is:

- every ``import``/``from ... import`` statement, module level or inside a function (it runs
  when the function does), except under ``if TYPE_CHECKING:`` (never run);
- a module named by a string literal (``"provisioner.x.y"`` or ``"provisioner.x.y:Attr"``) in a
  module that calls ``importlib.import_module``/``__import__``: what a lazy import can load;
- the parent packages of every imported module (Python runs each ``__init__`` on the way).

A package reached only as a parent runs its module-level code, not its functions: only its
module-level imports are followed (``Edges.eager``), so a lazy ``__getattr__`` in a package
``__init__`` is followed only where code imports a name from that package itself.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "provisioner": ROOT / "provisioner",
    "provisioner.providers": ROOT / "providers",
    "provisioner.stacks": ROOT / "stacks",
}
_LITERAL = re.compile(r"^provisioner(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the installed ``provisioner`` package -> its source file."""
    found: dict[str, Path] = {}
    for prefix, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("").parts
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            if prefix == "provisioner" and parts[:1] in (("providers",), ("stacks",)):
                continue  # not part of the installed package (the repository's own folders are)
            found[".".join([prefix, *parts])] = path
    return found


@dataclass(frozen=True)
class Edges:
    eager: frozenset[str]
    """Modules imported at module level (what loading the module runs)."""
    every: frozenset[str]
    """Those plus function-level and import_module ones (what calling into the module may run)."""


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.AST, package: str) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        return {base} | {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules()}
    return set()


def _calls_import_module(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
                isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
            ):
                return True
    return False


@functools.cache
def edges(module: str) -> Edges:
    """What ``module`` imports (names of this package's modules and of external top-level packages)."""
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    hidden = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for sub in node.body
        for n in ast.walk(sub)
    }
    eager: set[str] = set()
    every: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        if id(node) in hidden:
            return
        found = _targets(node, package)
        every.update(found)
        if top:
            eager.update(found)
        inner = top and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    if _calls_import_module(tree):
        every |= {
            node.value.partition(":")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _LITERAL.match(node.value)
        }
    return Edges(frozenset(eager), frozenset(every))


def _with_parents(names: frozenset[str]) -> tuple[set[str], set[str]]:
    """(the named modules of this package, their parent packages)."""
    named = {name for name in names if name in modules()}
    parents = {".".join(name.split(".")[:i]) for name in names for i in range(1, len(name.split(".")))}
    return named, {p for p in parents if p in modules()} - named


def reach(start: str, *, stop: frozenset[str] = frozenset()) -> dict[str, str | None]:
    """Every module of the package that loading and using ``start`` may run -> the module that
    brought it in (None for ``start``). Modules in ``stop`` are reached but not followed."""
    via: dict[str, str | None] = {}
    full: set[str] = set()
    todo: list[tuple[str, str | None, bool]] = [(start, None, True)]
    while todo:
        name, parent, whole = todo.pop()
        if name in via and (name in full or not whole):
            continue
        via.setdefault(name, parent)
        if whole:
            full.add(name)
        if name in stop and name != start:
            continue
        found = edges(name)
        named, parents = _with_parents(found.every if whole else found.eager)
        todo += [(n, name, True) for n in named] + [(p, name, False) for p in parents]
    return via


def chain(via: dict[str, str | None], name: str) -> str:
    """``name <- ... <- start``: how ``start`` reaches ``name``."""
    out = [name]
    while (parent := via[out[-1]]) is not None:
        out.append(parent)
    return " <- ".join(out)


def external(module: str) -> set[str]:
    """The top-level names of the packages outside this one that ``module`` imports."""
    return {name.split(".")[0] for name in edges(module).every if not name.startswith("provisioner")}


# ----- cycles: what importing a module and calling into it runs, statement by statement -----------
# A node is a module run whole ("m", its functions may be called) or a package whose ``__init__`` runs
# only its module level ("p@init": reached as a parent, or for a name bound at its module level).
# Lazy loads by name (``import_module`` on a string: the registry, a package's ``__getattr__``
# reached only through names it binds lazily) are not edges of this graph: they run when asked for
# one provider or one name, which is what makes them lazy.
INIT = "@init"


def _is_package(name: str) -> bool:
    return name in modules() and modules()[name].name == "__init__.py"


@functools.cache
def _bound_at_module_level(package: str) -> frozenset[str]:
    """Names a package's ``__init__`` binds by import or assignment at module level (data, not code)."""
    tree = ast.parse(modules()[package].read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) + INIT for i in range(1, len(parts)) if _is_package(".".join(parts[:i]))}


def _statement_loads(node: ast.AST, package: str) -> set[str]:
    if isinstance(node, ast.Import):
        out: set[str] = set()
        for alias in node.names:
            if alias.name in modules():
                out |= {alias.name} | _parents(alias.name)
        return out
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    if base not in modules():
        return set()
    out = _parents(base)
    if not _is_package(base):
        return out | {base}
    out.add(base + INIT)
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in modules():
            out |= {sub}
        elif alias.name not in _bound_at_module_level(base):
            out.add(base)  # a function or class of the package, or a name its __getattr__ loads
    return out


@functools.cache
def loads(node: str) -> frozenset[str]:
    """The nodes running ``node`` may run next (see INIT above); TYPE_CHECKING imports excluded."""
    module, _, part = node.partition("@")
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    package = module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]
    hidden = {
        id(n)
        for sub in ast.walk(tree)
        if isinstance(sub, ast.If) and _is_type_checking(sub)
        for body in sub.body
        for n in ast.walk(body)
    }
    found: set[str] = set()

    def visit(item: ast.AST, top: bool) -> None:
        if id(item) in hidden or (part and not top):
            return
        found.update(_statement_loads(item, package))
        inner = top and not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(item):
            visit(child, inner)

    visit(tree, True)
    # A module's own parent packages have always started running before it (Python runs each
    # ``__init__`` on the way down): naming them again loads nothing new.
    found -= _parents(module) | {module + INIT}
    found.discard(node)
    return frozenset(found)


def cycles() -> list[list[str]]:
    """The strongly connected components of more than one node of the ``loads`` graph (Tarjan)."""
    nodes = sorted(set(modules()) | {p + INIT for p in modules() if _is_package(p)})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in loads(v):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in nodes:
        if v not in index:
            connect(v)
    return found


__all__ = ["Edges", "chain", "cycles", "edges", "external", "loads", "modules", "reach"]
