"""The real Pulumi engine for tests: the CLI ``.ci/build-pulumi`` built, and an environment to run it in.

Usage (tests/test_pulumi_real*.py and any test driving the real engine)::

    from tests.pulumi_real import STACKS, PulumiEngine, pulumi_engine

    @pytest.fixture
    def engine(tmp_path: Path) -> PulumiEngine:
        return pulumi_engine(tmp_path)

    def test_x(engine: PulumiEngine) -> None:
        done = engine.run("stack", "init", "dev", cwd=STACKS)   # CompletedProcess; a failure fails the test
        env = engine.env                                         # for the Automation API / provisioner

``pulumi_engine`` skips with the reason when the CLI is not built (fails instead under
``REQUIRE_SYSTEM_TOOLS=1``: ``.ci/run`` builds it). Every engine gets its own state in the test's tmp
dir: ``PULUMI_HOME``, a ``file://`` backend (``PULUMI_BACKEND_URL``) and a passphrase; plugin
downloads and update checks are off (the tests reach nothing but 127.0.0.1), and
``PULUMI_PYTHON_CMD`` names this interpreter, so the language host and the dynamic providers run in
the environment the tests run in. ``bin_dir`` (the CLI and its two plugins) is first on ``PATH``.

The CLI is looked for in ``$PROVISIONER_PULUMI_BIN`` (a folder), then where ``.ci/build-pulumi`` caches
it (``.ci/build-pulumi --check`` prints the folder without building anything).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, skip_or_fail

BUILD_SCRIPT = ROOT / ".ci" / "build-pulumi"
STACKS = ROOT / "stacks"
PASSPHRASE = "correct horse battery staple"
PLUGINS = ("pulumi", "pulumi-language-python", "pulumi-resource-pulumi-python")


def find_bin_dir() -> Path | None:
    """The folder holding the built CLI and its plugins, or None when it is not built."""
    explicit = os.environ.get("PROVISIONER_PULUMI_BIN")
    if explicit:
        folder = Path(explicit)
    else:
        done = subprocess.run([str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return None
        folder = Path(done.stdout.strip().splitlines()[-1])
    if all(os.access(folder / name, os.X_OK) for name in PLUGINS):
        return folder
    return None


def engine_env(bin_dir: Path, home: Path, backend_url: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for the CLI: own PULUMI_HOME and backend, no network, this interpreter."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]),
            "PULUMI_HOME": str(home),
            "PULUMI_BACKEND_URL": backend_url,
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            "PULUMI_PYTHON_CMD": sys.executable,
            "PULUMI_TELEMETRY_OPTOUT": "true",
        }
    )
    env.pop("PULUMI_ACCESS_TOKEN", None)
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    return env


@dataclass
class PulumiEngine:
    """The built CLI with a private home and file backend under ``root`` (a tmp dir)."""

    bin_dir: Path
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if not self.env:
            self.env = engine_env(self.bin_dir, self.root / "home", self.backend_url)

    @property
    def pulumi(self) -> Path:
        return self.bin_dir / "pulumi"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def backend_url(self) -> str:
        return f"file://{self.state_dir}"

    def run(
        self, *args: str, cwd: Path = STACKS, check: bool = True, stdin: str | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        """``pulumi ARGS --non-interactive`` in ``cwd``; with ``check``, a failure shows its output."""
        done = subprocess.run(
            [str(self.pulumi), *args, "--non-interactive"],
            cwd=cwd,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        return done


def need_pulumi_engine() -> Path:
    """The built CLI's folder; skip (fail under REQUIRE_SYSTEM_TOOLS=1) when it is not built."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        skip_or_fail("needs the Pulumi CLI built by .ci/build-pulumi (Go and the Go module proxy; .ci/run builds it)")
    assert bin_dir is not None
    return bin_dir


def pulumi_engine(tmp_path: Path) -> PulumiEngine:
    """The real engine with its state under ``tmp_path`` (see the module docstring); skips without it."""
    return PulumiEngine(need_pulumi_engine(), tmp_path / "pulumi")
