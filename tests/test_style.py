"""The style gates from STYLE.md, run with the suite: ruff on everything, mypy on the core."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_ruff_is_clean() -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean_on_the_core() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
