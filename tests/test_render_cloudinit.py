"""cloud-init rendering: schema-valid user data per role, NVMe RAID logic, NCCL env, secrets."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from provisioner.errors import ProvisionerError, SpecError
from provisioner.loader import parse_spec
from provisioner.render import RenderedCluster, render_cluster, write_rendered
from provisioner.render.cloudinit import nvme_script, render_cloudinit
from provisioner.render.fabric import fabric_profile, nccl_env
from provisioner.render.views import cluster_view
from provisioner.secrets import ClusterSecrets
from provisioner.spec import SharedFsKind
from tests.conftest import need_tool
from tests.test_render_slurm import CANARY, make_offer, make_plan

MUNGE = CANARY.munge_key_b64.get_secret_value()
TOKEN = CANARY.k3s_token.get_secret_value()

# Hand-built plans covering what the examples may not: every control plane, every shared-FS
# kind on the providers with managed filesystems, no TTL, no SSH key, single node.
VARIANTS = {
    "aws-efa-slurm-nfs": make_plan(nodes=3),
    "aws-slurm-managed-dbd": make_plan({"storage": {"shared": {"kind": "managed", "size_gib": 1200}}}, nodes=2),
    # checkpoint.remote (issue 30): a shared folder copied by the head to an S3-compatible store; and
    # per-node folders (no shared filesystem) each copied to its own subfolder of a GCS bucket.
    "aws-slurm-nfs-ckpt-s3": make_plan(
        {
            "checkpoint": {
                "remote": "s3://ckpt-bucket/runs/llm",
                "endpoint_url": "http://127.0.0.1:9000",
                "region": "eu-north-1",  # rclone's region (RCLONE_CONFIG_CKPT_REGION)
            }
        },
        nodes=2,
    ),
    "gcp-none-ckpt-gs": make_plan(
        # a gs:// bucket's region prices a move but is not rclone's to know: nothing rendered for it
        {
            "control_plane": "none",
            "storage": {},
            "checkpoint": {"remote": "gs://ckpt-bucket/runs", "region": "us-central1"},
        },
        nodes=2,
        provider="gcp",
        instance_type="a3-highgpu-8g",
        region="us-central1",
        fabric="ethernet",
    ),
    "gcp-tcpxo-k8s-managed": make_plan(
        {"control_plane": "kubernetes", "storage": {"shared": {"kind": "managed", "size_gib": 1024}}},
        nodes=3,
        provider="gcp",
        instance_type="a3-megagpu-8g",
        region="us-central1",
        fabric="ethernet",
    ),
    "lambda-ib-none-managed": make_plan(
        {
            "control_plane": "none",
            "storage": {"shared": {"kind": "managed", "size_gib": 100}},
            "lifetime": {},
            "access": {},
        },
        nodes=2,
        provider="lambda",
        instance_type="gpu_8x_h100_sxm5",
        fabric="infiniband",
    ),
    "vast-single-node-k8s": make_plan(
        {"control_plane": "kubernetes", "storage": {}},
        nodes=1,
        provider="vastai",
        instance_type="1x_RTX4090",
        gpus=1,
        gpu_model="RTX4090",
        fabric="ethernet",
        local_nvme_gib=0,
    ),
}


def readable(text: str) -> str:
    """``text`` plus the decoded file contents a bootstrap script embeds in base64 heredocs."""
    blocks = re.findall(r"<<'PROVISIONER_B64'\n(.*?)\nPROVISIONER_B64\n", text, re.S)
    return "\n".join([text, *(base64.b64decode(block).decode("utf-8", "replace") for block in blocks)])


def _render(name: str, *, boot_secrets: bool = False) -> RenderedCluster:
    return render_cluster(VARIANTS[name], CANARY, slurmdbd=name.endswith("-dbd"), boot_secrets=boot_secrets)


def _cloud_inits() -> list[tuple[str, str]]:
    return [(name, path) for name in VARIANTS for path in _render(name) if path.startswith("cloud-init/")]


@pytest.mark.system
@pytest.mark.parametrize(("variant", "path"), _cloud_inits())
def test_cloud_init_schema_valid(variant: str, path: str, tmp_path: Path) -> None:
    need_tool("cloud-init")
    target = tmp_path / "user-data.yaml"
    target.write_text(_render(variant)[path])
    result = subprocess.run(["cloud-init", "schema", "-c", str(target)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid cloud-config" in result.stdout
    assert "deprecat" not in (result.stdout + result.stderr).lower()


def _doc(variant: str, role: str, *, full: bool = False) -> dict:
    """The role's cloud-config: as user data, or (``full``) the whole document the SSH pass runs."""
    text = _render(variant, boot_secrets=full)[f"cloud-init/{role}.yaml"]
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text)


