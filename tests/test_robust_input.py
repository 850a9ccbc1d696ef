"""Hostile input ends in one line and leaves nothing running (issue 16, item 6).

Each defence layer on its own: the terminal escape (``termtext.printable``) for what is printed,
the adapters' address check for what a provider answers, the catch-all of ``up`` for anything
unexpected, the spec loader's depth limit, and the bounded ``.npz`` reader. (A NaN price in a
refresh: tests/test_refresh_untrusted.py.)
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from provisioner.catalog import MAX_NPZ_BYTES, load_catalog
from provisioner.cli import main
from provisioner.errors import CatalogError, SpecError, StackError
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up, tear_down
from provisioner.loader import parse_spec
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.events import RichLines
from provisioner.termtext import printable
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

ESC_TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain 198.51.100.7", "plain 198.51.100.7"),
        (ESC_TITLE, "\\x1b]0;owned\\x07"),
        (CLEAR, "\\x1b[2J\\x1b[H"),
        ("a\rb", "a\\x0db"),
        ("a\nb\tc", "a\\x0ab\\x09c"),
        ("c1\x9b31m", "c1\\x9b31m"),
        ("del\x7f", "del\\x7f"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
        ("ünïcode ok", "ünïcode ok"),
    ],
)
def test_printable_escapes_every_control_character(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_keeps_lines_when_asked() -> None:
    assert printable(f"one\n\ttwo{ESC_TITLE}", keep_newlines=True) == "one\n\ttwo\\x1b]0;owned\\x07"


def test_progress_lines_never_carry_an_escape(capsys: pytest.CaptureFixture[str]) -> None:
    RichLines()("running", message=f"head at 198.51.100.7{ESC_TITLE}{CLEAR}")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;owned" in err


def test_progress_keeps_the_lines_of_a_multi_line_message(capsys: pytest.CaptureFixture[str]) -> None:
    """``down``'s planned-vs-actual table is one message of several lines: shown as lines, not ``\\x0a``."""
    RichLines()("cost", message=f"cost of lc, planned vs actual:\ncompute  $0.61  $0.01{CLEAR}")
    assert capsys.readouterr().err.splitlines() == [
        "cost of lc, planned vs actual:",
        "compute  $0.61  $0.01\\x1b[2J\\x1b[H",
    ]


def _hostile_listing(app: Any, **changes: str) -> None:
    """The Lambda fake's listings with ``changes`` applied to every instance shown."""
    shown = app._visible
    app._visible = lambda: [{**body, **changes} for body in shown()]


def test_status_and_ssh_print_escape_provider_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        real = app._visible
        _hostile_listing(app, id=f"0920{ESC_TITLE}{CLEAR}")
        assert main(["status", "lc-lambda"]) == 0
        assert main(["ssh", "lc-lambda", "--print", "--", f"echo{CLEAR}"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out
        assert "0920\\x1b]0;owned\\x07" in out and "\\x1b[2J" in out
        app._visible = real
        tear_down("lc-lambda", instant_runtime(StandInRemote()))
        assert app.instance_count() == 0


def test_a_malformed_address_is_no_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter layer alone: a public IP with a space (or an escape) is dropped where it is read,
    so it never reaches ssh, /etc/hosts or the terminal, and the node can still be listed and deleted."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        rt = instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes]))
        bring_up(plan, rt)
        _hostile_listing(app, ip="198.51.100.7 -oProxyCommand=x", private_ip=f"10.0.0.9{ESC_TITLE}")
        nodes = rt.provider("lambda").get_nodes("lc-lambda")
        assert len(nodes) == 2 and all(n.public_ip is None and n.private_ip is None for n in nodes)
        assert sorted(tear_down("lc-lambda", rt)) == sorted(n.id for n in nodes)
        assert app.instance_count() == 0


class ExplodingRemote(StandInRemote):
    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        raise ValueError("a bug nobody expected")


def test_an_unexpected_exception_in_up_marks_the_record_failed_and_names_the_remove_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    with served_fake("lambda", monkeypatch) as (app, _server):
        rt = instant_runtime(ExplodingRemote(nodes=[n.name for n in plan.nodes]))
        with pytest.raises(StackError) as caught:
            bring_up(plan, rt)
        message = str(caught.value)
        assert "\n" not in message and "ValueError" in message
        assert "remove with: provisioner down lc-lambda --engine direct" in message
        assert "lc-lambda-0" in message and "lc-lambda-1" in message
        record = state.load_record("lc-lambda")
        assert record is not None and record.status == "failed"
        assert app.launched == 2 and app.instance_count() == 2  # the stress landed after the purchase
        assert main(["down", "lc-lambda"]) == 0
        assert app.instance_count() == 0 and state.load_record("lc-lambda") is None


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_a_spec_nested_ten_thousand_deep_is_one_located_line(opening: str) -> None:
    depth = 10_000
    closing = "]" if opening == "[" else "}"
    text = "name: deep\nnodes: " + opening * depth + "1" + closing * depth + "\n"
    assert len(text) > 16 * 1024  # over the C composer's size: the Python path, which recursed
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "deep.yaml")
    assert str(caught.value).startswith("deep.yaml:2:") and "nests more than 32 levels" in str(caught.value)


def test_the_cli_refuses_a_deep_spec_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "deep.yaml"
    spec.write_text("name: deep\nnodes: " + "[" * 10_000 + "]" * 10_000 + "\n")
    assert main(["plan", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{spec}:2:" in err


def _bomb(path: Path, declared: int, members: Sequence[tuple[str, bytes]] = ()) -> None:
    """A compressed .npz whose one column declares ``declared`` float64 values but holds a few."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (declared,)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("c.price_micro.npy", header.getvalue() + b"\0" * 64)
        for name, data in members:
            archive.writestr(name, data)


def test_an_npz_declaring_huge_arrays_is_refused_before_allocating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.npz"
    _bomb(path, declared=400_000_000)  # 3.2 GB declared, a few bytes held
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert "declares more data than it holds" in str(caught.value) and "\n" not in str(caught.value)


def test_an_npz_inflating_past_the_bound_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_NPZ_BYTES == 1 << 30
    monkeypatch.setattr("provisioner.catalog.MAX_NPZ_BYTES", 4 << 20)  # the same rule, 4 MiB: a cheap test
    path = tmp_path / "inflates.npz"
    _bomb(path, declared=1, members=[(f"c.pad{i}.npy", b"\0" * (1 << 20)) for i in range(4)])
    assert path.stat().st_size < 64 << 10  # zeros compress ~1000:1
    with pytest.raises(CatalogError, match="inflates to more than 4 MiB"):
        load_catalog(path)


def test_events_as_json_escape_control_characters() -> None:
    from provisioner.realize.events import JsonLines

    stream = io.StringIO()
    JsonLines(stream)("running", message=f"at {ESC_TITLE}")
    assert "\x1b" not in stream.getvalue() and json.loads(stream.getvalue())["message"].endswith(ESC_TITLE)
