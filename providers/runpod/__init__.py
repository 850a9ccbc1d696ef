"""RunPod adapter: REST v2 (GraphQL only for spot pods and spot prices)."""

from provisioner.providers.runpod.provider import RunPodProvider

__all__ = ["RunPodProvider"]
