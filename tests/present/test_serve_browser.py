"""``cclq serve``'s upload form in a real headless browser: Debian's chromium driven by
Selenium, as tests/present/test_board_browser.py does (nothing downloaded; skipped when
/usr/bin/chromium, /usr/bin/chromedriver, Selenium or the serve extra is missing).

A person's path: open the board, choose a trace archive in the form, give a group
name and the token, press Upload; the page reports the job and reloads when it lands,
and the workload's row is on the leaderboard."""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the board-test extra)")
from helpers.browser import CHROMEDRIVER, CHROMIUM, FLAGS, console_errors  # noqa: E402

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(f"no system chromium ({CHROMIUM}) and chromedriver ({CHROMEDRIVER})", allow_module_level=True)

from helpers.ccl_bench import build_gpu  # noqa: E402
from helpers.serve import CARD, TOKEN, Server  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


@pytest.fixture
def browser():
    os.environ["SE_OFFLINE"] = "true"
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


def test_upload_from_the_board_page(browser, tmp_path):
    build_gpu(tmp_path / "browser_run", card=CARD)
    archive = tmp_path / "browser_run.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((tmp_path / "browser_run").iterdir()):
            zf.write(p, f"browser_run/{p.name}")
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv")
    try:
        browser.get(server.base + "/")
        assert browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr") == []
        browser.find_element(By.ID, "upload-files").send_keys(str(archive))
        browser.find_element(By.ID, "upload-group").send_keys("browser team")
        browser.find_element(By.ID, "upload-token").send_keys(TOKEN)
        browser.find_element(By.ID, "upload-submit").click()
        WebDriverWait(browser, 240, poll_frequency=0.5).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#leaderboard tbody tr[data-trace^="browser_team_"]')
        )
        row = browser.find_element(By.CSS_SELECTOR, '#leaderboard tbody tr[data-trace^="browser_team_"]')
        step = row.find_elements(By.CSS_SELECTOR, "td")
        assert row.is_displayed() and len(step) > 5
        assert console_errors(browser) == []
        # a refused upload says so in the form, the board unchanged
        bad = tmp_path / "bad.zip"
        with zipfile.ZipFile(bad, "w") as zf:
            zf.writestr("../escape.json", "{}")
        browser.find_element(By.ID, "upload-files").send_keys(str(bad))
        browser.find_element(By.ID, "upload-group").send_keys("evil")
        browser.find_element(By.ID, "upload-token").send_keys(TOKEN)
        browser.find_element(By.ID, "upload-submit").click()
        WebDriverWait(browser, 30).until(lambda d: "refused" in d.find_element(By.ID, "upload-status").text)
        assert "leaves the upload folder" in browser.find_element(By.ID, "upload-status").text
        assert len(browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")) == 1
    finally:
        server.stop()


EVIL_PAGE = """<!doctype html><html><head><title>loading</title></head><body>
<form id="f" method="post" enctype="multipart/form-data" action="{target}/api/upload">
<input name="group_name" value="evil"></form>
<script>
const data = new FormData();
data.append("group_name", "evil");
data.append("files", new Blob(['{{"traceEvents": []}}']), "kineto_trace_0.json");
fetch("{target}/api/upload", {{method: "POST", body: data, mode: "no-cors"}})
  .then(function () {{ document.title = "sent"; }}, function (e) {{ document.title = "failed " + e; }});
</script></body></html>"""


def test_another_sites_page_cannot_upload_without_a_token(browser, tmp_path):
    """A page on another origin posts a multipart upload to a server with no token, as a
    fetch (a CORS simple request: the browser sends it without asking) and as a form:
    both refused, no job made."""
    import subprocess
    import sys

    from helpers.serve import free_port

    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv", token=None)
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "index.html").write_text(EVIL_PAGE.format(target=server.base))
    port = free_port()
    evil = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "-d", str(tmp_path / "evil")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        WebDriverWait(browser, 30).until(lambda d: _loads(d, f"http://localhost:{port}/index.html"))
        WebDriverWait(browser, 30).until(lambda d: d.title != "loading")
        assert browser.title == "sent"  # the browser sent it (an opaque answer)
        uploads = tmp_path / "srv" / "data" / "uploads"
        assert not any(uploads.iterdir())
        browser.execute_script("document.getElementById('f').submit()")  # the form: its answer is shown
        WebDriverWait(browser, 30).until(lambda d: "another site" in d.page_source)
        assert not any(uploads.iterdir())
    finally:
        evil.terminate()
        evil.wait(timeout=10)
        server.stop()


def _loads(driver, url: str) -> bool:
    try:
        driver.get(url)
        return "<form" in driver.page_source
    except Exception:  # noqa: BLE001 - the page's server is still starting
        return False
