"""The Vast.ai fake's every answer passes its own spec check (issue 26 item 2): each route's
success, each refusal it writes itself and the wrong-key answer, at the official client's paths.
(The official client's own traffic is in tests/providers/official/vastai.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from provisioner.testing.fakes.vastai import VastAIFake
from tests.conftest import need_shared

KEY = "vast-audit-key-0123456789"
ASK = 4_100_000  # the first ask of the fake's market (an RTX 4090 in Texas)
DAY = json.dumps({"day": {"gte": 1795651200, "lte": 1795737599}})


@pytest.fixture
def fake() -> Iterator[VastAIFake]:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    yield VastAIFake(api_key=KEY)


def _send(app: VastAIFake, method: str, path: str, *, key: str = KEY, **kwargs: Any) -> httpx.Response:
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://vast.test") as http:
        return http.request(method, path, headers={"Authorization": f"Bearer {key}"}, **kwargs)


def _rent(app: VastAIFake) -> int:
    answer = _send(app, "PUT", f"/api/v0/asks/{ASK}/", json={"image": "vastai/base-image:x", "runtype": "ssh"})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["new_contract"])


REFUSALS = [
    # A gone ask: 404 "invalid_args", "no_such_ask" only in the message (Vast's documented body)
    ("PUT", f"/api/v0/asks/{ASK - 1}/", {"json": {"image": "x"}}, 404, "invalid_args"),
    ("PUT", f"/api/v0/asks/{ASK}/", {"json": {"image": "x", "price": 0.01}}, 400, "invalid_price"),
    ("POST", "/api/v0/bundles/", {"json": {"num_gpus": {"gt": "many"}}}, 400, "invalid_request"),
    ("GET", "/api/v0/instances/31999999/", {}, 400, "invalid_args"),
    ("DELETE", "/api/v0/instances/31999999/", {"json": {}}, 404, "not_found"),
    ("POST", "/api/v0/ssh/", {"json": {"ssh_key": " "}}, 400, "no_ssh_key"),
    ("GET", "/api/v0/charges/", {"params": {"select_filters": "{}"}}, 400, "invalid_args"),
    ("GET", "/api/v1/instances/", {"params": {"after_token": "!!"}}, 400, "invalid_token"),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "error"), REFUSALS, ids=[f"{r[0]} {r[1]} {r[3]}" for r in REFUSALS]
)
def test_each_refusal_passes_the_spec_check(
    fake: VastAIFake, method: str, path: str, kwargs: dict[str, Any], status: int, error: str
) -> None:
    answer = _send(fake, method, path, **kwargs)
    assert (answer.status_code, answer.json().get("error")) == (status, error)
    assert fake.validation_errors == [] and fake.launched == 0


ROUTES = [
    ("POST", "/api/v0/bundles/", {"json": {}}, 404),  # the search documents its bad-key answer as a 404
    ("PUT", f"/api/v0/asks/{ASK}/", {"json": {"image": "x"}}, 401),
    ("GET", "/api/v1/instances/", {}, 401),
    ("GET", "/api/v0/instances/31000000/", {}, 401),
    ("GET", "/api/v0/ssh/", {}, 401),
    ("GET", "/api/v0/users/current", {}, 401),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), ROUTES, ids=[f"{r[0]} {r[1]}" for r in ROUTES])
def test_a_wrong_key_is_refused_as_the_spec_says(
    fake: VastAIFake, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    answer = _send(fake, method, path, key="wrong-key", **kwargs)
    assert (answer.status_code, answer.json()["error"]) == (status, "auth_error")
    assert fake.validation_errors == []


def test_every_success_of_an_instance_life_passes_the_spec_check(fake: VastAIFake) -> None:
    fake.boot_polls = 2
    instance_id = _rent(fake)
    shown = [_send(fake, "GET", f"/api/v0/instances/{instance_id}/").json()["instances"] for _ in range(3)]
    assert [s["actual_status"] for s in shown] == ["loading", "loading", "running"]
    assert "ports" not in shown[0] and shown[2]["ports"]["22/tcp"][0]["HostIp"] == "0.0.0.0"
    listed = _send(fake, "GET", "/api/v1/instances/", params={"limit": "25"}).json()
    assert [i["id"] for i in listed["instances"]] == [instance_id] and listed["next_token"] is None
    assert _send(fake, "POST", "/api/v0/ssh/", json={"ssh_key": "ssh-ed25519 AAAA k"}).json()["success"] is True
    assert _send(fake, "GET", "/api/v0/ssh/").json()[0]["key"] == "ssh-ed25519 AAAA k"
    assert _send(fake, "GET", "/api/v0/users/current").json()["balance"] == 250.0
    assert _send(fake, "GET", "/api/v0/charges/", params={"select_filters": DAY}).json()["success"] is True
    assert _send(fake, "GET", "/api/v1/invoices/", params={"select_filters": DAY}).json()["results"] == []
    assert _send(fake, "DELETE", f"/api/v0/instances/{instance_id}/", json={}).json()["success"] is True
    assert fake.validation_errors == []
