"""Local records of the clusters this machine brought up: what `status`, `down`, `burst` and `gc` read.

Each bring-up (``up``, ``burst``) gets its own ``run_id`` beside the cluster's name (``new_run_id``):
the ledger, the nodes' run mark, ``status`` and ``costs`` are per run, so a name used again never
merges or carries over money. A record written before runs had ids has ``run_id`` None. ``local``
marks a dry run's record (``up --local``): nothing of it may ever reach a real provider.

One JSON file per cluster under ``state_dir()/clusters/<cluster_id>.json`` (written atomically,
mode 0600 because it names where the cluster lives), and the cluster's secrets beside it as
``<cluster_id>.secrets.json`` (provisioner.secrets, 0600). A record never holds a secret.

The provider is the source of truth for what exists (nodes carry the cluster tag); a record is
what this machine meant to exist: a tagged node with no record, or with a record past its
expiry, is what ``gc`` collects.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import shutil
import socket
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from provisioner.capped import link_refused, read_capped
from provisioner.dirs import state_dir
from provisioner.errors import ProvisionerError
from provisioner.offer import SafeId
from provisioner.plan import Plan

RECORD_VERSION: Literal[1] = 1
RunId = Annotated[str, StringConstraints(pattern=r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")]
"""``<UTC date>-<time>-<6 hex>``: sortable, and a valid tag value, GCP label and Vast.ai label part."""
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest record read (a 1,000-node plan's record is under 1 MiB): a bigger file is refused unread."""


def new_run_id(now: dt.datetime) -> str:
    """A fresh id for one bring-up of a cluster (24 random bits beside the second it began)."""
    return f"{now.astimezone(dt.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


class ClusterRecord(BaseModel):
    """What this machine brought up (or is bringing up) for one cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = RECORD_VERSION
    cluster_id: SafeId
    provider: SafeId
    engine: Literal["direct", "pulumi"] = "direct"
    backend: str | None = Field(None, description="pulumi: the state backend URL given to up (None: the local one).")
    plan: Plan
    created_at: dt.datetime
    expires_at: dt.datetime | None = Field(None, description="TTL end (UTC); None when the spec sets none.")
    max_cost_usd: Decimal | None = Field(None, ge=0, allow_inf_nan=False)
    on_budget: Literal["stop", "warn"] = Field(
        "warn",
        description="At 100 % of max_cost_usd: stop (the budget is the cluster's expiry) or warn (status/watch only).",
    )
    node_ids: dict[str, str] = Field(default_factory=dict, description="node name -> provider id")
    head_address: str | None = None
    status: Literal["creating", "up", "failed", "deleting", "interrupted"] = "creating"
    lease_pid: int | None = Field(
        None,
        description="burst: the process this cluster lives only as long as "
        "(on lease_host); once it is gone the cluster counts as expired.",
    )
    lease_host: str | None = None
    lease_id: str | None = Field(
        None,
        description="The lease mark of the up that wrote this record (the "
        "nodes it launched carry it; providers.ownership.LeaseMark).",
    )
    run_id: RunId | None = Field(
        None,
        description="This bring-up's id (new_run_id): what the ledger, costs and status key its "
        "money by. None: a record written before runs had ids.",
    )
    local: bool = Field(False, description="A dry run on this machine (up --local): never a real provider's.")

    @property
    def run(self) -> str:
        """The run id, or ``n/a`` for a record written before runs had ids."""
        return self.run_id or "n/a"

    def lease_lost(self) -> bool:
        """Whether the process holding the lease on this host is gone (a SIGKILLed burst).

        A lease held on another host, or by a live process (or a pid reused since), is not lost."""
        if self.lease_pid is None or self.lease_host != socket.gethostname():
            return False
        from provisioner.providers.ownership import pid_alive

        return not pid_alive(self.lease_pid)

    def expired(self, now: dt.datetime) -> bool:
        """Past its expiry, or a burst cluster whose process died (nothing else will end it)."""
        return (self.expires_at is not None and now >= self.expires_at) or self.lease_lost()


def clusters_dir() -> Path:
    return state_dir() / "clusters"


def record_path(cluster_id: str) -> Path:
    return clusters_dir() / f"{cluster_id}.json"


def secrets_path(cluster_id: str) -> Path:
    return clusters_dir() / f"{cluster_id}.secrets.json"


def ssh_dir(cluster_id: str) -> Path:
    """Where the cluster's key file and known_hosts live while it exists (removed with the record)."""
    return clusters_dir() / "ssh" / cluster_id


def save_record(record: ClusterRecord) -> Path:
    """Write ``record`` atomically (0600 temp file renamed over the old one). Returns its path."""
    path = record_path(record.cluster_id)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(record.model_dump_json(indent=1))
            handle.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ProvisionerError(f"cannot write cluster record {path}: {exc.strerror}") from None
    from provisioner.lifecycle import ledger
    from provisioner.providers.base import owner_id

    ledger.note_record(record, owner_id(), dt.datetime.now(dt.UTC))  # the ledger outlives the record
    return path


def load_record(cluster_id: str) -> ClusterRecord | None:
    """The record of ``cluster_id``, None when there is none. ProvisionerError when unreadable."""
    path = record_path(cluster_id)
    try:
        text = read_capped(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProvisionerError(f"cannot read cluster record {path}: {_why(exc)}") from None
    try:
        return ClusterRecord.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "file"
        raise ProvisionerError(f"{path}: not a valid cluster record: {where}: {first['msg']}") from None


def _why(exc: OSError) -> str:
    return (
        "a symbolic link; refused (records are read only as regular files)" if link_refused(exc) else str(exc.strerror)
    )


def list_records() -> list[ClusterRecord]:
    """Every readable record, by cluster id. Unreadable files are skipped (``gc`` must still run)."""
    records = []
    folder = clusters_dir()
    if not folder.is_dir():
        return []
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(".secrets.json"):
            continue
        try:
            records.append(ClusterRecord.model_validate_json(read_capped(path, MAX_RECORD_BYTES)))
        except (OSError, ValueError):
            continue
    return records


def remove_record(cluster_id: str) -> None:
    """Forget the cluster: its record, its secrets and its key material (the key file and known_hosts
    under ``ssh_dir``); the ledger keeps its entries. Idempotent."""
    if record_path(cluster_id).exists():
        from provisioner.lifecycle import ledger

        try:  # the run the entry closes; an unreadable record closes the name's latest run
            record = load_record(cluster_id)
        except ProvisionerError:
            record = None
        # forgetting must not fail once the nodes are gone; the entry says only when
        with contextlib.suppress(ProvisionerError):
            ledger.note_removed(
                cluster_id,
                dt.datetime.now(dt.UTC),
                run=record.run_id if record is not None else None,
                local=record is not None and record.local,
            )
    record_path(cluster_id).unlink(missing_ok=True)
    secrets_path(cluster_id).unlink(missing_ok=True)
    shutil.rmtree(ssh_dir(cluster_id), ignore_errors=True)


__all__ = [
    "ClusterRecord",
    "clusters_dir",
    "list_records",
    "load_record",
    "new_run_id",
    "record_path",
    "remove_record",
    "save_record",
    "secrets_path",
    "state_dir",
]
