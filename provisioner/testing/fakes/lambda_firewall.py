"""Lambda firewall rulesets in the Lambda fake: the ``/api/v1/firewall-rulesets`` routes.

Shapes follow ``openapi-1.10.0.json`` (``FirewallRuleset``, ``FirewallRule``, the create and
patch requests, the ruleset error bodies); ``LambdaFake`` validates every request and answer
against it. Behaviour, where the spec leaves room (assumptions about the real service):

- A rule's ``source_network`` must be an IPv4 network (a bare address means ``/32``) and a
  tcp/udp/all rule needs ``port_range`` [min <= max]; otherwise 400 ``global/invalid-parameters``.
  Names are not required to be unique.
- ``instance_ids`` is derived: the live instances launched with the ruleset. A launch naming a
  ruleset that does not exist or lives in another region is refused (``LambdaFake.launch``
  calls ``check_launch``), as the spec says rulesets "must exist in the same region".
- Deleting a ruleset still used by a live instance answers 400
  ``firewall-rulesets/firewall-ruleset-in-use``; an unknown id answers 404
  ``global/object-does-not-exist``.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
import uuid
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.lambda_ import LambdaFake

_NOT_FOUND = {
    "code": "global/object-does-not-exist",
    "message": "Firewall ruleset does not exist or you do not have permission to access it.",
    "suggestion": "Check your firewall ruleset ID and try again.",
}
_IN_USE = {
    "code": "firewall-rulesets/firewall-ruleset-in-use",
    "message": "Firewall ruleset is in use by one or more instances.",
    "suggestion": "Terminate all instances that are using the ruleset before deleting it.",
}


class FirewallRoutes:
    """The firewall half of ``LambdaFake``; ``rulesets`` maps id -> the stored ruleset."""

    def __init__(self, fake: LambdaFake, regions: dict[str, str], live: tuple[str, ...]) -> None:
        self.fake = fake
        self.regions = regions
        self.live = live
        self.rulesets: dict[str, dict[str, Any]] = {}
        fake.route("GET", "/api/v1/firewall-rulesets", self._list, kind="other", name="list_firewall_rulesets")
        fake.route("POST", "/api/v1/firewall-rulesets", self._create, kind="other", name="create_firewall_ruleset")
        fake.route("GET", "/api/v1/firewall-rulesets/{id}", self._get, kind="other", name="get_firewall_ruleset")
        fake.route("PATCH", "/api/v1/firewall-rulesets/{id}", self._patch, kind="other", name="update_firewall_ruleset")
        fake.route(
            "DELETE", "/api/v1/firewall-rulesets/{id}", self._delete, kind="other", name="delete_firewall_ruleset"
        )

    def users(self, ruleset_id: str) -> list[str]:
        """Ids of live instances launched with the ruleset."""
        return sorted(
            iid
            for iid, body in self.fake.instances.items()
            if body["status"] in self.live
            and any(entry["id"] == ruleset_id for entry in body.get("firewall_rulesets", []))
        )

    def check_launch(self, entries: Any, region: str) -> str | None:
        """Why a launch's ``firewall_rulesets`` cannot be attached in ``region`` (None: they can)."""
        for entry in entries or []:
            ruleset = self.rulesets.get(str(entry.get("id"))) if isinstance(entry, dict) else None
            if ruleset is None:
                return f"Firewall ruleset {entry!r} does not exist."
            if ruleset["region"]["name"] != region:
                return f"Firewall ruleset {ruleset['id']} is in {ruleset['region']['name']}, not {region}."
        return None

    def _shown(self, ruleset: dict[str, Any]) -> dict[str, Any]:
        return {**copy.deepcopy(ruleset), "instance_ids": self.users(ruleset["id"])}

    def _bad_rules(self, rules: Any) -> str | None:
        for rule in rules if isinstance(rules, list) else []:
            try:
                network = ipaddress.ip_network(str(rule.get("source_network")), strict=False)
            except ValueError:
                return f"source_network {rule.get('source_network')!r} is not an IPv4 network"
            if network.version != 4:
                return f"source_network {network} is not an IPv4 network"
            ports = rule.get("port_range")
            if rule.get("protocol") != "icmp" and not (
                isinstance(ports, list) and len(ports) == 2 and ports[0] <= ports[1]
            ):
                return "port_range [min, max] is required for tcp, udp and all"
        return None

    def _invalid(self, message: str) -> Response:
        return self.fake.json({"error": {"code": "global/invalid-parameters", "message": message}}, 400)

    # ----- handlers ------------------------------------------------------------------------
    def _list(self, request: Request) -> Response:
        return self.fake.json({"data": [self._shown(r) for r in self.rulesets.values()]})

    def _create(self, request: Request) -> Response:
        body = self.fake.body(request)
        region = body.get("region")
        if region not in self.regions:
            return self._invalid(f"Region {region!r} does not exist.")
        why = self._bad_rules(body.get("rules"))
        if why:
            return self._invalid(why)
        ruleset = {
            "id": uuid.uuid4().hex,
            "name": body["name"],
            "region": {"name": region, "description": self.regions[region]},
            "rules": copy.deepcopy(body["rules"]),
            "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        self.rulesets[ruleset["id"]] = ruleset
        return self.fake.json({"data": self._shown(ruleset)})

    def _get(self, request: Request, id: str) -> Response:
        ruleset = self.rulesets.get(id)
        return self.fake.json({"data": self._shown(ruleset)}) if ruleset else self.fake.json({"error": _NOT_FOUND}, 404)

    def _patch(self, request: Request, id: str) -> Response:
        ruleset = self.rulesets.get(id)
        if ruleset is None:
            return self.fake.json({"error": _NOT_FOUND}, 404)
        body = self.fake.body(request)
        why = self._bad_rules(body.get("rules"))
        if why:
            return self._invalid(why)
        if "rules" in body:
            ruleset["rules"] = copy.deepcopy(body["rules"])
        if "name" in body:
            ruleset["name"] = body["name"]
        return self.fake.json({"data": self._shown(ruleset)})

    def _delete(self, request: Request, id: str) -> Response:
        if id not in self.rulesets:
            return self.fake.json({"error": _NOT_FOUND}, 404)
        if self.users(id):
            return self.fake.json({"error": _IN_USE}, 400)
        del self.rulesets[id]
        return self.fake.json({"data": {}})


__all__ = ["FirewallRoutes"]
