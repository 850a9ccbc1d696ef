"""Run the rendered bootstrap script on a node over SSH (OpenSSH's ``ssh`` client).

For nodes that take no user data (Fluence GPU VMs) and any node whose user data did not run.
The cluster key (``ClusterSecrets.ssh_private_key``) authenticates. A node whose boot data carried
a host key token (``hostkey_tokens``) has its host key pinned by proof before anything else is
sent (``pin``; ``realize.hostkeys``) and checked strictly against the per-cluster ``known_hosts``
afterwards; any other node's key is learnt on first contact (``accept-new``). Either way a node
whose host key later changes is refused rather than trusted.

``SshBootstrapper.run`` copies the script (0600, through ssh's stdin) to the node, runs it as root (``sudo -n`` for
another login user) with ``PROVISIONER_NODE_NAME`` set, and removes it again. The script is
idempotent and resumable (``render.bootstrap``), so running it again after a failure or a
timeout is how to retry. Blocking; nothing here reads the script's secrets or logs them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from provisioner.capped import MAX_OUTPUT_BYTES, OVER_CAP, TIMED_OUT, run_capped
from provisioner.errors import ProvisionerError
from provisioner.realize import hostkeys
from provisioner.render.cloudinit import HOSTKEY_TOKEN_PATH
from provisioner.secrets import ClusterSecrets

_NODE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
REMOTE_SCRIPT = ".provisioner-bootstrap.sh"  # in the login user's home


class BootstrapError(ProvisionerError):
    """The bootstrap could not reach a node, or its script exited non-zero (output tail attached)."""


class HostKeyError(BootstrapError):
    """A node's SSH host key was not proven by its boot token: nothing was sent to it."""


@dataclass(frozen=True)
class SshTarget:
    host: str
    node_name: str
    user: str = "root"
    port: int = 22

    def __post_init__(self) -> None:
        if not _NODE_NAME.match(self.node_name):
            raise ValueError(f"bad node name {self.node_name!r}")
        if not _USER.match(self.user):
            raise ValueError(f"bad SSH user {self.user!r}")
        if not self.host or self.host.startswith("-") or any(c.isspace() for c in self.host):
            raise ValueError(f"bad SSH host {self.host!r}")


@dataclass(frozen=True)
class BootstrapResult:
    node_name: str
    exit_code: int
    output: str
    seconds: float


def write_key_file(secrets: ClusterSecrets, folder: Path) -> Path:
    """The cluster private key as ``folder/id_ed25519`` (0600, created before any byte is written)."""
    if secrets.ssh_private_key is None:
        raise BootstrapError("these cluster secrets have no SSH key pair; render again to create one")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "id_ed25519"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.ssh_private_key.get_secret_value())
    return path


