"""Fake providers whose instances are real machines: each instance a fake launches boots as a
systemd-nspawn node (tests/boot/nodes.py) on the test bridge, and terminating it stops that node.

``Machines`` owns the nodes: it hands each instance the next address of the bridge's /24 and
boots it; ``stop`` powers a node off by PID in a background thread (a provider's terminate call
returns before the machine is gone) and ``settle`` waits for those stops. The fakes below are the
project's fakes with three hooks each (launch, listing, terminate); their API answers, validation
and faults are unchanged, except that the instance's addresses are its node's:

- ``BackedLambdaFake``: a VM booting the launch's ``user_data`` from a NoCloud seed, with the
  hostname the launch asked for (Lambda's ``hostname`` field) or, as Lambda names its VMs,
  the address with dashes. ``ip`` and ``private_ip`` both report the node's bridge address.
  ``POST /_fake/reclaim {"instance_id": ID}`` reclaims one out of process (a test of a lab's move).
- ``BackedRunPodFake``: a container pod running the pod's start command (``args``) with its
  environment, hostname the pod id, as RunPod does. SSH (port 22) reports the bridge address.
  An Instant Cluster's member pods are such nodes too; a member's cluster address (RunPod's
  overlay) is its bridge address, its container gets ``NODE_RANK`` (its rank, as RunPod sets it;
  without it every member ran rank 0's boot script), and deleting the cluster stops them.
- ``BackedFluenceFake``: a GPU VM that takes no user data: its image only authorizes the
  deploy's SSH key for ``ubuntu`` (what Fluence's image does with ``ssh_key``); everything else
  comes over SSH. ``domain`` reports the node's bridge address.

Blocking only for the few milliseconds a boot takes to start; everything else is background.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.capabilities import Purchase
from provisioner.local.nodes import Machine, Netns, boot, boot_pod, left_running
from provisioner.testing.fakes.fluence import FluenceFake
from provisioner.testing.fakes.lambda_ import LambdaFake
from provisioner.testing.fakes.runpod import RunPodFake


@dataclass
class Machines:
    """The nodes behind one test's fake instances, on ``netns``'s bridge in ``network``."""

    image: Path
    workdir: Path
    netns: Netns
    network: str = "10.78.0.0/24"
    nvme_disks: int = 0  # stand-in NVMe disks per VM (provisioner.local.nodes.boot)
    nodes: dict[str, Machine] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    stopped: list[Machine] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _hosts: Any = None

    def __post_init__(self) -> None:
        self._hosts = ipaddress.ip_network(self.network).hosts()
        self.lock = threading.Lock()

    @property
    def prefix_len(self) -> int:
        return ipaddress.ip_network(self.network).prefixlen

    def allocate(self, instance_id: str) -> str:
        """The instance's address on the bridge (the same one on every call)."""
        with self.lock:
            if instance_id not in self.addresses:
                self.addresses[instance_id] = str(next(self._hosts))
            return self.addresses[instance_id]

    def boot_vm(self, instance_id: str, user_data: str, hostname: str) -> Machine:
        address = self.allocate(instance_id)
        machine = boot(
            self.image,
            self.workdir,
            self.netns,
            f"i-{instance_id[:12]}",
            f"{address}/{self.prefix_len}",
            user_data,
            hostname=hostname,
            nvme_disks=self.nvme_disks,
        )
        with self.lock:
            self.nodes[instance_id] = machine
        return machine

    def boot_pod(self, instance_id: str, start_command: str, env: dict[str, str]) -> Machine:
        address = self.allocate(instance_id)
        machine = boot_pod(
            self.image,
            self.workdir,
            self.netns,
            f"p-{instance_id[:12]}",
            f"{address}/{self.prefix_len}",
            start_command,
            env,
            hostname=instance_id,
        )
        with self.lock:
            self.nodes[instance_id] = machine
        return machine

    def stop(self, instance_id: str) -> None:
        """Power the instance's node off in the background (no-op for an unknown instance)."""
        with self.lock:
            machine = self.nodes.pop(instance_id, None)
            if machine is None:
                return
            self.stopped.append(machine)
            thread = threading.Thread(target=machine.stop, name=f"stop-{machine.name}", daemon=True)
            self._threads.append(thread)
        thread.start()

    def settle(self, timeout_s: float = 60) -> None:
        """Wait for every stop asked so far."""
        for thread in list(self._threads):
            thread.join(timeout_s)

    def running(self) -> list[str]:
        """Instance ids whose node still runs (not stopped through the fake)."""
        with self.lock:
            return [iid for iid, machine in self.nodes.items() if machine.proc.poll() is None]

    def close(self) -> list[int]:
        """Stop every node; return the PIDs still alive afterwards (should be none)."""
        for instance_id in list(self.nodes):
            self.stop(instance_id)
        self.settle()
        return left_running(self.stopped)