def _file(doc: dict, path: str) -> dict:
    matches = [entry for entry in doc["write_files"] if entry["path"] == path]
    assert len(matches) == 1, path
    return matches[0]


def test_roles_and_files_per_node_count() -> None:
    assert sorted(p for p in _render("aws-efa-slurm-nfs") if p.startswith("cloud-init/")) == [
        "cloud-init/head.yaml",
        "cloud-init/worker.yaml",
    ]
    assert [p for p in _render("vast-single-node-k8s") if p.startswith("cloud-init/")] == ["cloud-init/head.yaml"]
    with pytest.raises(ValueError, match="unknown role"):
        render_cloudinit(cluster_view(VARIANTS["aws-efa-slurm-nfs"]), "login", CANARY)


def test_users_ssh_key_and_nccl_env_files() -> None:
    doc = _doc("aws-efa-slurm-nfs", "worker")
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example"
    assert doc["ssh_authorized_keys"] == [key]
    ml = next(u for u in doc["users"] if isinstance(u, dict))
    assert ml["name"] == "ml" and ml["ssh_authorized_keys"] == [key] and ml["uid"] == 2000
    profile = _file(doc, "/etc/profile.d/provisioner-nccl.sh")["content"]
    assert 'export FI_PROVIDER="efa"' in profile and 'export FI_EFA_USE_DEVICE_RDMA="1"' in profile
    env_lines = _file(doc, "/etc/provisioner/nccl.env")["content"].splitlines()[1:]
    assert "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib" in env_lines
    assert not any("$" in line for line in env_lines)
    assert "users" in _doc("lambda-ib-none-managed", "head")
    assert "ssh_authorized_keys" not in _doc("lambda-ib-none-managed", "head")


@pytest.mark.parametrize("key", ["ssh-ed25519 AAAAC3Nza user: laptop", 'ssh-ed25519 AAAAC3Nza me #1 "x"'])
def test_ssh_key_comment_survives_yaml(key: str, tmp_path: Path) -> None:
    text = render_cluster(make_plan({"access": {"ssh_public_key": key}}, nodes=1), CANARY)["cloud-init/head.yaml"]
    doc = yaml.safe_load(text)
    assert doc["ssh_authorized_keys"] == [key]
    assert next(u for u in doc["users"] if isinstance(u, dict))["ssh_authorized_keys"] == [key]


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"access": {"ssh_public_key": "ssh-ed25519 AAAA x\nruncmd: [reboot]"}}, "access.ssh_public_key"),
        ({"storage": {"checkpoint_path": "ckpt"}}, "storage.checkpoint_path"),
        ({"storage": {"checkpoint_path": "/mnt/my ckpt"}}, "storage.checkpoint_path"),
        ({"storage": {"checkpoint_path": "/"}}, "storage.checkpoint_path"),
        ({"storage": {"checkpoint_path": "/mnt/../etc"}}, "storage.checkpoint_path"),
        (
            {"storage": {"shared": {"kind": SharedFsKind.NFS, "size_gib": 10, "mount_path": "/x'; reboot; '"}}},
            "storage.shared.mount_path",
        ),
    ],
)
def test_unsafe_spec_strings_are_located_spec_errors(spec: dict, where: str) -> None:
    # The loader refuses them with a line number...
    with pytest.raises(SpecError) as caught:
        parse_spec(json.dumps({"name": "unsafe", "gpus": {"count": 8}, **spec}, indent=1), "u.yaml")
    assert caught.value.path == where and caught.value.line > 1
    # ...and a hand-edited plan file, which skips the loader, is refused when rendered.
    plan = make_plan({}, nodes=2)
    tampered = plan.model_copy(update={"spec": _tamper(plan.spec, spec)})
    with pytest.raises(SpecError) as caught:
        render_cluster(tampered, CANARY)
    assert caught.value.path == where
    assert str(caught.value).count("\n") == 0


def _tamper(model: BaseModel, changes: dict) -> BaseModel:
    """``model`` with nested fields replaced, without validation (as a hand-edited plan would be)."""
    updates = {
        key: _tamper(getattr(model, key), value) if isinstance(value, dict) else value for key, value in changes.items()
    }
    return model.model_copy(update=updates)


