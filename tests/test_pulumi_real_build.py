"""The Pulumi CLI this repository builds (.ci/build-pulumi) and its two plugins, driven for real.

The build script's refusals run everywhere (bash only); the rest needs the built CLI
(``tests.pulumi_real``: skipped without it, failed under REQUIRE_SYSTEM_TOOLS=1). The small project
here is not the provisioner program: it pins what the language host and the dynamic-provider plugin
must do for any program (outputs, secrets, a dynamic resource created, updated, deleted, a program
error shown once), so a failure in tests/test_pulumi_real_handrun.py points at the stack, not the host.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import need_tool
from tests.pulumi_real import BUILD_SCRIPT, PLUGINS, PulumiEngine, pulumi_engine

MODULE = BUILD_SCRIPT.parent / "pulumi" / "cli"


@pytest.fixture
def engine(tmp_path: Path) -> PulumiEngine:
    return pulumi_engine(tmp_path)


def _pinned() -> str:
    match = re.search(r"^VERSION=(v\S+)$", BUILD_SCRIPT.read_text(), re.M)
    assert match
    return match.group(1)


def test_the_cli_and_sdk_modules_are_pinned_to_the_script_version() -> None:
    version = _pinned()
    go_mod = (MODULE / "go.mod").read_text()
    assert f"\tgithub.com/pulumi/pulumi/pkg/v3 {version}\n" in go_mod
    assert f"\tgithub.com/pulumi/pulumi/sdk/v3 {version}\n" in go_mod
    # The upstream replace line pkg/v3 needs, repeated (go install would refuse it).
    assert "replace github.com/atotto/clipboard => github.com/tgummerer/clipboard" in go_mod
    assert f"github.com/pulumi/pulumi/pkg/v3 {version} h1:" in (MODULE / "go.sum").read_text()


def _script(tmp_path: Path, *args: str, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVISIONER_PULUMI_CACHE": str(tmp_path / "cache"), "PATH": path}
    return subprocess.run([str(BUILD_SCRIPT), *args], env=env, capture_output=True, text=True, check=False)


def test_without_go_the_script_says_so_in_one_line(tmp_path: Path) -> None:
    # A PATH with bash and coreutils but no go.
    done = _script(tmp_path, path="/usr/bin:/bin")
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"build-pulumi: cannot build the Pulumi CLI {_pinned()}: no 'go' on PATH")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("pulumi"))


def test_without_the_module_proxy_the_script_says_so_in_one_line(tmp_path: Path) -> None:
    need_tool("go")
    env = {
        **os.environ,
        "PROVISIONER_PULUMI_CACHE": str(tmp_path / "cache"),
        "GOPROXY": "off",  # what an unreachable proxy leaves: no module can be fetched
        "GOMODCACHE": str(tmp_path / "mod"),
    }
    done = subprocess.run([str(BUILD_SCRIPT)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 3 and done.stdout == ""
    *_, last = done.stderr.splitlines()
    assert last.startswith(f"build-pulumi: cannot build the Pulumi CLI {_pinned()}: go build failed (is the Go")
    assert "GOPROXY=off" in last
    assert not list((tmp_path / "cache").rglob("pulumi"))  # nothing half-built left as the CLI


def test_check_builds_nothing_and_fails_when_not_built(tmp_path: Path) -> None:
    done = _script(tmp_path, "--check", path=os.environ["PATH"])
    assert done.returncode == 1
    assert done.stdout.strip().startswith(str(tmp_path / "cache" / f"{_pinned()}-"))
    assert not (tmp_path / "cache").exists()


def test_a_second_run_reuses_the_built_cli(engine: PulumiEngine) -> None:
    cli = engine.bin_dir / "pulumi"
    before = cli.stat()
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip().splitlines()[-1]) == engine.bin_dir
    after = cli.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    for name in PLUGINS:
        assert os.access(engine.bin_dir / name, os.X_OK), name
    version = engine.run("version", cwd=engine.root).stdout.strip()
    assert version == _pinned()


PROGRAM = """
import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from counter import Counter

config = pulumi.Config()
counter = Counter("counter", config.require_int("start"))
pulumi.export("plain", config.require("plain"))
pulumi.export("secret", pulumi.Output.secret(config.require_secret("token")))
pulumi.export("value", counter.value)
if config.get_bool("fail"):
    raise pulumi.RunError("the config says fail")
