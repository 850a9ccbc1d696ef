"""``checkpoint:`` in a spec: an object store outside the cluster that the checkpoints are copied to.

``remote`` is ``s3://BUCKET[/PREFIX]`` or ``gs://BUCKET[/PREFIX]``; ``endpoint_url`` names an
S3-compatible service (MinIO, R2, Ceph) for an ``s3://`` remote; ``region`` is the bucket's region
(what a move's download is priced by, cost_terms.move_term; rclone's region for an ``s3://`` store).
They reach boot scripts and systemd unit files (render/checkpoint_sync.py), so they are held to a
narrow alphabet here.

``credentials_env`` / ``credentials_file`` name the store's credentials for nodes that have none of
their own (a neocloud's): variables of the environment ``up``/``burst``/``watch`` run in, or a
service-account key file on that machine. Only the names and the path are in the spec (and so in
plan.json); the values are read at bring-up and reach the nodes over the SSH pass only
(realize/store_credentials.py, docs/security.md).
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
REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
"""A bucket's region as the providers spell them (us-east-1, us-central1, europe-west4)."""
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
"""An environment variable's name, as a spec may give it (letters, digits, '_')."""
ROLES = {
    "s3": ("access_key_id", "secret_access_key", "session_token"),
    "gs": ("service_account_credentials",),
}
"""What a store's credentials are made of: rclone's option names for its s3 / google cloud storage
backend (``rclone help backend s3``), set on the nodes as ``RCLONE_CONFIG_CKPT_<OPTION>``."""
REQUIRED = {"s3": ("access_key_id", "secret_access_key"), "gs": ("service_account_credentials",)}
AWS_NAMES = {
    "AWS_ACCESS_KEY_ID": "access_key_id",
    "AWS_SECRET_ACCESS_KEY": "secret_access_key",
    "AWS_SESSION_TOKEN": "session_token",
}
"""The list form of ``credentials_env``: the AWS SDKs' own variable names, each for its rclone option."""
FILE_ROLE = "service_account_credentials"


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
    region: str | None = Field(
        None,
        description="The bucket's region (us-east-1, us-central1): a move to a cluster of the store's provider "
        "in it downloads for free, from another of its regions at the inter-region rate (unset: that rate).",
    )

    credentials_env: list[str] | dict[str, str] | None = Field(
        None,
        description="The store's keys for nodes with no credentials of their own: names of variables of "
        "the environment up/burst/watch run in, [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY(, AWS_SESSION_TOKEN)] "
        "or {access_key_id: VAR, secret_access_key: VAR, session_token: VAR} (s3:// only). Values go over SSH only.",
    )
    credentials_file: str | None = Field(
        None,
        description="A gs:// store's service-account key (JSON) on the machine running up/burst/watch; "
        "its contents go to the nodes over SSH only.",
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
            for key, default in (
                ("size_gb", 0),
                ("region", None),
                ("egress_usd_per_gb", None),
                ("max_moves", 2),
                ("restore", None),
                ("credentials_env", None),
                ("credentials_file", None),
            ):
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

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not REGION.fullmatch(value):
            raise ValueError(
                f"{value[:100]!r}: expected a region name such as us-east-1 (lowercase letters, digits, '-')"
            )
        return value

    @field_validator("credentials_env")
    @classmethod
    def _credentials_env(cls, value: list[str] | dict[str, str] | None) -> list[str] | dict[str, str] | None:
        if value is None:
            return None
        names = list(value.values()) if isinstance(value, dict) else value
        for name in names:
            if not VARIABLE.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not a variable name (letters, digits, '_')")
        if isinstance(value, list):
            unknown = [name for name in value if name not in AWS_NAMES]
            if unknown:
                raise ValueError(
                    f"{unknown[0]!r}: the list form names {', '.join(AWS_NAMES)}; "
                    "map other names by role: {access_key_id: VAR, secret_access_key: VAR}"
                )
            if len(set(value)) != len(value):
                raise ValueError("a variable is named twice")
        elif not value:
            raise ValueError("name at least one variable")
        return value

    @field_validator("credentials_file")
    @classmethod
    def _credentials_file(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or len(value) > 4096 or not value.isprintable()):
            raise ValueError("expected the path of a service-account key file (JSON)")
        return value

    @model_validator(mode="after")
    def _credentials_fit(self) -> CheckpointSpec:
        if self.credentials_env is None and self.credentials_file is None:
            return self
        if self.remote is None:
            raise ValueError("credentials_env and credentials_file need a remote: set remote: s3://... or gs://...")
        scheme = self.parts()[0]
        if self.credentials_file is not None and scheme != "gs":
            raise ValueError(
                "credentials_file is a gs:// store's service-account key; an s3:// store uses credentials_env"
            )
        if isinstance(self.credentials_env, list) and scheme != "s3":
            raise ValueError("credentials_env's list form names AWS variables: for gs:// use credentials_file")
        if isinstance(self.credentials_env, dict):
            unknown = sorted(set(self.credentials_env) - set(ROLES[scheme]))
            if unknown:
                raise ValueError(
                    f"credentials_env: {unknown[0]!r} is not {'an' if scheme == 's3' else 'a'} {scheme}:// credential "
                    f"(one of {', '.join(ROLES[scheme])})"
                )
        if self.credentials_file is not None and FILE_ROLE in (self.credentials_env or {}):
            raise ValueError(f"credentials_env names {FILE_ROLE} and credentials_file gives it too: keep one")
        roles = {role for role, _kind, _source in self.credential_sources()}
        missing = [role for role in REQUIRED[scheme] if role not in roles]
        if missing:
            where = "credentials_file" if scheme == "gs" else "credentials_env"
            article = "an" if scheme == "s3" else "a"
            raise ValueError(f"{where}: {article} {scheme}:// store needs {' and '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _endpoint_needs_s3(self) -> CheckpointSpec:
        if self.endpoint_url is not None and not (self.remote or "").startswith("s3://"):
            raise ValueError("endpoint_url is for an S3-compatible store: set remote: s3://BUCKET/PREFIX")
        if self.restore is not None and self.remote is None:
            raise ValueError("restore needs a remote to restore from")
        if self.region is not None and self.remote is None:
            raise ValueError("region is the bucket's: set remote: s3://BUCKET/PREFIX or gs://BUCKET/PREFIX")
        return self

    def store_provider(self) -> str | None:
        """The provider whose egress a download from the store pays: s3 -> aws, gs -> gcp, an
        endpoint_url store -> None (its egress is ``egress_usd_per_gb``, else 0)."""
        if self.remote is None or self.endpoint_url is not None:
            return None
        return "aws" if self.remote.startswith("s3://") else "gcp"

    def credential_sources(self) -> tuple[tuple[str, str, str], ...]:
        """``(rclone option, "env" | "file", variable name or path)`` for each credential the spec names,
        in a fixed order; () when it names none. The values are read by realize/store_credentials.py."""
        found: dict[str, tuple[str, str]] = {}
        given = self.credentials_env
        pairs = [(AWS_NAMES[name], name) for name in given] if isinstance(given, list) else list((given or {}).items())
        for role, name in pairs:
            found[role] = ("env", name)
        if self.credentials_file is not None:
            found[FILE_ROLE] = ("file", self.credentials_file)
        return tuple((role, *found[role]) for role in (*ROLES["s3"], *ROLES["gs"]) if role in found)

    def parts(self) -> tuple[str, str, str]:
        """``(scheme, bucket, prefix)``: prefix without slashes at its ends, maybe empty."""
        match = REMOTE.fullmatch(self.remote or "")
        if match is None:
            raise ValueError("no remote")
        return match["scheme"], match["bucket"], (match["prefix"] or "").strip("/")


__all__ = ["CheckpointSpec", "RestoreSpec"]
