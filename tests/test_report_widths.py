"""The terminal tables at any width from 80 columns: a word or an identifier is never cut across
lines (rich's own narrowing drew ``privat``/``e`` and ``us-east``/``-1``); columns that do not fit
are left out and the caption names them."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.report.terminal import fit_columns

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "h200-dataset-aws.yaml"


def _ranked(out: str) -> list[str]:
    """The ranked and best-per-provider tables' lines, without the note on left-out columns."""
    lines = out[out.index("Ranked options") : out.index("Quote only")].splitlines()
    return [line for line in lines if not line.startswith(("not shown at ", "─"))]


def _plan_at(width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["plan", str(EXAMPLE), "--top", "3"]) == 0
    return capsys.readouterr().out


def test_no_word_of_the_ranked_table_is_cut_at_any_width(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = {word for line in _ranked(_plan_at(139, monkeypatch, capsys)) for word in line.split()}
    assert {"us-east-1", "cluster_8x_H200-SXM", "p5en.48xlarge", "private", "fabric"} <= whole
    for width in range(80, 139, 3):
        lines = _ranked(_plan_at(width, monkeypatch, capsys))
        assert max(map(len, lines)) <= width
        cut = {word for line in lines for word in line.split()} - whole
        assert not cut, f"at {width} columns: {sorted(cut)}"


def test_a_narrow_terminal_leaves_columns_out_and_says_which(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan_at(80, monkeypatch, capsys)
    assert "not shown at 80 columns: per node, spot, $/GPU-h" in out.splitlines()
    assert "#  provider  region     instance type        nodes  network       $/h      total" in out.splitlines()


def test_fit_columns_drops_in_order_then_grows_the_least_short_first() -> None:
    headers = ["id", "note", "price"]
    rows = [["p5en.48xlarge", "private network", "12.00"]]
    whole = [True, False, True]
    assert fit_columns(headers, whole, rows, 40) == ([0, 1, 2], [13, 15, 5])
    assert fit_columns(headers, whole, rows, 30) == ([0, 1, 2], [13, 8, 5])  # wraps between words
    assert fit_columns(headers, whole, rows, 24, ["price"]) == ([0, 1], [13, 9])  # drop before cutting
    assert fit_columns(headers, whole, rows, 10, ["price"]) == ([0, 1], [13, 7])  # nothing left to drop
