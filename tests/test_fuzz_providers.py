"""Issue 28, item 7: every REST provider's response parsers fed hostile answers (hypothesis).

For each neocloud adapter (Lambda, RunPod, Vast.ai, Fluence) the answers of its fake to every call
the adapter makes (create, list, offers, credentials, billing, usage) are recorded once; then each
example answers one of those calls with the real answer spoiled (one to three values replaced by
hostile ones: NaN, 10^40, control text, nesting, wrong types), or with a hostile body outright
(deep nesting, random bytes, truncated JSON), under a 200 or an error status, and every read the
commands make is called. The only exception allowed out is the error tree's (ProvisionerError):
what the CLI prints as one line with its exit code. Example counts: tests/fuzzing.py's profile.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.errors import ProvisionerError
from provisioner.providers.base import Provider
from provisioner.providers.billing import SupportsBilling, SupportsUsage
from provisioner.providers.http import RetryPolicy
from provisioner.testing.fakes.base import FakeTransport
from tests.fuzzing import FUZZ, hostile_bodies, spoiled
from tests.providers.contract import load_harness
from tests.test_killed_up import NEOCLOUDS

START = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
Key = tuple[str, str]


class Recorded(httpx.BaseTransport):
    """Forwards to the fake in process and keeps the last answer to each (method, path)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.answers: dict[Key, tuple[int, bytes]] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        self.answers[(request.method, request.url.path)] = (response.status_code, body)
        return httpx.Response(response.status_code, headers=response.headers, content=body)


class Spoiling(httpx.BaseTransport):
    """Answers each call from the recorded answers, ``spoil`` deciding the one answer of ``target``."""

    def __init__(self, answers: dict[Key, tuple[int, bytes]]) -> None:
        self.answers = answers
        self.target: Key | None = None
        self.spoiled: tuple[int, bytes] = (200, b"")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = (request.method, request.url.path)
        status, body = self.spoiled if key == self.target or key not in self.answers else self.answers[key]
        return httpx.Response(status, content=body, headers={"Content-Type": "application/json"})


def _provider(name: str, transport: httpx.BaseTransport) -> Provider:
    harness = load_harness(name)
    return harness.make_provider(
        api_key=harness.api_key,
        base_url="http://127.0.0.1:9",
        transport=transport,
        limits=harness.published_limits.scaled(1000.0),
        timeout_s=5.0,
        retry=RetryPolicy(attempts=1, base_delay_s=0.0, sleep=lambda _s: None),
    )


def _reads(provider: Provider, node_ids: dict[str, str]) -> list[Callable[[], Any]]:
    """Every read ``status``, ``gc``, ``costs``, ``down`` and ``watch`` make of a provider."""
    harness_query = load_harness(provider.name).offer_query
    calls: list[Callable[[], Any]] = [
        lambda: provider.get_nodes("fz"),
        provider.check_credentials,
        lambda: provider.list_offers(harness_query),
        lambda: provider.delete_nodes("fz", list(node_ids.values())),
    ]
    if hasattr(provider, "list_owned"):
        calls.append(provider.list_owned)  # type: ignore[attr-defined]
    if isinstance(provider, SupportsBilling):
        calls.append(lambda: provider.billed("fz", node_ids, START, START + dt.timedelta(hours=2)))
    if isinstance(provider, SupportsUsage):
        calls.append(lambda: provider.node_usage("fz", node_ids, since=START))
    return calls


@pytest.fixture(scope="module")
def recorded() -> dict[str, tuple[dict[Key, tuple[int, bytes]], dict[str, str]]]:
    """Per provider: its fake's answers to every call of a create and every read, and the node ids."""
    found = {}
    for name in NEOCLOUDS:
        harness = load_harness(name)
        transport = Recorded(FakeTransport(harness.app))
        provider = _provider(name, transport)
        created = provider.create_nodes("fz", harness.node_specs(1, "n"))
        node_ids = {node.name: node.id for node in created}
        for call in _reads(provider, node_ids)[:3] + _reads(provider, node_ids)[4:]:
            call()
        found[name] = (transport.answers, node_ids)
    return found


def _documents(answers: dict[Key, tuple[int, bytes]]) -> dict[Key, Any]:
    out = {}
    for key, (_status, body) in answers.items():
        try:
            out[key] = json.loads(body)
        except ValueError:
            continue
    return out


@pytest.mark.parametrize("name", NEOCLOUDS)
def test_every_read_of_every_adapter_raises_only_the_error_tree(
    name: str, recorded: dict[str, tuple[dict[Key, tuple[int, bytes]], dict[str, str]]]
) -> None:
    answers, node_ids = recorded[name]
    documents = _documents(answers)
    assert documents, "the fake answered the recording with JSON"
    spoiling = Spoiling(answers)
    provider = _provider(name, spoiling)
    reads = _reads(provider, node_ids)

    @FUZZ
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(documents)), label="endpoint")
        body = data.draw(st.one_of(spoiled(documents[key]), hostile_bodies), label="body")
        status = data.draw(st.sampled_from([200, 200, 200, 201, 400, 401, 404, 409, 429, 500]), label="status")
        spoiling.target, spoiling.spoiled = key, (status, body)
        for read in reads:
            try:
                read()
            except ProvisionerError as exc:
                assert "\n" not in str(exc)
            # anything else (RecursionError, KeyError, TypeError, InvalidOperation...) fails the example

    check()
