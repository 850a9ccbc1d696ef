"""Host keys pinned by proof, not trusted on first use (issue 16, item 4).

The boot token: one per node, in that node's boot data only (cloud-init user data and the container
script), never in the SSH pass's scripts. The node's proof (``PROOF_SCRIPT``: bash + sha256sum) is
checked against Python's own ``hmac`` here, never against the production ``proof``. Then a real
OpenSSH sshd on 127.0.0.1 (the rig of tests/test_bootstrap_ssh.py, run as root) plays the node:
(1) a node holding the right token: the pass runs, the key it presented is pinned; (2) a machine
without the token, and one relaying the real node's proof while presenting its own key: refused
with one line, the script never copied or run, nothing pinned; (3) later commands check the pinned
key strictly: a changed key is refused by ``run``, and re-proven only by the SSH pass.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from provisioner.capabilities import Bootstrap
from provisioner.realize.bootstrap_ssh import REMOTE_SCRIPT, BootstrapError, HostKeyError, SshTarget
from provisioner.realize.hostkeys import PROOF_SCRIPT, host_pattern, hostkey_token, hostkey_tokens, pinned_key
from provisioner.realize.nodes import boot_text, node_specs
from provisioner.realize.remote import SshRemote
from provisioner.render import render_cluster
from provisioner.render.cloudinit import HOSTKEY_TOKEN_PATH
from provisioner.secrets import ClusterSecrets
from tests.conftest import need_tool
from tests.test_bootstrap_ssh import Sshd, _host_key, rig  # noqa: F401  (rig: the sshd fixture)
from tests.test_lifecycle_support import LAMBDA_SPEC, plans_for, runpod_plan

SECRETS = ClusterSecrets.generate()


def _hmac(token: str, line: str) -> str:
    return hmac.new(bytes.fromhex(token), line.encode(), hashlib.sha256).hexdigest()


def _pub(key: Path) -> str:
    kind, blob = Path(f"{key}.pub").read_text().split()[:2]
    return f"{kind} {blob}"


# ---- tokens and boot data ---------------------------------------------------------------------


def test_each_node_gets_its_own_token_in_its_own_boot_data_only(tmp_path: Path) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    assert len(plan.nodes) >= 2 and {n.bootstrap for n in plan.nodes} == {Bootstrap.CLOUD_INIT}
    tokens = hostkey_tokens(plan, SECRETS)
    assert sorted(tokens) == sorted(n.name for n in plan.nodes)
    assert len(set(tokens.values())) == len(tokens) and all(re.fullmatch(r"[0-9a-f]{64}", t) for t in tokens.values())
    assert hostkey_token(SECRETS, "other-cluster", plan.nodes[0].name) != tokens[plan.nodes[0].name]
    assert hostkey_token(ClusterSecrets.generate(), plan.cluster_id, plan.nodes[0].name) != tokens[plan.nodes[0].name]
    rendered = render_cluster(plan, SECRETS)
    specs = node_specs(plan, rendered, ssh_public_key=SECRETS.ssh_public_key, expires_at=None, hostkey_tokens=tokens)
    for spec in specs:
        files = {f["path"]: f for f in yaml.safe_load(spec.user_data or "")["write_files"]}
        assert files[HOSTKEY_TOKEN_PATH]["content"] == tokens[spec.name]
        assert files[HOSTKEY_TOKEN_PATH]["permissions"] == "0600"
        others = [t for name, t in tokens.items() if name != spec.name]
        assert not any(t in (spec.user_data or "") for t in others)
    for path, text in rendered.items():  # the SSH pass's scripts rewrite no token file
        if path.startswith("ssh/"):
            assert HOSTKEY_TOKEN_PATH not in text


def test_a_container_script_writes_its_token_0600(tmp_path: Path) -> None:
    plan = runpod_plan(tmp_path)
    node = plan.nodes[0]
    assert node.bootstrap is Bootstrap.SCRIPT
    token = hostkey_tokens(plan, SECRETS)[node.name]
    text = boot_text(node, render_cluster(plan, SECRETS)[f"bootstrap/{node.role}.sh"], token)
    found = re.search(rf"put_file {re.escape(HOSTKEY_TOKEN_PATH)} 0600 root:root <<'PROVISIONER_B64'\n(\S+)\n", text)
    assert found and base64.b64decode(found.group(1)).decode() == token


def test_a_bad_token_or_a_text_without_its_slot_is_refused(tmp_path: Path) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    node, text = plan.nodes[0], render_cluster(plan, SECRETS)["cloud-init/head.yaml"]
    with pytest.raises(ValueError, match="64 lower-case hex"):
        boot_text(node, text, "AB" * 32)
    with pytest.raises(ValueError, match="no host key token slot"):
        boot_text(node, "#cloud-config\n", "ab" * 32)


def test_a_node_without_boot_data_has_no_token(tmp_path: Path) -> None:
    plan = runpod_plan(tmp_path)
    ssh_only = plan.model_copy(
        update={"nodes": tuple(n.model_copy(update={"bootstrap": Bootstrap.SSH}) for n in plan.nodes)}
    )
    assert hostkey_tokens(ssh_only, SECRETS) == {}


# ---- the node's proof, checked against Python's hmac -----------------------------------------


def _prove_locally(config: Path, token_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-s", "--", str(config), str(token_file)],
        input=PROOF_SCRIPT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_proof_script_is_hmac_sha256_of_each_served_host_key(tmp_path: Path) -> None:
    need_tool("sshd", "ssh-keygen", "sha256sum")
    keys = []
    for kind in ("ed25519", "ecdsa"):
        key = tmp_path / f"ssh_host_{kind}_key"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True, timeout=30)
        keys.append(key)
    config = tmp_path / "sshd_config"
    config.write_text("".join(f"HostKey {key}\n" for key in keys))
    token_file = tmp_path / "token"
    # Every byte value once in the key (0x00, '%', '\\' included) and a known answer: RFC 4231 case 1
    # uses a 20-byte key, so the script's zero padding is exercised too.
    for token in (bytes(range(32)).hex(), bytes(range(224, 256)).hex(), "0b" * 20 + "00" * 12):
        token_file.write_text(token + "\n")
        done = _prove_locally(config, token_file)
        assert done.returncode == 0, done.stderr
        expected = {f"{_pub(k).split()[0]} {_hmac(token, _pub(k))}" for k in keys}
        assert set(done.stdout.splitlines()) == expected
    rfc = subprocess.run(
        [
            "bash",
            "-c",
            PROOF_SCRIPT.split("[ -s ")[0] + 'hmac_sha256 "$3" "Hi There"',
            "bash",
            "config",
            "token",
            "0b" * 20,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert rfc.stdout.strip() == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"


def test_the_proof_script_waits_for_a_token_and_refuses_an_unfilled_slot(tmp_path: Path) -> None:
    need_tool("sha256sum")
    config, token_file = tmp_path / "sshd_config", tmp_path / "token"
    config.write_text("")
    assert _prove_locally(config, token_file).returncode == 75  # not written yet: try again
    token_file.write_text("PROVISIONER_HOSTKEY_TOKEN_SLOT\n")
    assert _prove_locally(config, token_file).returncode == 76  # the boot data carried none


# ---- against a real sshd ----------------------------------------------------------------------

NODE = "hk-0"


def _node(
    rig_: tuple[Sshd, object, Path], token_on_node: str, *, config_keys: list[Path] | None = None
) -> tuple[SshRemote, SshTarget, Path]:
    """An SshRemote that expects ``NODE``'s token, and the node's files (its token, its sshd config)."""
    server, runner, tmp = rig_
    token = "5a" * 32
    (tmp / "node-token").write_text(token_on_node + "\n")
    (tmp / "node-sshd_config").write_text("".join(f"HostKey {k}\n" for k in (config_keys or [server.host_key])))
    remote = SshRemote(
        runner.key_file,
        tmp / "known_hosts",
        hostkey_tokens={NODE: token},  # type: ignore[attr-defined]
        connect_timeout_s=5,
    )
    remote._ssh.node_paths = (str(tmp / "node-sshd_config"), str(tmp / "node-token"))
    return remote, SshTarget(host="127.0.0.1", port=server.port, node_name=NODE), tmp


def _secret_script(tmp: Path) -> str:
    return f"#!/bin/bash\necho munge-stand-in > {tmp / 'delivered'}\n"


def test_a_proven_key_is_pinned_and_the_pass_proceeds(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    server = rig[0]
    remote, target, tmp = _node(rig, "5a" * 32)
    remote.bootstrap(target, _secret_script(tmp))
    assert (tmp / "delivered").read_text() == "munge-stand-in\n"
    pinned = pinned_key(tmp / "known_hosts", host_pattern("127.0.0.1", server.port))
    assert pinned is not None and pinned.text() == _pub(server.host_key)
    assert "StrictHostKeyChecking=yes" in remote.argv(target, ["true"])
    assert remote.run(target, ["echo", "again"]).stdout == "again\n"


def test_a_machine_without_the_token_gets_nothing(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    remote, target, tmp = _node(rig, "77" * 32)  # answers, but cannot know this node's token
    with pytest.raises(
        HostKeyError,
        match=r"^hk-0: the SSH host key 127\.0\.0\.1:\d+ presented \(ssh-ed25519 "
        r"SHA256:\S+\) is not the one the node's boot token vouches for: nothing was sent",
    ):
        remote.bootstrap(target, _secret_script(tmp))
    assert not (tmp / "delivered").exists() and not (Path.home() / REMOTE_SCRIPT).exists()
    assert not (tmp / "known_hosts").exists() or (tmp / "known_hosts").read_text() == ""
    assert remote.run(target, ["true"]).returncode == 255  # later commands refuse it too


def test_a_relayed_proof_for_another_key_is_refused(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    """The answering sshd presents its own key, and the proof it relays is the real node's, made with
    the right token over the real node's key: the key presented is not the key proven."""
    server, _runner, tmp = rig
    real = tmp / "real-node" / "ssh_host_ed25519_key"
    real.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(real)], check=True, timeout=30)
    remote, target, tmp = _node(rig, "5a" * 32, config_keys=[real])
    with pytest.raises(HostKeyError, match="nothing was sent"):
        remote.bootstrap(target, _secret_script(tmp))
    assert not (tmp / "delivered").exists()
    assert pinned_key(tmp / "known_hosts", host_pattern("127.0.0.1", server.port)) is None


