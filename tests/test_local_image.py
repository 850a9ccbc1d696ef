"""The node image of ``up --local`` is built once per cache, however many ask at once: a second
caller (another terminal's ``up --local``, another xdist worker's boot tests) waits for the build
under way and takes its image instead of running a second mmdebstrap of minutes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import provisioner.local.image as image


def test_two_builds_asked_at_once_run_mmdebstrap_once_and_share_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    building = threading.Event()
    finish = threading.Event()
    built: list[Path] = []

    def slow_build(root: Path, cache: Path, tell: object) -> Path:
        built.append(root)
        building.set()
        assert finish.wait(30)
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "os-release").write_text("ID=debian\n")
        return root

    monkeypatch.setattr(image, "_build", slow_build)
    cache = tmp_path / "images"
    results: dict[str, Path] = {}
    said: list[str] = []
    first = threading.Thread(target=lambda: results.setdefault("first", image.build_image(cache)))
    first.start()
    assert building.wait(30)
    second = threading.Thread(target=lambda: results.setdefault("second", image.build_image(cache, say=said.append)))
    second.start()
    second.join(0.5)
    waited = second.is_alive()  # blocked on the first build's lock, not building a second image
    finish.set()
    first.join(30)
    second.join(30)
    assert waited and len(built) == 1
    assert results["first"] == results["second"] == built[0]
    assert said == [f"node image: {built[0]} (built meanwhile by another run)"]
