"""Each defence layer of "own exactly what you made", one by one (issue 16, items 1-2).

Layers: the lease mark's strict parsing and liveness; the one owner-checked delete
(providers.ownership.delete_owned); orchestrate's refusal to adopt what is not this call's and its
race rule after launching; the local cluster lock (a real second process holds it); gc's verdicts
on an up that died in ``creating``, unmarked and other owners' nodes; the Vast label's strict
parse; Lambda's SSH key registration raced by two ``up`` at once; and the rule that nothing in
the lifecycle or stacks deletes except through delete_owned. The whole-system proofs (SIGKILL,
two terminals, other owners on each fake) are in tests/test_killed_up.py.
"""

from __future__ import annotations

import ast
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.errors import ClusterBusyError
from provisioner.lifecycle import lease
from provisioner.lifecycle.gc import collect_garbage
from provisioner.lifecycle.state import ClusterRecord
from provisioner.providers.base import Node, NodeSpec, NodeStatus
from provisioner.providers.orchestrate import Member, create
from provisioner.providers.ownership import LEASE_MAX_S, LeaseMark, delete_owned, host_slug
from provisioner.providers.vastai.provider import cluster_label, parse_label
from tests.conftest import ROOT
from tests.providers.test_orchestrate import Cloud, specs
from tests.test_gc import NOW, rig_for

T0 = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ----- lease marks ------------------------------------------------------------------------------
def test_lease_mark_round_trips_and_parses_strictly() -> None:
    mark = LeaseMark("build-box-7", 4242, T0)
    assert mark.token() == "build-box-7-4242-20261124t120000z"
    assert LeaseMark.parse(mark.token()) == mark
    for bad in (
        "",
        "build-box-7-4242",
        "Build-4242-20261124t120000z",
        "box-0-20261124t120000z",
        "box-4242-20261124t120000z-x",
        "box 1-4242-20261124t120000z",
        "box-4242-20261340t120000z",
    ):
        assert LeaseMark.parse(bad) is None, bad


def test_a_lease_is_live_until_its_process_dies_here_or_its_time_passes_elsewhere() -> None:
    here = LeaseMark(host_slug(), os.getpid(), T0)
    assert here.live(T0 + dt.timedelta(minutes=5))
    assert not LeaseMark(host_slug(), dead_pid(), T0).live(T0 + dt.timedelta(seconds=1))
    elsewhere = LeaseMark("another-machine", 1, T0)  # its pid means nothing here
    assert elsewhere.live(T0 + dt.timedelta(seconds=LEASE_MAX_S - 1))
    assert not elsewhere.live(T0 + dt.timedelta(seconds=LEASE_MAX_S))


# ----- the one owner-checked delete -------------------------------------------------------------
class Listed:
    """A provider that lists fixed nodes and records what it was asked to delete."""

    name = "cloud"
    capabilities = frozenset()

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        self.deleted: list[str] = []

    def get_nodes(self, cluster_id: str) -> list[Node]:
        return [node for node in self.nodes if node.cluster_id == cluster_id]

    def delete_nodes(self, cluster_id: str, node_ids: Sequence[str] | None = None) -> None:
        assert node_ids is not None, "the owner-checked delete always names the ids"
        self.deleted += list(node_ids)


def node(node_id: str, owner: str | None, lease_mark: str | None = None) -> Node:
    return Node(
        provider="cloud",
        id=node_id,
        name=node_id,
        cluster_id="c",
        status=NodeStatus.RUNNING,
        owner=owner,
        lease=lease_mark,
    )


def test_delete_owned_deletes_only_the_callers_and_unmarked_only_when_forced() -> None:
    cloud = Listed([node("mine", "tester"), node("theirs", "colleague"), node("bare", None)])
    done = delete_owned(cloud, "c")  # type: ignore[arg-type]
    assert cloud.deleted == ["mine"]
    assert {n.id: why.split(" (")[0] for n, why in done.kept} == {
        "theirs": "owned by colleague",
        "bare": "carries no owner mark of this tool",
    }
    cloud.deleted.clear()
    delete_owned(cloud, "c", force_unowned=True)  # type: ignore[arg-type]
    assert sorted(cloud.deleted) == ["bare", "mine"], "force_unowned never reaches another owner's node"


