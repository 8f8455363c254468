"""The board in a real headless browser: Debian's chromium driven by Selenium.

Nothing is downloaded: the browser and its driver are the system's (/usr/bin/chromium,
/usr/bin/chromedriver; `apt-get install chromium chromium-driver`) and Selenium's own
driver manager is switched off. Skipped when either is absent or Selenium is not
installed (`pip install -e '.[board-test]'`). Screenshots of the leaderboard and a
workload page are written to the test's temporary folder, and also to
$CCLQ_SCREENSHOT_DIR when it is set, so a person can look at them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.browser import CHROMEDRIVER, CHROMIUM, FLAGS, console_errors

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the board-test extra)")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(f"no system chromium ({CHROMIUM}) and chromedriver ({CHROMEDRIVER})", allow_module_level=True)

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


@pytest.fixture(scope="module")
def browser():
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch anything
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="cclq-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot: the window grows to the page's height first."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1600, min(max(height, 600), 8000))
    path = tmp_path / name
    driver.save_screenshot(str(path))
    if os.environ.get("CCLQ_SCREENSHOT_DIR"):
        Path(os.environ["CCLQ_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["CCLQ_SCREENSHOT_DIR"]) / name)
    driver.set_window_size(1600, 1000)
    return path


def row_order(driver) -> list[str]:
    return [r.get_attribute("data-trace") for r in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")]


def visible_rows(driver) -> list[str]:
    return [
        r.get_attribute("data-trace")
        for r in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
        if r.is_displayed()
    ]


def test_leaderboard_sorts_and_filters(browser, board_site, tmp_path: Path):
    _, site, _ = board_site
    browser.get((site / "index.html").as_uri())
    before = row_order(browser)
    assert sorted(before) == ["run_a", "run_b", "run_c", "synthetic_dp4", "synthetic_dp8", "tpu_xla"]
    values = {
        r["trace"]: r["metrics"]["avg_step_time"]
        for r in json.loads((site / "benchmark_data.json").read_text())["rows"]
    }
    header = browser.find_element(By.CSS_SELECTOR, 'th[data-metric="avg_step_time"] button')
    header.click()  # lower is better: fastest first
    fastest_first = sorted((t for t in values if values[t] is not None), key=lambda t: (values[t], before.index(t)))
    after = row_order(browser)
    assert after == fastest_first + [t for t in before if values[t] is None]
    assert after != before
    assert (
        browser.find_element(By.CSS_SELECTOR, 'th[data-metric="avg_step_time"]').get_attribute("aria-sort")
        == "ascending"
    )
    header.click()  # and back: slowest first, n/a still last
    slowest_first = row_order(browser)
    assert [values[t] for t in slowest_first] == sorted((values[t] for t in fastest_first), reverse=True) + [None] * (
        len(before) - len(fastest_first)
    )
    screenshot(browser, tmp_path, "leaderboard.png")

    box = browser.find_element(By.ID, "filter")
    box.send_keys("synthetic-mlp")  # the generated DDP runs' model family
    assert sorted(visible_rows(browser)) == ["synthetic_dp4", "synthetic_dp8"]
    assert browser.find_element(By.ID, "count").text == "2 of 6 workloads"
    box.clear()
    box.send_keys("tiny-xla inference")  # every word must match: the TPU card
    assert visible_rows(browser) == ["tpu_xla"]
    box.clear()
    box.send_keys(" ")  # an input event with no words shows everything again
    assert len(visible_rows(browser)) == 6
    # a category's checkbox hides and shows its metric columns
    memory_header = browser.find_element(By.CSS_SELECTOR, 'th[data-metric="average_memory_bandwidth"]')
    toggle = browser.find_element(By.CSS_SELECTOR, '#groups input[data-group="memory"]')
    toggle.click()
    assert not memory_header.is_displayed()
    assert all(not td.is_displayed() for td in browser.find_elements(By.CSS_SELECTOR, "#leaderboard td.g-memory"))
    toggle.click()
    assert memory_header.is_displayed()
    assert console_errors(browser) == []


def test_workload_page_shows_its_plots(browser, board_site, tmp_path: Path):
    _, site, _ = board_site
    browser.get((site / "w" / "synthetic_dp8.html").as_uri())
    figures = browser.find_elements(By.CSS_SELECTOR, "figure.plot")
    # the seven of cclq's metrics; HTA's queue length, memory bandwidth, launch delays, critical path
    assert len(figures) == 11
    for fig in figures:
        svg = fig.find_element(By.TAG_NAME, "svg")
        size = svg.size
        assert size["width"] > 300 and size["height"] > 150, fig.get_attribute("id")
        marks = svg.find_elements(By.CSS_SELECTOR, "rect, circle, path")
        assert marks, fig.get_attribute("id")
    # the straggler is rank-coloured and the per-rank bars show one bar per rank
    bars = browser.find_elements(By.CSS_SELECTOR, "#fig-rank_step_time svg rect")
    assert len(bars) == 8
    screenshot(browser, tmp_path, "workload_synthetic_dp8.png")
    browser.get((site / "w" / "run_c.html").as_uri())  # one rank: some plots say why they are missing
    missing = browser.find_elements(By.CSS_SELECTOR, 'figure.plot[data-available="false"] .unavailable')
    assert missing and all(m.text.startswith("n/a") for m in missing)
    assert console_errors(browser) == []


def test_site_works_from_a_static_http_server(browser, board_site, tmp_path: Path):
    _, site, _ = board_site
    handler = partial(SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        browser.get(base + "index.html")
        assert len(row_order(browser)) == 6
        browser.find_element(By.LINK_TEXT, "synthetic_dp4").click()
        assert browser.current_url.endswith("/w/synthetic_dp4.html")
        assert len(browser.find_elements(By.CSS_SELECTOR, "figure.plot svg")) == 11
        # the stylesheet loaded (relative link), so the figure cards have their border
        border = browser.find_element(By.CSS_SELECTOR, "figure.plot").value_of_css_property("border-top-style")
        assert border == "solid"
        assert console_errors(browser) == []  # no 404 for a script, stylesheet or favicon
    finally:
        server.shutdown()
        server.server_close()


# What the 1400x1000 test reads from the DOM: every shown heading's text fits its cell
# (scrollWidth <= clientWidth), and neither the page nor the table's frame scrolls sideways.
_FIT = """
const shown = el => getComputedStyle(el).display !== 'none' && el.offsetParent !== null;
const clipped = Array.from(document.querySelectorAll('th')).filter(shown)
  .filter(th => th.scrollWidth > th.clientWidth)
  .map(th => [th.textContent.trim(), th.scrollWidth, th.clientWidth]);
