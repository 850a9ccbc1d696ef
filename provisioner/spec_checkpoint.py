"""``checkpoint:`` in a spec: an object store outside the cluster that the checkpoints are copied to.

``remote`` is ``s3://BUCKET[/PREFIX]`` or ``gs://BUCKET[/PREFIX]``; ``endpoint_url`` names an
S3-compatible service (MinIO, R2, Ceph) for an ``s3://`` remote. Both reach boot scripts and
systemd unit files (render/checkpoint_sync.py), so they are held to a narrow alphabet here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

REMOTE = re.compile(r"(?P<scheme>s3|gs)://(?P<bucket>[^/]*)(?P<prefix>/.*)?")
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
PREFIX = re.compile(r"(/[A-Za-z0-9._=-]+)*/?")
Quantity = Annotated[float, Field(ge=0, le=1e9, strict=True, allow_inf_nan=False)]
"""A YAML number (read exactly by ``money.spec_decimal`` where it is priced)."""
ENDPOINT = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~-]*)*")


class RestoreSpec(BaseModel):
    """Set by a move (lifecycle/recover.py), never by hand: the run is re-planned to restore its
    checkpoint from ``remote`` after ``lost_minutes`` of work since the last copy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lost_minutes: Quantity = 0
    from_provider: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")


class CheckpointSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    remote: str | None = Field(
        None,
        description="Object store the checkpoint folder is copied to: s3://BUCKET/PREFIX or gs://BUCKET/PREFIX "
        "(every node, on a timer and on a spot reclaim notice; jobs see it as PROVISIONER_CHECKPOINT_REMOTE).",
    )
    endpoint_url: str | None = Field(
        None, description="An S3-compatible service's URL (https://minio.example:9000) for an s3:// remote."
    )

    size_gb: Quantity = Field(
        0,
        description="The checkpoint's size: what a move to another provider downloads (priced as egress).",
    )
    egress_usd_per_gb: Quantity | None = Field(
        None,
        description="USD per GB leaving the store; default: its provider's internet egress "
        "(s3:// AWS, gs:// GCP; 0 for an endpoint_url store unless set).",
    )
    max_moves: int = Field(
        2, ge=0, le=100, description="Moves to another cluster at most (burst --recover anywhere, watch)."
    )
    restore: RestoreSpec | None = None

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Keys left at their defaults stay out of plan.json (a plan written before they existed is unchanged).
        data = handler(self)
        if isinstance(data, dict):
            for key, default in (("size_gb", 0), ("egress_usd_per_gb", None), ("max_moves", 2), ("restore", None)):
                if key in data and (data[key] == default if default is not None else data[key] is None):
                    data.pop(key)
        return data

    @field_validator("remote")
    @classmethod
    def _remote(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = REMOTE.fullmatch(value)
        if match is None:
            raise ValueError(f"{value!r}: expected s3://BUCKET/PREFIX or gs://BUCKET/PREFIX")
        if not match["bucket"]:
            raise ValueError(f"{value!r}: the bucket name is missing")
        if not BUCKET.fullmatch(match["bucket"]):
            bucket = match["bucket"]
            raise ValueError(f"{bucket!r} is not a bucket name (3-63 lowercase letters, digits, '.', '-', '_')")
        prefix = match["prefix"] or ""
        if not PREFIX.fullmatch(prefix) or ".." in prefix.split("/"):
            raise ValueError(f"{prefix!r}: use a prefix of letters, digits, '.', '_', '=', '-' parts")
        return value.rstrip("/")

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not ENDPOINT.fullmatch(value):
            raise ValueError(f"{value!r}: expected http(s)://HOST[:PORT][/PATH]")
        return value

    @model_validator(mode="after")
    def _endpoint_needs_s3(self) -> CheckpointSpec:
        if self.endpoint_url is not None and not (self.remote or "").startswith("s3://"):
            raise ValueError("endpoint_url is for an S3-compatible store: set remote: s3://BUCKET/PREFIX")
        if self.restore is not None and self.remote is None:
            raise ValueError("restore needs a remote to restore from")
        return self

    def store_provider(self) -> str | None:
        """The provider whose egress a download from the store pays: s3 -> aws, gs -> gcp, an
        endpoint_url store -> None (its egress is ``egress_usd_per_gb``, else 0)."""
        if self.remote is None or self.endpoint_url is not None:
            return None
        return "aws" if self.remote.startswith("s3://") else "gcp"

    def parts(self) -> tuple[str, str, str]:
        """``(scheme, bucket, prefix)``: prefix without slashes at its ends, maybe empty."""
        match = REMOTE.fullmatch(self.remote or "")
        if match is None:
            raise ValueError("no remote")
        return match["scheme"], match["bucket"], (match["prefix"] or "").strip("/")


__all__ = ["CheckpointSpec", "RestoreSpec"]
