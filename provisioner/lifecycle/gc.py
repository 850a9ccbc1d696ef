"""``provisioner gc``: find, and with ``--yes`` delete, nodes the tool made that nothing accounts for.

What is collected (the provider is the source of truth; providers.base says how a node is
known to be the tool's on each provider):

- a node whose cluster has **no local record** (provisioner.lifecycle.state) in this state dir
  only when it is provably abandoned (``unrecorded``): its lease mark names this host and this
  state dir and its process is gone (a record deleted by hand, an ``up`` killed before it saved
  one). Without a record and without such proof a node is kept, whatever its lease's age: another
  machine, or another state dir on this one, may hold its record and be using it;
- a node whose **expiry has passed**, by its EXPIRES_TAG where the provider has tags, else by
  its cluster's record (``expires_at``), or whose record's lease process (a ``burst`` killed
  with SIGKILL) is gone (``ClusterRecord.lease_lost``);
- a node of a cluster whose record is still ``creating`` while no process holds the cluster's
  lock, or its holder's heartbeat is older than ``STALE_S`` (lifecycle.lease): an ``up`` killed
  mid-create, TTL or not;
- with ``cluster_id``: every node of that cluster, whatever its record says (naming a cluster
  is the decision to remove it; this is the command a failed create prints).

Never collected (providers.ownership): a node whose owner mark names another owner (a colleague
on the same account has records on another machine); a node with no owner mark of this tool
(a user's own instance with a matching tag or label), unless named with ``cluster_id`` and
``force_unowned``; nodes of a cluster whose lock another live process holds; a node with no
local record that is not provably abandoned (above). On Fluence, whose names carry no cluster
id, only clusters with a record here or named are looked at (the name's mark is a hash of
cluster and owner).

Providers: every registered adapter whose credentials are configured (an API key variable for
the neoclouds; a credentials file or variable for AWS and GCP, never a metadata server); the
others are skipped and the report says why (a provider named with ``provider`` that cannot be
checked is a failure, exit 4). An adapter that can list the tool's nodes at once
(``SupportsGc``) is asked for all of them; otherwise gc asks ``get_nodes`` for the clusters it
has records of and the named cluster.

Deleting: per cluster, holding its lock, through providers.ownership.delete_owned (which checks
the owner mark once more; idempotent, does not wait); a cluster whose every
node was deleted loses its local record. Nothing is deleted unless ``delete`` is set. A paid
reservation of a cluster gc looks at (an EC2 Capacity Block, ``SupportsReservations``) cannot be
deleted: the report says what remains, that it is paid, and when it ends.

Exit code (``GcReport.exit_code``): 0 when every provider was checked and nothing found is
left undeleted (listing only: when every provider was checked); 4 when a node could not be
deleted or a provider could not be listed (both named in the report).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.errors import ClusterBusyError, ProviderError, ProvisionerError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle.gc_verdict import STALE_S, abandoned, unrecorded, verdict
from provisioner.lifecycle.state import ClusterRecord, list_records, remove_record, state_dir
from provisioner.providers import registry, settings
from provisioner.providers.base import NodeStatus, OwnedNode, Provider, SupportsGc, SupportsReservations, owner_id
from provisioner.providers.ownership import delete_owned, place_slug

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Leftover:
    """One node gc would collect, and why."""

    provider: str
    cluster_id: str
    node_id: str
    name: str
    why: str
    run: str | None = None
    """The run mark the node carries (None: none)."""

    def line(self) -> str:
        return f"{self.provider} {self.cluster_id} {self.name} ({self.node_id}): {self.why}"


@dataclass
class GcReport:
    """What one gc run found and did."""

    delete: bool
    leftovers: list[Leftover] = field(default_factory=list)
    deleted: list[Leftover] = field(default_factory=list)
    failed: list[tuple[Leftover, str]] = field(default_factory=list)
    kept: list[tuple[str, str, str]] = field(default_factory=list)  # (provider, cluster, why)
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why not checked
    unlisted: dict[str, str] = field(default_factory=dict)  # provider -> why listing failed
    checked: list[str] = field(default_factory=list)
    records_removed: list[str] = field(default_factory=list)
    dead_records: list[str] = field(default_factory=list)
    """Records an ``up`` left in ``creating`` when it died, with nothing of them at their provider."""
    reservations: list[str] = field(default_factory=list)
    """Reservations gc cannot delete (a paid EC2 Capacity Block): what remains, paid, until when."""

    @property
    def exit_code(self) -> int:
        return 4 if self.failed or self.unlisted else 0

    def render(self) -> str:
        """The report as lines for a terminal (no secrets: ids, names and provider words only)."""
        out = [f"checked: {', '.join(self.checked) or 'no provider'}"]
        out += [f"skipped {name}: {why}" for name, why in sorted(self.skipped.items())]
        out += [f"FAILED to list {name}: {why}" for name, why in sorted(self.unlisted.items())]
        kept = sorted(set(self.kept))
        out += [f"kept {provider} {cluster}: {why}" for provider, cluster, why in kept]
        unknown = sorted({*self.skipped, *self.unlisted})
        out += [f"{'forgot dead record' if self.delete else 'dead record'} {line}" for line in self.dead_records]
        if self.dead_records and not self.delete:
            out.append(f"{len(self.dead_records)} dead record(s); run again with --yes to forget them")
        if not self.leftovers and not self.checked:
            out.append("nothing checked: no provider could be listed, so what the tool left there is unknown")
        elif not self.leftovers and unknown:
            out.append(f"nothing to collect on {', '.join(self.checked)}; not checked: {', '.join(unknown)}")
        elif not self.leftovers:
            out.append("nothing to collect")
        elif not self.delete:
            out += [f"would delete {item.line()}" for item in self.leftovers]
            out.append(f"{len(self.leftovers)} node(s) to collect; run again with --yes to delete them")
        else:
            out += [f"deleted {item.line()}" for item in self.deleted]
            out += [f"NOT deleted {item.line()}: {why}" for item, why in self.failed]
            out += [f"forgot local record of {cluster}" for cluster in self.records_removed]
        out += [f"cannot be deleted: {note}" for note in self.reservations]
        return "\n".join(out)


def configured(name: str) -> str | None:
    """None when ``name``'s credentials are configured here, else why not (never asks a network)."""
    return settings.credentials_missing(name)


