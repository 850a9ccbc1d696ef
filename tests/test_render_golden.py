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

import base64
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from provisioner.catalog import load_bundled_catalog
from provisioner.cli import main
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan
from provisioner.providers.registry import capabilities
from provisioner.render import RenderedCluster, render_cluster
from provisioner.secrets import SPEC_SECRETS_NAME, load_secrets
from tests.conftest import EXAMPLES, assert_golden_tree, need_tool
from tests.test_render_cloudinit import MUNGE, TOKEN, VARIANTS, readable
from tests.test_render_slurm import CANARY

GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_PATHS = sorted(EXAMPLES.glob("*.yaml"))


def _example_plan(path: Path) -> Plan:
    return resolve_plan(load_spec(path), load_bundled_catalog(), capabilities()).to_plan()


def _cases() -> list[tuple[str, str]]:
    cases = [(path.stem, "example") for path in EXAMPLE_PATHS]
    return cases + [(f"variant-{name}", "variant") for name in sorted(VARIANTS)]


def _render(case: str, kind: str) -> RenderedCluster:
    if kind == "example":
        return render_cluster(_example_plan(EXAMPLES / f"{case}.yaml"), CANARY)
    name = case.removeprefix("variant-")
    topology = {f"llm-pretrain-{i}": ["spine0", f"leaf{i // 2}"] for i in range(3)}
    return render_cluster(
        VARIANTS[name],
        CANARY,
        slurmdbd=name.endswith("-dbd"),
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
def test_canary_secrets_only_in_the_ssh_pass(path: Path) -> None:
    """The munge key and the k3s token are in the SSH pass's scripts only: never in user data or the
    entrypoint script (what a provider stores and serves back), nor anywhere else."""
    plan = _example_plan(path)
    rendered = render_cluster(plan, CANARY)
    control = plan.spec.control_plane.value
    assert MUNGE not in plan.dumps() and TOKEN not in plan.dumps()
    assert any(rel.startswith("ssh/") for rel in rendered) and any(rel.startswith("cloud-init/") for rel in rendered)
    for rel, text in rendered.items():
        text = readable(text)
        over_ssh = rel.startswith("ssh/")
        assert (MUNGE in text) == (over_ssh and control == "slurm"), rel
        assert (TOKEN in text) == (over_ssh and control == "kubernetes"), rel
        assert rendered.is_secret(rel) == (over_ssh and control != "none"), rel


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
        result = subprocess.run(["cloud-init", "schema", "-c", str(target)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{rel}: {result.stdout}{result.stderr}"
        assert "Valid cloud-config" in result.stdout
        assert "deprecat" not in (result.stdout + result.stderr).lower(), rel


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=lambda p: p.stem)
def test_cli_render_writes_every_file(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``provisioner render SPEC --out DIR``: exactly the files render_cluster gives with the secrets
    the CLI generated and kept in DIR/.cluster-secrets.json (0600); secret files 0600."""
    out = tmp_path / "out"
    assert main(["render", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    kept = out / SPEC_SECRETS_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and str(kept) in captured.err
    secrets = load_secrets(kept)
    assert secrets.munge_key_b64.get_secret_value() != MUNGE and len(secrets.k3s_token.get_secret_value()) == 64
    assert len(base64.b64decode(secrets.munge_key_b64.get_secret_value())) == 1024
    assert secrets.ssh_public_key is not None and secrets.ssh_public_key.startswith("ssh-ed25519 ")
    expected = render_cluster(_example_plan(path), secrets)
    written = {p.relative_to(out).as_posix(): p for p in out.rglob("*") if p.is_file() and p != kept}
    printed = captured.out.split()
    assert sorted(written) == sorted(expected) == sorted(Path(p).relative_to(out).as_posix() for p in printed)
    assert any(rel.startswith("k8s/") or rel.startswith("slurm/") for rel in written) == (
        "control_plane: none" not in path.read_text()
    )
    for rel, file in written.items():
        assert file.read_text() == expected[rel], rel
        mode = stat.S_IMODE(file.stat().st_mode)
        if expected.is_secret(rel):
            assert mode == 0o600, rel
        else:
            assert mode == (0o755 if rel.endswith((".sh", ".sbatch")) else 0o644), rel
    for rel in expected:
        if rel.startswith("cloud-init/"):
            assert yaml.safe_load(expected[rel])["runcmd"]
            if secrets.ssh_public_key:
                assert secrets.ssh_public_key in yaml.safe_load(expected[rel])["ssh_authorized_keys"]


def test_render_twice_keeps_the_cluster_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rendering again (from the spec into the same folder, or from a saved plan) reuses the kept
    secrets, so nodes rendered at different times join one cluster; the plan file holds none."""
    spec = EXAMPLES / "pretrain-h100-slurm.yaml"

    def munge_key(folder: Path) -> str:
        text = (folder / "ssh" / "head.sh").read_text()
        found = re.search(r"^put_file /etc/munge/munge\.key \S+ \S+ <<'PROVISIONER_B64'\n(\S+)\n", text, re.M)
        assert found, "the SSH pass script writes the munge key"
        return found[1]

    out = tmp_path / "out"
    assert main(["render", str(spec), "--out", str(out)]) == 0
    first = munge_key(out)
    assert main(["render", str(spec), "--out", str(out)]) == 0
    assert munge_key(out) == first
    assert main(["render", str(spec), "--out", str(tmp_path / "other")]) == 0
    assert munge_key(tmp_path / "other") != first  # another folder from a spec: another cluster

    plan_file = tmp_path / "plan.json"
    assert main(["plan", str(spec), "--save-plan", str(plan_file)]) == 0
    for folder in ("a", "b"):
        assert main(["render", str(plan_file), "--out", str(tmp_path / folder)]) == 0
    kept = tmp_path / "plan.secrets.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert munge_key(tmp_path / "a") == munge_key(tmp_path / "b") == load_secrets(kept).munge_key_b64.get_secret_value()
    assert not (tmp_path / "a" / SPEC_SECRETS_NAME).exists()
    for secret in load_secrets(kept).values():
        assert secret not in plan_file.read_text() and secret not in capsys.readouterr().out
