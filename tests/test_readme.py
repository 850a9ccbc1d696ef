"""What the README promises is what the code does: the TTL table and the command list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_readme_sample_is_the_real_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's sample, each part between its "..." lines, is what the command prints today at
    150 columns on the bundled catalog (it had lost the warnings every fresh install prints). The
    report's clock is set to when the sample was made; nothing else is masked."""
    import datetime as dt

    from provisioner import __version__, workflow
    from provisioner.cli import main
    from provisioner.report import ReportMeta

    block = _section("Sample output").split("```\n")[1]
    command, *shown = block.rstrip("\n").splitlines()
    assert command.startswith("$ provisioner plan examples/h200-dataset-aws.yaml --top 4")
    made = dt.datetime(2026, 11, 28, 19, 51, tzinfo=dt.UTC)
    monkeypatch.setattr(workflow, "report_meta", lambda: ReportMeta(generated_at=made, tool_version=__version__))
    monkeypatch.setenv("COLUMNS", "150")
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "no-cache"))  # the bundled catalog
    monkeypatch.chdir(ROOT)
    assert main(["plan", "examples/h200-dataset-aws.yaml", "--top", "4"]) == 0
    real = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    parts = "\n".join(shown).split("\n...")
    assert len(parts) >= 2 and "warning: SSH: access.allowed_cidrs is not set" in parts[0]
    at = 0
    for part in parts:
        lines = part.strip("\n").splitlines()
        if not lines:
            continue
        found = next((i for i in range(at, len(real)) if real[i : i + len(lines)] == lines), None)
        assert found is not None, f"not in the real output (in order):\n{part}\n--- real:\n" + "\n".join(real)
        at = found + len(lines)
