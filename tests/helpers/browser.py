"""Debian's chromium and its chromedriver, as the browser tests drive them through Selenium
(nothing downloaded; the tests skip where either is missing)."""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = Path(os.environ.get("CCLQ_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("CCLQ_CHROMEDRIVER", "/usr/bin/chromedriver"))
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
    "--force-device-scale-factor=1",
)


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
