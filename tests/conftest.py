"""Suite-wide safety and helpers.

Cloud SDKs must never look for credentials on the network: dummy AWS keys with the
metadata service disabled, and Google's metadata host pointed at loopback. Tests that
need a system tool or ../shared skip with a reason, unless REQUIRE_SYSTEM_TOOLS=1 (CI),
under which they fail instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    # An AWS client built without an endpoint (gc or costs --live asking every provider with
    # credentials) goes to a closed port here, never to amazonaws.com: boto3 reads this variable.
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "NO_GCE_CHECK": "True",
    "GCE_METADATA_HOST": "127.0.0.1",
    "GCE_METADATA_IP": "127.0.0.1",
    "PULUMI_SKIP_UPDATE_CHECK": "true",
}
os.environ.update(_SAFE_ENV)


def _provider_key_variables() -> tuple[str, ...]:
    """Every provider's own API key variables (its FACTS.key_vars): a developer's real keys never reach a test."""
    from provisioner.providers.registry import facts

    return tuple(var for found in facts().values() for var in found.key_vars)


for _var in (
    "AWS_PROFILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "LAMBDA_API_KEY",
    "RUNPOD_API_KEY",
    "VAST_API_KEY",
    "FLUENCE_API_KEY",
    *_provider_key_variables(),
):
    os.environ.pop(_var, None)


def require_system() -> bool:
    return os.environ.get("REQUIRE_SYSTEM_TOOLS") == "1"


def skip_or_fail(message: str) -> None:
    """A system tool or ../shared is absent: skip with the reason, or fail under REQUIRE_SYSTEM_TOOLS=1."""
    if require_system():
        pytest.fail(message)
    pytest.skip(message)


def need_tool(*names: str) -> None:
    """Skip (or fail under REQUIRE_SYSTEM_TOOLS=1) unless every named executable exists."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        skip_or_fail(f"needs system tool(s) {', '.join(missing)} (installed by .ci/run)")


