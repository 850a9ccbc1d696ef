"""What a fake records of its traffic and sales: ``Call`` (the call log), ``Exchange`` (bodies as
they crossed the wire) and ``Bought`` (each instance it launched, the capability contract's evidence)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Call:
    t: float
    method: str
    path: str
    status: int
    route: str
    kind: str


@dataclass(frozen=True)
class Exchange:
    """One API request's bodies as they crossed the wire (the fault replies' included)."""

    method: str
    path: str
    status: int
    request_body: bytes
    response_body: bytes

    def texts(self) -> tuple[str, str]:
        return (self.request_body.decode("utf-8", "replace"), self.response_body.decode("utf-8", "replace"))


@dataclass(frozen=True)
class Bought:
    """The fake's record of one instance it launched (the capability contract's evidence).

    ``boot`` is everything the instance is given to run or read at boot, verbatim as the API
    received it (user data, start command, environment values), joined by newlines.
    ``private_network`` names the private network the instance is on (None: it has none);
    instances on the same one reach each other at their ``private_ip``. ``cluster_product``
    is the provider's id of the cluster product (e.g. a RunPod Instant Cluster) the instance
    was bought as a member of; None when it was bought on its own.
    """

    instance_id: str
    interruptible: bool = False
    boot: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    ssh_public_keys: tuple[str, ...] = ()
    private_ip: str | None = None
    private_network: str | None = None
    cluster_product: str | None = None


__all__ = ["Bought", "Call", "Exchange"]
