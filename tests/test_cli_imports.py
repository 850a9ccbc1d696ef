"""What a `provisioner plan` process loads, and the start-up shortcuts behind a fast plan (docs/benchmarks.md).

No timings here: each test names modules a plan must not import, or holds a shortcut to the
behaviour it stands in for, so a change that brings back the cost fails a test."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.catalog import load_bundled_catalog, save_columnar
from tests.conftest import EXAMPLES

NOT_ON_THE_PLAN_PATH = (
    "importlib.metadata",  # pydantic's plugin loader; a scan of every installed distribution
    "email",  # importlib.metadata's
    "numpy.ma",  # np.unique(array) alone imports it (to ask whether the array is masked)
    "difflib",  # only to name the nearest regions to an unknown one
    "csv",  # the csv format only
    "rich",  # the table format only
    "jinja2",  # the html format and render
    "httpx",
    "boto3",
    "google.cloud",
    "pulumi",  # providers and stacks
    "provisioner.providers.aws.provider",
    "provisioner.stacks",
)

_PLAN = """
import json, sys
from provisioner import cli
code = cli.main(sys.argv[1:])
import gc, tokenize
print(json.dumps({"code": code, "modules": sorted(sys.modules), "collecting": gc.isenabled(),
                  "tokenizer_set_up": tokenize._compile.cache_info().currsize}), file=sys.stderr)
"""


def _plan_process(*args: str, cache: Path) -> dict[str, object]:
    env = {"PROVISIONER_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PLAN, "plan", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("catalog", ["bundled", "columnar"])
def test_a_plan_imports_none_of_what_it_does_not_use(catalog: str, tmp_path: Path) -> None:
    args = [str(EXAMPLES / "h200-dataset-aws.yaml")]  # a dataset in a provider region: its region is checked
    if catalog == "columnar":
        save_columnar(load_bundled_catalog(), tmp_path / "offers.npz")
        args += ["--catalog", str(tmp_path / "offers.npz")]
    seen = _plan_process(*args, cache=tmp_path / "cache")
    assert seen["code"] == 0
    modules = set(seen["modules"])  # type: ignore[arg-type]
    loaded = sorted(
        m for m in modules for unwanted in NOT_ON_THE_PLAN_PATH if m == unwanted or m.startswith(unwanted + ".")
    )
    assert loaded == []
    assert "provisioner.workflow" in modules  # the probe did see a plan
    assert seen["tokenizer_set_up"] == 0  # no builtin (`list`) as a pydantic default factory
    assert seen["collecting"] is True  # the plan paused the collector and turned it back on


NOT_ON_THE_STATUS_PATH = (
    "numpy",  # pricing arrays: metering bills a node's real run with plain integers (costs.billed_span)
    "jinja2",  # templates: status and down render nothing
    "yaml",  # render.bootstrap's reading of a rendered cloud-config
    "provisioner.cost_terms",
    "provisioner.columns",
)


def test_a_status_imports_neither_the_pricing_arrays_nor_the_templates(tmp_path: Path) -> None:
    """Every `provisioner` child of the suite, and every user's `status`/`down`, pays its imports first
    (docs/benchmarks.md, 2026-11-29): the lifecycle path (realize, teardown, the ledger) must not pull
    in numpy or jinja2 through a module that needs them only to plan or to render."""
    env = {"PROVISIONER_CACHE_DIR": str(tmp_path / "cache"), "PROVISIONER_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-c", _PLAN, "status", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**env, "PATH": "/usr/bin:/bin"},
    )
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    assert seen["code"] == 2  # no record of cluster demo here
    modules = set(seen["modules"])
    assert "provisioner.lifecycle.realize" in modules  # the probe did go down the status path
    assert "provisioner.lifecycle.ledger" in modules
    assert sorted(m for m in modules for u in NOT_ON_THE_STATUS_PATH if m == u or m.startswith(u + ".")) == []


def test_the_plugin_loader_stand_in_answers_as_pydantic_does_with_plugins_disabled() -> None:
    """cli._no_plugin_loader replaces pydantic.plugin._loader when PYDANTIC_DISABLE_PLUGINS disables
    every plugin: pydantic must still look plugins up through that module's get_plugins, and the real
    one must answer "none" under that setting, as the stand-in does."""
    probe = (
        "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'; "
        "from pydantic.plugin import _loader, _schema_validator; import inspect; "
        "print(list(_loader.get_plugins()), 'from ._loader import get_plugins' in "
        "inspect.getsource(_schema_validator.create_schema_validator))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["[]", "True"]
    from provisioner import cli

    assert list(cli._no_plugins()) == []
    assert inspect.signature(cli._no_plugins).parameters == {}


def test_a_user_who_enables_pydantic_plugins_gets_the_real_loader(tmp_path: Path) -> None:
    probe = (
        "import os, sys; os.environ['PYDANTIC_DISABLE_PLUGINS'] = 'some-plugin'; from provisioner import cli; "
        "cli._lean_start(); import pydantic.plugin._loader as loader; print(loader.__file__ is not None)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"


def test_anything_else_asked_of_the_stand_in_comes_from_the_real_loader() -> None:
    """A pydantic release that imports more than get_plugins from its loader gets the real module's names."""
    probe = (
        "import os, sys; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'; from provisioner import cli; "
        "cli._lean_start(); from pydantic.plugin._loader import get_plugins; "
        "print(get_plugins is cli._no_plugins); "
        "from pydantic.plugin._loader import entry_points; "
        "print(entry_points.__module__, 'importlib.metadata' in sys.modules, "
        "sys.modules['pydantic.plugin._loader'].__file__ is not None)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "importlib.metadata", "True", "True"]
