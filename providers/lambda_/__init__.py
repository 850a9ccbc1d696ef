"""Lambda Cloud adapter: ``LambdaProvider`` over the ``/api/v1`` REST API."""

from provisioner.providers.lambda_.provider import LambdaProvider

__all__ = ["LambdaProvider"]
