"""The bootstrap as one self-contained shell script, for nodes where cloud-init does not run.

Container pods (RunPod, Vast.ai) ignore ``#cloud-config`` and have no systemd; Fluence GPU VMs
take no user data at all. For them the same bootstrap is a bash script, built from the role's
rendered cloud-init document (so the two cannot drift): it creates the ``ml`` user and
authorized keys, writes every ``write_files`` entry (contents embedded in base64, so no
rendered value is ever parsed by the shell), installs missing packages, then runs ``runcmd``.

* Resumable: each ``runcmd`` step leaves a marker under ``/var/lib/provisioner/bootstrap`` (named
  after the command, so the boot script's and the SSH pass's markers agree) once it succeeds and
  is skipped on the next run; a failed step is retried next time. Files
  and users are re-applied every run (idempotent). ``systemctl``, identity and the head's
  ``provisioner-k8s-apply`` (Kueue, manifests, topology node labels) steps always run.
* No systemd: ``systemctl`` becomes a shell function that starts munged, slurmctld, slurmd,
  slurmdbd, k3s and the ``provisioner-*`` units directly (pid files under /run), so a second
  run, or a container restart, leaves each daemon running exactly once.
* As a container entrypoint (PID 1) it stays in the foreground afterwards, reaping children.
* The node name comes from ``PROVISIONER_NODE_NAME`` (pod environment, or the SSH runner),
  else metadata/hostname as in cloud-init.

Exit status: 0 when every step succeeded (the GPU presence check only warns), 1 otherwise,
75 when another run holds the lock.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Any

from provisioner.render.views import ClusterView, render_template

# The cloud-config keys node.yaml.j2 may use; anything else must be taught to the script first.
KNOWN_KEYS = frozenset(
    {
        "preserve_hostname",
        "ssh_authorized_keys",
        "users",
        "package_update",
        "packages",
        "write_files",
        "runcmd",
        "final_message",
    }
)
STATE_DIR = "/var/lib/provisioner/bootstrap"
# Checks whose failure is logged, not fatal: later node validation drains such a node.
_WARN_ONLY = frozenset({"/usr/local/sbin/provisioner-gpu-check"})
# Idempotent steps run on every start: services (a restarted container has none running), the
# identity step (a container runtime may rewrite /etc/hosts on restart) and the head's Kubernetes
# apply (a later run, e.g. the SSH pass with the provider's topology, sets node labels k3s would not).
_ALWAYS = frozenset({"systemctl", "/usr/local/sbin/provisioner-identity", "/usr/local/sbin/provisioner-k8s-apply"})


@dataclass(frozen=True)
class FileView:
    path: str
    mode: str
    owner: str
    content_b64: str
    deferred: bool


@dataclass(frozen=True)
class StepView:
    id: str
    command: str  # one shell command line, every word quoted
    always: bool  # systemctl steps: idempotent, run on every start
    warn_only: bool


@dataclass(frozen=True)
class UserView:
    name: str
    uid: int
    groups: str
    shell: str
    sudo: str


def _quote(value: Any) -> str:
    return shlex.quote(str(value))


def _file(entry: dict[str, Any]) -> FileView:
    content = entry.get("content", "")
    raw = base64.b64decode(content) if entry.get("encoding") == "b64" else str(content).encode("utf-8")
    mode = str(entry.get("permissions", "0644"))
    owner = str(entry.get("owner", "root:root"))
    if not re.fullmatch(r"0?[0-7]{3,4}", mode) or not re.fullmatch(r"[a-z_][a-z0-9_-]*:[a-z_][a-z0-9_-]*", owner):
        raise ValueError(f"write_files entry {entry['path']!r}: unexpected permissions or owner")
    # One line, and a b64 entry's own text: a secret reads the same here as in the user data
    # (leak checks search for it verbatim).
    encoded = str(content) if entry.get("encoding") == "b64" else base64.b64encode(raw).decode("ascii")
    return FileView(
        path=_quote(entry["path"]), mode=mode, owner=owner, content_b64=encoded, deferred=bool(entry.get("defer"))
    )


def _step(command: list[Any] | str, seen: Counter[str]) -> StepView:
    """One runcmd step. Its id (the done-marker's name) comes from the command itself and how often the
    same command came before, not from its position: the boot script (no secrets, no control-plane
    steps) and the SSH pass's script differ in length, and a marker left by one must never skip a
    different step of the other."""
    if isinstance(command, str):
        line, first = f"sh -c {_quote(command)}", "sh"
    else:
        words = [str(word) for word in command]
        line, first = " ".join(_quote(word) for word in words), words[0]
    slug = re.sub(r"[^a-z0-9]+", "-", first.rsplit("/", 1)[-1].lower()).strip("-") or "step"
    seen[line] += 1
    digest = hashlib.sha256(f"{seen[line]}:{line}".encode()).hexdigest()[:10]
    always = first in _ALWAYS
    return StepView(id=f"{slug}-{digest}", command=line, always=always, warn_only=first in _WARN_ONLY)


def _users(doc: dict[str, Any]) -> list[UserView]:
    out = []
    for user in doc.get("users", []):
        if isinstance(user, dict):
            out.append(
                UserView(
                    name=_quote(user["name"]),
                    uid=int(user["uid"]),
                    groups=_quote(",".join(user["groups"])),
                    shell=_quote(user["shell"]),
                    sudo=_quote(f"{user['name']} {user['sudo']}"),
                )
            )
    return out


def render_bootstrap_script(view: ClusterView, role: str, user_data: str) -> str:
    """The bootstrap script for ``role``, equivalent to ``user_data`` (its rendered cloud-config).

    Pure. Raises ValueError when the document uses a cloud-config key the script cannot honour.
    The result holds the same secrets as ``user_data``.
    """
    import yaml  # here, not at the top: `status` and `down` import this module's package, render nothing

    doc = yaml.safe_load(user_data)
    unknown = sorted(set(doc) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"the bootstrap script cannot honour cloud-config key(s) {', '.join(unknown)}")
    files = [_file(entry) for entry in doc.get("write_files", [])]
    seen: Counter[str] = Counter()
    keys = [_quote(key) for key in doc.get("ssh_authorized_keys", [])]
    return render_template(
        "cloud-init/bootstrap.sh.j2",
        c=view,
        role=role,
        state_dir=STATE_DIR,
        users=_users(doc),
        authorized_keys=keys,
        packages=[_quote(p) for p in doc.get("packages", [])],
        files=[f for f in files if not f.deferred],
        deferred_files=[f for f in files if f.deferred],
        steps=[_step(cmd, seen) for cmd in doc.get("runcmd", [])],
    )


__all__ = ["KNOWN_KEYS", "STATE_DIR", "render_bootstrap_script"]
