"""The seal of a local dry run reaches the processes it starts (providers/seal.py): the Pulumi engine's
language host, program and dynamic providers under ``up --local --engine pulumi`` are separate
processes, which must refuse every provider the lab does not serve as the CLI itself does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from provisioner.providers import seal

ASK = """
import sys
from provisioner.providers import settings
from provisioner.errors import UsageError
for name in sys.argv[1:]:
    try:
        print(name, settings.api_url(name, "https://real.example"))
    except UsageError as exc:
        print(name, "refused:", exc)
"""


def _child(*providers: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", ASK, *providers], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.splitlines()


def test_a_child_process_is_sealed_to_the_same_lab_and_unsealed_with_it() -> None:
    seal.seal_to("lc-twin", {"lambda": "http://127.0.0.1:4711"})
    assert _child("lambda", "aws") == [
        "lambda http://127.0.0.1:4711",
        "aws refused: cluster lc-twin is a local dry run: no real provider is asked (its lab's lambda fake only)",
    ]
    seal.seal_to("lc-none")  # no lab runs: nothing may be asked, here or below
    assert _child("runpod") == [
        "runpod refused: cluster lc-none is a local dry run: no real provider is asked "
        "(its lab is not running here, so nothing is)"
    ]
    seal.unseal()
    assert seal.SEAL_ENV not in os.environ
    assert _child("lambda") == ["lambda https://real.example"]


@pytest.mark.parametrize("value", ["{not json", '{"cluster": 3, "urls": {}}', '{"cluster": "x", "urls": {"aws": 1}}'])
def test_an_unreadable_inherited_seal_allows_nothing(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(seal.SEAL_ENV, value)
    with pytest.raises(seal.SealedError, match="no real provider is asked"):
        seal.check("aws")
