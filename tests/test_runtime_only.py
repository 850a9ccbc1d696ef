"""The CLI as a user gets it from a plain ``pip install .``: runtime dependencies only.

A fresh venv (no test extras) gets a non-editable install from a copy of the working tree.
Every usage mistake must exit 2 with one line on stderr and no traceback; an unplannable spec
exits 3; every ``--help`` works; and the install puts exactly one top-level package,
``provisioner``, into site-packages (issue 7, item 8).

Building the wheel reaches the package index (pip's isolated build fetches setuptools); a build or
install that fails is a test failure, never a skip. The runtime dependencies are then resolved by
pip with ``--no-index`` from a wheelhouse repacked from this test environment's own installed
copies: the same files a download would give, without pip weighing each of PyPI's thousands of
numpy/cryptography/pydantic-core files (~30 s of CPU).
"""

from __future__ import annotations

import email
import importlib.metadata as metadata
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import EXAMPLES, ROOT
from tests.test_cli import NO_FIT_SPECS, USAGE_ERRORS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    "test-artifacts",
)


class RuntimeVenv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"

    def run(self, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "provisioner"), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
        )

    def python(self, code: str) -> str:
        done = subprocess.run(
            [str(self.bin / "python"), "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        return done.stdout


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a built wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.message_from_bytes(archive.read(name))
    return message.get_all("Requires-Dist") or []


def installed_closure(requirements: list[str]) -> list[metadata.Distribution]:
    """This environment's installed distributions that ``requirements`` need, transitively (markers
    and extras honoured). A superset is harmless: pip, not this function, picks what gets installed."""
    todo = [Requirement(text) for text in requirements]
    found: dict[str, tuple[metadata.Distribution, frozenset[str]]] = {}
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name, extras = canonicalize_name(requirement.name), frozenset(requirement.extras)
        if name in found and extras <= found[name][1]:
            continue
        dist = metadata.distribution(requirement.name)
        extras |= found.get(name, (dist, frozenset()))[1]
        found[name] = (dist, extras)
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": extra}) for extra in {"", *extras}):
                sub.marker = None
                todo.append(sub)
    return [dist for dist, _ in found.values()]


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """The wheel an installed distribution came from, rebuilt from the files its RECORD lists
    (scripts are left out: pip writes them again from ``entry_points.txt``)."""
    assert dist.files, f"{dist.metadata['Name']} has no RECORD to repack"
    info = next(f.parts[0] for f in dist.files if f.parts[0].endswith(".dist-info"))
    tags = [
        line.split(":", 1)[1].strip().split("-")
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    tag = "-".join(".".join(sorted({t[i] for t in tags})) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    wheel = folder / f"{name}-{dist.version.replace('-', '_')}-{tag}.whl"
    skip = {f"{info}/{n}" for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    names = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for file in dist.files:
            relative = file.as_posix()
            if relative.startswith("..") or "__pycache__" in file.parts or relative in skip:
                continue
            archive.write(Path(str(dist.locate_file(file))), relative)
            names.append(relative)
        archive.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*names, f"{info}/RECORD"]))
    return wheel


def _failed(what: str, done: subprocess.CompletedProcess[str]) -> None:
    pytest.fail(f"{what} failed: {done.stderr.strip().splitlines()[-1:]}")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> RuntimeVenv:
    base = tmp_path_factory.mktemp("runtime")
    source, dist, wheelhouse = base / "src", base / "dist", base / "wheelhouse"
    shutil.copytree(ROOT, source, ignore=COPY_IGNORE)  # a stale build/ must not leak into the wheel
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if build.returncode != 0:
        _failed("pip wheel . (no package index?)", build)
    (wheel,) = dist.glob("*.whl")
    wheelhouse.mkdir()
    for installed in installed_closure(wheel_requirements(wheel)):
        repack(installed, wheelhouse)
    env = RuntimeVenv(base / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env.root)], check=True, timeout=300)
    # --no-compile: the first run of each module compiles it, instead of pip compiling all 100 MB.
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env.bin / "python"),
            "install",
            "--quiet",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if install.returncode != 0:
        _failed("pip install of the wheel and its runtime dependencies", install)
    return env


def test_only_runtime_dependencies_are_installed(venv: RuntimeVenv) -> None:
    names = {
        line.split("==")[0].lower()
        for line in venv.python(
            "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"
        ).split()
    }
    assert "gpu-provisioner" in names
    assert not names & {"pytest", "hypothesis", "playwright", "boto3", "pulumi", "moto", "mypy", "ruff"}


@pytest.mark.parametrize("name", sorted(USAGE_ERRORS))
def test_usage_errors_exit_2_with_one_line(venv: RuntimeVenv, name: str) -> None:
    args, start = USAGE_ERRORS[name]
    done = venv.run(*args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(start), done.stderr
    assert "Traceback" not in done.stderr


def test_unplannable_spec_exits_3_with_the_located_line(venv: RuntimeVenv, tmp_path: Path) -> None:
    text, expected = NO_FIT_SPECS["budget.yaml"]
    (tmp_path / "budget.yaml").write_text(text)
    done = venv.run("plan", "budget.yaml", cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()] and done.stderr.startswith(expected)


def test_every_command_has_help(venv: RuntimeVenv) -> None:
    for path in (
        [],
        ["plan"],
        ["catalog"],
        ["catalog", "refresh"],
        ["render"],
        ["schema"],
        ["validate"],
        ["node"],
        ["node", "check"],
    ):
        done = venv.run(*path, "--help")
        assert (done.returncode, done.stderr) == (0, ""), path
        assert done.stdout.startswith("Usage: "), path


def test_plans_an_example_into_every_format(venv: RuntimeVenv, tmp_path: Path) -> None:
    spec = str(EXAMPLES / "pretrain-h100-slurm.yaml")
    for fmt in ("table", "json", "csv", "markdown", "html"):
        done = venv.run("plan", spec, "-f", fmt, "-o", str(tmp_path / f"report.{fmt}"))
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"report.{fmt}").stat().st_size > 200
    json.loads((tmp_path / "report.json").read_text())


def test_python_m_in_the_checkout_runs_the_fakes(venv: RuntimeVenv) -> None:
    """The README's fake-server command, typed in the repository after ``pip install .``: ``-m``
    imports the checkout's ``provisioner/``, which must still find ``provisioner.providers``."""
    done = subprocess.run(
        [str(venv.bin / "python"), "-m", "provisioner.testing.fakes", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "{aws,fluence,gcp,lambda,runpod,vastai}" in done.stdout


def test_site_packages_gets_one_top_level_package(venv: RuntimeVenv) -> None:
    files = json.loads(
        venv.python(
            "import importlib.metadata as m, json; print(json.dumps([str(f) for f in m.files('gpu-provisioner')]))"
        )
    )
    tops = {Path(name).parts[0] for name in files if not name.startswith("..")}  # ../../../bin/provisioner
    assert {t for t in tops if not t.endswith((".dist-info", ".egg-info"))} == {"provisioner"}, tops
    for sub in ("providers", "stacks", "templates"):
        assert any(name.startswith(f"provisioner/{sub}/") for name in files), sub
    assert "provisioner/templates/report.html.j2" in files
    site = Path(
        venv.python("import provisioner, pathlib; print(pathlib.Path(provisioner.__file__).parents[1])").strip()
    )
    for generic in ("providers", "stacks", "templates"):
        assert not (site / generic).exists(), f"{generic} installed as a top-level package"
