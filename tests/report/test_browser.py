"""The report and the live UI in headless Chromium: what a person sees and clicks.

Run with `-rP` to see the measured render times.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Error, Page, Route, expect

from tests.faults.backfill_kit import listed_backfills, running
from tests.faults.ledger import wait_until
from tests.kit import FORCED, tidegate
from tests.report import large
from tests.report.kit import (
    AS_OF,
    HOSTILE,
    MODEL,
    TAINT_REASON,
    mixed_project,
    ok,
    serving,
    staged_project,
)

pytestmark = pytest.mark.browser
UPDATED_UTC = re.compile(r"updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
SCREENSHOT = "screenshot-report.png"
STATE_COLOURS = {"2da44e", "d4a72c", "cf222e"}  # published, stale, failed (report.css)

# True once each model's legend in the page shows the counts `status --json` gave (the page
# draws a tainted partition as tainted; status counts it as published too).
COUNTS_MATCH = """expected => Object.entries(expected).every(([name, want]) => {
  const card = document.querySelector(`article.model[data-model="${name}"]`);
  if (!card) return false;
  const got = {};
  card.querySelectorAll("li[data-state]").forEach(li => got[li.dataset.state] = +li.dataset.count);
  const known = ["published", "stale", "tainted", "failed", "skipped", "running"]
    .reduce((n, s) => n + got[s], 0);
  return got.published + got.tainted === want.published && got.stale === want.stale
    && got.failed === want.failed && got.running === want.running && known === want.known;
})"""
PAGE_COUNTS = """() => Object.fromEntries(
  [...document.querySelectorAll("article.model")].map(card => [
    card.dataset.model,
    Object.fromEntries([...card.querySelectorAll("li[data-state]")]
      .map(li => [li.dataset.state, +li.dataset.count])),
  ]))"""
DISTINCT_COLOURS = """async b64 => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], {type: "image/png"}));
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const g = canvas.getContext("2d");
  g.drawImage(bitmap, 0, 0);
  const data = g.getImageData(0, 0, bitmap.width, bitmap.height).data;
  const seen = new Set();
  for (let i = 0; i < data.length; i += 4) {
    seen.add(((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]).toString(16).padStart(6, "0"));
  }
  return [...seen];
}"""


def open_page(browser: BrowserContext, url: str) -> Page:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    assert errors == [], errors
    return page


def assert_counts_match_status(page: Page, project: Path) -> None:
    status = ok("status", "--as-of", AS_OF, "--project", project)
    expected = {m["model"]: m["partitions"] for m in status["models"]}
    try:
        page.wait_for_function(COUNTS_MATCH, arg=expected, timeout=20_000)
    except Error:
        assert page.evaluate(PAGE_COUNTS) == expected  # shows the difference


def distinct_colours(browser: BrowserContext, png: bytes) -> set[str]:
    """The colours of a screenshot's pixels, counted by the browser on a blank page."""
    page = browser.new_page()
    try:
        found: list[str] = page.evaluate(DISTINCT_COLOURS, base64.b64encode(png).decode())
        return set(found)
    finally:
        page.close()


def click_cell(page: Page, model: str, partition: str) -> Any:
    """Hover, then click, the heatmap cell of `partition`; the details panel it opens."""
    page.locator(f"canvas[data-model='{model}']").scroll_into_view_if_needed()
    box = page.evaluate("([m, p]) => window.tidegate.cellBox(m, p)", [model, partition])
    assert box is not None, f"no cell {model} {partition}"
    page.mouse.move(box["x"], box["y"])
    expect(page.locator("#tip")).to_contain_text(f"{model} {partition}:")
    page.mouse.click(box["x"], box["y"])
    detail = page.locator(f"#detail-body[data-partition='{partition}']")
    expect(detail).to_be_visible()
    return detail


