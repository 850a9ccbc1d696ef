"""Commands on cluster nodes: the one seam between the lifecycle layer and SSH.

``Remote`` is what realize and burst call to reach a node; ``SshRemote`` implements it with
OpenSSH and the cluster key (``realize.bootstrap_ssh``); tests pass a stand-in that answers
from a table, so the fake-backed tests never open a socket to a node.

- ``run(target, argv)`` runs a command (each word quoted for the remote shell) and returns a
  ``CommandResult``; it never raises for a failed, missing or timed-out command (127/124).
- ``stream(target, argv, on_line)`` runs a command, hands each output line to ``on_line`` as
  it arrives and returns the exit status; on KeyboardInterrupt it stops the local ssh and
  re-raises (the caller tears the nodes down, which ends the remote side).
- ``bootstrap(target, script)`` waits until SSH answers, then runs the rendered bootstrap
  script as root (idempotent, resumable). Raises BootstrapError.

``SshRemote`` pins each node's host key by proof before its first command (``realize.hostkeys``);
``bootstrap`` proves it again every time (the SSH pass is where secrets travel), and a node that
cannot prove the key it presents gets nothing (HostKeyError; ``run`` answers 255 instead).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from provisioner.capped import MAX_LINE_BYTES, TIMED_OUT, capped_lines, run_capped
from provisioner.plan import Plan
from provisioner.providers.base import Node
from provisioner.realize.bootstrap_ssh import BootstrapError, SshBootstrapper, SshTarget, write_key_file
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.nodes import login_user
from provisioner.secrets import ClusterSecrets
from provisioner.validation.runner import CommandResult

CLUSTER_USER = "ml"
"""The user every bootstrap creates with the cluster key authorized: who runs sinfo and jobs."""


def ssh_target(node: Node, user: str, name: str | None = None) -> SshTarget | None:
    """Where SSH reaches ``node`` as ``user``: its ``ssh_endpoint`` (a container's published 22/tcp
    or a provider's proxy, else port 22 of its public, else private address). None without one."""
    endpoint = node.ssh_endpoint()
    if endpoint is None:
        return None
    return SshTarget(host=endpoint[0], port=endpoint[1], node_name=name or node.name, user=user)


def ssh_text(target: SshTarget) -> str:
    """``user@host``, as ``-p PORT user@host`` when the port is not 22: for messages and outputs."""
    login = f"{target.user}@{target.host}"
    return login if target.port == 22 else f"-p {target.port} {login}"


class Remote(Protocol):
    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult: ...

    def stream(
        self, target: SshTarget, argv: Sequence[str], on_line: Callable[[str], None], *, timeout_s: float | None = None
    ) -> int: ...

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None: ...


class SshRemote:
    """``Remote`` over OpenSSH with one cluster's key and known_hosts: host keys pinned by proof for
    the nodes in ``hostkey_tokens`` (node name -> boot token), learnt on first use for others."""

    def __init__(
        self,
        key_file: Path,
        known_hosts: Path,
        *,
        ssh: str = "ssh",
        extra_options: Sequence[str] = (),
        connect_timeout_s: int = 10,
        hostkey_tokens: Mapping[str, str] | None = None,
    ) -> None:
        self._ssh = SshBootstrapper(
            key_file,
            known_hosts,
            ssh=ssh,
            extra_options=extra_options,
            connect_timeout_s=connect_timeout_s,
            hostkey_tokens=hostkey_tokens,
        )
        self._children: set[subprocess.Popen[bytes]] = set()

    def for_other_cluster(self, plan: Plan, secrets: ClusterSecrets, folder: Path) -> SshRemote:
        """This remote (its ``ssh``, options and timeouts) for another cluster: that cluster's key and
        host key tokens, its known_hosts under ``folder``. A moved run's next cluster has its own key
        (``other_cluster``)."""
        ssh = self._ssh
        key_file = write_key_file(secrets, folder)
        return SshRemote(
            key_file,
            folder / "known_hosts",
            ssh=ssh.ssh,
            extra_options=ssh.extra_options,
            connect_timeout_s=ssh.connect_timeout_s,
            hostkey_tokens=hostkey_tokens(plan, secrets),
        )

    def stop(self) -> None:
        """Kill every ``stream`` still running (burst calls this before tearing the nodes down)."""
        for child in list(self._children):
            child.kill()

    @classmethod
    def for_cluster(cls, secrets: ClusterSecrets, folder: Path, *, plan: Plan, **options: object) -> SshRemote:
        """Write the cluster key (0600) and a known_hosts file under ``folder`` and use them, with the
        host key tokens of ``plan``'s nodes (``hostkeys.hostkey_tokens``)."""
        key_file = write_key_file(secrets, folder)
        return cls(key_file, folder / "known_hosts", hostkey_tokens=hostkey_tokens(plan, secrets), **options)  # type: ignore[arg-type]

    def pin(self, target: SshTarget, *, timeout_s: float = 60.0) -> None:
        """Pin ``target``'s host key by proof unless pinned already (``SshBootstrapper.pin``); call
        before handing ``argv`` to another program. Raises BootstrapError / HostKeyError."""
        self._ssh.pin(target, timeout_s=timeout_s, interval_s=2)

    def argv(self, target: SshTarget, argv: Sequence[str]) -> list[str]:
        return self._ssh.ssh_argv(target, shlex.join(argv))

    def shell_argv(self, target: SshTarget, words: Sequence[str]) -> list[str]:
        """The ``ssh`` argv for a command line as a person gives it to ssh: ``words`` joined by spaces
        and read by the remote shell (``'sinfo -N'`` runs sinfo with -N), where ``argv`` quotes each."""
        return self._ssh.ssh_argv(target, " ".join(words))

    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        try:
            self.pin(target, timeout_s=timeout_s)
        except BootstrapError as exc:
            return CommandResult(255, "", str(exc))
        command = self.argv(target, argv)
        try:  # a scheduler command's output is capped: a flooding node costs no memory (provisioner.capped)
            done = run_capped(command, timeout_s=timeout_s)
        except OSError as exc:
            return CommandResult(127, "", f"ssh: {exc.strerror or exc}")
        if done.returncode == TIMED_OUT:
            return CommandResult(124, done.stdout, f"ssh {target.node_name}: timed out after {timeout_s:g}s")
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def stream(
        self, target: SshTarget, argv: Sequence[str], on_line: Callable[[str], None], *, timeout_s: float | None = None
    ) -> int:
        try:
            self.pin(target)
        except BootstrapError as exc:
            on_line(str(exc))
            return 255
        command = self.argv(target, argv)
        try:
            child = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            on_line(f"ssh: {exc.strerror or exc}")
            return 127
        self._children.add(child)
        with child:  # closes the pipe however this ends
            try:
                assert child.stdout is not None
                # A job's log may be endless, but each line is cut at MAX_LINE_BYTES (provisioner.capped):
                # a remote printing without newlines costs no memory.
                for line, dropped in capped_lines(child.stdout):
                    on_line(line)
                    if dropped:
                        on_line(
                            f"ssh {target.node_name}: a line over {MAX_LINE_BYTES // 1024} KiB was cut "
                            f"({dropped} bytes dropped)"
                        )
                return child.wait(timeout=timeout_s)
            except BaseException:
                child.kill()
                child.wait()
                raise
            finally:
                self._children.discard(child)

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        self._ssh.pin(target, force=True)  # proven again right before what may carry secrets
        self._ssh.wait_until_reachable(target)
        self._ssh.run(target, script, timeout_s=timeout_s)


def other_cluster(remote: Remote, plan: Plan, secrets: ClusterSecrets, folder: Path) -> Remote:
    """``remote`` for ``plan``'s cluster, whose nodes accept only that cluster's key: an ``SshRemote``
    rekeyed (``for_other_cluster``); a stand-in without that method answers for every cluster."""
    rekey = getattr(remote, "for_other_cluster", None)
    if rekey is None:
        return remote
    found: Remote = rekey(plan, secrets, folder)
    return found


__all__ = ["CLUSTER_USER", "Remote", "SshRemote", "login_user", "other_cluster", "ssh_target", "ssh_text"]
