"""The shared fake-server framework: routing, faults, validation, control surface, serving."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes import FAKES, fake_class
from provisioner.testing.fakes.base import VALIDATION_STATUS, FakeApp, serve
from provisioner.testing.fakes.lambda_ import LambdaFake
from tests.conftest import ROOT, need_shared

KEY = "k-123"
AUTH = {"Authorization": f"Bearer {KEY}"}


class TinyFake(FakeApp):
    """A fake against Lambda's spec with one correct and one deliberately wrong route."""

    provider = "lambda"
    spec_file = "openapi-1.10.0.json"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.body_to_send: Any = {"data": []}
        self.route("GET", "/api/v1/instances", self.instances, kind="list", name="list_instances")
        self.route("GET", "/api/v1/instances/{id}", self.one, kind="get")
        self.route(
            "GET",
            "/internal/unspecced",
            self.unspecced,
            kind="other",
            validate=False,
            reason="not in the spec; checked against documented examples",
        )

    def instances(self, request: Request) -> Response:
        return self.json(self.body_to_send)

    def one(self, request: Request, id: str) -> Response:
        if id == "teapot":
            return self.json({"error": {"code": "x", "message": "no"}}, 418)
        return self.json({"error": {"code": "global/object-does-not-exist", "message": f"no {id}"}}, 404)

    def unspecced(self, request: Request) -> Response:
        return self.json({"anything": True})

    def instance_count(self) -> int:
        return 0


@pytest.fixture
def tiny() -> TinyFake:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    return TinyFake(api_key=KEY)


def client(app: FakeApp) -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://fake.local", headers=AUTH)


def test_routes_path_params_and_call_log(tiny: TinyFake) -> None:
    with client(tiny) as http:
        assert http.get("/api/v1/instances").json() == {"data": []}
        assert http.get("/api/v1/instances/abc").json()["error"]["message"] == "no abc"
        assert http.get("/internal/unspecced").json() == {"anything": True}
    assert [(c.method, c.path, c.status, c.kind) for c in tiny.calls] == [
        ("GET", "/api/v1/instances", 200, "list"),
        ("GET", "/api/v1/instances/abc", 404, "get"),
        ("GET", "/internal/unspecced", 200, "other"),
    ]
    assert tiny.validation_errors == []
    assert [c.path for c in tiny.calls_of("list_instances")] == ["/api/v1/instances"]


def test_invalid_response_is_recorded_and_fails_loudly(tiny: TinyFake) -> None:
    tiny.body_to_send = {"data": "not a list"}
    with client(tiny) as http:
        response = http.get("/api/v1/instances")
    assert response.status_code == VALIDATION_STATUS
    assert "fake_validation_error" in response.json()
    assert len(tiny.validation_errors) == 1 and "response GET /api/v1/instances" in tiny.validation_errors[0]


def test_undocumented_status_from_a_handler_is_an_error(tiny: TinyFake) -> None:
    with client(tiny) as http:
        assert http.get("/api/v1/instances/teapot").status_code == VALIDATION_STATUS
    assert len(tiny.validation_errors) == 1 and "418" in tiny.validation_errors[0]


def test_lenient_mode_records_but_answers(tiny: TinyFake) -> None:
    tiny.strict = False
    tiny.body_to_send = {"data": "not a list"}
    with client(tiny) as http:
        assert http.get("/api/v1/instances").json() == {"data": "not a list"}
    assert len(tiny.validation_errors) == 1


def test_request_without_auth_breaks_the_spec(tiny: TinyFake) -> None:
    with httpx.Client(transport=httpx.WSGITransport(app=tiny), base_url="http://x") as http:
        assert http.get("/api/v1/instances").status_code == VALIDATION_STATUS
    assert "Security" in tiny.validation_errors[0]


def test_wrong_key_gets_provider_error(tiny: TinyFake) -> None:
    tiny.strict = False
    with httpx.Client(
        transport=httpx.WSGITransport(app=tiny), base_url="http://x", headers={"Authorization": "Bearer nope"}
    ) as http:
        response = http.get("/api/v1/instances")
    assert response.status_code == 401
    # TinyFake keeps the base class's generic error body, which is not Lambda's shape
    assert len(tiny.validation_errors) == 1 and "invalid_key" in tiny.validation_errors[0]


def test_fault_after_and_times(tiny: TinyFake) -> None:
    tiny.faults.inject("http_error", route="list", after=1, times=2, status=503)
    with client(tiny) as http:
        statuses = [http.get("/api/v1/instances").status_code for _ in range(5)]
        other = http.get("/api/v1/instances/zzz").status_code
    assert statuses == [200, 503, 503, 200, 200]
    assert other == 404
    assert tiny.validation_errors == []  # 503 is not in the spec: injected, so skipped
    assert len(tiny.unvalidated) == 2


