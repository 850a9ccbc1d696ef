"""Shared pieces of the lifecycle and burst tests (no tests here).

- ``StandInRemote``: the ``Remote`` the fake-backed tests use instead of SSH. The control
  plane lists every node it was told about as ready (after ``not_ready_polls`` polls), a job
  prints ``job_lines`` and exits ``job_exit``; every call is recorded.
- ``served_fake(name, monkeypatch)``: a fake provider on 127.0.0.1 with the adapter pointed at it.
- ``plans_for(spec_text, tmp_path)``: the ranked plans of a spec, from the bundled catalog.
- ``instant_runtime(...)``: a Runtime whose sleep does not wait (a fake clock advanced by sleep).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.lifecycle.realize import Runtime, Timeouts
from provisioner.plan import Plan
from provisioner.providers.base import Provider
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.testing.fakes import make_fake, serve
from provisioner.testing.fakes.base import FakeApp, RunningServer
from provisioner.validation.model import NodeReport
from provisioner.validation.runner import CommandResult
from tests.fast_limits import fast_limits

if TYPE_CHECKING:  # not imported at run time: the child processes of test_killed_up and others import this module
    import pytest

API_KEYS = {"lambda": "lambda-lc-key", "runpod": "runpod-lc-key", "fluence": "fluence-lc-key"}


@dataclass
class StandInRemote:
    nodes: Sequence[str] = ()
    not_ready_polls: int = 0
    job_lines: Sequence[str] = ("hello from the job",)
    job_exit: int = 0
    healthy: bool = False
    """Whether ``provisioner node check`` (through srun) answers with a healthy report."""
    on_job: Callable[[], None] | None = None
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    bootstrapped: list[str] = field(default_factory=list)

    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        self.calls.append((target.node_name, tuple(argv)))
        if argv[0] == "sinfo":
            if self.not_ready_polls > 0:
                self.not_ready_polls -= 1
                return CommandResult(0, "".join(f"{name}|idle*\n" for name in self.nodes))
            return CommandResult(0, "".join(f"{name}|idle\n" for name in self.nodes))
        if argv[0] == "kubectl" and argv[1:3] == ("get", "nodes"):
            return CommandResult(0, "".join(f"{name}|True\n" for name in self.nodes))
        if argv[0] == "true":
            return CommandResult(0)
        if argv[0] == "srun" and "check" in argv and self.healthy:
            node = next(word.split("=", 1)[1] for word in argv if word.startswith("--nodelist="))
            return CommandResult(0, NodeReport(node=node, gpu_model="H100", gpu_count=4).to_json())
        return CommandResult(0, "", "")

    def stream(
        self, target: SshTarget, argv: Sequence[str], on_line: Callable[[str], None], *, timeout_s: float | None = None
    ) -> int:
        self.calls.append((target.node_name, tuple(argv)))
        if self.on_job is not None:
            self.on_job()
        for line in self.job_lines:
            on_line(line)
        return self.job_exit

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        assert script.startswith("#!")
        self.bootstrapped.append(f"{target.user}@{target.node_name}")


class FakeTime:
    """A monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


def fast_provider(name: str) -> Provider:
    """The adapter with its published rate limits scaled x100 (the fakes enforce none by default) and
    millisecond retry back-off."""
    from provisioner.providers.http import RetryPolicy
    from provisioner.providers.registry import get_provider, provider_class

    cls: Any = provider_class(name)
    return get_provider(
        name,
        limits=cls.client_class.default_limits.scaled(100.0),
        timeout_s=5.0,
        retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.1),
    )


EPOCH = dt.datetime(2026, 11, 24, 0, 0, tzinfo=dt.UTC)


def instant_runtime(remote: Any, events: list[dict[str, Any]] | None = None, **kwargs: Any) -> Runtime:
    """A Runtime on a fake clock: ``sleep`` advances both the monotonic clock and ``now``. Events go to
    ``events`` unless ``emit`` is given."""
    ticks = FakeTime()
    kwargs.setdefault("provider_for", fast_provider)
    kwargs.setdefault("now", lambda: EPOCH + dt.timedelta(seconds=ticks.now - 1000.0))

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        if events is not None:
            events.append({"event": event, "message": message, **fields})

    kwargs.setdefault("emit", emit)  # or the caller's (the CLI's own emitter)
    return Runtime(
        remote=remote,
        clock=ticks.clock,
        sleep=ticks.sleep,
        timeouts=Timeouts(running_s=60, ready_s=60, deleted_s=60, interval_s=1),
        **kwargs,
    )


def fast_cli_env() -> dict[str, str]:
    """The environment of a child ``python -m provisioner.cli`` whose adapters go ``fast_limits``."""
    from tests.conftest import ROOT

    paths = [str(ROOT / "tests" / "fixtures" / "fast_cli"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@contextmanager
def served_fake(name: str, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> Iterator[tuple[FakeApp, RunningServer]]:
    """The fake served, the environment pointing the CLI at it, and the adapters the CLI builds
    at 100x the published rate limits with millisecond back-off (``fast_limits``)."""
    from provisioner.providers import registry

    monkeypatch.setattr(registry, "get_provider", fast_limits(registry.get_provider))
    key = API_KEYS.get(name, f"{name}-lc-key")  # a provider without an entry gets one of the same form
    app = make_fake(name, api_key=key, **kwargs)
    server = serve(app)
    prefix = f"PROVISIONER_{name.upper()}"
    monkeypatch.setenv(f"{prefix}_API_URL", server.url)
    monkeypatch.setenv(f"{prefix}_API_KEY", key)
    try:
        yield app, server
    finally:
        server.stop()
    assert app.validation_errors == [], "the fake saw traffic that breaks the provider's OpenAPI spec"


def plans_for(spec_text: str, tmp_path: Path, count: int = 3) -> list[Plan]:
    from provisioner.loader import load_spec
    from provisioner.workflow import choose_catalog, resolve

    path = tmp_path / "spec.yaml"
    path.write_text(spec_text, encoding="utf-8")
    result = resolve(load_spec(path), choose_catalog(None), path, keep=count)
    return [result.to_plan(option.rank) for option in result.options[:count]]


LAMBDA_SPEC = """\
name: lc-lambda
gpus: {model: [H100], count: 8}
nodes: {count: 2}
control_plane: slurm
providers: {allow: [lambda]}
workload: {hours: 1}
lifetime: {ttl_hours: 2}
access: {allowed_cidrs: [198.51.100.0/24]}
"""

FLUENCE_SPEC = """\
name: lc-fluence
gpus: {model: [H100], count: 8}
nodes: {count: 1}
control_plane: slurm
providers: {allow: [fluence]}
workload: {hours: 1}
"""

RUNPOD_SPEC = """\
name: lc-runpod
gpus: {model: [RTX4090], count: 1}
nodes: {count: 1}
control_plane: slurm
providers: {allow: [runpod]}
workload: {hours: 1}
"""


def runpod_plan(tmp_path: Path) -> Plan:
    """The RunPod plan on a GPU type and data center the fake sells (Secure Cloud, US-KS-2)."""
    plans = plans_for(RUNPOD_SPEC, tmp_path, count=20)
    return next(
        plan for plan in plans if plan.option.instance_type == "1x_RTX4090_SECURE" and plan.option.region == "US-KS-2"
    )
