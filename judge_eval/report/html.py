"""``report.html``: one self-contained page (no network) for a results folder or an audit.

- :func:`report_html` (a results folder, optionally against a baseline folder): each metric per
  run with its CI; the judge's agreement with humans when labels exist (confusion matrix,
  judged vs human scatter, every statistic); the questions that moved most against the baseline,
  each with its chunks and the judge's evidence one click away; the reference statements that no
  run's top k supports (corpus gaps) and those only some runs miss (retriever gaps).
- :func:`audit_html` (the parsed ``audit.json`` of docs/audit.md): the verdict, every check with
  its paired difference, the trend over past audits, the regressed questions, the canary, then
  the sections above for the audit's own results.

Plots are Vega-Lite specs (:mod:`judge_eval.report.plots`) drawn by the vendored scripts, which
the page inlines; every plot has its numbers in a table under it, open when the plots cannot be
drawn (no vendored scripts, JavaScript off). All text from the data is escaped; the page's
Content-Security-Policy forbids every network request.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from judge_eval.report import analysis, plots
from judge_eval.report.source import ReportSource

__all__ = ["audit_html", "report_html", "script_json"]

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data:; font-src data:")


DOT, YES, NO = " \u00b7 ", "\u2713", "\u2717"


class Raw(str):
    """HTML that is already safe (built here from escaped parts)."""


def esc(value: Any) -> str:
    return value if isinstance(value, Raw) else html.escape("" if value is None else str(value), quote=True)


def num(v: Any, digits: int = 3, sign: bool = False) -> str:
    """A number as the report prints it; ``-`` for undefined."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) and not sign:
        return str(v)
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def ci(lo: Any, hi: Any, digits: int = 2, sign: bool = False) -> str:
    if lo is None or hi is None or lo != lo or hi != hi:
        return ""
    return f"[{num(lo, digits, sign)}, {num(hi, digits, sign)}]"


def script_json(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">`` (``<``, ``>``, ``&`` and the
    JavaScript line separators escaped)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, rep in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, rep)
    return text


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{esc(cls)}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def mean_cell(mean: Any, lo: Any, hi: Any) -> Raw:
    interval = ci(lo, hi)
    return Raw(f"<b>{esc(num(mean))}</b>" + (f" <small>{esc(interval)}</small>" if interval else ""))


# ----------------------------------------------------------------------------- evidence


def highlight(text: str, quotes: dict[str, str]) -> str:
    """``text`` escaped, with each evidence quote found in it (exactly, else ignoring case)
    wrapped in ``<mark>`` titled with its statement numbers (overlapping quotes share a mark)."""
    spans: list[list[Any]] = []
    lower = text.lower()
    for statement, quote in quotes.items():
        q = quote.strip()
        at = text.find(q) if q else -1
        if q and at < 0:
            at = lower.find(q.lower())
        if at >= 0:
            spans.append([at, at + len(q), [statement]])
    spans.sort(key=lambda s: (s[0], s[1]))
    merged: list[list[Any]] = []
    for span in spans:
        if merged and span[0] < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], span[1])
            merged[-1][2] += span[2]
        else:
            merged.append(span)
    out, pos = [], 0
    for start, end, statements in merged:
        out.append(esc(text[pos:start]))
        out.append(f"<mark title='statement {esc(', '.join(statements))}'>{esc(text[start:end])}</mark>")
        pos = end
    out.append(esc(text[pos:]))
    return "".join(out)


def chunks_html(chunks: list[dict[str, Any]]) -> str:
    """A run's judged top k for one question: rank, chunk id, grade, the statements it supports,
    its text with the evidence marked, the quotes and the judge's reason."""
    if not chunks:
        return "<p class='muted'>no judged chunk</p>"
    items = []
    for c in chunks:
        head = [f"#{c['rank']}", f"<code>{esc(c['chunk_id'])}</code>"]
        if c["error"]:
            head.append(f"<span class='bad'>judge error: {esc(c['error'])}</span>")
        else:
            grade = num(c["grade"], 0)
            capped = num(c["capped_grade"], 0)
            head.append(f"grade {esc(grade)}" + (f" (counted as {esc(capped)})" if capped != grade else ""))
            head.append("supports " + (esc(", ".join(str(s) for s in c["supported"])) if c["supported"] else "nothing"))
        text = c["chunk_text"] if isinstance(c["chunk_text"], str) else ""
        quotes = "".join(f"<li>statement {esc(s)}: \u201c{esc(q)}\u201d</li>" for s, q in c["evidence"].items())
        items.append(
            f"<li class='chunk'><div class='chunk-head'>{DOT.join(head)}</div>"
            f"<blockquote>{highlight(text, c['evidence']) if text else '<i>(no text)</i>'}</blockquote>"
            + (f"<ul class='evidence'>{quotes}</ul>" if quotes else "")
            + (f"<div class='reason'>{esc(c['reason'])}</div>" if c["reason"] else "") + "</li>")
    return f"<ol class='chunks'>{''.join(items)}</ol>"


