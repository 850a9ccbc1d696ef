"""Issue 28, item 7: the readers of local files and command output fed hostile input (hypothesis).

- ``loads_bounded``: any bytes give a value within the bounds or UntrustedJSONError, nothing else;
- the ledger: any file content reads (bad lines skipped and counted), and ``costs`` prints every
  format of it with exit 0, never a raw escape;
- cluster records: any file content is a record or one ProvisionerError line; ``list_records`` skips;
- ``nvidia-smi`` XML and CSV: a GPU list or ParseError, from random text and from the real captures
  (tests' shared fixtures) with values spoiled;
- the kernel-log reader: any text gives XID events, each from a line that names one.
Example counts: tests/fuzzing.py's profile.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from provisioner.cli import main
from provisioner.errors import ProvisionerError
from provisioner.lifecycle import ledger, state
from provisioner.untrusted import MAX_JSON_DEPTH, UntrustedJSONError, loads_bounded, too_deep
from provisioner.validation.nvsmi import ParseError, parse_query_csv, parse_smi_xml
from provisioner.validation.xid import parse_kernel_log
from tests.conftest import need_shared
from tests.fuzzing import FUZZ, dumped, hostile_bodies, hostile_text, json_values


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@FUZZ
@given(body=hostile_bodies)
@example(body=b"[" * 200_000)
@example(body=b'{"a": 1e999}')
def test_loads_bounded_returns_a_bounded_value_or_one_refusal(body: bytes) -> None:
    try:
        value = loads_bounded(body)
    except UntrustedJSONError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert not too_deep(value, MAX_JSON_DEPTH) and _finite(value)


ENTRY_KINDS = st.sampled_from(["cluster", "removed", "metered", "billed", 7, None])
ledger_entries = st.fixed_dictionaries(
    {"cluster": st.one_of(st.just("c1"), hostile_text), "kind": ENTRY_KINDS},
    optional={
        "at": json_values,
        "created_at": json_values,
        "provider": json_values,
        "owner": json_values,
        "status": json_values,
        "planned_cents": json_values,
        "total_cents": json_values,
        "differences": json_values,
        "run": json_values,
        "local": json_values,
    },
)
ledger_lines = st.one_of(ledger_entries.map(dumped), hostile_bodies)


@FUZZ
@given(lines=st.lists(ledger_lines, max_size=6), fmt=st.sampled_from(["table", "json", "csv"]))
def test_costs_reads_any_ledger(lines: list[bytes], fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    skipped: list[int] = []
    entries = ledger.read(skipped=skipped)
    assert len(entries) + len(skipped) <= len(lines)
    for by in ("run", "cluster", "provider", "owner"):
        assert main(["costs", "--by", by, "-f", fmt, "--since", "3650d"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "Traceback" not in err


@FUZZ
@given(body=st.one_of(hostile_bodies, json_values.map(lambda v: dumped({"version": 1, "cluster_id": "c1", "plan": v}))))
def test_a_record_file_is_a_record_or_one_line(body: bytes) -> None:
    state.clusters_dir().mkdir(parents=True, exist_ok=True)
    state.record_path("c1").write_bytes(body)
    try:
        state.load_record("c1")
    except ProvisionerError as exc:
        assert "\n" not in str(exc)
    assert state.list_records() == [] or state.list_records()[0].cluster_id == "c1"


@FUZZ
@given(text=st.text(max_size=400) | hostile_text)
def test_nvidia_smi_readers_take_any_text(text: str) -> None:
    for parse in (parse_smi_xml, parse_query_csv):
        try:
            gpus = parse(text)
        except ParseError:
            continue
        assert all(isinstance(gpu.index, int) for gpu in gpus)


def _capture(name: str) -> str:
    """A real capture without the ``$ command`` line the fixtures start with."""
    text = need_shared("fixtures", "gpu", "h100-sxm-80gb", name).read_text(encoding="utf-8")
    return text.split("\n", 1)[1] if text.startswith("$ ") else text


@pytest.mark.parametrize(
    ("name", "parse"), [("nvidia-smi-q.xml", parse_smi_xml), ("nvidia-smi-query.csv", parse_query_csv)]
)
def test_nvidia_smi_captures_with_spoiled_values_parse_or_refuse(name: str, parse: Any) -> None:
    capture = _capture(name)
    assert parse(capture), "the real capture parses"

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        cut = data.draw(st.integers(min_value=0, max_value=len(capture)), label="at")
        span = data.draw(st.integers(min_value=0, max_value=40), label="span")
        junk = data.draw(st.one_of(hostile_text, st.sampled_from(["nan", "inf", "-1", "1e999", "]]>", "&x;", ","])))
        spoilt = capture[:cut] + junk + capture[cut + span :]
        try:
            gpus = parse(spoilt)
        except ParseError as exc:
            assert "\n" not in str(exc)
            return
        for gpu in gpus:
            for value in vars(gpu).values():
                assert not isinstance(value, float) or math.isfinite(value) or math.isnan(value)

    check()


@FUZZ
@given(
    lines=st.lists(
        st.one_of(
            hostile_text,
            st.builds(lambda x, b: f"NVRM: Xid (PCI:{b}): {x}, pid=1", st.integers(-5, 10**12), hostile_text),
        ),
        max_size=8,
    )
)
def test_the_kernel_log_reader_takes_any_text(lines: list[str]) -> None:
    text = "\n".join(lines)
    for event in parse_kernel_log(text):
        assert event.line in text and isinstance(event.xid, int) and "\n" not in event.line


def test_a_billion_laughs_in_nvidia_smi_xml_is_refused() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
        + "]><nvidia_smi_log><gpu><product_name>&i;</product_name></gpu></nvidia_smi_log>"
    )
    with pytest.raises(ParseError):
        parse_smi_xml(bomb)


def test_a_ledger_entry_that_is_valid_json_but_no_entry_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'[1]\n"x"\n{"cluster": 5}\n{"cluster": "ok"}\n')
    skipped: list[int] = []
    assert ledger.read(path, skipped) == [{"cluster": "ok"}] and skipped == [1, 2, 3]
    json.loads(path.read_bytes().splitlines()[3])
