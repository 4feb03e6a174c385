"""Headless Debian chromium for the page tests, driven by Selenium through the system chromedriver.
Nothing is downloaded at run time: the browser and driver paths are given and Selenium Manager
is told to stay offline (SE_OFFLINE=true).

Without `apt-get install chromium chromium-driver` or the `selenium` package the tests that use
:func:`chrome` are skipped, unless JUDGE_EVAL_REQUIRE_BROWSER=1 (`.ci/run` sets it), which turns
the skip into a failure so CI cannot pass without running them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def missing() -> str | None:
    """What is missing to drive the browser, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package (pip install -e '.[test]')"
    if not CHROMIUM or not CHROMEDRIVER:
        return "chromium and chromedriver (apt-get install chromium chromium-driver)"
    return None


def skip_or_fail_without_browser() -> None:
    why = missing()
    if why:
        if os.environ.get("JUDGE_EVAL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"JUDGE_EVAL_REQUIRE_BROWSER=1 but {why} is missing")
        pytest.skip(f"needs {why}")


@contextmanager
def chrome(profile: Path, *, width: int = 1280, height: int = 800,
           prefs: dict[str, Any] | None = None) -> Iterator[Any]:
    """A headless chromium window of ``width`` x ``height`` with its browser console log
    kept (``driver.get_log("browser")``); quits on exit."""
    skip_or_fail_without_browser()
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", f"--user-data-dir={profile}", "--no-first-run"):
        opts.add_argument(arg)
    if prefs:
        opts.add_experimental_option("prefs", prefs)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_window_size(width, height)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict]:
    """The browser console's errors so far."""
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def save_screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    """A PNG of the window in ``tmp_path``, copied to $JUDGE_EVAL_SCREENSHOT_DIR when set (how
    the README's images are made)."""
    shot = tmp_path / name
    driver.save_screenshot(str(shot))
    out_dir = os.environ.get("JUDGE_EVAL_SCREENSHOT_DIR")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out_dir) / name)
    return shot