def test_rate_limit_fault_sets_retry_after(tiny: TinyFake) -> None:
    tiny.faults.inject("rate_limit", times=None, retry_after_s=7)
    with client(tiny) as http:
        response = http.get("/api/v1/instances")
    assert response.status_code == 429 and response.headers["Retry-After"] == "7"


def test_unknown_fault_kind_is_refused(tiny: TinyFake) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        tiny.faults.inject("meteor")


def test_route_without_validation_needs_a_reason(tiny: TinyFake) -> None:
    with pytest.raises(ValueError, match="must say why"):
        tiny.route("GET", "/x", tiny.unspecced, validate=False)


def test_capacity_grants() -> None:
    app = TinyFake(validate=False)
    assert app.faults.grant_capacity(3) == (3, False)
    app.faults.inject("capacity_after", times=None, k=2)
    assert app.faults.grant_capacity(3)[0] == 0  # all-or-nothing
    assert app.faults.grant_capacity(2)[0] == 2
    assert app.faults.grant_capacity(1)[0] == 0
    app.faults.clear()
    app.faults.inject("capacity_after", times=None, k=2, partial=True)
    assert app.faults.grant_capacity(3)[0] == 2
    assert app.faults.grant_capacity(3)[0] == 0


def test_boot_polls_and_slow_boot() -> None:
    app = TinyFake(validate=False, boot_polls=1)
    app.record_launch(["a"])
    assert [app.booted("a") for _ in range(2)] == [False, True]
    app.faults.inject("slow_boot", polls=3)
    app.record_launch(["b"])
    assert [app.booted("b") for _ in range(4)] == [False, False, False, True]
    assert app.launched == 2


def test_missing_spec_runs_unvalidated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_OPENAPI_DIR", str(tmp_path))
    app = TinyFake(api_key=KEY)
    assert app.openapi is None and app.validation_note.startswith("UNVALIDATED")
    app.body_to_send = {"data": "not a list"}
    with client(app) as http:
        assert http.get("/api/v1/instances").status_code == 200
    assert app.validation_errors == []


def test_control_surface_over_http(tiny: TinyFake) -> None:
    with serve(tiny) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        assert http.post("/_fake/faults", json={"kind": "http_error", "route": "list", "status": 502}).json()["ok"]
        assert http.post("/_fake/faults", json={"kind": "bogus"}).status_code == 400
        assert http.get("/api/v1/instances").status_code == 502
        state = http.get("/_fake/state").json()
        assert state["calls"][0]["status"] == 502 and state["validation_errors"] == []
        assert http.post("/_fake/reset").json() == {"ok": True}
        assert http.get("/api/v1/instances").status_code == 200
        assert len(http.get("/_fake/state").json()["calls"]) == 1


def test_latency_and_timeout_hold_use_the_app_sleep(tiny: TinyFake) -> None:
    slept: list[float] = []
    tiny.sleep = slept.append
    tiny.latency_s = {"list": 0.25, "*": 0.01}
    tiny.faults.inject("timeout", route="get", delay_s=4.0)
    with client(tiny) as http:
        http.get("/api/v1/instances")
        assert http.get("/api/v1/instances/x").status_code == 404  # processed, then held
    assert slept == [0.25, 0.01, 4.0]


def test_registry_names_lambda() -> None:
    assert "lambda" in FAKES and fake_class("lambda") is LambdaFake


def test_module_runs_a_real_server() -> None:
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "provisioner.testing.fakes", "lambda", "--port", "0", "--api-key", KEY],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "validating against openapi-1.10.0.json" in line
        url = line.split(" on ")[1].split()[0]
        types = httpx.get(f"{url}/api/v1/instance-types", headers=AUTH, timeout=10).json()["data"]
        assert types["gpu_8x_h100_sxm5"]["instance_type"]["price_cents_per_hour"] == 2392
        assert httpx.get(f"{url}/_fake/state", timeout=10).json()["validation_errors"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def test_a_fake_without_its_sdk_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m provisioner.testing.fakes aws`` after a plain ``pip install .`` (no botocore) ended in a
    ModuleNotFoundError traceback; now one line naming the module and the extra, exit 2."""
    from provisioner.testing.fakes.__main__ import main

    def missing(*_args: Any, **_kwargs: Any) -> Any:
        raise ModuleNotFoundError("No module named 'botocore'", name="botocore")

    monkeypatch.setattr("provisioner.testing.fakes.__main__.make_fake", missing)
    assert main(["aws", "--port", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: the aws fake needs botocore, not installed here: pip install 'gpu-provisioner[test]'\n"
    )
