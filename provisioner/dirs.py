"""Where this tool keeps its files on this machine: the state dir (cluster records, the ledger,
local labs, Pulumi's local state). Below every layer that writes there, so that the ledger, the
records and the local lab share one answer without importing each other."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """``$PROVISIONER_STATE_DIR``, else the platform's user state dir for gpu-provisioner."""
    override = os.environ.get("PROVISIONER_STATE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_state_dir("gpu-provisioner"))


__all__ = ["state_dir"]
