"""One money format and one time format in every human output (issue 27 item 5): ``$8,134.38``
(thousands separators, cents), ``n/a`` for what is not known, moments to the second. JSON and CSV
keep the plain decimal text."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.lifecycle import ledger, state
from provisioner.metering import TermLine
from provisioner.money import cents_text, usd_text
from provisioner.termtext import when_text
from tests.test_render_slurm import make_plan

D = Decimal
NOW = dt.datetime(2026, 11, 26, 12, 0, 5, 123456, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "alice")
    return tmp_path / "state"


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (D("8134.38"), "$8,134.38"),
        (D("8134.3"), "$8,134.30"),
        (D("1234567"), "$1,234,567.00"),
        (D("0"), "$0.00"),
        (D("4.355"), "$4.355"),  # a price past the cents is kept, never rounded away
        (D("0.000000001"), "$0.000000001"),  # never exponent form
        (D("-1"), "-$1.00"),
        (D("-8134.38"), "-$8,134.38"),
        ("27.19", "$27.19"),  # a record's decimal text
        (None, "n/a"),
    ],
)
def test_usd_text(amount: object, text: str) -> None:
    assert usd_text(amount) == text  # type: ignore[arg-type]


def test_cents_text() -> None:
    assert [cents_text(c) for c in (813438, 5, -100, None)] == ["$8,134.38", "$0.05", "-$1.00", "n/a"]


@pytest.mark.parametrize(
    ("when", "text"),
    [
        (NOW, "2026-11-26 12:00:05 UTC"),  # microseconds dropped
        (
            dt.datetime(2026, 11, 26, 13, 0, 5, 999999, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "2026-11-26 12:00:05 UTC",
        ),
        ("2026-11-26T12:00:05.123456+00:00", "2026-11-26 12:00:05 UTC"),
        (None, "n/a"),
    ],
)
def test_when_text(when: object, text: str) -> None:
    assert when_text(when) == text  # type: ignore[arg-type]


def test_planned_vs_actual_lines_use_the_one_format() -> None:
    """down's table: $8,134.38 and a signed difference; it printed $8134.38."""
    from provisioner.metering import Comparison

    lines = Comparison(lines=(TermLine("compute", 813438, 5), TermLine("egress", 120000, None)), notes=()).render()
    assert lines[1].split() == ["compute", "$8,134.38", "$0.05", "-$8,134.33"]
    assert lines[2].split() == ["egress", "$1,200.00", "n/m", "-"]
    assert lines[3].split() == ["total", "$9,334.38", "$0.05", "-$9,334.33"]


def test_status_and_costs_write_money_with_separators_and_times_to_the_second(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = make_plan(nodes=1, price_per_hour_usd=2345.6789)
    expires = NOW + dt.timedelta(hours=4)
    for name in ("big", "fresh"):
        record = state.ClusterRecord(
            cluster_id=name, provider="aws", plan=plan, created_at=NOW, status="up", expires_at=expires
        )
        state.save_record(record)
    ledger.append({"kind": "metered", "cluster": "big", "at": NOW.isoformat(), "total_cents": 813438})
    assert main(["status"]) == 0
    big, fresh = capsys.readouterr().out.splitlines()
    assert "$2,345.6789/h  expires 2026-11-26 16:00:05 UTC  metered $8,134.38 (last status)" in big, big
    assert fresh.endswith("metered n/a (last status)") and "$-" not in fresh, fresh  # it said "metered $-"
    assert main(["status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["metered_usd"] for r in rows] == ["8134.38", None]  # JSON keeps the plain decimal
    assert main(["costs", "--by", "cluster"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[3:5] == ["$8,134.38", "n/a"], table  # metered, billed (it printed $8134.38, -)
