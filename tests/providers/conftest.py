"""Fixtures for provider tests: serve a fake on 127.0.0.1 and check it saw only valid traffic.

``serve_fake(app)`` starts ``app`` on a free port and returns the RunningServer; at teardown
the server is stopped and the test fails if the fake recorded any OpenAPI validation error.
``fast_retry`` is a RetryPolicy with millisecond delays for retry tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from provisioner.providers.http import RetryPolicy
from provisioner.testing.fakes.base import FakeApp, RunningServer, serve
from tests.providers.contract import Rig, harness_names, load_harness

# The witness modules are not named test_*.py (test_official_clients.py imports them), so pytest
# would not rewrite their asserts: a failure would say only "AssertionError".
pytest.register_assert_rewrite("tests.providers.official")


@pytest.fixture
def serve_fake() -> Iterator[Callable[[FakeApp], RunningServer]]:
    started: list[RunningServer] = []

    def start(app: FakeApp) -> RunningServer:
        server = serve(app)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    for server in started:
        assert server.app.validation_errors == [], "fake saw traffic that breaks the provider's OpenAPI spec"


@pytest.fixture
def fast_retry() -> RetryPolicy:
    return RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.2)


@pytest.fixture(params=harness_names())
def rig(request: pytest.FixtureRequest, serve_fake: Callable[[FakeApp], RunningServer], fast_retry: RetryPolicy) -> Rig:
    """Every provider with a harness: its fake served, ready to build the adapter against."""
    harness = load_harness(request.param)
    return Rig(harness, serve_fake(harness.app), fast_retry)
