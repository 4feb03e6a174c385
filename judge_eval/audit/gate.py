"""The gate: which (run, metric) regressed, against a floor and against a baseline.

- **floor**: the run's mean is below ``floor`` (or undefined on every question) -> regression.
- **drop**: on the questions where both the audit and the baseline have a value,
  ``diff = mean(current_i - baseline_i)`` (paired bootstrap CI) and the two-sided paired
  randomization test's p-value; the p-values of every check with a drop limit are Holm-corrected
  together; a regression when ``-diff > max_drop`` and ``p_holm <= alpha``.

The baseline (:func:`choose_baseline`) is made of earlier audits with the same judge, prompts,
test set and metric-defining settings: the previous passing one, a pinned one, or the
per-question median of the last N passing ones (:func:`baseline_values`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from judge_eval.compare import MEANING_SETTINGS
from judge_eval.metrics.stats import holm, paired_difference, randomization_test

__all__ = ["Baseline", "GateResult", "baseline_values", "choose_baseline", "run_gate", "signature"]

#: how many of the largest per-question drops a check lists
TOP_QUESTIONS = 10


def signature(judge_identity: str, prompts: Mapping[str, str], questions_fingerprint: str,
              settings: Mapping[str, Any]) -> dict[str, Any]:
    """What two audits must share for their numbers to be compared."""
    return {"judge_identity": judge_identity, "prompts": dict(sorted(prompts.items())),
            "questions_fingerprint": questions_fingerprint,
            "settings": {k: settings.get(k) for k in MEANING_SETTINGS}}


def _audit_signature(row: Mapping[str, Any]) -> dict[str, Any]:
    return signature(row["judge_identity"], row["prompts"], row["questions_fingerprint"], row["settings"])


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    names = {"judge_identity": "judge identity", "prompts": "prompt versions",
             "questions_fingerprint": "test set (questions fingerprint)", "settings": "metric settings"}
    return [names[k] for k in names if a[k] != b[k]]


@dataclass
class Baseline:
    """The audits a baseline is made of, and its per-question values (``run, metric,
    question_id, value``; for ``median`` the per-question medians)."""

    mode: str
    ids: list[str]
    started: list[str]
    values: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["run", "metric", "question_id", "value"]))

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "ids": list(self.ids), "started": list(self.started)}


def choose_baseline(audits: Sequence[Mapping[str, Any]], current: Mapping[str, Any], mode: str, *,
                    pinned: str | None = None, last: int = 5) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The history rows (``History.audits()``, newest first) the baseline is made of, and notes.

    ``current`` is :func:`signature` of this audit. ``previous``: the newest comparable audit
    that passed; ``median``: the newest ``last`` of them; ``pinned``: the audit ``pinned`` (a
    full id) whatever its verdict, or none (with a note) when it is not comparable."""
    notes: list[str] = []
    if mode == "pinned":
        row = next((a for a in audits if a["id"] == pinned), None)
        if row is None:
            return [], [f"pinned baseline {pinned} is not in the history; only floors were checked"]
        diffs = _differences(_audit_signature(row), current)
        if diffs:
            return [], [f"pinned baseline {pinned} is not comparable ({', '.join(diffs)} differ); "
                        "only floors were checked"]
        return [row], notes
    comparable = [a for a in audits if a["verdict"] == "pass" and not _differences(_audit_signature(a), current)]
    if not audits:
        return [], ["first audit: no baseline in the history, only floors were checked"]
    if not comparable:
        skipped = [a for a in audits if a["verdict"] == "pass"]
        why = (f"none of the {len(skipped)} passing audits in the history is comparable (judge, prompts, test set "
               "or metric settings differ)" if skipped else "no audit in the history passed")
        return [], [f"no baseline: {why}; only floors were checked"]
    chosen = comparable[:1] if mode == "previous" else comparable[:last]
    if mode == "median" and len(chosen) < last:
        notes.append(f"median baseline of {len(chosen)} audits (fewer than baseline.last = {last} in the history)")
    return chosen, notes


def baseline_values(values: pd.DataFrame, mode: str) -> pd.DataFrame:
    """``History.question_values`` of the chosen audits -> one value per (run, metric,
    question): the value itself, or for ``median`` the median over the audits that have it
    (NaN when none does)."""
    cols = ["run", "metric", "question_id"]
    if values.empty:
        return pd.DataFrame(columns=[*cols, "value"])
    if mode != "median":
        return values[[*cols, "value"]].reset_index(drop=True)
    return values.groupby(cols, sort=False)["value"].median().reset_index()


