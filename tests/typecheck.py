"""mypy --strict over the installed package layout: ``python -m tests.typecheck [mypy options]``.

``provisioner.providers`` and ``provisioner.stacks`` live in ``providers/`` and ``stacks/`` (setup.py
maps them), which mypy cannot map from the repository's folders: run on ``provisioner/`` alone, every
``provisioner.providers`` import was a missing module and ``NodeSpec`` became ``Any``. This builds
the installed layout as a tree of links under ``build/typecheck/`` (``provisioner/*`` plus
``providers``, ``stacks`` and ``templates`` where setup.py puts them, and ``tests/typed_realize.py``,
what must not be ``Any``), runs mypy there on both with pyproject's ``[tool.mypy]``, and prints
mypy's lines with the repository's own paths. Exit status: mypy's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"
MAPPED = {"providers": ROOT / "providers", "stacks": ROOT / "stacks", "templates": ROOT / "templates"}
TYPED_TESTS = {"typed_realize.py": ROOT / "tests" / "typed_realize.py"}


def link_tree() -> Path:
    """(Re)build ``build/typecheck/provisioner`` as links into the repository. Returns the tree's root."""
    package = TREE / "provisioner"
    package.mkdir(parents=True, exist_ok=True)
    for name, target in TYPED_TESTS.items():
        if not (TREE / name).is_symlink():
            (TREE / name).symlink_to(target)
    wanted = {entry.name: entry for entry in (ROOT / "provisioner").iterdir() if entry.name != "__pycache__"}
    wanted.update(MAPPED)
    for existing in package.iterdir():
        if existing.name not in wanted or not existing.is_symlink() or existing.resolve() != wanted[existing.name]:
            existing.unlink()
    for name, target in wanted.items():
        if not (package / name).is_symlink():
            (package / name).symlink_to(target)
    return TREE


def repository_path(line: str) -> str:
    """A mypy line with the link tree's path turned back into the repository's."""
    for name in TYPED_TESTS:
        if line.startswith(f"{name}:"):
            return f"tests/{line}"
    prefix = "provisioner/"
    rest = line[len(prefix) :]
    return rest if line.startswith(prefix) and rest.split("/", 1)[0] in MAPPED else line


def main(argv: list[str]) -> int:
    from mypy import api

    os.chdir(link_tree())  # mypy names files relative to here, and keeps its cache here
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *argv, "provisioner", *TYPED_TESTS])
    for line in out.splitlines():
        print(repository_path(line))
    if err:
        print(err, file=sys.stderr, end="")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
