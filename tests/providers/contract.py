"""Discovery for the shared provider contract suite (the tests are in test_contract.py).

Every ``tests/providers/harness_<name>.py`` exposing ``make_harness()`` joins the suite;
adding a provider adds one file and nothing here changes.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.providers.harness import Harness

HERE = Path(__file__).resolve().parent


def harness_names() -> list[str]:
    """Provider names with a harness module, sorted."""
    return sorted(path.stem.removeprefix("harness_") for path in HERE.glob("harness_*.py"))


def load_harness(name: str) -> Harness:
    """A fresh Harness (with a fresh fake) from ``harness_<name>.make_harness()``."""
    module = importlib.import_module(f"tests.providers.harness_{name}")
    harness: Harness = module.make_harness()
    return harness


__all__ = ["harness_names", "load_harness"]
