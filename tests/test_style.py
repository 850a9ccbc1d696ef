"""The style gates from STYLE.md, run with the suite: ruff (lint and format) and mypy --strict on everything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False)


def test_ruff_is_clean() -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.timeout(1800)  # cold (no build/typecheck cache), mypy reads pulumi_aws's and pulumi_gcp's types: minutes
def test_mypy_strict_is_clean_on_every_package() -> None:
    """mypy --strict over provisioner/, providers/ and stacks/ as installed (tests/typecheck.py), and
    tests/typed_realize.py's checks that the realize core's types are not Any."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "tests.typecheck")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
