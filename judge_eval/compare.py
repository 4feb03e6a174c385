"""``compare()``: are the differences between runs real? The twin of ``judge-eval compare``.

Runs come from one or more results folders (``judge-eval score --out``) or :class:`Results`.
For every measure:

- each run's mean with its 95% bootstrap CI (over the questions where it is defined);
- for every pair of runs (a, b), on the questions where both are defined: the mean paired
  difference ``mean(a_i - b_i)`` with a paired bootstrap 95% CI, and the two-sided paired
  randomization (sign-flip) test p-value;
- Holm's correction over the pairs of each measure (the family is "which runs differ on this
  measure?"); a pair is a *significant win* for the better run when the corrected p <= alpha.

Folders judged by different judges, prompt versions or test sets, or with settings that change
what a measure means, are refused (a :class:`ConfigError` listing the differences) unless
``allow_different=True``: their numbers are not comparable.
"""

from __future__ import annotations

import itertools
import json
import os
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from judge_eval.errors import ConfigError
from judge_eval.metrics.stats import bootstrap_ci, holm, paired_difference, randomization_test
from judge_eval.report.folder import read_results_dir
from judge_eval.report.summary import TABLE_FAMILIES
from judge_eval.report.tables import text_grid
from judge_eval.results import Results

__all__ = ["Comparison", "compare", "read_results_dir", "render"]

PathLike = str | os.PathLike

#: settings that change what a measure means: two folders must agree on them to be compared
MEANING_SETTINGS = ("useful_rule", "useful_grade", "judge_relevance", "relevance_threshold")


@dataclass
class _Source:
    """One results folder (or Results): its label, per-question frame and metadata."""

    label: str
    per_question: pd.DataFrame
    info: dict[str, Any]


def _sources(items: Sequence[PathLike | Results]) -> list[_Source]:
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Results):
            out.append(_Source(f"results{i + 1}", item.per_question, item.info))
        else:
            frame, info = read_results_dir(item)
            out.append(_Source(Path(item).name or str(item), frame, info))
    return out


def _differences(sources: list[_Source]) -> list[str]:
    """What makes the sources' numbers incomparable, one line per difference."""
    checks: dict[str, Callable[[_Source], Any]] = {
        "judge identity": lambda s: s.info["judge"].get("identity"),
        "prompt versions": lambda s: ", ".join(sorted((s.info.get("prompts") or {}).values())),
        "test set": lambda s: (s.info.get("dataset") or {}).get("questions_fingerprint")
        or ",".join(sorted(set(s.per_question["question_id"].astype(str)))),
    }

    def setting_of(k: str) -> Callable[[_Source], Any]:
        return lambda s: (s.info.get("settings") or {}).get(k)

    for setting in MEANING_SETTINGS:
        checks[f"setting {setting}"] = setting_of(setting)
    diffs = []
    for name, value in checks.items():
        seen = [value(s) for s in sources]
        if any(v != seen[0] for v in seen[1:]):
            shown = ", ".join(f"{s.label}: {str(v)[:60]}" for s, v in zip(sources, seen, strict=True))
            diffs.append(f"{name} differs ({shown})")
    return diffs


@dataclass
class Comparison:
    """The result of :func:`compare`.

    - ``runs``: run labels in order, each with a letter (``letters``) used to mark wins.
    - ``summary``: one row per (measure, run): ``mean``, ``ci_low``, ``ci_high``, ``n``.
    - ``pairs``: one row per (measure, run_a, run_b): ``mean_diff`` (a - b), ``ci_low``,
      ``ci_high``, ``n`` (questions where both are defined), ``p_value``, ``p_holm``,
      ``significant`` (p_holm <= alpha), ``winner`` (the better run when significant, else '').
    - ``alpha``, ``differences`` (what differed between the sources when that was allowed).
    """

    runs: list[str]
    summary: pd.DataFrame
    pairs: pd.DataFrame
    alpha: float
    differences: list[str] = field(default_factory=list)

    @property
    def letters(self) -> dict[str, str]:
        return {run: _letter(i) for i, run in enumerate(self.runs)}

    def wins(self, measure: str, run: str) -> list[str]:
        """The runs ``run`` significantly beats on ``measure``."""
        p = self.pairs[(self.pairs["measure"] == measure) & (self.pairs["winner"] == run)]
        return [b if a == run else a for a, b in zip(p["run_a"], p["run_b"], strict=True)]

    def to_dict(self) -> dict[str, Any]:
        def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
            return [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                    for r in frame.to_dict(orient="records")]

        return {"runs": self.runs, "alpha": self.alpha, "differences": self.differences,
                "summary": records(self.summary), "pairs": records(self.pairs)}


