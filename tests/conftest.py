"""Suite-wide safety and helpers.

Cloud SDKs must never look for credentials on the network: dummy AWS keys with the
metadata service disabled, and Google's metadata host pointed at loopback. Tests that
need a system tool or ../shared skip with a reason, unless REQUIRE_SYSTEM_TOOLS=1 (CI),
under which they fail instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"
ARTIFACTS = ROOT / "test-artifacts"

_SAFE_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "NO_GCE_CHECK": "True",
    "GCE_METADATA_HOST": "127.0.0.1",
    "GCE_METADATA_IP": "127.0.0.1",
    "PULUMI_SKIP_UPDATE_CHECK": "true",
}
os.environ.update(_SAFE_ENV)
for _var in ("AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS", "LAMBDA_API_KEY", "RUNPOD_API_KEY",
             "VAST_API_KEY", "FLUENCE_API_KEY"):
    os.environ.pop(_var, None)


def require_system() -> bool:
    return os.environ.get("REQUIRE_SYSTEM_TOOLS") == "1"


def need_tool(*names: str) -> None:
    """Skip (or fail under REQUIRE_SYSTEM_TOOLS=1) unless every named executable exists."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        message = f"needs system tool(s) {', '.join(missing)} (installed by .ci/run)"
        if require_system():
            pytest.fail(message)
        pytest.skip(message)


def need_shared(*parts: str) -> Path:
    """Path inside ../shared, skipping (or failing in CI) when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        message = f"needs {path} (the shared reference folder beside the checkout)"
        if require_system():
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # A refreshed catalog cache on the developer's machine must not change test results.
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
