"""Fake provider API servers for tests and benchmarks.

``FAKES`` maps a provider name to ``"module:Class"`` (imported on demand); each provider
engineer adds one line. ``make_fake(name, **kwargs)`` builds one; run one as a real server
with ``python -m provisioner.testing.fakes NAME --port N``. The framework is in ``base``.
"""

from __future__ import annotations

import importlib
from typing import Any

from provisioner.testing.fakes.base import FakeApp, RunningServer, serve

FAKES: dict[str, str] = {
    "lambda": "provisioner.testing.fakes.lambda_:LambdaFake",
    "runpod": "provisioner.testing.fakes.runpod:RunPodFake",
    "vastai": "provisioner.testing.fakes.vastai:VastAIFake",
    "fluence": "provisioner.testing.fakes.fluence:FluenceFake",
    "aws": "provisioner.testing.fakes.aws_ec2:AWSFake",
    "gcp": "provisioner.testing.fakes.gcp_compute:GCPFake",
}


def fake_class(name: str) -> type[FakeApp]:
    """The fake app class for ``name``. Raises KeyError for an unknown name."""
    module_name, _, attr = FAKES[name].partition(":")
    cls: type[FakeApp] = getattr(importlib.import_module(module_name), attr)
    return cls


def make_fake(name: str, **kwargs: Any) -> FakeApp:
    return fake_class(name)(**kwargs)


__all__ = ["FAKES", "FakeApp", "RunningServer", "fake_class", "make_fake", "serve"]
