"""The rendered TTL, idle and teardown scripts, run for real with stand-in tools on PATH.

Every tool the scripts call (curl, date, squeue, nvidia-smi, k3s, systemctl, logger) is a shim
that appends its argv to ``calls.log`` (curl also keeps its stdin apart, where the credential
travels) and answers from the test's environment. The assertions are on exact calls: which
endpoint and method per provider, nothing before the deadline, nothing while a job runs or a
GPU is busy, and no credential value in argv, logs or output. The docs table is checked
against ``TEARDOWN``.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from provisioner.errors import PlanError
from provisioner.render import render_cluster
from provisioner.render.teardown import TEARDOWN, render_teardown_scripts, teardown_for
from provisioner.render.views import cluster_view
from tests.conftest import ROOT
from tests.test_render_slurm import CANARY, make_plan

POD_KEY = "rpa_CANARYpodScopedKey0123456789"
VAST_KEY = "CANARYvastInstanceKey0123456789abcdef"
BOOT = 1_700_000_000
TTL_S = 600 * 60  # make_plan's ttl_hours=10

_SHIMS = {
    "date": 'echo "${FAKE_NOW:?}"',
    "curl": 'cat > "$T/curl.stdin"; echo "curl $*" >> "$T/calls.log"; '
    'case "$*" in *graphql*) printf %s "${FAKE_GRAPHQL:-}" ;; *) printf %s "${FAKE_HTTP:-204}" ;; esac',
    "squeue": 'echo "squeue $*" >> "$T/calls.log"; [ -n "${FAKE_SQUEUE_FAIL:-}" ] && exit 1; '
    'printf %b "${FAKE_SQUEUE:-}"',
    "nvidia-smi": 'echo "nvidia-smi $*" >> "$T/calls.log"; [ -n "${FAKE_SMI_FAIL:-}" ] && exit 9; '
    'printf %b "${FAKE_UTIL-0\\n0\\n}"',
    "k3s": 'echo "k3s $*" >> "$T/calls.log"; printf %b "${FAKE_PODS:-}"',
    "systemctl": 'echo "systemctl $*" >> "$T/calls.log"',
    "logger": 'echo "logger $*" >> "$T/calls.log"',
}


@dataclass
class Node:
    """One node's scripts in a scratch folder, run with shims; ``env`` is what each run adds."""

    root: Path
    scripts: dict[str, Path]

    def run(self, script: str, *args: str, now: int, **env: str) -> subprocess.CompletedProcess[str]:
        base = {
            "PATH": f"{self.root / 'bin'}:/usr/bin:/bin",
            "T": str(self.root),
            "FAKE_NOW": str(now),
            "PROVISIONER_STATE_DIR": str(self.root / "state"),
            "PROVISIONER_SYSTEMD_DIR": str(self.root / "run-systemd"),
            "PROVISIONER_PID1_ENVIRON": str(self.root / "pid1.environ"),
            "PROVISIONER_INIT_PID": "999999999",  # never this machine's PID 1
            "PROVISIONER_TEARDOWN": str(self.scripts["teardown"]),
        }
        return subprocess.run(
            ["bash", str(self.scripts[script]), *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def calls(self) -> list[str]:
        log = self.root / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def actions(self) -> list[str]:
        """The calls that end a node: API deletes and poweroffs."""
        return [c for c in self.calls() if c.startswith(("curl", "systemctl"))]


def _node(
    tmp_path: Path, provider: str, *, control_plane: str = "slurm", idle: float | None = 20, systemd: bool = True
) -> Node:
    spec: dict[str, object] = {
        "control_plane": control_plane,
        "lifetime": {"ttl_hours": 10, "idle_timeout_minutes": idle},
    }
    plan = make_plan(spec, nodes=2, provider=provider)
    doc = yaml.safe_load(render_cluster(plan, CANARY)["cloud-init/worker.yaml"])
    (tmp_path / "bin").mkdir()
    for name, body in _SHIMS.items():
        (tmp_path / "bin" / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    if systemd:
        (tmp_path / "run-systemd").mkdir()
    scripts = {}
    for entry in doc["write_files"]:
        match = re.fullmatch(r"/usr/local/sbin/provisioner-(teardown|deadman|idle)", entry["path"])
        if match:
            scripts[match[1]] = tmp_path / match[1]
            scripts[match[1]].write_text(entry["content"])
            scripts[match[1]].chmod(0o755)
    return Node(tmp_path, scripts)


# -- the table -------------------------------------------------------------------------------------


def test_every_registered_provider_has_a_teardown_row() -> None:
    from provisioner.providers.registry import REGISTRY

    assert set(TEARDOWN) == set(REGISTRY)
    assert {p for p, row in TEARDOWN.items() if row.node_action != "poweroff"} == {"runpod", "vastai"}
    with pytest.raises(PlanError, match="no teardown mechanism"):
        teardown_for("nowhere")


def test_docs_table_equals_the_code_table() -> None:
    text = (ROOT / "docs" / "teardown.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    parsed = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    expected = [[f"`{row.provider}`", row.ttl, row.idle, row.client_dies] for row in TEARDOWN.values()]
    assert parsed == expected


# -- TTL -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "env", "expected"),
    [
        (
            "runpod",
            {"RUNPOD_POD_ID": "abc123xyz", "RUNPOD_API_KEY": POD_KEY},
            [
                "curl -sS -o /dev/null -w %{http_code} --max-time 30 --retry 3 --retry-delay 5 -X DELETE -K - "
                "https://api.runpod.io/v2/pods/abc123xyz"
            ],
        ),
        (
            "vastai",
            {"CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY},
            [
                "curl -sS -o /dev/null -w %{http_code} --max-time 30 --retry 3 --retry-delay 5 -X DELETE -K - "
                "https://console.vast.ai/api/v0/instances/4242/"
            ],
        ),
        ("aws", {}, ["systemctl poweroff"]),
        ("gcp", {}, ["systemctl poweroff"]),
        ("lambda", {}, ["systemctl poweroff"]),
        ("fluence", {}, ["systemctl poweroff"]),
    ],
)
def test_ttl_fires_once_the_first_boot_deadline_passes(
    tmp_path: Path, provider: str, env: dict[str, str], expected: list[str]
) -> None:
    node = _node(tmp_path, provider)
    for now in (BOOT, BOOT + 60, BOOT + TTL_S - 1):  # first boot fixes the deadline; a restart keeps it
        result = node.run("deadman", now=now, **env)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "state" / "deadline").read_text() == f"{BOOT + TTL_S}\n"
    assert node.actions() == []
    result = node.run("deadman", now=BOOT + TTL_S, **env)
    assert result.returncode == 0, result.stderr
    assert node.actions() == expected
    if provider in ("runpod", "vastai"):
        key = env.get("RUNPOD_API_KEY") or env["CONTAINER_API_KEY"]
        assert (tmp_path / "curl.stdin").read_text() == f'header = "Authorization: Bearer {key}"\n'
        assert (tmp_path / "state" / "teardown.done").exists()


def test_an_absolute_deadline_from_the_launcher_wins(tmp_path: Path) -> None:
    node = _node(tmp_path, "aws")
    node.run("deadman", now=BOOT)  # first boot: BOOT + 10 h
    node.run("deadman", now=BOOT + 3600, PROVISIONER_DEADLINE=str(BOOT + 7200))
    assert node.actions() == []
    node.run("deadman", now=BOOT + 7200, PROVISIONER_DEADLINE=str(BOOT + 7200))
    assert node.actions() == ["systemctl poweroff"]
    node.run("deadman", now=BOOT + 7300, PROVISIONER_DEADLINE="$(reboot)")  # not a number: ignored
    assert (tmp_path / "state" / "deadline").read_text() == f"{BOOT + 7200}\n"


@pytest.mark.parametrize("provider", ["runpod", "vastai"])
@pytest.mark.parametrize("status", ["401", "403", "409", "500", "000"])
def test_a_refused_api_delete_still_powers_off_and_never_logs_the_key(
    tmp_path: Path, provider: str, status: str
) -> None:
    node = _node(tmp_path, provider)
    env = (
        {"RUNPOD_POD_ID": "abc123xyz", "RUNPOD_API_KEY": POD_KEY}
        if provider == "runpod"
        else {"CONTAINER_ID": "4242", "CONTAINER_API_KEY": VAST_KEY}
    )
    result = node.run("teardown", "ttl", now=BOOT, FAKE_HTTP=status, **env)
    tries = 2 if provider == "runpod" and status in ("401", "403") else 1  # then GraphQL podTerminate
    assert [c.split()[0] for c in node.actions()] == ["curl"] * tries + ["systemctl"]
    assert node.actions()[-1] == "systemctl poweroff"
    assert f"HTTP {status}" in result.stderr
    everything = "\n".join([result.stdout, result.stderr, *node.calls()])
    assert POD_KEY not in everything and VAST_KEY not in everything


@pytest.mark.parametrize(
    ("answer", "deleted"),
    [
        ('{"data":{"podTerminate":null}}', True),
        ('{"errors":[{"message":"unauthorized"}],"data":null}', False),
        ("", False),
    ],
)
def test_runpod_falls_back_to_graphql_when_rest_refuses_the_pod_key(tmp_path: Path, answer: str, deleted: bool) -> None:
    node = _node(tmp_path, "runpod")
    result = node.run(
        "teardown",
        "idle",
        now=BOOT,
        FAKE_HTTP="403",
        FAKE_GRAPHQL=answer,
        RUNPOD_POD_ID="abc123xyz",
        RUNPOD_API_KEY=POD_KEY,
    )
    graphql = (
        "curl -sS --max-time 30 --retry 3 --retry-delay 5 -X POST -H Content-Type: application/json "
        '--data {"query":"mutation { podTerminate(input: {podId: \\"abc123xyz\\"}) }"} -K - '
        "https://api.runpod.io/graphql"
    )
    assert node.actions()[1] == graphql
    assert (tmp_path / "curl.stdin").read_text() == f'header = "Authorization: Bearer {POD_KEY}"\n'
    assert node.actions()[2:] == ([] if deleted else ["systemctl poweroff"])
    assert POD_KEY not in result.stderr + "\n".join(node.calls())


def test_pod_credentials_come_from_pid1_when_the_timer_lacks_them(tmp_path: Path) -> None:
    node = _node(tmp_path, "runpod")
    (tmp_path / "pid1.environ").write_bytes(
        b"PATH=/usr/bin\0RUNPOD_POD_ID=fromInit42\0RUNPOD_API_KEY=" + POD_KEY.encode() + b"\0"
    )
    result = node.run("teardown", "idle", now=BOOT)
    assert result.returncode == 0, result.stderr
    assert node.actions() == [
        "curl -sS -o /dev/null -w %{http_code} --max-time 30 --retry 3 --retry-delay 5 "
        "-X DELETE -K - https://api.runpod.io/v2/pods/fromInit42"
    ]
    assert POD_KEY not in result.stderr + "\n".join(node.calls())


@pytest.mark.parametrize("pod_id", ["", "abc/../../v2/clusters/x", "a b", "id$(reboot)"])
def test_a_missing_or_odd_pod_id_is_never_sent(tmp_path: Path, pod_id: str) -> None:
    node = _node(tmp_path, "runpod")
    node.run("teardown", "ttl", now=BOOT, RUNPOD_POD_ID=pod_id, RUNPOD_API_KEY=POD_KEY)
    assert node.actions() == ["systemctl poweroff"]


def test_without_systemd_the_container_init_is_stopped(tmp_path: Path) -> None:
    node = _node(tmp_path, "lambda", systemd=False)
    init = subprocess.Popen(["sleep", "60"])
    try:
        result = node.run("teardown", "ttl", now=BOOT, PROVISIONER_INIT_PID=str(init.pid))
        assert init.wait(timeout=10) == -15, result.stderr  # SIGTERM, as a container's PID 1 gets it
    finally:
        init.kill()
    assert node.actions() == []


# -- idle ------------------------------------------------------------------------------------------


def test_idle_fires_only_after_the_set_minutes_without_jobs_or_gpu_use(tmp_path: Path) -> None:
    node = _node(tmp_path, "runpod", idle=20)
    env = {"RUNPOD_POD_ID": "abc123xyz", "RUNPOD_API_KEY": POD_KEY}
    node.run("idle", now=BOOT, **env)  # idle from now on
    node.run("idle", now=BOOT + 19 * 60 + 59, **env)
    assert node.actions() == []
    # A job appears: the idle clock starts again from the next idle minute.
    node.run("idle", now=BOOT + 20 * 60, FAKE_SQUEUE="42\\n", **env)
    assert node.actions() == []
    node.run("idle", now=BOOT + 21 * 60, **env)
    node.run("idle", now=BOOT + 40 * 60, **env)
    assert node.actions() == []
    result = node.run("idle", now=BOOT + 41 * 60, **env)
    assert result.returncode == 0, result.stderr
    assert node.actions() == [
        "curl -sS -o /dev/null -w %{http_code} --max-time 30 --retry 3 --retry-delay 5 "
        "-X DELETE -K - https://api.runpod.io/v2/pods/abc123xyz"
    ]
    assert "squeue -h -o %i" in node.calls()
    assert "nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits" in node.calls()


@pytest.mark.parametrize(
    "busy",
    [
        {"FAKE_SQUEUE": "7\\n"},
        {"FAKE_UTIL": "0\\n37\\n"},
        {"FAKE_UTIL": " 1\\n"},
        {"FAKE_SMI_FAIL": "1"},
        {"FAKE_SQUEUE_FAIL": "1"},
        {"FAKE_UTIL": ""},
    ],
    ids=["job-queued", "one-gpu-busy", "spaces", "nvidia-smi-fails", "squeue-fails", "no-gpu-listed"],
)
def test_nothing_fires_while_a_job_runs_a_gpu_is_busy_or_a_check_cannot_answer(
    tmp_path: Path, busy: dict[str, str]
) -> None:
    node = _node(tmp_path, "aws", idle=5)
    for minute in range(0, 120, 10):
        node.run("idle", now=BOOT + minute * 60, **busy)
    assert node.actions() == []
    assert not (tmp_path / "state" / "idle-since").exists()


def test_kubernetes_idle_reads_gpu_pods_where_the_node_has_a_kubeconfig(tmp_path: Path) -> None:
    node = _node(tmp_path, "aws", control_plane="kubernetes", idle=5)
    kubeconfig = tmp_path / "k3s.yaml"
    kubeconfig.write_text("apiVersion: v1\n")
    env = {"PROVISIONER_KUBECONFIG": str(kubeconfig)}
    for minute in range(0, 30, 5):  # a pending or running pod asks for 8 GPUs
        node.run("idle", now=BOOT + minute * 60, FAKE_PODS="<none>\\n8\\n", **env)
    assert node.actions() == []
    assert any(c.startswith("k3s kubectl --kubeconfig") and "status.phase!=Succeeded" in c for c in node.calls())
    node.run("idle", now=BOOT + 30 * 60, FAKE_PODS="<none>\\n<none>\\n", **env)
    node.run("idle", now=BOOT + 35 * 60, FAKE_PODS="<none>\\n", **env)
    assert node.actions() == ["systemctl poweroff"]


def test_no_idle_timer_without_an_idle_timeout() -> None:
    view = cluster_view(make_plan({"lifetime": {"ttl_hours": 1}}))
    assert sorted(render_teardown_scripts(view)) == ["deadman", "teardown"]
    view = cluster_view(make_plan({"lifetime": {"idle_timeout_minutes": 0.5}}))
    assert sorted(render_teardown_scripts(view)) == ["idle", "teardown"]
    assert view.idle_minutes == 1


# -- wiring ----------------------------------------------------------------------------------------


def test_cloud_init_runs_timers_and_the_script_bootstrap_runs_loops() -> None:
    plan = make_plan({"lifetime": {"ttl_hours": 2, "idle_timeout_minutes": 30}}, provider="vastai")
    rendered = render_cluster(plan, CANARY)
    doc = yaml.safe_load(rendered["cloud-init/head.yaml"])
    for unit in ("deadman", "idle"):
        assert ["systemctl", "enable", "--now", f"provisioner-{unit}.timer"] in doc["runcmd"]
        timer = next(f for f in doc["write_files"] if f["path"] == f"/etc/systemd/system/provisioner-{unit}.timer")
        assert "OnUnitActiveSec=1min" in timer["content"]
    script = rendered["bootstrap/head.sh"]
    assert "provisioner-*.timer)" in script and 'while sleep 60; do "$0" || true; done' in script
    assert "if systemctl enable --now provisioner-idle.timer; then" in script


def test_no_account_key_reaches_a_node() -> None:
    plan = make_plan({"lifetime": {"ttl_hours": 2, "idle_timeout_minutes": 30}}, provider="runpod")
    for path, text in render_cluster(plan, CANARY).items():
        for name in ("LAMBDA_API_KEY", "VAST_API_KEY", "FLUENCE_API_KEY", "RUNPOD_API_KEY="):
            assert name not in text, (path, name)
    assert os.environ.get("RUNPOD_API_KEY") is None  # conftest keeps account keys out of tests
