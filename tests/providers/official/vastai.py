"""Witness: Vast.ai's official client ``vastai`` 1.9.1 (its SDK, ``vastai.VastAI``, and its CLI) against the
Vast.ai fake on 127.0.0.1, for every call the adapter makes; and the adapter's own requests
compared with the client's (same method and path, a body of the client's shape).

The client is pointed at the fake with ``server_url`` (the CLI: ``--url``) and an explicit key; HOME
and XDG_CONFIG_HOME are a temporary folder so it can read no key file of this machine, and the
CLI's update check is off (``--raw``, VASTAI_NO_UPDATE_CHECK) with its manifest URL on the fake.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from provisioner.providers.base import NodeSpec, OfferQuery
from provisioner.providers.http import RetryPolicy
from provisioner.providers.vastai.client import VAST_LIMITS
from provisioner.providers.vastai.provider import VastAIProvider
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.testing.fakes.vastai import VastAIFake
from tests.conftest import ROOT, need_shared, skip_or_fail
from tests.providers.official.support import need_client

VASTAI_VERSION = "1.9.1"
KEY = "vast-witness-key-0123456789"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIWitnessKeyForTheVastFake witness@test"
T0 = dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
LEASE = "witness-4242-20261126t100000z"


class Clock:
    """The fake's clock, moved by the test (billing amounts are exact)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def vast_fake(serve_fake: Callable[[FakeApp], RunningServer]) -> tuple[VastAIFake, str]:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    app = VastAIFake(api_key=KEY)
    app.clock = Clock()
    return app, serve_fake(app).url


