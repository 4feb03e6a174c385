"""The review page in a real headless browser: Debian's chromium driven by Selenium through the
system chromedriver (nothing is downloaded at run time: the driver and browser paths are given,
and Selenium Manager is told to stay offline).

Needs `apt-get install chromium chromium-driver` (`.ci/run` installs them) and the `selenium`
package (the test extra). Without them the tests are skipped, unless JUDGE_EVAL_REQUIRE_BROWSER=1
(`.ci/run` sets it), which turns the skip into a failure so CI cannot pass without running them.

A screenshot of the page is saved in the test's tmp folder, and to $JUDGE_EVAL_SCREENSHOT_DIR
when set (docs/images/labels-review.png in the README is made that way).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from browser_helpers import chrome

from judge_eval.labels import import_reviews, write_review_page

DATA = Path(__file__).parent / "data" / "labels"
@pytest.fixture
def browser(tmp_path: Path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    prefs = {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    with chrome(tmp_path / "profile", prefs=prefs) as driver:
        driver.downloads = downloads
        yield driver


def _open(driver, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def _press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for k in keys:
        ActionChains(driver).send_keys(k).perform()


def _text(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


def _chosen(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [b.get_attribute("data-grade") for b in driver.find_elements(By.CSS_SELECTOR, ".grade.chosen")]


def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _leaving_is_guarded(driver) -> bool:
    """Whether the page's beforeunload handler asks the browser to warn (it does while changes
    are not downloaded)."""
    return driver.execute_script(
        "const e = new Event('beforeunload', {cancelable: true}); window.dispatchEvent(e);"
        "return e.defaultPrevented;")


def test_review_with_keys_and_mouse_reload_download_import(browser, tmp_path: Path) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    page = tmp_path / "review.html"
    write_review_page(DATA / "tiny", page, order="question")  # c1 c3 c2 c4 c5 c6 c7
    _open(browser, page)
    assert _text(browser, "position") == "1 / 7"
    assert "Who wrote Hamlet?" in _text(browser, "question")
    marks = browser.find_elements(By.CSS_SELECTOR, "#chunk mark")
    assert [m.text.rstrip("0123456789,") for m in marks] == ["a tragedy", "Shakespeare wrote Hamlet"]
    assert not _leaving_is_guarded(browser)

    browser.find_element(By.ID, "reviewer").send_keys("ann")
    browser.find_element(By.ID, "reviewer").send_keys(Keys.ESCAPE)
    _press(browser, Keys.ENTER)                      # c1: accept the judge's 3
    _press(browser, "2")                             # c3: 0 -> 2
    browser.find_element(By.CSS_SELECTOR, '.grade[data-grade="0"]').click()  # c2 (mouse): 1 -> 0
    _press(browser, Keys.ARROW_RIGHT)                # c4: skipped
    assert _text(browser, "position") == "5 / 7"
    _press(browser, "1")                             # c5: no proposal, graded 1
    assert _text(browser, "progress") == "reviewed 4 of 7 · kept 1 · changed up 1 · changed down 1"
    assert "unsaved changes" in _text(browser, "saved")
    assert _leaving_is_guarded(browser)

    # reload: the work is still there (browser storage); the page may ask before leaving
    browser.execute_script("location.reload()")
    try:
        WebDriverWait(browser, 2).until(EC.alert_is_present())
        browser.switch_to.alert.accept()
    except TimeoutException:
        pass
    from selenium.webdriver.support.ui import WebDriverWait as Wait

    Wait(browser, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert _text(browser, "progress") == "reviewed 4 of 7 · kept 1 · changed up 1 · changed down 1"
    assert _text(browser, "position") == "6 / 7"  # where the reviewer was
    _press(browser, Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_LEFT)
    assert _chosen(browser) == ["0"] and "changed 1 → 0" in _text(browser, "status")  # c2
    # filters: run b holds c3 c1 c4 c6 c7; the changed ones of it: c3
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "f-run")).select_by_visible_text("b")
    assert _text(browser, "position") == "1 / 5 (filtered)"
    Select(browser.find_element(By.ID, "f-status")).select_by_visible_text("changed")
    assert _text(browser, "position") == "1 / 1 (filtered)" and _text(browser, "cid") == "c3"
    Select(browser.find_element(By.ID, "f-status")).select_by_visible_text("all")
    Select(browser.find_element(By.ID, "f-run")).select_by_visible_text("all")
    Select(browser.find_element(By.ID, "f-confidence")).select_by_value("0.4")  # c2 0.0, c5 0.0, c7 0.4
    assert _text(browser, "position").endswith("/ 3 (filtered)")
    Select(browser.find_element(By.ID, "f-confidence")).select_by_value("")
    browser.find_element(By.TAG_NAME, "body").click()

    # c4 with its elided evidence, for the screenshot
    while _text(browser, "cid") != "c4":
        _press(browser, Keys.ARROW_RIGHT)
    assert [m.text.rstrip("0123456789,") for m in browser.find_elements(By.CSS_SELECTOR, "#chunk mark")] == \
        ["water boils at 100 degrees", "(212 °F)"]
    shot = tmp_path / "labels-review.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("JUDGE_EVAL_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["JUDGE_EVAL_SCREENSHOT_DIR"]) / "labels-review.png")

    browser.find_element(By.ID, "download").click()
    deadline = time.time() + 20
    files: list[Path] = []
    while time.time() < deadline:
        files = [f for f in browser.downloads.iterdir()
                 if not f.name.endswith(".crdownload") and not f.name.startswith(".")]
        if files:
            break
        time.sleep(0.1)
    assert [f.name for f in files] == ["review.reviewed.jsonl"]
    assert not _leaving_is_guarded(browser) and "all changes downloaded" in _text(browser, "saved")
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert len(rows) == 7 and {r["reviewer"] for r in rows if r["grade"] is not None} == {"ann"}

    report = import_reviews(files[0], tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text() == "q1 0 c1 3\nq1 0 c3 2\nq1 0 c2 0\nq2 0 c5 1\n"
    assert (report.kept, report.up, report.down, report.new, report.unreviewed) == (1, 1, 1, 1, 3)
    assert _errors(browser) == []


def _big_results(folder: Path, n: int) -> None:
    """A results folder with ``n`` verdicts over n/10 questions, each chunk ~300 characters."""
    folder.mkdir()
    for name in ("summary.json", "per_question.csv"):
        shutil.copy(DATA / "tiny" / name, folder / name)
    with (folder / "statements.jsonl").open("w") as st, (folder / "verdicts.jsonl").open("w") as vd:
        for q in range(n // 10):
            st.write(json.dumps({"question_id": f"q{q}", "statement": 1, "text": f"Statement one of {q}."}) + "\n")
            for c in range(10):
                text = f"Chunk {c} of question {q}: " + "some words about the topic " * 10
                vd.write(json.dumps({
                    "question_id": f"q{q}", "chunk_id": f"q{q}c{c}", "runs": {"a": c + 1},
                    "question": f"What about topic {q}?", "chunk_text": text, "error": None, "grade": c % 4,
                    "capped_grade": c % 4, "supported": [1] if c % 4 >= 2 else [],
                    "evidence": {"1": "some words about the topic"} if c % 4 >= 2 else {}, "unverified": 0,
                    "invalid_statement": 0, "reason": "r", "rejected": []}) + "\n")


def test_ten_thousand_items_open_without_a_freeze(browser, tmp_path: Path) -> None:
    _big_results(tmp_path / "big", 10_000)
    page = tmp_path / "big.html"
    write_review_page(tmp_path / "big", page)
    started = time.time()
    _open(browser, page)
    opened = time.time() - started
    ready_ms = browser.execute_script("return window.__reviewReadyMs")
    assert _text(browser, "position") == "1 / 10000"
    assert ready_ms < 4000 and opened < 15, (ready_ms, opened)  # the page's own work, and the whole load
    t0 = time.time()
    _press(browser, "2", "3", "1")
    assert _text(browser, "position") == "4 / 10000" and "reviewed 3 of 10000" in _text(browser, "progress")
    assert time.time() - t0 < 5
    assert _errors(browser) == []
