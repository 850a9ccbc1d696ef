"""Secrets travel only over the SSH pass (issue 16, items 3 and 7).

``up`` on the direct engine against every provider's fake (Lambda, RunPod, Fluence from the
bundled catalog; AWS on moto, GCP on the REST fake and Vast.ai planned from the fake's own
offers), with Slurm and Kubernetes clusters; then every request body and every response the fake
logged (``FakeApp.exchanges``: the AWS fake logs the query-protocol bodies it hands moto and
moto's answers) is searched for the cluster's munge key, k3s token and SSH private key: as
written, each line of a multi-line one, and base64-encoded at each byte alignment; every body is
searched raw and decoded (``decoded``: form/percent encoding, JSON strings, base64 runs, gzip:
AWS user data is gzip+base64 when large, inside a form body). None may appear. The same run
proves the stress landed: the fake launched the planned nodes with boot data, and the SSH pass
carried the secret to every node. The Pulumi engine's twin is in ``tests/test_engine_matrix.py``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import json
import re
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle.realize import bring_up, cluster_secrets, tear_down
from provisioner.providers.redact import base64_forms
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.secrets import ClusterSecrets
from tests.conftest import need_shared
from tests.test_lifecycle_support import (
    FLUENCE_SPEC,
    LAMBDA_SPEC,
    RUNPOD_SPEC,
    StandInRemote,
    instant_runtime,
    plans_for,
    runpod_plan,
    served_fake,
)
from tests.test_render_cloudinit import readable

SPECS = {
    "lambda-slurm": ("lambda", LAMBDA_SPEC, "openapi-1.10.0.json"),
    "lambda-k8s": (
        "lambda",
        LAMBDA_SPEC.replace("control_plane: slurm", "control_plane: kubernetes"),
        "openapi-1.10.0.json",
    ),
    "runpod-slurm": ("runpod", RUNPOD_SPEC, None),
    "fluence-slurm": ("fluence", FLUENCE_SPEC, None),
}


class RecordingRemote(StandInRemote):
    """The stand-in remote, keeping every script the SSH pass ran (by node)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        super().__init__(nodes=nodes)
        self.scripts: dict[str, list[str]] = {}

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        super().bootstrap(target, script, timeout_s=timeout_s)
        self.scripts.setdefault(target.node_name, []).append(script)


def _needles(secret: str) -> list[str]:
    lines = [line for line in secret.splitlines() if len(line) >= 16 and "PRIVATE KEY" not in line]
    return [secret, *lines, *base64_forms(secret)]


_B64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


def decoded(text: str, depth: int = 3) -> list[str]:
    """``text`` and what it holds once decoded: percent/form encoding, JSON string values, base64
    runs (gunzipped when they are gzip). Test-side decoding, independent of the redactor."""
    out = [text]
    if depth == 0:
        return out
    inner: list[str] = []
    if "%" in text or "+" in text:
        inner.append(urllib.parse.unquote_plus(text))
    with contextlib.suppress(ValueError):
        inner.extend(_strings(json.loads(text)))
    for run in _B64_RUN.findall(text):
        with contextlib.suppress(ValueError, binascii.Error):
            raw = base64.b64decode(run + "=" * (-len(run) % 4))
            if raw[:2] == b"\x1f\x8b":
                with contextlib.suppress(OSError, EOFError):
                    raw = gzip.decompress(raw)
            inner.append(raw.decode("utf-8", "replace"))
    for item in inner:
        if item != text:
            out.extend(decoded(item, depth - 1))
    return out


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def assert_no_secret_crossed(app: Any, secrets: ClusterSecrets, *, sold: bool = True) -> None:
    """No secret in any request or response ``app`` logged, raw or decoded, nor (``sold``: there must
    be some) in what it sold."""
    needles = [needle for value in secrets.values() for needle in _needles(value)]
    for exchange in app.exchanges:
        for text in exchange.texts():
            for form in decoded(text):
                assert not any(needle in form for needle in needles), (
                    f"a secret crossed {exchange.method} {exchange.path}"
                )
    boot = [b.boot for b in app.bought.values()]
    assert all(not any(needle in text for needle in needles) for text in boot) and (boot or not sold)


def test_the_search_finds_a_secret_in_base64_user_data() -> None:
    """The check can fail: a munge key inside base64-encoded user data, at any offset, is found."""
    import base64

    key = base64.b64encode(b"k" * 64).decode()
    for prefix in ("", "x", "xy"):
        body = base64.b64encode(f"{prefix}#!/bin/sh\necho {key}\n".encode()).decode()
        assert any(needle in body for needle in _needles(key))