def _adapters(only: str | None) -> tuple[dict[str, Provider], dict[str, str]]:
    names = [only] if only else list(registry.REGISTRY)
    adapters: dict[str, Provider] = {}
    skipped: dict[str, str] = {}
    for name in names:
        why = configured(name)
        if why is not None:
            skipped[name] = why
            continue
        try:
            adapters[name] = registry.get_provider(name)
        except KeyError as exc:
            skipped[name] = str(exc.args[0]) if exc.args else "no adapter"
        except ProvisionerError as exc:
            skipped[name] = str(exc)
    return adapters, skipped


def collect_garbage(
    *,
    provider: str | None = None,
    cluster_id: str | None = None,
    delete: bool = False,
    now: Clock = utc_now,
    adapters: Mapping[str, Provider] | None = None,
    records: Sequence[ClusterRecord] | None = None,
    owner: str | None = None,
    force_unowned: bool = False,
) -> GcReport:
    """Find (and with ``delete`` delete) the tool's unaccounted nodes; see the module docstring.

    ``provider``/``cluster_id`` narrow the search. ``adapters`` (default: every registered
    provider with credentials configured, built from the environment) and ``records``
    (default: ``list_records()``), ``now`` and ``owner`` (default ``owner_id()``) are injectable.
    ``force_unowned`` (only with ``cluster_id``) also deletes that cluster's nodes that carry no
    owner mark. Blocking: one listing per provider plus the delete calls. Raises ValueError for
    an unknown ``provider`` or ``force_unowned`` without ``cluster_id``; provider failures are
    reported, never raised.
    """
    if provider is not None and provider not in registry.REGISTRY:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(registry.REGISTRY)}")
    if force_unowned and cluster_id is None:
        raise ValueError("--force-unowned needs --cluster NAME: it is never applied to a whole account")
    report = GcReport(delete=delete)
    if adapters is None:
        found, report.skipped = _adapters(provider)
        if provider in report.skipped:  # asked for by name: not checking it is a failure, not a skip
            report.unlisted[provider] = f"cannot check: {report.skipped.pop(provider)}"
        try:
            _collect(report, found, cluster_id, delete, now(), records, owner, force_unowned)
        finally:
            for adapter in found.values():
                close = getattr(adapter, "close", None)
                if callable(close):
                    close()
        return report
    found = {name: a for name, a in adapters.items() if provider is None or name == provider}
    _collect(report, found, cluster_id, delete, now(), records, owner, force_unowned)
    return report