const frame = document.querySelector('.table-wrap');
return {clipped: clipped, page: document.scrollingElement.scrollWidth,
        frame: frame ? [frame.scrollWidth, frame.clientWidth] : null,
        headings: Array.from(document.querySelectorAll('#leaderboard tr.cols th')).filter(shown)
          .map(th => th.getAttribute('data-metric') || th.textContent.trim())};
"""


def keep_screenshot(driver, path: Path) -> Path:
    """The window as it is (no resize), also copied to $CCLQ_SCREENSHOT_DIR when set."""
    driver.save_screenshot(str(path))
    if os.environ.get("CCLQ_SCREENSHOT_DIR"):
        Path(os.environ["CCLQ_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ["CCLQ_SCREENSHOT_DIR"]) / path.name)
    return path


def na_only_columns(driver) -> list[str]:
    """The metric columns whose every cell reads n/a (read from the cells' text, shown or not)."""
    return driver.execute_script("""
const table = document.getElementById('leaderboard');
return Array.from(table.querySelectorAll('tr.cols th[data-metric]')).filter(th => {
  const i = Array.from(th.parentNode.children).indexOf(th);
  return Array.from(table.tBodies[0].rows).every(r => r.cells[i].textContent.trim() === 'n/a');
}).map(th => th.getAttribute('data-metric'));""")


def test_board_and_report_fit_1400_px(browser, board_site, tmp_path: Path):
    """At 1400x1000 the leaderboard's default columns and a report page show without
    sideways scrolling and with no heading cut; a screenshot of each is kept."""
    from cclq.present.board.pages import workload_page

    _, site, _ = board_site
    browser.set_window_size(1400, 1000)
    try:
        browser.get((site / "index.html").as_uri())
        fit = browser.execute_script(_FIT)
        assert fit["clipped"] == [], fit["clipped"]
        assert fit["page"] <= 1400, fit
        assert fit["frame"][0] <= fit["frame"][1], fit  # the table's own frame does not scroll either
        # headings are words, not identifiers cut at the column edge
        heading = browser.find_element(By.CSS_SELECTOR, 'th[data-metric="communication_fraction"]')
        assert heading.text.splitlines()[:2] == ["communication", "fraction"] or heading.text.startswith(
            "communication fraction"
        ), heading.text
        # the extra columns are behind each group's "+N"; the n/a-only ones behind a checkbox
        shown = set(fit["headings"])
        empty = set(na_only_columns(browser))
        assert empty and not shown & empty
        assert "Framework" not in shown and "Workload" in shown
        assert keep_screenshot(browser, tmp_path / "board_1400.png").stat().st_size > 10_000

        page = tmp_path / "report.html"  # what `cclq report TRACE --format html` writes
        stored = json.loads((site / "data" / "synthetic_dp8.json").read_text())
        page.write_text(workload_page(stored, standalone=True))
        browser.get(page.as_uri())
        fit = browser.execute_script(_FIT)
        assert fit["clipped"] == [], fit["clipped"]
        assert fit["page"] <= 1400, fit
        assert keep_screenshot(browser, tmp_path / "report_1400.png").stat().st_size > 10_000
        assert console_errors(browser) == []
    finally:
        browser.set_window_size(1600, 1000)


def test_group_headings_open_their_columns(browser, board_site):
    """ "+N" in a category's heading shows all its columns and the heading spans them; the
    "columns with no value" checkbox shows the columns n/a in every row."""
    _, site, _ = board_site
    browser.get((site / "index.html").as_uri())
    comm = browser.find_element(By.CSS_SELECTOR, 'tr.groups th[data-group="communication"]')
    headers = browser.find_elements(By.CSS_SELECTOR, "tr.cols th.g-communication")

    def shown() -> int:
        return sum(h.is_displayed() for h in headers)

    before = shown()
    assert int(comm.get_attribute("colspan")) == before < len(headers)
    empty = [m for m in na_only_columns(browser) if m in {h.get_attribute("data-metric") for h in headers}]
    assert empty
    comm.find_element(By.CSS_SELECTOR, "button.more-btn").click()
    assert shown() == len(headers) - len(empty)
    assert int(comm.get_attribute("colspan")) == shown()
    browser.find_element(By.ID, "show-empty").click()
    assert shown() == len(headers)
    assert int(comm.get_attribute("colspan")) == len(headers)
    assert console_errors(browser) == []
