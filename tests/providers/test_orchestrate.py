"""providers.orchestrate on an in-memory provider: the create path's rules, one by one.

``Cloud`` is a scripted provider: each launch can succeed, fail before acting, or act and lose
its answer; listing and terminating can fail on demand. The adapters' own behaviour against
their fakes is the contract suite's; this file pins the shared rules and the error wording.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from provisioner.errors import CapacityError, ProviderAPIError, ProviderError, QuotaError
from provisioner.providers.base import NodeSpec
from provisioner.providers.orchestrate import Launcher, Member, create, gc_command

LOST = ProviderAPIError("cloud", 0, "POST /launch timed out: ReadTimeout")


class Cloud(Launcher):
    """Instances are (id, name or None). ``script`` says what each launch call does, in order:
    "ok", "lost" (acts, answer lost), a ProviderError (refused, nothing made), or "partial"."""

    def __init__(self, script: Sequence[object] = (), *, workers: int = 1, relaunch: bool = False) -> None:
        super().__init__("cloud", "c1")
        self.workers = workers
        self.relaunch_on_5xx = relaunch
        self.script = list(script)
        self.instances: dict[str, str | None] = {}
        self.counter = itertools.count()  # next() on a count is atomic: launches may run on threads
        self.launches = 0
        self.list_fails_after: int | None = None
        self.lists = 0
        self.terminate_fails = False
        self.adopted: list[tuple[str, str]] = []

    def members(self) -> list[Member]:
        self.lists += 1
        if self.list_fails_after is not None and self.lists > self.list_fails_after:
            raise ProviderAPIError("cloud", 503, "list failed")
        return [Member(i, name, "t", "r", self.owner) for i, name in self.instances.items()]

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        self.launches += 1
        step = self.script.pop(0) if self.script else "ok"
        if isinstance(step, ProviderError):
            raise step
        made = []
        for spec in batch[: 1 if step == "partial" else None]:
            made.append(f"i{next(self.counter)}")
            self.instances[made[-1]] = spec.name if len(batch) == 1 else None
        if step == "lost":
            raise LOST
        return made

    def adopt(self, member_id: str, spec: NodeSpec) -> None:
        self.adopted.append((member_id, spec.name))
        self.instances[member_id] = spec.name

    def terminate(self, ids: Sequence[str]) -> list[str]:
        if self.terminate_fails:
            return list(ids)
        for i in ids:
            self.instances.pop(i, None)
        return []


def specs(n: int) -> list[NodeSpec]:
    return [NodeSpec(name=f"n{i}", instance_type="t", region="r") for i in range(n)]


def test_existing_nodes_are_not_bought_again() -> None:
    cloud = Cloud()
    first = create(cloud, specs(2))
    again = create(cloud, specs(3))
    assert {k: again[k] for k in first} == first and cloud.launches == 3


def test_lost_answer_is_adopted_by_name() -> None:
    cloud = Cloud(["lost"])
    ids = create(cloud, specs(2))
    assert sorted(ids) == ["n0", "n1"] and cloud.launches == 2 and len(cloud.instances) == 2


def test_unnamed_leftovers_are_adopted_before_buying() -> None:
    cloud = Cloud()
    cloud.instances["old"] = None  # a batch placeholder a killed run never renamed
    ids = create(cloud, specs(2))
    assert ids["n0"] == "old" and cloud.adopted == [("old", "n0")] and cloud.launches == 1


def test_partial_capacity_rolls_back_and_names_what_was_tried() -> None:
    cloud = Cloud(["ok", CapacityError("cloud", "no capacity")])
    with pytest.raises(CapacityError) as caught:
        create(cloud, specs(3))
    message = str(caught.value)
    assert "tried 1 x t in r (cluster c1: 1 of 3 new nodes made); rolled back 1 instance(s)" in message
    assert cloud.instances == {} and cloud.launches == 2, "launches went on after the failure"
    assert "may exist" not in message


def test_a_5xx_is_launched_again_only_where_the_adapter_says_so() -> None:
    refused = ProviderAPIError("cloud", 503, "busy")
    assert sorted(create(Cloud([refused], relaunch=True), specs(1))) == ["n0"]
    cloud = Cloud([refused])
    with pytest.raises(ProviderAPIError, match="busy"):
        create(cloud, specs(1))
    assert cloud.launches == 1


def test_lost_answer_with_failing_listing_fails_closed() -> None:
    cloud = Cloud(["ok", "lost"])
    cloud.list_fails_after = 1  # the first listing (what exists) works, every later one fails
    with pytest.raises(ProviderAPIError) as caught:
        create(cloud, specs(2))
    message = str(caught.value)
    assert "1 of 2 new nodes made" in message and "rolled back 1 instance(s)" in message
    assert "instances may exist in cluster c1" in message and "could not list the cluster" in message
    assert (
        message.endswith(gc_command("cloud", "c1"))
        and gc_command("cloud", "c1") == "provisioner gc --provider cloud --cluster c1 --yes"
    )
    assert list(cloud.instances.values()) == ["n1"]  # the one nobody could see is still there


def test_failed_cleanup_names_what_remains() -> None:
    cloud = Cloud(["ok", QuotaError("cloud", "no balance")])
    cloud.terminate_fails = True
    with pytest.raises(QuotaError) as caught:
        create(cloud, specs(2))
    message = str(caught.value)
    assert "cleanup FAILED, still running: i0" in message and "instances may exist in cluster c1" in message


def test_a_timed_out_launch_nothing_appeared_for_is_not_called_clean() -> None:
    # The provider acted late: nothing is listed yet when the client looks.
    class Late(Cloud):
        def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
            self.launches += 1
            raise LOST

    cloud = Late()
    with pytest.raises(ProviderAPIError) as caught:
        create(cloud, specs(1))
    message = str(caught.value)
    assert "timed out and its instance may still appear" in message and gc_command("cloud", "c1") in message


def test_parallel_launches_stop_at_the_first_failure_and_roll_back_all() -> None:
    cloud = Cloud(["ok", CapacityError("cloud", "sold out")], workers=4)
    with pytest.raises(CapacityError):
        create(cloud, specs(6))
    assert cloud.instances == {} and cloud.launches <= 6


def test_duplicate_names_buy_nothing() -> None:
    cloud = Cloud()
    with pytest.raises(ValueError, match="unique"):
        create(cloud, [*specs(1), *specs(1)])
    assert cloud.launches == 0 and cloud.lists == 0


def test_a_bug_in_a_launch_still_rolls_back() -> None:
    class Buggy(Cloud):
        def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
            if self.launches == 1:
                raise KeyError("offer")
            return super().launch(batch)

    cloud = Buggy()
    with pytest.raises(ProviderAPIError, match="launch failed: KeyError") as caught:
        create(cloud, specs(2))
    assert cloud.instances == {} and "rolled back 1 instance(s)" in str(caught.value)