@pytest.mark.parametrize("case", sorted(SPECS))
def test_no_secret_reaches_the_provider(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, spec, openapi = SPECS[case]
    if openapi:
        need_shared("provider-apis", name, openapi)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    if "allowed_cidrs" not in spec:
        spec += "access: {allowed_cidrs: [198.51.100.0/24]}\n"
    plan = runpod_plan(tmp_path) if name == "runpod" else plans_for(spec, tmp_path)[0]
    assert plan.option.provider == name
    with served_fake(name, monkeypatch) as (app, _server):
        remote = RecordingRemote([n.name for n in plan.nodes])
        bring_up(plan, instant_runtime(remote))
        secrets = cluster_secrets(plan.cluster_id)
        control = plan.spec.control_plane.value
        shared = (secrets.munge_key_b64 if control == "slurm" else secrets.k3s_token).get_secret_value()
        # The stress landed: every planned node was bought, and the SSH pass gave each the secret.
        assert app.launched == len(plan.nodes) and len(app.exchanges) > len(plan.nodes)
        assert sorted(remote.scripts) == sorted(n.name for n in plan.nodes)
        assert all(any(shared in readable(s) for s in scripts) for scripts in remote.scripts.values())
        tear_down(plan.cluster_id, instant_runtime(StandInRemote()))
        assert app.instance_count() == 0
    assert_no_secret_crossed(app, secrets)


def test_the_search_decodes_what_aws_and_gcp_carry() -> None:
    """The check can fail where the secret hides: gzip+base64 user data in a form body (AWS), a JSON
    string with the key's newlines escaped (GCP metadata), percent-encoded base64 (Vast.ai's env)."""
    secrets = ClusterSecrets.generate("search-test")
    munge, key = secrets.munge_key_b64.get_secret_value(), secrets.ssh_private_key.get_secret_value()  # type: ignore[union-attr]
    packed = base64.b64encode(gzip.compress(f"#cloud-config\nkey: {munge}\n".encode())).decode()
    bodies = [
        urllib.parse.urlencode({"Action": "RunInstances", "UserData": packed}),
        json.dumps({"metadata": {"items": [{"key": "user-data", "value": f"write: |\n{key}"}]}}),
        urllib.parse.quote(base64.b64encode(f"x={munge}".encode()).decode()),
    ]
    needles = [n for value in secrets.values() for n in _needles(value)]
    assert not any(n in bodies[0] for n in needles)  # gzip inside base64 inside a form: only decoding finds it
    for body in bodies:
        assert any(n in form for form in decoded(body) for n in needles), body


FROM_FAKE_OFFERS = {
    "aws-slurm": ("aws", 2, ("slurm",)),
    "aws-k8s": ("aws", 1, ("kubernetes",)),
    "gcp-slurm": ("gcp", 1, ("slurm",)),
    "gcp-k8s": ("gcp", 2, ("kubernetes",)),
    "vastai-slurm": ("vastai", 1, ("slurm",)),
}
"""Cases planned from the fake's own offers (what it sells): provider, nodes, control plane."""


@pytest.mark.parametrize("case", sorted(FROM_FAKE_OFFERS))
def test_no_secret_reaches_aws_gcp_or_vast(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.testing.fakes.aws_ec2 import CONTRACT_IMAGE as AWS_IMAGE
    from provisioner.testing.fakes.gcp_compute import CONTRACT_IMAGE as GCP_IMAGE
    from tests.test_engine_matrix import Case, _plan, served

    name, count, control = FROM_FAKE_OFFERS[case]
    for key, value in {
        "PROVISIONER_STATE_DIR": str(tmp_path / "state"),
        "PROVISIONER_OWNER": "canary-owner",
        "PROVISIONER_AWS_IMAGE_ID": AWS_IMAGE,
        "PROVISIONER_GCP_IMAGE": GCP_IMAGE,
    }.items():
        monkeypatch.setenv(key, value)
    plan = _plan(name, Case(count, False, False), tmp_path, control_planes=control)
    assert plan.spec.control_plane.value == control[0]
    with served(name, monkeypatch) as fake:
        app = fake.harness.app
        remote = RecordingRemote([n.name for n in plan.nodes])
        bring_up(plan, instant_runtime(remote, provider_for=lambda _name: fake.adapter()))
        secrets = cluster_secrets(plan.cluster_id)
        shared = (secrets.munge_key_b64 if control[0] == "slurm" else secrets.k3s_token).get_secret_value()
        assert app.launched == len(plan.nodes) and len(app.exchanges) > len(plan.nodes)
        assert sorted(remote.scripts) == sorted(n.name for n in plan.nodes)
        assert all(any(shared in readable(s) for s in scripts) for scripts in remote.scripts.values())
        tear_down(plan.cluster_id, instant_runtime(StandInRemote(), provider_for=lambda _name: fake.adapter()))
        assert fake.harness.instances() == 0
    assert_no_secret_crossed(app, secrets)
