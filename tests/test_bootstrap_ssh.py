"""The SSH bootstrap runner against a real OpenSSH sshd on 127.0.0.1 (temp config and host key).

The script run here is a stand-in with the rendered bootstrap's contract (step markers under a
state folder, resumable, the node name from PROVISIONER_NODE_NAME): the runner logs in as root
on this machine, so the real bootstrap (which configures the whole host) is proven on booted
nodes instead (tests/boot). Checked: key authentication with the cluster key, the host key learnt
into the per-cluster known_hosts on first contact and a changed one refused, the script copied,
run twice (the second run skips every step) and removed, failures raised with the output tail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.realize.bootstrap_ssh import (
    REMOTE_SCRIPT,
    BootstrapError,
    SshBootstrapper,
    SshTarget,
    write_key_file,
)
from provisioner.secrets import ClusterSecrets
from tests.conftest import need_tool, require_system

pytestmark = [pytest.mark.system]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _host_key(folder: Path) -> Path:
    key = folder / "ssh_host_ed25519_key"
    key.unlink(missing_ok=True)
    Path(f"{key}.pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    return key


class Sshd:
    def __init__(self, folder: Path, authorized_key: str) -> None:
        self.folder, self.port = folder, _free_port()
        (folder / "authorized_keys").write_text(authorized_key + "\n")
        (folder / "authorized_keys").chmod(0o600)
        self.host_key = _host_key(folder)
        self.config = folder / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\nPidFile {folder / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "Subsystem sftp internal-sftp\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir sshd insists on
        with (self.folder / "sshd.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [shutil.which("sshd") or "sshd", "-D", "-e", "-f", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError((self.folder / "sshd.log").read_text()) from None
                time.sleep(0.1)
        raise AssertionError("sshd did not listen")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Sshd, SshBootstrapper, Path]]:
    need_tool("sshd", "ssh", "ssh-keygen")
    if os.geteuid() != 0:
        (pytest.fail if require_system() else pytest.skip)("the test sshd logs in as root")
    secrets = ClusterSecrets.generate()
    server = Sshd(tmp_path, secrets.ssh_public_key or "")
    state = tmp_path / "cluster-state"
    runner = SshBootstrapper(write_key_file(secrets, state), state / "known_hosts")
    server.start()
    try:
        yield server, runner, tmp_path
    finally:
        server.stop()


def _stand_in(state: Path) -> str:
    """Two marker-guarded steps and a per-run log, like the rendered bootstrap."""
    return f"""#!/bin/bash
set -eu
STATE={state}
mkdir -p "$STATE"
echo "run as $(id -un) for $PROVISIONER_NODE_NAME" >> "$STATE/runs.log"
for step in 01-write 02-append; do
    if [ -e "$STATE/$step.done" ]; then echo "step $step: done earlier"; continue; fi
    echo "step $step"
    echo "$step" >> "$STATE/effects"
    [ ! -e "$STATE/fail-$step" ] || exit 3
    touch "$STATE/$step.done"
done
"""


def test_runs_twice_idempotently_and_learns_the_host_key(rig: tuple[Sshd, SshBootstrapper, Path]) -> None:
    server, runner, tmp = rig
    state = tmp / "node-state"
    target = SshTarget(host="127.0.0.1", port=server.port, node_name="boot-1")
    runner.wait_until_reachable(target, timeout_s=30, interval_s=0.5)
    first = runner.run(target, _stand_in(state))
    assert first.exit_code == 0 and "step 01-write\nstep 02-append" in first.output
    second = runner.run(target, _stand_in(state))
    assert "step 01-write: done earlier" in second.output and "step 02-append: done earlier" in second.output
    assert (state / "effects").read_text() == "01-write\n02-append\n"  # nothing ran twice
    assert (state / "runs.log").read_text() == "run as root for boot-1\n" * 2
    assert not (Path.home() / REMOTE_SCRIPT).exists()  # removed after each run
    found = subprocess.run(
        ["ssh-keygen", "-F", f"[127.0.0.1]:{server.port}", "-f", str(runner.known_hosts)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert Path(f"{server.host_key}.pub").read_text().split()[1] in found.stdout


def test_failure_is_raised_and_the_next_run_resumes(rig: tuple[Sshd, SshBootstrapper, Path]) -> None:
    server, runner, tmp = rig
    state = tmp / "node-state"
    state.mkdir()
    (state / "fail-02-append").touch()
    target = SshTarget(host="127.0.0.1", port=server.port, node_name="boot-1")
    with pytest.raises(BootstrapError, match=r"boot-1: bootstrap on 127.0.0.1 exited 3[\s\S]*step 02-append"):
        runner.run(target, _stand_in(state))
    (state / "fail-02-append").unlink()
    resumed = runner.run(target, _stand_in(state))
    assert "step 01-write: done earlier" in resumed.output and "step 02-append\n" in resumed.output
    assert (state / "effects").read_text() == "01-write\n02-append\n02-append\n"


def test_a_changed_host_key_is_refused(rig: tuple[Sshd, SshBootstrapper, Path]) -> None:
    server, runner, tmp = rig
    target = SshTarget(host="127.0.0.1", port=server.port, node_name="boot-1")
    runner.run(target, "true\n")
    server.stop()
    _host_key(tmp)
    server.start()
    with pytest.raises(BootstrapError, match="Host key verification failed"):
        runner.run(target, "true\n")


def test_wrong_key_and_no_server_fail_with_one_line(rig: tuple[Sshd, SshBootstrapper, Path]) -> None:
    server, runner, tmp = rig
    other = SshBootstrapper(write_key_file(ClusterSecrets.generate(), tmp / "other"), tmp / "other" / "known_hosts")
    target = SshTarget(host="127.0.0.1", port=server.port, node_name="boot-1")
    with pytest.raises(BootstrapError, match="Permission denied"):
        other.run(target, "true\n")
    closed = SshTarget(host="127.0.0.1", port=_free_port(), node_name="boot-1")
    with pytest.raises(BootstrapError, match=r"no SSH on 127\.0\.0\.1"):
        runner.wait_until_reachable(closed, timeout_s=0, interval_s=0)


@pytest.mark.parametrize(("field", "value"), [("host", "-oProxyCommand=x"), ("node_name", "a b"), ("user", "r;m")])
def test_targets_refuse_option_like_values(field: str, value: str) -> None:
    kwargs = {"host": "10.0.0.1", "node_name": "boot-1", "user": "root", field: value}
    with pytest.raises(ValueError):
        SshTarget(**kwargs)  # type: ignore[arg-type]
