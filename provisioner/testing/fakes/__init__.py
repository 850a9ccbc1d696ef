"""Fake provider API servers for tests and benchmarks.

``FAKES`` maps a provider name to ``"module:Class"`` (imported on demand); each provider
package names its fake in its ``FACTS``. ``make_fake(name, **kwargs)`` builds one; run one as a real server
with ``python -m provisioner.testing.fakes NAME --port N``. The framework is in ``base``.
"""

from __future__ import annotations

import importlib
from typing import Any

from provisioner.providers.registry import facts
from provisioner.testing.fakes.base import FakeApp, RunningServer, serve

FAKES: dict[str, str] = {name: found.fake for name, found in facts().items()}
"""Provider -> its fake, ``"module:Class"`` (each provider package's ``FACTS.fake``)."""


def fake_class(name: str) -> type[FakeApp]:
    """The fake app class for ``name``. Raises KeyError for an unknown name."""
    module_name, _, attr = FAKES[name].partition(":")
    cls: type[FakeApp] = getattr(importlib.import_module(module_name), attr)
    return cls


def make_fake(name: str, **kwargs: Any) -> FakeApp:
    return fake_class(name)(**kwargs)


__all__ = ["FAKES", "FakeApp", "RunningServer", "fake_class", "make_fake", "serve"]
