"""Fixtures of the boot tests: the node image (built once per run, or once per machine with
PROVISIONER_BOOT_IMAGE_CACHE) and the host's CPU and memory as slurmd measures them."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.boot.nodes import build_image
from tests.conftest import need_tool, require_system


@pytest.fixture(scope="session")
def node_image(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    need_tool("mmdebstrap", "systemd-nspawn", "ip", "nsenter", "slurmd", "ssh")
    if os.geteuid() != 0:
        (pytest.fail if require_system() else pytest.skip)("booting nodes needs root")
    cache = os.environ.get("PROVISIONER_BOOT_IMAGE_CACHE")
    if cache:
        return build_image(Path(cache))
    # Once per run: the boot groups' workers (tests/conftest.py SERIAL_GROUPS) share the run's base
    # folder, and build_image lets one of them build while the others wait for its image.
    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # an xdist worker: the run's folder is the one above
        shared = shared.parent
    return build_image(shared / "boot-image")


@pytest.fixture(scope="session")
def host_resources() -> tuple[int, int]:
    """CPUs and memory (MiB) as slurmd measures them: a container sees the host's."""
    need_tool("slurmd")
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    return int(re.search(r"CPUs=(\d+)", line)[1]), int(re.search(r"RealMemory=(\d+)", line)[1])  # type: ignore[index]


# The lifetime cluster of test_boot_local (a 4-minute TTL, a 1-minute idle timeout) is checked by
# the group's first test and left to end itself while the other boot tests run; the test that reads
# how its nodes ended runs last, so the group does not sit out those minutes.
FIRST = "tests/boot/test_boot_local.py::test_up_local_vms_share_a_path_and_run_the_nvme_setup_with_both_lifetime_timers"
LAST = "tests/boot/test_boot_local.py::test_up_local_vms_end_themselves_on_ttl_and_idle"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    boot = [n for n, item in enumerate(items) if item.nodeid.startswith("tests/boot/")]
    if not boot:
        return
    ours = [item for item in items[boot[0] : boot[-1] + 1] if item.nodeid.startswith("tests/boot/")]
    others = [item for item in items[boot[0] : boot[-1] + 1] if not item.nodeid.startswith("tests/boot/")]
    first = [item for item in ours if item.nodeid == FIRST]
    last = [item for item in ours if item.nodeid == LAST]
    middle = [item for item in ours if item.nodeid not in (FIRST, LAST)]
    items[boot[0] : boot[-1] + 1] = [*first, *middle, *last, *others]
