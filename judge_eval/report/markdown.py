"""``report.md``: the report for CI logs and pull-request comments, in GitHub-flavoured Markdown
(tables, ``<details>`` for the long lists). The same sections and numbers as ``report.html``,
without the pictures. Every text from the data is escaped (Markdown and HTML)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from judge_eval.report import analysis
from judge_eval.report.html import accounting, ci, num
from judge_eval.report.source import ReportSource

__all__ = ["audit_markdown", "md", "report_markdown"]

_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+!|~])")


def md(value: Any, limit: int | None = None) -> str:
    """One table cell or inline text: one line, Markdown and HTML neutralised."""
    text = " ".join(("" if value is None else str(value)).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", text)


def md_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A GitHub table; cells are already formatted (pass text through :func:`md` first).
    ``align``: one letter per column, ``l`` or ``r`` (default: first left, the rest right)."""
    header = list(header)
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(str(h) for h in header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _mean(mean: Any, lo: Any, hi: Any) -> str:
    interval = ci(lo, hi)
    return num(mean) + (f" {interval}" if interval else "")


def _header(title: str, info: dict[str, Any], extra: Sequence[str] = ()) -> list[str]:
    lines = [f"# {md(title)}", ""]
    judge = info.get("judge") or {}
    if judge.get("approximate"):
        lines += [f"> **Approximation:** judge `{judge.get('identity')}` is the offline lexical judge, not an LLM "
                  "(demos and smoke tests).", ""]
    if judge:
        lines.append(f"- judge: `{judge.get('identity')}`")
    if info.get("prompts"):
        lines.append(f"- prompts: {md(', '.join(str(v) for v in info['prompts'].values()))}")
    ds = info.get("dataset") or {}
    if ds:
        lines.append(f"- dataset: {ds.get('questions')} questions ({ds.get('questions_with_reference')} with a "
                     f"reference), runs {md(', '.join(ds.get('runs') or []))}, human labels {ds.get('human_labels', 0)}"
                     f", fingerprint `{ds.get('fingerprint')}`")
    acct = info.get("accounting") or {}
    if acct:
        lines.append(f"- judge work: {md(accounting(acct))}")
    lines += [f"- {md(e)}" for e in extra]
    if acct.get("partial"):
        lines.append("- **partial result**: a budget stopped the judge before every task ran")
    return [*lines, ""]


def _metrics(src: ReportSource) -> list[str]:
    runs, by = src.runs, {(r["run"], r["measure"]): r for r in src.summary}
    rows = []
    for m in src.measures:
        cells, ns = [f"`{m}`"], set()
        for run in runs:
            r = by.get((run, m))
            cells.append("-" if r is None else _mean(r.get("mean"), r.get("ci_low"), r.get("ci_high")))
            if r is not None and r.get("n") is not None:
                ns.add(int(r["n"]))
        rows.append([*cells, "/".join(str(n) for n in sorted(ns))])
    return ["## Metrics per run", "", "mean [95% bootstrap CI] over questions; n = questions with a value "
            "(why the others have none: `missing.csv`).", "",
            md_table(["measure", *(md(r) for r in runs), "n"], rows), ""]


def _stats(rows: list[dict[str, Any]], first: Sequence[str]) -> list[list[str]]:
    return [[*(md(r.get(f)) for f in first), num(r.get("value")), ci(r.get("ci_low"), r.get("ci_high")),
             str(r.get("n")), md(r.get("reason") or "")] for r in rows]


def _agreement(trust: dict[str, Any] | None) -> list[str]:
    if not trust:
        return []
    ag = trust.get("agreement") or {}
    counts = ag.get("counts") or {}
    out = ["## How far the judge can be trusted", "",
           f"{counts.get('pairs')} judged chunks that humans labelled ({counts.get('judged')} judged, "
           f"{counts.get('errored')} judge errors, {counts.get('labelled_not_judged')} human labels outside every "
           "judged top k).", ""]
    conf = ag.get("confusion") or {}
    if conf:
        out += [md_table(["", "judge: not relevant", "judge: relevant"],
                         [[f"humans: {h.replace('human_', '').replace('_', ' ')}",
                           *(str(conf[h].get(j)) for j in ("judge_not_relevant", "judge_relevant"))] for h in conf]),
                ""]
    head = ["value", "95% CI", "n", "note"]
    if ag.get("chunk"):
        out += ["Chunk level:", "", md_table(["statistic", *head], _stats(ag["chunk"], ("statistic",)), "lrrrl"), ""]
    if ag.get("question"):
        out += ["<details><summary>Question level: judged vs human metric per run and question "
                f"({len(ag['question'])} statistics)</summary>", "",
                md_table(["judged", "human", "statistic", *head],
                         _stats(ag["question"], ("judged", "human", "statistic")), "lllrrrl"), "", "</details>", ""]
    if ag.get("system"):
        out += ["<details><summary>System level: do both rank the runs alike?</summary>", "",
                md_table(["judged", "human", "statistic", *head],
                         _stats(ag["system"], ("judged", "human", "statistic")), "lllrrrl"), "", "</details>", ""]
    est = trust.get("estimates") or []
    if est and any((e.get("ppi_n_unlabelled") or 0) > 0 for e in est):
        out += [f"Human metrics on every question ({trust.get('labelled_questions')} of {trust.get('questions')} "
                "labelled; corrected = prediction-powered):", "",
                md_table(["run", "measure", "labelled only", "corrected", "judge only", "labelled / unlabelled"],
                         [[md(e.get("run")), md(e.get("human")),
                           _mean(e.get("human_mean"), e.get("human_ci_low"), e.get("human_ci_high")),
                           _mean(e.get("ppi_mean"), e.get("ppi_ci_low"), e.get("ppi_ci_high")),
                           _mean(e.get("judge_mean"), e.get("judge_ci_low"), e.get("judge_ci_high")),
                           f"{e.get('ppi_n_labelled')} / {e.get('ppi_n_unlabelled')}"] for e in est], "llrrrr"), ""]
    elif est:
        out += [f"All {trust.get('labelled_questions')} questions with a judged value are labelled: the human numbers "
                "need no correction from the judge.", ""]
    return out


def _moved_table(rows: list[dict[str, Any]], current_label: str = "current") -> str:
    return md_table(["#", "run", "question", "baseline", current_label, "change"],
                    [[str(i + 1), md(r["run"]), md(r.get("question") or r["question_id"], 90), num(r["baseline"]),
                      num(r["current"]), num(r["delta"], sign=True)] for i, r in enumerate(rows)], "rllrrr")


def _movers(src: ReportSource, baseline: ReportSource | None, metric: str | None, limit: int) -> list[str]:
    out = ["## Questions that moved most", ""]
    if baseline is None:
        return [*out, "Needs a baseline: `judge-eval report DIR --baseline OLD_DIR`.", ""]
    moved = analysis.movers(src, baseline, metric=metric, limit=limit)
    out += [f"Against `{md(baseline.name)}`, metric `{moved['metric']}`: of {moved['compared']} (run, question) pairs "
            f"with a value in both, {moved['moved']} moved ({moved['up']} up, {moved['down']} down); "
            f"{moved['missing']} lack a value in one of them.", ""]
    if moved["rows"]:
        out += [_moved_table(moved["rows"]), "", "Chunks and the judge's evidence for each: `report.html`.", ""]
    return out


def _gaps(src: ReportSource, limit: int = 20) -> list[str]:
    gaps = analysis.statement_gaps(src)
    if not gaps["statements"]:
        return []
    k = gaps["k"]
    out = ["## Reference statements the runs' top k miss", "",
           f"{gaps['statements']} statements of {gaps['questions']} questions against every run's judged top {k}. "
           f"**Corpus gap** ({len(gaps['corpus'])}): no chunk in the judged pool supports it; no retriever found it, "
           f"so check the corpus first. **Retriever gap** ({len(gaps['retriever'])}): another run's top {k} has it; "
           "fix the retriever that misses it.", "",
           md_table(["run", "supported", "retriever gap", "corpus gap", "unknown (judge error)"],
                    [[md(run), *(str(gaps["per_run"][run][key]) for key in
                                 ("supported", "retriever_gap", "corpus_gap", "unknown"))] for run in gaps["runs"]]),
           ""]
    for key, title, cols in (("corpus", "Corpus gaps", False), ("retriever", "Retriever gaps", True)):
        rows = gaps[key]
        if not rows:
            continue
        shown = rows[:limit]
        more = f", the first {len(shown)}" if len(shown) < len(rows) else ""
        body = [[md(r.get("question") or r["question_id"], 70), str(r["statement"]), md(r["text"], 140)]
                + ([md(", ".join(r["missed_by"])), md(", ".join(f"{a} #{b}" for a, b in r["found_by"].items()))]
                   if cols else []) for r in shown]
        header = ["question", "#", "statement"] + (["missed by", "found by (rank)"] if cols else [])
        out += [f"<details><summary>{title} ({len(rows)}{more})</summary>", "",
                md_table(header, body, "lrl" + "ll" * cols), "", "</details>", ""]
    return out


def report_markdown(src: ReportSource, *, baseline: ReportSource | None = None, metric: str | None = None,
                    limit: int = 15) -> str:
    """``report.md`` of a results folder (``baseline``: an earlier folder, for the questions
    that moved most)."""
    title = f"judge-eval report{': ' + src.name if src.name else ''}"
    lines = _header(title, src.info, [f"baseline: {baseline.name}"] if baseline is not None else [])
    lines += _metrics(src)
    lines += _agreement(src.trust)
    lines += _movers(src, baseline, metric, limit)
    lines += _gaps(src)
    return "\n".join(lines).rstrip("\n") + "\n"


def audit_markdown(doc: dict[str, Any], *, current: ReportSource | None = None, limit: int = 15) -> str:
    """``report.md`` of an audit (``doc``: the parsed ``audit.json``): the verdict and its
    headline first, the checks, the questions that dropped most, the canary, then the audit's
    own results."""
    verdict = str(doc.get("verdict") or "unknown")
    lines = [f"# judge-eval audit {md(doc.get('id', ''))}: **{md(verdict.upper().replace('_', ' '))}**", ""]
    lines += [f"- {md(h)}" for h in doc.get("headline") or []]
    if doc.get("judge_failure"):
        lines.append(f"- judge failure: {md(doc['judge_failure'])}")
    lines += [f"- note: {md(n)}" for n in doc.get("notes") or []]
    info = {k: doc[k] for k in ("judge", "prompts", "dataset", "accounting") if isinstance(doc.get(k), dict)}
    base = doc.get("baseline") if isinstance(doc.get("baseline"), dict) else None
    lines += ["", *_header("Audit", info, [f"started: {doc.get('started')}", "baseline: " + (
        f"{base.get('mode')}, audit {', '.join(base.get('ids') or [])}" if base else "none")])[2:]]
    checks = [c for c in doc.get("checks") or [] if isinstance(c, dict)]
    if checks:
        lines += ["## Checks", "", md_table(
            ["run", "metric", "value", "baseline", "difference", "p (Holm)", "floor", "allowed drop", "verdict"],
            [[md(c.get("run")), f"`{c.get('metric')}`", _mean(c.get("value"), c.get("ci_low"), c.get("ci_high")),
              num(c.get("baseline_value")),
              num(c.get("diff"), sign=True) + (" " + ci(c.get("diff_ci_low"), c.get("diff_ci_high"), sign=True)
                                               if c.get("diff") is not None else ""),
              num(c.get("p_holm"), 4), num(c.get("floor")), num(c.get("max_drop")),
              ("**regression**" if c.get("verdict") == "regression" else md(c.get("verdict")))] for c in checks],
            "llrrrrrrl"), ""]
    dropped = [{"run": f"{c.get('run')} {c.get('metric')}", "question_id": str(q.get("question_id")),
                "baseline": q.get("baseline"), "current": q.get("value"), "delta": q.get("diff")}
               for c in checks for q in c.get("regressed_questions") or [] if q.get("diff") is not None]
    if dropped:
        texts = analysis.question_texts(current) if current is not None else {}
        for r in dropped:
            r["question"] = texts.get(r["question_id"], "")
        dropped.sort(key=lambda r: r["delta"])
        lines += ["## Questions that dropped most", "", _moved_table(dropped[:limit], "this audit"), ""]
    canary = doc.get("canary")
    if isinstance(canary, dict):
        lines += ["## Canary", "", f"{'**Judge drift**' if canary.get('drift') else 'No judge drift'}: "
                  f"{md(canary.get('statistic'))} {num(canary.get('value'))} (floor {num(canary.get('floor'))}) on "
                  f"{canary.get('judged')} of {canary.get('pairs')} pairs re-judged without the cache; "
                  f"{len(canary.get('changed') or [])} grades changed since the previous canary.", ""]
    if current is not None:
        lines += _metrics(current)
        lines += _agreement(doc.get("trust") if isinstance(doc.get("trust"), dict) else current.trust)
        lines += _gaps(current)
    return "\n".join(lines).rstrip("\n") + "\n"
