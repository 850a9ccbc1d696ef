"""The AWS wire protocol as the AWS fake (``aws_ec2.AWSFake``) speaks it: SigV4 signature checks,
the region a request was signed for, EC2's and the JSON services' error codes, and moto's
in-process app (built, warmed up and reset here; its state is per process).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import parse_qsl, quote

from werkzeug.wrappers import Request

from provisioner.testing.fakes import aws_shapes

EC2_ERRORS = {
    "invalid_key": (401, "AuthFailure", "AWS was not able to validate the provided access credentials"),
    "insufficient_balance": (
        400,
        "VcpuLimitExceeded",
        "You have requested more vCPU capacity than your current vCPU limit allows",
    ),
    "capacity": (
        500,
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient capacity in the Availability Zone you requested",
    ),
    "not_found": (400, "InvalidInstanceID.NotFound", "The instance ID does not exist"),
    "rate_limit": (429, "RequestLimitExceeded", "Request limit exceeded."),
    "bad_request": (400, "InvalidParameterValue", "Invalid parameter"),
}
JSON_ERRORS = {
    "invalid_key": (400, "UnrecognizedClientException", "The security token included in the request is invalid."),
    "insufficient_balance": (400, "ServiceQuotaExceededException", "quota exceeded"),
    "not_found": (400, "NoSuchResourceException", "The request failed because the specified service does not exist."),
    "rate_limit": (429, "ThrottlingException", "Rate exceeded"),
    "bad_request": (400, "ValidationException", "Invalid parameter"),
}


def base_images_only() -> None:
    """Have moto load its 44 base images into each region's backend, not ~1,300 (the base ones plus
    the region's latest Amazon Linux and ECS-optimized images): ~0.25 s of CPU less per region, on
    every backend made again after a reset. The fake's nodes boot one of the base images
    (aws_ec2.CONTRACT_IMAGE). moto's own switch: MOTO_AMIS_PATH, a file of the images to load (set
    here once per process, inherited by children; an existing setting is kept)."""
    if "MOTO_AMIS_PATH" in os.environ:
        return
    import moto
    from moto.utilities.utils import load_resource

    path = Path(tempfile.gettempdir()) / f"provisioner-moto-{moto.__version__}-base-amis.json"
    if not path.exists():  # written whole, then renamed: workers starting together never read half
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_text(json.dumps(load_resource("ec2/resources/amis.json")), encoding="utf-8")
        part.replace(path)
    os.environ["MOTO_AMIS_PATH"] = str(path)


def moto_app() -> Callable[..., Iterable[bytes]]:
    base_images_only()
    import moto.ec2.models.instance_types  # seconds of JSON: loaded now, not inside a 1 s request
    import moto.settings
    from moto.server import DomainDispatcherApplication, create_backend_app

    moto.settings.EC2_ENABLE_INSTANCE_TYPE_VALIDATION = True
    return DomainDispatcherApplication(create_backend_app)


def reset_moto() -> None:
    """Forget every moto resource in this process (moto's state is per process, not per app)."""
    from moto.moto_api._internal.models import moto_api_backend

    moto_api_backend.reset()


def warm_up(region: str = "us-east-1") -> None:
    """Build now what the first request would otherwise spend seconds on (the contract suite
    reads with a 1 s timeout): botocore's service models and moto's EC2 backend of ``region``."""
    base_images_only()
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    for service in ("ec2", "pricing", "service-quotas"):
        aws_shapes.service_model(service)
    ec2_backends[DEFAULT_ACCOUNT_ID][region]


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_ok(request: Request, secret: str) -> bool:
    """Whether the request's SigV4 signature matches one computed with ``secret`` as the secret key."""
    header = request.headers.get("Authorization", "")
    try:
        _, rest = header.split(" ", 1)
        parts = dict(p.strip().split("=", 1) for p in rest.split(","))
        _, date, region, service, _ = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
    except ValueError:
        return False
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(parse_qsl(request.query_string.decode(), keep_blank_values=True))
    )
    headers = "".join(f"{h}:{' '.join(request.headers.get(h, '').split())}\n" for h in signed)
    payload = request.headers.get("X-Amz-Content-SHA256") or hashlib.sha256(request.get_data()).hexdigest()
    canonical = "\n".join(
        [request.method, quote(request.path, safe="/-_.~"), query, headers, ";".join(signed), payload]
    )
    stamp = request.headers.get("X-Amz-Date", "")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(_sign(_sign(_sign(f"AWS4{secret}".encode(), date), region), service), "aws4_request")
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("Signature", ""))


def request_region(request: Request) -> str:
    """The region a request was signed for (its credential scope); us-east-1 when unsigned."""
    try:
        return request.headers["Authorization"].split("Credential=", 1)[1].split("/")[2]
    except (KeyError, IndexError):
        return "us-east-1"


__all__ = [
    "EC2_ERRORS",
    "JSON_ERRORS",
    "base_images_only",
    "moto_app",
    "request_region",
    "reset_moto",
    "sigv4_ok",
    "warm_up",
]
