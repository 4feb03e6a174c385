"""report.md and report.html: every number equals the folder's data, hand-checked statement gaps
and moved questions, escaping, no network, tables without plots, `judge-eval report`, audits.
The pages in a real browser: tests/test_report_browser.py."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from report_helpers import audit_folders, folder, specs, summary
from test_prompts import _build_wheel

from judge_eval.cli import main
from judge_eval.errors import ConfigError, InputError
from judge_eval.report import analysis, plots
from judge_eval.report.html import report_html
from judge_eval.report.markdown import report_markdown
from judge_eval.report.render import audit_history, read_audit, read_source, write_report
from judge_eval.report.source import ReportSource

VENDOR = Path(plots.__file__).parent / "vendor"


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts, with the class of the table."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str, cls: str) -> list[list[list[str]]]:
    p = _Tables()
    p.feed(page)
    return [rows for c, rows in p.tables if c == cls]


def _cell(mean, lo, hi) -> str:  # type: ignore[no-untyped-def]
    text = "-" if mean is None else f"{mean:.3f}"
    return text + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    return folder("mini", tmp_path_factory)


@pytest.fixture(scope="module")
def mini_baseline(tmp_path_factory) -> Path:
    return folder("mini_baseline", tmp_path_factory)


# ----------------------------------------------------------------------------- vendored scripts


def test_the_vendored_scripts_are_the_pinned_npm_builds_with_their_licenses() -> None:
    readme = (VENDOR / "README.md").read_text()
    for name, digest in plots.VENDORED.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest
        assert digest in readme
    for lic in ("LICENSE-vega.txt", "LICENSE-vega-lite.txt", "THIRD-PARTY-NOTICES.txt"):
        assert "Redistribution" in (VENDOR / lic).read_text() or lic.startswith("THIRD")
    assert "6.4.0" in readme and "6.5.0" in readme
    inlined = plots.vega_scripts()
    assert inlined is not None and "sourceMappingURL" not in inlined and "</script" not in inlined.lower()


def test_the_wheel_ships_the_plot_scripts_and_an_install_from_it_draws_plots(tmp_path: Path) -> None:
    """Built from a clean copy of the sources and installed with pip: vega_scripts() finds the
    vendored files there (not in the checkout)."""
    wheel = _build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"judge_eval/report/vendor/{n}" for n in [*plots.VENDORED, "LICENSE-vega.txt", "LICENSE-vega-lite.txt",
                                                      "THIRD-PARTY-NOTICES.txt"]} <= names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    code = ("import judge_eval.report.plots as p; s = p.vega_scripts(); print(p.__file__); "
            "print(len(s) if s else 0)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(site)}, cwd=tmp_path).stdout.splitlines()
    assert out[0].startswith(str(site)) and int(out[1]) > 700_000, out


# ----------------------------------------------------------------------------- numbers


def test_every_number_of_the_metrics_table_and_plot_is_the_summarys(mini: Path) -> None:
    page = (mini / "report.html").read_text()
    records = summary(mini)
    runs = list(dict.fromkeys(r["run"] for r in records))
    measures = list(dict.fromkeys(r["measure"] for r in records))
    by = {(r["run"], r["measure"]): r for r in records}
    # the table: one row per measure, one column per run, then n
    [table] = tables(page, "metrics")
    assert table[0] == ["measure", *runs, "n"]
    assert [row[0] for row in table[1:]] == measures
    for row in table[1:]:
        for run, text in zip(runs, row[1:-1], strict=True):
            r = by[(run, row[0])]
            assert text == _cell(r["mean"], r["ci_low"], r["ci_high"])
        assert row[-1] == "/".join(str(n) for n in sorted({by[(run, row[0])]["n"] for run in runs}))
    # the plot: the same records, unrounded
    metric_spec = specs(page)[0]
    fields = ("run", "measure", "mean", "ci_low", "ci_high", "n")
    assert [tuple(d[f] for f in fields) for d in metric_spec["data"]["values"]] == [
        tuple(r[f] for f in fields) for r in records]
    assert metric_spec["encoding"]["y"]["sort"] == measures  # metrics as rows
    # report.md: the same cells
    md = (mini / "report.md").read_text()
    for r in records:
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| `{r['measure']}` |"))
        assert _cell(r["mean"], r["ci_low"], r["ci_high"]) in line.split(" | ")[1 + runs.index(r["run"])]


def test_the_agreement_numbers_are_the_trust_reports(mini: Path) -> None:
    page = (mini / "report.html").read_text()
    trust = json.loads((mini / "summary.json").read_text())["trust"]["agreement"]
    [confusion] = tables(page, "confusion")
    c = trust["confusion"]
    assert confusion[1][1:] == [str(c["human_not_relevant"]["judge_not_relevant"]),
                                str(c["human_not_relevant"]["judge_relevant"])]
    assert confusion[2][1:] == [str(c["human_relevant"]["judge_not_relevant"]),
                                str(c["human_relevant"]["judge_relevant"])]
    conf_spec = next(s for s in specs(page) if s.get("width") == 220)
    assert sorted(d["count"] for d in conf_spec["data"]["values"]) == sorted(
        n for row in c.values() for n in row.values())
    chunk_rows = next(t for t in tables(page, "stats") if t[0][0] == "statistic")
    for stat, row in zip(trust["chunk"], chunk_rows[1:], strict=True):
        assert row[:3] == [stat["statistic"], f"{stat['value']:.3f}", f"[{stat['ci_low']:.2f}, {stat['ci_high']:.2f}]"]
        assert row[3] == str(stat["n"])
    # the scatter: one point per (run, question) with both values, merged by count
    scatter = next(s for s in specs(page) if "params" in s)
    points = scatter["layer"][1]["data"]["values"]
    pq = pd.read_csv(mini / "per_question.csv", dtype={"question_id": str})
    pair = scatter["params"][0]["value"]
    judged, human = pair.split(" vs ")
    both = pq[["run", judged, human]].dropna()
    assert sum(p["count"] for p in points if p["pair"] == pair) == len(both)
    expected = both.groupby(["run", human, judged]).size()
    for p in points:
        if p["pair"] == pair:
            assert expected[(p["run"], p["human"], p["judged"])] == p["count"]


def test_the_report_command_and_score_write_the_same_pages(mini: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    result = CliRunner().invoke(main, ["report", str(mini), "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (out / "report.html").read_text() == (mini / "report.html").read_text().replace(
        "judge-eval report</title>", f"judge-eval report: {mini.name}</title>").replace(
        "<h1>judge-eval report</h1>", f"<h1>judge-eval report: {mini.name}</h1>")
    assert (out / "report.md").read_text() == (mini / "report.md").read_text().replace(
        "# judge-eval report\n", f"# judge-eval report: {mini.name}\n")


# ----------------------------------------------------------------------------- statement gaps, by hand


def _source(statements: list[tuple[str, int, str]], verdicts: list[dict], runs: list[str], ks: list[int],
            per_question: pd.DataFrame | None = None, name: str = "") -> ReportSource:
    summary_rows = [{"run": r, "measure": "context_recall@5", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 2,
                     "n_missing": 0} for r in runs]
    full = []
    for v in verdicts:
        full.append({"chunk_text": f"text of {v['chunk_id']}", "question": f"question {v['question_id']}",
                     "error": None, "grade": 2, "capped_grade": 2, "evidence": {}, "reason": "", **v})
    return ReportSource(summary=summary_rows, info={"settings": {"ks": ks}},
                        per_question=per_question if per_question is not None else pd.DataFrame(
                            columns=["run", "question_id"]),
                        verdicts=pd.DataFrame(full),
                        statements=pd.DataFrame(statements, columns=["question_id", "statement", "text"]).assign(
                            error=None), name=name)


def test_statement_gaps_tell_a_corpus_gap_from_a_retriever_gap() -> None:
    src = _source(
        statements=[("q1", 1, "s one"), ("q1", 2, "s two"), ("q1", 3, "s three"), ("q2", 1, "t one"),
                    ("q2", 2, "t two")],
        verdicts=[
            {"question_id": "q1", "chunk_id": "a", "runs": {"A": 1}, "supported": [1]},
            {"question_id": "q1", "chunk_id": "b", "runs": {"B": 2, "A": 7}, "supported": [1, 2]},
            {"question_id": "q1", "chunk_id": "c", "runs": {"A": 12}, "supported": [3]},  # beyond k = 10
            {"question_id": "q2", "chunk_id": "d", "runs": {"A": 1, "B": 1}, "supported": []},
            {"question_id": "q2", "chunk_id": "e", "runs": {"B": 3}, "supported": [], "error": "timeout"},
        ],
        runs=["A", "B"], ks=[5, 10])
    gaps = analysis.statement_gaps(src)
    assert gaps["k"] == 10 and gaps["statements"] == 5 and gaps["questions"] == 2
    # q1/1: both; q1/2: A has it at rank 7, B at 2; q1/3: only beyond k -> corpus gap;
    # q2/1, q2/2: nothing supports them, but a judge call in B's top k failed -> unknown
    assert gaps["per_run"] == {"A": {"supported": 2, "retriever_gap": 0, "corpus_gap": 1, "unknown": 2},
                               "B": {"supported": 2, "retriever_gap": 0, "corpus_gap": 1, "unknown": 2}}
    assert [(r["question_id"], r["statement"]) for r in gaps["corpus"]] == [("q1", 3)]
    assert [(r["question_id"], r["statement"]) for r in gaps["unknown"]] == [("q2", 1), ("q2", 2)]
    # at k = 5, A's rank-7 chunk no longer counts: q1/2 is a retriever gap of A, found by B at 2
    gaps5 = analysis.statement_gaps(src, k=5)
    assert gaps5["per_run"]["A"] == {"supported": 1, "retriever_gap": 1, "corpus_gap": 1, "unknown": 2}
    assert gaps5["per_run"]["B"] == {"supported": 2, "retriever_gap": 0, "corpus_gap": 1, "unknown": 2}
    assert gaps5["retriever"] == [{"question_id": "q1", "question": "question q1", "statement": 2, "text": "s two",
                                   "missed_by": ["A"], "found_by": {"B": 2}}]
    # a judge error in A's top k for q1: A's miss of q1/2 is unknown, not a retriever gap, and
    # q1/3 is no longer a sure corpus gap (the failed chunk might support it)
    src.verdicts.loc[len(src.verdicts)] = {**src.verdicts.iloc[0].to_dict(), "chunk_id": "f", "runs": {"A": 2},
                                           "supported": [], "error": "http_500"}
    after = analysis.statement_gaps(src, k=5)
    assert after["per_run"]["A"] == {"supported": 1, "retriever_gap": 0, "corpus_gap": 0, "unknown": 4}
    assert after["per_run"]["B"] == {"supported": 2, "retriever_gap": 0, "corpus_gap": 0, "unknown": 3}
    src.verdicts = src.verdicts.iloc[:-1]
    # the page and report.md say which is which, with the counts
    page, md = report_html(src, with_plots=False), report_markdown(src)
    assert "<b>Corpus gap</b> (1)" in page and "<b>Retriever gap</b> (0)" in page
    [counts] = tables(page, "gaps")
    assert counts[1:] == [["A", "2", "0", "1", "2"], ["B", "2", "0", "1", "2"]]
    assert "| A | 2 | 0 | 1 | 2 |" in md and "**Corpus gap** (1)" in md


def test_with_one_run_the_page_says_a_corpus_gap_cannot_be_told_from_its_miss() -> None:
    src = _source([("q1", 1, "s")], [{"question_id": "q1", "chunk_id": "a", "runs": {"A": 1}, "supported": []}],
                  runs=["A"], ks=[5])
    assert "cannot be told from that run's miss" in report_html(src, with_plots=False)


# ----------------------------------------------------------------------------- moved questions, by hand


def _pq(values: dict[tuple[str, str], float | None]) -> pd.DataFrame:
    return pd.DataFrame([{"run": r, "question_id": q, "context_recall@5": v} for (r, q), v in values.items()])


def test_the_questions_that_moved_most_by_hand() -> None:
    cur = _source([], [], ["A", "B"], [5], _pq({("A", "q1"): 1.0, ("A", "q2"): 0.2, ("A", "q3"): 0.5,
                                                 ("B", "q1"): 0.0, ("B", "q2"): None, ("B", "q4"): 1.0}))
    base = _source([], [], ["A", "B", "C"], [5], _pq({("A", "q1"): 0.5, ("A", "q2"): 0.7, ("A", "q3"): 0.5,
                                                       ("B", "q1"): 0.5, ("B", "q2"): 0.1, ("C", "q4"): 0.0}))
    moved = analysis.movers(cur, base, limit=2)
    assert moved["metric"] == "context_recall@5" and moved["pairs"] == [["A", "A"], ["B", "B"]]
    # A: q1 +0.5, q2 -0.5, q3 0; B: q1 -0.5, q2 missing now; q4 is not in B's baseline
    assert (moved["compared"], moved["missing"], moved["moved"], moved["up"], moved["down"]) == (4, 1, 3, 1, 2)
    # |change| 0.5 three times: drops first (run order, question order), then the rise; limit 2
    assert [(r["run"], r["question_id"], r["delta"]) for r in moved["rows"]] == [("A", "q2", pytest.approx(-0.5)),
                                                                                ("B", "q1", -0.5)]
    assert [r["question_id"] for r in analysis.movers(cur, base)["rows"]] == ["q2", "q1", "q1"]
    # one run on each side under different names: compared with each other
    one = _source([], [], ["new"], [5], _pq({("new", "q1"): 1.0}))
    old = _source([], [], ["old"], [5], _pq({("old", "q1"): 0.25}))
    assert analysis.movers(one, old)["rows"][0] | {} == {"run": "new", "baseline_run": "old", "question_id": "q1",
                                                       "question": "", "baseline": 0.25, "current": 1.0,
                                                       "delta": 0.75}


def test_moved_questions_show_their_chunks_and_evidence_beside_the_baselines(mini: Path, mini_baseline: Path,
                                                                             tmp_path: Path) -> None:
    written = write_report(mini, baseline=mini_baseline, out=tmp_path / "r")
    page = written.html.read_text()
    moved = analysis.movers(read_source(mini), read_source(mini_baseline))
    assert moved["rows"], "the fixture's baseline must differ"
    [table] = tables(page, "moved")
    assert [row[1:] for row in table[1:]] == [
        [r["run"], r["question"], f"{r['baseline']:.3f}", f"{r['current']:.3f}", f"{r['delta']:+.3f}"]
        for r in moved["rows"]]
    spec = next(s for s in specs(page) if s["layer"][0]["mark"].get("color") == "#999")
    assert [(d["baseline"], d["current"], d["anchor"]) for d in spec["data"]["values"]] == [
        (r["baseline"], r["current"], f"moved-{i + 1}") for i, r in enumerate(moved["rows"])]
    # each moved question: a collapsed block with both sides' chunks and the evidence marked
    i, first = next((i, r) for i, r in enumerate(moved["rows"]) if r["delta"] > 0)  # a rise: support now
    block = page.split(f"<details class='question' id='moved-{i + 1}'>", 1)[1].split("</details>", 1)[0]
    src = read_source(mini)
    chunks = analysis.ranked_chunks(src, first["question_id"], first["run"], 5)
    assert [f"#{c['rank']}" for c in chunks] == re.findall(r"<div class='chunk-head'>(#\d+)", block)[:len(chunks)]
    assert f"current: {first['run']} top 5" in block and f"baseline: {first['baseline_run']} top 5" in block
    quotes = [q for c in chunks for q in c["evidence"].values()]
    assert quotes, "the first moved question should have evidence in the current run"
    for q in quotes:  # each quote marked in its chunk's text
        marked = re.escape(html.escape(q.strip(), quote=True))
        assert re.search(r"<mark title='statement [\d, ]+'>" + marked + "</mark>", block), q
    md = written.markdown.read_text()
    assert f"| {i + 1} | {first['run']} |" in md and f"{first['delta']:+.3f}" in md


# ----------------------------------------------------------------------------- escaping, network, fallback


NASTY = "<script>alert('x')</script> <img src=x onerror=alert(1)> | `code` **bold** </script><!-- & \u2028"


def _nasty_source() -> ReportSource:
    src = _source([("q<1>", 1, NASTY)], [
        {"question_id": "q<1>", "chunk_id": "c</script>", "runs": {"r|un": 1}, "supported": [1],
         "question": NASTY, "chunk_text": "before " + NASTY + " after", "evidence": {"1": NASTY}, "reason": NASTY},
    ], ["r|un"], [5], _pq({("r|un", "q<1>"): 1.0}), name="<b>folder</b>")
    return src


def test_every_user_text_is_escaped() -> None:
    src = _nasty_source()
    base = _source([], [], ["r|un"], [5], _pq({("r|un", "q<1>"): 0.0}), name="base</title>")
    page = report_html(src, baseline=base)
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>folder</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    # the evidence is marked inside the escaped chunk text
    assert "<mark title='statement 1'>&lt;script&gt;" in page
    # the JSON of the plots cannot close its script element
    for block in re.findall(r"class='vl-spec'[^>]*>(.*?)</script>", page, flags=re.S):
        assert "<" not in block and json.loads(block)
    md = report_markdown(src, baseline=base)
    assert "<script>" not in md and "<img" not in md and "&lt;script&gt;" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| 1 |"))
    assert row.count(" | ") == 5  # the pipes of the run name and question are escaped: 6 cells
    assert r"r\|un" in row


def test_the_page_loads_nothing_from_the_network(mini: Path) -> None:
    page = (mini / "report.html").read_text()
    assert "default-src 'none'" in page  # the Content-Security-Policy forbids every request
    # no element refers to anything outside the page
    assert not re.search(r"""<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*\b(src|href|data)=""",
                         page, flags=re.I)
    assert not re.search(r"""\b(href|src)\s*=\s*['"]?(https?:)?//""", page, flags=re.I)
    assert not re.search(r"""url\(\s*['"]?(https?:)?//""", page, flags=re.I)


def test_without_the_plot_scripts_the_page_has_every_table(mini: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = read_source(mini)
    with_plots = report_html(src)
    monkeypatch.setattr(plots, "vega_scripts", lambda: None)
    without = report_html(src)
    assert "vl-spec" not in without and "vegaLite" not in without and len(without) < len(with_plots) / 5
    assert "class='numbers-only'" in without and "<details class='numbers'" not in without
    for cls in ("metrics", "confusion", "gaps"):
        assert tables(without, cls) == tables(with_plots, cls)
    assert report_html(src, with_plots=False) == without


# ----------------------------------------------------------------------------- the command


def test_report_command_writes_into_the_folder_and_refuses_bad_input(mini: Path, mini_baseline: Path,
                                                                      tmp_path: Path) -> None:
    copy = tmp_path / "res"
    shutil.copytree(mini, copy)
    (copy / "report.html").unlink()
    runner = CliRunner()
    result = runner.invoke(main, ["report", str(copy), "--baseline", str(mini_baseline), "--metric", "context_recall@3",
                                  "--limit", "3"])
    assert result.exit_code == 0, result.output
    page = (copy / "report.html").read_text()
    assert "Metric <code>context_recall@3</code>" in page and len(tables(page, "moved")[0]) == 4
    for args, code, message in (
            (["report", str(tmp_path / "nope")], 2, "not a folder"),
            (["report", str(tmp_path)], 2, "missing summary.json"),
            (["report", str(copy), "--metric", "nope"], 2, "--metric: unknown metric 'nope'; the folder has: "),
            (["report", str(copy), "--baseline", str(mini_baseline), "--metric", "recall@5"], 2,
             "the folder and its baseline have"),
            (["report", str(copy), "--out", str(copy / "report.md")], 2, "is a file")):
        result = runner.invoke(main, args)
        assert result.exit_code == code and message in result.output, (args, result.output)
    with pytest.raises(ConfigError):
        write_report(copy, out=copy / "summary.json")


# ----------------------------------------------------------------------------- audits


def test_an_audit_report_shows_the_verdict_checks_trend_and_regressed_questions(mini: Path, mini_baseline: Path,
                                                                               tmp_path: Path) -> None:
    old, new, drops = audit_folders(tmp_path / "audits", mini, mini_baseline)
    old_id, new_id = read_audit(old)["id"], read_audit(new)["id"]  # audits are keyed by id, not time
    assert audit_history(new, read_audit(new)) == [
        {"audit": old_id, "run": "dense", "metric": "context_recall@5", "value": 0.7,
         "ci_low": pytest.approx(0.6), "ci_high": pytest.approx(0.8)},
        {"audit": new_id, "run": "dense", "metric": "context_recall@5", "value": 0.6,
         "ci_low": pytest.approx(0.5), "ci_high": pytest.approx(0.7)}]
    result = CliRunner().invoke(main, ["report", str(new)], catch_exceptions=False)
    assert result.exit_code == 0 and result.output.startswith("audit report written to")
    page = (new / "report.html").read_text()
    assert "<div class='verdict bad'><b>REGRESSION</b>" in page
    [checks] = tables(page, "checks")
    assert checks[1][:5] == ["dense", "context_recall@5", "0.600 [0.50, 0.70]", "0.700", "-0.100 [-0.15, -0.05]"]
    trend = next(s for s in specs(page) if "facet" in s)
    assert [(d["audit"], d["value"]) for d in trend["data"]["values"]] == [(old_id, 0.7), (new_id, 0.6)]
    [regressed] = tables(page, "moved")
    assert [row[4:] for row in regressed[1:]] == [[f"{d['baseline']:.3f}", f"{d['value']:.3f}", f"{d['diff']:+.3f}"]
                                                  for d in sorted(drops, key=lambda d: d["diff"])]
    # the regressed question's chunks: this audit's and the baseline audit's (found beside it)
    assert "this audit: dense top 5" in page and "baseline: dense top 5" in page
    assert "Judge drift" in page and "c&lt;2&gt;" in page
    assert tables(page, "metrics") == tables((mini / "report.html").read_text(), "metrics")
    md = (new / "report.md").read_text()
    assert md.startswith(f"# judge-eval audit {new.name.replace('_', chr(92) + '_')}: **REGRESSION**")
    assert "| dense | `context_recall@5` | 0.600 [0.50, 0.70] | 0.700 | -0.100 [-0.15, -0.05] |" in md
    # an audit has its own baseline; a foreign schema is refused
    assert CliRunner().invoke(main, ["report", str(new), "--baseline", str(old)]).exit_code == 2
    (old / "audit.json").write_text(json.dumps({"schema": "other"}))
    with pytest.raises(InputError, match="not a judge-eval audit"):
        read_audit(old)
