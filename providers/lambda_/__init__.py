"""Lambda Cloud adapter: ``LambdaProvider`` over the ``/api/v1`` REST API."""

from providers.lambda_.provider import LambdaProvider

__all__ = ["LambdaProvider"]
