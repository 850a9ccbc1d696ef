"""What the witness modules share: the skip (or failure under REQUIRE_SYSTEM_TOOLS=1) when an
official client is absent or not the version pinned in pyproject's ``test`` extra."""

from __future__ import annotations

import importlib.metadata

from tests.conftest import skip_or_fail


def need_client(distribution: str, pinned: str | None = None) -> None:
    """Skip (or fail in CI) unless ``distribution`` is installed (at ``pinned``, when given)."""
    wanted = f"{distribution}=={pinned}" if pinned else distribution
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        skip_or_fail(f"needs the official client {wanted} (pip install -e '.[test]')")
        return
    if pinned is not None and installed != pinned:
        skip_or_fail(f"needs the official client {wanted}, found {installed} (pip install -e '.[test]')")


__all__ = ["need_client"]