def _collect(
    report: GcReport,
    found: Mapping[str, Provider],
    cluster_id: str | None,
    delete: bool,
    at: dt.datetime,
    records: Sequence[ClusterRecord] | None,
    owner: str | None,
    force_unowned: bool = False,
) -> None:
    records = list_records() if records is None else list(records)
    records = [r for r in records if not r.local]  # a dry run's nodes are its lab's, never a provider's
    _collect_nodes(report, found, cluster_id, delete, at, records, owner, force_unowned)
    _dead_records(report, records, cluster_id, delete, at)
    if delete and cluster_id is not None:
        _forget_named(report, cluster_id, {r.cluster_id: r for r in records}.get(cluster_id))


def _dead_records(
    report: GcReport, records: list[ClusterRecord], cluster_id: str | None, delete: bool, at: dt.datetime
) -> None:
    """Records left ``creating`` by a dead ``up`` (killed before it bought anything) whose provider was
    listed and shows nothing of them: listed (gc said nothing of them), forgotten with ``delete``."""
    touched = {item.cluster_id for item in report.leftovers} | {kept[1] for kept in report.kept}
    for record in records:
        why = abandoned(record, at)
        if why is None or record.provider not in report.checked or record.cluster_id in touched:
            continue
        if cluster_id is not None and record.cluster_id != cluster_id:
            continue
        report.dead_records.append(f"{record.cluster_id} ({record.provider}): {why}; nothing of it at the provider")
        if delete:
            remove_record(record.cluster_id)
            report.records_removed.append(record.cluster_id)


def _forget_named(report: GcReport, cluster_id: str, record: ClusterRecord | None) -> None:
    """``gc --cluster ID --yes``: once nothing of the cluster is left (none kept, none failed, its
    provider listed), forget its record and remove its local key material (secrets, key file,
    known_hosts), as ``down`` does."""
    if any(kept[1] == cluster_id for kept in report.kept) or any(
        item.cluster_id == cluster_id for item, _ in report.failed
    ):
        return
    if record is not None and record.provider not in report.checked:
        return
    if _has_local_files(cluster_id) or record is not None:
        remove_record(cluster_id)
        if cluster_id not in report.records_removed:
            report.records_removed.append(cluster_id)


def _has_local_files(cluster_id: str) -> bool:
    from provisioner.lifecycle.state import record_path, secrets_path, ssh_dir

    return any(path.exists() for path in (record_path(cluster_id), secrets_path(cluster_id), ssh_dir(cluster_id)))


