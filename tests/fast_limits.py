"""``fast_limits``: ``registry.get_provider`` building the REST adapters at 100x the published rate
limits with millisecond back-off (the CLI has no flags for them, and the limits and retries have
their own contract tests).

Child processes load this at start-up (tests/fixtures/fast_cli and pulumi_cli's sitecustomize.py:
every CLI, stand-in ``pulumi`` call, language host and dynamic-provider server), so it imports
nothing of the package until an adapter is built: importing the lifecycle test helpers there cost
each child about 1.2 s of CPU before it did anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.providers.base import Provider


def fast_limits(get_provider: Callable[..., Provider]) -> Callable[..., Provider]:
    """``get_provider`` (the registry's) with the adapters it builds at 100x their published limits."""

    def fast_get_provider(provider: str, **options: Any) -> Provider:
        from provisioner.providers import registry
        from provisioner.providers.http import RetryPolicy

        cls: Any = registry.provider_class(provider)
        client = getattr(cls, "client_class", None)  # a REST adapter's; the SDK adapters' client module's LIMITS
        limits = (
            client.default_limits
            if client is not None
            else getattr(importlib.import_module(cls.__module__.rsplit(".", 1)[0] + ".client"), "LIMITS", None)
        )
        if limits is not None:
            options = {
                "limits": limits.scaled(100.0),
                "retry": RetryPolicy(base_delay_s=0.01, max_delay_s=0.1),
                **options,
            }
        return get_provider(provider, **options)

    return fast_get_provider
