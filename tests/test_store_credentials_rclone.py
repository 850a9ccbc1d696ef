"""The copy on a node without credentials of its own, for real: rclone runs the rendered sync script
against moto's S3 server on 127.0.0.1 with IAM authentication on (``INITIAL_NO_AUTH_ACTION_COUNT``:
after the first requests, which make the user, its key and the bucket, every request must be signed
by a key moto issued). The environment holds no ``AWS_*`` variable and the metadata service is off,
so the only credentials rclone can find are those in the file the SSH pass writes
(``credentials_script``, run here under a scratch root): without it the copy fails, with a wrong
secret it is refused (403), with the issued key it lands.

moto runs in its own process: its authentication switch is a process-wide setting.

gs:// the same way: the rendered sync against a Cloud Storage JSON API on 127.0.0.1, the key file the
spec names delivered as ``RCLONE_CONFIG_CKPT_SERVICE_ACCOUNT_CREDENTIALS``; its ``token_uri`` is a
token endpoint here that grants a token only for an assertion signed by that key (the emulator itself
checks no token), with the metadata server a closed port: without the file the copy fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from provisioner.loader import parse_spec
from provisioner.realize.store_credentials import credentials_script, read_store_credentials
from provisioner.render.checkpoint_sync import CREDENTIALS_FILE, ENV_FILE, SYNC_PATH
from tests.conftest import need_tool
from tests.test_checkpoint_sync import BUCKET, _files, _gcs_objects, _plan, gcs_url  # noqa: F401  (a fixture)
from tests.test_render_slurm import make_plan

FREE_ACTIONS = 4
"""Requests moto serves unsigned before it checks keys: the user, its access key, its policy, the bucket."""


@dataclass(frozen=True)
class Store:
    url: str
    key_id: str
    secret: str

    def client(self, key_id: str, secret: str):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id=key_id, aws_secret_access_key=secret
        )


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(FREE_ACTIONS), "AWS_EC2_METADATA_DISABLED": "true"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        root = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        iam = boto3.client("iam", **root)
        iam.create_user(UserName="ckpt")
        key = iam.create_access_key(UserName="ckpt")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="ckpt", PolicyName="s3", PolicyDocument=json.dumps(policy))
        boto3.client("s3", **root).create_bucket(Bucket=BUCKET)
        yield Store(url, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        server.terminate()
        server.wait(timeout=20)


def _node(store: Store, root: Path, prefix: str) -> Path:
    """A node's files under ``root``: the rendered remote and sync script, a checkpoint to copy."""
    plan = _plan(store.url, prefix, shared=True)
    files = _files(plan, "head")
    for path in (ENV_FILE, SYNC_PATH):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[path])
    (root / "shared/step-1").mkdir(parents=True)
    (root / "shared/step-1/model.pt").write_bytes(b"weights-1")
    return root / SYNC_PATH.lstrip("/")


