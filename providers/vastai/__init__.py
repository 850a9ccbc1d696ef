"""Vast.ai adapter: marketplace asks rented through the REST API (see provider.py)."""

from provisioner.providers.vastai.provider import VastAIProvider

__all__ = ["VastAIProvider"]
