"""``checkpoint:`` in a spec: an object store outside the cluster that the checkpoints are copied to.

``remote`` is ``s3://BUCKET[/PREFIX]`` or ``gs://BUCKET[/PREFIX]``; ``endpoint_url`` names an
S3-compatible service (MinIO, R2, Ceph) for an ``s3://`` remote. Both reach boot scripts and
systemd unit files (render/checkpoint_sync.py), so they are held to a narrow alphabet here.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

REMOTE = re.compile(r"(?P<scheme>s3|gs)://(?P<bucket>[^/]*)(?P<prefix>/.*)?")
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
PREFIX = re.compile(r"(/[A-Za-z0-9._=-]+)*/?")
ENDPOINT = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~-]*)*")


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
        return self

    def parts(self) -> tuple[str, str, str]:
        """``(scheme, bucket, prefix)``: prefix without slashes at its ends, maybe empty."""
        match = REMOTE.fullmatch(self.remote or "")
        if match is None:
            raise ValueError("no remote")
        return match["scheme"], match["bucket"], (match["prefix"] or "").strip("/")


__all__ = ["CheckpointSpec"]
