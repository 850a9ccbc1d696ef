"""Node validation: a GPU health gate before the first job, burn-in, stragglers, auto-drain.

``provisioner node check`` runs ``check_node`` on one node; ``provisioner validate`` runs it on
every node (``validate_cluster``), marks stragglers and drains or cordons bad nodes;
``require_healthy`` is the gate a job launcher calls. See docs/validation.md.

Names are imported lazily so registering the CLI commands costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "provisioner.validation.cluster": ["ClusterReport", "Target", "require_healthy", "validate_cluster"],
    "provisioner.validation.model": ["Finding", "NodeReport", "Severity", "Status"],
    "provisioner.validation.node": ["CheckOptions", "check_node"],
    "provisioner.validation.runner": ["CommandResult", "Host"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'provisioner.validation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
