"""SSH host keys pinned by proof, not trusted on first use.

The first SSH connection to a node (the SSH pass) carries the munge key and the k3s token, so the
tool must know it reaches the node it bought before it sends anything. Each node's boot data (user
data, a pod's start command, Vast's ``onstart``) carries a boot token of its own,
``hostkey_token(secrets, cluster, node)``: an HMAC of the node's name keyed by a hash of the
cluster's private SSH key, which never leaves this machine, so the tool can compute it again
anytime and a token tells nothing about another node's or the key. The token is no reusable
secret: it only vouches for a host key at first contact (anyone holding the provider's API key can
read it from the boot data; docs/security.md says what follows, per provider).

First contact (``SshBootstrapper.pin``): ssh with ``StrictHostKeyChecking=accept-new`` into an
empty scratch known_hosts, which so records the host key that this very connection was
authenticated with; over that connection, as root, ``PROOF_SCRIPT`` prints
``HMAC-SHA256(token, "<type> <base64>")`` for each host key sshd serves. The tool computes the
same over the recorded key and only on a match writes it to the cluster's known_hosts; every
later connection checks it strictly (``StrictHostKeyChecking=yes``). A machine in the path
without the token cannot make the proof for its own key: the pass stops with one line and sends
nothing. Nodes whose boot data cannot carry a token (Fluence GPU VMs take none) are learnt on
first use (``accept-new``), said by the SSH pass as a warning.

Pure except ``write_pin`` / ``pinned_key`` (the known_hosts file).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from provisioner.plan import Plan
from provisioner.realize.nodes import user_data_path
from provisioner.secrets import ClusterSecrets

EXIT_NO_TOKEN_YET = 75  # the boot data has not written the token yet: try again
EXIT_NO_TOKEN = 76  # the boot data carried none (the slot was never filled): nothing can prove the key
_KEY_TYPE = re.compile(r"^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa|ssh-dss)$")
_BLOB = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

# Run as root on the node over the connection being checked; args: sshd_config, token file.
# bash + coreutils only (a container image may lack python3 and openssl); the token never appears
# on a command line (printf is a builtin, bytes go through pipes).
PROOF_SCRIPT = r"""set -u
config=$1 token_file=$2
hmac_sha256() {  # KEY_HEX MESSAGE: hex HMAC-SHA256 (RFC 2104)
    local key=$1 msg=$2 ipad='' opad='' inner escaped i byte
    while [ ${#key} -lt 128 ]; do key+=0; done
    for ((i = 0; i < 128; i += 2)); do
        byte=$((16#${key:i:2}))
        printf -v escaped '\\x%02x' $((byte ^ 0x36)); ipad+=$escaped
        printf -v escaped '\\x%02x' $((byte ^ 0x5c)); opad+=$escaped
    done
    inner=$({ printf "$ipad"; printf '%s' "$msg"; } | sha256sum)
    escaped=''
    for ((i = 0; i < 64; i += 2)); do escaped+="\\x${inner:i:2}"; done
    inner=$({ printf "$opad"; printf "$escaped"; } | sha256sum)
    echo "${inner:0:64}"
}
[ -s "$token_file" ] || { echo "no host key token in $token_file yet" >&2; exit 75; }
read -r token < "$token_file"
if [ ${#token} -ne 64 ] || [[ $token == *[!0-9a-f]* ]]; then
    echo "$token_file holds no host key token (the boot data carried none)" >&2; exit 76
fi
sshd=$(command -v sshd || echo /usr/sbin/sshd)
keys=()
while read -r word value; do
    [ "$word" = hostkey ] && keys+=("$value")
done < <("$sshd" -T -f "$config" 2>/dev/null)
[ ${#keys[@]} -gt 0 ] || keys=(/etc/ssh/ssh_host_*_key)
for key in "${keys[@]}"; do
    if [ -r "$key.pub" ]; then read -r type blob _ < "$key.pub"
    else read -r type blob _ < <(ssh-keygen -y -f "$key" 2>/dev/null) || continue; fi
    [ -n "${blob:-}" ] && echo "$type $(hmac_sha256 "$token" "$type $blob")"
done
"""


@dataclass(frozen=True)
class PresentedKey:
    """One host key as an SSH server presented it (its known_hosts type and base64 blob)."""

    type: str
    blob: str

    def __post_init__(self) -> None:
        if not _KEY_TYPE.match(self.type) or not _BLOB.match(self.blob):
            raise ValueError("not an SSH host key")

    def text(self) -> str:
        return f"{self.type} {self.blob}"

    def fingerprint(self) -> str:
        """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
        digest = hashlib.sha256(base64.b64decode(self.blob)).digest()
        return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def hostkey_token(secrets: ClusterSecrets, cluster_id: str, node_name: str) -> str | None:
    """``node_name``'s boot token (64 hex digits), or None when the secrets hold no SSH key pair."""
    if secrets.ssh_private_key is None:
        return None
    seed = hashlib.sha256(
        b"provisioner host key token v1\0" + secrets.ssh_private_key.get_secret_value().encode("ascii")
    ).digest()
    return hmac.new(seed, f"{cluster_id}\0{node_name}".encode(), hashlib.sha256).hexdigest()


def hostkey_tokens(plan: Plan, secrets: ClusterSecrets) -> dict[str, str]:
    """Node name -> boot token, for every node of ``plan`` whose boot data carries one (cloud-init
    user data or an entrypoint script; not a node bootstrapped over SSH only)."""
    out = {}
    for node in plan.nodes:
        token = hostkey_token(secrets, plan.cluster_id, node.name)
        if token is not None and user_data_path(node.bootstrap, node.role) is not None:
            out[node.name] = token
    return out


def proof(token: str, key: PresentedKey) -> str:
    """What a node holding ``token`` answers for ``key``: hex HMAC-SHA256 of ``"<type> <base64>"``."""
    return hmac.new(bytes.fromhex(token), key.text().encode("ascii"), hashlib.sha256).hexdigest()


def parse_proofs(output: str) -> dict[str, str]:
    """``PROOF_SCRIPT``'s lines as key type -> hex proof (malformed lines ignored)."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 2 and _KEY_TYPE.match(words[0]) and _HEX64.match(words[1]):
            found.setdefault(words[0], words[1])
    return found


def proves(token: str, key: PresentedKey, proofs: Mapping[str, str]) -> bool:
    """True when ``proofs`` (what the node answered) holds ``key``'s proof under ``token``."""
    claimed = proofs.get(key.type)
    return claimed is not None and hmac.compare_digest(claimed, proof(token, key))


def host_pattern(host: str, port: int) -> str:
    """The known_hosts name OpenSSH looks up for ``host``:``port``."""
    return host if port == 22 else f"[{host}]:{port}"


def recorded_keys(text: str) -> list[PresentedKey]:
    """The host keys of a known_hosts text (markers and malformed lines skipped)."""
    keys = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and not words[0].startswith(("#", "@")):
            try:
                keys.append(PresentedKey(words[1], words[2]))
            except ValueError:
                continue
    return keys


def pinned_key(known_hosts: Path, pattern: str) -> PresentedKey | None:
    """The key pinned for ``pattern`` in ``known_hosts`` (written by ``write_pin``), else None."""
    try:
        text = known_hosts.read_text(encoding="ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == pattern:
            try:
                return PresentedKey(words[1], words[2])
            except ValueError:
                return None
    return None


def write_pin(known_hosts: Path, pattern: str, key: PresentedKey) -> None:
    """Pin ``key`` for ``pattern``: replace that name's lines in ``known_hosts`` (0600, atomic)."""
    try:
        lines = known_hosts.read_text(encoding="ascii").splitlines()
    except FileNotFoundError:
        lines = []
    kept = [line for line in lines if not line.split() or line.split()[0] != pattern]
    known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = known_hosts.with_name(f".{known_hosts.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write("".join(f"{line}\n" for line in kept) + f"{pattern} {key.text()}\n")
    os.replace(tmp, known_hosts)


__all__ = [
    "EXIT_NO_TOKEN",
    "EXIT_NO_TOKEN_YET",
    "PROOF_SCRIPT",
    "PresentedKey",
    "host_pattern",
    "hostkey_token",
    "hostkey_tokens",
    "parse_proofs",
    "pinned_key",
    "proof",
    "proves",
    "recorded_keys",
    "write_pin",
]
