"""What every xdist worker pays to collect the suite (docs/benchmarks.md, "Collection per worker")."""

from __future__ import annotations

import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def test_hypothesis_is_imported_plainly_and_tests_are_rewritten() -> None:
    """conftest.PLAIN_ASSERT_PACKAGES: pytest rewrote all of hypothesis in every worker (~2.4 CPU-s)."""
    import hypothesis.core

    assert not isinstance(hypothesis.core.__loader__, AssertionRewritingHook)
    assert isinstance(sys.modules[__name__].__loader__, AssertionRewritingHook)
    assert isinstance(sys.modules["tests.conftest"].__loader__, AssertionRewritingHook)


def test_contract_collection_imports_no_fake() -> None:
    """tests/providers/contract.py: harness_names() imported every fake (moto, google's SDK) at collection."""
    import subprocess

    probe = (
        "import sys; from tests.providers.contract import harness_names; harness_names(); "
        "from provisioner.providers.registry import facts; "
        "fakes = {f.fake.partition(':')[0] for f in facts().values()}; "
        "print(sorted(m for m in sys.modules if m in fakes or m.split('.')[0] in ('moto', 'boto3') "
        "or m.startswith('google.cloud')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
