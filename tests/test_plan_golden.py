"""Golden plan files: what each example freezes into plan.json on the bundled catalog.

A change to the catalog, the optimizer or the Plan model shows up here as a reviewable diff
(UPDATE_GOLDEN=1 to refresh). Plans must also round-trip and hold no secret. Planned with this
installation's adapter capabilities, as the CLI plans.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.catalog import load_bundled_catalog
from provisioner.errors import PlanError
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan, load_plan, save_plan
from provisioner.providers.registry import capabilities
from tests.conftest import EXAMPLES, assert_golden_file

GOLDEN = Path(__file__).parent / "golden" / "plans"
EXAMPLE_PATHS = sorted(EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=lambda p: p.stem)
def test_plan_matches_golden_and_round_trips(path: Path, tmp_path: Path) -> None:
    plan = resolve_plan(load_spec(path), load_bundled_catalog(), capabilities()).to_plan()
    assert_golden_file(GOLDEN / f"{path.stem}.json", plan.dumps())
    saved = tmp_path / "plan.json"
    save_plan(plan, saved)
    assert load_plan(saved) == plan
    doc = json.loads(saved.read_text())
    assert doc["kind"] == "provisioner.plan" and doc["version"] == 2
    assert doc["option"]["rank"] == 1


def test_plan_files_reject_tampering(tmp_path: Path) -> None:
    plan = resolve_plan(load_spec(EXAMPLE_PATHS[0]), load_bundled_catalog(), capabilities()).to_plan()
    doc = json.loads(plan.dumps())
    doc["version"] = 99
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match=r"plan.json: not a valid plan file: version"):
        load_plan(bad)
    assert isinstance(plan, Plan)
