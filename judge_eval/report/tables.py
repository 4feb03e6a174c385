"""Summary tables: runs side by side, one row per run, one column per measure@k.

Input is the long summary frame of :func:`judge_eval.metrics.stats.aggregate` (``run``,
``measure``, ``mean``, ``n``, ``n_missing``, ``ci_low``, ``ci_high``). Three renderings:
``table`` (fixed-width text for a terminal), ``csv`` and ``json`` (every statistic, for tools).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Literal

import pandas as pd

from judge_eval.metrics.missing import MissingReason

Format = Literal["table", "csv", "json"]


def wide(summary: pd.DataFrame, stat: str = "mean") -> pd.DataFrame:
    """One row per run, one column per measure (in first-seen order), values = ``stat``."""
    measures = list(dict.fromkeys(summary["measure"]))
    runs = list(dict.fromkeys(summary["run"]))
    table = summary.pivot(index="run", columns="measure", values=stat)
    return table.loc[runs, measures]


def _cell(mean: float, lo: float, hi: float, with_ci: bool, digits: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    text = f"{mean:.{digits}f}"
    if with_ci and not (math.isnan(lo) or math.isnan(hi)):
        text += f" [{lo:.{digits - 1}f},{hi:.{digits - 1}f}]"
    return text


def text_grid(header: list[str], body: list[list[str]]) -> str:
    """Fixed-width columns two spaces apart: the first left-aligned, the others right-aligned."""
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    return "\n".join(line(row).rstrip() for row in [header, *body])


def render_text(
    summary: pd.DataFrame,
    *,
    with_ci: bool = False,
    digits: int = 3,
    measures: Sequence[str] | None = None,
) -> str:
    """Fixed-width table: a header row of measure labels, one row per run. ``-`` marks a
    measure with no defined value for the run; ``[lo,hi]`` is the 95% bootstrap CI."""
    if measures is not None:
        summary = summary[summary["measure"].isin(list(measures))]
    runs = list(dict.fromkeys(summary["run"]))
    cols = list(dict.fromkeys(summary["measure"]))
    by_key = {(r.run, r.measure): r for r in summary.itertuples(index=False)}
    header = ["run", *cols]
    body = []
    for run in runs:
        row = [str(run)]
        for m in cols:
            r = by_key.get((run, m))
            row.append("-" if r is None else _cell(r.mean, r.ci_low, r.ci_high, with_ci, digits))
        body.append(row)
    return text_grid(header, body)


def render_by_measure(summary: pd.DataFrame, *, with_ci: bool = True, digits: int = 3,
                      measures: Sequence[str] | None = None) -> str:
    """Transposed table: one row per measure@k, one column per run (with ``n`` questions).
    Easier to read than :func:`render_text` when each cell carries a CI."""
    if measures is not None:
        summary = summary[summary["measure"].isin(list(measures))]
    runs = list(dict.fromkeys(summary["run"]))
    rows_m = list(dict.fromkeys(summary["measure"]))
    by_key = {(r.run, r.measure): r for r in summary.itertuples(index=False)}
    header = ["measure", *[str(r) for r in runs], "n"]
    body = []
    for m in rows_m:
        row = [m]
        ns = set()
        for run in runs:
            r = by_key.get((run, m))
            row.append("-" if r is None else _cell(r.mean, r.ci_low, r.ci_high, with_ci, digits))
            if r is not None:
                ns.add(int(r.n))
        row.append("/".join(str(n) for n in sorted(ns)))
        body.append(row)
    return text_grid(header, body)


def missing_category(reason: str) -> str:
    """The kind of a missing value, from its reason in ``missing.csv``: ``judge error`` (a judge
    call failed), ``not judged (budget)`` (a budget stopped the judge first) or ``undefined``
    (the measure has no value for the question, e.g. recall with nothing relevant)."""
    return MissingReason.of(reason).kind


def missing_note(summary: pd.DataFrame, missing: pd.DataFrame | None = None) -> str:
    """One line per group of measures without a value for some questions, naming the runs and,
    when ``missing`` (run, question_id, measure, reason) is given, whether the values are
    undefined, judge errors or not judged, e.g.
    ``undefined for 1 of 300 questions in every run (left out of the mean): recall@1, mrr``."""
    rows = summary[summary["n_missing"] > 0]
    all_runs = list(dict.fromkeys(summary["run"]))
    counts: dict[tuple[str, str], dict[str, int]] = {}
    if missing is not None and len(missing):
        for (run, measure, reason), n in missing.groupby(["run", "measure", "reason"], sort=False).size().items():
            by_cat = counts.setdefault((str(run), str(measure)), {})
            cat = missing_category(str(reason))
            by_cat[cat] = by_cat.get(cat, 0) + int(n)
    # (category, n, total, measure) -> runs, then (category, n, total, runs) -> measures
    by_measure: dict[tuple[str, int, int, str], list[str]] = {}
    for r in rows.itertuples(index=False):
        total = int(r.n + r.n_missing)
        cats = counts.get((str(r.run), str(r.measure))) or {"undefined": int(r.n_missing)}
        for cat, n in cats.items():
            by_measure.setdefault((cat, n, total, str(r.measure)), []).append(str(r.run))
    groups: dict[tuple[str, int, int, tuple[str, ...]], list[str]] = {}
    for (cat, n, total, measure), runs in by_measure.items():
        groups.setdefault((cat, n, total, tuple(runs)), []).append(measure)
    lines = []
    for (cat, n, total, group_runs), measures in groups.items():
        if len(all_runs) > 1 and set(group_runs) == set(all_runs):
            where = "in every run"
        else:
            where = ("in run " if len(group_runs) == 1 else "in runs ") + ", ".join(group_runs)
        names = ", ".join(dict.fromkeys(measures))
        lines.append(f"{cat} for {n} of {total} questions {where} (left out of the mean): {names}")
    return "\n".join(lines)


def render(summary: pd.DataFrame, fmt: Format = "table", *, with_ci: bool = False) -> str:
    """The summary in ``fmt``. CSV and JSON carry every statistic in long form (one record per
    run and measure); the table shows the mean (and CI when asked), with a note naming the
    measures that are undefined for some questions."""
    if fmt == "table":
        note = missing_note(summary)
        return render_text(summary, with_ci=with_ci) + ("\n" + note if note else "")
    if fmt == "csv":
        return summary.to_csv(index=False)
    if fmt == "json":
        return json.dumps(records(summary), indent=2, ensure_ascii=False)
    raise ValueError(f"unknown format {fmt!r}")


def records(frame: pd.DataFrame) -> list[dict]:
    """Frame rows as JSON-ready dicts (NaN -> null)."""
    out = []
    for rec in frame.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()})
    return out


def render_per_question(per_question: pd.DataFrame, fmt: Format = "table") -> str:
    """Per-question values: one row per (run, question)."""
    if fmt == "csv":
        return per_question.to_csv(index=False)
    if fmt == "json":
        return json.dumps(records(per_question), indent=2, ensure_ascii=False)
    return per_question.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="-")
