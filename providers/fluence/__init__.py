"""Fluence adapter: ``FluenceProvider`` over the GPU Cloud API (plus the v2 VM API for CPU nodes)."""

from provisioner.providers.fluence.provider import FluenceProvider

__all__ = ["FluenceProvider"]