if config.get_bool("crash"):
    raise ValueError("boom")
"""

COUNTER = '''
import json
import os
from pathlib import Path

from pulumi import Input, Output
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult


class CounterProvider(ResourceProvider):
    """Writes its value to $COUNTER_LOG, so the test sees which process did what."""

    def _log(self, op, value):
        with open(os.environ["COUNTER_LOG"], "a") as log:
            log.write(json.dumps([op, value, os.getpid()]) + "\\n")

    def create(self, props):
        self._log("create", props["start"])
        return CreateResult(id_="counter-1", outs={"value": int(props["start"])})

    def diff(self, _id, olds, news):
        return DiffResult(changes=int(olds["value"]) != int(news["start"]))

    def update(self, _id, olds, news):
        self._log("update", news["start"])
        return UpdateResult(outs={"value": int(news["start"])})

    def delete(self, _id, props):
        self._log("delete", props["value"])


class Counter(Resource):
    value: Output[int]

    def __init__(self, name, start: Input[int]):
        super().__init__(CounterProvider(), name, {"start": start, "value": None})
'''


def _project(root: Path) -> Path:
    project = root / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: hostcheck\nruntime:\n  name: python\n")
    (project / "__main__.py").write_text(textwrap.dedent(PROGRAM))
    (project / "counter.py").write_text(textwrap.dedent(COUNTER))
    return project


def test_language_host_and_dynamic_provider_run_a_program(engine: PulumiEngine) -> None:
    project = _project(engine.root)
    log = engine.root / "counter.log"
    engine.env["COUNTER_LOG"] = str(log)
    run = engine.run
    run("stack", "init", "t", cwd=project)
    run("config", "set", "start", "7", cwd=project)
    run("config", "set", "plain", "visible", cwd=project)
    run("config", "set", "--secret", "token", "S3CRET-TOKEN-CANARY", cwd=project)
    run("up", "--yes", cwd=project)  # a preview then the update: Run twice in one host
    outputs = json.loads(run("stack", "output", "--json", "--show-secrets", cwd=project).stdout)
    assert outputs == {"plain": "visible", "secret": "S3CRET-TOKEN-CANARY", "value": 7}
    state = run("stack", "export", cwd=project).stdout
    assert "S3CRET-TOKEN-CANARY" not in state and '"plain": "visible"' in state
    # A second up with nothing changed: no change, no provider call.
    run("preview", "--expect-no-changes", cwd=project)
    run("config", "set", "start", "9", cwd=project)
    run("up", "--yes", "--skip-preview", cwd=project)
    assert json.loads(run("stack", "output", "--json", cwd=project).stdout)["value"] == 9
    run("destroy", "--yes", "--skip-preview", cwd=project)
    ops = [json.loads(line)[:2] for line in log.read_text().splitlines()]
    assert ops == [["create", 7.0], ["update", 9.0], ["delete", 9]]


def test_a_program_error_fails_the_update(engine: PulumiEngine) -> None:
    project = _project(engine.root)
    engine.env["COUNTER_LOG"] = str(engine.root / "counter.log")
    run = engine.run
    run("stack", "init", "t", cwd=project)
    for key, value in (("start", "1"), ("plain", "p"), ("token", "t"), ("fail", "true")):
        run("config", "set", key, value, cwd=project)
    done = run("up", "--yes", "--skip-preview", cwd=project, check=False)
    assert done.returncode != 0
    diagnostics = done.stdout.split("Diagnostics:", 1)[1]
    assert diagnostics.count("the config says fail") == 1, done.stdout
    assert "Traceback" not in done.stdout and "fork()" not in done.stdout
    run("config", "set", "fail", "false", cwd=project)
    run("config", "set", "crash", "true", cwd=project)
    done = run("up", "--yes", "--skip-preview", cwd=project, check=False)
    assert done.returncode != 0
    assert "Program failed with an unhandled exception" in done.stdout and "ValueError: boom" in done.stdout


@pytest.mark.parametrize(("required", "outcome"), [("1", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_cli_fails_under_require_system_tools_else_skips(
    required: str, outcome: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVISIONER_PULUMI_BIN", str(tmp_path))  # a folder without the CLI
    monkeypatch.setenv("REQUIRE_SYSTEM_TOOLS", required)
    with pytest.raises(outcome, match=r"needs the Pulumi CLI built by \.ci/build-pulumi"):
        pulumi_engine(tmp_path)
