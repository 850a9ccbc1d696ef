"""Pydantic models of the Lambda Cloud payloads the adapter reads and sends.

Shapes from Lambda's OpenAPI 1.10.0. Responses ignore fields we do not use, so new
fields on Lambda's side do not break parsing; requests are built from these models
and dumped without ``None`` fields.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from provisioner.providers.addresses import IpText


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Region(_Payload):
    name: str
    description: str = ""


class InstanceTypeSpecs(_Payload):
    vcpus: int
    memory_gib: int
    storage_gib: int
    gpus: int


class InstanceType(_Payload):
    name: str
    description: str = ""
    gpu_description: str = ""
    price_cents_per_hour: int
    specs: InstanceTypeSpecs


class InstanceTypesItem(_Payload):
    instance_type: InstanceType
    regions_with_capacity_available: list[Region] = Field(default_factory=list)


class Tag(_Payload):
    key: str
    value: str


class Instance(_Payload):
    id: str
    name: str | None = None
    ip: IpText = None
    private_ip: IpText = None
    status: str
    region: Region | None = None
    instance_type: InstanceType | None = None
    hostname: str | None = None
    tags: list[Tag] = Field(default_factory=list)

    def tag(self, key: str) -> str | None:
        return next((t.value for t in self.tags if t.key == key), None)


class AuditEvent(_Payload):
    """One entry of ``GET /api/v1/audit-events`` (the fields metering reads)."""

    resource_name: str
    action: str
    event_time: str
    resource_lrns: list[str] = []


class AuditEventsPage(_Payload):
    """Lambda OpenAPI 1.8.3's page: ``{"data": {"events": [...], "page_token": ...}}``."""

    events: list[AuditEvent]
    page_token: str | None = None


class AuditPage(_Payload):
    """An answer of ``GET /api/v1/audit-events`` in either published shape: 1.10.0 puts the
    events in ``data`` and the token beside it, 1.8.3 puts both inside ``data``."""

    data: list[AuditEvent] | AuditEventsPage
    page_token: str | None = None

    @property
    def shape(self) -> str:
        """The spec version whose shape this answer has: ``1.10.0`` or ``1.8.3``."""
        return "1.10.0" if isinstance(self.data, list) else "1.8.3"

    @property
    def events(self) -> list[AuditEvent]:
        return self.data if isinstance(self.data, list) else self.data.events

    @property
    def next_token(self) -> str | None:
        return self.page_token if isinstance(self.data, list) else self.data.page_token


class SSHKey(_Payload):
    id: str
    name: str
    public_key: str = ""


class ImageSpec(_Payload):
    id: str | None = None
    family: str | None = None


class FirewallRule(_Payload):
    """One inbound allow rule. ``port_range`` is ``[min, max]`` inclusive (absent for ICMP);
    ``source_network`` an IPv4 CIDR."""

    protocol: str
    port_range: list[int] | None = None
    source_network: str
    description: str = ""


class FirewallRuleset(_Payload):
    """A named set of inbound rules in one region, attached to instances at launch."""

    id: str
    name: str
    region: Region
    rules: list[FirewallRule] = Field(default_factory=list)
    instance_ids: list[str] = Field(default_factory=list)


class FirewallRulesetEntry(_Payload):
    """A reference to a ruleset, as the launch request and an instance carry it."""

    id: str


class LaunchRequest(BaseModel):
    """Body of ``POST /instance-operations/launch``. ``quantity`` is sent as real clients do
    (Lambda's docs example has it; the 1.10 schema does not list it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region_name: str
    instance_type_name: str
    ssh_key_names: list[str]
    name: str | None = Field(None, max_length=64)
    image: ImageSpec | None = None
    user_data: str | None = Field(None, repr=False)
    tags: list[Tag] = Field(default_factory=list)
    quantity: int = Field(1, ge=1)
    firewall_rulesets: list[FirewallRulesetEntry] | None = None


__all__ = [
    "FirewallRule",
    "FirewallRuleset",
    "FirewallRulesetEntry",
    "ImageSpec",
    "Instance",
    "InstanceType",
    "InstanceTypeSpecs",
    "InstanceTypesItem",
    "LaunchRequest",
    "Region",
    "SSHKey",
    "Tag",
]
