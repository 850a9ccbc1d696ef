"""A user's machine for the real-Pulumi-engine tests (tests/test_pulumi_real*.py).

One ``Machine`` is a state dir, a ``PULUMI_HOME`` and a backend of its own under the test's tmp
dir, running the console script pip installed (``provisioner``) and the real ``pulumi`` CLI as a
user would, against a provider's fake served on 127.0.0.1 by the test process. Two machines may
share one backend (an S3 URL) and one fake: two people of one team.

The one seam is ``tests/fixtures/pulumi_cli/sitecustomize.py`` on the children's PYTHONPATH: it
makes the CLI and the dynamic-provider processes the engine starts reach nodes through
``RecordingRemote`` (the fakes' nodes hold documentation addresses no machine answers) and build
their adapters at 100x the published rate limits. Everything else is what a user runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, skip_or_fail

CLI = Path(sys.executable).parent / "provisioner"  # the console script pip installed
PASSPHRASE = "team-passphrase-for-tests"
OWNER = "alice"


def engine_dir() -> Path:
    """The folder holding the real ``pulumi`` CLI and its two plugins (``tests.pulumi_real.find_bin_dir``:
    what ``.ci/build-pulumi`` built); skips (fails under REQUIRE_SYSTEM_TOOLS=1) when it is not built."""
    from tests.pulumi_real import find_bin_dir

    folder = find_bin_dir()
    if folder is None:
        skip_or_fail("needs the Pulumi engine built by .ci/build-pulumi (docs/stacks.md)")
    assert folder is not None
    return folder


# ----- the stand-in for SSH, installed in the children by sitecustomize --------------------------
class RecordingRemote:
    """A ``Remote`` that answers like a cluster whose nodes are all ready and appends each command
    (node, first word) and each bootstrap (node, user) to ``$PROVISIONER_TEST_SSH_LOG``."""

    def __init__(self) -> None:
        self.log = Path(os.environ["PROVISIONER_TEST_SSH_LOG"])
        self.nodes = [n for n in os.environ.get("PROVISIONER_TEST_NODES", "").split(",") if n]

    def _note(self, **fields: Any) -> None:
        with self.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")

    def run(self, target: Any, argv: Any, *, timeout_s: float = 60.0) -> Any:
        from provisioner.validation.runner import CommandResult

        self._note(node=target.node_name, run=str(argv[0]))
        if argv[0] == "sinfo":
            return CommandResult(0, "".join(f"{name}|idle\n" for name in self.nodes))
        if argv[0] == "kubectl":
            return CommandResult(0, "".join(f"{name}|True\n" for name in self.nodes))
        return CommandResult(0, "", "")

    def stream(self, target: Any, argv: Any, on_line: Callable[[str], None], *, timeout_s: float | None = None) -> int:
        self._note(node=target.node_name, stream=str(argv[0]))
        return 0

    def bootstrap(self, target: Any, script: str, *, timeout_s: float = 3600) -> None:
        self._note(node=target.node_name, bootstrap=target.user, script_bytes=len(script))


def _stand_in_runtime(command_support: Any) -> None:
    import dataclasses

    made = command_support.runtime
    command_support.runtime = lambda emit, *, interrupts=True: dataclasses.replace(
        made(emit, interrupts=interrupts), remote=RecordingRemote()
    )


def _stand_in_topology(topology: Any) -> None:
    apply = topology.ClusterTopologyProvider._apply

    def _apply(self: Any, props: Any) -> Any:
        self.remote = self.remote or RecordingRemote()
        return apply(self, props)

    topology.ClusterTopologyProvider._apply = _apply


def _stand_in_launch(launch: Any) -> None:
    launch.unanswerable = lambda nodes: []


# What ``stand_in_ssh`` patches, by module: tests/fixtures/pulumi_cli/sitecustomize.py applies each
# as its module is imported, so a child that never loads one (``status``, ``pulumi config``) does
# not pay for loading it (the stack's modules load pulumi: ~1.5 s of CPU per child).
STAND_INS: dict[str, Callable[[Any], None]] = {
    "provisioner.lifecycle.command_support": _stand_in_runtime,
    "provisioner.stacks.topology": _stand_in_topology,
    "provisioner.realize.launch": _stand_in_launch,
}


def stand_in_ssh() -> None:
    """Patch this process (a child CLI or a dynamic-provider server) to use ``RecordingRemote``."""
    import importlib

    for name, patch in STAND_INS.items():
        patch(importlib.import_module(name))


# ----- a machine ---------------------------------------------------------------------------------
@dataclass
class Done:
    code: int
    out: str
    err: str

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]


@dataclass
class Machine:
    folder: Path
    bin_dir: Path
    fake_env: dict[str, str]
    backend: str | None = None
    nodes: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    children: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.folder / "state"

    @property
    def ssh_log(self) -> Path:
        return self.folder / "ssh.jsonl"

    def env(self) -> dict[str, str]:
        paths = [str(ROOT / "tests" / "fixtures" / "pulumi_cli"), str(ROOT)]
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("PROVISIONER_", "PULUMI_"))}
        return {
            **keep,
            "PATH": os.pathsep.join([str(self.bin_dir), str(CLI.parent), os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(paths),
            "PROVISIONER_STATE_DIR": str(self.state),
            "PROVISIONER_CACHE_DIR": str(self.folder / "cache"),
            "PROVISIONER_OWNER": OWNER,
            "PULUMI_HOME": str(self.folder / "pulumi-home"),
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PROVISIONER_TEST_SSH_LOG": str(self.ssh_log),
            "PROVISIONER_TEST_NODES": ",".join(self.nodes),
            **self.fake_env,
            **self.extra,
        }

    def _backend_args(self) -> list[str]:
        return ["--backend", self.backend] if self.backend else []

    def start(self, *args: str, backend: bool = True) -> subprocess.Popen[str]:
        """``provisioner ARGS`` started (with ``--backend`` where the machine has one), in its own session."""
        argv = [str(CLI), *args, *(self._backend_args() if backend else [])]
        self.folder.mkdir(parents=True, exist_ok=True)
        child = subprocess.Popen(
            argv,
            env=self.env(),
            cwd=self.folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.children.append(child)
        return child

    def close(self) -> None:
        """SIGKILL what is left of every process group this machine started (a failed test's children)."""
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.communicate(timeout=30)

    def cli(self, *args: str, backend: bool = True, timeout_s: float = 600) -> Done:
        child = self.start(*args, backend=backend)
        try:
            out, err = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            raise AssertionError(
                f"provisioner {' '.join(args)} still running after {timeout_s}s: {err[-3000:]}"
            ) from None
        return Done(child.returncode, out, err)

    def backend_url(self) -> str:
        return self.backend or f"file://{self.state / 'pulumi'}"

    def pulumi(self, *args: str, cwd: Path | None = None, timeout_s: float = 600) -> Done:
        """The real ``pulumi`` CLI run by hand in the workspace ``up`` kept (``pulumi_engine.work_dir``)."""
        env = {**self.env(), "PULUMI_BACKEND_URL": self.backend_url()}
        done = subprocess.run(
            ["pulumi", *args, "--non-interactive", "--color", "never"],
            env=env,
            cwd=cwd or self.state / "pulumi" / "work",
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    def ssh_notes(self) -> list[dict[str, Any]]:
        if not self.ssh_log.exists():
            return []
        return [json.loads(line) for line in self.ssh_log.read_text(encoding="utf-8").splitlines()]


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def pulumi_pids() -> set[int]:
    """Pids of running ``pulumi`` processes and dynamic-provider servers (``-m pulumi.dynamic``)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv if w]
        if words and (Path(words[0]).name == "pulumi" or "pulumi.dynamic" in words):
            found.add(int(proc.name))
    return found


ACCESS = "access: {allowed_cidrs: [198.51.100.0/24]}\n"


def plan_of(name: str, tmp_path: Path) -> Any:
    """A plan each neocloud's fake sells (``tests.test_killed_up.plan_for``'s), SSH allowed from a
    documentation range: Lambda two Slurm nodes with a TTL, RunPod, Vast.ai and Fluence one Slurm node."""
    from tests.test_killed_up import VAST_SPEC
    from tests.test_lifecycle_support import FLUENCE_SPEC, LAMBDA_SPEC, RUNPOD_SPEC, plans_for

    if name == "lambda":
        return plans_for(LAMBDA_SPEC, tmp_path)[0]
    if name == "runpod":
        plans = plans_for(RUNPOD_SPEC + ACCESS, tmp_path, count=20)
        return next(p for p in plans if p.option.instance_type == "1x_RTX4090_SECURE" and p.option.region == "US-KS-2")
    if name == "vastai":
        return next(p for p in plans_for(VAST_SPEC + ACCESS, tmp_path, count=20) if p.option.region == "US")
    return next(p for p in plans_for(FLUENCE_SPEC + ACCESS, tmp_path, count=10) if p.option.region == "dulles-usa-1")


def group_pids(pgid: int, exe: str | None = None) -> list[int]:
    """Pids of process group ``pgid`` (a ``start`` child's session), those whose program is ``exe``
    if given (``pulumi``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            argv = [w.decode(errors="replace") for w in (proc / "cmdline").read_bytes().split(b"\0") if w]
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
            continue
        if exe is None or (argv and Path(argv[0]).name == exe):
            found.append(int(proc.name))
    return found


def crash(machine: Machine) -> None:
    """SIGKILL every process of ``machine`` (its CLIs' process groups, and the engine's plugins, which
    have groups of their own), as if it lost power: found by its state dir in their environment."""
    mark = f"PROVISIONER_STATE_DIR={machine.state}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in environ:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)
