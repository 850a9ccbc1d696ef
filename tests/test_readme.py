"""What the README promises is what the code does: the TTL table and the command list."""

from __future__ import annotations

import re
from pathlib import Path

from provisioner.render.teardown import TEARDOWN

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_readme_ttl_table_equals_the_code_table() -> None:
    rows = [line for line in _section("What stops the bill").splitlines() if line.startswith("| `")]
    parsed = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    assert parsed == [[f"`{row.provider}`", row.ttl, row.idle, row.client_dies] for row in TEARDOWN.values()]


def test_readme_commands_table_names_every_command() -> None:
    from provisioner.cli import build_parser
    from provisioner.cliargs import subcommand_names

    names = set(subcommand_names(build_parser()))
    documented = set(re.findall(r"`provisioner ([a-z]+)", _section("Commands")))
    documented |= set(re.findall(r"/ `([a-z]+) ", _section("Commands")))
    assert names <= documented, sorted(names - documented)
