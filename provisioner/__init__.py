"""GPU cluster provisioner: spec -> plan -> render, across six providers.

The core (spec, catalog, optimizer, reports) is pure; ``providers/`` talks to clouds and
``stacks/`` realizes a Plan with Pulumi. Names below are imported lazily on first use, so
``import provisioner`` stays cheap for the CLI.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__version__ = "0.1.0"

# Imported from a source checkout (``python -m provisioner.testing.fakes`` run in the repository
# puts the checkout's ``provisioner/`` first on sys.path, ahead of any install): the sub-packages
# setup.py maps from other folders (``providers/``, ``stacks/``, ``templates/``) are found there
# too. An installed copy has no setup.py beside it and is left as it is.
_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "setup.py").is_file() and (_CHECKOUT / "providers" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT))

_EXPORTS = {
    "provisioner.catalog": ["load_bundled_catalog", "load_catalog"],
    "provisioner.errors": [
        "CapacityError",
        "CatalogError",
        "CredentialsError",
        "NoFeasibleOfferError",
        "PlanError",
        "PlanFileError",
        "ProviderAPIError",
        "ProviderError",
        "ProvisionerError",
        "QuotaError",
        "RateLimitError",
        "SpecError",
        "StackError",
    ],
    "provisioner.loader": ["load_spec", "parse_spec"],
    "provisioner.catalog_model": ["Catalog"],
    "provisioner.offer": ["Offer", "ProviderInfo"],
    "provisioner.optimizer": ["resolve_plan"],
    "provisioner.plan": ["CostBreakdown", "Option", "Plan", "PlanResult", "load_plan", "save_plan"],
    "provisioner.report": ["render_report"],
    "provisioner.spec": ["ClusterSpec"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted([*_WHERE, "__version__"])


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'provisioner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
