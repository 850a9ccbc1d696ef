"""checkpoint.remote (issue 30 item 1): the copy script the nodes get, run for real with rclone
against moto's S3 server on 127.0.0.1; the objects are then read back with boto3."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml

from provisioner.lifecycle.resume import checkpoint_env
from provisioner.plan import Plan
from provisioner.render import render_cluster
from tests.conftest import need_tool
from tests.test_render_slurm import CANARY, make_plan

BUCKET = "ckpt-bucket"
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _s3(url: str):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _plan(url: str, prefix: str, *, shared: bool) -> Plan:
    spec: dict[str, object] = {"checkpoint": {"remote": f"s3://{BUCKET}/{prefix}", "endpoint_url": url}}
    if not shared:
        spec["storage"] = {}
    return make_plan(spec, nodes=2)


def _files(plan: Plan, role: str) -> dict[str, str]:
    doc = yaml.safe_load(render_cluster(plan, CANARY)[f"cloud-init/{role}.yaml"])
    return {entry["path"]: entry.get("content", "") for entry in doc["write_files"]}


def _run_sync(plan: Plan, role: str, root: Path) -> subprocess.CompletedProcess[str]:
    """Lay the rendered env file and script under ``root`` and run the script as the node would."""
    files = _files(plan, role)
    for path in ("/etc/provisioner/checkpoint-remote.env", "/usr/local/sbin/provisioner-checkpoint-sync"):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[path])
    script = root / "usr/local/sbin/provisioner-checkpoint-sync"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "RCLONE_CONFIG": str(root / "no-rclone.conf"),
        "PROVISIONER_ROOT": str(root),
        **KEYS,
    }
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False)


def _objects(url: str, prefix: str) -> dict[str, bytes]:
    s3 = _s3(url)
    listing = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing}


def test_shared_folder_lands_under_the_prefix_and_is_never_deleted(moto_url: str, tmp_path: Path) -> None:
    need_tool("rclone")
    _s3(moto_url).create_bucket(Bucket=BUCKET)
    plan = _plan(moto_url, "runs/shared", shared=True)
    folder = tmp_path / "shared"  # the plan's shared mount, under PROVISIONER_ROOT
    (folder / "step-100").mkdir(parents=True)
    (folder / "step-100" / "model.pt").write_bytes(b"weights-100")
    (folder / "latest").write_text("step-100\n")
    result = _run_sync(plan, "head", tmp_path)
    assert result.returncode == 0, result.stderr
    assert _objects(moto_url, "runs/shared/") == {
        "runs/shared/step-100/model.pt": b"weights-100",
        "runs/shared/latest": b"step-100\n",
    }
    # The next checkpoint: a file rewritten with the same size, the old step removed locally.
    (folder / "latest").write_text("step-200\n")
    (folder / "step-100" / "model.pt").unlink()
    os.utime(folder / "latest", (2_000_000_000, 2_000_000_000))
    assert _run_sync(plan, "head", tmp_path).returncode == 0
    assert _objects(moto_url, "runs/shared/") == {
        "runs/shared/step-100/model.pt": b"weights-100",  # copy, not sync: nothing deleted in the store
        "runs/shared/latest": b"step-200\n",
    }


def test_node_local_folders_land_in_one_subfolder_per_node(moto_url: str, tmp_path: Path) -> None:
    need_tool("rclone")
    s3 = _s3(moto_url)
    if BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=BUCKET)
    plan = _plan(moto_url, "runs/local", shared=False)
    (tmp_path / "etc/provisioner").mkdir(parents=True)
    (tmp_path / "etc/provisioner/identity.env").write_text(
        f"NODE_NAME={plan.nodes[1].name}\nNODE_ROLE=worker\nHEAD_NODE={plan.nodes[0].name}\n"
    )
    (tmp_path / "mnt/checkpoints").mkdir(parents=True)
    (tmp_path / "mnt/checkpoints/rank1.pt").write_bytes(b"rank-1")
    result = _run_sync(plan, "worker", tmp_path)
    assert result.returncode == 0, result.stderr
    assert _objects(moto_url, "runs/local/") == {f"runs/local/{plan.nodes[1].name}/rank1.pt": b"rank-1"}


def test_the_reclaim_trigger_is_the_file_the_node_watch_writes() -> None:
    from provisioner.render import checkpoint_sync
    from provisioner.validation import watch

    assert checkpoint_sync.CHECKPOINT_NOW == watch.CHECKPOINT_NOW == str(watch.WatchConfig(node="n").checkpoint_file)


def test_who_copies_on_the_timer_and_what_jobs_see() -> None:
    shared = _plan("http://127.0.0.1:9000", "p", shared=True)
    local = _plan("http://127.0.0.1:9000", "p", shared=False)
    timer = "/etc/systemd/system/provisioner-checkpoint-sync.timer"
    reclaim = "/etc/systemd/system/provisioner-checkpoint-reclaim.path"
    # A shared folder is copied by the head alone; node-local folders by every node. Every node copies
    # on a reclaim notice (the node watch's checkpoint-now file).
    assert (timer in _files(shared, "head"), timer in _files(shared, "worker")) == (True, False)
    assert (timer in _files(local, "head"), timer in _files(local, "worker")) == (True, True)
    for role in ("head", "worker"):
        assert "PathChanged=/run/provisioner/checkpoint-now" in _files(shared, role)[reclaim]
        assert _files(shared, role)["/etc/profile.d/provisioner-checkpoint.sh"] == (
            'export PROVISIONER_CHECKPOINT_REMOTE="s3://ckpt-bucket/p"\n'
        )
    assert checkpoint_env(shared)["PROVISIONER_CHECKPOINT_REMOTE"] == "s3://ckpt-bucket/p"
    assert "PROVISIONER_CHECKPOINT_REMOTE" not in checkpoint_env(make_plan(nodes=2))
    assert "rclone" in yaml.safe_load(render_cluster(shared, CANARY)["cloud-init/worker.yaml"])["packages"]
    assert (
        "rclone" not in yaml.safe_load(render_cluster(make_plan(nodes=2), CANARY)["cloud-init/worker.yaml"])["packages"]
    )


@pytest.mark.parametrize("from_node", [None, "old-1"])
def test_a_moved_run_restores_what_was_copied(moto_url: str, tmp_path: Path, from_node: str | None) -> None:
    """issue 30 item 2: the restore a move runs on the new cluster (render.checkpoint_sync.restore_script),
    for real against moto: the store's copy (the shared folder's, or the old node's own) lands in the
    new checkpoint folder; what the new folder already holds stays."""
    from provisioner.render.checkpoint_sync import restore_script

    need_tool("rclone")
    s3 = _s3(moto_url)
    if BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=BUCKET)
    prefix = f"runs/moved-{from_node or 'shared'}"
    under = f"{prefix}/{from_node}" if from_node else prefix
    s3.put_object(Bucket=BUCKET, Key=f"{under}/step-300/model.pt", Body=b"weights-300")
    s3.put_object(Bucket=BUCKET, Key=f"{under}/latest", Body=b"step-300\n")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/other-node/latest", Body=b"not mine\n")
    plan = _plan(moto_url, prefix, shared=from_node is None)
    env_file = tmp_path / "etc/provisioner/checkpoint-remote.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text(_files(plan, "head")["/etc/provisioner/checkpoint-remote.env"])
    dest = tmp_path / "ckpt"
    (dest / "notes.txt").parent.mkdir(parents=True)
    (dest / "notes.txt").write_text("kept\n")
    remote = plan.spec.checkpoint.remote
    assert remote is not None
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RCLONE_CONFIG": str(tmp_path / "no-rclone.conf"),
        "PROVISIONER_ROOT": str(tmp_path),
        **KEYS,
    }
    script = restore_script("/ckpt", remote, from_node=from_node)
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    got = {str(p.relative_to(dest)): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    expected = {"step-300/model.pt": b"weights-300", "latest": b"step-300\n", "notes.txt": b"kept\n"}
    if from_node is None:  # the shared folder's copy is the whole prefix, every node's subfolder included
        expected["other-node/latest"] = b"not mine\n"
    assert got == expected


@pytest.fixture(scope="module")
def gcs_url() -> Iterator[str]:
    """A Google Cloud Storage JSON API on 127.0.0.1 (the gcp-storage-emulator package), in memory."""
    import socket

    from gcp_storage_emulator.server import create_server

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _gcs_objects(url: str, prefix: str) -> dict[str, bytes]:
    import json
    import urllib.parse
    import urllib.request

    listing = f"{url}/storage/v1/b/{BUCKET}/o?prefix={urllib.parse.quote(prefix)}"
    with urllib.request.urlopen(listing, timeout=10) as answer:
        names = [item["name"] for item in json.load(answer).get("items", [])]
    out = {}
    for name in names:
        media = f"{url}/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(name, safe='')}?alt=media"
        with urllib.request.urlopen(media, timeout=10) as answer:
            out[name] = answer.read()
    return out


def test_a_gs_remote_is_copied_and_restored_through_the_storage_json_api(gcs_url: str, tmp_path: Path) -> None:
    """gs:// for real: the rendered env file and copy script (one rclone code path for both schemes)
    against a GCS JSON API on 127.0.0.1, then the move's restore into another folder. The env file gets
    three lines a node never has: the emulator's endpoint, anonymous access, and env_auth off (on a
    node it finds the VM's service account; here it would ask the metadata server, which tests never do)."""
    from provisioner.render.checkpoint_sync import restore_script

    need_tool("rclone")
    plan = make_plan({"checkpoint": {"remote": f"gs://{BUCKET}/runs/gs"}}, nodes=2)
    files = _files(plan, "head")
    env_text = files["/etc/provisioner/checkpoint-remote.env"]
    assert "RCLONE_CONFIG_CKPT_TYPE" in env_text and "google cloud storage" in env_text
    env_file = tmp_path / "etc/provisioner/checkpoint-remote.env"
    env_file.parent.mkdir(parents=True)
    env_file.write_text(
        env_text
        + f"RCLONE_CONFIG_CKPT_ENDPOINT={gcs_url}/storage/v1/\n"
        + "RCLONE_CONFIG_CKPT_ANONYMOUS=true\nRCLONE_CONFIG_CKPT_ENV_AUTH=false\n"
    )
    script = tmp_path / "usr/local/sbin/provisioner-checkpoint-sync"
    script.parent.mkdir(parents=True)
    script.write_text(files["/usr/local/sbin/provisioner-checkpoint-sync"])
    folder = tmp_path / "shared"
    (folder / "step-100").mkdir(parents=True)
    (folder / "step-100" / "model.pt").write_bytes(b"weights-100")
    (folder / "latest").write_text("step-100\n")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RCLONE_CONFIG": str(tmp_path / "no-rclone.conf"),
        "PROVISIONER_ROOT": str(tmp_path),
        "GCE_METADATA_HOST": "127.0.0.1",
        "NO_GCE_CHECK": "True",
    }
    copied = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert copied.returncode == 0, copied.stderr
    assert _gcs_objects(gcs_url, "runs/gs/") == {
        "runs/gs/step-100/model.pt": b"weights-100",
        "runs/gs/latest": b"step-100\n",
    }
    remote = plan.spec.checkpoint.remote
    assert remote is not None
    restore = restore_script("/restored", remote)
    back = subprocess.run(["bash", "-c", restore], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert back.returncode == 0, back.stderr
    dest = tmp_path / "restored"
    assert {str(p.relative_to(dest)): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == {
        "step-100/model.pt": b"weights-100",
        "latest": b"step-100\n",
    }
