"""The checkpoint store's credentials for nodes without their own (issue 30, item 1 on a neocloud).

- the spec names them (``checkpoint.credentials_env`` / ``credentials_file``): each mistake one located
  line; only the names reach plan.json;
- a name unset at ``up``/``burst``/``watch`` is one line, exit 2, before anything is bought;
- the SSH pass writes them on every node (``CREDENTIALS_FILE``, 0600) with a script that runs here under
  a scratch root, before the node's bootstrap, for a single bare node too (``ssh_pass_nodes``);
- canaries: the values are nowhere but in that script: not in plan.json, the record, the state dir,
  the rendered boot files, the requests and answers the provider's fake logged, what it sold, the
  events, the log records or an error's text.

The copy with those keys against a store that checks them: tests/test_store_credentials_rclone.py;
a heal's replacement, a moved run and the Pulumi step: tests/test_store_credentials_flow.py.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import SpecError, UsageError
from provisioner.lifecycle import state
from provisioner.lifecycle.realize import bring_up
from provisioner.loader import parse_spec
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.sshpass import ssh_pass_nodes
from provisioner.realize.store_credentials import credentials_script, read_store_credentials
from provisioner.render import render_cluster
from provisioner.render.checkpoint_sync import CREDENTIALS_FILE
from provisioner.secrets import ClusterSecrets
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake
from tests.test_secrets_over_ssh import decoded

KEY_ID = f"AKIACANARY{uuid.uuid4().hex[:10].upper()}"
SECRET = f"SECRET-CANARY-{uuid.uuid4().hex}/it's+$HOME"
"""A quote and a ``$``: the file on the node must hold it byte for byte, never expanded."""
STORE_ENV = {"CKPT_KEY_ID": KEY_ID, "CKPT_SECRET": SECRET}
CREDS = (
    "checkpoint: {remote: s3://ckpt-bucket/runs, "
    "credentials_env: {access_key_id: CKPT_KEY_ID, secret_access_key: CKPT_SECRET}}\n"
)
SPEC = LAMBDA_SPEC + CREDS
BASE = "name: demo\ngpus: {count: 2}\ncheckpoint:\n"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    for name in STORE_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  remote: s3://b-1/x\n  credentials_env: [AWS_ACCESS_KEY_ID]\n",
            "s.yaml:4:3: checkpoint: credentials_env: an s3:// store needs secret_access_key",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: [AWS_ACCESS_KEY_ID, 'A;B']\n",
            "s.yaml:5:20: checkpoint.credentials_env: 'A;B' is not a variable name (letters, digits, '_')",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: {access_key_id: 'X Y', secret_access_key: S}\n",
            "s.yaml:5:20: checkpoint.credentials_env: 'X Y' is not a variable name (letters, digits, '_')",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: [AWS_ACCESS_KEY_ID, R2_KEY]\n",
            "s.yaml:5:20: checkpoint.credentials_env: 'R2_KEY': the list form names AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; map other names by role: "
            "{access_key_id: VAR, secret_access_key: VAR}",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: {access_key_id: A, secret: S}\n",
            "s.yaml:4:3: checkpoint: credentials_env: 'secret' is not an s3:// credential "
            "(one of access_key_id, secret_access_key, session_token)",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID]\n",
            "s.yaml:5:20: checkpoint.credentials_env: a variable is named twice",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_env: {}\n",
            "s.yaml:5:20: checkpoint.credentials_env: name at least one variable",
        ),
        (
            "  credentials_env: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]\n",
            "s.yaml:4:3: checkpoint: credentials_env and credentials_file need a remote: "
            "set remote: s3://... or gs://...",
        ),
        (
            "  remote: gs://b-1/x\n  credentials_env: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]\n",
            "s.yaml:4:3: checkpoint: credentials_env's list form names AWS variables: for gs:// use credentials_file",
        ),
        (
            "  remote: s3://b-1/x\n  credentials_file: ~/sa.json\n",
            "s.yaml:4:3: checkpoint: credentials_file is a gs:// store's service-account key; "
            "an s3:// store uses credentials_env",
        ),
        (
            "  remote: gs://b-1/x\n  credentials_env: {service_account_credentials: X}\n  credentials_file: a.json\n",
            "s.yaml:4:3: checkpoint: credentials_env names service_account_credentials and "
            "credentials_file gives it too: keep one",
        ),
        (
            "  remote: gs://b-1/x\n  credentials_file: ''\n",
            "s.yaml:5:21: checkpoint.credentials_file: expected the path of a service-account key file (JSON)",
        ),
    ],
)
def test_bad_credential_names_give_one_located_line(body: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(BASE + body, "s.yaml")
    assert str(info.value) == expected and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("body", "sources"),
    [
        (
            "  remote: s3://b-1/x\n  credentials_env: [AWS_SESSION_TOKEN, AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID]\n",
            (
                ("access_key_id", "env", "AWS_ACCESS_KEY_ID"),
                ("secret_access_key", "env", "AWS_SECRET_ACCESS_KEY"),
                ("session_token", "env", "AWS_SESSION_TOKEN"),
            ),
        ),
        (
            "  remote: s3://b-1/x\n  endpoint_url: https://r2.example\n"
            "  credentials_env: {secret_access_key: R2_SECRET, access_key_id: R2_ID}\n",
            (("access_key_id", "env", "R2_ID"), ("secret_access_key", "env", "R2_SECRET")),
        ),
        (
            "  remote: gs://b-1/x\n  credentials_file: ~/sa.json\n",
            (("service_account_credentials", "file", "~/sa.json"),),
        ),
        (
            "  remote: gs://b-1/x\n  credentials_env: {service_account_credentials: GCS_KEY_JSON}\n",
            (("service_account_credentials", "env", "GCS_KEY_JSON"),),
        ),
        ("  remote: s3://b-1/x\n", ()),
    ],
)
def test_each_credential_is_an_rclone_option_from_a_variable_or_a_file(
    body: str, sources: tuple[tuple[str, str, str], ...]
) -> None:
    assert parse_spec(BASE + body, "s.yaml").checkpoint.credential_sources() == sources


def test_the_plan_holds_the_names_only_and_a_plan_without_them_is_unchanged(tmp_path: Path) -> None:
    (plan,) = plans_for(SPEC, tmp_path, count=1)
    saved = json.loads(plan.dumps())
    assert saved["spec"]["checkpoint"]["credentials_env"] == {
        "access_key_id": "CKPT_KEY_ID",
        "secret_access_key": "CKPT_SECRET",
    }
    (bare,) = plans_for(LAMBDA_SPEC + "checkpoint: {remote: s3://ckpt-bucket/runs}\n", tmp_path, count=1)
    assert json.loads(bare.dumps())["spec"]["checkpoint"] == {"remote": "s3://ckpt-bucket/runs", "endpoint_url": None}


def test_a_variable_unset_or_empty_is_one_line_naming_it(tmp_path: Path) -> None:
    spec = parse_spec(BASE + "  remote: s3://b-1/x\n  credentials_env: {access_key_id: K1, secret_access_key: K2}\n")
    with pytest.raises(UsageError) as info:
        read_store_credentials(spec.checkpoint, {"K1": KEY_ID})
    assert str(info.value) == (
        "checkpoint.credentials_env: K2 is not set in this environment; export it before up/burst/watch "
        "(the nodes get its value over SSH, docs/healing.md)"
    )
    assert info.value.exit_code == 2 and KEY_ID not in str(info.value)
    with pytest.raises(UsageError, match="K1 is not set"):
        read_store_credentials(spec.checkpoint, {"K1": "", "K2": SECRET})
    found = read_store_credentials(spec.checkpoint, {"K1": KEY_ID, "K2": SECRET})
    assert found is not None and found.secret_values() == (KEY_ID, SECRET)
    assert KEY_ID not in repr(found) and SECRET not in repr(found) and repr(found) == "StoreCredentials(K1, K2)"


def test_a_key_file_unreadable_or_not_json_is_one_line_without_its_contents(tmp_path: Path) -> None:
    key = tmp_path / "sa.json"
    spec = parse_spec(BASE + f"  remote: gs://b-1/x\n  credentials_file: {key}\n")
    with pytest.raises(UsageError) as info:
        read_store_credentials(spec.checkpoint, {})
    assert str(info.value) == f"checkpoint.credentials_file: cannot read {key} (No such file or directory)"
    key.write_text(f"not json {SECRET}")
    with pytest.raises(UsageError) as info:
        read_store_credentials(spec.checkpoint, {})
    assert str(info.value) == f"checkpoint.credentials_file: {key} is not a service-account key (a JSON object)"
    assert SECRET not in str(info.value)
    text = json.dumps({"type": "service_account", "private_key": SECRET})
    key.write_text(text)
    found = read_store_credentials(spec.checkpoint, {})
    assert found is not None and found.values[0][0] == "service_account_credentials"
    assert found.secret_values() == (text,)


def run_script(script: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PROVISIONER_ROOT": str(root)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False, timeout=60)


def sourced(path: Path) -> dict[str, str]:
    """What ``set -a; . FILE`` exports, as bash reads it (not as this test's Python would parse it)."""
    printed = subprocess.run(
        ["bash", "-c", 'set -a; . "$1"; env -0', "_", str(path)],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        check=True,
    ).stdout.decode()
    pairs = (item.split("=", 1) for item in printed.split("\0") if item.startswith("RCLONE_CONFIG_CKPT_"))
    return dict(pairs)  # type: ignore[arg-type]


def test_the_script_writes_the_file_root_only_with_the_values_byte_for_byte(tmp_path: Path) -> None:
    spec = parse_spec(BASE + "  remote: s3://b-1/x\n  credentials_env: {access_key_id: K1, secret_access_key: K2}\n")
    found = read_store_credentials(spec.checkpoint, {"K1": KEY_ID, "K2": SECRET + "\nline two"})
    assert found is not None
    script = credentials_script(found)
    assert SECRET not in script and KEY_ID not in script  # embedded in base64, never parsed by the shell
    (tmp_path / "etc").mkdir()
    for _ in range(2):  # idempotent
        done = run_script(script, tmp_path)
        assert done.returncode == 0, done.stderr
    written = tmp_path / CREDENTIALS_FILE.lstrip("/")
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o755  # made here: still readable for the rest
    assert sorted(p.name for p in written.parent.iterdir()) == [written.name]  # no temp file left
    assert sourced(written) == {
        "RCLONE_CONFIG_CKPT_ACCESS_KEY_ID": KEY_ID,
        "RCLONE_CONFIG_CKPT_SECRET_ACCESS_KEY": SECRET + "\nline two",
    }


def test_a_bare_single_node_gets_the_ssh_pass_only_when_credentials_are_named(tmp_path: Path) -> None:
    one = LAMBDA_SPEC.replace("nodes: {count: 2}", "nodes: {count: 1}")
    bare = one.replace("control_plane: slurm", "control_plane: none")
    (plain,) = plans_for(bare + "checkpoint: {remote: s3://ckpt-bucket/runs}\n", tmp_path, count=1)
    (named,) = plans_for(bare + CREDS, tmp_path, count=1)
    assert len(named.nodes) == 1 and named.spec.control_plane.value == "none"
    assert ssh_pass_nodes(plain) == []
    assert [n.name for n in ssh_pass_nodes(named)] == [named.nodes[0].name]


class RecordingRemote(StandInRemote):
    def __init__(self, nodes: Sequence[str]) -> None:
        super().__init__(nodes=nodes)
        self.scripts: dict[str, list[str]] = {}

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        super().bootstrap(target, script, timeout_s=timeout_s)
        self.scripts.setdefault(target.node_name, []).append(script)


def assert_delivered(scripts: Sequence[str], root: Path) -> None:
    """The node's scripts: the store's credentials written (run for real under ``root``) before its
    bootstrap (the last script), which holds none of them."""
    (index,) = [i for i, s in enumerate(scripts) if CREDENTIALS_FILE in s and "base64 -d" in s]
    assert index == len(scripts) - 2
    assert run_script(scripts[index], root).returncode == 0
    assert sourced(root / CREDENTIALS_FILE.lstrip("/")) == {
        "RCLONE_CONFIG_CKPT_ACCESS_KEY_ID": KEY_ID,
        "RCLONE_CONFIG_CKPT_SECRET_ACCESS_KEY": SECRET,
    }
    assert all(value not in form for value in (KEY_ID, SECRET) for form in decoded(scripts[-1]))


def needles() -> list[str]:
    from provisioner.providers.redact import base64_forms

    return [KEY_ID, SECRET, *base64_forms(SECRET), *base64_forms(KEY_ID)]


def assert_nowhere(texts: dict[str, str]) -> None:
    for where, text in texts.items():
        for form in decoded(text):
            assert not any(needle in form for needle in needles()), f"a store credential is in {where}"


def test_the_ssh_pass_delivers_them_and_they_are_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    caplog.set_level(logging.DEBUG)
    (plan,) = plans_for(SPEC, tmp_path, count=1)
    events: list[dict[str, object]] = []
    with served_fake("lambda", monkeypatch) as (app, _server):
        remote = RecordingRemote([n.name for n in plan.nodes])
        bring_up(plan, instant_runtime(remote, events, environ=STORE_ENV))
        boot = [b.boot for b in app.bought.values()]
    assert sorted(remote.scripts) == sorted(n.name for n in plan.nodes)  # the stress landed on every node
    for name, scripts in remote.scripts.items():
        assert_delivered(scripts, tmp_path / "nodes" / name)
    rendered = render_cluster(plan, ClusterSecrets.generate("canary"))
    state_files = {str(p): p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*") if p.is_file()}
    record = state.load_record(plan.cluster_id)
    assert record is not None and "CKPT_SECRET" in record.plan.dumps()  # the name is there, the value is not
    assert_nowhere(
        {
            "plan.json": record.plan.dumps(),
            **state_files,
            **{f"rendered {path}": text for path, text in rendered.items()},
            **{f"sold {i}": text for i, text in enumerate(boot)},
            **{f"{x.method} {x.path} #{i}": t for i, x in enumerate(app.exchanges) for t in x.texts()},
            "events": json.dumps(events, default=str),
            "logs": "\n".join(r.getMessage() for r in caplog.records),
        }
    )
    said = [e["message"] for e in events if "credentials" in str(e["message"])]
    assert said == ["the checkpoint store's credentials (CKPT_KEY_ID, CKPT_SECRET) go to 2 node(s) over SSH only"]


@pytest.mark.parametrize("command", [["up", "--engine", "direct"], ["up", "--engine", "pulumi"], ["burst"]])
def test_up_and_burst_refuse_an_unset_variable_before_anything_is_bought(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("CKPT_KEY_ID", KEY_ID)  # CKPT_SECRET is not set
    monkeypatch.setattr("provisioner.lifecycle.pulumi_engine.require_pulumi", lambda: None)
    with served_fake("lambda", monkeypatch) as (app, _server):
        job = ["--", "true"] if command == ["burst"] else []
        assert main([command[0], str(spec), *command[1:], *job]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines() == [
            "error: checkpoint.credentials_env: CKPT_SECRET is not set in this environment; export it before "
            "up/burst/watch (the nodes get its value over SSH, docs/healing.md)"
        ]
        assert app.launched == 0 and state.list_records() == []
        assert KEY_ID not in err


def test_watch_refuses_an_unset_variable_before_it_replaces_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime as dt

    (plan,) = plans_for(SPEC, tmp_path, count=1)
    state.save_record(
        state.ClusterRecord(
            cluster_id=plan.cluster_id,
            provider="lambda",
            engine="direct",
            plan=plan,
            created_at=dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
            status="up",
        )
    )
    assert main(["watch", plan.cluster_id, "--once"]) == 2
    assert "checkpoint.credentials_env: CKPT_KEY_ID is not set" in capsys.readouterr().err
