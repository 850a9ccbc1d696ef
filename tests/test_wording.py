"""Counts in output agree with their nouns: ``1 GPU``, ``1 offer``, ``2 nodes`` (never ``1 GPUs``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.termtext import counted


def test_counted_agrees_with_the_count() -> None:
    assert [counted(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert counted(1, "more offer") == "1 more offer" and counted(3, "quota") == "3 quotas"
    assert counted(1, "box", "boxes") == "1 box" and counted(2, "box", "boxes") == "2 boxes"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    main(args)
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_one_gpu_and_one_offer_in_the_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "one.yaml"
    spec.write_text("name: one\ngpus: {model: [H100], count: 1}\nnodes: {count: 1}\n", encoding="utf-8")
    out, _ = _run(["plan", str(spec)], capsys)
    assert out.splitlines()[0] == "one: 1 GPU (H100) for 1 h"
    out, _ = _run(["catalog", "--provider", "vastai", "--gpu", "B200"], capsys)
    assert out.splitlines()[0] == "1 offer; prices as of 2026-11-20 from bundled"


@pytest.mark.parametrize(
    ("nodes", "line"),
    [
        ("{count: 2}", "3:9: nodes.count: 1 GPU cannot be split evenly across 2 nodes"),
        ("{count: 1, gpus_per_node: 8}", "3:19: nodes.gpus_per_node: 1 GPU cannot be split evenly into nodes of 8"),
    ],
)
def test_one_gpu_in_spec_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: str, line: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: xy\ngpus: {{model: [H100], count: 1}}\nnodes: {nodes}\n", encoding="utf-8")
    _, err = _run(["plan", str(spec)], capsys)
    assert err.strip() == f"{spec}:{line}"
