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
def node_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tool("mmdebstrap", "systemd-nspawn", "ip", "nsenter", "slurmd", "ssh")
    if os.geteuid() != 0:
        (pytest.fail if require_system() else pytest.skip)("booting nodes needs root")
    cache = os.environ.get("PROVISIONER_BOOT_IMAGE_CACHE")
    return build_image(Path(cache) if cache else tmp_path_factory.mktemp("boot-image"))


@pytest.fixture(scope="session")
def host_resources() -> tuple[int, int]:
    """CPUs and memory (MiB) as slurmd measures them: a container sees the host's."""
    need_tool("slurmd")
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    return int(re.search(r"CPUs=(\d+)", line)[1]), int(re.search(r"RealMemory=(\d+)", line)[1])  # type: ignore[index]