def test_plain_paths_are_accepted() -> None:
    plan = make_plan(
        {
            "storage": {
                "checkpoint_path": "/mnt/nvme_ckpt-1.d",
                "shared": {"kind": "nfs", "size_gib": 10, "mount_path": "/data/shared"},
            }
        }
    )
    head = yaml.safe_load(render_cluster(plan, CANARY)["cloud-init/head.yaml"])
    assert ["mkdir", "-p", "/mnt/nvme_ckpt-1.d/.shared", "/data/shared", "/etc/exports.d"] in head["runcmd"]


def test_deadman_timer_follows_ttl() -> None:
    doc = _doc("aws-efa-slurm-nfs", "head")
    assert "+ 600 * 60" in _file(doc, "/usr/local/sbin/provisioner-deadman")["content"]
    assert "OnUnitActiveSec=1min" in _file(doc, "/etc/systemd/system/provisioner-deadman.timer")["content"]
    assert ["systemctl", "enable", "--now", "provisioner-deadman.timer"] in doc["runcmd"]
    no_ttl = _doc("lambda-ib-none-managed", "head")
    assert not any("deadman" in entry["path"] or "idle" in entry["path"] for entry in no_ttl["write_files"])
    assert _file(no_ttl, "/usr/local/sbin/provisioner-teardown")  # `provisioner-teardown manual` works everywhere


def test_gpu_checks_and_fabric_manager_only_for_nvswitch_boards() -> None:
    check = _file(_doc("aws-efa-slurm-nfs", "head"), "/usr/local/sbin/provisioner-gpu-check")["content"]
    assert '"$count" -ne 8' in check and "nvidia-fabricmanager" in check
    small = _file(_doc("vast-single-node-k8s", "head"), "/usr/local/sbin/provisioner-gpu-check")["content"]
    assert '"$count" -ne 1' in small and "fabricmanager" not in small


