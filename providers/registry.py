"""Explicit provider registry: name -> "module:Class", imported only when asked for.

Adding a provider touches its package, one line here, its tests and one example spec.
"""

from __future__ import annotations

import importlib
from typing import Any

from provisioner.providers.base import Provider

REGISTRY: dict[str, str] = {
    "lambda": "provisioner.providers.lambda_.provider:LambdaProvider",
    "runpod": "provisioner.providers.runpod.provider:RunPodProvider",
    "vastai": "provisioner.providers.vastai.provider:VastAIProvider",
    "fluence": "provisioner.providers.fluence.provider:FluenceProvider",
    "aws": "provisioner.providers.aws.provider:AWSProvider",
    "gcp": "provisioner.providers.gcp.provider:GCPProvider",
}


def provider_class(name: str) -> type[Provider]:
    """The adapter class for ``name``. Raises KeyError for an unknown name or for a registered
    adapter whose package is not in this installation yet (aws and gcp come later)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown provider {name!r}; known: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise  # a dependency of the adapter is missing: that is a real error, not an unknown name
        raise KeyError(f"provider {name!r} has no adapter in this installation") from None
    cls: type[Provider] = getattr(module, attr)
    return cls


def get_provider(name: str, **kwargs: Any) -> Provider:
    """An adapter instance configured from the environment (see providers.settings)."""
    return provider_class(name)(**kwargs)


__all__ = ["REGISTRY", "get_provider", "provider_class"]