def test_later_commands_check_the_pinned_key_strictly(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    server = rig[0]
    remote, target, tmp = _node(rig, "5a" * 32)
    remote.bootstrap(target, "true\n")
    first = pinned_key(tmp / "known_hosts", host_pattern("127.0.0.1", server.port))
    server.stop()
    _host_key(tmp)  # the node answers with another key (its token file is unchanged)
    server.start()
    refused = remote.run(target, ["true"])
    assert refused.returncode == 255 and "Host key verification failed" in refused.stderr
    assert pinned_key(tmp / "known_hosts", host_pattern("127.0.0.1", server.port)) == first
    # Only the SSH pass proves again: a replacement node on the same address with a proven key.
    remote.bootstrap(target, _secret_script(tmp))
    again = pinned_key(tmp / "known_hosts", host_pattern("127.0.0.1", server.port))
    assert again is not None and again.text() == _pub(server.host_key) != (first.text() if first else "")
    assert (tmp / "known_hosts").read_text().count("127.0.0.1") == 1


def test_no_token_on_the_node_is_one_line_after_the_timeout(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    remote, target, tmp = _node(rig, "PROVISIONER_HOSTKEY_TOKEN_SLOT")
    with pytest.raises(
        BootstrapError,
        match=r"^hk-0: no proof of its SSH host key from 127\.0\.0\.1:\d+ after "
        r"\d+ s \(\S+ holds no host key token \(the boot data carried none\)\)$",
    ):
        remote.bootstrap(target, _secret_script(tmp))
    assert not (tmp / "delivered").exists()


def test_a_key_learnt_before_proofs_existed_is_still_checked_strictly(rig: tuple[Sshd, object, Path]) -> None:  # noqa: F811
    """A cluster brought up before host keys were proven: its known_hosts holds the key as ssh learnt it
    (hashed, as Debian's ssh_config asks) and its nodes hold no token. Later commands use that key
    strictly instead of asking for a proof the node cannot give; a changed key is still refused."""
    server = rig[0]
    remote, target, tmp = _node(rig, "PROVISIONER_HOSTKEY_TOKEN_SLOT")
    learnt = SshRemote(rig[1].key_file, tmp / "known_hosts")  # type: ignore[attr-defined]
    assert learnt.run(target, ["true"]).returncode == 0  # no tokens: learnt on first use
    subprocess.run(["ssh-keygen", "-H", "-f", str(tmp / "known_hosts")], check=True, capture_output=True, timeout=30)
    assert "127.0.0.1" not in (tmp / "known_hosts").read_text()  # hashed
    assert remote.run(target, ["echo", "old"]).stdout == "old\n"
    server.stop()
    _host_key(tmp)
    server.start()
    assert remote.run(target, ["true"]).returncode == 255