def _gpu_check(
    tmp_path: Path, variant: str, *, gpus: int | None, fabric_manager: bool = True, container_runtime: bool = False
) -> tuple[int, str]:
    """Run the rendered check against stand-ins for nvidia-smi, systemctl and the container runtime."""
    script = _file(_doc(variant, "head"), "/usr/local/sbin/provisioner-gpu-check")["content"]
    script = script.replace("/var/log/provisioner", str(tmp_path / "log"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {"systemctl": f'[ "$1" = is-active ] && exit {0 if fabric_manager else 3}\nexit 1'}
    if gpus is not None:
        fakes["nvidia-smi"] = f'for i in $(seq 0 {gpus - 1}); do echo "GPU $i: NVIDIA H100 (UUID: GPU-$i)"; done'
    if container_runtime:
        fakes["nvidia-container-runtime"] = "exit 0"
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert (tmp_path / "log" / "gpu-check.log").read_text() == result.stdout
    return result.returncode, result.stdout


@pytest.mark.parametrize(
    ("variant", "kwargs", "rc", "expected"),
    [
        ("aws-efa-slurm-nfs", {"gpus": 8}, 0, ["gpu-check: ok 8 GPU(s)", "gpu-check: ok nv-fabricmanager active"]),
        (
            "aws-efa-slurm-nfs",
            {"gpus": 7},
            1,
            ["gpu-check: FAIL found 7 GPU(s), expected 8 x H100", "gpu-check: ok nv-fabricmanager active"],
        ),
        (
            "aws-efa-slurm-nfs",
            {"gpus": 8, "fabric_manager": False},
            1,
            ["gpu-check: ok 8 GPU(s)", "gpu-check: FAIL nv-fabricmanager is not running"],
        ),
        (
            "aws-efa-slurm-nfs",
            {"gpus": None},
            1,
            ["gpu-check: FAIL nvidia-smi not found (no NVIDIA driver on the image)"],
        ),
        (
            "gcp-tcpxo-k8s-managed",
            {"gpus": 8, "container_runtime": True},
            0,
            [
                "gpu-check: ok 8 GPU(s)",
                "gpu-check: ok nv-fabricmanager active",
                "gpu-check: ok nvidia-container-runtime present",
            ],
        ),
        (
            "gcp-tcpxo-k8s-managed",
            {"gpus": 8},
            1,
            [
                "gpu-check: ok 8 GPU(s)",
                "gpu-check: ok nv-fabricmanager active",
                "gpu-check: FAIL nvidia-container-runtime not found (install nvidia-container-toolkit before k3s)",
            ],
        ),
        (
            "vast-single-node-k8s",
            {"gpus": 1, "fabric_manager": False, "container_runtime": True},
            0,
            ["gpu-check: ok 1 GPU(s)", "gpu-check: ok nvidia-container-runtime present"],
        ),
    ],
)
def test_gpu_check_runs(tmp_path: Path, variant: str, kwargs: dict, rc: int, expected: list[str]) -> None:
    assert _gpu_check(tmp_path, variant, **kwargs) == (rc, "\n".join(expected) + "\n")


def test_nfs_export_on_head_mount_on_workers() -> None:
    head = yaml.safe_dump(_doc("aws-efa-slurm-nfs", "head")["runcmd"])
    worker = yaml.safe_dump(_doc("aws-efa-slurm-nfs", "worker")["runcmd"])
    assert "nfs-server" in head
    runcmd = _doc("aws-efa-slurm-nfs", "head")["runcmd"]
    # provisioner-firewall writes the exports (each node address, root squashed: tests/test_render_firewall.py).
    export = runcmd.index(["systemctl", "enable", "--now", "provisioner-firewall.service"])
    mkdir = runcmd.index(["mkdir", "-p", "/mnt/checkpoints/.shared", "/shared", "/etc/exports.d"])
    assert export < mkdir < runcmd.index(["exportfs", "-ra"])
    assert "llm-pretrain-0:/shared /shared nfs4" in worker and "exports" not in worker
    assert "nfs-kernel-server" in _doc("aws-efa-slurm-nfs", "head")["packages"]
    assert "nfs-kernel-server" not in _doc("aws-efa-slurm-nfs", "worker")["packages"]


def test_the_nfs_fstab_steps_run_twice_leave_one_line_and_one_mount(tmp_path: Path) -> None:
    """A cloud-init node runs its runcmd at boot and the same steps again in the SSH pass: the
    shared path's fstab line is written once and the bind mounted once (``mount``/``mountpoint``
    stand-ins record what runs; /etc/fstab is a scratch file)."""
    head = [c[2] for c in _doc("aws-efa-slurm-nfs", "head")["runcmd"] if c[:2] == ["sh", "-c"] and "fstab" in c[2]]
    worker = [c[2] for c in _doc("aws-efa-slurm-nfs", "worker")["runcmd"] if c[:2] == ["sh", "-c"] and "fstab" in c[2]]
    assert len(head) == len(worker) == 1
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mount").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/mounted\n')
    (bin_dir / "mountpoint").write_text(f'#!/bin/sh\ngrep -qx "$2" {tmp_path}/mounted 2>/dev/null\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    for role, command in (("head", head[0]), ("worker", worker[0])):
        fstab = tmp_path / f"fstab.{role}"
        fstab.write_text("UUID=x / ext4 defaults 0 1\n")
        for _ in range(2):
            subprocess.run(["sh", "-c", command.replace("/etc/fstab", str(fstab))], env=env, check=True, timeout=30)
        lines = fstab.read_text().splitlines()
        assert len(lines) == 2 and lines[0] == "UUID=x / ext4 defaults 0 1", lines
    assert (tmp_path / "mounted").read_text() == "/shared\n"  # the head's bind, once
    assert fstab.read_text().splitlines()[1].startswith("llm-pretrain-0:/shared /shared nfs4 ")


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("aws-slurm-managed-dbd", "lustre"),
        ("gcp-tcpxo-k8s-managed", "nfs defaults,hard"),
        ("lambda-ib-none-managed", "/lambda/nfs/"),
    ],
)
def test_managed_shared_fs_mount_per_provider(variant: str, expected: str) -> None:
    doc = _doc(variant, "worker")
    assert expected in _file(doc, "/usr/local/sbin/provisioner-shared-fs")["content"]
    assert ["/usr/local/sbin/provisioner-shared-fs"] in doc["runcmd"]


def test_slurm_daemons_per_role_and_slurmdbd() -> None:
    head = _doc("aws-slurm-managed-dbd", "head", full=True)
    worker = _doc("aws-slurm-managed-dbd", "worker", full=True)
    assert {"slurmctld", "slurmd", "slurmdbd", "munge"} <= set(head["packages"])
    assert "slurmctld" not in worker["packages"] and "slurmd" in worker["packages"]
    assert _file(head, "/etc/slurm/slurmdbd.conf")["permissions"] == "0600"
    # slurmctld starts after slurmdbd answers and holds the cluster (ClusterName: '_' for '-').
    steps = [" ".join(step) for step in head["runcmd"]]
    dbd, ctld = steps.index("systemctl enable --now slurmdbd"), steps.index("systemctl restart slurmctld")
    ready = [i for i, step in enumerate(steps) if "sacctmgr -i add cluster llm_pretrain" in step]
    assert len(ready) == 1 and dbd < ready[0] < ctld
    assert _file(worker, "/etc/munge/munge.key") == {
        "path": "/etc/munge/munge.key",
        "encoding": "b64",
        "owner": "munge:munge",
        "permissions": "0400",
        "defer": True,
        "content": MUNGE,
    }


def test_k3s_server_agent_and_per_node_labels() -> None:
    head = _doc("gcp-tcpxo-k8s-managed", "head", full=True)
    worker = _doc("gcp-tcpxo-k8s-managed", "worker", full=True)
    server = yaml.safe_load(_file(head, "/etc/rancher/k3s/config.yaml")["content"])
    agent = yaml.safe_load(_file(worker, "/etc/rancher/k3s/config.yaml")["content"])
    assert server["token"] == agent["token"] == TOKEN
    assert agent["server"] == "https://llm-pretrain-0:6443" and "server" not in server
    assert "provisioner.dev/role=server" in server["node-label"]
    assert "provisioner.dev/role=agent" in agent["node-label"]
    assert "INSTALL_K3S_EXEC=server" in yaml.safe_dump(head["runcmd"])
    assert "INSTALL_K3S_EXEC=agent" in yaml.safe_dump(worker["runcmd"])


def test_k3s_node_script_writes_node_name_and_labels(tmp_path: Path) -> None:
    doc = _doc("gcp-tcpxo-k8s-managed", "worker")
    script = _file(doc, "/usr/local/sbin/provisioner-k3s-node")["content"]
    # Run it against a private root: rewrite the two absolute paths it touches.
    (tmp_path / "identity.env").write_text("NODE_NAME=llm-pretrain-1\n")
    script = script.replace("/etc/provisioner/identity.env", str(tmp_path / "identity.env"))
    script = script.replace("/etc/rancher/k3s/config.yaml.d", str(tmp_path / "d"))
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    drop_in = yaml.safe_load((tmp_path / "d" / "10-node.yaml").read_text())
    assert drop_in["node-name"] == "llm-pretrain-1"
    assert "kubernetes.io/hostname=llm-pretrain-1" in drop_in["node-label+"]


def _nvme(tmp_path: Path, devices: str, root: str = "/dev/nvme0n1") -> subprocess.CompletedProcess[str]:
    view = cluster_view(make_plan(nodes=1))
    script = tmp_path / "nvme-raid.sh"
    script.write_text(nvme_script(view))
    env = {
        "PATH": os.environ["PATH"],
        "PROVISIONER_DRY_RUN": "1",
        "PROVISIONER_NVME_DEVICES": devices,
        "PROVISIONER_ROOT_DISK": root,
    }
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)


