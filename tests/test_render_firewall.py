"""Only the allowed traffic: the node firewall and NFS exports built at boot from the node list,
k3s pinned, Kueue installed by the head.

``provisioner-firewall`` is run for real: with nft in a fresh user+network namespace
(``unshare -rn``, nothing on this machine is touched) and every file under a scratch root
(``PROVISIONER_ROOT``). The loaded sets are read back with ``nft list``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from provisioner.render import render_cluster
from provisioner.render.kubernetes import K3S_VERSION, KUEUE_MANIFEST_URL, KUEUE_VERSION
from tests.conftest import need_tool
from tests.test_render_slurm import CANARY, make_plan

ALLOWED = ["203.0.113.7/32", "2001:db8::/48"]


def _files(text: str) -> dict[str, str]:
    return {entry["path"]: entry["content"] for entry in yaml.safe_load(text)["write_files"]}


def _node_root(tmp_path: Path, user_data: str, hosts: str | None) -> Path:
    root = tmp_path / "root"
    files = _files(user_data)
    for path in ("/etc/provisioner/firewall.nft", "/usr/local/sbin/provisioner-firewall"):
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(files[path])
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    if hosts is not None:
        (root / "etc" / "provisioner" / "hosts").write_text(hosts)
    return root


def _apply(root: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run provisioner-firewall in a throwaway namespace; return its result and the loaded table."""
    need_tool("nft", "unshare")
    shim = root.parent / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "exportfs").write_text(f'#!/bin/sh\necho "exportfs $*" >> {root.parent}/exportfs.log\n')
    (shim / "exportfs").chmod(0o755)
    script = root / "usr/local/sbin/provisioner-firewall"
    command = f"bash {script} && nft list table inet provisioner > {root.parent}/table.txt"
    result = subprocess.run(
        ["unshare", "-rn", "bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{shim}:/usr/sbin:/usr/bin:/sbin:/bin", "PROVISIONER_ROOT": str(root)},
    )
    table = (root.parent / "table.txt").read_text() if (root.parent / "table.txt").exists() else ""
    return result, table


def _set(table: str, name: str) -> list[str]:
    body = re.search(rf"set {name} \{{(.*?)\n\t\}}", table, re.S)
    assert body, table
    elements = re.search(r"elements = \{ (.*?) \}", body[1], re.S)
    return sorted(re.split(r",\s*", elements[1].strip())) if elements else []


def test_cluster_daemons_accept_exactly_the_node_list_and_follow_its_changes(tmp_path: Path) -> None:
    plan = make_plan({"access": {"allowed_cidrs": ALLOWED}}, nodes=3)
    user_data = render_cluster(plan, CANARY)["cloud-init/head.yaml"]
    hosts = (
        "10.1.0.5 llm-pretrain-0\n10.1.0.6 llm-pretrain-1\n# comment\n\n"
        "10.0.0.9;flush ruleset llm-pretrain-9\n$(reboot) x\nfd00::7 llm-pretrain-2\n"
    )
    root = _node_root(tmp_path, user_data, hosts)
    result, table = _apply(root)
    assert result.returncode == 0, result.stderr
    assert _set(table, "ssh_v4") == ["203.0.113.7"] and _set(table, "ssh_v6") == ["2001:db8::/48"]
    assert _set(table, "cluster_v4") == ["10.1.0.5", "10.1.0.6"] and _set(table, "cluster_v6") == ["fd00::7"]
    assert result.stderr.count("not an IP address") == 2 and "reboot" not in result.stderr
    exports = (root / "etc/exports.d/provisioner.exports").read_text().splitlines()
    assert exports[1:] == [
        f"/shared {a}(rw,sync,no_subtree_check,root_squash)" for a in ("10.1.0.5", "10.1.0.6", "fd00::7")
    ]
    assert "no_root_squash" not in user_data and "10.0.0.0/8" not in user_data
    assert (tmp_path / "exportfs.log").read_text() == "exportfs -ra\n"
    block = "# provisioner hosts begin\n10.1.0.5 llm-pretrain-0\n10.1.0.6 llm-pretrain-1\nfd00::7 llm-pretrain-2\n"
    assert (root / "etc/hosts").read_text() == f"127.0.0.1 localhost\n{block}# provisioner hosts end\n"

    # The list changes (a node replaced): the sets, exports and names are replaced, not appended to.
    (root / "etc/provisioner/hosts").write_text("10.1.0.5 llm-pretrain-0\n10.1.0.8 llm-pretrain-1\n")
    result, table = _apply(root)
    assert result.returncode == 0, result.stderr
    assert _set(table, "cluster_v4") == ["10.1.0.5", "10.1.0.8"] and _set(table, "cluster_v6") == []
    assert len((root / "etc/exports.d/provisioner.exports").read_text().splitlines()) == 3
    assert (root / "etc/hosts").read_text().count("# provisioner hosts begin") == 1
    assert "10.1.0.6" not in (root / "etc/hosts").read_text()