def _deliver(root: Path, key_id: str, secret: str) -> None:
    spec = parse_spec(
        "name: demo\ngpus: {count: 2}\ncheckpoint:\n  remote: s3://ckpt-bucket/x\n"
        "  credentials_env: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]\n"
    )
    found = read_store_credentials(spec.checkpoint, {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret})
    assert found is not None
    env = {"PATH": os.environ["PATH"], "PROVISIONER_ROOT": str(root)}
    done = subprocess.run(["bash", "-c", credentials_script(found)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (root / CREDENTIALS_FILE.lstrip("/")).is_file()


def _sync(script: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env = {  # no AWS_* variable, no metadata service, no rclone config, an empty home
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "RCLONE_CONFIG": str(root / "no-rclone.conf"),
        "PROVISIONER_ROOT": str(root),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)


def _copied(store: Store, prefix: str) -> dict[str, bytes]:
    s3 = store.client(store.key_id, store.secret)
    listing = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing if o["Size"]}


@pytest.mark.parametrize("case", ["no file", "wrong secret", "delivered"])
def test_the_sync_copies_with_the_delivered_keys_only(store: Store, tmp_path: Path, case: str) -> None:
    need_tool("rclone")
    prefix = f"runs/{case.replace(' ', '-')}"
    script = _node(store, tmp_path, prefix)
    if case == "wrong secret":
        _deliver(tmp_path, store.key_id, store.secret[::-1])
    elif case == "delivered":
        _deliver(tmp_path, store.key_id, store.secret)
    result = _sync(script, tmp_path)
    if case == "delivered":
        assert result.returncode == 0, result.stderr
        assert _copied(store, prefix) == {f"{prefix}/step-1/model.pt": b"weights-1"}
    else:
        assert result.returncode != 0
        assert ("403" in result.stderr) == (case == "wrong secret"), result.stderr
        assert _copied(store, prefix) == {}


def test_an_unissued_key_is_refused(store: Store) -> None:
    """The oracle can fail: once its free requests are spent, moto refuses a key it never issued."""
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="InvalidAccessKeyId"):
        store.client("AKIANOTISSUED0000000", "x").list_objects_v2(Bucket=BUCKET)
    assert store.client(store.key_id, store.secret).list_objects_v2(Bucket=BUCKET)["Name"] == BUCKET


# ----- gs:// with a service-account key: a token endpoint on 127.0.0.1 that checks the key's signature -----
@dataclass
class TokenEndpoint:
    """The OAuth token endpoint a service-account key names (``token_uri``): it answers a JWT-bearer
    grant only when the assertion is signed by ``key`` and keeps each verified assertion's claims."""

    url: str
    key: Any
    granted: list[dict[str, Any]]


@pytest.fixture
def token_endpoint() -> Iterator[TokenEndpoint]:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    granted: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            claims = _verified(key, form.get("assertion", [""])[0])
            if claims is None:
                self.send_response(400)
                self.end_headers()
                return
            granted.append(claims)
            body = json.dumps({"access_token": "token-1", "expires_in": 3600, "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield TokenEndpoint(f"http://127.0.0.1:{server.server_port}/token", key, granted)
    server.shutdown()
    server.server_close()


def _verified(key: Any, assertion: str) -> dict[str, Any] | None:
    import base64

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def raw(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    try:
        head, payload, signature = assertion.split(".")
        key.public_key().verify(raw(signature), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    except (ValueError, InvalidSignature):
        return None
    claims: dict[str, Any] = json.loads(raw(payload))
    return claims


@pytest.mark.parametrize("delivered", [False, True])
def test_a_gs_store_is_reached_with_the_delivered_service_account_key(
    gcs_url: str,  # noqa: F811  (the fixture)
    token_endpoint: TokenEndpoint,
    tmp_path: Path,
    delivered: bool,
) -> None:
    from cryptography.hazmat.primitives import serialization

    need_tool("rclone")
    email = "ckpt-writer@p.iam.gserviceaccount.com"
    pem = token_endpoint.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key_file = tmp_path / "here/sa.json"
    key_file.parent.mkdir()
    key_file.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": email,
                "client_id": "1",
                "token_uri": token_endpoint.url,
            }
        )
    )
    prefix = f"runs/gs-{delivered}"
    plan = make_plan({"checkpoint": {"remote": f"gs://{BUCKET}/{prefix}", "credentials_file": str(key_file)}}, nodes=2)
    root = tmp_path / "node"
    files = _files(plan, "head")
    env_file = root / ENV_FILE.lstrip("/")
    env_file.parent.mkdir(parents=True)
    env_file.write_text(files[ENV_FILE] + f"RCLONE_CONFIG_CKPT_ENDPOINT={gcs_url}/storage/v1/\n")  # the emulator
    script = root / SYNC_PATH.lstrip("/")
    script.parent.mkdir(parents=True)
    script.write_text(files[SYNC_PATH])
    (root / "shared").mkdir()
    (root / "shared/model.pt").write_bytes(b"weights-gs")
    if delivered:
        found = read_store_credentials(plan.spec.checkpoint, {})
        assert found is not None
        env = {"PATH": os.environ["PATH"], "PROVISIONER_ROOT": str(root)}
        assert subprocess.run(["bash", "-c", credentials_script(found)], env=env, check=False).returncode == 0
    env = {  # the metadata server is a closed port: no credentials but the delivered key
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "RCLONE_CONFIG": str(root / "no-rclone.conf"),
        "PROVISIONER_ROOT": str(root),
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "NO_GCE_CHECK": "True",
    }
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)
    if delivered:
        assert result.returncode == 0, result.stderr
        assert _gcs_objects(gcs_url, f"{prefix}/") == {f"{prefix}/model.pt": b"weights-gs"}
        assert token_endpoint.granted and {claims["iss"] for claims in token_endpoint.granted} == {email}
    else:
        assert result.returncode != 0
        assert _gcs_objects(gcs_url, f"{prefix}/") == {} and token_endpoint.granted == []
