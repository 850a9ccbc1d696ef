"""Explicit provider registry: name -> "module:Class", imported only when asked for.

Adding a provider touches its package (adapter, ``CAPABILITIES`` and ``FACTS`` in its light
``__init__``), its fake, one line here, its catalog rows and its docs row. Every other list of
providers is derived from ``REGISTRY`` and ``facts()`` (tests/test_provider_lists.py checks that
no other module names a provider).

``capabilities()`` tells the core what each adapter can create without importing any
adapter: every provider package's ``__init__`` defines ``CAPABILITIES`` and stays light
(the adapter class is imported on first use).
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import ProviderFacts

if TYPE_CHECKING:
    from provisioner.providers.base import Provider

REGISTRY: dict[str, str] = {
    "aws": "provisioner.providers.aws.provider:AWSProvider",
    "gcp": "provisioner.providers.gcp.provider:GCPProvider",
    "lambda": "provisioner.providers.lambda_.provider:LambdaProvider",
    "runpod": "provisioner.providers.runpod.provider:RunPodProvider",
    "vastai": "provisioner.providers.vastai.provider:VastAIProvider",
    "fluence": "provisioner.providers.fluence.provider:FluenceProvider",
}
"""The one list of providers: the spec's provider names, refresh, the stacks, gc and the fakes read it.

Pure data (this module imports no adapter), so the pure core may read it too."""


def _package(name: str) -> str:
    """``provisioner.providers.lambda_`` for ``lambda``: the package holding the adapter."""
    return REGISTRY[name].partition(":")[0].rsplit(".", 1)[0]


def _missing(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether ``exc`` says ``module_name`` itself (or a parent) is absent, not a dependency of it."""
    return exc.name is not None and (module_name == exc.name or module_name.startswith(f"{exc.name}."))


def provider_class(name: str) -> type[Provider]:
    """The adapter class for ``name``. Raises KeyError for an unknown name or for a registered
    adapter whose package is not in this installation yet, ProviderError (one line, exit 4) when
    the adapter's SDK is missing (boto3 and google-cloud-* come with the ``[cloud]`` extra)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown provider {name!r}; known: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not _missing(exc, module_name):
            if exc.name and exc.name.split(".")[0] != "provisioner":  # a cloud SDK of the [cloud] extra
                from provisioner.errors import ProviderError

                raise ProviderError(
                    name,
                    f"the {name} adapter needs the cloud SDKs, not installed here (no module "
                    f"{exc.name!r}): pip install 'gpu-provisioner[cloud]'",
                ) from None
            raise  # a module of this project is missing: a real error, not an unknown name
        raise KeyError(f"provider {name!r} has no adapter in this installation") from None
    cls: type[Provider] = getattr(module, attr)
    return cls


def get_provider(name: str, **kwargs: Any) -> Provider:
    """An adapter instance configured from the environment (see providers.settings)."""
    return provider_class(name)(**kwargs)


@functools.cache
def facts() -> dict[str, ProviderFacts]:
    """Each registered provider's ``FACTS`` (``providers.descriptor``), by name, in registry order.

    Imports only the providers' light package ``__init__`` modules. KeyError naming the package
    when one declares none (every provider must)."""
    found: dict[str, ProviderFacts] = {}
    for name in REGISTRY:
        declared = getattr(importlib.import_module(_package(name)), "FACTS", None)
        if declared is None:
            raise KeyError(f"provider {name!r}: its package {_package(name)} declares no FACTS")
        found[name] = declared
    return found


def capabilities() -> dict[str, frozenset[Capability]]:
    """What each registered provider's adapter can create, by provider name (registry order).

    An empty set for a registered provider with no adapter in this installation (aws and
    gcp today). Imports only the providers' light package ``__init__`` modules (each defines
    ``CAPABILITIES``), never an adapter or its HTTP client. Pure otherwise: no network.
    """
    found: dict[str, frozenset[Capability]] = {}
    for name in REGISTRY:
        package = _package(name)
        try:
            module = importlib.import_module(package)
        except ModuleNotFoundError as exc:
            if not _missing(exc, package):
                raise
            found[name] = frozenset()
            continue
        found[name] = frozenset(getattr(module, "CAPABILITIES", frozenset()))
    return found


__all__ = ["REGISTRY", "capabilities", "facts", "get_provider", "provider_class"]