def test_the_live_ui_follows_a_backfill_in_another_process(
    browser: BrowserContext, tmp_path: Path
) -> None:
    project = staged_project(tmp_path / "proj")
    p = ("--project", project)
    with serving(project, "--as-of", AS_OF) as ui:
        page = open_page(browser, ui.url)
        first_render = page.evaluate("window.tidegate.renderMs")
        assert_counts_match_status(page, project)
        before = page.evaluate("window.tidegate.counts('daily_revenue')")["published"]
        start = ("backfill", MODEL, "--partitions", "2025-01-01..2025-01-31", "--batch-size", "2")
        # three batches start at once; the rate holds the fourth back for a minute
        with running(*start, "--rate", "3/min", "--json", *p) as backfill:
            page.wait_for_function(
                "n => window.tidegate.counts('daily_revenue').published === n",
                arg=before + 6,
                timeout=60_000,
            )
            [run] = listed_backfills(project)
            assert run["status"] == "running" and backfill.alive()
            expect(page.locator("#run-table")).to_contain_text(run["run_id"])
            # one clock on the page: UTC, to the second, like the header
            expect(page.locator("#meta")).to_contain_text(UPDATED_UTC)
            assert_counts_match_status(page, project)

            detail = click_cell(page, MODEL, "2025-01-03")
            shown = ok("show", "partition", MODEL, "2025-01-03", *p)["published"]
            expect(detail).to_have_attribute("data-loaded", "1")
            for text in (shown["checksum"], shown["run_id"], f"v{shown['version']['seq']} ("):
                expect(detail).to_contain_text(text)
            expect(detail).to_contain_text("not_feb_10 — passed")

            png = page.screenshot(full_page=True)
            (tmp_path / "live-ui.png").write_bytes(png)
            colours = distinct_colours(browser, png)
            assert len(colours) > 20 and colours >= STATE_COLOURS, sorted(colours)[:40]

            assert page.evaluate("window.__pwned") is None
            expect(page.locator("#event-table")).to_contain_text(HOSTILE)

            stop = tidegate("backfill", "stop", run["run_id"], *p)
            assert stop.exit_code == 0, stop.stderr
            assert backfill.finish(timeout=60).exit_code == 5
        expect(page.locator("#run-table")).to_contain_text("stopped", timeout=20_000)
        assert_counts_match_status(page, project)
        page.close()
    print(f"live UI: first render {first_render:.0f} ms")


