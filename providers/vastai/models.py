"""Pydantic models of the Vast.ai payloads this adapter reads and sends.

Only the fields the adapter uses are declared; everything else a response carries is
ignored, so a new field in Vast's API never breaks parsing. Units follow Vast's:
``gpu_ram``/``cpu_ram`` in MB, ``disk_space`` in GB, prices in $/h or $/GB.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from provisioner.providers.addresses import HostText, IpText, ip_or_none


def _addresses(value: object) -> str | None:
    """``local_ipaddrs``: IP addresses separated by spaces; only the well-formed ones are kept."""
    if not isinstance(value, str):
        return None
    return " ".join(address for word in value.split() if (address := ip_or_none(word)))


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class BundleOffer(_Payload):
    """One ask from ``POST /api/v0/bundles/``; ``id`` is what ``PUT /api/v0/asks/{id}/`` rents."""

    id: int
    machine_id: int | None = None
    gpu_name: str
    num_gpus: int
    gpu_ram: float = Field(description="Per GPU, MB.")
    cpu_cores_effective: float | None = None
    cpu_cores: int | None = None
    cpu_ram: float = Field(0, description="MB.")
    disk_space: float = Field(0, description="GB.")
    dph_base: float | None = None
    dph_total: float
    min_bid: float | None = None
    storage_cost: float | None = Field(None, description="$/GB-month.")
    inet_up: float | None = None
    inet_down: float | None = None
    inet_up_cost: float | None = Field(None, description="$/GB uploaded by the instance (egress).")
    inet_down_cost: float | None = Field(None, description="$/GB downloaded by the instance (ingress).")
    reliability: float | None = None
    reliability2: float | None = None
    geolocation: str | None = None
    rentable: bool = True
    rented: bool = False
    verification: str | None = None


class BundlesResponse(_Payload):
    offers: list[BundleOffer] = Field(default_factory=list)


class LaunchResponse(_Payload):
    """``PUT /api/v0/asks/{id}/``. The response's ``instance_api_key`` is deliberately not modelled."""

    success: bool = True
    new_contract: int


class PortBinding(_Payload):
    """Where one container port is published on the host (Docker's shape; ``HostPort`` is a string)."""

    host_ip: IpText = Field(None, alias="HostIp")
    host_port: str | int | None = Field(None, alias="HostPort")


class Instance(_Payload):
    """One row of ``GET /api/v1/instances/`` (or the object of ``GET /api/v0/instances/{id}/``)."""

    id: int
    label: str | None = None
    actual_status: str | None = None
    intended_status: str | None = None
    cur_state: str | None = None
    status_msg: str | None = None
    gpu_name: str | None = None
    num_gpus: int | None = None
    geolocation: str | None = None
    country_code: str | None = None
    public_ipaddr: IpText = None
    local_ipaddrs: Annotated[str | None, BeforeValidator(_addresses)] = None
    ssh_host: HostText = None
    ssh_port: int | None = None
    start_date: float | None = Field(None, description="When the contract started (unix seconds): billing starts.")
    ports: dict[str, list[PortBinding]] | None = Field(
        None, description='Published container ports, ``{"22/tcp": [{HostIp, HostPort}]}``; running instances only.'
    )

    def ssh_endpoint(self) -> tuple[str, int] | None:
        """``(host, port)`` of the instance's sshd: ``public_ipaddr`` and the host port 22/tcp is
        published on (direct), else Vast's SSH proxy ``ssh_host:ssh_port``. None when neither is known."""
        published = [str(b.host_port) for b in (self.ports or {}).get("22/tcp", [])]
        direct = [int(port) for port in published if port.isdigit()]
        if self.public_ipaddr and direct:
            return self.public_ipaddr, direct[0]
        if self.ssh_host and self.ssh_port:
            return self.ssh_host, self.ssh_port
        return None


class InstancesPage(_Payload):
    instances: list[Instance] = Field(default_factory=list)
    next_token: str | None = None


class SshKey(_Payload):
    """An account SSH key; Vast names the text ``key`` when listing and ``public_key`` on create."""

    id: int
    key: str | None = None
    public_key: str | None = None

    @property
    def text(self) -> str:
        return self.key or self.public_key or ""


class SshKeyCreated(_Payload):
    success: bool = True
    key: SshKey


class ChargeItem(_Payload):
    type: str
    amount: float = 0.0


class Charge(_Payload):
    """One contract of ``GET /api/v0/charges/``: its span (unix seconds) and amount (3 decimals)."""

    start: int | None = None
    end: int | None = None
    type: str = ""
    source: str = ""
    amount: float = 0.0
    items: list[ChargeItem] = Field(default_factory=list)


class ChargesPage(_Payload):
    results: list[Charge] = Field(default_factory=list)
    next_token: str | None = None


class CurrentUser(_Payload):
    id: int | None = None
    balance: float | None = None


__all__ = [
    "BundleOffer",
    "BundlesResponse",
    "Charge",
    "ChargeItem",
    "ChargesPage",
    "CurrentUser",
    "Instance",
    "InstancesPage",
    "LaunchResponse",
    "PortBinding",
    "SshKey",
    "SshKeyCreated",
]