def _letter(i: int) -> str:
    return string.ascii_lowercase[i] if i < 26 else f"r{i + 1}"


def compare(
    sources: Sequence[PathLike | Results],
    *,
    runs: Sequence[str] | None = None,
    measures: Sequence[str] | str | None = None,
    alpha: float = 0.05,
    n_boot: int = 1000,
    n_perm: int = 10000,
    seed: int = 0,
    allow_different: bool = False,
) -> Comparison:
    """Compare the runs of one or more results folders (or :class:`Results`), see the module
    docstring. ``runs``: the run labels to keep, in this order (default: all; a run of a second
    folder whose name is taken becomes ``folder/run``). ``measures``: names, ``"all"``, or None
    for the summary table's families (context recall and precision, judge nDCG, recall, nDCG)."""
    if not sources:
        raise ConfigError("give at least one results folder", option="DIR")
    if not 0 < alpha < 1:
        raise ConfigError(f"must be in (0, 1), got {alpha!r}", option="--alpha")
    loaded = _sources(sources)
    differences = _differences(loaded) if len(loaded) > 1 else []
    if differences and not allow_different:
        raise ConfigError("these results are not comparable: " + "; ".join(differences)
                          + ". Compare results of the same judge, prompts and test set, or pass "
                          "--allow-different to compare anyway", option="compare")
    columns: dict[str, pd.DataFrame] = {}
    for src in loaded:
        for name, frame in src.per_question.groupby("run", sort=False):
            label = str(name) if str(name) not in columns else f"{src.label}/{name}"
            columns[label] = frame.set_index("question_id")
    if runs:
        unknown = [r for r in runs if r not in columns]
        if unknown:
            raise ConfigError(f"unknown run(s) {', '.join(unknown)}; the results hold {', '.join(columns)}",
                              option="--runs")
        columns = {r: columns[r] for r in runs}
    if len(columns) < 2:
        raise ConfigError(f"need at least two runs to compare, got {', '.join(columns) or 'none'}", option="--runs")
    common = [c for c in next(iter(columns.values())).columns if c != "run"
              and all(c in f.columns for f in columns.values())]
    if measures is None:
        chosen = [m for fam in TABLE_FAMILIES for m in common if m.split("@")[0] == fam]
    elif measures == "all":
        chosen = common
    else:
        wanted = [m.strip() for m in (measures.split(",") if isinstance(measures, str) else measures) if m.strip()]
        missing = [m for m in wanted if m not in common]
        if missing:
            raise ConfigError(f"unknown measure(s) {', '.join(missing)}; available: {', '.join(common)}",
                              option="--measures")
        chosen = wanted
    if not chosen:
        raise ConfigError("no measure is shared by every run", option="--measures")
    questions = list(dict.fromkeys(q for f in columns.values() for q in f.index))
    values = {run: f.reindex(questions) for run, f in columns.items()}

    summary_rows, pair_rows = [], []
    for m in chosen:
        for run, f in values.items():
            x = f[m].to_numpy(dtype=float)
            lo, hi = bootstrap_ci(x, n_boot=n_boot, seed=seed)
            ok = x[~np.isnan(x)]
            summary_rows.append({"measure": m, "run": run, "mean": float(ok.mean()) if ok.size else np.nan,
                                 "ci_low": lo, "ci_high": hi, "n": int(ok.size)})
        rows = []
        for a, b in itertools.combinations(values, 2):
            xa, xb = values[a][m].to_numpy(dtype=float), values[b][m].to_numpy(dtype=float)
            d = paired_difference(xa, xb, n_boot=n_boot, seed=seed)
            p = randomization_test(xa, xb, n_perm=n_perm, seed=seed)
            rows.append({"measure": m, "run_a": a, "run_b": b, "mean_diff": d.mean_diff, "ci_low": d.ci_low,
                         "ci_high": d.ci_high, "n": d.n, "p_value": p})
        adjusted = holm([r["p_value"] for r in rows])
        for r, p_adj in zip(rows, adjusted, strict=True):
            sig = bool(p_adj <= alpha) and r["mean_diff"] != 0
            r.update(p_holm=float(p_adj), significant=sig,
                     winner=(r["run_a"] if r["mean_diff"] > 0 else r["run_b"]) if sig else "")
        pair_rows.extend(rows)
    return Comparison(runs=list(values), summary=pd.DataFrame(summary_rows), pairs=pd.DataFrame(pair_rows),
                      alpha=alpha, differences=differences)


