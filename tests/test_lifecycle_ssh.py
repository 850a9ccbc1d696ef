"""``SshRemote`` (what realize and burst reach nodes through) against a real sshd on 127.0.0.1.

Checked: argv words reach the remote command quoted (no expansion on the node), captured
results and exit codes, a streamed job's lines in order with its exit status, ``stop()``
ending a stream that would run forever, and the bootstrap path (wait for SSH, run as root).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.remote import SshRemote
from provisioner.secrets import ClusterSecrets
from tests.test_bootstrap_ssh import Sshd, rig  # noqa: F401  (rig: the sshd fixture)
from tests.test_lifecycle_support import runpod_plan

pytestmark = [pytest.mark.system]


@pytest.fixture
def remote(rig: tuple[Sshd, object, Path]) -> Iterator[tuple[SshRemote, SshTarget]]:  # noqa: F811
    server, runner, tmp = rig
    key_file = runner.key_file  # type: ignore[attr-defined]
    yield (
        SshRemote(key_file, tmp / "remote-known-hosts"),
        SshTarget(host="127.0.0.1", port=server.port, node_name="lc-0"),
    )


def test_run_quotes_every_word_and_reports_exit_codes(remote: tuple[SshRemote, SshTarget], tmp_path: Path) -> None:
    ssh, target = remote
    done = ssh.run(target, ["printf", "%s|", "a b", "$(id -u)", "it's"])
    assert done.ok and done.stdout == "a b|$(id -u)|it's|"
    failed = ssh.run(target, ["sh", "-c", "echo oops >&2; exit 7"])
    assert failed.returncode == 7 and failed.brief() == "oops"


def test_stream_hands_over_lines_and_returns_the_status(remote: tuple[SshRemote, SshTarget]) -> None:
    ssh, target = remote
    lines: list[str] = []
    code = ssh.stream(target, ["sh", "-c", "echo one; echo two >&2; echo three; exit 3"], lines.append)
    assert code == 3 and sorted(lines) == ["one", "three", "two"]  # stderr is its own channel over SSH
    assert lines.index("one") < lines.index("three")


def test_stop_ends_a_stream(remote: tuple[SshRemote, SshTarget]) -> None:
    ssh, target = remote
    lines: list[str] = []
    result: list[int] = []
    worker = threading.Thread(
        target=lambda: result.append(ssh.stream(target, ["sh", "-c", "echo started; sleep 600"], lines.append))
    )
    worker.start()
    deadline = time.monotonic() + 30
    while not lines and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lines == ["started"]
    ssh.stop()
    worker.join(timeout=30)
    assert not worker.is_alive() and result and result[0] != 0


def test_for_cluster_writes_a_0600_key(tmp_path: Path) -> None:
    secrets = ClusterSecrets.generate()
    ssh = SshRemote.for_cluster(secrets, tmp_path / "ssh", plan=runpod_plan(tmp_path))
    argv = ssh.argv(SshTarget(host="203.0.113.5", node_name="lc-0", user="ml"), ["sinfo"])
    key = Path(argv[argv.index("-i") + 1])
    assert key.stat().st_mode & 0o777 == 0o600 and argv[-2:] == ["ml@203.0.113.5", "sinfo"]
    assert "PRIVATE KEY" not in " ".join(argv)


def test_for_other_cluster_keeps_the_ssh_and_switches_key_known_hosts_and_tokens(tmp_path: Path) -> None:
    """A moved run's next cluster (lifecycle/recover.py): the same ssh program and options, that cluster's
    key (0600, its own folder), known_hosts and host key tokens."""
    from provisioner.realize.hostkeys import hostkey_tokens

    first, second = ClusterSecrets.generate(), ClusterSecrets.generate()
    plan = runpod_plan(tmp_path)
    ssh = SshRemote(tmp_path / "first-key", tmp_path / "first-known", ssh="/opt/ssh-in-netns", extra_options=("-4",))
    other = ssh.for_other_cluster(plan, second, tmp_path / "second")
    argv = other.argv(SshTarget(host="203.0.113.5", node_name=plan.nodes[0].name, user="ml"), ["true"])
    key = Path(argv[argv.index("-i") + 1])
    assert argv[0] == "/opt/ssh-in-netns" and "-4" in argv and key.parent == tmp_path / "second"
    assert key.read_text() == second.ssh_private_key.get_secret_value()  # type: ignore[union-attr]
    assert key.stat().st_mode & 0o777 == 0o600 and first.ssh_private_key != second.ssh_private_key
    assert f"UserKnownHostsFile={tmp_path / 'second' / 'known_hosts'}" in argv
    assert other._ssh.hostkey_tokens == hostkey_tokens(plan, second) != {}