def _chain(table: str, name: str) -> str:
    body = re.search(rf"chain {name} \{{(.*?)\n\t\}}", table, re.S)
    assert body, table
    return " ".join(body[1].split())


def test_the_node_is_closed_by_default_and_only_root_reaches_the_metadata_address(tmp_path: Path) -> None:
    """Read back from the loaded table: input drops whatever the allow list does not name (port 80,
    443, NodePorts, anything from outside the node list), and the metadata address is root's only."""
    plan = make_plan({"access": {"allowed_cidrs": ALLOWED}, "control_plane": "kubernetes"}, nodes=2)
    root = _node_root(tmp_path, render_cluster(plan, CANARY)["cloud-init/worker.yaml"], "10.1.0.5 llm-pretrain-0\n")
    result, table = _apply(root)
    assert result.returncode == 0, result.stderr
    rules = _chain(table, "input")
    assert "policy drop;" in rules and rules.endswith("counter packets 0 bytes 0 drop")
    # nft prints protocol numbers back as names when /etc/protocols has them
    rules = rules.replace("meta l4proto { 1, 58 }", "meta l4proto { icmp, ipv6-icmp }")
    accepts = [rule for rule in re.split(r"(?<=accept) ", rules) if rule.endswith("accept")]
    assert [" ".join(rule.split(";")[-1].split()) for rule in accepts] == [
        'iif "lo" accept',
        "ct state established,related accept",
        "ct state invalid drop meta l4proto { icmp, ipv6-icmp } accept",
        "udp sport 67 udp dport 68 accept",
        "udp sport 547 udp dport 546 accept",
        "tcp dport 22 ip saddr @ssh_v4 accept",
        "tcp dport 22 ip6 saddr @ssh_v6 accept",
        "ip saddr @cluster_v4 accept",
        "ip6 saddr @cluster_v6 accept",
    ]
    assert not re.search(r"dport (80|443|3\d{4})\b", rules)
    assert "ip daddr 169.254.169.254 meta skuid != 0 counter packets 0 bytes 0 drop" in _chain(table, "output")
    assert "ip daddr 169.254.169.254 counter packets 0 bytes 0 drop" in _chain(table, "forward")
    assert "policy accept;" in _chain(table, "output")


def test_before_the_node_list_exists_daemons_answer_the_node_only_or_the_named_network(tmp_path: Path) -> None:
    plan = make_plan({"control_plane": "kubernetes"}, nodes=2)
    result, table = _apply(_node_root(tmp_path / "a", render_cluster(plan, CANARY)["cloud-init/worker.yaml"], None))
    assert result.returncode == 0, result.stderr
    assert "no " in result.stderr and "answer this node only" in result.stderr
    # k3s's own pod and service networks stay: pods reach the API server through them.
    assert _set(table, "cluster_v4") == ["10.42.0.0/15"]  # 10.42/16 + 10.43/16, collapsed
    vpc = render_cluster(plan, CANARY, private_cidrs=["10.20.0.0/16"])["cloud-init/worker.yaml"]
    result, table = _apply(_node_root(tmp_path / "b", vpc, None))
    assert result.returncode == 0, result.stderr
    assert _set(table, "cluster_v4") == ["10.20.0.0/16", "10.42.0.0/15"]


def test_the_hosts_file_is_watched() -> None:
    rendered = render_cluster(make_plan(nodes=2), CANARY)
    files = _files(rendered["cloud-init/worker.yaml"])
    unit = files["/etc/systemd/system/provisioner-firewall.path"]
    assert "PathChanged=/etc/provisioner/hosts" in unit and "Unit=provisioner-firewall.service" in unit
    # A oneshot that stays "active" would never run again: the service must not RemainAfterExit.
    assert "RemainAfterExit" not in files["/etc/systemd/system/provisioner-firewall.service"]
    assert "provisioner-*.path)" in rendered["bootstrap/worker.sh"]  # the script bootstrap's loop


