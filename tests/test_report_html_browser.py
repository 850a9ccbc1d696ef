"""The HTML report in real headless Chromium (Playwright driving /usr/bin/chromium).

Checks what only a browser can: the page runs with no console or page errors, asks
the network for nothing, draws one bar group per option with the widest bar for the
dearest option, and looks right (a screenshot lands in test-artifacts/report.png).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.plan import PlanResult
from provisioner.report import render_report
from tests.conftest import need_tool
from tests.test_reports import make_result

pytestmark = pytest.mark.system

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def test_html_report_renders_in_chromium(tmp_path: Path, artifacts_dir: Path) -> None:
    need_tool("chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    result: PlanResult = make_result()
    page_path = tmp_path / "report.html"
    page_path.write_text(render_report(result, "html", explain=False), encoding="utf-8")
    page_url = page_path.as_uri()

    errors: list[str] = []
    foreign: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1240, "height": 900})
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            def guard(route: object) -> None:
                request = route.request  # type: ignore[attr-defined]
                if request.url == page_url:
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    foreign.append(request.url)
                    route.abort()  # type: ignore[attr-defined]

            page.route("**/*", guard)
            page.on("request", lambda req: foreign.append(req.url) if req.url != page_url else None)
            page.goto(page_url, wait_until="load")

            groups = page.locator("svg g.bar-group")
            assert groups.count() == len(result.options) == 5
            widths = page.evaluate(
                """() => Array.from(document.querySelectorAll('svg g.bar-group')).map(g => [
                    Number(g.dataset.rank), g.querySelector('g.bar').getBBox().width])"""
            )
            by_rank = {int(rank): float(width) for rank, width in widths}
            assert by_rank[1] > 0
            dearest = max(result.options, key=lambda option: option.cost.total).rank
            assert max(by_rank, key=lambda rank: by_rank[rank]) == dearest == 5
            assert by_rank[1] < by_rank[3] < by_rank[5]
            left_edges = page.evaluate(
                "() => Array.from(document.querySelectorAll('svg text')).map(t => t.getBBox().x)"
            )
            assert min(left_edges) >= 0  # no label runs off the left of the chart
            labels = page.locator("svg text").all_text_contents()
            assert {"compute", "storage", "egress", "interruption", "$2,630.50"} <= set(labels)
            assert page.locator("table").first.locator("tbody tr").count() == 5
            assert page.title() == "Cost comparison: demo-cluster"
            page.screenshot(path=str(artifacts_dir / "report.png"), full_page=True)
        finally:
            browser.close()

    assert errors == []
    assert foreign == []
    assert (artifacts_dir / "report.png").stat().st_size > 10_000


def test_the_ranked_table_fits_a_1280_px_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, artifacts_dir: Path
) -> None:
    """The H200 example's report (15 columns, regions folded, --explain) in a 1280 px window: the
    last two columns were cut off (headers kept on one line pushed the table past the page). Every
    table now fits its box, so nothing scrolls or is cut."""
    need_tool("chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    from provisioner.workflow import plan_report

    monkeypatch.setenv("PROVISIONER_CACHE_DIR", str(tmp_path / "no-cache"))  # the bundled catalog
    example = Path(__file__).resolve().parents[1] / "examples" / "h200-dataset-aws.yaml"
    html = plan_report([example], catalog_path=None, fmt="html", top=10, explain=True, save_plan_to=None)
    page_path = tmp_path / "h200.html"
    page_path.write_text(html, encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_path.as_uri(), wait_until="load")
            page_width = page.evaluate("() => document.documentElement.scrollWidth")
            boxes = page.evaluate(
                """() => Array.from(document.querySelectorAll('table')).map(t => [
                    t.className, t.getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right,
                    t.querySelectorAll('thead th').length])"""
            )
            page.screenshot(path=str(artifacts_dir / "report-1280.png"), full_page=True)
        finally:
            browser.close()
    assert page_width <= 1280, page_width
    ranked = boxes[0]
    assert ranked[3] == 15, boxes  # every column of the ranked table is drawn
    for name, right, box_right, _ in boxes:
        assert right <= box_right + 0.5, (name, right, box_right)  # within its box: nothing cut, no scroll