def question_detail(anchor: str, summary_html: str, statements: list[tuple[int, str]],
                    sides: list[tuple[str, list[dict[str, Any]]]]) -> str:
    """A collapsed block: the summary line; open, the reference statements (which side's top k
    supports each) and each side's chunks with the judge's evidence."""
    supported = [set().union(*(c["supported"] for c in chunks)) if chunks else set() for _, chunks in sides]
    st_rows = []
    for n, text in statements:
        marks = " ".join(f"<span class='{'yes' if n in s else 'no'}'>{esc(title.split(':')[0])} "
                         f"{YES if n in s else NO}</span>" for (title, _), s in zip(sides, supported, strict=True))
        st_rows.append(f"<li value='{n}'>{esc(text)} {marks}</li>")
    st = (f"<ol class='statements'>{''.join(st_rows)}</ol>" if st_rows
          else "<p class='muted'>no reference statements</p>")
    cols = "".join(f"<div><h4>{esc(title)}</h4>{chunks_html(chunks)}</div>" for title, chunks in sides)
    return (f"<details class='question' id='{esc(anchor)}'><summary>{summary_html}</summary>"
            f"<div class='detail'><h4>Reference statements</h4>{st}<div class='sides'>{cols}</div></div></details>")


# ----------------------------------------------------------------------------- the page


class Page:
    """Sections, plots and their specs, assembled into one HTML document."""

    def __init__(self, title: str, *, with_plots: bool = True) -> None:
        self.title = title
        self.scripts = plots.vega_scripts() if with_plots else None
        self.parts: list[str] = []
        self.nav: list[tuple[str, str]] = []
        self.specs: list[tuple[str, dict[str, Any]]] = []

    @property
    def plotting(self) -> bool:
        return self.scripts is not None

    def section(self, anchor: str, title: str, body: str) -> None:
        self.nav.append((anchor, title))
        self.parts.append(f"<section id='{esc(anchor)}'><h2>{esc(title)}</h2>{body}</section>")

    def figure(self, spec: dict[str, Any] | None, numbers: str, caption: str = "", label: str = "") -> str:
        """A plot with its numbers under it (collapsed once the plot is drawn), or only the
        numbers when plots are unavailable."""
        cap = f"<figcaption>{caption}</figcaption>" if caption else ""
        if spec is None or not self.plotting:
            return f"<figure class='numbers-only'>{cap}{numbers}</figure>"
        plot_id = f"plot-{len(self.specs) + 1}"
        self.specs.append((plot_id, {**spec, "description": label or "plot"}))  # Vega's aria-label
        return (f"<figure><div class='plot' id='{plot_id}' data-label='{esc(label or 'plot')}'></div>{cap}"
                f"<details class='numbers' open><summary>the numbers</summary>{numbers}</details></figure>")

    def render(self, header: str) -> str:
        nav = " ".join(f"<a href='#{esc(a)}'>{esc(t)}</a>" for a, t in self.nav)
        specs = "".join(f"<script type='application/json' class='vl-spec' data-target='{pid}'>{script_json(s)}</script>"
                        for pid, s in self.specs)
        if self.plotting and self.specs:
            scripts = f"{specs}<script>{self.scripts}</script><script>{BOOT}</script>"
        else:
            reason = ("plots are off" if self.scripts is None else "nothing to plot")
            scripts = f"<script>document.body.dataset.plots='0';document.body.dataset.ready='1';" \
                      f"document.body.dataset.why={json.dumps(reason)};</script>"
        return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
                "<meta name='viewport' content='width=device-width, initial-scale=1'>"
                f"<title>{esc(self.title)}</title><style>{STYLE}</style></head><body><main>"
                f"{header}<nav>{nav}</nav>{''.join(self.parts)}"
                "<footer>Written by judge-eval. Every number here is in the folder's files (summary.json, "
                "per_question.csv, verdicts.jsonl, statements.jsonl); plots drawn with Vega-Lite, inlined.</footer>"
                f"</main>{scripts}</body></html>\n")


