"""docs/environment.md is the one table of environment variables: every one the code reads is in it."""

from __future__ import annotations

import re
from pathlib import Path

from provisioner.providers.registry import REGISTRY
from provisioner.providers.settings import NATIVE_KEY_VARS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "environment.md"
READ = re.compile(r"""(?:os\.environ\.get|os\.getenv|os\.environ\[)\(?\s*["']([A-Z][A-Z0-9_]*)["']""")


def _read_by_code() -> set[str]:
    names: set[str] = set()
    paths = [path for folder in ("provisioner", "providers", "stacks") for path in (ROOT / folder).rglob("*.py")]
    paths += [ROOT / "tests" / "conftest.py", ROOT / "tests" / "boot" / "conftest.py"]  # the tests' switches
    for path in paths:
        names |= set(READ.findall(path.read_text(encoding="utf-8")))
    # providers.settings builds these names per provider: PROVISIONER_<P>_API_URL / _API_KEY.
    return names | set(NATIVE_KEY_VARS.values())


def _table() -> str:
    return "\n".join(line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `"))


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    table = _table()
    missing = sorted(name for name in _read_by_code() if f"`{name}`" not in table)
    assert not missing, f"add to docs/environment.md: {missing}"


def test_the_per_provider_variables_cover_every_provider() -> None:
    table = _table()
    assert "`PROVISIONER_<P>_API_URL`" in table and "`PROVISIONER_<P>_API_KEY`" in table
    intro = DOC.read_text(encoding="utf-8").split("|", 1)[0]
    assert all(f"`{name.upper().rstrip('_')}`" in intro for name in REGISTRY)


def test_the_scan_finds_what_it_should() -> None:
    text = 'a = os.environ.get("PROVISIONER_STATE_DIR")\nb = os.environ["PULUMI_CONFIG_PASSPHRASE"]\n'
    assert set(READ.findall(text)) == {"PROVISIONER_STATE_DIR", "PULUMI_CONFIG_PASSPHRASE"}
    assert {"PROVISIONER_STATE_DIR", "PROVISIONER_OWNER", "PULUMI_CONFIG_PASSPHRASE"} <= _read_by_code()


def test_an_aws_client_without_an_endpoint_stays_on_this_machine() -> None:
    """gc and costs --live ask every provider with credentials; the dummy AWS keys count as some, so
    an AWS client built without a fake's endpoint must not reach amazonaws.com from a test."""
    import boto3

    client = boto3.session.Session().client("ec2", region_name="us-east-1")
    assert client.meta.endpoint_url == "http://127.0.0.1:9"
