"""Where adapters read their endpoint and key: the environment, at construction time.

``PROVISIONER_<NAME>_API_URL`` overrides the base URL (point it at a fake server);
the key comes from ``PROVISIONER_<NAME>_API_KEY`` or the provider's own variable.
Keys are returned as SecretStr so they never show up in a repr or log line.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import SecretStr

from provisioner.errors import CredentialsError, UsageError
from provisioner.providers.registry import facts

NATIVE_KEY_VARS = {name: found.key_vars[0] for name, found in facts().items() if found.key_vars}
"""Provider -> its own API key variable (from each package's ``FACTS``)."""


def _prefix(name: str) -> str:
    return f"PROVISIONER_{name.upper().rstrip('_')}"


def credentials_missing(name: str) -> str | None:
    """None when ``name``'s credentials are configured here, else why not. Never asks a network:
    its API key variables, or where its SDK's chain looks (``FACTS.sdk_credentials``)."""
    if name in NATIVE_KEY_VARS:
        if api_key(name, required=False) is None:
            return f"no API key (set {_prefix(name)}_API_KEY or {NATIVE_KEY_VARS[name]})"
        return None
    found = facts().get(name)
    sdk = found.sdk_credentials if found is not None else None
    if sdk is None:
        return "no credential check known for this provider"
    home = Path.home()
    paths = [Path(os.environ.get(var) or home / default) / inside for var, default, inside in sdk.files]
    if any(os.environ.get(var) for var in sdk.variables) or any(path.is_file() for path in paths):
        return None
    return sdk.hint


def credentials_fix(name: str) -> str:
    """What to set so that ``name``'s adapter gets credentials its provider accepts (for a refused key)."""
    if name in NATIVE_KEY_VARS:
        return f"set {NATIVE_KEY_VARS[name]} (or {_prefix(name)}_API_KEY) to a valid key"
    found = facts().get(name)
    if found is not None and found.sdk_credentials is not None:
        return "fix the credentials its SDK finds (" + ", ".join(found.sdk_credentials.variables) + " or its files)"
    return "fix its credentials"


def api_url(name: str, default: str) -> str:
    """``PROVISIONER_<NAME>_API_URL`` when set, else ``default``. UsageError (exit 2, naming the
    variable) for a value that is not an http(s) URL: a typo is not a provider failure."""
    from provisioner.providers import seal

    try:
        sealed_url = seal.check(name)  # a local dry run's lab, whatever the environment says
    except seal.SealedError as exc:
        raise UsageError(str(exc)) from None
    if sealed_url is not None:
        return sealed_url
    variable = f"{_prefix(name)}_API_URL"
    value = os.environ.get(variable) or default
    if value != default:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"{value[:80]!r} is not an http(s) URL like http://127.0.0.1:8701", option=variable)
    return value


def fake_about(name: str) -> tuple[str, bool] | None:
    """``(url, boots_nodes)`` when ``PROVISIONER_<NAME>_API_URL`` points at this tool's fake provider
    (its ``GET /_fake/about`` says so, and whether its instances boot); None otherwise: not set, not a
    fake, or no answer. One unauthenticated GET, only when the variable is set."""
    override = os.environ.get(f"{_prefix(name)}_API_URL")
    if not override:
        return None
    import httpx

    try:
        answer = httpx.get(override.rstrip("/") + "/_fake/about", timeout=5.0)
        about = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if isinstance(about, dict) and about.get("fake") is True:
        return override, about.get("boots_nodes") is True
    return None


def plain_fake(name: str) -> str | None:
    """The fake's URL when ``name`` points at this tool's fake whose instances never boot (``fake_about``)."""
    found = fake_about(name)
    return found[0] if found is not None and not found[1] else None


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


__all__ = ["NATIVE_KEY_VARS", "api_key", "api_url", "credentials_fix", "credentials_missing"]
