"""Opening the pulumi engine's stacks: the CLI and SDK check, the backend, the passphrase, the workspace.

One stack per cluster (stack name = cluster id) of the project ``provisioner`` whose program is the
installed ``provisioner.stacks`` folder; the workspace (``Pulumi.yaml``, one ``Pulumi.<id>.yaml`` of
config per stack, never a secret value) is the state dir's ``pulumi/work/`` (0700).

Backend: ``--backend URL`` (``s3://...``, ``gs://...``, ``https://api.pulumi.com``), else a
local file backend under the state dir (``file://<state>/pulumi``). The file backend encrypts
secrets with a passphrase: ``$PULUMI_CONFIG_PASSPHRASE`` when set, else one generated once and
kept 0600 in ``<state>/pulumi/passphrase``.

The ``pulumi`` CLI must be on PATH (the Automation API drives it); when it is absent every
entry point raises StackError with one line saying how to install it and that ``--engine
direct`` needs none.
"""

from __future__ import annotations

import os
import secrets as _secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provisioner.errors import ProvisionerError, StackError
from provisioner.lifecycle import state
from provisioner.lifecycle.stack_lock import WORK_VAR
from provisioner.plan import Plan

INSTALL_HINT = (
    "the pulumi CLI is not installed (the pulumi engine drives it): install it with "
    "'curl -fsSL https://get.pulumi.com | sh' (see https://www.pulumi.com/docs/install/), "
    "or run with --engine direct"
)

SDK_HINT = "the pulumi Python SDK is not installed: pip install 'gpu-provisioner[cloud]', or run with --engine direct"


def require_pulumi(which: Callable[[str], str | None] = shutil.which) -> str:
    """The ``pulumi`` executable's path. StackError (one line, install hint) when it or the pulumi
    Python SDK (the [cloud] extra) is absent: ``up`` asks before it plans or records anything."""
    found = which("pulumi")
    if not found:
        raise StackError(INSTALL_HINT)
    import importlib.util

    if importlib.util.find_spec("pulumi") is None:
        raise StackError(SDK_HINT)
    return found


def automation() -> Any:
    """``pulumi.automation``, after checking the CLI is there. StackError (one line) when either is missing."""
    require_pulumi()
    try:
        from pulumi import automation
    except ModuleNotFoundError:
        raise StackError(SDK_HINT) from None
    return automation


def backend_url(backend: str | None) -> str:
    if backend:
        return backend
    folder = state.state_dir() / "pulumi"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"file://{folder}"


def _passphrase() -> str:
    given = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    if given is not None:
        return given
    path = state.state_dir() / "pulumi" / "passphrase"
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = _secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(value + "\n")
    return value


def plan_path(cluster_id: str) -> Path:
    return state.clusters_dir() / f"{cluster_id}.plan.json"


def kept_plan(cluster_id: str) -> Plan | None:
    """The plan the cluster's last ``up`` gave the stack (kept in the state dir), None if there is none
    or it cannot be read."""
    from provisioner.plan import load_plan

    path = plan_path(cluster_id)
    if not path.is_file():
        return None
    try:
        return load_plan(path)
    except ProvisionerError:
        return None


PROJECT = "provisioner"
"""The Pulumi project of every stack (``stacks/Pulumi.yaml``'s name: the config namespace)."""


def _program() -> None:
    """The inline program ``up`` runs in this process: ``stacks/``'s own (``provisioner.stacks.program``)."""
    from provisioner.stacks.program import main

    main()


def _no_program() -> None:
    """What ``down`` and ``outputs`` hand the engine: they read or destroy the state, never run a program."""


def program_dir() -> Path:
    """The installed ``stacks/`` folder: the work dir's ``Pulumi.yaml`` names it as ``main``, so a
    hand-run ``pulumi preview``/``refresh`` in the work dir runs the program ``up`` ran inline."""
    import provisioner.stacks as stacks

    return Path(stacks.__file__).resolve().parent


def work_dir() -> Path:
    """The workspace the Automation API keeps ``Pulumi.yaml`` and each stack's config file in (0700)."""
    folder = state.state_dir() / "pulumi" / "work"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def runtime_options(prefix: str = sys.prefix, base_prefix: str = sys.base_prefix) -> dict[str, str]:
    """The project's python runtime options: ``virtualenv`` naming the environment this process runs in
    when it is one, so the dynamic-provider plugin the engine starts (``pulumi-resource-pulumi-python``)
    runs this interpreter, the one ``provisioner`` is installed in, not the first ``python3`` on PATH."""
    return {"virtualenv": prefix} if prefix != base_prefix else {}


def open_stack(cluster_id: str, backend: str | None, *, create: bool) -> Any:
    """The cluster's stack (``pulumi_stack.EngineStack``), created first when ``create`` and absent.
    StackError (one line) when it is absent (not ``create``) or pulumi cannot open it."""
    auto = automation()
    # PULUMI_PYTHON_CMD: the interpreter a language host or dynamic-provider plugin runs when the
    # project names no virtualenv (this one, where provisioner and its program are installed).
    env = {
        "PULUMI_BACKEND_URL": backend_url(backend),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
        WORK_VAR: str(work_dir()),
    }
    if not (backend or "").startswith("https://"):
        env["PULUMI_CONFIG_PASSPHRASE"] = _passphrase()
    settings = auto.ProjectSettings(
        name=PROJECT,
        runtime=auto.ProjectRuntimeInfo(name="python", options=runtime_options() or None),
        main=str(program_dir()),
    )
    try:
        from provisioner.lifecycle.pulumi_stack import EngineStack, cli

        workspace = auto.LocalWorkspace(
            work_dir=str(work_dir()),
            program=_program if create else _no_program,
            env_vars=env,
            project_settings=settings,
            pulumi_command=cli(state.state_dir() / "pulumi" / "cli-version.json"),
        )
        return EngineStack(cluster_id, workspace, create=create)
    except auto.errors.StackNotFoundError:
        raise StackError(f"no pulumi stack {cluster_id} in {env['PULUMI_BACKEND_URL']}") from None
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot open stack {cluster_id}: {last_line(str(exc))}") from None


def last_line(text: str) -> str:
    """The last meaningful line of a CommandError's text (``code:/stdout:/stderr:`` labels dropped)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [
        line.removeprefix("stderr:").removeprefix("stdout:").strip() for line in lines if not line.startswith("code:")
    ]
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else "no output"


def forget(cluster_id: str) -> bool:
    """Remove the cluster's stack from the state dir's own backend without destroying anything (a local
    dry run's, whose nodes went with its lab: nothing of it exists to destroy). Blocks; False when
    there is no such stack."""
    auto = automation()
    try:
        stack = open_stack(cluster_id, None, create=False)
    except StackError as exc:
        if "no pulumi stack" in str(exc):
            return False
        raise
    try:
        stack.workspace.remove_stack(cluster_id, force=True)
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot remove the stack {cluster_id}: {last_line(str(exc))}") from None
    return True


__all__ = [
    "INSTALL_HINT",
    "PROJECT",
    "SDK_HINT",
    "backend_url",
    "forget",
    "kept_plan",
    "last_line",
    "open_stack",
    "plan_path",
    "program_dir",
    "require_pulumi",
    "runtime_options",
    "work_dir",
]