class BackedLambdaFake(LambdaFake):
    """``LambdaFake`` whose instances are VMs booted by ``machines`` (see the module docstring)."""

    purchases = frozenset({Purchase.INSTANCE})  # what it boots (provisioner.local.lab picks by it)
    boots_nodes = True

    def __init__(self, machines: Machines, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.machines = machines

    def launch(self, request: Request) -> Response:
        before = set(self.instances)
        response = super().launch(request)
        hostname = self.body(request).get("hostname")
        for instance_id in [i for i in self.instances if i not in before]:
            body = self.instances[instance_id]
            address = self.machines.allocate(instance_id)
            body["private_ip"] = address
            body["hostname"] = hostname or address.replace(".", "-")
            self.bought[instance_id] = replace(
                self.bought[instance_id], private_ip=address, private_network=self.machines.network
            )
            self.machines.boot_vm(instance_id, self.bought[instance_id].boot, body["hostname"])
        return response

    def _visible(self) -> list[dict[str, Any]]:
        shown = super()._visible()
        for body in [*self.instances.values(), *shown]:
            if body.get("ip") and body["id"] in self.machines.addresses:
                body["ip"] = self.machines.addresses[body["id"]]
        return shown

    def terminate(self, request: Request) -> Response:
        response = super().terminate(request)
        if response.status_code == 200:
            for instance_id in self.body(request).get("instance_ids") or []:
                self.machines.stop(instance_id)
        return response

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        if request.method == "POST" and request.path == "/_fake/reclaim":  # a test's reclaim, out of process
            return self._reclaim(request)(environ, start_response)
        return super().__call__(environ, start_response)

    def _reclaim(self, request: Request) -> Response:
        """``POST /_fake/reclaim {"instance_id": ID}``: Lambda reclaims the instance (status ``preempted``,
        as ``set_status``) and its node powers off, as a reclaimed VM does. 404 for an unknown id."""
        instance_id = str(self.body(request).get("instance_id", ""))
        if instance_id not in self.instances:
            return self.json({"error": f"no instance {instance_id!r}"}, 404)
        self.set_status(instance_id, "preempted")
        self.machines.stop(instance_id)
        return self.json({"ok": True, "instance_id": instance_id})


class BackedRunPodFake(RunPodFake):
    """``RunPodFake`` whose pods are container nodes started by ``machines``."""

    purchases = frozenset({Purchase.POD, Purchase.CLUSTER})  # plain pods and Instant Clusters' members
    boots_nodes = True

    def __init__(self, machines: Machines, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.machines = machines
        # An Instant Cluster's delete removes its member pods at once: their nodes stop with them.
        self._routes = [
            replace(route, handler=self._delete_cluster) if route.name == "deleteCluster" else route
            for route in self._routes
        ]

    def _delete_cluster(self, request: Request, cluster_id: str) -> Response:
        members = [pod["id"] for pod in self.cluster_routes.members(cluster_id)]
        response = self.cluster_routes._delete(request, cluster_id)
        if response.status_code == 204:
            for pod_id in members:
                self.machines.stop(pod_id)
        return response

    def _new_pod(self, **fields: Any) -> dict[str, Any]:
        pod = super()._new_pod(**fields)
        if "cluster" in pod:  # an Instant Cluster member: its overlay address is its node's bridge address
            address = self.machines.allocate(pod["id"])
            pod["cluster"]["ip"] = address
            self.bought[pod["id"]] = replace(self.bought[pod["id"]], private_ip=address)
        env = dict(pod["env"])
        if "cluster" in pod:  # RunPod gives each member container its rank (its NODE_RANK), not in the pod's env
            env["NODE_RANK"] = str(pod["cluster"]["rank"])
        keys = self.bought[pod["id"]].ssh_public_keys
        if keys:  # RunPod hands a startSsh pod the account's keys in PUBLIC_KEY
            env["PUBLIC_KEY"] = "\n".join(keys)
        self.machines.boot_pod(pod["id"], pod["args"], env)
        return pod

    def _visible(self, pod: dict[str, Any]) -> dict[str, Any]:
        shown = super()._visible(pod)
        address = self.machines.addresses.get(pod["id"])
        if address and shown.get("runtime", {}).get("ports"):
            ports = [{"private": 22, "public": 22, "type": "tcp", "ip": address}]
            pod["runtime"] = {**pod["runtime"], "ports": copy.deepcopy(ports)}
            shown["runtime"] = {**shown["runtime"], "ports": ports}
            if shown["ssh"].get("direct"):
                direct = {"host": address, "port": 22, "username": "root", "command": f"ssh root@{address}"}
                pod["ssh"]["direct"], shown["ssh"]["direct"] = dict(direct), direct
        return shown

    def _delete(self, request: Request, pod_id: str) -> Response:
        response = super()._delete(request, pod_id)
        if response.status_code == 204:
            self.machines.stop(pod_id)
        return response


class BackedFluenceFake(FluenceFake):
    """``FluenceFake`` whose GPU VMs are nodes booted by ``machines`` with no bootstrap at boot."""

    purchases = frozenset({Purchase.INSTANCE})
    boots_nodes = True

    def __init__(self, machines: Machines, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.machines = machines

    def deploy(self, request: Request) -> Response:
        before = set(self.instances)
        response = super().deploy(request)
        for instance_id in [i for i in self.instances if i not in before]:
            key = self.instances[instance_id]["ssh_key"]
            image_only = f"#cloud-config\nssh_authorized_keys:\n  - {json.dumps(key)}\n" if key else "#cloud-config\n"
            address = self.machines.allocate(instance_id)
            self.machines.boot_vm(instance_id, image_only, address.replace(".", "-"))
        return response

    def _advance(self, body: dict[str, Any]) -> None:
        super()._advance(body)
        if body["status"] == "ACTIVE" and body["id"] in self.machines.addresses:
            body["domain"] = self.machines.addresses[body["id"]]

    def terminate(self, request: Request, id: str) -> Response:
        response = super().terminate(request, id)
        if response.status_code == 204:
            self.machines.stop(id)
        return response


__all__ = ["BackedFluenceFake", "BackedLambdaFake", "BackedRunPodFake", "Machines"]
