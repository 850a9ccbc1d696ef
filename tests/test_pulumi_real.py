"""The engine matrix on the real Pulumi engine (issue 25 item 2), through the installed CLI.

For each neocloud (Lambda, RunPod, Vast.ai, Fluence; their fakes on 127.0.0.1) one full cycle on a
machine of its own (``tests.pulumi_lab.Machine``: state dir, PULUMI_HOME and file backend in the
test's tmp dir), sharing the cycle across its checks:

1. ``provisioner up PLAN --json`` with no ``--engine``: the default is pulumi (the CLI is on PATH),
   the real engine runs the inline program, the dynamic providers buy the plan's nodes, the stack's
   SSH pass and ``up``'s readiness wait reach them through the recording stand-in;
2. ``status``, ``outputs`` and ``ssh --print`` name the nodes the fake sold;
3. a second ``up`` changes nothing (pulumi's own summary), and a hand-run ``pulumi preview
   --expect-no-changes`` in the workspace ``up`` kept agrees;
4. a node deleted at the provider: ``pulumi refresh`` records it gone, the next ``up`` buys it again
   (same name, new id) and the SSH pass runs on it;
5. ``down``: zero instances at the fake, no stack in the backend, no record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.plan import Plan, save_plan
from provisioner.providers import registry
from tests.pulumi_lab import OWNER, Machine, engine_dir, plan_of, wait_for
from tests.test_lifecycle_support import API_KEYS, served_fake

NEOCLOUDS = ("lambda", "runpod", "vastai", "fluence")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture
def engine() -> Path:
    return engine_dir()


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    made: list[Machine] = []
    yield made
    for machine in made:
        machine.close()


def machine_for(name: str, plan: Plan, folder: Path, engine: Path, url: str, made: list[Machine]) -> Machine:
    """A user's machine running ``plan`` against ``name``'s fake at ``url`` (the key the fake accepts)."""
    prefix = f"PROVISIONER_{name.upper()}"
    machine = Machine(
        folder=folder,
        bin_dir=engine,
        fake_env={f"{prefix}_API_URL": url, f"{prefix}_API_KEY": os.environ[f"{prefix}_API_KEY"]},
        nodes=[node.name for node in plan.nodes],
    )
    made.append(machine)
    return machine


def changes(text: str) -> str:
    """Pulumi's ``Resources:`` summary of an update's output, one line."""
    tail = text.rsplit("Resources:", 1)[-1]
    return " ".join(line.strip() for line in tail.splitlines()[:4] if line.strip() and "Duration" not in line)


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_the_real_engine_up_look_no_change_refresh_replace_down(
    name: str, engine: Path, machines: list[Machine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")
    plan = plan_of(name, tmp_path)
    plan_file = tmp_path / "plan.json"
    save_plan(plan, plan_file)
    names = [node.name for node in plan.nodes]
    with served_fake(name, monkeypatch) as (app, server):
        user = machine_for(name, plan, tmp_path / "alice", engine, server.url, machines)
        first = user.cli("up", str(plan_file), "--json")
        assert first.code == 0, first.err[-4000:]
        events = first.events()
        assert events[0]["event"] == "engine" and events[0]["engine"] == "pulumi"
        assert "the pulumi CLI is on PATH" in events[0]["message"]
        assert events[-1]["event"] == "up"
        assert app.instance_count() == len(names)
        cluster = plan.cluster_id
        bootstrapped = sorted({note["node"] for note in user.ssh_notes() if "bootstrap" in note})
        assert bootstrapped == sorted(names)  # the stack's SSH pass, inside pulumi up

        # 2. status / outputs / ssh
        status = user.cli("status", cluster, "--json", backend=False)
        assert status.code == 0, status.err
        live = json.loads(status.out)["live"]
        assert sorted((n["name"], n["status"]) for n in live) == [(n, "running") for n in sorted(names)]
        ids = {n["name"]: n["id"] for n in live}
        outputs = user.cli("outputs", cluster, "--json")
        assert outputs.code == 0, outputs.err
        doc = json.loads(outputs.out)
        assert [n["name"] for n in doc["nodes"]] == names and doc["hourly_usd"] == str(plan.option.hourly_usd)
        head = next(n for n in live if n["name"] == names[0])
        ssh = user.cli("ssh", cluster, "--print", backend=False)
        assert ssh.code == 0 and head["public_ip"] in ssh.out, ssh.err

        # 3. a second up changes nothing; pulumi preview --expect-no-changes agrees
        second = user.cli("up", str(plan_file), "--json")
        assert second.code == 0, second.err[-4000:]
        said = "\n".join(e["message"] for e in second.events() if e["event"] == "pulumi-output")
        assert "unchanged" in changes(said) and "create" not in changes(said) and "update" not in changes(said), said
        preview = user.pulumi("preview", "--expect-no-changes", "--stack", cluster)
        assert preview.code == 0, preview.out[-3000:] + preview.err[-3000:]
        assert app.instance_count() == len(names)

        # 4. a node deleted at the provider: refresh sees it, the next up buys it again
        gone = names[-1]
        # As in the provider's console, by the account that bought it: Fluence tells a cluster's
        # nodes by a name mark that hashes the owner, and this test process is not alice.
        monkeypatch.setenv("PROVISIONER_OWNER", OWNER)
        registry.get_provider(name).delete_nodes(cluster, [ids[gone]])
        wait_for(lambda: app.instance_count() == len(names) - 1, 60, f"{gone} to go")
        refresh = user.pulumi("refresh", "--yes", "--stack", cluster)
        assert refresh.code == 0, refresh.out[-3000:] + refresh.err[-3000:]
        # the one node gone: the resource reads as gone; one of two: it reads with one node less
        assert changes(refresh.out).startswith("- 1 deleted" if len(names) == 1 else "~ 1 updated"), refresh.out
        third = user.cli("up", str(plan_file), "--json")
        assert third.code == 0, third.err[-4000:]
        after = json.loads(user.cli("status", cluster, "--json", backend=False).out)["live"]
        running = {n["name"]: n["id"] for n in after if n["status"] == "running"}
        assert sorted(running) == sorted(names) and running[gone] != ids[gone]
        assert all(running[n] == ids[n] for n in names if n != gone)  # the others kept, not replaced
        assert app.instance_count() == len(names)

        # 5. down: nothing at the provider, no stack, no record
        down = user.cli("down", cluster, "--json")
        assert down.code == 0, down.err[-4000:]
        assert app.instance_count() == 0
        stacks = user.pulumi("stack", "ls", "--json", "--all")
        assert stacks.code == 0 and json.loads(stacks.out or "[]") == [], stacks.out + stacks.err
        assert not (user.state / "clusters" / f"{cluster}.json").exists()
