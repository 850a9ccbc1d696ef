"""Team state on a distributed backend under the real Pulumi engine (issue 25 item 5).

moto's S3 server on 127.0.0.1 holds one bucket; two state dirs (``tests.pulumi_lab.Machine``)
stand for two teammates' machines, each with its own record, secrets, PULUMI_HOME and workspace,
sharing the bucket (``--backend s3://...?endpoint=...``) and the stack passphrase, with owners of
their own. One cycle, its checks in order:

1. alice's ``up`` holds the stack lock in the bucket: bob's ``up`` meanwhile is refused in one line
   naming the lock (user, host, pid) and how to wait or cancel;
2. once it is up, bob's ``status``, ``outputs`` (from the stack) and ``down`` (through the stack:
   the nodes are deleted for the stack's owner, alice) work; no instance, no stack in the bucket;
3. alice's machine dies (every process SIGKILLed) once her engine bought both nodes and waits for
   them to run: bob's ``down`` clears the lock her dead engine left (same host here, so its pid is
   known to be gone; another host's lock is refused, tests/test_stack_lock.py) and the pending
   create, and deletes the nodes it made but never recorded, for their owner (alice).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from provisioner.plan import save_plan
from tests.pulumi_lab import Machine, crash, engine_dir, plan_of
from tests.test_lifecycle_support import served_fake

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
BUCKET = "team-pulumi-state"


@pytest.fixture
def engine() -> Path:
    return engine_dir()


@pytest.fixture
def bucket() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with one bucket; the backend URL the team points at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        _host, port = server.get_host_and_port()
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}?endpoint={endpoint}&region=us-east-1&use_path_style=true&disable_https=true"
    finally:
        server.stop()


def objects(url: str) -> list[str]:
    endpoint = url.split("endpoint=", 1)[1].split("&", 1)[0]
    listed = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").list_objects_v2(Bucket=BUCKET)
    return sorted(o["Key"] for o in listed.get("Contents") or [])


def stack_left(url: str) -> list[str]:
    """The stack's state and locks in the bucket (pulumi keeps its backups after ``stack rm``)."""
    return [k for k in objects(url) if k == ".pulumi/stacks/provisioner/lc-lambda.json" or "/locks/" in k]


def test_two_machines_share_one_stack_in_s3(
    engine: Path, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of("lambda", tmp_path)
    plan_file = tmp_path / "plan.json"
    save_plan(plan, plan_file)
    names = [n.name for n in plan.nodes]
    made: list[Machine] = []
    try:
        with served_fake("lambda", monkeypatch) as (app, server):
            fake = {
                "PROVISIONER_LAMBDA_API_URL": server.url,
                "PROVISIONER_LAMBDA_API_KEY": os.environ["PROVISIONER_LAMBDA_API_KEY"],
            }
            alice = Machine(
                tmp_path / "alice", engine, fake, backend=bucket, nodes=names, extra={"PROVISIONER_OWNER": "alice"}
            )
            bob = Machine(
                tmp_path / "bob", engine, fake, backend=bucket, nodes=names, extra={"PROVISIONER_OWNER": "bob"}
            )
            made += [alice, bob]

            # 1. alice's up holds the lock bob's up meets
            app.latency_s = {"launch": 900.0}  # held until bob has been refused
            app.sleep = (release := threading.Event()).wait
            first = alice.start("up", str(plan_file), "--json")
            assert app.wait_for(lambda a: a.requests_in_flight.get("launch", 0) > 0, 600)
            refused = bob.cli("up", str(plan_file))
            line = refused.err.strip().splitlines()[-1]  # after up's progress lines: the error, one line
            assert refused.code == 5 and line.startswith("error: stack lc-lambda is locked by "), refused.err
            assert "held pending operations" not in refused.err  # alice's engine is alive: nothing to clear
            # bob's refused up made nothing and keeps no record of its own (its run id would hide alice's nodes)
            assert not (bob.state / "clusters" / "lc-lambda.json").exists()
            assert "wait for it to end" in line and "pulumi cancel --yes --stack lc-lambda" in line, line
            assert bucket in line, line  # where to cancel: the team's backend
            app.latency_s = {}
            release.set()
            _out, err = first.communicate(timeout=900)
            assert first.returncode == 0, err[-3000:]
            assert app.instance_count() == 2
            assert any(key.startswith(".pulumi/stacks/provisioner/lc-lambda") for key in objects(bucket)), objects(
                bucket
            )

            # 2. bob looks and tears down from his machine
            status = bob.cli("status", "lc-lambda", "--json")
            assert status.code == 0, status.err[-3000:]
            live = json.loads(status.out)["live"]
            assert sorted((n["name"], n["status"]) for n in live) == [(n, "running") for n in names]
            outputs = bob.cli("outputs", "lc-lambda", "--json")
            assert outputs.code == 0 and [n["name"] for n in json.loads(outputs.out)["nodes"]] == names, outputs.err
            down = bob.cli("down", "lc-lambda")
            assert down.code == 0, down.err[-3000:]
            assert app.instance_count() == 0
            assert not stack_left(bucket), objects(bucket)

            # 3. alice's machine dies mid-create; bob cleans up
            bought = app.launched
            again = alice.start("up", str(plan_file), "--json")
            assert app.wait_for(lambda a: a.launched == bought + 2, 600)  # both bought: she dies
            crash(alice)
            again.wait(timeout=60)
            assert app.instance_count() == 2  # what her engine bought
            assert any("/locks/" in key for key in objects(bucket)), objects(bucket)  # and the lock it left
            cleaned = bob.cli("down", "lc-lambda")
            assert cleaned.code == 0, cleaned.err[-3000:]
            assert app.instance_count() == 0
            assert not stack_left(bucket), objects(bucket)
    finally:
        for machine in made:
            crash(machine)
            machine.close()
