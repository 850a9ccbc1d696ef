"""Per-cluster secrets: the Slurm munge key, the k3s join token and the cluster SSH key pair.

Secrets never live in a Plan (plans are reviewable artifacts). They are generated once per
cluster and kept in a 0600 JSON file (``secrets_path_for``: ``plan.json`` ->
``plan.secrets.json`` beside a saved plan, or ``.cluster-secrets.json`` in the render folder
when rendering from a spec), so rendering twice yields nodes that join one cluster.
``render_cluster`` places the munge key and the k3s token only in the bootstrap files that
need them; the SSH private key stays on the operator's machine (the public half is authorized
on every node, so ``realize.bootstrap_ssh`` can reach them). Secret values are pydantic
``SecretStr``: ``repr``/``str``/``model_dump_json`` of a ``ClusterSecrets`` show ``**********``.

``load_secrets``, ``save_secrets`` and ``load_or_create_secrets`` are the only functions here
that touch the disk.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets as _stdlib_secrets
import stat
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from provisioner.errors import ProvisionerError

MUNGE_KEY_BYTES = 1024  # what `mungekey -c` writes by default
K3S_TOKEN_BYTES = 32
SECRETS_FILE_VERSION = 1
SPEC_SECRETS_NAME = ".cluster-secrets.json"
_PUBLIC_KEY = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/]+=*( [A-Za-z0-9._@:+-]+)?$")


class ClusterSecrets(BaseModel):
    """Secrets one cluster's nodes share. Immutable; never logged."""

    # hide_input_in_errors: a rejected value must not be echoed in the ValidationError text.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    munge_key_b64: SecretStr = Field(description="Munge key bytes, base64-encoded.")
    k3s_token: SecretStr = Field(description="Shared token k3s agents use to join the server.")
    ssh_private_key: SecretStr | None = Field(
        None, description="Cluster SSH private key (OpenSSH format, ed25519); stays on the operator's machine."
    )
    ssh_public_key: str | None = Field(
        None, description="Its public half (`ssh-ed25519 AAAA... comment`), authorized on every node."
    )

    @field_validator("munge_key_b64")
    @classmethod
    def _munge_key(cls, value: SecretStr) -> SecretStr:
        try:
            raw = base64.b64decode(value.get_secret_value(), validate=True)
        except ValueError:
            raise ValueError("munge key must be base64") from None
        if len(raw) < 32:
            raise ValueError("munge key must be at least 32 bytes")
        return value

    @field_validator("k3s_token")
    @classmethod
    def _token(cls, value: SecretStr) -> SecretStr:
        token = value.get_secret_value()
        if len(token) < 16 or not token.isprintable() or any(c in token for c in " \"'\\:"):
            raise ValueError("k3s token must be >= 16 printable characters without spaces, quotes or ':'")
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _public_key(cls, value: str | None) -> str | None:
        if value is not None and not _PUBLIC_KEY.match(value):
            raise ValueError("cluster SSH public key must be one 'ssh-ed25519 AAAA... [comment]' line")
        return value

    @model_validator(mode="after")
    def _key_pair(self) -> ClusterSecrets:
        if (self.ssh_private_key is None) != (self.ssh_public_key is None):
            raise ValueError("the cluster SSH key pair needs both halves or neither")
        if self.ssh_private_key is not None and "PRIVATE KEY-----" not in self.ssh_private_key.get_secret_value():
            raise ValueError("cluster SSH private key must be in OpenSSH PEM form")
        return self

    @classmethod
    def generate(cls, comment: str = "provisioner") -> ClusterSecrets:
        """Fresh random secrets from the OS CSPRNG, with a new ed25519 SSH key pair."""
        private_key, public_key = generate_ssh_key_pair(comment)
        return cls(
            munge_key_b64=SecretStr(base64.b64encode(os.urandom(MUNGE_KEY_BYTES)).decode("ascii")),
            k3s_token=SecretStr(_stdlib_secrets.token_hex(K3S_TOKEN_BYTES)),
            ssh_private_key=SecretStr(private_key),
            ssh_public_key=public_key,
        )

    def values(self) -> tuple[str, ...]:
        """Every secret string, for redaction and leak checks."""
        private = () if self.ssh_private_key is None else (self.ssh_private_key.get_secret_value(),)
        return (self.munge_key_b64.get_secret_value(), self.k3s_token.get_secret_value(), *private)


def generate_ssh_key_pair(comment: str = "provisioner") -> tuple[str, str]:
    """A new ed25519 key pair: (OpenSSH private key PEM, ``ssh-ed25519 AAAA... comment``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    safe_comment = re.sub(r"[^A-Za-z0-9._@:+-]", "-", comment)[:64] or "provisioner"
    return private, f"{public.decode('ascii')} {safe_comment}"


def secrets_path_for(source: Path, out_dir: Path) -> Path:
    """Where a cluster's secrets are kept: beside a saved plan (``x.json`` -> ``x.secrets.json``),
    else (a spec) in the render folder as ``.cluster-secrets.json``."""
    if source.suffix == ".json":
        return source.with_name(f"{source.stem}.secrets.json")
    return out_dir / SPEC_SECRETS_NAME


def load_secrets(path: Path) -> ClusterSecrets:
    """Read a secrets file. ProvisionerError (naming the file, never a value) when it is unreadable,
    malformed, a symlink, or readable by group/others (tighten it with ``chmod 600``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ProvisionerError(f"cannot read cluster secrets {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        if stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & 0o077:
            raise ProvisionerError(f"cluster secrets {path} are readable by others; run: chmod 600 {path}")
        try:
            data = json.load(handle)
        except (ValueError, UnicodeDecodeError):
            raise ProvisionerError(f"cluster secrets {path} are not valid JSON") from None
    if not isinstance(data, dict) or data.get("version") != SECRETS_FILE_VERSION:
        raise ProvisionerError(f"cluster secrets {path}: unknown format (expected version {SECRETS_FILE_VERSION})")
    data.pop("version")
    try:
        return ClusterSecrets.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in err["loc"]) or "file" for err in exc.errors())
        raise ProvisionerError(f"cluster secrets {path} are invalid ({fields})") from None


def save_secrets(path: Path, secrets: ClusterSecrets) -> None:
    """Write ``secrets`` to ``path`` with mode 0600, atomically (a temp file renamed over it).
    The temp file is created 0600 with O_EXCL, so no byte is ever readable by others."""
    data = {
        "version": SECRETS_FILE_VERSION,
        "munge_key_b64": secrets.munge_key_b64.get_secret_value(),
        "k3s_token": secrets.k3s_token.get_secret_value(),
        "ssh_private_key": None if secrets.ssh_private_key is None else secrets.ssh_private_key.get_secret_value(),
        "ssh_public_key": secrets.ssh_public_key,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ProvisionerError(f"cannot write cluster secrets {path}: {exc.strerror}") from None


def load_or_create_secrets(
    path: Path, generate: Callable[[], ClusterSecrets] = ClusterSecrets.generate
) -> tuple[ClusterSecrets, bool]:
    """The cluster's secrets from ``path``, or new ones (``generate()``) saved there first.
    Returns (secrets, created). Idempotent: a second call returns the same secrets."""
    if path.exists() or path.is_symlink():
        return load_secrets(path), False
    secrets = generate()
    save_secrets(path, secrets)
    return secrets, True


__all__ = [
    "ClusterSecrets",
    "generate_ssh_key_pair",
    "load_or_create_secrets",
    "load_secrets",
    "save_secrets",
    "secrets_path_for",
]
