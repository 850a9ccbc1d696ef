"""Lambda Cloud firewall rulesets for ``access.allowed_cidrs``: SSH reaches a cluster only from them.

Facts (Lambda OpenAPI 1.10.0, ``/api/v1/firewall-rulesets``): a ruleset has a name (64
characters at most), one region and inbound allow rules ``{protocol, port_range [min, max],
source_network (IPv4 CIDR), description}``. It is attached to instances only at launch
(``firewall_rulesets: [{id}]`` in the launch request, same region as the instance); its rules
can be replaced later (PATCH). A ruleset still used by an instance cannot be deleted (400
``firewall-rulesets/firewall-ruleset-in-use``). The spec does not say whether an instance with
a ruleset also gets the account's global rules, nor whether rulesets filter traffic between
instances on the region's private network (UNVERIFIED both); the node firewall rendered into
the bootstrap (SSH only from the same CIDRs, cluster daemons only from the cluster) holds either
way.

How the adapter uses them:

- One ruleset per (cluster, region), named ``provisioner-<cluster_id>``: the name is the
  idempotence key. ``ensure`` finds it or creates it, and replaces its rules when they differ.
- Rules: tcp/22 from each allowed IPv4 network, nothing else. IPv6 networks cannot be written
  (``source_network`` is IPv4): they are left out with a warning, which admits less, never more.
- ``launch_entries`` is what a launch attaches: the cluster's ruleset in that region, if any
  (``ensure`` is called before the nodes are created).
- ``remove`` deletes the cluster's rulesets in every region; one already gone is success.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence

from provisioner.errors import PlanError, ProviderAPIError, ProviderError
from provisioner.providers.lambda_.client import LambdaClient
from provisioner.providers.lambda_.models import FirewallRule, FirewallRuleset, FirewallRulesetEntry

log = logging.getLogger("provisioner.providers.lambda")

PREFIX = "provisioner-"
SSH_PORT = 22
MAX_NAME = 64


def ruleset_name(cluster_id: str) -> str:
    """The ruleset name of a cluster (the same in every region)."""
    name = f"{PREFIX}{cluster_id}"
    if len(name) > MAX_NAME:
        raise PlanError(
            f"lambda: cluster id {cluster_id!r} is too long for a firewall ruleset name "
            f"({MAX_NAME} characters at most with {PREFIX!r})"
        )
    return name


def ssh_rules(allowed_cidrs: Sequence[str]) -> list[FirewallRule]:
    """tcp/22 from each IPv4 network of ``allowed_cidrs`` (normalized, deduplicated, in order).

    Raises PlanError for a value that is no network at all; IPv6 networks are skipped.
    """
    rules: list[FirewallRule] = []
    seen: set[str] = set()
    for text in allowed_cidrs:
        try:
            network = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            raise PlanError(f"lambda: access.allowed_cidrs: {text!r} is not a CIDR block") from None
        if network.version != 4:
            log.warning("lambda: firewall rulesets take IPv4 networks only; %s is left out (no SSH from it)", network)
            continue
        if str(network) in seen:
            continue
        seen.add(str(network))
        rules.append(
            FirewallRule(
                protocol="tcp",
                port_range=[SSH_PORT, SSH_PORT],
                source_network=str(network),
                description=f"provisioner: SSH from {network}",
            )
        )
    return rules


def _same(current: Sequence[FirewallRule], wanted: Sequence[FirewallRule]) -> bool:
    def key(rule: FirewallRule) -> tuple[str, tuple[int, ...], str]:
        return rule.protocol, tuple(rule.port_range or ()), rule.source_network

    return sorted(map(key, current)) == sorted(map(key, wanted))


def _mine(client: LambdaClient, cluster_id: str, region: str | None = None) -> list[FirewallRuleset]:
    name = ruleset_name(cluster_id)
    return [
        r for r in client.list_firewall_rulesets() if r.name == name and (region is None or r.region.name == region)
    ]


def ensure(client: LambdaClient, cluster_id: str, allowed_cidrs: Sequence[str], region: str) -> str:
    """The id of the cluster's ruleset in ``region`` admitting SSH only from ``allowed_cidrs``.

    Idempotent: finds the ruleset by name, replaces its rules only when they differ, creates it
    when absent. A create whose answer is lost (timeout, 5xx) is reconciled by listing again;
    nothing is created twice. Blocks for 1-3 API calls. Raises PlanError for a bad CIDR or a
    too long cluster id, and the client's ProviderError subclasses.
    """
    rules = ssh_rules(allowed_cidrs)
    name = ruleset_name(cluster_id)
    found = _mine(client, cluster_id, region)
    if found:
        ruleset = found[0]
        if not _same(ruleset.rules, rules):
            log.info("lambda: firewall ruleset %s (%s): rules replaced", name, region)
            client.update_firewall_ruleset(ruleset.id, rules)
        return ruleset.id
    try:
        return client.create_firewall_ruleset(name, region, rules).id
    except ProviderAPIError as exc:
        if exc.status and exc.status < 500 and exc.status != 409:
            raise
        again = _mine(client, cluster_id, region)  # a lost answer or a concurrent create made it
        if not again:
            raise
        log.warning("lambda: firewall ruleset create ended with %s; adopted %s", exc.detail, again[0].id)
        if not _same(again[0].rules, rules):
            client.update_firewall_ruleset(again[0].id, rules)
        return again[0].id


def launch_entries(client: LambdaClient, cluster_id: str, region: str) -> list[FirewallRulesetEntry] | None:
    """What a launch in ``region`` attaches: the cluster's ruleset there, or None (one GET)."""
    found = _mine(client, cluster_id, region)
    return [FirewallRulesetEntry(id=found[0].id)] if found else None


def remove(client: LambdaClient, cluster_id: str) -> None:
    """Delete the cluster's rulesets in every region. Gone already is success.

    Call it after the cluster's instances are terminated: Lambda refuses to delete a ruleset
    still in use (the error, a ProviderAPIError 400, names the ruleset). Tries every ruleset,
    then raises the first error.
    """
    failures: list[ProviderError] = []
    for ruleset in _mine(client, cluster_id):
        try:
            client.delete_firewall_ruleset(ruleset.id)
        except ProviderAPIError as exc:
            if exc.status == 404:
                continue
            failures.append(
                ProviderAPIError(
                    exc.provider, exc.status, f"firewall ruleset {ruleset.id} ({ruleset.region.name}): {exc.detail}"
                )
            )
        except ProviderError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


__all__ = ["PREFIX", "ensure", "launch_entries", "remove", "ruleset_name", "ssh_rules"]
