"""Everything printed is escaped through one printer (issue 28 item 4).

- Source: no module of the tool writes to stdout or stderr except ``termtext.say`` (and the
  progress events, which escape through rich or JSON, and a job's own output passed through).
- Behaviour: every command that shows provider- or file-supplied text, in every format, run with
  control characters (OSC retitle, CSI clear screen, a C1 CSI, a bidi override) in every such
  string: the ledger's, a record's, a provider's instance names and cluster tags, a log line
  from a provider answer. Nothing but line feeds and tabs reaches the terminal raw.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle import ledger, state
from provisioner.lifecycle.costs_report import COST_FORMATS, GROUPINGS
from provisioner.providers import registry
from provisioner.providers.base import CLUSTER_TAG, Provider
from provisioner.termtext import install_log_printer, say
from provisioner.testing.fakes.base import serve
from tests.conftest import ROOT
from tests.providers.contract import load_harness
from tests.test_gc import FAST, NEOCLOUD_KEYS, UNLIMITED, gone_here
from tests.test_render_slurm import make_plan

EVIL = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
# Writers allowed besides termtext.say: (module, what) with why.
ALLOWED = {
    ("provisioner/termtext.py", "write"),  # the printer itself
    ("provisioner/realize/events.py", "write"),  # a job's own output, passed through as ssh would
}


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    return tmp_path / "state"


def assert_clean(text: str, context: str) -> None:
    found = RAW.search(text)
    assert found is None, (
        f"{context}: raw {found.group(0)!r} at {found.start()}: {text[max(0, found.start() - 60) :][:120]!r}"
    )


def test_nothing_but_the_printer_writes_to_the_terminal() -> None:
    found = []
    for path in sorted((ROOT / "provisioner").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("provisioner/testing/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "print":
                found.append((rel, "print", node.lineno))
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "write"
                and isinstance(func.value, ast.Attribute)
                and func.value.attr in ("stdout", "stderr")
                and (rel, "write") not in ALLOWED
            ):
                found.append((rel, "write", node.lineno))
    assert found == []


def test_say_escapes_and_keeps_lines(capsys: pytest.CaptureFixture[str]) -> None:
    say(f"a{EVIL}\n\tb")
    say("to stderr\x1b[2J", err=True)
    out, err = capsys.readouterr()
    assert out == "a\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e\n\tb\n" and err == "to stderr\\x1b[2J\n"


def test_a_log_line_from_a_provider_answer_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    # The CLI configures no logging handler, so warnings (orchestrate's "launch failed (<provider's
    # words>)") reach stderr through logging's last resort: the printer is that last resort.
    install_log_printer()
    logger = logging.getLogger("provisioner.test-printer")
    logger.propagate = False  # no handler anywhere: the last resort answers
    try:
        logger.warning("launch failed (%s)", EVIL)
    finally:
        logger.propagate = True
    err = capsys.readouterr().err
    assert_clean(err, "log line")
    assert "launch failed (\\x1b]0;owned" in err


def _hostile_ledger_and_record() -> None:
    plan = make_plan(nodes=1, price_per_hour_usd=0.29)
    record = state.ClusterRecord(cluster_id="c1", provider="aws", plan=plan, created_at=NOW, status="up")
    state.save_record(record)
    path = state.record_path("c1")
    doc = json.loads(path.read_text())
    doc["node_ids"] = {f"c1-0{EVIL}": f"i-1{EVIL}"}
    doc["head_address"] = f"203.0.113.9{EVIL}"
    doc["lease_host"] = f"box{EVIL}"
    path.write_text(json.dumps(doc))
    for kind, extra in (
        ("cluster", {"provider": f"aws{EVIL}", "owner": f"o{EVIL}", "status": f"up{EVIL}", "run": f"r{EVIL}"}),
        ("metered", {"total_cents": 87, "run": f"r{EVIL}"}),
        ("billed", {"total_cents": 88, "source": f"aws{EVIL}", "differences": [f"d{EVIL}"], "run": f"r{EVIL}"}),
    ):
        ledger.append({"kind": kind, "cluster": f"c1{EVIL}", "at": NOW.isoformat(), **extra})


def test_every_local_command_and_format_escapes_file_supplied_strings(capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_ledger_and_record()
    runs: list[list[str]] = [["costs", "-f", fmt, "--by", by] for fmt in COST_FORMATS for by in GROUPINGS]
    runs += [["status"], ["status", "--json"], ["outputs", "c1"], ["outputs", "c1", "--json"], ["ssh", "c1", "--print"]]
    shown = 0
    for argv in runs:
        main(argv)
        out, err = capsys.readouterr()
        assert_clean(out + err, " ".join(argv))
        shown += "]0;owned" in out + err  # \x1b]0;owned as text, \u001b]0;owned in JSON
    assert shown >= len(COST_FORMATS) * len(GROUPINGS), "the hostile strings were shown (escaped), not dropped"


def test_costs_live_and_gc_escape_what_a_provider_lists(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = load_harness("lambda")
    real_get_provider = registry.get_provider

    def fast(name: str, **kwargs: Any) -> Provider:
        return real_get_provider(name, **{"limits": UNLIMITED, "retry": FAST, **kwargs})

    monkeypatch.setattr(registry, "get_provider", fast)
    with serve(harness.app) as server:
        for var in NEOCLOUD_KEYS:
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_URL", server.url)
        monkeypatch.setenv("PROVISIONER_LAMBDA_API_KEY", harness.api_key)
        provider = harness.make_provider(api_key=harness.api_key, base_url=server.url, limits=UNLIMITED, retry=FAST)
        (node,) = provider.create_nodes("stray", gone_here(harness.node_specs(1, "n")))
        body = harness.app.instances[node.id]  # type: ignore[attr-defined]
        body["name"] = f"stray-n0{EVIL}"
        for tag in body["tags"]:
            if tag["key"] == CLUSTER_TAG:
                tag["value"] = f"stray{EVIL}"
        for argv in (
            ["costs", "--live"],
            ["costs", "--live", "-f", "json"],
            ["costs", "--live", "-f", "csv"],
            ["gc", "--provider", "lambda"],
            ["gc", "--provider", "lambda", "--yes"],
        ):
            main(argv)
            out, err = capsys.readouterr()
            assert_clean(out + err, " ".join(argv))