def _commands(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line[2:] for line in result.stdout.splitlines() if line.startswith("+ ")]


def test_nvme_zero_disks_stays_on_root(tmp_path: Path) -> None:
    result = _nvme(tmp_path, "/dev/nvme0n1")  # only the root disk
    assert _commands(result) == ["mkdir -p /mnt/checkpoints"]
    assert "no local NVMe data disk" in result.stderr


def test_nvme_one_disk_is_formatted_directly(tmp_path: Path) -> None:
    commands = _commands(_nvme(tmp_path, "/dev/nvme0n1 /dev/nvme1n1"))
    assert commands == [
        "mkdir -p /mnt/checkpoints",
        "mkfs.ext4 -F -q -L checkpoints -E lazy_itable_init=1,lazy_journal_init=1 -m 0 /dev/nvme1n1",
        "mount -o noatime,discard /dev/nvme1n1 /mnt/checkpoints",
        "chmod 1777 /mnt/checkpoints",
    ]


def test_nvme_many_disks_become_raid0_without_root(tmp_path: Path) -> None:
    disks = " ".join(f"/dev/nvme{i}n1" for i in range(9))  # nvme0n1 is root; 8 data disks
    commands = _commands(_nvme(tmp_path, disks))
    data = " ".join(f"/dev/nvme{i}n1" for i in range(1, 9))
    assert commands[1] == f"mdadm --create /dev/md/checkpoints --run --level=0 --chunk=512 --raid-devices=8 {data}"
    assert commands[-2] == "mount -o noatime,discard /dev/md/checkpoints /mnt/checkpoints"
    # A root disk named like a prefix of a data disk must not swallow it.
    commands = _commands(_nvme(tmp_path, "/dev/nvme1n1 /dev/nvme1n10 /dev/nvme1n11", root="/dev/nvme1n1"))
    assert "--raid-devices=2 /dev/nvme1n10 /dev/nvme1n11" in commands[1]


