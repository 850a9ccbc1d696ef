"""The stack the pulumi engine drives: the Automation API's ``Stack``, asking the CLI less per command.

Imported only once ``pulumi_workspace.automation()`` found the CLI and the SDK (it imports the SDK).
Each ``pulumi`` process that decrypts the stack's secrets derives the passphrase's key first (about
a second of CPU, ``docs/benchmarks.md``); the engine reads no secret, so it asks for none:

- ``outputs()``: one ``pulumi stack output --json``, secret outputs as ``[secret]`` (marked secret),
  where the SDK's runs it twice, the second time with ``--show-secrets``: every caller (``up``'s
  result, ``outputs``, ``down``'s provider) masks secret values anyway. ``up()`` reads them so too.
- ``state()``: the deployment as ``pulumi stack export`` prints it without ``--show-secrets`` (not
  read for a stack this object created: it is empty), read once and kept until this object runs an
  update, refresh, destroy, cancel or import (each drops it, before and after). When an input the
  engine reads (``READ_INPUTS``) is a secret there, the state is read again decrypted, so no reader
  ever sees ciphertext for a value it looks at.
- ``cli()``: the ``PulumiCommand`` without its ``pulumi version`` process when the same executable
  (path, size, mtime) was checked before by this state dir: the SDK's check (minimum version,
  major version) ran then, and its answer is kept in ``<state>/pulumi/cli-version.json``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from pulumi.automation._stack import StackInitMode
from semver import VersionInfo

SECRET_SIG = "4dabf18193072939515e22adb298388d"
"""The key Pulumi's state marks a secret value with (``resource.SecretSig``)."""
READ_INPUTS = ("nodes", "tags", "labels")
"""The resource inputs the engine reads from state (``stack_faults.owners``/``stack_runs``)."""
MASKED = "[secret]"


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value


def _hides_a_read_input(deployment: dict[str, Any]) -> bool:
    entries = [
        *(deployment.get("resources") or []),
        *[(op.get("resource") or {}) for op in deployment.get("pending_operations") or []],
    ]
    return any(_is_secret((entry.get("inputs") or {}).get(key)) for entry in entries for key in READ_INPUTS)


class EngineStack(auto.Stack):
    """``auto.Stack`` as the module docstring says: selected (or created, ``create``) on construction."""

    def __init__(self, name: str, workspace: auto.LocalWorkspace, *, create: bool) -> None:
        self._state: dict[str, Any] | None = None
        try:
            super().__init__(name, workspace, StackInitMode.SELECT)
        except auto.errors.StackNotFoundError:
            if not create:
                raise
            super().__init__(name, workspace, StackInitMode.CREATE)
            self._state = {}  # a stack just made holds no resource and no pending operation: nothing to read

    def outputs(self) -> auto.OutputMap:
        masked = json.loads(self._run_pulumi_cmd_sync(["stack", "output", "--json"]).stdout or "{}")
        return {key: auto.OutputValue(value=value, secret=value == MASKED) for key, value in masked.items()}

    def state(self) -> dict[str, Any]:
        """The stack's deployment (``{}`` when empty), secrets as ciphertext but for ``READ_INPUTS``."""
        if self._state is None:
            found = json.loads(self._run_pulumi_cmd_sync(["stack", "export"]).stdout).get("deployment") or {}
            if _hides_a_read_input(found):
                found = self.export_stack().deployment or {}
            self._state = found
        return self._state

    def _changing(self, run: Callable[[], Any]) -> Any:
        self._state = None
        try:
            return run()
        finally:
            self._state = None

    def up(self, *args: Any, **kwargs: Any) -> auto.UpResult:
        return self._changing(lambda: super(EngineStack, self).up(*args, **kwargs))  # type: ignore[no-any-return]

    def refresh(self, *args: Any, **kwargs: Any) -> auto.RefreshResult:
        return self._changing(lambda: super(EngineStack, self).refresh(*args, **kwargs))  # type: ignore[no-any-return]

    def destroy(self, *args: Any, **kwargs: Any) -> auto.DestroyResult:
        return self._changing(lambda: super(EngineStack, self).destroy(*args, **kwargs))  # type: ignore[no-any-return]

    def cancel(self) -> None:
        self._changing(super().cancel)

    def import_stack(self, state: auto.Deployment) -> None:
        self._changing(lambda: super(EngineStack, self).import_stack(state))


class _CheckedCli(auto.PulumiCommand):
    """The CLI on PATH whose version this state dir's cache holds (checked when it was cached)."""

    def __init__(self, version: VersionInfo) -> None:  # no super().__init__: it runs `pulumi version`
        self.command = "pulumi"
        self.version = version


def _identity(found: str) -> dict[str, Any]:
    path = Path(found).resolve()
    info = path.stat()
    return {"path": str(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def cli(cache: Path) -> auto.PulumiCommand:
    """The ``PulumiCommand`` for the ``pulumi`` on PATH; ``cache`` keeps its checked version (see the module
    docstring). Raises what ``auto.PulumiCommand()`` raises (a CLI older than the SDK accepts)."""
    found = shutil.which("pulumi")
    try:
        key = _identity(found) if found else None
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if key is not None and kept.get("cli") == key:
            return _CheckedCli(VersionInfo.parse(kept["version"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    command = auto.PulumiCommand()
    if found and command.version is not None:
        try:
            partial = cache.with_name(f".{cache.name}.{os.getpid()}")
            partial.write_text(json.dumps({"cli": _identity(found), "version": str(command.version)}), encoding="utf-8")
            partial.replace(cache)
        except OSError:
            pass  # a cache it could not write: the next command checks again
    return command


__all__ = ["READ_INPUTS", "EngineStack", "cli"]
