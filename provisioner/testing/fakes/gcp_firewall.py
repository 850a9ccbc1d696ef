"""Compute Engine firewall rules in the GCP fake: ``firewalls.insert/get/delete`` and
``globalOperations.get``.

Bodies and answers are parsed by the client library's own message types (``Firewall``,
``Operation``) with unknown fields refused, as ``GCPFake`` does for instances. On top, what GCE
itself refuses with HTTP 400 (documented rules of the Firewall resource): a name that is not
RFC 1035 (``[a-z]([-a-z0-9]{0,61}[a-z0-9])?``), a direction other than INGRESS/EGRESS, a
priority outside 0..65535, both or neither of ``allowed``/``denied``, a protocol outside
tcp/udp/icmp/esp/ah/sctp/ipip/all or a protocol number, ports on a protocol that has none, a
source range that is not a network, an ingress rule with neither source ranges nor source tags,
a tag that is not RFC 1035, or a network other than ``global/networks/<name>`` (or its URL).
Inserting an existing name answers 409; an unknown name 404. Rules are kept in ``rules`` by name.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.gcp_compute import GCPFake

_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_NETWORK = re.compile(r"^(https://www\.googleapis\.com/compute/v1/)?(projects/[^/]+/)?global/networks/[a-z][-a-z0-9]*$")
_PROTOCOLS = {"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"}
_PORTED = {"tcp", "udp", "sctp"}


def firewall_problems(body: dict[str, Any]) -> list[str]:
    """What GCE would refuse in a firewalls.insert body (see the module docstring). Pure."""
    problems = []
    if not _RFC1035.match(str(body.get("name", ""))):
        problems.append(f"name {body.get('name')!r} is not RFC 1035")
    if body.get("direction", "INGRESS") not in ("INGRESS", "EGRESS"):
        problems.append(f"direction {body.get('direction')!r}")
    if not 0 <= int(body.get("priority", 1000)) <= 65535:
        problems.append(f"priority {body.get('priority')} outside 0..65535")
    if not _NETWORK.match(str(body.get("network", "global/networks/default"))):
        problems.append(f"network {body.get('network')!r}")
    rules = [("allowed", r) for r in body.get("allowed", [])] + [("denied", r) for r in body.get("denied", [])]
    if bool(body.get("allowed")) == bool(body.get("denied")):
        problems.append("exactly one of allowed and denied must be set")
    for kind, rule in rules:
        protocol = str(rule.get("IPProtocol", ""))
        if protocol not in _PROTOCOLS and not protocol.isdigit():
            problems.append(f"{kind}: protocol {protocol!r}")
        if rule.get("ports") and protocol not in _PORTED:
            problems.append(f"{kind}: ports on protocol {protocol!r}")
    for cidr in body.get("sourceRanges", []):
        try:
            ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            problems.append(f"source range {cidr!r} is not a network")
    if body.get("direction", "INGRESS") == "INGRESS" and not (body.get("sourceRanges") or body.get("sourceTags")):
        problems.append("an ingress rule needs sourceRanges or sourceTags")
    problems += [
        f"tag {tag!r} is not RFC 1035"
        for tag in [*body.get("targetTags", []), *body.get("sourceTags", [])]
        if not _RFC1035.match(str(tag))
    ]
    return problems


class FirewallRoutes:
    """The firewall half of ``GCPFake``."""

    def __init__(self, fake: GCPFake, base: str) -> None:
        self.fake = fake
        self.rules: dict[str, dict[str, Any]] = {}
        fake.route("POST", f"{base}/global/firewalls", self._insert, name="firewall_insert")
        fake.route("GET", f"{base}/global/firewalls/{{name}}", self._get, name="firewall")
        fake.route("DELETE", f"{base}/global/firewalls/{{name}}", self._delete, name="firewall_delete")
        fake.route("GET", f"{base}/global/operations/{{op}}", self._operation, name="global_operation")

    def _op(self, project: str, target: str, kind: str) -> dict[str, Any]:
        return {
            "kind": "compute#operation",
            "name": f"operation-{uuid.uuid4().hex[:12]}",
            "operationType": kind,
            "status": "DONE",
            "progress": 100,
            "targetLink": f"projects/{project}/global/firewalls/{target}",
        }

    def _insert(self, request: Request, project: str) -> Response:
        body = self.fake.body(request)
        problems = firewall_problems(body)
        if problems:
            return self.fake.error_reply(
                "bad_request", message="Invalid value for field 'resource': " + "; ".join(problems)
            )
        name = str(body["name"])
        if name in self.rules:
            return self.fake.error_reply(
                "conflict", message=f"The resource 'projects/{project}/global/firewalls/{name}' already exists"
            )
        self.rules[name] = {
            **body,
            "kind": "compute#firewall",
            "id": str(uuid.uuid4().int % 10**18),
            "direction": body.get("direction", "INGRESS"),
            "priority": body.get("priority", 1000),
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/firewalls/{name}",
        }
        return self.fake.json(self._op(project, name, "insert"))

    def _get(self, request: Request, project: str, name: str) -> Response:
        if name not in self.rules:
            return self.fake.error_reply(
                "not_found", message=f"The resource 'projects/{project}/global/firewalls/{name}' was not found"
            )
        return self.fake.json(self.rules[name])

    def _delete(self, request: Request, project: str, name: str) -> Response:
        if self.rules.pop(name, None) is None:
            return self.fake.error_reply(
                "not_found", message=f"The resource 'projects/{project}/global/firewalls/{name}' was not found"
            )
        return self.fake.json(self._op(project, name, "delete"))

    def _operation(self, request: Request, project: str, op: str) -> Response:
        return self.fake.json(self._op(project, "", "insert") | {"name": op})


__all__ = ["FirewallRoutes", "firewall_problems"]