@pytest.mark.parametrize(
    ("overrides", "profile", "expected"),
    [
        ({}, "efa", {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_NET_PLUGIN": "ofi"}),
        (
            {"provider": "gcp", "instance_type": "a3-megagpu-8g", "fabric": "ethernet"},
            "tcpxo",
            {"NCCL_FASTRAK_CTRL_DEV": "enp0s12", "NCCL_SOCKET_IFNAME": "enp0s12"},
        ),
        (
            {"provider": "gcp", "instance_type": "a3-highgpu-8g", "fabric": "ethernet"},
            "tcpx",
            {"NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0"},
        ),
        (
            {"provider": "gcp", "instance_type": "a3-ultragpu-8g", "fabric": "roce"},
            "gib",
            {"NCCL_NET": "gIB", "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb"},
        ),
        (
            {"provider": "gcp", "instance_type": "a4-highgpu-8g", "fabric": "roce"},
            "gib",
            {"NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a4.txtpb"},
        ),
        (
            {"provider": "lambda", "fabric": "infiniband"},
            "infiniband",
            {"NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "^lo,docker0"},
        ),
        ({"provider": "runpod", "fabric": "infiniband"}, "infiniband", {"NCCL_SOCKET_IFNAME": "ens1"}),
        ({"provider": "fluence", "fabric": "roce"}, "roce", {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5"}),
        ({"provider": "vastai", "fabric": "ethernet"}, "tcp", {"NCCL_IB_DISABLE": "1"}),
    ],
)
def test_nccl_env_per_fabric(overrides: dict[str, str], profile: str, expected: dict[str, str]) -> None:
    offer = make_offer(**overrides)
    env = nccl_env(offer)
    assert fabric_profile(offer) == profile
    assert expected.items() <= env.items()
    assert list(env) == sorted(env) and env["NCCL_DEBUG"] == "WARN"
    if profile != "tcp":
        assert "NCCL_IB_DISABLE" not in env or env["NCCL_IB_DISABLE"] == "0"


def test_secrets_never_in_repr_or_non_secret_files(tmp_path: Path) -> None:
    secrets = ClusterSecrets.generate()
    for value in secrets.values():
        assert value not in repr(secrets) and value not in str(secrets)
        assert value not in secrets.model_dump_json()
    assert ClusterSecrets.generate().values() != secrets.values()
    for name in VARIANTS:
        rendered = _render(name)
        assert MUNGE not in repr(rendered) and TOKEN not in repr(rendered)
        control = VARIANTS[name].spec.control_plane.value
        for path, text in rendered.items():
            text = readable(text)
            over_ssh = path.startswith("ssh/")  # user data and entrypoint scripts hold no secret
            assert (MUNGE in text) == (over_ssh and control == "slurm"), path
            assert (TOKEN in text) == (over_ssh and control == "kubernetes"), path
            assert rendered.is_secret(path) == (over_ssh and control != "none"), path


def test_write_rendered_modes_and_overwrite(tmp_path: Path) -> None:
    rendered = _render("aws-efa-slurm-nfs")
    (tmp_path / "cloud-init").mkdir()
    (tmp_path / "cloud-init" / "head.yaml").write_text("old")
    (tmp_path / "cloud-init" / "head.yaml").chmod(0o644)
    written = write_rendered(rendered, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(rendered)
    mode = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in written}
    assert mode["ssh/head.sh"] == 0o600 and mode["ssh/worker.sh"] == 0o600  # the secrets
    assert mode["cloud-init/head.yaml"] == 0o644 and mode["cloud-init/worker.yaml"] == 0o644
    assert mode["slurm/slurm.conf"] == 0o644 and mode["slurm/epilog.sh"] == 0o755
    assert (tmp_path / "cloud-init" / "head.yaml").read_text() == rendered["cloud-init/head.yaml"]


def test_write_rendered_refuses_escaping_paths(tmp_path: Path) -> None:
    bad = RenderedCluster(files={"../evil": "x"})
    with pytest.raises(ProvisionerError, match="outside"):
        write_rendered(bad, tmp_path)


@pytest.mark.parametrize(
    ("munge", "token", "message"),
    [("not base64!", "a" * 20, "base64"), ("YWJj", "a" * 20, "32 bytes"), (MUNGE, "short", "16 printable")],
)
def test_bad_secrets_rejected(munge: str, token: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        ClusterSecrets(munge_key_b64=munge, k3s_token=token)
    assert munge not in str(caught.value) and token not in str(caught.value)


# ----- node firewall and bootstrap script -----------------------------------------------------------
def _firewall(rendered: RenderedCluster, role: str = "head") -> str:
    return _file(yaml.safe_load(rendered[f"cloud-init/{role}.yaml"]), "/etc/provisioner/firewall.nft")["content"]


def _nft_sets(ruleset: str) -> dict[str, list[str]]:
    sets = {}
    for name, body in re.findall(r"^    set (\w+) \{\n(.*?)^    \}$", ruleset, re.S | re.M):
        elements = re.search(r"elements = \{ (.*) \}", body)
        sets[name] = elements[1].split(", ") if elements else []
    return sets


def test_firewall_allows_ssh_only_from_allowed_cidrs_and_the_cluster() -> None:
    plan = make_plan({"access": {"allowed_cidrs": ["203.0.113.7/32", "198.51.100.0/24", "2001:db8::/48"]}})
    rendered = render_cluster(plan, CANARY, node_addresses={"llm-pretrain-0": "10.1.0.5", "llm-pretrain-1": "10.1.0.6"})
    ruleset = _firewall(rendered)
    assert ruleset == _firewall(rendered, "worker") and ruleset in readable(rendered["bootstrap/head.sh"])
    assert _nft_sets(ruleset) == {
        "ssh_v4": ["198.51.100.0/24", "203.0.113.7/32"],
        "ssh_v6": ["2001:db8::/48"],
        "cluster_v4": [],
        "cluster_v6": [],
    }  # node addresses join at boot, from /etc/provisioner/hosts
    lines = [line.strip() for line in ruleset.split("chain input {")[1].splitlines()]
    header, rules = lines[1], lines[2 : lines.index("}")]
    # Closed by default: the policy drops, and the allow list is exactly this, in this order.
    assert header == "type filter hook input priority filter; policy drop;"
    assert rules == [
        'iif "lo" accept',
        "ct state established,related accept",
        "ct state invalid drop",
        "meta l4proto { 1, 58 } accept",
        "udp sport 67 udp dport 68 accept",
        "udp sport 547 udp dport 546 accept",
        "tcp dport 22 ip saddr @ssh_v4 accept",
        "tcp dport 22 ip6 saddr @ssh_v6 accept",
        "ip saddr @cluster_v4 accept",
        "ip6 saddr @cluster_v6 accept",
        "counter drop",
    ]
    head = yaml.safe_load(rendered["cloud-init/head.yaml"])
    assert _file(head, "/etc/provisioner/hosts")["content"] == "10.1.0.5 llm-pretrain-0\n10.1.0.6 llm-pretrain-1\n"
    assert "nftables" in head["packages"]
    assert ["systemctl", "enable", "--now", "provisioner-firewall.service"] in head["runcmd"]
    assert ["systemctl", "enable", "--now", "provisioner-firewall.path"] in head["runcmd"]
    # Never RFC 1918 wholesale: only the node list, or the private CIDRs the caller names until it exists.
    assert "10.0.0.0/8" not in render_cluster(plan, CANARY)["cloud-init/head.yaml"]
    vpc = yaml.safe_load(render_cluster(plan, CANARY, private_cidrs=["10.20.0.0/16"])["cloud-init/head.yaml"])
    assert "v4+=(10.20.0.0/16)" in _file(vpc, "/usr/local/sbin/provisioner-firewall")["content"]


@pytest.mark.parametrize(
    ("addresses", "where"),
    [
        ({"llm-pretrain-9": "10.0.0.1"}, "node_addresses"),
        ({"llm-pretrain-0": "10.0.0.1\nruncmd: [reboot]"}, "node_addresses.llm-pretrain-0"),
    ],
)
def test_bad_node_addresses_are_refused(addresses: dict[str, str], where: str) -> None:
    with pytest.raises(SpecError) as caught:
        render_cluster(make_plan(), CANARY, node_addresses=addresses)
    assert caught.value.path == where


@pytest.mark.system
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_firewall_loads_in_nft_check_mode(variant: str, tmp_path: Path) -> None:
    need_tool("nft", "unshare")
    if os.geteuid() != 0:
        pytest.skip("nft -c needs CAP_NET_ADMIN")
    path = tmp_path / "firewall.nft"
    path.write_text(_firewall(_render(variant)))
    # In a fresh network namespace, so nothing on this machine is touched even if -c were ignored.
    result = subprocess.run(
        ["unshare", "--net", "nft", "-c", "-f", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_bootstrap_script_matches_the_user_data(variant: str) -> None:
    rendered = _render(variant)
    for role in ("head", "worker"):
        if f"cloud-init/{role}.yaml" not in rendered:
            assert f"bootstrap/{role}.sh" not in rendered
            continue
        doc = yaml.safe_load(rendered[f"cloud-init/{role}.yaml"])
        script = rendered[f"bootstrap/{role}.sh"]
        assert subprocess.run(["bash", "-n"], input=script, text=True, timeout=30).returncode == 0
        embedded = readable(script)
        for entry in doc["write_files"]:
            content = entry["content"]
            assert content in embedded, entry["path"]
            assert f"put_file {entry['path']} " in script
        steps = re.findall(r"^if begin_step (\S+) ([01]); then\n    if (.*); then end_step", script, re.M)
        assert steps[0][0] == "00-packages" and shlex.split(steps.pop(0)[2])[1:] == doc["packages"]
        assert len(steps) == len(doc["runcmd"])
        for (_, always, command), runcmd in zip(steps, doc["runcmd"], strict=True):
            words = runcmd if isinstance(runcmd, list) else ["sh", "-c", runcmd]
            assert shlex.split(command) == [str(w) for w in words]
            assert always == (
                "1"
                if words[0]
                in ("systemctl", "/usr/local/sbin/provisioner-identity", "/usr/local/sbin/provisioner-k8s-apply")
                else "0"
            )
        for key in doc.get("ssh_authorized_keys", []):
            assert f"authorize root {shlex.quote(key)}" in script


@pytest.mark.parametrize(
    ("env", "metadata", "hostname", "expected"),
    [
        ({}, "llm-pretrain-llm-pretrain-1", "ip-10-0-0-7", "llm-pretrain-1 worker"),  # adapter's "<cluster>-<node>"
        ({}, "llm-pretrain-0", "ip-10-0-0-7", "llm-pretrain-0 head"),
        ({}, "", "llm-pretrain-1", "llm-pretrain-1 worker"),
        ({"PROVISIONER_NODE_NAME": "llm-pretrain-0"}, "llm-pretrain-1", "x", "llm-pretrain-0 head"),
        ({}, "other-cluster-7", "ip-10-0-0-7", None),
        ({}, "llm-pretrain-x1", "llm-pretrain-", None),
    ],
)
def test_identity_finds_the_node_name(
    tmp_path: Path, env: dict, metadata: str, hostname: str, expected: str | None
) -> None:
    script = _file(_doc("aws-efa-slurm-nfs", "worker"), "/usr/local/sbin/provisioner-identity")["content"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shims = {  # no real metadata service, and this machine's hostname is never touched
        "curl": 'case "$*" in *api/token*) echo tok ;; *tags/instance/Name*) printf %s "$FAKE_NAME" ;; esac',
        "hostname": '[ "$1" = -s ] && echo "$FAKE_HOSTNAME"',
        "hostnamectl": f'echo "hostnamectl $*" >> {tmp_path}/calls.log',
    }
    for name, body in shims.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PROVISIONER_ROOT": str(tmp_path),
            "FAKE_NAME": metadata,
            "FAKE_HOSTNAME": hostname,
            **env,
        },
    )
    identity = tmp_path / "etc" / "provisioner" / "identity.env"
    if expected is None:
        assert result.returncode == 1 and "cannot tell which node" in result.stderr
        assert not identity.exists()
        return
    assert result.returncode == 0, result.stderr
    name, role = expected.split()
    assert identity.read_text() == f"NODE_NAME={name}\nNODE_ROLE={role}\nHEAD_NODE=llm-pretrain-0\n"
    assert (tmp_path / "calls.log").read_text() == f"hostnamectl set-hostname {name}\n"
