"""``provisioner node watch`` (validation/watch.py) on the real H100 captures through a FakeRunner.

What is pinned: the watch judges with node check's own codes, acts once per new failed finding
(an XID is judged when it appears, not on every later look), drains through Slurm or Kubernetes
with the code in the reason, refuses the last node in service out loud, and on a spot reclaim
notice (AWS IMDSv2, GCP) signals the jobs, writes the checkpoint file and drains.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.validation.nvsmi import QUERY_ARGS, XML_ARGS
from provisioner.validation.runner import CommandResult, FakeClock, FakeRunner, Host
from provisioner.validation.watch import (
    REASON_PREFIX,
    WatchConfig,
    WatchState,
    code_of_reason,
    http_fetch,
    on_spot_notice,
    run_watch,
    spot_notice,
    watch_once,
)
from tests.test_validation import DEGRADED, IDLE, capture

TWO_NODES = "NodeName=c-0 State=IDLE Partitions=gpu\nNodeName=c-1 State=ALLOCATED Partitions=gpu\n"


class Node:
    """A node whose kernel log and nvidia-smi answers a test changes between looks."""

    def __init__(self, slurm_nodes: str = TWO_NODES) -> None:
        self.dmesg = (DEGRADED / "dmesg-clean.txt").read_text()
        self.xml = (IDLE / "nvidia-smi-q.xml").read_text()
        self.run = FakeRunner(
            {
                XML_ARGS: lambda _argv: CommandResult(0, self.xml),
                QUERY_ARGS: CommandResult(0, capture(IDLE / "nvidia-smi-query.csv")),
                ("dmesg",): lambda _argv: CommandResult(0, self.dmesg),
                ("scontrol", "show", "node"): CommandResult(0, slurm_nodes),
                ("scontrol", "update"): CommandResult(0),
                ("squeue",): CommandResult(0, "12\n13\n12\n"),
                ("scancel",): CommandResult(0),
                ("kubectl", "get", "nodes", "-o", "name"): CommandResult(0, "node/c-0\nnode/c-1\n"),
                ("kubectl",): CommandResult(0),
            }
        )
        clock = FakeClock()
        self.host = Host(run=self.run, clock=clock, sleep=clock.sleep)

    def xid79(self) -> None:
        self.dmesg += "\n".join((DEGRADED / "dmesg-xid79.txt").read_text().splitlines()[4:]) + "\n"

    def updates(self) -> list[tuple[str, ...]]:
        return [
            c
            for c in self.run.calls
            if c[:2] in (("scontrol", "update"), ("kubectl", "cordon"), ("kubectl", "taint"), ("kubectl", "annotate"))
        ]


def config(tmp_path: Path, via: str = "slurm", **kw: object) -> WatchConfig:
    return WatchConfig(
        node="c-0",
        via=via,
        expect_gpus=1,
        expect_model="H100",
        report_dir=tmp_path,  # type: ignore[arg-type]
        checkpoint_file=tmp_path / "checkpoint-now",
        **kw,
    )


def test_an_xid_that_appears_drains_once_with_its_code(tmp_path: Path) -> None:
    node, state = Node(), WatchState()
    first = watch_once(node.host, config(tmp_path), state)
    assert first.report.status.value == "healthy" and node.updates() == []
    assert not any(c[:2] == ("dcgmi", "diag") for c in node.run.calls)  # no DCGM diag every 30 s
    node.xid79()
    second = watch_once(node.host, config(tmp_path), state)
    assert [f.code for f in second.new_failed] == ["xid.79"] and second.drained
    [update] = node.updates()
    assert update[:4] == ("scontrol", "update", "NodeName=c-0", "State=DRAIN")
    reason = update[4].removeprefix("Reason=")
    assert reason.startswith(f"{REASON_PREFIX} xid.79: XID 79 on GPU 0")
    assert code_of_reason(reason) == "xid.79"
    written = json.loads((tmp_path / "c-0.json").read_text())
    assert (written["status"], written["drained"], written["new_failed"]) == ("failed", True, ["xid.79"])
    # The next look reads the same kernel log: the XID was judged already; nothing new, no second drain.
    third = watch_once(node.host, config(tmp_path), state)
    assert third.new_failed == () and third.report.status.value == "healthy" and len(node.updates()) == 1


def test_volatile_ecc_drains_through_kubernetes(tmp_path: Path) -> None:
    node = Node()
    node.xml = (DEGRADED / "ecc-error.xml").read_text()
    look = watch_once(node.host, config(tmp_path, via="k8s"), WatchState())
    assert "ecc.volatile_uncorrectable" in {f.code for f in look.new_failed}
    verbs = [c[:2] for c in node.updates()]
    assert verbs == [("kubectl", "cordon"), ("kubectl", "taint"), ("kubectl", "annotate")]
    annotate = node.updates()[2]
    assert f"{REASON_PREFIX} ecc.volatile_uncorrectable" in annotate[4]


def test_the_last_node_in_service_is_not_drained_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = Node("NodeName=c-0 State=IDLE\nNodeName=c-1 State=IDLE+DRAIN\n")
    node.xid79()
    state = WatchState()
    look = run_watch(node.host, config(tmp_path), once=True)
    assert look == 11
    assert node.updates() == []
    written = json.loads((tmp_path / "c-0.json").read_text())
    assert written["drained"] is False and "last node in service" in written["refused"]
    assert "NOT drained" in capsys.readouterr().err
    assert not state.drained


def test_spot_notices_aws_imdsv2_and_gcp() -> None:
    asked: list[tuple[str, str, dict[str, str]]] = []

    def aws(answer: tuple[int, str]):  # type: ignore[no-untyped-def]
        def fetch(method: str, url: str, headers: dict[str, str]) -> tuple[int, str]:
            asked.append((method, url, headers))
            return (200, "tok-1") if url.endswith("/api/token") else answer

        return fetch

    assert spot_notice("aws", aws((404, "")), "http://127.0.0.1:9") is None
    body = json.dumps({"action": "terminate", "time": "2026-11-26T05:00:00Z"})
    assert spot_notice("aws", aws((200, body)), "http://127.0.0.1:9") == "AWS spot terminate at 2026-11-26T05:00:00Z"
    assert asked[-1] == (
        "GET",
        "http://127.0.0.1:9/latest/meta-data/spot/instance-action",
        {"X-aws-ec2-metadata-token": "tok-1"},
    )
    assert asked[-2][0] == "PUT" and asked[-2][2] == {"X-aws-ec2-metadata-token-ttl-seconds": "60"}

    def gcp(text: str):  # type: ignore[no-untyped-def]
        return lambda method, url, headers: (200, text) if headers == {"Metadata-Flavor": "Google"} else (403, "")

    assert spot_notice("gcp", gcp("FALSE"), "http://127.0.0.1:9") is None
    assert spot_notice("gcp", gcp("TRUE"), "http://127.0.0.1:9") == "GCP preemption (about 30 s left)"
    assert spot_notice("gcp", lambda *_: (0, ""), "http://127.0.0.1:9") is None  # nothing answers


def test_a_notice_signals_each_job_once_writes_the_checkpoint_file_and_drains_even_the_last_node(
    tmp_path: Path,
) -> None:
    node = Node("NodeName=c-0 State=ALLOCATED\n")
    state = WatchState()
    look = on_spot_notice(node.host, config(tmp_path), state, "AWS spot terminate at T")
    scancels = [c for c in node.run.calls if c[0] == "scancel"]
    assert scancels == [("scancel", "--signal=USR1", "12"), ("scancel", "--signal=USR1", "13")]
    assert json.loads((tmp_path / "checkpoint-now").read_text()) == {"node": "c-0", "notice": "AWS spot terminate at T"}
    assert look.drained and state.spot_noticed
    assert node.updates()[0][4].startswith(f"Reason={REASON_PREFIX} spot.interruption: AWS spot terminate at T")


def test_the_loop_polls_the_notice_between_looks(tmp_path: Path) -> None:
    node = Node()
    polls: list[float] = []

    def fetch(method: str, url: str, headers: dict[str, str]) -> tuple[int, str]:
        polls.append(node.host.clock())
        return (200, "TRUE") if len(polls) >= 3 else (200, "FALSE")

    run_watch(
        node.host,
        config(tmp_path, spot="gcp", metadata_url="http://127.0.0.1:9", interval_s=30, spot_poll_s=5),
        fetch=fetch,
        stop=lambda: node.host.clock() >= 1060,
    )
    assert polls == [1000.0, 1005.0, 1010.0]  # every spot_poll_s until the notice, then no more
    assert json.loads((tmp_path / "checkpoint-now").read_text())["notice"] == "GCP preemption (about 30 s left)"
    assert [c[:3] for c in node.updates()] == [("scontrol", "update", "NodeName=c-0")]
    looks = [c for c in node.run.calls if c == XML_ARGS]
    assert len(looks) == 3  # at 1000, 1030 and 1060
    assert WatchState.load(tmp_path / "watch-state.json").spot_noticed


@pytest.fixture
def metadata_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self._answer(200, "tok-9")

        def do_GET(self) -> None:
            if self.headers.get("X-aws-ec2-metadata-token") != "tok-9":
                self._answer(401, "")
            else:
                self._answer(200, json.dumps({"action": "stop", "time": "2026-11-26T05:02:00Z"}))

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_fetch_speaks_imdsv2_to_a_local_metadata_server(metadata_server: str) -> None:
    assert spot_notice("aws", http_fetch, metadata_server) == "AWS spot stop at 2026-11-26T05:02:00Z"
    assert http_fetch("GET", "http://127.0.0.1:1/", {}) == (0, "")


def test_cli_refuses_a_bad_via_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from provisioner.cli import main

    assert main(["node", "watch", "--via", "pbs", "--once"]) == 2
    err = capsys.readouterr().err
    assert "--via" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("provider", "spot", "control_plane", "via", "spot_flag"),
    [
        ("aws", True, "slurm", "slurm", "aws"),
        ("gcp", True, "kubernetes", "k8s", "gcp"),
        ("aws", False, "slurm", "slurm", "none"),
        ("lambda", True, "none", "none", "none"),  # Lambda's notice is its listing: the controller reads it
    ],
)
def test_the_bootstrap_runs_the_watch_with_the_plans_scheduler_and_spot_source(
    provider: str, spot: bool, control_plane: str, via: str, spot_flag: str
) -> None:
    import dataclasses
    import shlex

    from provisioner.render.views import cluster_view, render_template
    from tests.test_render_golden import GOLDEN, _example_plan  # noqa: F401

    plan = _example_plan(Path(__file__).parent.parent / "examples" / "pretrain-h100-slurm.yaml")
    view = dataclasses.replace(cluster_view(plan), provider=provider, spot=spot, control_plane=control_plane)
    script = render_template("cloud-init/health.sh.j2", c=view)
    line = " ".join(script.split("exec provisioner node watch", 1)[1].replace("\\\n", " ").split("\n")[0].split())
    words = shlex.split(line)
    assert words[words.index("--via") + 1] == via and words[words.index("--spot") + 1] == spot_flag
    assert words[words.index("--expect-gpus") + 1] == str(view.gpus_per_node)
    assert words[words.index("--interval-s") + 1] == "30"
    assert ("kubelet.kubeconfig" in script) is (control_plane == "kubernetes")