def test_k3s_is_pinned_and_the_head_installs_kueue_then_the_bootstrap_manifests(tmp_path: Path) -> None:
    plan = make_plan({"control_plane": "kubernetes"}, nodes=2)
    rendered = render_cluster(plan, CANARY, boot_secrets=True)  # the whole document, as the SSH pass runs it
    head, worker = (yaml.safe_load(rendered[f"cloud-init/{role}.yaml"]) for role in ("head", "worker"))
    for doc, mode in ((head, "server"), (worker, "agent")):
        install = next(cmd[2] for cmd in doc["runcmd"] if cmd[:2] == ["sh", "-c"] and "k3s" in cmd[2])
        assert install == (
            "curl -sfL https://raw.githubusercontent.com/k3s-io/k3s/v1.33.3%2Bk3s1/install.sh | "
            f"INSTALL_K3S_VERSION={K3S_VERSION} INSTALL_K3S_EXEC={mode} sh -"
        )
    assert "get.k3s.io" not in "".join(rendered.values())
    files = _files(rendered["cloud-init/head.yaml"])
    manifests = {
        p.removeprefix("/etc/provisioner/k8s/"): t for p, t in files.items() if p.startswith("/etc/provisioner/k8s/")
    }
    assert manifests == {
        p.removeprefix("k8s/"): t
        for p, t in rendered.items()
        if p.startswith("k8s/") and not p.startswith("k8s/launch/")
    }
    assert not any(p.startswith("/etc/provisioner/k8s") for p in _files(rendered["cloud-init/worker.yaml"]))
    assert head["runcmd"].index(["/usr/local/sbin/provisioner-k8s-apply"]) > next(
        i for i, cmd in enumerate(head["runcmd"]) if "INSTALL_K3S_EXEC=server" in str(cmd)
    )

    # Run it with a stand-in k3s: Kueue first (server-side), its controller waited for, then each manifest.
    root = tmp_path / "root"
    (root / "etc/provisioner/k8s").mkdir(parents=True)
    for name, text in manifests.items():
        (root / "etc/provisioner/k8s" / name).write_text(text)
    (root / "etc/provisioner/k8s-node-labels").write_text(files["/etc/provisioner/k8s-node-labels"])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "k3s").write_text(f'#!/bin/sh\necho "k3s $*" >> {tmp_path}/calls.log\n')
    (tmp_path / "bin" / "k3s").chmod(0o755)
    (tmp_path / "apply").write_text(files["/usr/local/sbin/provisioner-k8s-apply"])
    result = subprocess.run(
        ["bash", str(tmp_path / "apply")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PROVISIONER_ROOT": str(root)},
    )
    assert result.returncode == 0, result.stderr
    manifest_dir = root / "etc/provisioner/k8s"
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "k3s kubectl get --raw=/readyz",
        "k3s kubectl get --raw=/readyz",
        f"k3s kubectl apply --server-side --force-conflicts -f {KUEUE_MANIFEST_URL}",
        "k3s kubectl -n kueue-system wait --for=condition=Available deployment/kueue-controller-manager --timeout=600s",
        *(f"k3s kubectl apply -f {manifest_dir / name}" for name in sorted(manifests)),
        "k3s kubectl get nodes -o name",  # none registered: none labelled (tests/test_render_topology_labels.py)
    ]
    assert KUEUE_VERSION in result.stdout


@pytest.mark.parametrize("control_plane", ["slurm", "kubernetes", "none"])
def test_no_rendered_file_opens_a_daemon_to_a_private_range(control_plane: str) -> None:
    rendered = render_cluster(make_plan({"control_plane": control_plane}, nodes=2), CANARY)
    for path, text in rendered.items():
        assert "no_root_squash" not in text, path
        assert "172.16.0.0/12" not in text and "192.168.0.0/16" not in text, path


@pytest.mark.parametrize(
    ("nft_error", "status"),
    [
        ("netlink: Error: cannot open Netlink socket: Operation not permitted", 0),  # a container: warned
        ("/dev/stdin:3:1-5: Error: syntax error", 1),
    ],
)
def test_without_nftables_rights_exports_and_names_still_apply(tmp_path: Path, nft_error: str, status: int) -> None:
    user_data = render_cluster(make_plan(nodes=2), CANARY)["cloud-init/head.yaml"]
    root = _node_root(tmp_path, user_data, "10.1.0.5 llm-pretrain-0\n10.1.0.6 llm-pretrain-1\n")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "nft").write_text(f"#!/bin/sh\ncat > /dev/null\necho '{nft_error}' >&2\nexit 1\n")
    (shim / "nft").chmod(0o755)
    result = subprocess.run(
        ["bash", str(root / "usr/local/sbin/provisioner-firewall")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{shim}:/usr/bin:/bin", "PROVISIONER_ROOT": str(root)},
    )
    assert result.returncode == status, result.stderr
    assert ("WARNING cannot load nftables" in result.stderr) is (status == 0)
    assert "10.1.0.6(rw,sync,no_subtree_check,root_squash)" in (root / "etc/exports.d/provisioner.exports").read_text()
    assert "10.1.0.6 llm-pretrain-1" in (root / "etc/hosts").read_text()


@pytest.mark.parametrize(("ingress", "disabled"), [(False, ["traefik", "servicelb"]), (True, None)])
def test_k3s_runs_without_traefik_and_servicelb_unless_asked(ingress: bool, disabled: list[str] | None) -> None:
    plan = make_plan({"control_plane": "kubernetes", "kubernetes": {"ingress": ingress}}, nodes=2)
    rendered = render_cluster(plan, CANARY, boot_secrets=True)  # k3s's config holds the token: the SSH pass's
    config = yaml.safe_load(_files(rendered["cloud-init/head.yaml"])["/etc/rancher/k3s/config.yaml"])
    assert config.get("disable") == disabled
    assert "disable" not in yaml.safe_load(_files(rendered["cloud-init/worker.yaml"])["/etc/rancher/k3s/config.yaml"])