class SshBootstrapper:
    """Runs bootstrap scripts over SSH with one cluster's key and known_hosts file."""

    def __init__(
        self,
        key_file: Path,
        known_hosts: Path,
        *,
        connect_timeout_s: int = 10,
        ssh: str = "ssh",
        extra_options: Sequence[str] = (),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        hostkey_tokens: Mapping[str, str] | None = None,
        node_paths: tuple[str, str] = ("/etc/ssh/sshd_config", HOSTKEY_TOKEN_PATH),
    ) -> None:
        self.key_file = key_file
        self.known_hosts = known_hosts
        self.connect_timeout_s = connect_timeout_s
        self.ssh = ssh
        self.extra_options = tuple(extra_options)
        self._sleep, self._clock = sleep, clock
        self.hostkey_tokens = dict(hostkey_tokens or {})
        self.node_paths = node_paths  # where a node keeps its sshd_config and its token

    def _options(self, known_hosts: Path, checking: str) -> list[str]:
        options = {
            "BatchMode": "yes",
            "IdentitiesOnly": "yes",
            "StrictHostKeyChecking": checking,
            "UserKnownHostsFile": str(known_hosts),
            "GlobalKnownHostsFile": "/dev/null",
            "HashKnownHosts": "no",
            "UpdateHostKeys": "no",
            "CheckHostIP": "no",
            "ConnectTimeout": str(self.connect_timeout_s),
            "ServerAliveInterval": "15",
            "LogLevel": "ERROR",
        }
        out = ["-i", str(self.key_file)]
        for key, value in options.items():
            out += ["-o", f"{key}={value}"]
        return out + list(self.extra_options)

    def ssh_argv(self, target: SshTarget, command: str) -> list[str]:
        """The ``ssh`` argv that runs ``command`` (one shell line, already quoted) on ``target``: the
        host key checked strictly for a node with a boot token (call ``pin`` first), else learnt on
        first use."""
        checking = "yes" if target.node_name in self.hostkey_tokens else "accept-new"
        return [
            self.ssh,
            *self._options(self.known_hosts, checking),
            "-p",
            str(target.port),
            f"{target.user}@{target.host}",
            command,
        ]

    def pin(self, target: SshTarget, *, timeout_s: float = 600, interval_s: float = 5, force: bool = False) -> None:
        """Make sure ``target``'s host key is pinned in the cluster's known_hosts by proof (see
        ``realize.hostkeys``), waiting up to ``timeout_s`` for the node to answer and to hold its token.
        No-op for a node without a token, or one pinned already unless ``force`` (the SSH pass forces
        it: a replacement node may answer on a pinned address with a new, proven key). Sends nothing
        but the proof script. Raises HostKeyError when the key presented is not proven (at once, not
        retried) and BootstrapError when no proof came within ``timeout_s``."""
        token = self.hostkey_tokens.get(target.node_name)
        pattern = hostkeys.host_pattern(target.host, target.port)
        if token is None or (not force and self._known(pattern)):
            return
        deadline = self._clock() + timeout_s
        while True:
            result, presented = self._prove(target)
            if result.returncode == 0 and presented is not None:
                if not hostkeys.proves(token, presented, hostkeys.parse_proofs(result.stdout)):
                    raise HostKeyError(
                        f"{target.node_name}: the SSH host key {target.host}:{target.port} presented "
                        f"({presented.type} {presented.fingerprint()}) is not the one the node's boot token "
                        "vouches for: nothing was sent (something in the path may be posing as the node)"
                    )
                hostkeys.write_pin(self.known_hosts, pattern, presented)
                return
            if result.returncode == hostkeys.EXIT_NO_TOKEN or self._clock() >= deadline:
                raise BootstrapError(
                    f"{target.node_name}: no proof of its SSH host key from {target.host}:"
                    f"{target.port} after {timeout_s:.0f} s ({_last_line(result.stderr)})"
                )
            self._sleep(interval_s)

    def _known(self, pattern: str) -> bool:
        """A key is on record for ``pattern``: pinned here, or (a cluster brought up before keys were
        proven) learnt on first use, perhaps hashed; either way later connections check it strictly."""
        if hostkeys.pinned_key(self.known_hosts, pattern) is not None:
            return True
        if not self.known_hosts.is_file():
            return False
        try:
            found = run_capped(["ssh-keygen", "-F", pattern, "-f", str(self.known_hosts)], timeout_s=30)
        except OSError:
            return False
        return found.returncode == 0 and bool(found.stdout.strip())

    def _prove(self, target: SshTarget) -> tuple[subprocess.CompletedProcess[str], hostkeys.PresentedKey | None]:
        """Run the proof script over one connection whose host key lands in an empty scratch
        known_hosts; (the result, the key that connection was authenticated with, if it got that far)."""
        sudo = "" if target.user == "root" else "sudo -n "
        command = f"{sudo}bash -s -- {' '.join(shlex.quote(path) for path in self.node_paths)}"
        with tempfile.TemporaryDirectory(prefix="provisioner-hostkey-") as folder:
            scratch = Path(folder) / "known_hosts"
            argv = [
                self.ssh,
                *self._options(scratch, "accept-new"),
                "-p",
                str(target.port),
                f"{target.user}@{target.host}",
                command,
            ]
            done = run_capped(argv, timeout_s=self.connect_timeout_s + 60, stdin=hostkeys.PROOF_SCRIPT.encode())
            result = subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)
            try:
                found = hostkeys.recorded_keys(scratch.read_text(encoding="ascii"))
            except (FileNotFoundError, UnicodeDecodeError):
                found = []
        return result, (found[0] if len(found) == 1 else None)

    def _ssh(
        self, target: SshTarget, command: str, timeout_s: float, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.pin(target, timeout_s=timeout_s)
        argv = self.ssh_argv(target, command)
        # Output is capped (provisioner.capped): a node printing without end is stopped, not kept.
        done = run_capped(argv, timeout_s=timeout_s, stdin=None if stdin is None else stdin.encode())
        if done.returncode == TIMED_OUT:
            raise BootstrapError(
                f"{target.node_name}: ssh to {target.host} timed out after {timeout_s:.0f} s; "
                "run the bootstrap again to resume"
            )
        if done.returncode == OVER_CAP:
            raise BootstrapError(
                f"{target.node_name}: ssh to {target.host} printed more than {MAX_OUTPUT_BYTES // 1024} KiB; "
                "stopped (run the bootstrap again to resume)"
            )
        return subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)

    def wait_until_reachable(self, target: SshTarget, timeout_s: float = 600, interval_s: float = 5) -> None:
        """Block until ``ssh true`` succeeds; BootstrapError with the last error after ``timeout_s``
        (HostKeyError at once for a host key its node does not prove)."""
        deadline = self._clock() + timeout_s
        self.pin(target, timeout_s=timeout_s, interval_s=interval_s)
        while True:
            result = self._ssh(target, "true", timeout_s=self.connect_timeout_s + 30)
            if result.returncode == 0:
                return
            if self._clock() >= deadline:
                raise BootstrapError(
                    f"{target.node_name}: no SSH on {target.host}:{target.port} after "
                    f"{timeout_s:.0f} s ({_last_line(result.stderr)})"
                )
            self._sleep(interval_s)

    def run(self, target: SshTarget, script: str, *, timeout_s: float = 3600, check: bool = True) -> BootstrapResult:
        """Copy ``script`` to ``target``, run it as root, remove it. Raises BootstrapError when the
        node cannot be reached or (``check``) the script exits non-zero. Idempotent when the script is."""
        started = self._clock()
        # Copied through ssh's stdin into a file created 0600 (umask 077): never on a command line.
        copied = self._ssh(target, f"umask 077 && cat > {REMOTE_SCRIPT}", self.connect_timeout_s + 120, script)
        if copied.returncode != 0:
            raise BootstrapError(
                f"{target.node_name}: cannot copy the bootstrap to {target.host}: {_last_line(copied.stderr)}"
            )
        sudo = "" if target.user == "root" else "sudo -n "
        command = (
            f"chmod 600 {REMOTE_SCRIPT}; {sudo}env PROVISIONER_NODE_NAME={shlex.quote(target.node_name)} "
            f"bash {REMOTE_SCRIPT}; rc=$?; rm -f {REMOTE_SCRIPT}; exit $rc"
        )
        result = self._ssh(target, command, timeout_s)
        output = result.stdout + result.stderr
        outcome = BootstrapResult(target.node_name, result.returncode, output, self._clock() - started)
        if check and result.returncode != 0:
            tail = "\n".join(output.rstrip().splitlines()[-15:])
            raise BootstrapError(
                f"{target.node_name}: bootstrap on {target.host} exited {result.returncode} "
                f"(run it again to resume):\n{tail}"
            )
        return outcome


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


__all__ = ["BootstrapError", "BootstrapResult", "HostKeyError", "SshBootstrapper", "SshTarget", "write_key_file"]
