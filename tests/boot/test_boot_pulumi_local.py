"""The real Pulumi engine on booted nodes (issue 25 items 1-3): the CLI ``.ci/build-pulumi`` built, its
stack's SSH pass (``ClusterTopology``) run against systemd-nspawn nodes behind a node-backed fake.

- ``provisioner up SPEC --local --engine pulumi`` as a user runs it (the installed CLI, root, a HOME
  of its own, the bundled catalog, the built ``pulumi`` on PATH, no passphrase set: the engine makes
  one in the state dir): one Lambda VM with Slurm in the cluster's lab. ``status`` and ``ssh`` answer
  through the lab, ``srun`` runs (munge works), the node's munge key is the cluster's while its boot
  data never held it (it came over the stack's SSH pass), ``pulumi stack export`` and every file of
  the backend and workspace hold no cluster secret in the clear, raw or base64, while the stack holds
  them as Pulumi secrets (ciphertext; ``--show-secrets`` decrypts them). The lab is then killed (its
  node goes, the stack still records it): ``up`` again forgets that stack and buys the node in a new
  lab; ``down`` destroys the stack, removes it and stops the lab.
- docs/stacks.md's hand-run (``pulumi login``, ``stack init dev``, ``config set provisioner:spec``,
  ``up``) on Fluence, whose VMs take no user data: the whole bootstrap comes over the SSH pass, so the
  hand-run works only where the machine running ``pulumi up`` reaches the node. Here the commands
  run inside the test namespace (``ip netns exec``) of the Fluence fake whose VMs are booted nodes
  (tests/boot/cli_lab.py); the node runs Slurm with the cluster's munge key, the canary holds, and
  ``pulumi destroy`` leaves no instance and no node running. (Against the plain fake, whose nodes
  hold documentation addresses, it stops at the SSH pass: tests/test_pulumi_real_handrun.py.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.boot.cli_lab import catalog, spec, user_lab
from tests.boot.test_boot_local import User, _a_user
from tests.pulumi_real import STACKS, engine_env, need_pulumi_engine
from tests.test_pulumi_real_handrun import in_the_clear

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(900)]

CLUSTER = "pl-local"
SPEC = f"""\
name: {CLUSTER}
gpus: {{model: [A100], count: 1}}
nodes: {{count: 1}}
control_plane: slurm
providers: {{allow: [lambda]}}
workload: {{hours: 1}}
storage: {{checkpoint_nvme_gib_per_node: 0, shared: {{kind: none}}}}
"""
SECRET_FIELDS = ("ssh_private_key", "munge_key_b64", "k3s_token")


def needles(secrets: dict[str, str]) -> dict[str, str]:
    """Each secret (a private key line by line, its armour lines left out) as a string to search for."""
    found = {}
    for key in SECRET_FIELDS:
        lines = [line for line in secrets[key].splitlines() if len(line) >= 16 and "PRIVATE KEY" not in line]
        for i, line in enumerate(lines or [secrets[key]]):
            found[f"{key}[{i}]"] = line
    return found


def files_under(*folders: Path) -> dict[str, str]:
    return {
        str(path): path.read_text(errors="replace")
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def munge_sha256(secrets: dict[str, str]) -> str:
    return hashlib.sha256(base64.b64decode(secrets["munge_key_b64"])).hexdigest()


@contextmanager
def pulumi_user(node_image: Path) -> Iterator[User]:
    """A user of tests/boot/test_boot_local.py with the built ``pulumi`` CLI on PATH."""
    bin_dir = need_pulumi_engine()
    with _a_user(node_image) as you:
        you.env["PATH"] = f"{bin_dir}:{you.env['PATH']}"
        you.env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
        you.env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"  # nothing but the lab is reached
        yield you


def test_up_local_on_the_pulumi_engine_pushes_the_secrets_over_ssh_and_keeps_them_encrypted(node_image: Path) -> None:
    with pulumi_user(node_image) as user:
        (user.home / "spec.yaml").write_text(SPEC)
        started = time.monotonic()
        up = user.run("up", "spec.yaml", "--local", "--engine", "pulumi")
        up_s = time.monotonic() - started
        assert up.returncode == 0, up.stdout + up.stderr + user.lab_log(CLUSTER)[-3000:]
        assert up.stderr.splitlines()[0] == "engine: pulumi (--local --engine pulumi)", up.stderr
        assert f"ClusterTopology {CLUSTER}-topology created" in up.stderr, up.stderr  # the stack's SSH pass ran
        assert f"cluster {CLUSTER} is up: ssh ml@10.80.0." in up.stderr, up.stderr
        lab = user.lab(CLUSTER)
        assert lab["provider"] == "lambda"

        status = user.run("status", CLUSTER, timeout=180)
        assert status.returncode == 0, status.stdout + status.stderr
        first = status.stdout.splitlines()[0]
        assert "local dry run" in first and "up on lambda (pulumi)" in first, status.stdout
        assert f"{CLUSTER}-0  running  10.80.0." in status.stdout, status.stdout
        srun = user.run("ssh", CLUSTER, "--", "srun", "-N1", "--immediate=60", "hostname", timeout=180)
        assert (srun.returncode, srun.stdout) == (0, f"{CLUSTER}-0\n"), srun.stdout + srun.stderr

        state = user.home / ".local" / "state" / "gpu-provisioner"
        secrets = json.loads((state / "clusters" / f"{CLUSTER}.secrets.json").read_text())
        # The node got the cluster's munge key; the boot data it was launched with never held it.
        on_node = user.on(CLUSTER, f"{CLUSTER}-0", "sudo", "sha256sum", "/etc/munge/munge.key")
        assert on_node.split()[0] == munge_sha256(secrets)
        boot_data = user.on(CLUSTER, f"{CLUSTER}-0", "sudo", "sh", "-c", "cat /var/lib/cloud/instance/*.txt")
        assert "#cloud-config" in boot_data and CLUSTER in boot_data
        assert in_the_clear({"the node's boot data": boot_data}, needles(secrets)) == []

        # The state: nothing in the clear, and the secrets there as Pulumi secrets.
        backend = state / "pulumi"
        env = {
            **user.env,
            "PULUMI_BACKEND_URL": f"file://{backend}",
            "PULUMI_CONFIG_PASSPHRASE": (backend / "passphrase").read_text().strip(),
        }

        def pulumi(*args: str) -> str:
            done = subprocess.run(
                ["pulumi", *args, "--stack", CLUSTER, "--non-interactive"],
                cwd=backend / "work",
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        exported = pulumi("stack", "export")
        texts = {"pulumi stack export": exported, "up's output": up.stdout + up.stderr}
        texts |= files_under(backend, state / "local")
        assert any(where.endswith(f"stacks/provisioner/{CLUSTER}.json") for where in texts), sorted(texts)
        assert in_the_clear(texts, needles(secrets)) == []
        (step,) = [r for r in json.loads(exported)["deployment"]["resources"] if r["type"].endswith(":ClusterTopology")]
        assert set(step["inputs"]["secrets"]) == {"4dabf18193072939515e22adb298388d", "ciphertext"}, step["inputs"]
        assert secrets["munge_key_b64"] in pulumi("stack", "export", "--show-secrets")  # decrypts with the passphrase

        # The lab dies (killed, or this machine restarted): its node goes with it, the stack still
        # records it. The next up forgets that stack, starts a new lab and buys the node again.
        os.kill(lab["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 120
        while Path(f"/proc/{lab['pid']}").exists() and time.monotonic() < deadline:
            time.sleep(1)
        again = user.run("up", "spec.yaml", "--local", "--engine", "pulumi")
        assert again.returncode == 0, again.stdout + again.stderr + user.lab_log(CLUSTER)[-3000:]
        assert f"local: forgot the stack of {CLUSTER}'s earlier lab" in again.stderr, again.stderr
        assert user.lab(CLUSTER)["pid"] != lab["pid"] and f"NeocloudNodes {CLUSTER}-nodes created" in again.stderr
        srun = user.run("ssh", CLUSTER, "--", "srun", "-N1", "--immediate=60", "hostname", timeout=180)
        assert (srun.returncode, srun.stdout) == (0, f"{CLUSTER}-0\n"), srun.stdout + srun.stderr

        down_s = user.down(CLUSTER)  # the lab's record, process, namespace and nodes' folder are gone
        assert not (state / "clusters" / f"{CLUSTER}.json").exists()  # the cluster's record
        assert not (backend / ".pulumi" / "stacks" / "provisioner" / f"{CLUSTER}.json").exists()  # its stack
    print(
        f"up --local --engine pulumi (1 Lambda VM, Slurm): up {up_s:.0f} s (lab start, pulumi up, Slurm ready), "
        f"down {down_s:.0f} s"
    )


def test_the_documented_hand_run_on_fluence_bootstraps_a_booted_vm_over_ssh(
    node_image: Path, host_resources: tuple[int, int]
) -> None:
    bin_dir = need_pulumi_engine()
    with user_lab("fluence", node_image, host_resources, nodes=1) as (user, fake, machines):
        work = user.home / "work"
        (work / "stacks").mkdir(parents=True)
        (work / "examples").mkdir()
        for file in ("Pulumi.yaml", "__main__.py"):
            shutil.copy(STACKS / file, work / "stacks" / file)
        (work / "examples" / "hand-fluence.yaml").write_text(spec("fluence", nodes=1))
        (user.home / "cache").mkdir()  # the refreshed-catalog cache: the fake's offer, this host's size
        (user.home / "cache" / "catalog.json").write_text(json.dumps(catalog("fluence", *host_resources)))
        env = engine_env(bin_dir, user.home / ".pulumi", "", base=user.env)
        env.pop("PULUMI_BACKEND_URL")  # `pulumi login` chooses the backend, as for a user
        env |= {
            "PROVISIONER_CACHE_DIR": str(user.home / "cache"),
            "PROVISIONER_STATE_DIR": str(user.home / "state"),
            "PROVISIONER_OWNER": "handrun-test",
        }
        backend = user.home / "backend"
        backend.mkdir()

        def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
            # inside the namespace where the fake listens and the node's bridge is (ip netns exec: same pid)
            return subprocess.run(
                ["ip", "netns", "exec", user.netns.name, str(bin_dir / "pulumi"), *args, "--non-interactive"],
                cwd=work / "stacks",
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )

        started = time.monotonic()
        for args in (
            ("login", f"file://{backend}"),  # for --local: see tests/test_pulumi_real_handrun.py
            ("stack", "init", "dev"),
            ("config", "set", "provisioner:spec", "../examples/hand-fluence.yaml"),
            ("up", "--yes"),
        ):
            done = pulumi(*args)
            assert done.returncode == 0, f"pulumi {' '.join(args)}: {done.stdout[-4000:]}{done.stderr[-3000:]}"
        up_s = time.monotonic() - started
        outputs = json.loads(pulumi("stack", "output", "--json").stdout)
        assert outputs["provider"] == "fluence" and [n["name"] for n in outputs["nodes"]] == ["cli-boot-0"]
        assert outputs["head_address"] in machines.addresses.values() and fake.instance_count() == 1

        (machine,) = machines.nodes.values()
        kept = json.loads((work / "stacks" / ".provisioner" / "dev" / ".cluster-secrets.json").read_text())
        assert machine.exec("sha256sum", "/etc/munge/munge.key").stdout.split()[0] == munge_sha256(kept)
        node = machine.exec("sinfo", "-h", "-N", "-o", "%N %T", timeout=60)
        assert node.stdout.split() == ["cli-boot-0", "idle"], node.stdout + node.stderr
        srun = machine.exec("srun", "-N1", "--immediate=60", "hostname", timeout=120)
        assert srun.stdout == "cli-boot-0\n", srun.stdout + srun.stderr
        log = machine.exec("cat", "/var/log/provisioner/bootstrap.log").stdout
        assert log.count("provisioner-bootstrap: head node of ") == 1, log  # one run: the SSH pass's

        texts = {"pulumi stack export": pulumi("stack", "export").stdout}
        texts |= files_under(backend) | {"Pulumi.dev.yaml": (work / "stacks" / "Pulumi.dev.yaml").read_text()}
        assert any(where.endswith("dev.json") for where in texts), sorted(texts)
        assert in_the_clear(texts, needles(kept) | {"api key": user.env["PROVISIONER_FLUENCE_API_KEY"]}) == []

        started = time.monotonic()
        done = pulumi("destroy", "--yes")
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr
        destroy_s = time.monotonic() - started
        assert fake.instance_count() == 0
        machines.settle()
        assert machines.running() == []
        assert pulumi("stack", "rm", "--yes", "dev").returncode == 0
        assert fake.validation_errors == []
    print(
        f"hand-run pulumi up on Fluence (1 booted VM, bootstrap over SSH): up {up_s:.0f} s, destroy {destroy_s:.0f} s"
    )
