"""Two creates of one cluster at once (two machines, one account): who may go on.

``check_holders`` refuses a create (ClusterBusyError, nothing bought) when the cluster already
has an instance of another owner, an unmarked one, or one another live create is launching;
``check_runs`` when an instance it would adopt was left by an earlier run of the same name.
``rival`` decides, once every launch is done, between this create and any other whose instances
appeared meanwhile: by lease marks (the one that started first wins) where the provider carries
them, and on a provider that cannot (``Launcher.carries_lease`` False: Fluence, whose names have
no room) by instance ids: the create holding the smallest id among both sets wins, which both
sides compute alike from the same listing. Either way the winner waits up to ``rival_wait_s``
for the other's instances to go and yields itself if they stay, so one set of nodes remains.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence

from provisioner.errors import ClusterBusyError, ProviderError
from provisioner.providers.launcher import Launcher, Member
from provisioner.providers.ownership import LeaseMark, foreign_lease


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def check_holders(launcher: Launcher, listed: Sequence[Member]) -> None:
    """Refuse (ClusterBusyError, nothing bought) when the cluster has an instance that is not
    this owner's, or that another live create is launching."""
    where = f"cluster {launcher.cluster_id} on {launcher.provider}"
    for member in listed:
        label = f"instance {member.id}{f' ({member.name})' if member.name else ''}"
        if member.owner is None:
            raise ClusterBusyError(
                f"{where}: {label} carries the cluster's mark but no owner mark of this tool; "
                "it is not adopted: choose another cluster name, or delete it with: "
                f"provisioner gc --provider {launcher.provider} --cluster {launcher.cluster_id} "
                "--force-unowned --yes"
            )
        if member.owner != launcher.owner:
            raise ClusterBusyError(f"{where} already has {label} owned by {member.owner}: choose another cluster name")
        other = foreign_lease(member.lease, launcher.lease, _now(), member.renewed_at)
        if other is not None:
            raise ClusterBusyError(
                f"{where} is being created by {other.describe()} ({label}); wait for it "
                "to end or choose another cluster name"
            )


def check_runs(launcher: Launcher, listed: Sequence[Member], names: Sequence[str]) -> None:
    """Refuse (ClusterBusyError, nothing bought) when an instance this call would adopt (one of ``names``,
    or an unnamed one) carries another run's mark: an earlier bring-up of the name left it, with that
    run's boot data and keys. One under a name this call does not make is left be (it is not this run's:
    status and costs leave it out by its mark, gc collects it)."""
    for member in listed:
        if member.run and launcher.run and member.run != launcher.run and (member.name is None or member.name in names):
            raise ClusterBusyError(
                f"cluster {launcher.cluster_id} on {launcher.provider} still has instance {member.id}"
                f"{f' ({member.name})' if member.name else ''} of an earlier run ({member.run}); it is not "
                f"adopted: remove it with: provisioner gc --provider {launcher.provider} "
                f"--cluster {launcher.cluster_id} --yes"
            )


def rival(launcher: Launcher, ours: set[str], made: Sequence[str]) -> str | None:
    """After every launch: who wins the cluster when another create's instances appeared meanwhile,
    or None when this call does. The create whose lease started first wins, but only once the
    other yields: it waits (up to ``rival_wait_s``) for the other's instances to go; if they stay
    (the other listed before this call's instances showed and went on), this call yields instead,
    so two creates never both go on. A failed listing is no evidence of a rival. ``ours``: the ids
    listed before the launches and those this call made (``made``)."""
    if not launcher.carries_lease:
        return _rival_by_ids(launcher, ours, made)
    mine = LeaseMark.parse(launcher.lease)
    if mine is None:
        return None
    deadline = time.monotonic() + launcher.rival_wait_s
    while True:
        try:
            members = launcher.members()
        except ProviderError:
            return None
        rivals: list[LeaseMark | None] = []
        for member in members:
            if member.id in ours or (member.owner == launcher.owner and member.lease in (None, launcher.lease)):
                continue
            other = LeaseMark.parse(member.lease)
            if other is None or (not other.ours() and other.live(_now(), member.renewed_at)):
                rivals.append(other)
        if not rivals:
            return None
        marks = [other for other in rivals if other is not None]
        if len(marks) < len(rivals):
            return "a create whose instances carry no lease mark of this tool"
        first = min(marks, key=lambda other: (other.started_at, other.token()))
        if (first.started_at, first.token()) < (mine.started_at, mine.token()):
            return first.describe()
        if time.monotonic() >= deadline:
            return f"{first.describe()} (it started later but did not yield within {launcher.rival_wait_s:g}s)"
        time.sleep(launcher.rival_poll_s)


def _rival_by_ids(launcher: Launcher, ours: set[str], made: Sequence[str]) -> str | None:
    """``rival`` where instances carry no lease mark: any instance of the cluster that is neither
    listed before this call nor made by it is another create's; the smallest id wins."""
    if not made:
        return None
    what = "another create of this cluster with the same owner (its instances carry no lease mark here)"
    deadline = time.monotonic() + launcher.rival_wait_s
    while True:
        try:
            members = launcher.members()
        except ProviderError:
            return None
        theirs = [member.id for member in members if member.id not in ours]
        if not theirs:
            return None
        if min(theirs) < min(made):
            return what
        if time.monotonic() >= deadline:
            return f"{what}, which did not yield within {launcher.rival_wait_s:g}s"
        time.sleep(launcher.rival_poll_s)


__all__ = ["check_holders", "rival"]