@dataclass
class GateResult:
    """``checks``: one dict per (run, metric) (the ``checks`` of audit.json, in run then metric
    order); ``family_size``: how many p-values Holm corrected over."""

    checks: list[dict[str, Any]]
    family_size: int

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c["verdict"] == "regression"]


def _f(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def run_gate(per_question: pd.DataFrame, summary: pd.DataFrame, baseline: Baseline | None, *,
             check: Sequence[str], floors: Mapping[str, float], max_drops: Mapping[str, float],
             alpha: float = 0.05, n_perm: int = 10000, seed: int = 0, n_boot: int = 1000) -> GateResult:
    """Check every run of ``per_question`` on every metric of ``check`` (module docstring).
    ``summary`` is ``Results.summary`` (run, measure, mean, ci_low, ci_high, n)."""
    stats = summary.set_index(["run", "measure"])
    runs = list(dict.fromkeys(per_question["run"]))
    base = baseline.values if baseline is not None else None
    checks: list[dict[str, Any]] = []
    for run in runs:
        mine = per_question[per_question["run"] == run].set_index("question_id")
        for metric in check:
            s = stats.loc[(run, metric)]
            c: dict[str, Any] = {
                "run": run, "metric": metric, "value": _f(s["mean"]), "ci_low": _f(s["ci_low"]),
                "ci_high": _f(s["ci_high"]), "n": int(s["n"]), "floor": floors.get(metric),
                "max_drop": max_drops.get(metric), "baseline_value": None, "diff": None, "diff_ci_low": None,
                "diff_ci_high": None, "n_paired": 0, "p_value": None, "p_holm": None, "below_floor": False,
                "significant_drop": False, "verdict": "pass", "reasons": [], "regressed_questions": [],
            }
            if c["floor"] is not None and (c["value"] is None or c["value"] < c["floor"]):
                c["below_floor"] = True
                c["reasons"].append(f"undefined on every question (floor {c['floor']:g})" if c["value"] is None
                                    else f"{c['value']:.3f} below floor {c['floor']:g}")
            if base is not None:
                b = base[(base["run"] == run) & (base["metric"] == metric)].set_index("question_id")["value"]
                if len(b):
                    _compare(c, mine[metric], b.astype(float), n_perm=n_perm, seed=seed, n_boot=n_boot)
            checks.append(c)
    tested = [c for c in checks if c["max_drop"] is not None and c["p_value"] is not None]
    for c, p_adj in zip(tested, holm([c["p_value"] for c in tested]), strict=True):
        c["p_holm"] = float(p_adj)
        if c["diff"] is not None and -c["diff"] > c["max_drop"] and p_adj <= alpha:
            c["significant_drop"] = True
            c["reasons"].append(f"drop {-c['diff']:.3f} > allowed {c['max_drop']:g} "
                                f"(p_holm {_p(p_adj)} <= {alpha:g})")
    for c in checks:
        if c["below_floor"] or c["significant_drop"]:
            c["verdict"] = "regression"
    return GateResult(checks=checks, family_size=len(tested))


def _compare(c: dict[str, Any], current: pd.Series, baseline: pd.Series, *, n_perm: int, seed: int,
             n_boot: int) -> None:
    """Fill the baseline fields of check ``c``: the paired difference over shared questions."""
    questions = list(dict.fromkeys([*current.index, *baseline.index]))
    xa = current.reindex(questions).to_numpy(dtype=float)
    xb = baseline.reindex(questions).to_numpy(dtype=float)
    defined = xb[~np.isnan(xb)]
    c["baseline_value"] = float(defined.mean()) if defined.size else None
    d = paired_difference(xa, xb, n_boot=n_boot, seed=seed)
    c.update(diff=_f(d.mean_diff), diff_ci_low=_f(d.ci_low), diff_ci_high=_f(d.ci_high), n_paired=d.n)
    if d.n:
        c["p_value"] = float(randomization_test(xa, xb, n_perm=n_perm, seed=seed))
    per_q = [(q, a, b) for q, a, b in zip(questions, xa, xb, strict=True) if not (np.isnan(a) or np.isnan(b)) and a < b]
    per_q.sort(key=lambda t: (t[1] - t[2], str(t[0])))
    c["regressed_questions"] = [{"question_id": str(q), "value": float(a), "baseline": float(b),
                                 "diff": float(a - b)} for q, a, b in per_q[:TOP_QUESTIONS]]


def _p(p: float) -> str:
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"