@pytest.fixture
def vast_sdk(vast_fake: tuple[VastAIFake, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    need_client("vastai", VASTAI_VERSION)
    for name in ("VAST_API_KEY", "VAST_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    from vastai import VastAI

    yield VastAI(api_key=KEY, server_url=vast_fake[1], retry=1, raw=True, quiet=True)


def sent(app: VastAIFake, method: str, path_start: str) -> list[Any]:
    """The JSON bodies of the requests ``app`` answered to ``method`` on a path starting so."""
    return [
        json.loads(x.request_body) if x.request_body else None
        for x in app.exchanges
        if x.method == method and x.path.startswith(path_start)
    ]


def test_vastai_client_searches_offers_with_string_numbers(vast_sdk: Any, vast_fake: tuple[VastAIFake, str]) -> None:
    app = vast_fake[0]
    offers = vast_sdk.search_offers(query="num_gpus=1 gpu_name=RTX_4090 geolocation=US reliability>0.99")
    # The fake's market: 40 one-GPU RTX 4090 asks in Texas, reliability 0.999 - 0.004 * (k % 7):
    # above 0.99 for k % 7 in (0, 1, 2), 18 of them; the unverified one is left out by default.
    assert len(offers) == 18
    assert {(o["num_gpus"], o["gpu_name"], o["geolocation"]) for o in offers} == {(1, "RTX 4090", "Texas, US")}
    assert min(o["reliability"] for o in offers) == 0.991
    body = sent(app, "POST", "/api/v0/bundles/")[0]
    assert (body["num_gpus"], body["reliability"]) == ({"eq": "1"}, {"gt": "0.99"})
    assert body["gpu_name"] == {"eq": "RTX 4090"}
    assert (body["type"], body["order"], body["external"]) == ("on-demand", [["score", "desc"]], {"eq": False})
    bids = vast_sdk.search_offers(query="num_gpus in [4,8] gpu_ram>=80", type="bid", order="dph_total")
    # 8x H100 SXM (36), 8x H200 (4), 4x A100 SXM4 (8): gpu_ram arrives as MB (80 x 1000)
    assert len(bids) == 48 and all(o["is_bid"] for o in bids)
    assert [o["dph_total"] for o in bids] == sorted(o["dph_total"] for o in bids)
    assert sent(app, "POST", "/api/v0/bundles/")[1]["num_gpus"] == {"in": ["4", "8"]}


def test_vastai_client_rents_lists_shows_and_destroys(vast_sdk: Any, vast_fake: tuple[VastAIFake, str]) -> None:
    app = vast_fake[0]
    ask = vast_sdk.search_offers(query="num_gpus=1 gpu_name=RTX_4090", limit=1)[0]
    made = vast_sdk.create_instance(
        id=ask["id"],
        image="vastai/base-image:cuda-12.8",
        disk=40,
        env="-e PROVISIONER_CLUSTER=c1 -p 22:22",
        label="c1--n0",
        onstart_cmd="echo ready",
        ssh=True,
    )
    instance_id = made["new_contract"]
    assert made["success"] is True and isinstance(instance_id, int)
    body = sent(app, "PUT", f"/api/v0/asks/{ask['id']}/")[0]
    assert body["env"] == {"PROVISIONER_CLUSTER": "c1", "-p 22:22": "1"} and body["runtype"] == "ssh_proxy"
    assert body["price"] is None and body["template_hash_id"] is None and body["client_id"] == "me"

    rows = vast_sdk.show_instances()  # GET /api/v1/instances/: the first poll, still loading
    assert [(r["id"], r["label"], r["actual_status"]) for r in rows] == [(instance_id, "c1--n0", "loading")]
    assert rows[0]["extra_env"] == {"PROVISIONER_CLUSTER": "c1", "-p 22:22": "1"}
    shown = vast_sdk.show_instance(id=instance_id)  # GET /api/v0/instances/{id}/: running, with ports
    assert (shown["actual_status"], shown["image_uuid"]) == ("running", "vastai/base-image:cuda-12.8")
    assert shown["ports"]["22/tcp"][0]["HostPort"] == str(shown["direct_port_start"])
    assert shown["extra_env"] == {"PROVISIONER_CLUSTER": "c1", "-p 22:22": "1"}

    assert vast_sdk.destroy_instance(id=instance_id)["success"] is True
    assert sent(app, "DELETE", f"/api/v0/instances/{instance_id}/") == [{}]
    assert vast_sdk.show_instances() == []
    with pytest.raises(Exception, match="404"):
        vast_sdk.destroy_instance(id=instance_id)


def test_vastai_client_bids_below_and_at_the_minimum(vast_sdk: Any, vast_fake: tuple[VastAIFake, str]) -> None:
    ask = vast_sdk.search_offers(query="num_gpus=1 gpu_name=L40S", type="bid", limit=1)[0]
    with pytest.raises(Exception, match="400"):
        vast_sdk.create_instance(id=ask["id"], image="vastai/base-image:x", price=0.01)
    made = vast_sdk.create_instance(id=ask["id"], image="vastai/base-image:x", price=ask["min_bid"])
    assert vast_sdk.show_instance(id=made["new_contract"])["is_bid"] is True


def test_vastai_client_ssh_keys_user_and_charges(vast_sdk: Any, vast_fake: tuple[VastAIFake, str]) -> None:
    app = vast_fake[0]
    assert vast_sdk.show_ssh_keys() == []
    created = vast_sdk.create_ssh_key(ssh_key=PUBLIC_KEY)
    assert created["success"] is True and created["key"]["public_key"] == PUBLIC_KEY
    assert [k["key"] for k in vast_sdk.show_ssh_keys()] == [PUBLIC_KEY]
    user = vast_sdk.show_user()
    assert (user["balance"], user["ssh_key"]) == (250.0, PUBLIC_KEY)

    ask = vast_sdk.search_offers(query="num_gpus=1 gpu_name=RTX_4090", limit=1)[0]
    instance_id = vast_sdk.create_instance(id=ask["id"], image="vastai/base-image:x", disk=20)["new_contract"]
    rate = Decimal(str(vast_sdk.show_instance(id=instance_id)["dph_total"]))
    app.clock.now = T0 + dt.timedelta(hours=2)  # type: ignore[attr-defined]
    day = int(dt.datetime(2026, 11, 26, tzinfo=dt.UTC).timestamp())
    charges = vast_sdk.show_invoices_v1(charges=True, start_date=day, end_date=day + 86_399, charge_type=["instance"])
    assert [(c["source"], c["amount"]) for c in charges["results"]] == [
        (f"instance-{instance_id}", float((rate * 2).quantize(Decimal("0.001"))))
    ]
    invoices = vast_sdk.show_invoices_v1(start_date=day, end_date=day + 86_399)
    assert (invoices["results"], invoices["next_token"]) == ([], None)


def test_vastai_cli_searches_rents_lists_and_destroys(vast_fake: tuple[VastAIFake, str], tmp_path: Path) -> None:
    need_client("vastai", VASTAI_VERSION)
    app, url = vast_fake
    cli = Path(sys.executable).with_name("vastai")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAST")}
    # No update check (it is off with --raw already), and were it on, its manifest URL is the fake's.
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), VASTAI_NO_UPDATE_CHECK="1")
    env["VASTAI_MANIFEST_URL"] = f"{url}/cli/manifest.json"

    def run(*args: str) -> Any:
        done = subprocess.run(
            [str(cli), "--url", url, "--api-key", KEY, "--retry", "1", *args, "--raw"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout) if done.stdout.strip() else None  # destroy prints nothing with --raw

    if not cli.exists():
        skip_or_fail(f"the vastai CLI is not beside {sys.executable} (pip install -e '.[test]')")
    offers = run("search", "offers", "num_gpus=1 gpu_name=RTX_4090 reliability>0.99", "--limit", "3")
    assert len(offers) == 3 and {o["gpu_name"] for o in offers} == {"RTX 4090"}
    made = run("create", "instance", str(offers[0]["id"]), "--image", "vastai/base-image:x", "--env", "-e A=B")
    body = sent(app, "PUT", f"/api/v0/asks/{offers[0]['id']}/")[0]
    assert (body["runtype"], body["env"], body["disk"]) == ("ssh", {"A": "B"}, 10.0)  # the CLI's defaults
    run("destroy", "instance", str(made["new_contract"]), "--yes")
    assert sent(app, "DELETE", f"/api/v0/instances/{made['new_contract']}/") == [{}] and app.instance_count() == 0


# -- the adapter asks what the client asks -------------------------------------------------------------
_ID = re.compile(r"/\d+(?=/)")


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", dict: "object", list: "array"}[type(value)]


def _routes(app: VastAIFake) -> set[tuple[str, str]]:
    return {(x.method, _ID.sub("/{id}", x.path)) for x in app.exchanges}


def _client_session(sdk: Any) -> None:
    ask = sdk.search_offers(query="num_gpus=1 gpu_name=RTX_4090", limit=1)[0]
    # runtype "ssh": what the CLI sends without flags (cli/commands/instances.py cli_runtype), as we do
    made = sdk.create_instance(id=ask["id"], image="vastai/base-image:x", env="-e A=B", label="x", runtype="ssh")
    instance_id = made["new_contract"]
    sdk.show_instances()
    sdk.show_instance(id=instance_id)
    sdk.label_instance(id=instance_id, label="c1/n0/owner=o/lease=h-1-20261126t100000z/renewed=20261126t101000z")
    sdk.destroy_instance(id=instance_id)
    sdk.create_ssh_key(ssh_key=PUBLIC_KEY)
    sdk.show_ssh_keys()
    sdk.show_user()
    sdk.show_invoices_v1(charges=True, charge_type=["instance"])


def _adapter_session(url: str) -> None:
    vast = VastAIProvider(
        KEY, base_url=url, limits=VAST_LIMITS.scaled(200), retry=RetryPolicy(attempts=1), timeout_s=5.0
    )
    vast.check_credentials()
    vast.list_offers(OfferQuery(gpu_models=("RTX4090",), regions=("US",)))
    vast.ensure_ssh_key("witness", PUBLIC_KEY)
    spec = NodeSpec(
        name="n0",
        instance_type="1x_RTX_4090",
        region="US",
        bootstrap="script",
        user_data="#!/bin/sh\necho ready\n",
        owner="o",
        lease=LEASE,
    )
    nodes = vast.create_nodes("c1", [spec])
    assert vast.renew_lease("c1", LEASE, "o", T0) == 1  # the lease renewal's label update (and its release)
    assert vast.renew_lease("c1", LEASE, "o", None) == 1
    vast.get_nodes("c1")
    vast.billed("c1", {"n0": nodes[0].id}, T0, T0 + dt.timedelta(hours=1))
    vast.delete_nodes("c1")


def test_the_adapter_calls_only_what_the_official_client_calls(
    vast_sdk: Any, serve_fake: Callable[[FakeApp], RunningServer]
) -> None:
    official = VastAIFake(api_key=KEY)
    ours = VastAIFake(api_key=KEY)
    _client_session(type(vast_sdk)(api_key=KEY, server_url=serve_fake(official).url, retry=1, raw=True, quiet=True))
    _adapter_session(serve_fake(ours).url)
    assert _routes(ours) <= _routes(official), sorted(_routes(ours) - _routes(official))
    assert ("GET", "/api/v0/users/current") in _routes(ours)  # the one path the client spells without a slash
    (client_body,), (our_body,) = sent(official, "PUT", "/api/v0/asks/"), sent(ours, "PUT", "/api/v0/asks/")
    assert set(our_body) <= set(client_body), sorted(set(our_body) - set(client_body))
    shared = [k for k in our_body if client_body[k] is not None]
    assert {k: _json_type(our_body[k]) for k in shared} == {k: _json_type(client_body[k]) for k in shared}
    assert our_body["env"] == {"PROVISIONER_CLUSTER": "c1", "PROVISIONER_NODE": "n0"}
    labels = (
        [b for b in sent(official, "PUT", "/api/v0/instances/")],
        [b for b in sent(ours, "PUT", "/api/v0/instances/")],
    )
    assert [set(b) for b in labels[0]] == [{"label"}] and [set(b) for b in labels[1]] == [{"label"}, {"label"}]
    assert labels[1][0]["label"] == f"c1/n0/owner=o/lease={LEASE}/renewed=20261126t100000z"
    assert labels[1][1]["label"] == f"c1/n0/owner=o/lease={LEASE}"
    (client_search,), our_searches = sent(official, "POST", "/api/v0/bundles/"), sent(ours, "POST", "/api/v0/bundles/")
    assert {s["type"] for s in our_searches} == {client_search["type"]} == {"on-demand"}
    assert all(set(s) >= {"verified", "external", "rentable", "rented", "order", "type"} for s in our_searches)


def test_docs_name_every_path_and_spec_difference() -> None:
    from provisioner.testing.fakes.vastai_spec import CLIENT_PATHS, DIFFERENCES

    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    vast = text[text.index("## Vast.ai") : text.index("## AWS")]
    assert [p for p in [*CLIENT_PATHS.values(), "/api/v0/users/current"] if p not in vast] == []
    table = vast[vast.index("**Where the spec file") : vast.index("**The slash-less paths.**")]
    assert len(DIFFERENCES) == table.count("\n| ") - 2  # its rows, less the header and the rule


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v0/bundles"),
        ("PUT", "/api/v0/asks/4100000"),
        ("GET", "/api/v1/instances"),
        ("DELETE", "/api/v0/instances/31000000"),
        ("GET", "/api/v0/ssh"),
        ("GET", "/api/v0/charges"),
    ],
)
def test_the_fake_does_not_serve_the_slashless_paths(method: str, path: str) -> None:
    # No known client calls them and nothing shows the live API answers them (docs/providers.md).
    need_shared("provider-apis", "vastai", "openapi.yaml")
    app = VastAIFake(api_key=KEY)
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://vast.test") as http:
        answer = http.request(method, path, headers={"Authorization": f"Bearer {KEY}"}, json={})
    assert answer.status_code != 200 and app.launched == 0
    assert app.calls[-1].route == "unknown"


__all__ = [
    "test_docs_name_every_path_and_spec_difference",
    "test_the_adapter_calls_only_what_the_official_client_calls",
    "test_the_fake_does_not_serve_the_slashless_paths",
    "test_vastai_cli_searches_rents_lists_and_destroys",
    "test_vastai_client_bids_below_and_at_the_minimum",
    "test_vastai_client_rents_lists_shows_and_destroys",
    "test_vastai_client_searches_offers_with_string_numbers",
    "test_vastai_client_ssh_keys_user_and_charges",
    "vast_fake",
    "vast_sdk",
]