def _header(title: str, info: dict[str, Any], extra: list[str] | None = None) -> str:
    judge = info.get("judge") or {}
    lines = []
    if judge.get("approximate"):
        lines.append("<p class='warn'>Judge <code>{}</code> is the offline <b>approximation</b> (lexical overlap, "
                     "not an LLM): for demos and smoke tests.</p>".format(esc(judge.get("identity"))))
    facts: list[tuple[str, str]] = []
    if judge:
        facts.append(("judge", Raw(f"<code>{esc(judge.get('identity'))}</code>")))
    if info.get("prompts"):
        facts.append(("prompts", ", ".join(str(v) for v in info["prompts"].values())))
    ds = info.get("dataset") or {}
    if ds:
        facts.append(("dataset", f"{ds.get('questions')} questions ({ds.get('questions_with_reference')} with a "
                                 f"reference), runs {', '.join(ds.get('runs') or [])}, human labels "
                                 f"{ds.get('human_labels', 0)}, fingerprint {ds.get('fingerprint')}"))
    acct = info.get("accounting") or {}
    if acct:
        facts.append(("judge work", accounting(acct)))
        if acct.get("partial"):
            lines.append("<p class='bad'><b>Partial result</b>: a budget stopped the judge before every task ran.</p>")
    for line in extra or []:
        facts.append(tuple(line.split(": ", 1)) if ": " in line else ("", line))  # type: ignore[arg-type]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    return f"<header><h1>{esc(title)}</h1>{''.join(lines)}<dl class='facts'>{dl}</dl></header>"


def accounting(a: dict[str, Any]) -> str:
    """The judge's work in one line (the keys of ``summary.json``'s ``accounting`` that are set)."""
    names = [("tasks", "tasks"), ("calls", "calls"), ("cache_hits", "cache hits"), ("total_tokens", "tokens"),
             ("cost_usd", "cost"), ("errors", "errors"), ("unverified_evidence", "unverified evidence"),
             ("skipped", "skipped (budget)")]
    parts = []
    for key, label in names:
        value = a.get(key)
        if value is None or (key == "skipped" and not value):
            continue
        parts.append(f"{label} ${float(value):.4f}" if key == "cost_usd" else f"{label} {value}")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- sections


