"""``provisioner up SPEC --local``: a dry run on this machine, before paying.

A *lab* is one background process (``python -m provisioner.local.lab``) that owns, for one
cluster: a network namespace with a bridge, the node image (built once, cached), the chosen
provider's fake (the project's fake with node-backed hooks, ``provisioner.local.backed``)
listening on the namespace's 127.0.0.1, and the systemd-nspawn nodes that fake launches. For
``burst --local --recover anywhere`` it serves every node-backed fake at once (each on its own
port, their nodes on the one bridge), so a move can land on another provider's fake.

The CLI that uses a lab (``up --local``, then ``status``, ``ssh``, ``outputs``, ``down`` of that
cluster) enters its namespace (setns(2) on the main thread, before any thread or ``ssh`` starts)
and points ``PROVISIONER_<P>_API_URL``/``_API_KEY`` of each provider it serves at its fake; from
there the engine runs as it does against the provider. ``down`` stops the lab (SIGTERM to its pid)
once nothing it serves is left: the lab stops every node by pid, the servers, and deletes the namespace.

Where the lab is recorded (and how a moved cluster finds it): provisioner.local.labrecord; its log
beside its record. Blocking calls say so; every failure is a ``UsageError`` (``--local``) or a
``StackError`` naming the log.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provisioner.errors import StackError, UsageError
from provisioner.local import labrecord
from provisioner.local.labrecord import fakes_of
from provisioner.termtext import say

API_KEY = "local-dry-run"  # what the lab's fake accepts; no provider ever sees it
NETWORK = "10.80.0.0/24"
OPERATOR = "10.80.0.254"  # the namespace's own address on the bridge: where the CLI's ssh comes from
TOOLS = ("systemd-nspawn", "mmdebstrap", "ip", "nsenter", "mount")
LOCAL_RANKED = 50  # options ranked for --local: the first it can boot may rank below the top three
START_TIMEOUT_S = 1200.0  # the first run builds the node image (minutes)
# Stand-in NVMe disks per VM (1 GiB sparse files on loop devices): the rendered checkpoint script
# makes a RAID0 of them where the kernel has md, else formats the first (provisioner.local.nodes).
NVME_DISKS = 3


def backed_fakes() -> dict[str, Any]:
    from provisioner.local.backed import BackedFluenceFake, BackedLambdaFake, BackedRunPodFake

    return {fake.provider: fake for fake in (BackedFluenceFake, BackedLambdaFake, BackedRunPodFake)}


def require_host(*, euid: int | None = None, platform: str = sys.platform, which: Any = shutil.which) -> None:
    """Refuse in one line (UsageError on ``--local``) unless this is Linux, we are root and the
    tools a lab runs are on PATH."""
    missing = []
    if platform != "linux":
        missing.append(f"Linux (this is {platform})")
    if (os.geteuid() if euid is None else euid) != 0:
        missing.append("root")
    missing += [tool for tool in TOOLS if which(tool) is None]
    if missing:
        raise UsageError(
            f"a local dry run boots nodes with systemd-nspawn and needs: {', '.join(missing)}", option="--local"
        )


def local_options(plans: list[Any], max_tries: int) -> list[Any]:
    """The ranked options a lab can boot: those of the best-ranked provider that has a node-backed
    fake, bought in a way that fake boots (its ``purchases``: instances, pods, RunPod's Instant
    Clusters), at most ``max_tries``. UsageError naming the ranked providers when there is none."""
    fakes = backed_fakes()
    backed = [
        plan
        for plan in plans
        if plan.option.provider in fakes and plan.option.purchase in fakes[plan.option.provider].purchases
    ]
    if not backed:
        ranked = ", ".join(dict.fromkeys(f"{p.option.provider} ({p.option.purchase.value})" for p in plans))
        bootable = ", ".join(
            f"{name} ({'/'.join(sorted(p.value for p in fake.purchases))})" for name, fake in sorted(fakes.items())
        )
        raise UsageError(
            f"a local dry run boots {bootable} behind that provider's fake; this spec's options are "
            f"{ranked}: allow one of {', '.join(sorted(fakes))} in providers.allow",
            option="--local",
        )
    provider = backed[0].option.provider
    return [plan for plan in backed if plan.option.provider == provider][:max_tries]


_record_path = labrecord.record_path
_alive = labrecord.alive
lab_for = labrecord.lab_for


def _said(providers: list[str]) -> str:
    if len(providers) == 1:
        return f"the {providers[0]} fake and its nodes"
    return f"the {', '.join(providers[:-1])} and {providers[-1]} fakes and their nodes"


def start(cluster_id: str, provider: str | list[str], emit: Any = None) -> dict[str, Any]:
    """The cluster's lab serving ``provider``'s fake (or each of a list's), started unless it runs.
    Blocks until its fakes answer (the first run builds the node image: minutes); raises StackError
    naming the log when it cannot start, UsageError when the running lab lacks one of them."""
    providers = [provider] if isinstance(provider, str) else sorted(provider)
    running = lab_for(cluster_id)
    if running is not None:
        lacking = [name for name in providers if name not in fakes_of(running)]
        if lacking:
            raise UsageError(
                f"the local lab of {cluster_id} runs without a fake for {', '.join(lacking)}: "
                f"provisioner down {cluster_id} stops it, then run this again",
                option="--local",
            )
        return running
    folder = labrecord.labs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{cluster_id}.log"
    if emit is not None:
        emit("local", message=f"local: starting {_said(providers)} (log: {log})", log=str(log))
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "provisioner.local.lab", cluster_id, ",".join(providers)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    began = time.monotonic()
    deadline, offset, said = began + START_TIMEOUT_S, log.stat().st_size, began
    while time.monotonic() < deadline:
        if emit is not None:  # the lab's steps (the first run builds the node image: minutes), as they come
            offset, lines = relay(log, offset)
            for line in lines:
                emit("local", message=f"local: {line}")
            if lines:
                said = time.monotonic()
            elif time.monotonic() - said >= PROGRESS_S:
                said = time.monotonic()
                emit("local", message=f"local: still starting ({said - began:.0f} s; log: {log})")
        record = lab_for(cluster_id)
        if record is not None and record["pid"] == proc.pid:
            return record
        if proc.poll() is not None:
            raise StackError(f"the local lab of {cluster_id} exited {proc.returncode} before it was ready: see {log}")
        time.sleep(0.5)
    proc.terminate()
    raise StackError(f"the local lab of {cluster_id} was not ready after {START_TIMEOUT_S:.0f} s: see {log}")


PROGRESS_S = 30.0
"""How long ``start`` stays silent before it says it is still waiting."""


def relay(log: Path, offset: int) -> tuple[int, list[str]]:
    """The whole lines ``log`` gained past ``offset`` (stripped, non-empty, each at most 200
    characters) and the offset after them; a partial last line waits for its end."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return offset, []
    whole = data[: data.rfind(b"\n") + 1]
    lines = [line.decode("utf-8", "replace").strip()[:200] for line in whole.splitlines()]
    return offset + len(whole), [line for line in lines if line]


def enter(cluster_id: str) -> bool:
    """Put this process (its main thread, so every thread and ``ssh`` it starts later) into the
    cluster's lab, point each served provider's variables at its fake and seal the process to them
    (providers.seal: no other provider is asked). False when none runs."""
    record = lab_for(cluster_id)
    if record is None:
        return False
    from provisioner.local.nodes import join_netns

    try:
        join_netns(f"/run/netns/{record['netns']}")
    except OSError as exc:
        raise StackError(f"cannot enter the local lab of {cluster_id} ({exc.strerror})") from None
    from provisioner.providers.seal import seal_to

    fakes = fakes_of(record)
    for provider, url in fakes.items():
        prefix = f"PROVISIONER_{provider.upper()}"
        os.environ[f"{prefix}_API_URL"] = url
        os.environ[f"{prefix}_API_KEY"] = API_KEY
    seal_to(cluster_id, fakes)  # and no other provider, whatever is set
    return True


def release(cluster_id: str, in_use: Callable[[str], bool]) -> bool:
    """``down`` of ``cluster_id``: stop its lab (``stop``) unless another cluster the lab serves is
    ``in_use`` (a run's other cluster still up); then only ``cluster_id``'s alias is dropped. False
    when the lab keeps running, True when it stopped or none ran. Blocking."""
    record = lab_for(cluster_id)
    if record is None:
        return True
    owner = str(record["cluster"])
    if any(other != cluster_id and in_use(other) for other in labrecord.served(owner)):
        if cluster_id != owner:
            _record_path(cluster_id).unlink(missing_ok=True)
        return False
    stop(owner)
    return True


def stop(cluster_id: str, timeout_s: float = 120) -> bool:
    """Stop the lab serving ``cluster_id`` (SIGTERM to its pid; it stops its nodes and deletes its
    namespace) and wait for it; its record and every alias go. Blocking; False when none ran."""
    record = lab_for(cluster_id)
    if record is None:
        return False
    cluster_id = str(record["cluster"])
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while not _ended(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not _ended(pid):
        raise StackError(f"the local lab of {cluster_id} (pid {pid}) did not stop in {timeout_s:.0f} s")
    labrecord.forget(cluster_id)
    return True


def _ended(pid: int) -> bool:
    """Whether the lab process ``pid`` has exited: reaped here when it is this process's child (``burst
    --local`` started it and stops it: an exited child stays a zombie that signal 0 still finds)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:  # not our child: another command started it
        pass
    return not _alive(pid)


def local_plans(plans: list[Any], emit: Any, max_tries: int = 3, every: bool = False) -> list[Any]:
    """``up --local``: the options a lab can boot (``local_options``), fitted to this machine, with
    the cluster's lab started and this process inside it. ``every``: the lab serves every
    node-backed fake (``burst --local --recover anywhere``), not only the chosen option's. Blocking
    (see ``start``)."""
    fitted = [fit_to_host(plan) for plan in local_options(plans, max_tries)]
    cluster_id = fitted[0].cluster_id
    start(cluster_id, sorted(backed_fakes()) if every else fitted[0].option.provider, emit)
    enter(cluster_id)
    return fitted


def fit_to_host(plan: Any) -> Any:
    """``plan`` with each node the size of this machine's (CPUs, whole GiB of memory, no local
    NVMe): the nodes are containers on it, and slurmd drains a node that has fewer CPUs or less
    memory than its slurm.conf says. SSH is allowed from the lab's own address (where this
    machine's ``ssh`` comes from), not the spec's ``access.allowed_cidrs``. Everything else
    (nodes, provider, bootstrap, control plane, the rendered files) is the plan's."""
    kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")
    )
    offer = plan.option.offer.model_copy(
        update={"vcpus": os.cpu_count() or 1, "memory_gib": kib // (1024 * 1024), "local_nvme_gib": 0}
    )
    access = plan.spec.access.model_copy(update={"allowed_cidrs": [f"{OPERATOR}/32"]})
    return plan.model_copy(
        update={
            "option": plan.option.model_copy(update={"offer": offer}),
            "spec": plan.spec.model_copy(update={"access": access}),
        }
    )


def image_cache() -> Path:
    override = os.environ.get("PROVISIONER_BOOT_IMAGE_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("gpu-provisioner")) / "node-image"


def serve_lab(cluster_id: str, providers: list[str]) -> None:
    """The lab process: build or reuse the image, make the namespace, serve each provider's fake
    inside it (one pool of nodes, each fake its own port), record itself, and wait for SIGTERM; then
    stop every node, the servers and the namespace."""
    import tempfile

    from provisioner.local.backed import Machines
    from provisioner.local.image import build_image
    from provisioner.local.nodes import Netns
    from provisioner.testing.fakes.base import serve

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    image = build_image(image_cache(), say=lambda line: say(f"lab {cluster_id}: {line}", flush=True))
    workdir = Path(tempfile.mkdtemp(prefix=f"provisioner-local-{cluster_id}-", dir="/var/tmp"))
    netns = Netns(f"pvl{os.getpid()}", (f"{OPERATOR}/24",))
    machines = Machines(image, workdir, netns, network=NETWORK, nvme_disks=NVME_DISKS)
    servers: dict[str, Any] = {}
    try:
        for provider in providers:
            fake = backed_fakes()[provider](machines, api_key=API_KEY)
            with netns.entered():
                servers[provider] = serve(fake)
        fakes = {provider: server.url for provider, server in servers.items()}
        first = providers[0]
        record = {
            "pid": os.getpid(),
            "netns": netns.name,
            "url": fakes[first],
            "provider": first,
            "fakes": fakes,
            "cluster": cluster_id,
            "network": NETWORK,
            "workdir": str(workdir),
        }
        labrecord.write(cluster_id, record)
        for provider, url in fakes.items():
            say(f"lab {cluster_id}: {provider} fake at {url} in netns {netns.name}", flush=True)
        while not stopping.wait(1.0):
            pass
    finally:
        for server in servers.values():
            server.stop()
        left = machines.close()
        netns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
        _record_path(cluster_id).unlink(missing_ok=True)
        say(f"lab {cluster_id}: stopped; left running: {left or 'nothing'}", flush=True)


if __name__ == "__main__":
    serve_lab(sys.argv[1], sys.argv[2].split(","))