def test_a_failed_creates_cleanup_takes_only_its_own_lease() -> None:
    cloud = Listed([node("a", "tester", "h-1-20261124t120000z"), node("b", "tester", "h-2-20261124t120001z")])
    delete_owned(cloud, "c", lease="h-2-20261124t120001z")  # type: ignore[arg-type]
    assert cloud.deleted == ["b"]


# ----- orchestrate: adoption and races ----------------------------------------------------------
class Marked(Cloud):
    """The scripted cloud, each instance with its own owner and lease marks; ``appear`` runs after
    the first launch (another create's instances showing up), ``vanish_after`` lists before
    the rival's instances go (it yields)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.marks: dict[str, tuple[str | None, str | None]] = {}
        self.appear: dict[str, tuple[str, str | None, str | None]] = {}
        self.vanish_after: int | None = None
        self.terminated: list[str] = []

    def members(self) -> list[Member]:
        if self.vanish_after is not None:
            self.vanish_after -= 1
            if self.vanish_after < 0:
                for rival in self.appear:
                    self.instances.pop(rival, None)
        found = super().members()
        return [
            Member(m.id, m.name, m.instance_type, m.region, *self.marks.get(m.id, (self.owner, self.lease)))
            for m in found
        ]

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        made = super().launch(batch)
        for rival, (name, owner, mark) in self.appear.items():
            if rival not in self.instances:
                self.instances[rival] = name
                self.marks[rival] = (owner, mark)
        return made

    def terminate(self, ids: Sequence[str]) -> list[str]:
        self.terminated += list(ids)
        return super().terminate(ids)


def leased(n: int, mark: LeaseMark) -> list[NodeSpec]:
    return [spec.model_copy(update={"lease": mark.token()}) for spec in specs(n)]


NOW_MARK = LeaseMark("box", 10, dt.datetime.now(dt.UTC).replace(microsecond=0))


@pytest.mark.parametrize(
    ("owner", "mark", "words"),
    [
        ("colleague", None, "owned by colleague"),
        (None, None, "no owner mark of this tool"),
        ("tester", LeaseMark("other-box", 7, NOW_MARK.started_at).token(), "is being created by pid 7 on other-box"),
    ],
    ids=["colleague", "no-mark", "live-lease"],
)  # ids without the time: every xdist worker collects the same
def test_what_is_not_this_calls_is_never_adopted(owner: str | None, mark: str | None, words: str) -> None:
    cloud = Marked()
    cloud.instances["x"] = "n0"
    cloud.marks["x"] = (owner, mark)
    with pytest.raises(ClusterBusyError, match=words):
        create(cloud, leased(2, NOW_MARK))
    assert cloud.launches == 0 and cloud.terminated == []


def test_a_dead_creates_own_nodes_are_adopted() -> None:
    cloud = Marked()
    cloud.instances["x"] = "n0"
    cloud.marks["x"] = ("tester", LeaseMark(host_slug(), dead_pid(), NOW_MARK.started_at).token())
    assert create(cloud, leased(2, NOW_MARK))["n0"] == "x" and cloud.launches == 1


def test_the_later_of_two_racing_creates_terminates_exactly_its_own() -> None:
    earlier = LeaseMark("other-box", 7, NOW_MARK.started_at - dt.timedelta(seconds=1))
    cloud = Marked()
    cloud.appear = {"rival0": ("n0", "tester", earlier.token()), "rival1": ("n1", "tester", earlier.token())}
    with pytest.raises(ClusterBusyError, match=r"being created by pid 7 on other-box since .* at the same time"):
        create(cloud, leased(2, NOW_MARK))
    assert cloud.launches == 2 and sorted(cloud.terminated) == ["i0", "i1"]
    assert sorted(cloud.instances) == ["rival0", "rival1"], "the winner's instances are never touched"


def test_the_earlier_create_goes_on_once_the_later_one_yields() -> None:
    later = LeaseMark("other-box", 7, NOW_MARK.started_at + dt.timedelta(seconds=1))
    cloud = Marked()
    cloud.rival_poll_s = 0.0
    cloud.appear = {"rival0": ("n0", "tester", later.token())}
    cloud.vanish_after = 2  # the rival is still listed once after the launches, then gone
    ids = create(cloud, leased(1, NOW_MARK))
    assert ids == {"n0": "i0"} and cloud.terminated == []


def test_the_earlier_create_yields_when_the_later_one_does_not() -> None:
    later = LeaseMark("other-box", 7, NOW_MARK.started_at + dt.timedelta(seconds=1))
    cloud = Marked()
    cloud.rival_wait_s = 0.0
    cloud.appear = {"rival0": ("n0", "tester", later.token())}
    with pytest.raises(ClusterBusyError, match="did not yield"):
        create(cloud, leased(1, NOW_MARK))
    assert cloud.terminated == ["i0"] and "rival0" in cloud.instances


class Unleased(Marked):
    """A provider whose instances show no lease mark back (Fluence): a rival is any instance that
    appeared during the call, same owner or not."""

    carries_lease = False


def test_without_lease_marks_the_create_without_the_smallest_id_yields() -> None:
    cloud = Unleased()  # the other create's instances carry this very owner and no lease: Fluence
    cloud.appear = {"a0": ("n0", "tester", None), "a1": ("n1", "tester", None)}
    with pytest.raises(ClusterBusyError, match="another create of this cluster with the same owner"):
        create(cloud, leased(2, NOW_MARK))
    assert sorted(cloud.terminated) == ["i0", "i1"] and sorted(cloud.instances) == ["a0", "a1"]


def test_without_lease_marks_the_smallest_id_waits_for_the_other_then_goes_on() -> None:
    cloud = Unleased()
    cloud.rival_poll_s = 0.0
    cloud.appear = {"z0": ("n0", "tester", None)}
    cloud.vanish_after = 2  # the other yields after two more listings
    assert create(cloud, leased(1, NOW_MARK)) == {"n0": "i0"} and cloud.terminated == []
    stays = Unleased()
    stays.rival_wait_s = 0.0
    stays.appear = {"z0": ("n0", "tester", None)}
    with pytest.raises(ClusterBusyError, match="did not yield"):
        create(stays, leased(1, NOW_MARK))
    assert stays.terminated == ["i0"] and sorted(stays.instances) == ["z0"]


def test_two_ups_of_one_owner_on_the_fluence_fake_leave_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both list the cluster empty before either launches (two machines, one owner id): before, each
    # bought its 2 nodes and went on (4 nodes for 2). Now the one that sees the other's instances
    # after launching yields (terminating exactly its own), so 2 remain.
    from provisioner.providers.fluence import provider as fluence
    from provisioner.providers.launcher import Launcher
    from provisioner.testing.fakes.base import FakeTransport
    from tests.test_gc import FAST, UNLIMITED

    first = rig_for("fluence")
    h = first.harness
    other = h.make_provider(
        api_key=h.api_key,
        base_url="http://fluence.test",
        transport=FakeTransport(h.app),
        limits=UNLIMITED,
        timeout_s=5.0,
        retry=FAST,
    )
    monkeypatch.setattr(Launcher, "rival_wait_s", 0.05)
    monkeypatch.setattr(Launcher, "rival_poll_s", 0.0)
    real_launch = fluence._Launcher.launch
    raced: list[dict[str, str]] = []

    def launch(self: fluence._Launcher, batch: Sequence[NodeSpec]) -> list[str]:
        if not raced:  # the other up runs its whole create between this one's listing and launch
            raced.append({})
            raced[0] = {n.name: n.id for n in other.create_nodes("race", first.harness.node_specs(2, "n"))}
        return real_launch(self, batch)

    monkeypatch.setattr(fluence._Launcher, "launch", launch)
    with pytest.raises(ClusterBusyError, match="another create of this cluster with the same owner"):
        first.provider.create_nodes("race", first.harness.node_specs(2, "n"))
    assert first.harness.instances() == 2
    assert sorted(n.id for n in first.provider.get_nodes("race") if n.status != NodeStatus.TERMINATED) == sorted(
        raced[0].values()
    )


# ----- the local lock ---------------------------------------------------------------------------
HOLDER = r"""
import sys, time
from provisioner.lifecycle.lease import hold
with hold(sys.argv[1], "up"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_holder_is_refused_naming_the_first_until_it_dies(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "c1"], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        held = lease.holder("c1")
        assert held is not None and (held.what, held.pid, held.host) == ("up", child.pid, host_slug())
        with (
            pytest.raises(ClusterBusyError, match=rf"cluster c1 is held by up \(pid {child.pid} on "),
            lease.hold("c1", "down"),
        ):
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert lease.holder("c1") is None  # the kernel dropped the dead holder's lock
    with lease.hold("c1", "down") as mark, lease.hold("c1", "down") as again:  # reentrant in one process
        assert mark == again and lease.holder("c1") is not None


def test_the_heartbeat_moves_while_held() -> None:
    ticks = iter(T0 + dt.timedelta(seconds=s) for s in range(1000))
    beat = threading.Event()
    with lease.hold("c2", "up", now=lambda: next(ticks), heartbeat_s=0.01):
        first = lease.read_lease("c2")
        beat.wait(0.3)
        later = lease.read_lease("c2")
    assert first is not None and later is not None and later.heartbeat_at > first.heartbeat_at
    assert later.started_at == first.started_at


# ----- gc's verdicts ----------------------------------------------------------------------------
def creating(cluster_id: str, provider: str) -> ClusterRecord:
    return ClusterRecord.model_construct(
        cluster_id=cluster_id, provider=provider, expires_at=None, created_at=NOW, node_ids={}, status="creating"
    )


def test_an_up_that_died_creating_is_collected_ttl_or_not_and_a_live_one_is_kept() -> None:
    rig = rig_for("runpod")
    rig.provider.create_nodes("dead", rig.harness.node_specs(1, "n"))
    rig.provider.create_nodes("busy", rig.harness.node_specs(1, "n"))
    records = [creating("dead", "runpod"), creating("busy", "runpod")]
    with lease.hold("busy", "up"):  # this process is the busy cluster's live up
        report = collect_garbage(adapters={"runpod": rig.provider}, records=records, delete=True, now=lambda: NOW)
    assert [(x.cluster_id, x.why) for x in report.deleted] == [
        ("dead", "its up died while creating (no process holds the cluster's lock)")
    ]
    assert ("runpod", "busy", "its up is still creating it (it holds the cluster's lock)") in report.kept
    assert [n.name for n in rig.provider.get_nodes("busy")] == ["n0"] and rig.harness.instances() == 1


def test_a_lock_whose_heartbeat_stopped_counts_as_dead() -> None:
    rig = rig_for("lambda")
    rig.provider.create_nodes("hung", rig.harness.node_specs(1, "n"))
    with lease.hold("hung", "up", now=lambda: NOW):
        report = collect_garbage(
            adapters={"lambda": rig.provider},
            records=[creating("hung", "lambda")],
            now=lambda: NOW + dt.timedelta(minutes=10),
        )
    assert [x.why.split(" (")[0] for x in report.leftovers] == ["its up's lease expired"]


@pytest.mark.parametrize("name", ["lambda", "runpod", "vastai"])
def test_unmarked_nodes_are_kept_unless_named_and_forced(name: str) -> None:
    rig = rig_for(name)
    (made,) = rig.provider.create_nodes("c9", rig.harness.node_specs(1, "n"))
    strip_owner(name, rig.fake, made.id)
    adapters = {name: rig.provider}
    report = collect_garbage(adapters=adapters, records=[], delete=True, now=lambda: NOW)
    assert report.deleted == [] and rig.harness.instances() == 1
    assert any(why.startswith("carries no owner mark") for _, _, why in report.kept)
    with pytest.raises(ValueError, match="--force-unowned needs --cluster"):
        collect_garbage(adapters=adapters, records=[], delete=True, now=lambda: NOW, force_unowned=True)
    forced = collect_garbage(
        adapters=adapters, records=[], cluster_id="c9", delete=True, now=lambda: NOW, force_unowned=True
    )
    assert [x.node_id for x in forced.deleted] == [made.id] and rig.harness.instances() == 0


def strip_owner(name: str, fake: object, node_id: str) -> None:
    """Make the instance look like one the tool did not mark (the user's own, an older tool's)."""
    if name == "lambda":
        body = fake.instances[node_id]  # type: ignore[attr-defined]
        body["tags"] = [t for t in body["tags"] if t["key"] == "provisioner-cluster"]
    elif name == "runpod":
        env = fake.pods[node_id]["env"]  # type: ignore[attr-defined]
        for key in ("PROVISIONER_OWNER", "PROVISIONER_LEASE"):
            env.pop(key, None)
    else:
        body = fake.instances[int(node_id)]  # type: ignore[attr-defined]
        body["label"] = "/".join(body["label"].split("/")[:2])


# ----- strict marks where there are no tags -----------------------------------------------------
def test_the_vast_label_is_parsed_strictly() -> None:
    mark = "box-7-20261124t120000z"
    assert parse_label(cluster_label("c1", "c1-0", "tester", mark)) == ("c1", "c1-0", "tester", mark)
    assert parse_label("research/notebook") == ("research", "notebook", None, None)
    for other in (
        "research",
        "a/b/c",
        "c1/n0/owner=Tester",
        "c1/n0/owner=t/lease=X",
        "c1/n0/owner=",
        "/n0/owner=t",
        "c1/n0/owner=t/extra",
        None,
    ):
        assert parse_label(other) is None, other


# ----- nothing deletes around the owner check ---------------------------------------------------
def test_the_lifecycle_and_stacks_delete_only_through_delete_owned() -> None:
    """``delete_nodes`` is called only by providers.ownership.delete_owned (and each adapter's own
    rollback of the ids its call launched): a new delete elsewhere would skip the owner check."""
    callers = []
    for folder in ("provisioner", "stacks"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "testing" in path.parts or "delete_nodes" not in text:  # no such name: no such call (a quick skip)
                continue
            for item in ast.walk(ast.parse(text)):
                if (
                    isinstance(item, ast.Attribute)
                    and item.attr == "delete_nodes"
                    and isinstance(getattr(item, "ctx", None), ast.Load)
                ):
                    callers.append(str(path.relative_to(ROOT)))
    assert callers == []


def test_two_ups_registering_one_lambda_key_at_once_both_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other ``up`` registers the key between this one's listing and its add: the fake refuses
    the add (400, name exists) and the adapter uses the key the other registered."""
    rig = rig_for("lambda")
    client = rig.provider.client  # type: ignore[attr-defined]
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBwTq0Zk3YlLQ9n0fK0d1vJp3m2x6sV2bG8cX9h4uQ7e race"
    real_list = client.list_ssh_keys
    raced: list[bool] = []

    def listed_then_the_other_up_adds() -> object:
        keys = real_list()
        if not raced:
            raced.append(True)
            client.add_ssh_key("provisioner-race", key)
        return keys

    monkeypatch.setattr(client, "list_ssh_keys", listed_then_the_other_up_adds)
    assert rig.provider.ensure_ssh_key("provisioner-race", key) == "provisioner-race"  # type: ignore[attr-defined]
    assert [c.status for c in rig.fake.calls_of("add_ssh_key")] == [200, 400], "the race happened"