def _collect_nodes(
    report: GcReport,
    found: Mapping[str, Provider],
    cluster_id: str | None,
    delete: bool,
    at: dt.datetime,
    records: list[ClusterRecord],
    owner: str | None,
    force_unowned: bool = False,
) -> None:
    me = owner or owner_id()
    here = place_slug(state_dir())
    for name, adapter in found.items():
        mine = {r.cluster_id: r for r in records if r.provider == name}
        try:
            nodes = _owned(adapter, mine, cluster_id, at)
        except ProviderError as exc:
            report.unlisted[name] = str(exc)
            continue
        report.checked.append(name)
        picked: dict[str, list[Leftover]] = {}
        for owned in nodes:
            node = owned.node
            if cluster_id is not None and node.cluster_id != cluster_id:
                continue
            why = verdict(owned, mine.get(node.cluster_id), cluster_id, me, at, force_unowned, here)
            if why.startswith("keep:"):
                report.kept.append((name, node.cluster_id, why.removeprefix("keep: ")))
                continue
            picked.setdefault(node.cluster_id, []).append(
                Leftover(name, node.cluster_id, node.id, node.name, why, node.run)
            )
        for cluster, items in sorted(picked.items()):
            report.leftovers += items
            if delete:
                _delete(adapter, cluster, items, mine.get(cluster), report, me, force_unowned)
        if isinstance(adapter, SupportsReservations):
            for cluster in sorted(set(picked) | ({cluster_id} if cluster_id is not None else set())):
                try:
                    report.reservations += adapter.reservations_left(cluster)
                except ProviderError as exc:
                    report.unlisted.setdefault(name, str(exc))


def _owned(
    adapter: Provider, records: Mapping[str, ClusterRecord], cluster_id: str | None, at: dt.datetime
) -> list[OwnedNode]:
    """The tool's live nodes on ``adapter``: all of them where it can list them, plus the
    nodes of expired recorded clusters and of the named cluster (asked one by one)."""
    nodes = list(adapter.list_owned()) if isinstance(adapter, SupportsGc) else []  # billable ones, its say
    seen = {o.node.id for o in nodes}
    ask = {cid for cid, r in records.items() if r.expired(at) or abandoned(r, at) is not None}
    if cluster_id is not None:
        ask = {cluster_id}
    for cid in sorted(ask):
        nodes += [
            OwnedNode(n) for n in adapter.get_nodes(cid) if n.id not in seen and n.status != NodeStatus.TERMINATED
        ]
    return nodes


def _delete(
    adapter: Provider,
    cluster: str,
    items: list[Leftover],
    record: ClusterRecord | None,
    report: GcReport,
    me: str,
    force_unowned: bool,
) -> None:
    ids = {item.node_id for item in items}
    try:
        with cluster_lease.hold(cluster, "gc"):
            deletion = delete_owned(adapter, cluster, sorted(ids), owner=me, force_unowned=force_unowned)
    except (ProviderError, ClusterBusyError) as exc:
        report.failed += [(item, str(exc)) for item in items]
        return
    gone = {node.id for node in deletion.deleted}
    kept = {node.id: why for node, why in deletion.kept}
    report.deleted += [item for item in items if item.node_id in gone]
    report.failed += [(item, kept[item.node_id]) for item in items if item.node_id in kept]
    if record is not None and not kept:
        try:
            left = [
                n
                for n in adapter.get_nodes(cluster)
                if n.status in (NodeStatus.PENDING, NodeStatus.RUNNING) and n.id not in ids
            ]
        except ProviderError:
            return  # keep the record: it is how a later gc finds this cluster on a tagless provider
        if not left:
            if record.engine == "pulumi":
                _remove_stack(record, report)
            remove_record(cluster)
            report.records_removed.append(cluster)


def _remove_stack(record: ClusterRecord, report: GcReport) -> None:
    """A pulumi cluster gc emptied: its stack goes too (a killed up's pending operations and lock with it)."""
    from provisioner.lifecycle import pulumi_engine

    try:
        pulumi_engine.down(record.cluster_id, backend=record.backend)
    except ProvisionerError as exc:
        report.unlisted.setdefault("pulumi", str(exc))


__all__ = ["STALE_S", "GcReport", "Leftover", "abandoned", "collect_garbage", "configured", "unrecorded", "utc_now"]
