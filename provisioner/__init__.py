"""GPU cluster provisioner: spec -> plan -> render, across six providers.

The core (spec, catalog, optimizer, reports) is pure; ``providers/`` talks to clouds and
``stacks/`` realizes a Plan with Pulumi. Import what you need from here.
"""

from provisioner.catalog import load_bundled_catalog, load_catalog
from provisioner.errors import (
    CapacityError,
    CatalogError,
    CredentialsError,
    NoFeasibleOfferError,
    PlanError,
    ProviderAPIError,
    ProviderError,
    ProvisionerError,
    QuotaError,
    RateLimitError,
    SpecError,
    StackError,
)
from provisioner.loader import load_spec, parse_spec
from provisioner.offer import Catalog, Offer, ProviderInfo
from provisioner.plan import CostBreakdown, Option, Plan, PlanResult, load_plan, save_plan
from provisioner.spec import ClusterSpec

__version__ = "0.1.0"

__all__ = [
    "CapacityError",
    "Catalog",
    "CatalogError",
    "ClusterSpec",
    "CostBreakdown",
    "CredentialsError",
    "NoFeasibleOfferError",
    "Offer",
    "Option",
    "Plan",
    "PlanError",
    "PlanResult",
    "ProviderAPIError",
    "ProviderError",
    "ProviderInfo",
    "ProvisionerError",
    "QuotaError",
    "RateLimitError",
    "SpecError",
    "StackError",
    "__version__",
    "load_bundled_catalog",
    "load_catalog",
    "load_plan",
    "load_spec",
    "parse_spec",
    "save_plan",
]
