"""The checkpoint store's credentials, for nodes that have none of their own (docs/healing.md).

A spec's ``checkpoint.credentials_env`` / ``credentials_file`` name them (spec_checkpoint.py); the
values are read here, on the machine running ``up``/``burst``/``watch``, from its environment (and
the key file), and travel only over the SSH pass (``realize.sshpass``): a script, copied through
ssh's stdin and run as root, writes them to ``CREDENTIALS_FILE`` (0600, root) on every node, where
the rendered sync and restore scripts source it (render/checkpoint_sync.py). They are never in
user data, plan.json, records, events, logs or stack outputs: ``StoreCredentials`` shows only the
names in its repr, and every error here names a variable or a path, never a value.

``read_store_credentials`` is the only function here that reads the environment or a file.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from provisioner.errors import UsageError
from provisioner.render.checkpoint_sync import CREDENTIALS_FILE
from provisioner.spec_checkpoint import CheckpointSpec

MAX_VALUE_BYTES = 64 * 1024
"""A credential larger than this is refused (a service-account key is about 2.3 KiB)."""
RCLONE_PREFIX = "RCLONE_CONFIG_CKPT_"
"""The rclone remote ``ckpt`` (render/checkpoint_sync.py) takes an option ``X`` from ``RCLONE_CONFIG_CKPT_X``."""


@dataclass(frozen=True)
class StoreCredentials:
    """rclone option -> value (a SecretStr), and where each came from (a variable or a path)."""

    values: tuple[tuple[str, SecretStr], ...]
    sources: tuple[str, ...] = field(default=())

    def __repr__(self) -> str:  # never a value
        return f"StoreCredentials({', '.join(self.sources)})"

    def secret_values(self) -> tuple[str, ...]:
        """Every value, for redaction and leak checks."""
        return tuple(value.get_secret_value() for _option, value in self.values)

    def env_text(self) -> str:
        """``CREDENTIALS_FILE``'s text: one ``RCLONE_CONFIG_CKPT_<OPTION>='value'`` line each (the
        scripts source it with ``set -a``; single quotes keep any byte but NUL literal)."""
        return "".join(
            f"{RCLONE_PREFIX}{option.upper()}={shlex.quote(value.get_secret_value())}\n"
            for option, value in self.values
        )


def read_store_credentials(checkpoint: CheckpointSpec, environ: Mapping[str, str]) -> StoreCredentials | None:
    """The values ``checkpoint`` names, from ``environ`` and its key file; None when it names none.
    Raises UsageError (one line naming the spec field and the variable or path, never a value) for a
    variable unset or empty, an unreadable key file or one that is not a JSON object."""
    sources = checkpoint.credential_sources()
    if not sources:
        return None
    values: list[tuple[str, SecretStr]] = []
    for option, kind, source in sources:
        value = _from_file(source) if kind == "file" else _from_env(source, environ)
        if len(value.encode()) > MAX_VALUE_BYTES or "\0" in value:
            where = "credentials_file" if kind == "file" else f"credentials_env: {source}"
            raise UsageError(f"checkpoint.{where}: the value is over {MAX_VALUE_BYTES // 1024} KiB or holds a NUL")
        values.append((option, SecretStr(value)))
    return StoreCredentials(tuple(values), tuple(source for _option, _kind, source in sources))


def require_store_credentials(checkpoint: CheckpointSpec, environ: Mapping[str, str] | None = None) -> None:
    """Before anything is bought: every credential the spec names can be read (UsageError otherwise)."""
    read_store_credentials(checkpoint, os.environ if environ is None else environ)


def _from_env(name: str, environ: Mapping[str, str]) -> str:
    value = environ.get(name, "")
    if not value:
        raise UsageError(
            f"checkpoint.credentials_env: {name} is not set in this environment; export it before "
            "up/burst/watch (the nodes get its value over SSH, docs/healing.md)"
        )
    return value


def _from_file(path_text: str) -> str:
    path = Path(path_text).expanduser()
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_VALUE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"checkpoint.credentials_file: cannot read {path} ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise UsageError(f"checkpoint.credentials_file: {path} is not a service-account key (a JSON object)")
    return text


def credentials_script(credentials: StoreCredentials) -> str:
    """A bash script, run as root over SSH, that writes ``CREDENTIALS_FILE`` (0600, owned by root, who
    runs it) atomically: a temp file created under umask 077 beside it, renamed over it. The text is
    embedded in base64 (decoded on the node), so no value is ever parsed by the shell; ``printf`` is
    a builtin, so no value is in any process's argv. Idempotent. ``PROVISIONER_ROOT`` lets tests run it."""
    encoded = base64.b64encode(credentials.env_text().encode()).decode("ascii")
    folder, name = CREDENTIALS_FILE.rsplit("/", 1)
    return (
        "#!/bin/bash\n"
        "# The checkpoint store's credentials (docs/healing.md): root-only, sourced by the sync scripts.\n"
        "set -eu\n"
        "umask 077\n"
        "ROOT=${PROVISIONER_ROOT:-}\n"
        f'(umask 022; mkdir -p "$ROOT{folder}")\n'  # the folder others read stays 0755 when made here
        f'tmp=$(mktemp "$ROOT{folder}/.{name}.XXXXXX")\n'
        "trap 'rm -f \"$tmp\"' EXIT\n"
        f"printf '%s' '{encoded}' | base64 -d > \"$tmp\"\n"
        'chmod 600 "$tmp"\n'
        f'mv -f "$tmp" "$ROOT{CREDENTIALS_FILE}"\n'
        "trap - EXIT\n"
    )


__all__ = [
    "StoreCredentials",
    "credentials_script",
    "read_store_credentials",
    "require_store_credentials",
]