def metrics_section(page: Page, src: ReportSource) -> None:
    runs, measures = src.runs, src.measures
    by = {(r["run"], r["measure"]): r for r in src.summary}
    rows = []
    for m in measures:
        row: list[Any] = [Raw(f"<code>{esc(m)}</code>")]
        ns = set()
        for run in runs:
            r = by.get((run, m))
            row.append("-" if r is None else mean_cell(r.get("mean"), r.get("ci_low"), r.get("ci_high")))
            if r is not None and r.get("n") is not None:
                ns.add(int(r["n"]))
        row.append("/".join(str(n) for n in sorted(ns)))
        rows.append(row)
    numbers = table(["measure", *runs, "n"], rows, "metrics")
    notes = [f"{m}: {r['n_missing']} of {int(r.get('n') or 0) + int(r['n_missing'])} questions have no value in run "
             f"{r['run']}" for r in src.summary for m in [r["measure"]] if r.get("n_missing")]
    body = page.figure(plots.metrics_spec(src.summary, runs, measures) if src.summary else None, numbers,
                       "Each metric a row, each run a dot: the mean over questions, with its 95% bootstrap CI.",
                       "each metric per run with confidence intervals")
    if notes:
        body += (f"<details><summary>{len(notes)} (run, metric) pairs leave questions out of the mean"
                 "</summary><p class='muted'>Why each value is missing: missing.csv.</p><ul>"
                 + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></details>")
    page.section("metrics", "Metrics per run", body)


def _stat_rows(stats: list[dict[str, Any]], first: Sequence[str]) -> list[list[Any]]:
    return [[*(r.get(f) for f in first), Raw(f"<b>{esc(num(r.get('value')))}</b>"),
             ci(r.get("ci_low"), r.get("ci_high")), r.get("n"), r.get("n_questions"), r.get("reason") or ""]
            for r in stats]


def agreement_section(page: Page, src: ReportSource, trust: dict[str, Any] | None = None) -> None:
    trust = trust if trust is not None else src.trust
    if not trust:
        return
    ag = trust.get("agreement") or {}
    counts = ag.get("counts") or {}
    settings = ag.get("settings") or {}
    parts = [f"<p>Chunks the judge judged that humans labelled: <b>{esc(counts.get('pairs'))}</b> pairs "
             f"(judged {esc(counts.get('judged'))}, of them unlabelled {esc(counts.get('unlabelled'))}, "
             f"judge errors {esc(counts.get('errored'))}; human labels outside every judged top k: "
             f"{esc(counts.get('labelled_not_judged'))}). Judge-relevant: grade \u2265 "
             f"{esc(settings.get('judge_threshold'))}; human-relevant: grade \u2265 "
             f"{esc(settings.get('human_threshold'))}.</p>"]
    conf = ag.get("confusion") or {}
    grid = []
    if conf:
        conf_rows = [[f"humans: {h.replace('human_', '').replace('_', ' ')}",
                      *(conf[h].get(j) for j in ("judge_not_relevant", "judge_relevant"))] for h in conf]
        grid.append(page.figure(plots.confusion_spec(conf),
                                table(["", "judge: not relevant", "judge: relevant"], conf_rows, "confusion"),
                                "Chunk level: where the judge and the humans disagree.", "confusion matrix"))
    points = analysis.agreement_points(src)
    if points["points"]:
        q_rows = _stat_rows(ag.get("question") or [], ("judged", "human", "statistic"))
        grid.append(page.figure(plots.scatter_spec(points, src.runs),
                                table(["judged", "human", "statistic", "value", "95% CI", "rows", "questions", "note"],
                                      q_rows, "stats"),
                                "Question level: each (run, question)'s judged value against its human one; on the "
                                "dashed line they agree.", "judged vs human scatter"))
    if grid:
        parts.append(f"<div class='grid'>{''.join(grid)}</div>")
    parts.append("<h3>Chunk level</h3>" + table(["statistic", "value", "95% CI", "n", "questions", "note"],
                                                _stat_rows(ag.get("chunk") or [], ("statistic",)), "stats"))
    if ag.get("question") and not points["points"]:
        parts.append("<h3>Question level</h3>" + table(
            ["judged", "human", "statistic", "value", "95% CI", "rows", "questions", "note"],
            _stat_rows(ag["question"], ("judged", "human", "statistic")), "stats"))
    if ag.get("system"):
        parts.append("<h3>System level: do the two metrics rank the runs alike?</h3>" + table(
            ["judged", "human", "statistic", "value", "95% CI", "runs", "questions", "note"],
            _stat_rows(ag["system"], ("judged", "human", "statistic")), "stats"))
    est = trust.get("estimates") or []
    if est and any((e.get("ppi_n_unlabelled") or 0) > 0 for e in est):
        parts.append(f"<h3>Human metrics on every question</h3><p>{esc(trust.get('labelled_questions'))} of "
                     f"{esc(trust.get('questions'))} questions are labelled; 'corrected' is the judge on every "
                     "question corrected by the labelled ones (prediction-powered, 95% CI).</p>" + table(
                         ["run", "measure", "labelled only", "corrected", "judge only", "labelled / unlabelled"],
                         [[e.get("run"), e.get("human"), mean_cell(e.get("human_mean"), e.get("human_ci_low"),
                                                                   e.get("human_ci_high")),
                           mean_cell(e.get("ppi_mean"), e.get("ppi_ci_low"), e.get("ppi_ci_high")),
                           mean_cell(e.get("judge_mean"), e.get("judge_ci_low"), e.get("judge_ci_high")),
                           f"{e.get('ppi_n_labelled')} / {e.get('ppi_n_unlabelled')}"] for e in est], "stats"))
    elif est:
        parts.append(f"<p>All {esc(trust.get('labelled_questions'))} questions with a judged value are labelled, so "
                     "the human numbers need no correction from the judge.</p>")
    page.section("agreement", "How far the judge can be trusted", "".join(parts))


def _delta_html(delta: float) -> str:
    return f"<span class='delta {'up' if delta > 0 else 'down'}'>{esc(num(delta, sign=True))}</span>"


def movers_section(page: Page, src: ReportSource, baseline: ReportSource | None, *, metric: str | None,
                   limit: int) -> None:
    title = "Questions that moved most"
    if baseline is None:
        page.section("moved", title, "<p class='muted'>Needs a baseline: <code>judge-eval report DIR --baseline "
                                     "OLD_DIR</code> compares each question with an earlier results folder.</p>")
        return
    moved = analysis.movers(src, baseline, metric=metric, limit=limit)
    pairs = ", ".join(a if a == b else f"{a} (baseline: {b})" for a, b in moved["pairs"]) or "none"
    intro = (f"<p>Baseline <code>{esc(baseline.name)}</code>. Metric <code>{esc(moved['metric'])}</code>, runs "
             f"matched by name: {esc(pairs)}. Of {moved['compared']} (run, question) pairs with a value in both, "
             f"{moved['moved']} moved ({moved['up']} up, {moved['down']} down); "
             f"{moved['missing']} pairs lack a value in one of them. The {len(moved['rows'])} largest changes:</p>")
    if not moved["rows"]:
        page.section("moved", title, intro.replace(" The 0 largest changes:", ""))
        return
    k = max(src.ks) if src.ks else None
    bk = max(baseline.ks) if baseline.ks else None
    anchors = [f"moved-{i + 1}" for i in range(len(moved["rows"]))]
    details = []
    for anchor, r in zip(anchors, moved["rows"], strict=True):
        summary = (f"{_delta_html(r['delta'])} <b>{esc(r['run'])}</b> \u00b7 {esc(r['question'] or r['question_id'])} "
                   f"<small>({esc(num(r['baseline']))} \u2192 {esc(num(r['current']))}, question "
                   f"<code>{esc(r['question_id'])}</code>)</small>")
        details.append(question_detail(anchor, summary, analysis.statement_texts(src, r["question_id"]), [
            (f"current: {r['run']} top {k}", analysis.ranked_chunks(src, r["question_id"], r["run"], k)),
            (f"baseline: {r['baseline_run']} top {bk}",
             analysis.ranked_chunks(baseline, r["question_id"], r["baseline_run"], bk)),
        ]))
    numbers = table(["#", "run", "question", "baseline", "current", "change"],
                    [[i + 1, r["run"], r["question"] or r["question_id"], num(r["baseline"]), num(r["current"]),
                      num(r["delta"], sign=True)] for i, r in enumerate(moved["rows"])], "moved")
    body = intro + page.figure(plots.movers_spec(moved, anchors), numbers,
                               "Click a dot, or a line below, for the question's chunks and the judge's evidence.",
                               "questions that moved most")
    page.section("moved", title, body + "".join(details))


def gaps_section(page: Page, src: ReportSource, *, limit: int = 100) -> None:
    gaps = analysis.statement_gaps(src)
    title = "Reference statements the runs' top k miss"
    if not gaps["statements"]:
        page.section("statements", title, "<p class='muted'>No reference statements with judged chunks in this "
                                          "folder (verdicts.jsonl or statements.jsonl is missing or empty).</p>")
        return
    k, runs = gaps["k"], gaps["runs"]
    one_run = len(runs) == 1
    intro = (f"<p>{gaps['statements']} reference statements of {gaps['questions']} questions, each checked against "
             f"every run's judged top {k} (a chunk supports a statement when the judge says so with verified "
             f"evidence).</p><ul class='legend'>"
             f"<li><b>Corpus gap</b> ({len(gaps['corpus'])}): no chunk in the judged pool (every run's top {k}) "
             "supports it. No retriever found it, so the corpus may not hold it at all: check the corpus before "
             "tuning a retriever." + (" With a single run the pool is that run's top k, so a corpus gap cannot be "
                                      "told from that run's miss here." if one_run else "") + "</li>"
             f"<li><b>Retriever gap</b> ({len(gaps['retriever'])}): some run's top {k} supports it, another's does "
             "not: the corpus has it and the runs that miss it fail to rank it; fix those retrievers.</li>"
             + (f"<li><b>Unknown</b> ({len(gaps['unknown'])}): a judge call that could decide it failed.</li>"
                if gaps["unknown"] else "") + "</ul>")
    count_rows = [[run, *(gaps["per_run"][run][key] for key, *_ in plots.GAP_KINDS)] for run in runs]
    numbers = table(["run", "supported", "retriever gap", "corpus gap", "unknown"], count_rows, "gaps")
    body = intro + page.figure(plots.gaps_spec(gaps), numbers, f"Per run, its reference statements by what its top "
                                                                f"{k} does with them.", "statement coverage per run")
    corpus = gaps["corpus"]
    if corpus:
        shown = corpus[:limit]
        body += (f"<details><summary>Corpus gaps: {len(corpus)} statements no run's top {k} supports"
                 + (f" (the first {len(shown)})" if len(shown) < len(corpus) else "") + "</summary>"
                 + table(["question", "#", "statement"], [[r["question"] or r["question_id"], r["statement"], r["text"]]
                                                          for r in shown], "gaplist") + "</details>")
    retr = gaps["retriever"]
    if retr:
        shown = retr[:limit]
        body += (f"<details><summary>Retriever gaps: {len(retr)} statements some runs' top {k} supports and others' "
                 "miss" + (f" (the first {len(shown)})" if len(shown) < len(retr) else "") + "</summary>"
                 + table(["question", "#", "statement", "missed by", "found by (best rank)"],
                         [[r["question"] or r["question_id"], r["statement"], r["text"], ", ".join(r["missed_by"]),
                           ", ".join(f"{run} #{rank}" for run, rank in r["found_by"].items())] for r in shown],
                         "gaplist") + "</details>")
    page.section("statements", title, body)


def report_html(src: ReportSource, *, baseline: ReportSource | None = None, metric: str | None = None,
                limit: int = 15, with_plots: bool = True, title: str | None = None) -> str:
    """The HTML report of a results folder (``baseline``: an earlier folder to find the
    questions that moved most in ``metric``, default :func:`analysis.default_metric`)."""
    page = Page(title or f"judge-eval report{': ' + src.name if src.name else ''}", with_plots=with_plots)
    extra = [f"baseline: {baseline.name}"] if baseline is not None else []
    metrics_section(page, src)
    agreement_section(page, src)
    movers_section(page, src, baseline, metric=metric, limit=limit)
    gaps_section(page, src)
    return page.render(_header(page.title, src.info, extra))


# ----------------------------------------------------------------------------- audits


def _checks_section(page: Page, doc: dict[str, Any]) -> None:
    checks = [c for c in doc.get("checks") or [] if isinstance(c, dict)]
    if not checks:
        return
    rows = [[c.get("run"), c.get("metric"), mean_cell(c.get("value"), c.get("ci_low"), c.get("ci_high")),
             num(c.get("baseline_value")),
             Raw(f"{esc(num(c.get('diff'), sign=True))} "
                 f"<small>{esc(ci(c.get('diff_ci_low'), c.get('diff_ci_high'), sign=True))}</small>"),
             num(c.get("p_holm"), 4), num(c.get("floor")), num(c.get("max_drop")),
             Raw(f"<span class='{'bad' if c.get('verdict') == 'regression' else 'ok'}'>{esc(c.get('verdict'))}</span>"),
             "; ".join(str(x) for x in c.get("reasons") or [])] for c in checks]
    numbers = table(["run", "metric", "value", "baseline", "difference", "p (Holm)", "floor", "allowed drop", "verdict",
                     "why"], rows, "checks")
    has_diff = any(c.get("diff") is not None for c in checks)
    body = page.figure(plots.differences_spec(checks) if has_diff else None, numbers,
                       "Each checked metric's mean paired difference from the baseline with its 95% CI; the red "
                       "tick is the largest drop allowed.", "paired differences from the baseline")
    gate = doc.get("gate") or {}
    if gate:
        body += (f"<p class='muted'>A regression: a drop larger than allowed with Holm-corrected p \u2264 "
                 f"{esc(gate.get('alpha'))} (Holm over {esc(gate.get('family_size'))} checks), "
                 "or a value below its floor.</p>")
    page.section("checks", "Checks against the baseline", body)


def _trend_section(page: Page, doc: dict[str, Any], history: list[dict[str, Any]] | None) -> None:
    checks = [c for c in doc.get("checks") or [] if isinstance(c, dict)]
    rows = [dict(r) for r in history or []]
    current = str(doc.get("id") or doc.get("started") or "this audit")
    if not any(str(r.get("audit")) == current for r in rows):
        rows += [{"audit": current, "run": c.get("run"), "metric": c.get("metric"), "value": c.get("value"),
                  "ci_low": c.get("ci_low"), "ci_high": c.get("ci_high")} for c in checks]
    rows = [r for r in rows if r.get("value") is not None]
    audits = list(dict.fromkeys(str(r["audit"]) for r in rows))
    if len(audits) < 2:
        page.section("trend", "Trend over past audits", "<p class='muted'>Only this audit so far: the trend "
                                                          "appears from the second audit on.</p>")
        return
    runs = list(dict.fromkeys(str(r["run"]) for r in rows))
    metrics = list(dict.fromkeys(str(r["metric"]) for r in rows))
    numbers = table(["audit", "run", "metric", "value", "95% CI"],
                    [[r["audit"], r["run"], r["metric"], num(r["value"]), ci(r.get("ci_low"), r.get("ci_high"))]
                     for r in rows], "trend")
    page.section("trend", "Trend over past audits",
                 page.figure(plots.trend_spec(rows, runs, metrics), numbers,
                             f"{len(audits)} audits, oldest first; band = 95% CI.", "trend over past audits"))


def _regressed_section(page: Page, doc: dict[str, Any], current: ReportSource | None,
                       baseline: ReportSource | None, limit: int) -> None:
    rows = []
    for c in doc.get("checks") or []:
        for q in c.get("regressed_questions") or []:
            if q.get("diff") is None:
                continue
            rows.append({"run": c.get("run"), "baseline_run": c.get("run"), "metric": c.get("metric"),
                         "question_id": str(q.get("question_id")), "baseline": q.get("baseline"),
                         "current": q.get("value"), "delta": q.get("diff"), "question": ""})
    if not rows:
        return
    texts = analysis.question_texts(current) if current is not None else {}
    for r in rows:
        r["question"] = texts.get(r["question_id"], "")
    rows.sort(key=lambda r: r["delta"])
    rows = rows[:limit]
    anchors = [f"regressed-{i + 1}" for i in range(len(rows))]
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    moved = {"metric": " / ".join(metrics), "rows": [{**r, "run": f"{r['run']} {r['metric']}"} for r in rows]}
    numbers = table(["#", "run", "metric", "question", "baseline", "this audit", "change"],
                    [[i + 1, r["run"], r["metric"], r["question"] or r["question_id"], num(r["baseline"]),
                      num(r["current"]), num(r["delta"], sign=True)] for i, r in enumerate(rows)], "moved")
    body = page.figure(plots.movers_spec(moved, anchors), numbers,
                       "The largest per-question drops of each checked metric; click one for its chunks.",
                       "questions that dropped most")
    k = max(current.ks) if current is not None and current.ks else None
    bk = max(baseline.ks) if baseline is not None and baseline.ks else None
    for anchor, r in zip(anchors, rows, strict=True):
        summary = (f"{_delta_html(r['delta'])} <b>{esc(r['run'])}</b> <code>{esc(r['metric'])}</code> \u00b7 "
                   f"{esc(r['question'] or r['question_id'])} <small>({esc(num(r['baseline']))} \u2192 "
                   f"{esc(num(r['current']))})</small>")
        sides = []
        if current is not None:
            sides.append((f"this audit: {r['baseline_run']} top {k}",
                          analysis.ranked_chunks(current, r["question_id"], r["baseline_run"], k)))
        if baseline is not None:
            sides.append((f"baseline: {r['baseline_run']} top {bk}",
                          analysis.ranked_chunks(baseline, r["question_id"], r["baseline_run"], bk)))
        statements = analysis.statement_texts(current, r["question_id"]) if current is not None else []
        body += question_detail(anchor, summary, statements, sides)
    page.section("moved", "Questions that dropped most", body)


def _canary_section(page: Page, doc: dict[str, Any]) -> None:
    canary = doc.get("canary")
    if not isinstance(canary, dict):
        return
    drift = canary.get("drift")
    head = (f"<p class='{'bad' if drift else 'ok'}'><b>{'Judge drift' if drift else 'No judge drift'}</b>: "
            f"{esc(canary.get('statistic'))} {esc(num(canary.get('value')))} against the floor "
            f"{esc(num(canary.get('floor')))} on {esc(canary.get('judged'))} of {esc(canary.get('pairs'))} "
            f"human-labelled pairs re-judged without the cache (accuracy {esc(num(canary.get('accuracy')))}, "
            f"Cohen's kappa {esc(num(canary.get('cohen_kappa')))}, errors {esc(canary.get('errors'))}).</p>")
    changed = canary.get("changed") or []
    if changed:
        head += (f"<h3>Grades changed since audit {esc(canary.get('previous_audit'))}</h3>" + table(
            ["question", "chunk", "human grade", "judge grade", "previous judge grade"],
            [[c.get("question_id"), c.get("chunk_id"), c.get("human_grade"), c.get("judge_grade"),
              c.get("previous_judge_grade")] for c in changed], "canary"))
    items = canary.get("items") or []
    if items:
        head += ("<details><summary>Every canary pair</summary>" + table(
            ["question", "chunk", "human grade", "judge grade", "error"],
            [[i.get("question_id"), i.get("chunk_id"), i.get("human_grade"), i.get("judge_grade"), i.get("error") or ""]
             for i in items], "canary") + "</details>")
    page.section("canary", "Canary: is the judge still the judge?", head)


def audit_html(doc: dict[str, Any], *, current: ReportSource | None = None, baseline: ReportSource | None = None,
               history: list[dict[str, Any]] | None = None, limit: int = 15, with_plots: bool = True) -> str:
    """The HTML report of an audit: ``doc`` is the parsed ``audit.json`` (docs/audit.md);
    ``current`` the audit folder's own results (metrics, agreement, statement sections and the
    regressed questions' chunks), ``baseline`` the baseline audit's results when at hand (its
    chunks beside them), ``history`` earlier audits' values for the trend: rows ``{audit, run,
    metric, value, ci_low, ci_high}`` (the audit's own checks are added)."""
    verdict = str(doc.get("verdict") or "unknown")
    page = Page(f"judge-eval audit {doc.get('id', '')}".strip(), with_plots=with_plots)
    info = {k: doc[k] for k in ("judge", "prompts", "dataset", "accounting") if isinstance(doc.get(k), dict)}
    base = doc.get("baseline") if isinstance(doc.get("baseline"), dict) else None
    extra = [f"started: {doc.get('started')}"]
    extra.append("baseline: " + (f"{base.get('mode')}, audit {', '.join(base.get('ids') or [])}" if base else "none"))
    header = _header(page.title, info, extra)
    cls = {"pass": "ok", "regression": "bad", "judge_failed": "bad"}.get(verdict, "warn")
    banner = (f"<div class='verdict {cls}'><b>{esc(verdict.upper().replace('_', ' '))}</b> (exit code "
              f"{esc(doc.get('exit_code'))})<ul>" + "".join(f"<li>{esc(h)}</li>" for h in doc.get("headline") or [])
              + "</ul>" + ("<p>" + esc(doc["judge_failure"]) + "</p>" if doc.get("judge_failure") else "")
              + "".join(f"<p class='muted'>{esc(n)}</p>" for n in doc.get("notes") or []) + "</div>")
    header = header.replace("</header>", banner + "</header>")
    _checks_section(page, doc)
    _trend_section(page, doc, history)
    _regressed_section(page, doc, current, baseline, limit)
    _canary_section(page, doc)
    if current is not None:
        metrics_section(page, current)
        agreement_section(page, current, doc.get("trust") if isinstance(doc.get("trust"), dict) else None)
        gaps_section(page, current)
    elif isinstance(doc.get("trust"), dict):
        empty = ReportSource(summary=[], info={"trust": doc["trust"]},
                             per_question=pd.DataFrame(columns=["run", "question_id"]))
        agreement_section(page, empty, doc["trust"])
    return page.render(header)


# ----------------------------------------------------------------------------- style and script

STYLE = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1f2328;
background:#fff}
main{max-width:1200px;margin:0 auto;padding:12px 24px 40px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;padding-top:8px;border-top:1px solid #d0d7de}
h3{font-size:15px;margin:18px 0 6px}h4{font-size:13px;margin:10px 0 4px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f6f8fa;padding:0 3px;border-radius:3px;
overflow-wrap:anywhere}
nav{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #eee;z-index:2}
nav a{margin-right:14px;color:#0969da;text-decoration:none}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
dl.facts dt{color:#57606a}dl.facts dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f6f8fa}
table.metrics td,table.stats td,table.checks td{text-align:right}
table.metrics td:first-child,table.stats td:first-child,table.checks td:first-child{text-align:left}
small,.muted{color:#57606a}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
.bad{color:#b3261e}.ok{color:#1a7f37}
.verdict{border:2px solid;border-radius:8px;padding:8px 12px;margin:8px 0}
.verdict.ok{border-color:#1a7f37}.verdict.bad{border-color:#b3261e}.verdict.warn{border-color:#d4a72c}
figure{margin:8px 0}figcaption{color:#57606a;font-size:13px}
.plot{max-width:100%;overflow-x:auto}.plot svg{max-width:100%;height:auto}
.plot .vega-bindings{margin:4px 0}
.grid{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}.grid>figure{flex:0 1 auto;min-width:0;max-width:100%}
details{margin:4px 0}summary{cursor:pointer}
section,details.question{scroll-margin-top:44px}
details.question{border:1px solid #d0d7de;border-radius:6px;padding:4px 8px;margin:6px 0}
details.question[open]{background:#fbfcfd}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:16px}.sides>div{min-width:0}
ol.chunks{padding-left:0;list-style:none;margin:0}li.chunk{border-top:1px solid #eee;padding:4px 0}
.chunk-head{font-size:12px;color:#57606a}
blockquote{margin:2px 0;padding:2px 8px;border-left:3px solid #d0d7de;overflow-wrap:anywhere;white-space:pre-wrap}
mark{background:#fff0a8;padding:0 1px}
ul.evidence{margin:2px 0;font-size:12px;color:#444;overflow-wrap:anywhere}.reason{font-size:12px;color:#57606a}
ol.statements li{overflow-wrap:anywhere}
span.yes,span.no{font-size:11px;border-radius:3px;padding:0 4px;margin-left:4px;white-space:nowrap}
span.yes{background:#dafbe1;color:#1a7f37}span.no{background:#ffebe9;color:#b3261e}
.delta{font-weight:bold;font-variant-numeric:tabular-nums}.delta.up{color:#1a7f37}.delta.down{color:#b3261e}
footer{margin-top:32px;color:#57606a;font-size:12px}
"""

#: draws every spec; marks the body ``data-ready`` and ``data-plots`` (drawn count) for tests;
#: a click on a mark with an ``anchor`` (moved questions) opens that question's details
BOOT = r"""
(function () {
  function openAnchor(id) {
    var el = document.getElementById(id);
    if (!el) return;
    if (el.tagName === 'DETAILS') el.open = true;
    el.scrollIntoView({block: 'start'});
  }
  window.addEventListener('hashchange', function () { openAnchor(location.hash.slice(1)); });
  var jobs = [], drawn = 0;
  document.querySelectorAll('script.vl-spec').forEach(function (el) {
    var target = document.getElementById(el.dataset.target);
    try {
      var spec = JSON.parse(el.textContent);
      var view = new vega.View(vega.parse(vegaLite.compile(spec).spec),
                               {renderer: 'svg', container: target, hover: true});
      view.addEventListener('click', function (event, item) {
        var a = item && item.datum && item.datum.anchor;
        if (a) { if (location.hash === '#' + a) openAnchor(a); else location.hash = a; }
      });
      jobs.push(view.runAsync().then(function () {
        drawn += 1;
        target.dataset.drawn = '1';
        var numbers = target.parentNode.querySelector('details.numbers');
        if (numbers) numbers.open = false;
      }));
    } catch (e) {
      console.error('judge-eval report: a plot failed', e);
      target.textContent = 'This plot could not be drawn (' + e + '); its numbers are below.';
    }
  });
  Promise.all(jobs).catch(function (e) { console.error('judge-eval report: a plot failed', e); }).then(function () {
    document.body.dataset.plots = String(drawn);
    document.body.dataset.ready = '1';
    if (location.hash) openAnchor(location.hash.slice(1));
  });
})();
"""
