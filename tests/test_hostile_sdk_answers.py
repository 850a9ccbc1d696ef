"""Issue 28, item 1, for the providers whose answers an SDK parses (AWS through botocore, GCP through
google-cloud-compute): the hostile proxy (tests/hostile_proxy.py) in front of their fakes spoils every
answer, and each read the commands make ends in the error tree's one line, never an SDK parser's
exception (botocore's ResponseParserError, a RecursionError, protobuf's ParseError).
"""

from __future__ import annotations

import pytest

from provisioner.errors import ProviderError
from provisioner.providers.http import RetryPolicy
from provisioner.testing.fakes import serve
from tests.hostile_proxy import MODES, HostileProxy
from tests.providers.contract import load_harness


@pytest.mark.parametrize("name", ["aws", "gcp"])
def test_a_hostile_answer_to_an_sdk_is_one_line(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = load_harness(name)
    for var, value in harness.env:
        monkeypatch.setenv(var, value)
    proxy = HostileProxy(harness.app)
    with serve(proxy) as server:  # type: ignore[arg-type]
        provider = harness.make_provider(
            api_key=harness.api_key,
            base_url=server.url,
            transport=None,
            limits=harness.scaled_limits,
            timeout_s=10.0,
            retry=RetryPolicy(attempts=1, base_delay_s=0.0, sleep=lambda _s: None),
        )
        assert provider.get_nodes("hc") == []
        failures = {}
        for mode in MODES:
            proxy.mode = mode
            try:
                provider.get_nodes("hc")
            except ProviderError as exc:
                failures[mode] = str(exc)
            finally:
                proxy.mode = None
        assert proxy.rewritten >= len(MODES)
        assert {"deep", "huge", "truncated"} <= set(failures), failures
        assert all("\n" not in line and line.startswith(f"{name}: ") for line in failures.values()), failures
