"""Golden files: every rendered file for every example spec, byte for byte.

Each ``examples/<name>.yaml`` is planned with the bundled catalog (``resolve_plan(...)
.to_plan()``) and rendered with fixed canary secrets; the output must equal
``tests/golden/<name>/<path>``. A few hand-built plans cover what the examples do not
(slurmdbd, a switch tree, managed filesystems, GCP TCPXO) under ``tests/golden/variant-<name>/``.
``k8s/`` files are left to part B's own goldens (tests/golden_k8s).

Refresh after a deliberate change, then review the diff::

    UPDATE_GOLDEN=1 pytest tests/test_render_golden.py
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provisioner.catalog import load_bundled_catalog
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan
from provisioner.render import RenderedCluster, render_cluster
from tests.conftest import EXAMPLES, assert_golden_tree, need_tool
from tests.test_render_cloudinit import MUNGE, TOKEN, VARIANTS
from tests.test_render_slurm import CANARY

GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_PATHS = sorted(EXAMPLES.glob("*.yaml"))


def _example_plan(path: Path) -> Plan:
    return resolve_plan(load_spec(path), load_bundled_catalog()).to_plan()


def _cases() -> list[tuple[str, str]]:
    cases = [(path.stem, "example") for path in EXAMPLE_PATHS]
    return cases + [(f"variant-{name}", "variant") for name in sorted(VARIANTS)]


def _render(case: str, kind: str) -> RenderedCluster:
    if kind == "example":
        return render_cluster(_example_plan(EXAMPLES / f"{case}.yaml"), CANARY)
    name = case.removeprefix("variant-")
    topology = {f"llm-pretrain-{i}": ["spine0", f"leaf{i // 2}"] for i in range(3)}
    return render_cluster(
        VARIANTS[name], CANARY, slurmdbd=name.endswith("-dbd"),
        topology=topology if name == "aws-efa-slurm-nfs" else None,
    )


def test_every_example_is_covered() -> None:
    assert len(EXAMPLE_PATHS) >= 4
    stale = {p.name for p in GOLDEN.iterdir() if p.is_dir()} - {c for c, _ in _cases()} - {"report", "plans"}
    assert not stale, f"golden folders with no example: {sorted(stale)}"


@pytest.mark.parametrize(("case", "kind"), _cases())
def test_golden(case: str, kind: str) -> None:
    rendered = {path: text for path, text in _render(case, kind).items() if not path.startswith("k8s/")}
    assert_golden_tree(GOLDEN / case, rendered)


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=lambda p: p.stem)
def test_canary_secrets_only_in_user_data(path: Path) -> None:
    plan = _example_plan(path)
    rendered = render_cluster(plan, CANARY)
    control = plan.spec.control_plane.value
    assert MUNGE not in plan.dumps() and TOKEN not in plan.dumps()
    for rel, text in rendered.items():
        in_user_data = rel.startswith("cloud-init/")
        assert (MUNGE in text) == (in_user_data and control == "slurm"), rel
        assert (TOKEN in text) == (in_user_data and control == "kubernetes"), rel


@pytest.mark.system
@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=lambda p: p.stem)
def test_example_cloud_init_passes_schema(path: Path, tmp_path: Path) -> None:
    need_tool("cloud-init")
    rendered = render_cluster(_example_plan(path), CANARY)
    user_data = [rel for rel in rendered if rel.startswith("cloud-init/")]
    assert "cloud-init/head.yaml" in user_data
    for rel in user_data:
        target = tmp_path / rel.replace("/", "-")
        target.write_text(rendered[rel])
        result = subprocess.run(["cloud-init", "schema", "-c", str(target)], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, f"{rel}: {result.stdout}{result.stderr}"
        assert "Valid cloud-config" in result.stdout
