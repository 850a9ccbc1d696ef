"""Where adapters read their endpoint and key: the environment, at construction time.

``PROVISIONER_<NAME>_API_URL`` overrides the base URL (point it at a fake server);
the key comes from ``PROVISIONER_<NAME>_API_KEY`` or the provider's own variable.
Keys are returned as SecretStr so they never show up in a repr or log line.
"""

from __future__ import annotations

import os

from provisioner.providers.registry import facts
from pydantic import SecretStr

from provisioner.errors import CredentialsError

NATIVE_KEY_VARS = {name: found.key_vars[0] for name, found in facts().items() if found.key_vars}
"""Provider -> its own API key variable (from each package's ``FACTS``)."""


def _prefix(name: str) -> str:
    return f"PROVISIONER_{name.upper().rstrip('_')}"


def api_url(name: str, default: str) -> str:
    return os.environ.get(f"{_prefix(name)}_API_URL", default)


def api_key(name: str, explicit: str | SecretStr | None = None, *, required: bool = True) -> SecretStr | None:
    """The API key from ``explicit`` or the environment. Raises CredentialsError if required and absent."""
    if isinstance(explicit, SecretStr):
        return explicit
    value = explicit or os.environ.get(f"{_prefix(name)}_API_KEY") or os.environ.get(NATIVE_KEY_VARS.get(name, ""), "")
    if value:
        return SecretStr(value)
    if required:
        native = NATIVE_KEY_VARS.get(name)
        hint = f"{_prefix(name)}_API_KEY" + (f" or {native}" if native else "")
        raise CredentialsError(name, f"no API key: set {hint}")
    return None


__all__ = ["NATIVE_KEY_VARS", "api_key", "api_url"]
