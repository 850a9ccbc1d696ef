"""Per-cluster secrets: the Slurm munge key and the k3s join token.

Secrets never live in a Plan (plans are reviewable artifacts). They are generated once
per cluster by the caller and handed to ``render_cluster``, which places them only in
the cloud-init user data that needs them. Both values are pydantic ``SecretStr``, so
``repr``/``str``/``model_dump_json`` of a ``ClusterSecrets`` show ``**********``.
"""

from __future__ import annotations

import base64
import os
import secrets as _stdlib_secrets

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

MUNGE_KEY_BYTES = 1024  # what `mungekey -c` writes by default
K3S_TOKEN_BYTES = 32


class ClusterSecrets(BaseModel):
    """Secrets one cluster's nodes share. Immutable; never logged."""

    # hide_input_in_errors: a rejected value must not be echoed in the ValidationError text.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    munge_key_b64: SecretStr = Field(description="Munge key bytes, base64-encoded.")
    k3s_token: SecretStr = Field(description="Shared token k3s agents use to join the server.")

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

    @classmethod
    def generate(cls) -> ClusterSecrets:
        """Fresh random secrets from the OS CSPRNG."""
        return cls(
            munge_key_b64=SecretStr(base64.b64encode(os.urandom(MUNGE_KEY_BYTES)).decode("ascii")),
            k3s_token=SecretStr(_stdlib_secrets.token_hex(K3S_TOKEN_BYTES)),
        )

    def values(self) -> tuple[str, ...]:
        """Every secret string, for redaction and leak checks."""
        return (self.munge_key_b64.get_secret_value(), self.k3s_token.get_secret_value())


__all__ = ["ClusterSecrets"]
