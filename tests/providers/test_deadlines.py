"""Every provider call has an overall deadline: a fake that drips its answer cannot hang a call.

The LambdaFake's ``drip`` fault holds each byte of an answer (headers go out with the first
byte) on an Event the test releases at the end, so the fake would hold a call forever; httpx's
per-read timeout is set far above the deadline, so only the call's own deadline can end it. That
test waits out a real deadline (it proves the socket reads are cut), with no other call in it.

The adopt-after-deadline tests run the deadlines on virtual time instead (``ApiClient(clock=...)``)
that only the drip moves: each dripped byte takes ``interval_s`` of it and arrives at once, so the
dripped launch is past its deadline while the listings around it, answered normally, never are,
however loaded the machine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from pydantic import SecretStr

from provisioner.errors import ProviderAPIError, ProviderError
from provisioner.providers.http import ApiClient, RateLimits, RetryPolicy
from provisioner.providers.lambda_.client import LambdaClient
from provisioner.providers.lambda_.provider import LambdaProvider
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.testing.fakes.lambda_ import CONTRACT_API_KEY as API_KEY
from provisioner.testing.fakes.lambda_ import LambdaFake
from provisioner.testing.fakes.lambda_ import contract_node_specs as node_specs
from tests.conftest import need_shared
from tests.providers.harness import VirtualTime

DEADLINE_S = 2.0
"""The dripped listing's whole deadline (real seconds)."""
VIRTUAL_DEADLINE_S = 60.0
"""Each call's deadline on virtual time (its socket reads get as many real seconds)."""
PER_READ_TIMEOUT_S = 120.0
LIVENESS_S = 30.0  # far above the deadline; only there so a broken deadline fails instead of hanging


@pytest.fixture
def held() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


@pytest.fixture
def lam(serve_fake: Callable[[FakeApp], RunningServer], held: threading.Event) -> tuple[LambdaProvider, LambdaFake]:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    fake = LambdaFake(api_key=API_KEY)
    fake.sleep = lambda seconds: held.wait(seconds) and None  # a drip byte waits until the test ends
    server = serve_fake(fake)
    provider = LambdaProvider(
        API_KEY,
        base_url=server.url,
        timeout_s=PER_READ_TIMEOUT_S,
        limits=RateLimits(1000.0, 100.0, 1000.0, 100.0),
        retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02),
    )
    provider.client.api.deadline_s = DEADLINE_S
    return provider, fake


@pytest.fixture
def lam_on_time(serve_fake: Callable[[FakeApp], RunningServer]) -> tuple[LambdaProvider, LambdaFake]:
    """The adapter with its calls' deadlines on the virtual time the fake's drip moves."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    time = VirtualTime()
    fake = LambdaFake(api_key=API_KEY)
    fake.sleep = time.sleep  # a dripped byte takes interval_s of virtual time, none of the wall clock
    server = serve_fake(fake)
    retry = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
    limits = RateLimits(1000.0, 100.0, 1000.0, 100.0)
    provider = LambdaProvider(API_KEY, base_url=server.url, limits=limits, retry=retry)
    provider.client.api.close()
    provider.client.api = ApiClient(
        "lambda",
        server.url,
        SecretStr(API_KEY),
        error_mapper=LambdaClient.error_mapper,
        limits=limits,
        timeout_s=PER_READ_TIMEOUT_S,
        retry=retry,
        deadline_s=VIRTUAL_DEADLINE_S,
        clock=time.clock,
    )
    return provider, fake


def _call(fn: Callable[[], object]) -> BaseException | object:
    """Run ``fn`` on a thread; what it returned or raised (fails if it is still running)."""
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(LIVENESS_S)
    assert not worker.is_alive(), "a dripping provider hung the call past its deadline"
    return outcome[0]


def test_socket_operations_are_bounded(lam: tuple[LambdaProvider, LambdaFake]) -> None:
    provider, _ = lam
    assert provider.client.api.socket_deadlines


def test_dripped_list_ends_at_the_deadline(lam: tuple[LambdaProvider, LambdaFake]) -> None:
    provider, fake = lam
    fake.faults.inject("drip", route="list_instances", times=None, interval_s=PER_READ_TIMEOUT_S * 10)
    outcome = _call(lambda: provider.get_nodes("c1"))
    assert isinstance(outcome, ProviderAPIError)
    assert outcome.status == 0 and "deadline" in outcome.detail and "GET /api/v1/instances" in outcome.detail


def test_dripped_launch_answer_is_adopted_not_bought_twice(
    lam_on_time: tuple[LambdaProvider, LambdaFake], caplog: pytest.LogCaptureFixture
) -> None:
    # The launch is carried out but its answer comes past the deadline: the deadline ends the
    # call, the re-listing (answered normally) finds the instance and adopts it.
    provider, fake = lam_on_time
    fake.faults.inject("drip", route="launch", times=1, interval_s=PER_READ_TIMEOUT_S * 10)
    outcome = _call(lambda: provider.create_nodes("c1", node_specs(1)))
    assert not isinstance(outcome, BaseException), outcome
    assert [n.name for n in outcome] == ["n0"]  # type: ignore[attr-defined]
    assert fake.launched == 1 and fake.instance_count() == 1
    assert any("launch answer lost" in r.getMessage() and "deadline" in r.getMessage() for r in caplog.records)


def test_dripped_launch_with_failing_listing_fails_closed(lam_on_time: tuple[LambdaProvider, LambdaFake]) -> None:
    provider, fake = lam_on_time
    fake.faults.inject("drip", route="launch", times=1, interval_s=PER_READ_TIMEOUT_S * 10)
    fake.faults.inject("http_error", route="list_instances", times=None, after=1, status=503)
    outcome = _call(lambda: provider.create_nodes("c1", node_specs(1)))
    assert isinstance(outcome, ProviderError)
    message = str(outcome)
    assert "deadline" in message and "instances may exist in cluster c1" in message
    assert "provisioner gc --provider lambda --cluster c1 --yes" in message
    assert fake.launched == 1 and fake.instance_count() == 1  # the one it could not see is still there