def need_shared(*parts: str) -> Path:
    """Path inside ../shared, skipping (or failing in CI) when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        skip_or_fail(f"needs {path} (the shared reference folder beside the checkout)")
    return path


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # A refreshed catalog cache on the developer's machine must not change test results, and no
    # test writes cluster records or locks into the developer's state dir or reads another test's
    # (tests run side by side under `-n`); a test that needs its own state dir sets it again.
    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    # xdist's workers run with COLUMNS=80; the tables are checked at the width a run without a
    # terminal gets (no COLUMNS: provisioner.workflow's fallback), with or without `-n`.
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True)
def _unsealed() -> Iterator[None]:
    # A command acting on a local dry run seals the process to its lab (providers/seal.py) and the seal
    # outlives the command (the CLI lifts it at the next run's start): a test that ran one must not
    # leave the next test in its worker unable to build any adapter.
    yield
    from provisioner.providers.seal import unseal

    unseal()


# The README's command runs the suite on pytest-xdist workers (`-n auto`). Tests that share
# something of this machine's form a group that runs on one worker, one test after another; every
# other test is scheduled on its own. Groups go by path, because the controller that schedules sees
# node ids only (xdist's own `xdist_group` marks are lost on pytest 9.2: pytest-xdist issue 1386);
# pytest_collection_modifyitems below refuses a test that needs a group and sits outside it.
SERIAL_GROUPS = {
    # Root, network namespaces, systemd-nspawn nodes (tests/boot/conftest.py): three groups, each
    # serial on a worker of its own, run at once. Every test boots its nodes in a namespace of its
    # own (named by its worker's pid), as two users' `up --local` would; the node image is built once
    # for all three. Balanced by their durations (docs/benchmarks.md); every test of tests/boot must
    # be in one (pytest_collection_modifyitems below refuses one that is not).
    "boot-move-heal": (
        "tests/boot/test_boot_local_move.py",
        "tests/boot/test_boot_heal.py",
        "tests/boot/test_boot_cli.py::test_a_killed_up_is_collected_by_gc_cluster",
    ),
    "boot-pulumi": (
        "tests/boot/test_boot_pulumi_local.py",
        "tests/boot/test_boot_pulumi_path.py",
        "tests/boot/test_boot_cli.py::test_a_fluence_vm_bootstrapped_over_ssh_only_runs_srun",
        "tests/boot/test_boot_cli.py::test_the_installed_cli_brings_a_booted_cluster_up_runs_srun_and_leaves_nothing[runpod]",
    ),
    "boot-local-cli": (
        "tests/boot/test_boot_local.py",  # one group: its lifetime cluster spans its first and last test
        "tests/boot/test_boot_cli.py::test_the_installed_cli_brings_a_booted_cluster_up_runs_srun_and_leaves_nothing[lambda]",
        "tests/boot/test_boot_cli.py::test_burst_runs_the_job_on_both_nodes_and_leaves_nothing",
    ),
    # a real sshd on 127.0.0.1 logs in to this machine's root account (tests/test_bootstrap_ssh.py's
    # `rig`), in whose home each bootstrap run copies provisioner.realize.bootstrap_ssh.REMOTE_SCRIPT
    "root-sshd": (
        "tests/test_bootstrap_ssh.py",
        "tests/test_hostkeys.py",
        "tests/test_lifecycle_ssh.py",
        "tests/test_lifecycle_endpoint.py",
    ),
}


BOOT_GROUPS = tuple(name for name in SERIAL_GROUPS if name.startswith("boot"))


def serial_group(nodeid: str) -> str | None:
    """The SERIAL_GROUPS name of the test ``nodeid``, or None."""
    return next((name for name, prefixes in SERIAL_GROUPS.items() if nodeid.startswith(prefixes)), None)


# Modules with a module-scoped fixture run on one worker, so the fixture is made once per run, not
# once on each worker that gets one of the module's tests: a fresh venv with the package installed
# from a built wheel, a real slurmctld, moto and GCS servers, torch's burn-in, a module's fakes.
# pytest_collection_modifyitems below refuses a module with such a fixture that is not listed here.
ONE_WORKER_MODULES = (
    "tests/providers/test_aws.py",
    "tests/test_catalog_data.py",
    "tests/test_checkpoint_sync.py",
    "tests/test_fuzz_providers.py",
    "tests/test_runtime_only.py",
    "tests/test_slurm_real.py",
    "tests/test_stack_topology.py",
    "tests/test_store_credentials_flow.py",
    "tests/test_store_credentials_rclone.py",
    "tests/test_validation_bench.py",
    "tests/test_validation_burnin.py",
    "tests/test_validation_slurm.py",
)


def schedule_scope(nodeid: str) -> str:
    """What runs on one worker, in order: a SERIAL_GROUPS group, a module of ONE_WORKER_MODULES, or the test alone."""
    module = nodeid.split("::", 1)[0]
    return serial_group(nodeid) or (module if module in ONE_WORKER_MODULES else nodeid)


# Under ``-n`` the long tests go out first (in this order; the rest after them, in file order), so
# that none starts last on one worker while the other has nothing left to do. Measured under
# `--durations` (docs/benchmarks.md, "The suite on two cores"); a prefix of a node id.
LONG_FIRST = (
    "tests/test_style.py::test_mypy_strict_is_clean_on_every_package",
    "tests/test_pulumi_real",
    "tests/test_engine_events.py::test_both_engines_emit_the_same_events",
    "tests/test_hostile_proxy.py::test_every_command_ends_in_one_line_under_every_hostile_answer",
    "tests/test_killed_up.py",
    "tests/test_fuzz_local.py::test_loads_bounded_returns_a_bounded_value_or_one_refusal",
    "tests/test_optimizer.py::test_the_engine_agrees_with_the_exact_oracle",
    "tests/test_stack_cluster.py::test_every_example_on_every_provider",
    "tests/test_engine_matrix.py::test_both_engines_send_the_same_requests",
    "tests/test_printer.py::test_every_local_command_and_format_escapes_file_supplied_strings",
    "tests/test_spec_loader.py",
    "tests/test_lifecycle_pulumi_blocks.py",
)


def long_first(nodeid: str) -> int:
    """The sort key of ``nodeid`` under ``-n``: its LONG_FIRST place, or after all of them."""
    return next((n for n, prefix in enumerate(LONG_FIRST) if nodeid.startswith(prefix)), len(LONG_FIRST))


def _has_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(found[-1].scope == "module" for found in defs if found)


PLAIN_ASSERT_PACKAGES = ("hypothesis",)
"""Plugin distributions whose own modules pytest need not rewrite. pytest rewrites the asserts of every
module of a distribution that registers a plugin: for hypothesis, its ~190 modules when a test module
first imports it, ~2.4 CPU-s in every xdist worker. Their asserts are the library's internal checks,
which no test here reads; the asserts of tests, conftests and fixtures stay rewritten."""


def pytest_configure(config: pytest.Config) -> None:
    must_rewrite = getattr(getattr(config.pluginmanager, "rewrite_hook", None), "_must_rewrite", None)
    if isinstance(must_rewrite, set):  # pytest's own name; elsewhere (--assert=plain) nothing to undo
        must_rewrite.difference_update(PLAIN_ASSERT_PACKAGES)


@pytest.hookimpl(trylast=True)  # after tests/boot/conftest.py has ordered the boot group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.test_bootstrap_ssh import rig as root_sshd  # the fixture; modules that use it import it

    if hasattr(config, "workerinput"):  # an xdist worker: the order it reports is the order tests go out
        items.sort(key=lambda item: long_first(item.nodeid))  # stable: the boot group keeps its order

    for item in items:
        sshd = "rig" in getattr(item, "fixturenames", ()) and getattr(getattr(item, "module", None), "rig", None)
        group = serial_group(item.nodeid)
        if item.get_closest_marker("boot") or item.nodeid.startswith("tests/boot/"):
            if group not in BOOT_GROUPS:
                raise pytest.UsageError(
                    f"{item.nodeid} must be in one of conftest.SERIAL_GROUPS {', '.join(BOOT_GROUPS)} "
                    "(a boot test runs on a boot group's worker)"
                )
        elif sshd is root_sshd and group != "root-sshd":
            raise pytest.UsageError(
                f"{item.nodeid} must be in conftest.SERIAL_GROUPS['root-sshd'] "
                "(it shares this machine with the group's other tests)"
            )
        module = item.nodeid.split("::", 1)[0]
        if module not in ONE_WORKER_MODULES and serial_group(item.nodeid) is None and _has_module_fixture(item):
            raise pytest.UsageError(
                f"{module} has a module-scoped fixture: list it in conftest.ONE_WORKER_MODULES "
                "(made once per run, on one worker)"
            )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per usable CPU, plus one per boot group. Those groups mostly wait, on
    node boots, a job's steps and lifetime timers (the boot tests alone: 139 s of CPU in 537 s), so
    with only a worker per CPU they held CPUs half idle while the suite, bound by CPU, queued on the
    rest; and one boot group was the run's longest chain (~20 min: docs/benchmarks.md)."""
    return len(os.sched_getaffinity(0)) + len(BOOT_GROUPS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under ``-n`` (``--dist load``, the default, or ``loadgroup``): xdist's scope scheduler with a
    scope per SERIAL_GROUPS group, one per module of ONE_WORKER_MODULES and one per other test
    (``schedule_scope``). The largest scopes go out first, so the boot group starts at once on a
    worker of its own."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SerialGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return schedule_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # The boot groups go out before anything else, one to each of the first workers (the
            # first assignment gives each worker one scope, in queue order; a worker holding more
            # than two pending tests gets no second one until it is nearly done).
            for scope in reversed(BOOT_GROUPS):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return SerialGroups(config, log)


UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"
"""Set UPDATE_GOLDEN=1 to rewrite golden files from the current output; review the diff."""


def assert_golden_file(path: Path, text: str) -> None:
    """``text`` must equal the golden file byte for byte (rewritten first under UPDATE_GOLDEN=1)."""
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
    assert path.is_file(), f"no golden file {path}; run with UPDATE_GOLDEN=1 and review it"
    assert text.encode("utf-8") == path.read_bytes(), f"{path} differs (UPDATE_GOLDEN=1 to refresh, then review)"


def assert_golden_tree(folder: Path, files: dict[str, str], *, pattern: str = "*") -> None:
    """The files under ``folder`` matching ``pattern`` are exactly ``files`` (relative path -> text)."""
    if UPDATE_GOLDEN:
        for stale in folder.rglob(pattern):
            if stale.is_file() and stale.relative_to(folder).as_posix() not in files:
                stale.unlink()
    for relative, text in files.items():
        assert_golden_file(folder / relative, text)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob(pattern) if p.is_file()}
    assert on_disk == set(files), f"stale golden files under {folder}: {sorted(on_disk - set(files))}"


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``pulumi`` CLI on PATH that logs its arguments (the Automation API drives it);
    its script is tests/test_lifecycle_cli.py's FAKE_PULUMI. Returns the log's path."""
    import sys

    from tests.test_lifecycle_cli import FAKE_PULUMI

    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "pulumi"
    script.write_text(FAKE_PULUMI.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    log = tmp_path / "pulumi.log"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PULUMI_LOG", str(log))
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    return log