def test_the_report_file_needs_no_network_and_shows_user_text_as_text(
    browser: BrowserContext, tmp_path: Path
) -> None:
    project = mixed_project(tmp_path / "proj")
    out = tmp_path / "report.html"
    document = ok("report", "--out", out, "--as-of", AS_OF, "--project", project)
    requested: list[str] = []
    page = browser.new_page()
    page.on("request", lambda request: requested.append(request.url))

    def only_files(route: Route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", only_files)
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    assert requested == [out.as_uri()]
    assert page.evaluate(PAGE_COUNTS) == {m["model"]: m["counts"] for m in document["models"]}

    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("main b").count() == 0
    expect(page.locator("#event-table")).to_contain_text(HOSTILE)
    expect(page.locator("#taint-table")).to_contain_text(TAINT_REASON)
    marker = page.locator("path[data-stop-loss]")
    expect(marker).to_have_count(1)
    assert (marker.get_attribute("data-stop-loss") or "").startswith("check_failure at 2025-02-10")

    tainted = click_cell(page, MODEL, "2025-02-03")
    expect(tainted).to_have_attribute("data-state", "tainted")
    expect(tainted).to_contain_text(TAINT_REASON)
    failed = click_cell(page, MODEL, "2025-02-10")
    expect(failed).to_have_attribute("data-state", "failed")
    expect(failed).to_contain_text("not_feb_10 — FAILED (blocking): 1 row(s) violate")
    published = click_cell(page, MODEL, "2025-02-05")
    shown = ok("show", "partition", MODEL, "2025-02-05", "--project", project)["published"]
    for text in (shown["checksum"], shown["run_id"], f"v{shown['version']['seq']} ("):
        expect(published).to_contain_text(text)
    assert requested == [out.as_uri()]  # clicking fetched nothing either
    page.close()


def test_110_thousand_partitions_render_in_chromium(
    browser: BrowserContext, tmp_path: Path
) -> None:
    project = large.large_project(tmp_path / "large")
    out = tmp_path / "large.html"
    document = ok("report", "--out", out, "--as-of", large.AS_OF, "--project", project)
    cells = sum(m["partitions"] for m in document["models"])
    assert cells == large.MODELS * large.DAYS
    page = open_page(browser, out.as_uri())
    timing = page.evaluate(
        "({script: window.tidegate.renderMs, total: window.tidegate.sinceNavigationMs,"
        " cells: window.tidegate.cells()})"
    )
    assert timing["cells"] == cells
    # the file's counts are what the page draws
    assert page.evaluate(PAGE_COUNTS) == {m["model"]: m["counts"] for m in document["models"]}
    page.close()
    print(
        f"{cells:,} partitions of {large.MODELS} models: report written in "
        f"{document['seconds']:.2f} s ({document['bytes'] / 1e6:.1f} MB); page ready "
        f"{timing['total']:.0f} ms after navigation start (script {timing['script']:.0f} ms)"
    )
    assert timing["total"] < 10_000  # the goal is 2 s; measured and printed, not a flaky gate


def test_the_report_shows_queued_cells_health_lines_and_resolved_check_failures(
    browser: BrowserContext, tmp_path: Path
) -> None:
    project = staged_project(tmp_path / "proj")
    p = ("--project", project)
    # v3 keeps the check but no longer fails on 2025-02-10: publishing that day fixes it
    edit_check(project, "DATE '2025-02-10'", "DATE '1999-01-01'")
    ok("run", MODEL, "--partition", "2025-02-10", *p)
    start = ("backfill", MODEL, "--partitions", "2025-01-01..2025-01-31", "--batch-size", "2")
    before = published(project)
    # three batches start at once; the rate holds the fourth back for a minute
    with running(*start, "--rate", "3/min", "--json", *p) as backfill:
        run = wait_for_published(project, before + 6)
        out = tmp_path / "report.html"
        ok("report", "--out", out, "--as-of", AS_OF, *p)
        assert backfill.alive()
        page = open_page(browser, out.as_uri())
        health = page.locator(f".health[data-model='{MODEL}'] .health-line")
        expect(health).to_contain_text(re.compile(r"· 25 queued ·"))
        expect(health).to_contain_text(re.compile(r"^daily_revenue: \d+ published · "))
        expect(page.locator(f".health[data-model='{MODEL}'] .health-bar i.s-queued")).to_have_count(
            1
        )
        queued = click_cell(page, MODEL, "2025-01-20")
        expect(queued).to_have_attribute("data-state", "queued")
        resolved = page.locator("#check-table tr.resolved")
        expect(resolved).to_have_count(1)
        expect(resolved).to_contain_text(re.compile(r"resolved by run run-\S+ at \S+ \S+ UTC"))
        expect(page.locator("#meta")).to_contain_text(re.compile(r"as of 2025-04-15 00:00:00 UTC"))
        times = page.locator("#run-table td").all_inner_texts()
        assert not [t for t in times if re.search(r"\d\.\d{3,}|\+00:00", t)], times
        page.locator("#detail-close").click()
        png = page.screenshot(full_page=True)
        (tmp_path / SCREENSHOT).write_bytes(png)
        page.close()
        stop = tidegate("backfill", "stop", run["run_id"], *p)
        assert stop.exit_code == 0, stop.stderr
        assert backfill.finish(timeout=60).exit_code == 5


def edit_check(project: Path, old: str, new: str) -> None:
    """Change daily_revenue's check expression; build and (forcibly) deploy the new version."""
    path = project / "models" / f"{MODEL}.sql"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    ok("build", "--project", project)
    ok("deploy", MODEL, *FORCED, "--project", project)


def published(project: Path) -> int:
    status = ok("status", "--as-of", AS_OF, "--project", project)
    return int(status["models"][0]["partitions"]["published"])


def wait_for_published(project: Path, goal: int) -> dict[str, Any]:
    """The running backfill once `goal` partitions of daily_revenue are published."""
    wait_until(f"{goal} published", lambda: published(project) >= goal or None, 60)
    [run] = [r for r in listed_backfills(project) if r["status"] == "running"]
    return run
