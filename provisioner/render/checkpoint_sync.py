"""Copying the checkpoint folder to the spec's ``checkpoint.remote`` (docs/healing.md).

The tool is rclone (Debian/Ubuntu package ``rclone``): one binary that speaks S3, S3-compatible
stores and Google Cloud Storage, with the node's own credentials (``env_auth``: the instance
profile or the VM's service account; no key is rendered). The store is an rclone remote named
``ckpt`` defined only by ``RCLONE_CONFIG_CKPT_*`` variables in ``ENV_FILE``. ``rclone copy`` never
deletes in the store: a node whose folder was wiped does not erase the copies.

Where it goes: with a shared filesystem every node sees the same folder, so only the head copies
it on the timer, to ``BUCKET/PREFIX``; without one each node copies its own folder to
``BUCKET/PREFIX/NODE_NAME``. On a spot reclaim notice (the node watch writes ``CHECKPOINT_NOW``,
validation/watch.py) the node copies at once and again a minute later, once the jobs told to
checkpoint have written theirs. Pure: text from a ClusterView.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from provisioner.render.views import ClusterView

CHECKPOINT_NOW = "/run/provisioner/checkpoint-now"
"""The file the node watch writes on a reclaim notice (validation/watch.py's CHECKPOINT_NOW; a test
holds them equal: the pure renderer does not import the node watch)."""
ENV_FILE = "/etc/provisioner/checkpoint-remote.env"
CREDENTIALS_FILE = "/etc/provisioner/checkpoint-credentials.env"
"""The store's credentials where a node has none of its own (a neocloud's node and an s3:// store):
``NAME=VALUE`` lines, root-only, delivered over SSH, never in user data. Sourced when present."""
SYNC_PATH = "/usr/local/sbin/provisioner-checkpoint-sync"
SYNC_EVERY = "5min"
RECLAIM_SETTLE_S = 60
"""Seconds between the two copies after a reclaim notice (AWS gives 2 minutes, GCP 30 s)."""
RCLONE_FLAGS = ("--transfers", "8", "--retries", "3", "--low-level-retries", "5")


@dataclass(frozen=True)
class CheckpointSync:
    remote: str  # the spec's URL: PROVISIONER_CHECKPOINT_REMOTE
    env: tuple[tuple[str, str], ...]  # ENV_FILE's lines
    script: str
    timer: bool  # this role copies on the timer (every node, or the head only with a shared folder)
    every: str = SYNC_EVERY
    reclaim_trigger: str = CHECKPOINT_NOW
    settle_s: int = RECLAIM_SETTLE_S


def rclone_env(remote: str, endpoint_url: str | None, region: str | None = None) -> dict[str, str]:
    """``RCLONE_CONFIG_CKPT_*``: the remote ``ckpt`` for ``remote`` (s3:// or gs://). An s3:// store's
    ``region`` is rclone's (its default, us-east-1, signs for the wrong region elsewhere); a gs:// bucket
    is reached by name from anywhere (rclone's ``location`` only places a bucket it creates)."""
    scheme = remote.split("://", 1)[0]
    if scheme == "gs":
        return {
            "RCLONE_CONFIG_CKPT_TYPE": "google cloud storage",
            "RCLONE_CONFIG_CKPT_ENV_AUTH": "true",
            "RCLONE_CONFIG_CKPT_BUCKET_POLICY_ONLY": "true",
        }
    env = {"RCLONE_CONFIG_CKPT_TYPE": "s3", "RCLONE_CONFIG_CKPT_ENV_AUTH": "true"}
    if endpoint_url:
        env |= {"RCLONE_CONFIG_CKPT_PROVIDER": "Other", "RCLONE_CONFIG_CKPT_ENDPOINT": endpoint_url}
    else:
        env["RCLONE_CONFIG_CKPT_PROVIDER"] = "AWS"
    if region:
        env["RCLONE_CONFIG_CKPT_REGION"] = region
    return env


def rclone_target(remote: str) -> str:
    """``ckpt:BUCKET[/PREFIX]`` for an s3:// or gs:// URL."""
    return "ckpt:" + remote.split("://", 1)[1].strip("/")


def _load_env() -> str:
    """The script lines that export the store's rclone remote and, when the node has it, its credentials."""
    return (
        f'set -a; . "${{PROVISIONER_CHECKPOINT_ENV:-$ROOT{ENV_FILE}}}"\n'
        f'[ ! -f "$ROOT{CREDENTIALS_FILE}" ] || . "$ROOT{CREDENTIALS_FILE}"\n'
        "set +a\n"
    )


def sync_script(source: str, remote: str, *, per_node: bool) -> str:
    """The copy, as a bash script; ``PROVISIONER_ROOT`` and ``PROVISIONER_CHECKPOINT_ENV`` let tests run it."""
    q = shlex.quote
    target = q(rclone_target(remote)) + ('/"$NODE_NAME"' if per_node else "")
    return (
        "#!/bin/bash\n"
        f"# Copy {source} to {remote} with rclone (docs/healing.md); never deletes in the store.\n"
        "set -eu\n"
        "ROOT=${PROVISIONER_ROOT:-}\n"
        + ('. "$ROOT/etc/provisioner/identity.env"\n' if per_node else "")
        + _load_env()
        + f'src="$ROOT"{q(source)}\n'
        '[ -d "$src" ] || exit 0\n'
        f'exec rclone copy {" ".join(RCLONE_FLAGS)} "$src" {target}\n'
    )


def restore_script(dest: str, remote: str, *, from_node: str | None = None) -> str:
    """The other way (a moved run, lifecycle/recover.py): the store's copy into ``dest`` on a new cluster,
    from ``BUCKET/PREFIX/FROM_NODE`` when the old cluster copied one folder per node. Run as root on the
    node (``bash -c``); ``PROVISIONER_ROOT`` and ``PROVISIONER_CHECKPOINT_ENV`` let tests run it.
    ``rclone copy`` skips what is already there with the same size and time."""
    q = shlex.quote
    source = q(rclone_target(remote) + (f"/{from_node}" if from_node else ""))
    return (
        "set -eu\n"
        "ROOT=${PROVISIONER_ROOT:-}\n" + _load_env() + f'dest="$ROOT"{q(dest)}\n'
        'mkdir -p "$dest"\n'
        f'exec rclone copy {" ".join(RCLONE_FLAGS)} {source} "$dest"\n'
    )


def checkpoint_sync(view: ClusterView, role: str) -> CheckpointSync | None:
    """What ``role``'s nodes install for the spec's checkpoint.remote, or None without one."""
    spec = view.checkpoint
    if spec.remote is None:
        return None
    shared = view.shared_kind != "none"
    source = view.shared_mount_path if shared else view.checkpoint_path
    return CheckpointSync(
        remote=spec.remote,
        env=tuple(rclone_env(spec.remote, spec.endpoint_url, spec.region).items()),
        script=sync_script(source, spec.remote, per_node=not shared),
        timer=role == "head" or not shared,
    )


__all__ = [
    "CREDENTIALS_FILE",
    "ENV_FILE",
    "RCLONE_FLAGS",
    "SYNC_PATH",
    "CheckpointSync",
    "checkpoint_sync",
    "rclone_env",
    "rclone_target",
    "restore_script",
]
