"""report.html in a real headless chromium (Debian's, through the system chromedriver; nothing is
downloaded: tests/browser_helpers.py) at 1280 x 800: no console errors, the plots are drawn with
one mark per plotted number, nothing overflows horizontally, no network request, and a click on a
moved question's dot opens its chunks. Skipped without chromium unless JUDGE_EVAL_REQUIRE_BROWSER=1.

The screenshots are saved in the test's tmp folder, and to $JUDGE_EVAL_SCREENSHOT_DIR when set
(docs/images/report.png and report-moved.png in the README are made that way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import chrome, console_errors, save_screenshot
from report_helpers import MINI, audit_folders, folder, specs

import judge_eval
from judge_eval.report.render import read_source, write_report


@pytest.fixture
def browser(tmp_path: Path):
    with chrome(tmp_path / "profile") as driver:
        yield driver


def _open(driver: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def _js(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


def _overflow(driver: Any) -> list[str]:
    """Elements sticking out of the window to the right, and whether the page scrolls sideways."""
    return _js(driver, """
        const w = document.documentElement.clientWidth, out = [];
        const sw = document.documentElement.scrollWidth;
        if (sw > w) out.push('page scrollWidth ' + sw + ' > ' + w);
        for (const el of document.querySelectorAll('body *')) {
          const r = el.getBoundingClientRect();
          if (r.width && r.right > w + 0.5) out.push(el.tagName + '.' + el.className + ' right ' + Math.round(r.right));
        }
        for (const p of document.querySelectorAll('.plot')) {
          if (p.scrollWidth > p.clientWidth) out.push('plot ' + p.id + ' scrolls: ' + p.scrollWidth);
        }
        return out.slice(0, 20);""")


def _open_every_details(driver: Any) -> None:
    _js(driver, "document.querySelectorAll('details').forEach(d => d.open = true)")


def _network(driver: Any) -> list[str]:
    return _js(driver, "return performance.getEntriesByType('resource').map(e => e.name)"
                       ".filter(n => !n.startsWith('data:'))")


def _marks(driver: Any, label: str, group: str) -> int:
    selector = f"div.plot[data-label='{label}'] svg g.{group}.role-mark > path"
    return _js(driver, f"return document.querySelectorAll(\"{selector}\").length")


def _check_page(driver: Any, page: Path) -> None:
    _open(driver, page)
    n_specs = len(specs(page.read_text()))
    assert n_specs and _js(driver, "return document.body.dataset.plots") == str(n_specs)
    assert _js(driver, "return document.querySelectorAll('div.plot[data-drawn] svg').length") == n_specs
    assert console_errors(driver) == []
    assert _overflow(driver) == []
    _open_every_details(driver)
    assert _overflow(driver) == []
    assert _network(driver) == []


def test_the_report_in_chromium(browser, tmp_path: Path, tmp_path_factory) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    full, base = folder("full", tmp_path_factory), folder("full_baseline", tmp_path_factory)
    page = write_report(full, baseline=base, out=tmp_path / "report").html
    text = page.read_text()
    _open(browser, page)
    assert console_errors(browser) == []
    # every plot drawn: metrics, confusion matrix, scatter, moved questions, statement gaps
    labels = ["each metric per run with confidence intervals", "confusion matrix", "judged vs human scatter",
              "questions that moved most", "statement coverage per run"]
    assert _js(browser, "return [...document.querySelectorAll('div.plot[data-drawn]')].map(p => p.dataset.label)") \
        == labels
    assert _js(browser, "return document.body.dataset.plots") == "5"
    # one mark per plotted number: a dot per (run, measure) with a mean, a cell per confusion count,
    # a dot per moved question, a bar per (run, kind) with statements
    metric_spec, confusion_spec, scatter_spec, moved_spec, gaps_spec = specs(text)
    means = [r["mean"] for r in metric_spec["data"]["values"]]
    assert _marks(browser, labels[0], "mark-symbol") == sum(m is not None for m in means)
    assert _marks(browser, labels[1], "mark-rect") == len(confusion_spec["data"]["values"]) == 4
    pair = scatter_spec["params"][0]["value"]
    points = scatter_spec["layer"][1]["data"]["values"]
    assert _marks(browser, labels[2], "mark-symbol") == sum(p["pair"] == pair for p in points)
    assert _marks(browser, labels[3], "mark-symbol") == 2 * len(moved_spec["data"]["values"]) == 30
    assert _marks(browser, labels[4], "mark-rect") == len(gaps_spec["data"]["values"])
    # the numbers are under each plot, collapsed once it is drawn
    assert _js(browser, "return [...document.querySelectorAll('details.numbers')].every(d => !d.open)")
    assert _overflow(browser) == []
    assert _network(browser) == []
    save_screenshot(browser, tmp_path, "report.png")

    # another metric pair in the scatter's menu: the points of that pair
    other = scatter_spec["params"][0]["bind"]["options"][1]
    Select(browser.find_element(By.CSS_SELECTOR, "div.plot[data-label='judged vs human scatter'] select")) \
        .select_by_visible_text(other)
    n_other = sum(p["pair"] == other for p in points)
    WebDriverWait(browser, 10).until(lambda d: _marks(d, labels[2], "mark-symbol") == n_other)

    # a click on a moved question's dot opens its chunks and the judge's evidence (a rise: the
    # current run's chunks have evidence to show)
    i = next(i for i, d in enumerate(moved_spec["data"]["values"]) if d["direction"] == "up")
    anchor = f"moved-{i + 1}"
    assert not _js(browser, f"return document.getElementById('{anchor}').open")
    dots = browser.find_elements(By.CSS_SELECTOR, f"div.plot[data-label='{labels[3]}'] svg g.mark-symbol.role-mark")[-1]
    dot = dots.find_elements(By.CSS_SELECTOR, "path")[i]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", dot)
    dot.click()
    WebDriverWait(browser, 10).until(lambda d: d.execute_script(f"return document.getElementById('{anchor}').open"))
    assert _js(browser, "return location.hash") == f"#{anchor}"
    opened = browser.find_element(By.ID, anchor)
    assert opened.find_elements(By.CSS_SELECTOR, "li.chunk mark") and opened.is_displayed()
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", opened)
    save_screenshot(browser, tmp_path, "report-moved.png")
    assert console_errors(browser) == []
    _open_every_details(browser)
    assert _overflow(browser) == []


def test_many_cutoffs_and_runs_fit_1280_pixels(browser, tmp_path: Path) -> None:
    runs = {f"{name}-v{i}": MINI / "runs" / f"{name}.trec" for i in range(1, 4) for name in ("bm25", "dense", "hybrid")}
    results = judge_eval.evaluate(MINI / "questions.jsonl", runs=runs, qrels=MINI / "qrels.txt",
                                  corpus=MINI / "corpus.jsonl", judge="offline", ks=tuple(range(1, 21)))
    judge_eval.write_results(results, tmp_path / "wide")
    assert len(read_source(tmp_path / "wide").measures) > 150 and len(runs) == 9
    _check_page(browser, tmp_path / "wide" / "report.html")


def test_an_audit_report_in_chromium(browser, tmp_path: Path, tmp_path_factory) -> None:
    mini, base = folder("mini", tmp_path_factory), folder("mini_baseline", tmp_path_factory)
    _, new, _ = audit_folders(tmp_path / "audits", mini, base)
    page = write_report(new).html
    _check_page(browser, page)
    # checks, trend, regressed questions, then the results' metrics, agreement and statements
    assert _js(browser, "return [...document.querySelectorAll('section')].map(s => s.id)") == [
        "checks", "trend", "moved", "canary", "metrics", "agreement", "statements"]


def test_the_tables_only_page_in_chromium(browser, tmp_path: Path, tmp_path_factory) -> None:
    page = write_report(folder("mini", tmp_path_factory), out=tmp_path / "plain", with_plots=False).html
    _open(browser, page)
    assert _js(browser, "return document.body.dataset.plots") == "0"
    assert _js(browser, "return document.querySelectorAll('figure.numbers-only table').length") >= 3
    assert console_errors(browser) == []
    _open_every_details(browser)
    assert _overflow(browser) == [] and _network(browser) == []
