"""Vast.ai-specific behaviour beyond the shared contract: offer mapping, ask assignment,
bids, labels, pagination, cleanup failure reporting, error mapping, and the fake itself."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from provisioner.errors import (
    CapacityError,
    CredentialsError,
    ProviderAPIError,
    QuotaError,
    RateLimitError,
)
from provisioner.providers.base import NodeSpec, NodeStatus, OfferQuery
from provisioner.providers.http import RetryPolicy
from provisioner.providers.vastai.client import VAST_LIMITS, map_error
from provisioner.providers.vastai.models import Instance
from provisioner.providers.vastai.provider import VastAIProvider, cluster_label, node_status, onstart_script
from provisioner.testing.fakes.base import RunningServer
from provisioner.testing.fakes.vastai import CONTRACT_API_KEY as API_KEY
from provisioner.testing.fakes.vastai import CONTRACT_SSH_KEY as SSH_KEY
from provisioner.testing.fakes.vastai import VastAIFake
from tests.conftest import need_shared, need_tool

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.1)


class Recorder(httpx.BaseTransport):
    """Serves the fake in process and keeps every request (method, path, JSON body)."""

    def __init__(self, app: VastAIFake) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.sent: list[tuple[str, str, object]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.path, body))
        return self.inner.handle_request(request)

    def bodies(self, method: str, path_prefix: str) -> list[dict]:
        return [b for m, p, b in self.sent if m == method and p.startswith(path_prefix) and isinstance(b, dict)]


@pytest.fixture
def fake() -> Iterator[VastAIFake]:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    app = VastAIFake(api_key=API_KEY)
    yield app
    assert app.validation_errors == [], "traffic broke the Vast.ai OpenAPI spec"


@pytest.fixture
def rec(fake: VastAIFake) -> Recorder:
    return Recorder(fake)


@pytest.fixture
def vast(rec: Recorder) -> VastAIProvider:
    return VastAIProvider(
        API_KEY, base_url="http://vast.test", transport=rec, limits=VAST_LIMITS.scaled(200), retry=FAST, timeout_s=2.0
    )


def specs(n: int, prefix: str = "n", **extra: object) -> list[NodeSpec]:
    base: dict[str, object] = {"instance_type": "1x_RTX_4090", "region": "US"}
    base.update(extra)
    return [NodeSpec(name=f"{prefix}{i}", **base) for i in range(n)]  # type: ignore[arg-type]


# -- offers ---------------------------------------------------------------------------------
def test_offers_carry_vast_prices_and_counts(vast: VastAIProvider, rec: Recorder, fake: VastAIFake) -> None:
    offers = vast.list_offers(OfferQuery(gpu_models=("RTX4090",), regions=("US",)))
    assert len(offers) == 40  # the unverified 0.19 $/h host is hidden by the CLI's default filters
    first = offers[0]
    assert (first.provider, first.instance_type, first.region, first.zone) == ("vastai", "1x_RTX_4090", "US", "Texas")
    assert first.gpu_model == "RTX4090" and first.gpus == 1 and first.gpu_memory_gib == pytest.approx(23.99, abs=0.01)
    assert float(first.egress_usd_per_gb) == 0.004 and float(first.ingress_usd_per_gb) == 0.002
    assert {o.max_nodes for o in offers} == {40}
    assert len({o.offer_id for o in offers}) == 40
    ask = fake.asks[int(first.offer_id or 0)]
    assert float(first.price_per_hour_usd or 0) == ask["dph_total"] and first.reliability == ask["reliability"]
    assert float(first.spot_price_per_hour_usd or 0) == pytest.approx(
        ask["min_bid"] + ask["dph_total"] - ask["dph_base"]
    )
    assert float(first.disk_usd_per_gib_hour) == pytest.approx(0.15 / 730)
    # The bundled catalog's model (docs/catalog.md): base + (1 - reliability) / 24 h, +0.04 when outbid.
    assert first.interruptions_per_node_hour == pytest.approx(3.79 / 1000 / 24 + (1 - ask["reliability"]) / 24)
    assert first.spot_interruptions_per_node_hour == pytest.approx(first.interruptions_per_node_hour + 0.04)
    body = rec.bodies("POST", "/api/v0/bundles/")[0]
    assert body["verified"] == {"eq": True} and body["external"] == {"eq": False}
    assert body["rentable"] == {"eq": True} and body["rented"] == {"eq": False}
    assert body["gpu_name"] == {"in": ["RTX 4090"]} and body["geolocation"] == {"in": ["US"]}
    assert body["order"][0] == ["score", "desc"] and body["type"] == "on-demand"


def test_reliability_filter_and_spot_search(vast: VastAIProvider, rec: Recorder) -> None:
    strict = vast.list_offers(OfferQuery(gpu_models=("H100",), min_reliability=0.998, spot=True))
    assert strict and all(o.reliability >= 0.998 for o in strict)
    assert {o.gpu_model for o in strict} == {"H100"}
    assert {o.instance_type for o in strict} == {"8x_H100_SXM", "1x_H100_PCIE"}
    body = rec.bodies("POST", "/api/v0/bundles/")[0]
    assert body["reliability"] == {"gte": 0.998} and body["type"] == "bid"
    assert body["gpu_name"] == {"in": ["H100 SXM", "H100 PCIE", "H100 NVL"]}


# -- create ---------------------------------------------------------------------------------
def test_rent_body_label_bid_and_user_data(
    vast: VastAIProvider,
    rec: Recorder,
    fake: VastAIFake,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    caplog.set_level(logging.DEBUG)
    secret = "MUNGE-CANARY-7f3a"
    nodes = vast.create_nodes(
        "c1",
        specs(
            2,
            spot=True,
            bootstrap="script",
            user_data=f"#!/bin/sh\necho {secret} > /etc/munge.key\n",
            ssh_public_key=SSH_KEY,
            disk_gib=100,
        ),
    )
    assert [n.status for n in nodes] == [NodeStatus.PENDING] * 2
    rents = rec.bodies("PUT", "/api/v0/asks/")
    assert sorted(b["label"] for b in rents) == ["c1/n0/owner=tester", "c1/n1/owner=tester"]
    assert all(b["price"] == 0.21 and "cancel_unavail" not in b for b in rents)  # the ask's min_bid
    assert all(b["disk"] == 107.0 for b in rents)  # 100 GiB in Vast's GB
    payload = rents[0]["onstart"].split("echo ", 1)[1].split(" |", 1)[0]
    assert secret in base64.b64decode(payload).decode()
    assert rec.bodies("POST", "/api/v0/bundles/")[0]["type"] == "bid"
    assert len(fake.ssh_keys) == 1
    vast.create_nodes("c2", specs(1, ssh_public_key=SSH_KEY + "\n"))
    assert len(fake.ssh_keys) == 1, "the same key was registered twice"
    assert all(secret not in r.getMessage() for r in caplog.records)
    assert secret not in repr(specs(1, bootstrap="script", user_data=secret))


def test_distinct_offer_ids_are_rented_when_still_listed(vast: VastAIProvider, rec: Recorder, fake: VastAIFake) -> None:
    ids = [str(a) for a, ask in fake.asks.items() if ask["gpu_name"] == "L40S"][-3:]  # not the cheapest
    nodes = vast.create_nodes(
        "c1",
        [NodeSpec(name=f"n{i}", instance_type="1x_L40S", region="CA", offer_id=ask_id) for i, ask_id in enumerate(ids)],
    )
    assert len(rec.bodies("POST", "/api/v0/bundles/")) == 1
    assert sorted(p.rstrip("/").rsplit("/", 1)[1] for m, p, _ in rec.sent if m == "PUT") == sorted(ids)
    assert len(nodes) == 3


def test_stale_and_bundled_offer_ids_are_replaced_by_the_same_shape(
    vast: VastAIProvider, rec: Recorder, fake: VastAIFake
) -> None:
    # A planned ask rented by someone else meanwhile, and the bundled catalog's naming
    # ("8x_H100_SXM", ids that never rent): both get an ask of the same shape.
    taken = next(a for a in fake.asks.values() if a["gpu_name"] == "L40S")
    taken["rented"] = True
    nodes = vast.create_nodes(
        "c1",
        [
            NodeSpec(name="a", instance_type="1x_L40S", region="CA", offer_id=str(taken["id"])),
            NodeSpec(name="b", instance_type="8x_H100_SXM", region="US", offer_id="99"),
        ],
    )
    rented = [int(p.rstrip("/").rsplit("/", 1)[1]) for m, p, _ in rec.sent if m == "PUT"]
    assert taken["id"] not in rented and 99 not in rented and len(rented) == 2
    assert sorted((fake.asks[i]["gpu_name"], fake.asks[i]["num_gpus"]) for i in rented) == [
        ("H100 SXM", 8),
        ("L40S", 1),
    ]
    assert {n.name for n in nodes} == {"a", "b"}


def test_shared_offer_id_is_spread_over_other_asks(vast: VastAIProvider, rec: Recorder, fake: VastAIFake) -> None:
    one = next(str(a) for a, ask in fake.asks.items() if ask["gpu_name"] == "H200")
    nodes = vast.create_nodes(
        "c1", [NodeSpec(name=f"n{i}", instance_type="8xH200", region="CA", offer_id=one) for i in range(4)]
    )
    rented = [p.rstrip("/").rsplit("/", 1)[1] for m, p, _ in rec.sent if m == "PUT"]
    assert len(set(rented)) == 4 and one in rented
    assert {n.instance_type for n in vast.get_nodes("c1")} == {"8x_H200"} and len(nodes) == 4


def test_too_few_asks_fails_before_renting(vast: VastAIProvider, fake: VastAIFake) -> None:
    with pytest.raises(CapacityError, match=r"only 4 rentable asks of 8xH200 in CA for 5 nodes"):
        vast.create_nodes("c1", specs(5, instance_type="8xH200", region="CA"))
    assert fake.launched == 0


def test_500_on_rent_is_reconciled_then_retried(vast: VastAIProvider, fake: VastAIFake) -> None:
    fake.faults.inject("http_error", route="launch", times=1, status=502)
    nodes = vast.create_nodes("c1", specs(3))
    assert fake.launched == 3 and fake.instance_count() == 3 and len({n.id for n in nodes}) == 3


def test_failed_cleanup_names_what_remains(vast: VastAIProvider, fake: VastAIFake) -> None:
    fake.faults.inject("capacity_after", route="launch", times=None, k=1, partial=True)
    fake.faults.inject("http_error", route="delete", times=None, status=500)
    with pytest.raises(CapacityError) as caught:
        vast.create_nodes("c1", specs(3))
    left = next(iter(fake.instances))
    message = str(caught.value)
    assert "1x_RTX_4090 in US" in message and "1 of 3 new nodes made" in message
    assert f"still running: {left}" in message and "provisioner gc --provider vastai --cluster c1 --yes" in message


def test_quota_error_from_insufficient_credit(vast: VastAIProvider, fake: VastAIFake) -> None:
    fake.faults.inject("insufficient_balance", route="launch", times=None)
    with pytest.raises(QuotaError, match="Insufficient credit"):
        vast.create_nodes("c1", specs(2))
    assert fake.instance_count() == 0


# -- list / delete --------------------------------------------------------------------------
def test_labels_keep_clusters_apart_and_pages_are_followed(vast: VastAIProvider, fake: VastAIFake) -> None:
    vast.create_nodes("a", specs(27))
    vast.create_nodes("a-b", specs(2))
    nodes = vast.get_nodes("a")
    assert len(nodes) == 27 and {n.cluster_id for n in nodes} == {"a"}
    assert sorted(n.name for n in vast.get_nodes("a-b")) == ["n0", "n1"]
    assert len(fake.calls_of("list")) >= 2 * 3  # 29 instances: two pages per listing
    target = sorted(nodes, key=lambda n: n.name)[:2]
    vast.delete_nodes("a", [n.id for n in target] + [vast.get_nodes("a-b")[0].id])
    assert len(vast.get_nodes("a")) == 25 and len(vast.get_nodes("a-b")) == 2
    vast.delete_nodes("a")
    vast.delete_nodes("a")
    assert fake.instance_count() == 2


def test_nodes_report_addresses_and_boot(vast: VastAIProvider) -> None:
    vast.create_nodes("c1", specs(1))
    first = vast.get_nodes("c1")[0]
    assert (first.status, first.provider_state) == (NodeStatus.PENDING, "loading")
    second = vast.get_nodes("c1")[0]
    assert (second.status, second.provider_state) == (NodeStatus.RUNNING, "running")
    assert second.public_ip and second.public_ip.startswith("198.51.100.")
    assert second.private_ip and second.private_ip.startswith("10.8.") and second.region == "US"


@pytest.mark.parametrize(
    ("actual", "intended", "message", "expected"),
    [
        (None, "running", None, NodeStatus.PENDING),
        ("loading", "running", "Pulling image", NodeStatus.PENDING),
        ("running", "running", "success, running x/ssh", NodeStatus.RUNNING),
        ("running", "stopped", None, NodeStatus.STOPPING),
        ("stopped", "running", None, NodeStatus.STOPPING),
        ("exited", "running", None, NodeStatus.STOPPING),
        ("created", "running", "OCI runtime create failed: boom", NodeStatus.FAILED),
        ("offline", "running", None, NodeStatus.FAILED),
        ("weird-new-state", "running", None, NodeStatus.FAILED),
    ],
)
def test_node_status_mapping(actual: str | None, intended: str, message: str | None, expected: NodeStatus) -> None:
    instance = Instance(id=1, actual_status=actual, intended_status=intended, status_msg=message)
    assert node_status(instance) == expected


# -- errors ---------------------------------------------------------------------------------
def _response(status: int, body: object) -> httpx.Response:
    if isinstance(body, str):
        return httpx.Response(status, text=body)
    return httpx.Response(status, json=body)


@pytest.mark.parametrize(
    ("status", "body", "kind", "text"),
    [
        (
            401,
            {"success": False, "error": "auth_error", "msg": "Invalid user key"},
            CredentialsError,
            "Invalid user key",
        ),
        (404, {"error": "auth_error", "msg": "Invalid user key"}, CredentialsError, "rejected"),
        (
            404,
            {
                "success": False,
                "error": "invalid_args",
                "ask_id": 5,
                "msg": "error 404/3603: no_such_ask Instance type by id 5 is not available.",
            },
            CapacityError,
            "404/3603",
        ),
        (
            410,
            {"success": False, "error": "no_such_ask", "msg": "error 410/3907: gone", "ask_id": 5},
            CapacityError,
            "3907",
        ),
        (429, "API requests too frequent endpoint threshold=4.5", RateLimitError, "threshold=4.5"),
        (429, {"detail": "API requests too frequent"}, RateLimitError, "too frequent"),
        (411, {"success": False, "msg": "Insufficient credit"}, QuotaError, "Insufficient credit"),
        (400, {"success": False, "error": "invalid_price", "msg": "bid too low"}, ProviderAPIError, "bid too low"),
    ],
)
def test_error_mapping(status: int, body: object, kind: type, text: str) -> None:
    error = map_error("vastai", _response(status, body))
    assert type(error) is kind and text in str(error) and str(error).startswith("vastai: ")
    if isinstance(error, ProviderAPIError):
        assert error.status == status


def test_onstart_script_is_valid_shell() -> None:
    need_tool("bash")
    for user_data in ("#!/bin/bash\necho 'quoted \"$x\"'\n", "#cloud-config\nruncmd: [[echo, hi]]\n"):
        script = onstart_script(user_data, script=user_data.startswith("#!"))
        assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
        encoded = script.split("echo ", 1)[1].split(" |", 1)[0]
        assert base64.b64decode(encoded).decode() == user_data
    assert "cloud-init" in onstart_script("#cloud-config\n", script=False)
    assert "cloud-init" not in onstart_script("#!/bin/sh\n", script=True)
    assert cluster_label("c1", "n0") == "c1/n0"


# -- the fake as a real server --------------------------------------------------------------
@pytest.fixture
def fake_server() -> Iterator[Callable[[], str]]:
    procs: list[subprocess.Popen[str]] = []

    def start() -> str:
        proc = subprocess.Popen(
            [sys.executable, "-m", "provisioner.testing.fakes", "vastai", "--port", "0", "--api-key", API_KEY],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        return line.split(" on ", 1)[1].split(" ", 1)[0]

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def test_fake_runs_as_a_process(fake_server: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")
    need_shared("provider-apis", "vastai", "openapi.yaml")
    url = fake_server()
    assert url.startswith("http://127.0.0.1:")
    vast = VastAIProvider(API_KEY, base_url=url, limits=VAST_LIMITS.scaled(200), retry=FAST)
    vast.create_nodes("p1", specs(2))
    assert len(vast.get_nodes("p1")) == 2
    state = httpx.get(f"{url}/_fake/state", timeout=5).json()
    assert state["launched"] == 2 and state["validation_errors"] == []
    assert state["labels"] == ["p1/n0/owner=tester", "p1/n1/owner=tester"]
    vast.delete_nodes("p1")
    assert httpx.get(f"{url}/_fake/state", timeout=5).json()["instances"] == 0


def test_launches_are_issued_concurrently() -> None:
    """Each rent is held at the fake until four are in flight at once (a barrier, not a latency
    that threads may or may not overlap): rents sent one after another never fill it, and the
    test fails when the barrier gives up."""
    need_shared("provider-apis", "vastai", "openapi.yaml")
    from provisioner.testing.fakes.base import serve

    together = threading.Barrier(4, timeout=30)
    app = VastAIFake(api_key=API_KEY, latency_s={"launch": 1.0})
    app.sleep = lambda _: together.wait() and None  # the launch latency: wait for three more rents
    server: RunningServer = serve(app)
    try:
        vast = VastAIProvider(API_KEY, base_url=server.url, limits=VAST_LIMITS.scaled(1000), retry=FAST)
        vast.create_nodes("c1", specs(8))
    finally:
        server.stop()
    assert len(app.calls_of("launch")) == 8 and app.validation_errors == []
    assert not together.broken, "rent calls were issued one after another"


class LosesRentAnswers(httpx.BaseTransport):
    """Serves the fake in process; the rent calls numbered in ``lose`` (1-based) are carried
    out by the fake but answered with a read timeout, as when Vast acted and the reply was lost."""

    def __init__(self, app: VastAIFake, lose: set[int]) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.lose = lose
        self.rents = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "PUT" and request.url.path.startswith("/api/v0/asks/"):
            self.rents += 1
            if self.rents in self.lose:
                raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_lost_answer_on_the_retried_rent_is_adopted(fake: VastAIFake) -> None:
    # n0 gets a 502 (nothing rented), its retry is rented but the answer is lost: the
    # instance it never heard of is found by label and adopted, not rented a third time.
    fake.faults.inject("http_error", route="launch", times=1, status=502)
    transport = LosesRentAnswers(fake, lose={3})
    vast = VastAIProvider(
        API_KEY,
        base_url="http://vast.test",
        transport=transport,
        limits=VAST_LIMITS.scaled(200),
        retry=FAST,
        timeout_s=2.0,
    )
    nodes = vast.create_nodes("c1", specs(2))
    assert sorted(n.name for n in nodes) == ["n0", "n1"]
    assert fake.launched == 2 and fake.instance_count() == 2


class RentsTogether(httpx.BaseTransport):
    """Serves the fake in process; the first ``together`` rents are held until all of them are in
    flight, then reach the fake one at a time in node-name order (so which is refused and which
    is lost does not depend on how threads are scheduled). The rent of a node in ``lose`` is
    carried out by the fake but answered with a read timeout."""

    def __init__(self, app: VastAIFake, together: int, lose: set[str]) -> None:
        self.inner = httpx.WSGITransport(app=app)
        self.lose = lose
        self.in_flight = threading.Barrier(together, timeout=60)  # broken (test fails) if rents are not concurrent
        self.turn = threading.Condition()
        self.waiting: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "PUT" or not request.url.path.startswith("/api/v0/asks/"):
            return self.inner.handle_request(request)
        name = json.loads(request.content)["label"].split("/")[1]  # <cluster>/<node>/owner=...
        with self.turn:
            self.waiting.append(name)
        self.in_flight.wait()
        with self.turn:
            self.turn.wait_for(lambda: min(self.waiting) == name)
            try:
                response = self.inner.handle_request(request)
            finally:
                self.waiting.remove(name)
                self.turn.notify_all()
        if name in self.lose:
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_lost_answer_after_a_failure_is_still_rolled_back(fake: VastAIFake) -> None:
    # n0's rent is refused (no credit) while n1's is in flight; n1's is carried out but
    # unanswered: the rollback finds that instance by label and destroys it.
    fake.faults.inject("insufficient_balance", route="launch", times=1)
    vast = VastAIProvider(
        API_KEY,
        base_url="http://vast.test",
        transport=RentsTogether(fake, 2, lose={"n1"}),
        limits=VAST_LIMITS.scaled(200),
        retry=FAST,
        timeout_s=2.0,
    )
    with pytest.raises(QuotaError) as caught:  # n0's refusal: the first batch's failure is the one raised
        vast.create_nodes("c1", specs(2))
    assert fake.launched == 1 and fake.instance_count() == 0
    message = str(caught.value)
    assert "(ask 4100000) (cluster c1: 1 of 2 new nodes made); rolled back 1 instance(s) this call made" in message
    assert "cleanup FAILED" not in message and "instances may exist" not in message  # the listing saw n1


def test_rollback_says_when_it_could_not_look_for_unanswered_rents(fake: VastAIFake) -> None:
    # The first rent is carried out but unanswered, and every later listing fails: the
    # adapter cannot know whether that instance exists, and must say so instead of
    # claiming a clean rollback.
    fake.faults.inject("http_error", route="list", times=None, after=1, status=500)
    vast = VastAIProvider(
        API_KEY,
        base_url="http://vast.test",
        transport=LosesRentAnswers(fake, lose={1}),
        limits=VAST_LIMITS.scaled(200),
        retry=FAST,
        timeout_s=2.0,
    )
    with pytest.raises(ProviderAPIError) as caught:
        vast.create_nodes("c1", specs(1))
    message = str(caught.value)
    assert "could not list the cluster" in message and "n0" in message
    assert fake.instance_count() == 1  # the lost one: named in the error, never claimed deleted
    assert (
        "instances may exist in cluster c1" in message
        and "provisioner gc --provider vastai --cluster c1 --yes" in message
    )
    assert "rolled back" not in message


def test_extra_asks_are_the_cheapest_not_the_best_scored(vast: VastAIProvider, rec: Recorder, fake: VastAIFake) -> None:
    # Vast orders a search by score; a pricey ask with a high score must not displace the
    # cheaper asks the plan priced.
    pricey = next(a for a in fake.asks.values() if a["gpu_name"] == "RTX 4090" and a["verified"])
    pricey.update(score=1e6, dph_total=0.99, dph_base=0.98)
    vast.create_nodes("c1", specs(3))
    rented = {int(p.rstrip("/").rsplit("/", 1)[1]) for m, p, _ in rec.sent if m == "PUT"}
    assert pricey["id"] not in rented and len(rented) == 3
    assert max(fake.asks[i]["dph_total"] for i in rented) == 0.38