def render(comparison: Comparison, fmt: str = "table") -> str:
    """The comparison as ``table`` (terminal), ``markdown``, ``csv`` (the pairs) or ``json``."""
    if fmt == "json":
        return json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False)
    if fmt == "csv":
        merged = comparison.pairs.merge(
            comparison.summary.add_prefix("a_"), left_on=["measure", "run_a"], right_on=["a_measure", "a_run"]
        ).merge(comparison.summary.add_prefix("b_"), left_on=["measure", "run_b"], right_on=["b_measure", "b_run"])
        merged = merged.drop(columns=["a_measure", "a_run", "b_measure", "b_run"])
        return merged.to_csv(index=False)
    if fmt not in ("table", "markdown"):
        raise ConfigError(f"unknown format {fmt!r}", option="--format")
    letters = comparison.letters
    by_key = {(r.measure, r.run): r for r in comparison.summary.itertuples(index=False)}
    measures = list(dict.fromkeys(comparison.summary["measure"]))
    md = fmt == "markdown"
    header = ["measure", *[f"{run} ({letters[run]})" for run in comparison.runs], "n"]
    body = []
    for m in measures:
        row = [m]
        ns = set()
        for run in comparison.runs:
            r = by_key[(m, run)]
            ns.add(int(r.n))
            cell = "-" if np.isnan(r.mean) else f"{r.mean:.3f}"
            if not np.isnan(r.ci_low):
                cell += f" [{r.ci_low:.2f},{r.ci_high:.2f}]"
            beaten = "".join(letters[b] for b in comparison.wins(m, run))
            if beaten:
                cell += f"<sup>{beaten}</sup>" if md else f" >{beaten}"
            row.append(cell)
        row.append("/".join(str(n) for n in sorted(ns)))
        body.append(row)
    pair_header = ["measure", "pair", "mean diff [95% CI]", "n", "p", "p (Holm)", ""]
    pair_body = []
    for r in comparison.pairs.itertuples(index=False):
        diff = "-" if np.isnan(r.mean_diff) else f"{r.mean_diff:+.3f}"
        if not np.isnan(r.ci_low):
            diff += f" [{r.ci_low:+.3f},{r.ci_high:+.3f}]"
        pair_body.append([r.measure, f"{letters[r.run_a]}-{letters[r.run_b]}", diff, str(r.n), _p(r.p_value),
                          _p(r.p_holm), "*" if r.significant else ""])
    legend = (f"mean [95% bootstrap CI] over questions; {'superscript' if md else '>x'} = significantly better "
              f"than run x (paired randomization test, Holm-corrected over the pairs of each measure, "
              f"p <= {comparison.alpha:g}).")
    notes = [f"compared although {d}" for d in comparison.differences]
    if md:
        return "\n".join([_md_table(header, body), "", legend, "", _md_table(pair_header, pair_body), *notes]) + "\n"
    return "\n".join([text_grid(header, body), legend, "", text_grid(pair_header, pair_body),
                      "pair a-b: mean of a - b over the questions where both are defined; * = significant.", *notes])


def _p(p: float) -> str:
    if np.isnan(p):
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _md_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines)
