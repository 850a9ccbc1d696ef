"""Exposure said where it cannot be enforced (issue 28 item 6).

- Any set of ``access.allowed_cidrs`` covering every IPv4 or every IPv6 address is "open to all",
  however it is split; sets that leave out one address are not.
- ``plan`` and ``up`` name each provider that cannot apply ``allowed_cidrs`` (RunPod, Vast.ai: a
  container's sshd is published to every address), and the set is pinned against the adapters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.exposure import UNFILTERED, open_to_all
from provisioner.providers import registry
from provisioner.providers.base import SupportsFirewall
from provisioner.report.facts import access_warnings
from tests.test_lifecycle_support import RUNPOD_SPEC, plans_for


@pytest.mark.parametrize(
    ("cidrs", "open_"),
    [
        (["0.0.0.0/0"], True),
        (["0.0.0.0/1", "128.0.0.0/1"], True),
        (["128.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"], True),
        (["0.0.0.1/0"], True),  # host bits ignored, as the spec's own check does
        (["::/0"], True),
        (["::/1", "8000::/1"], True),
        (["198.51.100.0/24", "::/1", "8000::/1"], True),
        (["0.0.0.0/1"], False),
        (["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4"], False),  # 240.0.0.0/4 left out
        (["0.0.0.0/1", "128.0.0.0/1", "::/0"][:1], False),
        (["0.0.0.0/1", "::/1", "8000::/2"], False),  # half of each family
        (["255.255.255.255/32"], False),
        ([], False),
    ],
)
def test_a_cidr_set_covering_a_whole_family_is_open_to_all(cidrs: list[str], open_: bool) -> None:
    assert open_to_all(cidrs) is open_


def test_the_unfiltered_providers_are_the_ones_with_neither_firewall() -> None:
    # Neither a provider firewall (SupportsFirewall) nor a node firewall (a container: the script bootstrap).
    from provisioner.capabilities import Capability

    found = set()
    for name in registry.REGISTRY:
        cls = registry.provider_class(name)
        if not issubclass(cls, SupportsFirewall) and Capability.SCRIPT_BOOTSTRAP in cls.capabilities:
            found.add(name)
    assert found == set(UNFILTERED) == {"runpod", "vastai"}


def test_plan_names_each_provider_that_cannot_apply_allowed_cidrs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "open.yaml"
    spec.write_text(RUNPOD_SPEC + "access: {allowed_cidrs: [0.0.0.0/1, 128.0.0.0/1]}\n")
    assert main(["plan", str(spec)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "SSH: open to every address (access.allowed_cidrs 0.0.0.0/1, 128.0.0.0/1)" in out
    assert "SSH: runpod cannot apply access.allowed_cidrs (a pod's sshd is published on a mapped public port" in out
    assert "vastai cannot apply" not in out  # only the providers ranked


def test_the_report_lines_for_a_closed_and_a_narrow_spec(tmp_path: Path) -> None:
    (plan,) = plans_for(RUNPOD_SPEC + "access: {allowed_cidrs: [198.51.100.0/24]}\n", tmp_path, count=1)
    assert access_warnings(plan.spec, ["lambda", "aws"]) == []
    assert access_warnings(plan.spec, ["vastai", "lambda", "vastai"]) == [
        "SSH: vastai cannot apply access.allowed_cidrs (an instance's sshd is published on a mapped public port "
        "to every address); the cluster's SSH key is the only guard"
    ]


def test_up_says_it_before_buying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.delenv("PROVISIONER_RUNPOD_API_KEY", raising=False)
    monkeypatch.setenv("PROVISIONER_RUNPOD_API_URL", "http://127.0.0.1:9")  # nothing may be asked anyway
    spec = tmp_path / "open.yaml"
    spec.write_text(RUNPOD_SPEC + "access: {allowed_cidrs: ['::/1', '8000::/1']}\n")
    code = main(["up", str(spec), "--engine", "direct", "--json", "--max-tries", "1"])
    captured = capsys.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert warnings == [
        "warning: SSH: open to every address (access.allowed_cidrs ::/1, 8000::/1)",
        "warning: SSH: runpod cannot apply access.allowed_cidrs (a pod's sshd is published on a mapped public "
        "port to every address); the cluster's SSH key is the only guard",
    ]
    assert code != 0  # no key: nothing bought
