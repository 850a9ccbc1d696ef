"""The one create path every adapter uses: adopt after a lost answer, roll back on failure, fail closed.

An adapter's ``create_nodes`` builds a ``Launcher`` (``providers.launcher``) for the call (three small functions:
``members`` lists the cluster, ``launch`` buys one batch, ``terminate`` deletes ids) and hands
it to ``create``. Everything below is decided here, once:

- **Idempotent.** The cluster is listed first; a node whose name is already there is not
  bought again. A member listed without a name yet (Lambda's batch placeholder, left by a run
  that died before renaming) is adopted for a missing node of its type and region.
- **Adopt after a lost answer.** A launch that ends without a clear answer (a timeout, a
  dropped connection: status 0; or a 5xx) is followed by a re-listing: the batch's nodes that
  appeared (by name, or unnamed and new) are adopted, never bought twice. Where the adapter says
  a 5xx means the provider did not act (``relaunch_on_5xx``), a definite 500/502/503 with
  nothing appeared is launched once more; a timeout or 504 never is (the instance may still be
  on its way).
- **All or nothing.** On the first failure no new batch starts (those in flight finish); every
  instance this call launched or adopted, and every instance of the missing nodes that shows up
  in one more listing, is terminated; then the error is raised, the same class as the cause,
  naming what was tried and how many of the new nodes were made.
- **Only what is ours.** Before anything is bought, an instance of the cluster that carries
  another owner's mark, no owner mark or another live lease mark (providers.ownership) refuses
  the call (ClusterBusyError): it is never adopted. Nor is one of another run (an earlier bring-up
  of the name left it) that this call would adopt: its name, or unnamed. Once every batch launched, the cluster is
  listed once more; when another create's instances appeared meanwhile (two machines, one
  account), the lease that started first wins once the other's instances are gone (the other
  call terminates exactly the ids it launched and raises ClusterBusyError); a winner whose rival
  does not yield within ``rival_wait_s`` yields itself, so two creates never both go on. The
  rollback's extra listing also takes only instances carrying this call's owner and lease marks.
- **Fail closed.** When an answer was lost and no listing could say what it bought, or when
  the cleanup failed, the error says that instances may exist, names the cluster and gives the
  command that removes them: ``provisioner gc --provider P --cluster ID --yes``. It never
  reports "0 made" for launches it could not see.

Blocking: for the launch/list/terminate calls only, never for boot. Thread-safe per call: a
``Launcher`` with ``workers > 1`` has its ``launch`` called from a thread pool.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from provisioner.errors import CapacityError, ClusterBusyError, ProviderAPIError, ProviderError, RateLimitError
from provisioner.providers.base import Node, NodeSpec, NodeStatus
from provisioner.providers.launcher import Launcher, Member
from provisioner.providers.rivals import check_holders, check_runs, rival

log = logging.getLogger("provisioner.providers.orchestrate")

_DEFINITE_5XX = frozenset({500, 502, 503})


def answer(
    provider: str,
    cluster_id: str,
    nodes: Sequence[NodeSpec],
    ids: Mapping[str, str],
    listed: Callable[[], Sequence[Node]],
) -> list[Node]:
    """What ``create_nodes`` returns once ``create`` succeeded: ``nodes`` in order, as ``listed()``
    shows them (by id), else as pending Nodes built from the ids (a listing that fails now must
    not turn nodes that exist into an error that hides them)."""
    try:
        by_id = {node.id: node for node in listed()}
    except ProviderError as exc:
        log.warning(
            "%s: cluster %s created, but listing it failed (%s); reporting the nodes as pending",
            provider,
            cluster_id,
            exc.message,
        )
        by_id = {}
    return [
        by_id.get(ids[spec.name])
        or Node(
            provider=provider,
            id=ids[spec.name],
            name=spec.name,
            cluster_id=cluster_id,
            status=NodeStatus.PENDING,
            instance_type=spec.instance_type,
            region=spec.region,
        )
        for spec in nodes
    ]


def gc_command(provider: str, cluster_id: str) -> str:
    """The command that removes whatever a failed create may have left."""
    return f"provisioner gc --provider {provider} --cluster {cluster_id} --yes"


def with_note(exc: ProviderError, note: str) -> ProviderError:
    """The same kind of error as ``exc``, its message followed by ``; note``."""
    if isinstance(exc, ProviderAPIError):
        return ProviderAPIError(exc.provider, exc.status, f"{exc.detail}; {note}")
    if isinstance(exc, RateLimitError):
        return RateLimitError(exc.provider, f"{exc.message}; {note}", exc.retry_after_s)
    return type(exc)(exc.provider, f"{exc.message}; {note}")


def unclear(exc: ProviderError) -> bool:
    """Whether the provider may have acted on a launch that failed this way (timeout, 5xx)."""
    return isinstance(exc, ProviderAPIError) and (exc.status == 0 or exc.status >= 500)


@dataclass
class _Call:
    known: set[str]  # ids listed before launching
    spare: list[Member]  # unnamed members, adoptable
    made: dict[str, str] = field(default_factory=dict)  # node name -> id, launched or adopted here
    lost: list[str] = field(default_factory=list)  # unanswered launches no listing could check
    pending: list[str] = field(default_factory=list)  # timed-out launches nothing has appeared for yet
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def create(launcher: Launcher, nodes: Sequence[NodeSpec]) -> dict[str, str]:
    """Make every node of ``nodes`` exist; return node name -> instance id (see module docstring).

    Raises ValueError for duplicate names (nothing bought), otherwise the ProviderError of the
    first failure, after the rollback, with what remains when anything may.
    """
    names = [spec.name for spec in nodes]
    if len(set(names)) != len(names):
        raise ValueError(f"node names must be unique within a cluster: {names}")
    launcher.lease = launcher.lease or next((spec.lease for spec in nodes if spec.lease), None)
    launcher.run = launcher.run or next((spec.run for spec in nodes if spec.run), None)
    listed = launcher.members()
    check_holders(launcher, listed)
    check_runs(launcher, listed, names)
    present = {m.name: m.id for m in listed if m.name is not None}
    missing = [spec for spec in nodes if spec.name not in present]
    if not missing:
        return {name: present[name] for name in names}
    launcher.prepare(missing)
    call = _Call(known={m.id for m in listed}, spare=[m for m in listed if m.name is None])
    batches = launcher.batches(missing)
    tried = launcher.describe(batches[0])
    try:
        tried = _run(launcher, call, batches)
        launcher.finish()
    except ProviderError as exc:
        launcher.abort()
        raise _rolled_back(launcher, call, missing, exc, tried) from None
    winner = rival(launcher, set(call.made.values()) | call.known, list(call.made.values()))
    if winner is not None:
        made = list(call.made.values())
        left = launcher.terminate(made)
        note = (
            f"terminated the {len(made)} instance(s) this call launched"
            if not left
            else f"terminating this call's instances FAILED, still running: {', '.join(left)}; remove them "
            f"with: {gc_command(launcher.provider, launcher.cluster_id)}"
        )
        raise ClusterBusyError(
            f"cluster {launcher.cluster_id} on {launcher.provider} is being created by "
            f"{winner} at the same time, which started first; {note}"
        )
    return {name: present.get(name) or call.made[name] for name in names}


def _run(launcher: Launcher, call: _Call, batches: list[list[NodeSpec]]) -> str:
    """Launch every batch (``workers`` at once); on the first failure start no more and raise it."""
    if launcher.workers <= 1 or len(batches) == 1:
        for batch in batches:
            try:
                _launch_batch(launcher, call, batch)
            except Exception as exc:  # any failure, even a bug, must roll back what was bought
                raise _Failed(_as_provider_error(launcher, exc), launcher.describe(batch)) from None
        return launcher.describe(batches[-1])
    with ThreadPoolExecutor(
        min(launcher.workers, len(batches)), thread_name_prefix=f"{launcher.provider}-launch"
    ) as pool:
        futures: dict[Future[None], list[NodeSpec]] = {
            pool.submit(_launch_batch, launcher, call, batch): batch for batch in batches
        }
        wait(futures, return_when=FIRST_EXCEPTION)
        call.stop.set()  # batches not started yet skip themselves; running ones finish
        first: tuple[BaseException, list[NodeSpec]] | None = None
        for future, batch in futures.items():
            error = future.exception()  # waits for the ones in flight
            if error is not None and first is None:
                first = (error, batch)
    if first is None:
        return launcher.describe(batches[-1])
    error, batch = first
    raise _Failed(_as_provider_error(launcher, error), launcher.describe(batch))


def _as_provider_error(launcher: Launcher, error: BaseException) -> ProviderError:
    """``error`` itself, or (a bug, not a provider's answer) a ProviderAPIError naming it, so the
    rollback still runs."""
    if isinstance(error, ProviderError):
        return error
    return ProviderAPIError(launcher.provider, 0, f"launch failed: {type(error).__name__}: {error}")


class _Failed(ProviderError):
    """A launch failure and the batch it was for (unwrapped by ``create``)."""

    def __init__(self, cause: ProviderError, tried: str) -> None:
        self.cause = cause
        self.tried = tried
        super().__init__(cause.provider, cause.message)


def _launch_batch(launcher: Launcher, call: _Call, batch: list[NodeSpec]) -> None:
    if call.stop.is_set() and launcher.workers > 1:
        return
    todo = list(batch)
    with call.lock:  # unnamed members left by an earlier run are used before buying more
        fitting = [m for m in call.spare if m.instance_type == todo[0].instance_type and m.region == todo[0].region]
        adopted = list(zip(fitting, todo, strict=False))
        for member, spec in adopted:
            call.spare.remove(member)
            call.made[spec.name] = member.id
    for member, spec in adopted:
        launcher.adopt(member.id, spec)
    todo = todo[len(adopted) :]
    for attempt in (1, 2):
        if not todo:
            return
        try:
            ids = launcher.launch(todo)
        except ProviderError as exc:
            if not unclear(exc):
                raise
            todo = _adopt_appeared(launcher, call, todo, exc)
            if (
                todo
                and attempt == 1
                and launcher.relaunch_on_5xx
                and isinstance(exc, ProviderAPIError)
                and exc.status in _DEFINITE_5XX
            ):
                log.warning(
                    "%s: launch of %s failed (%s) and nothing appeared; launching once more",
                    launcher.provider,
                    ", ".join(s.name for s in todo),
                    exc.message,
                )
                continue
            if todo:
                if isinstance(exc, ProviderAPIError) and exc.status in (0, 504):
                    with call.lock:
                        call.pending.append(
                            f"a launch of {', '.join(s.name for s in todo)} timed out and its instance may still appear"
                        )
                raise
            return
        with call.lock:
            call.made.update({spec.name: instance_id for spec, instance_id in zip(todo, ids, strict=False)})
        if len(ids) < len(todo):
            raise CapacityError(
                launcher.provider, f"Not enough capacity: got {len(ids)} of {len(todo)} [partial launch]"
            )
        return


def _adopt_appeared(launcher: Launcher, call: _Call, todo: list[NodeSpec], exc: ProviderError) -> list[NodeSpec]:
    """After an unclear launch: adopt what of ``todo`` appeared; return what did not.

    A failing listing leaves the outcome unknown: that is recorded (the error will say that
    instances may exist) and the launch's own error is raised.
    """
    try:
        members = launcher.members()
    except ProviderError as listing:
        with call.lock:
            call.lost.append(
                f"the answer to a launch of {', '.join(s.name for s in todo)} was lost "
                f"({exc.message}) and listing the cluster failed too ({listing.message})"
            )
        raise exc from None
    wanted = {spec.name: spec for spec in todo}
    with call.lock:
        seen = call.known | set(call.made.values())
        members = [m for m in members if launcher.mine(m)]
        named = {m.name: m.id for m in members if m.name in wanted and m.id not in seen}
        call.made.update(named)
        rest = [spec for spec in todo if spec.name not in named]
        unnamed = [m for m in members if m.name is None and m.id not in seen]
        adopted = list(zip(unnamed, rest, strict=False))
        for member, spec in adopted:
            call.made[spec.name] = member.id
    for member, spec in adopted:
        launcher.adopt(member.id, spec)
    if named or adopted:
        log.warning(
            "%s: launch answer lost (%s); adopted %d instance(s) that appeared",
            launcher.provider,
            exc.message,
            len(named) + len(adopted),
        )
    return rest[len(adopted) :]


def _rolled_back(
    launcher: Launcher, call: _Call, missing: list[NodeSpec], failure: ProviderError, tried: str
) -> ProviderError:
    exc, tried = (failure.cause, failure.tried) if isinstance(failure, _Failed) else (failure, tried)
    note = f"tried {tried} (cluster {launcher.cluster_id}: {len(call.made)} of {len(missing)} new nodes made"
    if isinstance(exc, CapacityError):
        note += launcher.capacity_hint()
    doomed = list(call.made.values())
    doubts = list(call.lost)
    try:  # a launch whose answer was lost may have bought something: look once more
        wanted = {spec.name for spec in missing}
        doomed += [
            m.id
            for m in launcher.members()
            if m.id not in doomed
            and m.id not in call.known
            and (m.name is None or m.name in wanted)
            and launcher.mine(m)
        ]
        doubts = list(call.pending)  # the listing saw what the lost answers bought; slow ones may still come
    except ProviderError as listing:
        if call.lost or call.pending:
            doubts += call.pending
            doubts.append(f"could not list the cluster to check ({listing.message})")
    left = launcher.terminate(doomed) if doomed else []
    if left:
        note += f"); cleanup FAILED, still running: {', '.join(left)}"
        doubts.append("cleanup failed")
    elif doomed:
        note += f"); rolled back {len(doomed)} instance(s) this call made"
    else:
        note += ")"
    if doubts:
        note += (
            f"; instances may exist in cluster {launcher.cluster_id} ({'; '.join(doubts)}): remove them with: "
            f"{gc_command(launcher.provider, launcher.cluster_id)}"
        )
    return with_note(exc, note)


__all__ = ["Launcher", "Member", "answer", "create", "gc_command", "unclear", "with_note"]
