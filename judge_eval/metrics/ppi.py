"""Prediction-powered estimates of a human metric's mean (ARES-style PPI; docs/agreement.md).

Humans labelled n questions; the judge scored those and N others. The judge's values f are
cheap but biased; the human values y are unbiased but few. Prediction-powered inference
(Angelopoulos et al., 2023) corrects the judge's mean over the unlabelled questions with the
judge's average error on the labelled ones:

    theta = mean_U(f) - mean_L(f - y)
    SE    = sqrt(var_U(f) / N + var_L(f - y) / n)          (var with ddof = 1)
    CI    = theta +- z_{1 - alpha/2} SE

where U are the N **unlabelled** questions and L the n labelled ones (disjoint sets). theta is
unbiased whatever the judge's bias; the CI is narrower than the human-only one when the judge's
errors f - y vary less than y itself (an informative judge), and about as wide otherwise.

Departure from DESIGN.md: there ``mean_N(f)`` runs over *all* questions, labelled ones
included. Then ``mean_N(f)`` and ``mean_n(f - y)`` share the labelled questions, so they are
correlated and the standard error above is wrong (too large when the judge's noise is large:
the CI over-covers). The standard estimator uses the unlabelled questions only.

Every function returns an :class:`Estimate` with a normal-approximation CI (the PPI CI is a
normal one by construction; the human-only and judge-only CIs use the same form so the three
widths compare like for like).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from judge_eval.errors import InputError
from judge_eval.metrics.agreement import frame_with_reasons, metric_pairs

__all__ = ["Estimate", "human_only_mean", "judge_only_mean", "ppi_mean", "ppi_table"]


@dataclass(frozen=True)
class Estimate:
    """An estimate of a mean with its normal-approximation CI.

    - ``method``: ``ppi``, ``human_only`` or ``judge_only`` (what was actually computed:
      :func:`ppi_mean` without unlabelled questions gives ``human_only``);
    - ``mean``, ``se``, ``ci_low``, ``ci_high``: NaN when undefined;
    - ``n_labelled``, ``n_unlabelled``: the questions used of each kind;
    - ``reason``: why the estimate is undefined, or why another method was used; else None.
    """

    method: str
    mean: float
    se: float
    ci_low: float
    ci_high: float
    n_labelled: int
    n_unlabelled: int
    reason: str | None = None


def _values(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-d", field=name)
    if np.isnan(arr).any():
        raise InputError(f"{name} holds NaN: drop the questions without a value first", field=name)
    return arr


def _z(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}", field="alpha")
    return float(scipy.stats.norm.ppf(1.0 - alpha / 2.0))


def _normal(method: str, mean: float, se: float, z: float, n_labelled: int, n_unlabelled: int,
            reason: str | None = None) -> Estimate:
    return Estimate(method, mean, se, mean - z * se, mean + z * se, n_labelled, n_unlabelled, reason)


def _undefined(method: str, n_labelled: int, n_unlabelled: int, reason: str) -> Estimate:
    return Estimate(method, math.nan, math.nan, math.nan, math.nan, n_labelled, n_unlabelled, reason)


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def human_only_mean(y: Sequence[float] | np.ndarray, alpha: float = 0.05) -> Estimate:
    """The classical estimate from the n labelled questions: ``mean(y)``,
    ``SE = sd(y) / sqrt(n)`` (ddof 1), ``CI = mean +- z SE``. Undefined when n < 2 (no SE)."""
    z = _z(alpha)
    arr = _values(y, "y")
    if arr.size < 2:
        return _undefined("human_only", arr.size, 0, f"fewer than 2 labelled questions ({arr.size})")
    return _normal("human_only", *_mean_se(arr), z, arr.size, 0)


def judge_only_mean(f: Sequence[float] | np.ndarray, alpha: float = 0.05) -> Estimate:
    """The judge's mean over every question it scored, as if the judge were right:
    ``mean(f) +- z sd(f)/sqrt(N)``. The CI covers the *judge's* mean, not the human one: it
    ignores the judge's bias, which only human labels can measure. Undefined when N < 2.
    ``n_unlabelled`` counts every value given (labelled questions included)."""
    z = _z(alpha)
    arr = _values(f, "f")
    if arr.size < 2:
        return _undefined("judge_only", 0, arr.size, f"fewer than 2 judged questions ({arr.size})")
    return _normal("judge_only", *_mean_se(arr), z, 0, arr.size)


def ppi_mean(
    f_unlabelled: Sequence[float] | np.ndarray,
    f_labelled: Sequence[float] | np.ndarray,
    y_labelled: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
) -> Estimate:
    """Prediction-powered estimate of the mean of y (module docstring for the formula).

    ``f_unlabelled``: the judge's values on the N questions without human labels;
    ``f_labelled``/``y_labelled``: the judge's and the human values on the n labelled questions
    (same order). The two sets must be disjoint and the labelled questions a random sample of
    all questions, else theta is biased.

    Edge cases: n < 2 -> undefined (the correction's variance is unknown); N < 2 -> the
    human-only estimate (``method="human_only"``, with the reason; one unlabelled question has
    no variance and adds almost nothing). NaN inputs are refused.
    """
    z = _z(alpha)
    fu = _values(f_unlabelled, "f_unlabelled")
    fl = _values(f_labelled, "f_labelled")
    yl = _values(y_labelled, "y_labelled")
    if fl.shape != yl.shape:
        raise InputError(f"f_labelled and y_labelled differ in length ({fl.size}, {yl.size})", field="y_labelled")
    n, big_n = yl.size, fu.size
    if n < 2:
        return _undefined("ppi", n, big_n, f"fewer than 2 labelled questions ({n})")
    if big_n < 2:
        est = human_only_mean(yl, alpha)
        return replace(est, reason=f"fewer than 2 unlabelled questions ({big_n}): the human-only estimate")
    error = fl - yl
    theta = float(fu.mean() - error.mean())
    se = math.sqrt(float(fu.var(ddof=1)) / big_n + float(error.var(ddof=1)) / n)
    return _normal("ppi", theta, se, z, n, big_n)


_METHOD_PREFIX = {"human_only": "human", "ppi": "ppi", "judge_only": "judge"}
_FIELDS = ("mean", "se", "ci_low", "ci_high")


def _clip01(x: float) -> float:
    return x if x != x else min(1.0, max(0.0, x))


def ppi_table(
    per_question: pd.DataFrame,
    labelled_questions: Iterable[str],
    pairs: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per run and human metric, the three estimates of the human metric's mean side by side.

    ``pairs`` maps a human column to the judged column that predicts it
    (``{"recall@5": "judge_recall@5"}``); default: every ``X`` with a ``judge_X`` column in
    ``per_question`` (:func:`~judge_eval.metrics.agreement.metric_pairs`). Per run:

    - **human**: :func:`human_only_mean` of y over the labelled questions where y is defined;
    - **ppi**: :func:`ppi_mean` with L = labelled questions where f and y are both defined and
      U = the other questions where f is defined;
    - **judge**: :func:`judge_only_mean` of f over every question where f is defined.

    A question where **f is missing** (judge error, or undefined) is dropped from both PPI sets:
    the correction needs f, and an unlabelled question without f carries nothing. This assumes
    f is missing at random; ``ppi_n_*`` say how many remain. A labelled question where y is
    undefined (e.g. recall with no relevant label) is outside the population the human mean
    covers and is dropped too (it is not moved to U).

    Every measure here lies in [0, 1], so each mean and CI bound is clipped to [0, 1] (the raw
    normal interval can pass 1 when the labelled mean is near it); intersecting a CI with the
    parameter's range keeps its coverage. ``se`` is left as computed.

    Columns: ``run``, ``human``, ``judged``, then ``human_mean``, ``human_se``,
    ``human_ci_low``, ``human_ci_high``, ``human_n``, the same for ``ppi_`` with
    ``ppi_n_labelled``, ``ppi_n_unlabelled``, the same for ``judge_`` with ``judge_n``, and
    ``reason`` (each estimate's reason, prefixed with its name, ``; `` separated, or None).
    """
    for col in ("run", "question_id"):
        if col not in per_question.columns:
            raise InputError(f"per_question has no column {col!r}", field=col)
    if pairs is None:
        chosen = [(human, judged) for judged, human in metric_pairs(per_question.columns)
                  if judged.startswith("judge_")]
    elif isinstance(pairs, Mapping):
        chosen = list(pairs.items())
    else:
        chosen = [tuple(p) for p in pairs]  # type: ignore[misc]
    for human, judged in chosen:
        for col in (human, judged):
            if col not in per_question.columns:
                raise InputError(f"per_question has no column {col!r}", field="pairs")
    labelled = set(map(str, labelled_questions))
    is_labelled = per_question["question_id"].astype(str).isin(labelled).to_numpy()
    rows: list[dict[str, Any]] = []
    for run in dict.fromkeys(per_question["run"]):
        in_run = (per_question["run"] == run).to_numpy()
        for human, judged in chosen:
            f = per_question[judged].to_numpy(dtype=np.float64)
            y = per_question[human].to_numpy(dtype=np.float64)
            has_f, has_y = ~np.isnan(f), ~np.isnan(y)
            lab = in_run & is_labelled
            estimates = {
                "human_only": human_only_mean(y[lab & has_y], alpha),
                "ppi": ppi_mean(f[in_run & ~is_labelled & has_f], f[lab & has_f & has_y], y[lab & has_f & has_y],
                                alpha),
                "judge_only": judge_only_mean(f[in_run & has_f], alpha),
            }
            row: dict[str, Any] = {"run": run, "human": human, "judged": judged}
            for method, est in estimates.items():
                prefix = _METHOD_PREFIX[method]
                row.update({f"{prefix}_{k}": (getattr(est, k) if k == "se" else _clip01(getattr(est, k)))
                            for k in _FIELDS})
                if method == "ppi":
                    row.update(ppi_n_labelled=est.n_labelled, ppi_n_unlabelled=est.n_unlabelled)
                else:
                    row[f"{prefix}_n"] = est.n_labelled + est.n_unlabelled
            reasons = [f"{_METHOD_PREFIX[m]}: {e.reason}" for m, e in estimates.items() if e.reason]
            row["reason"] = "; ".join(reasons) or None
            rows.append(row)
    columns = ["run", "human", "judged",
               *(f"human_{k}" for k in _FIELDS), "human_n",
               *(f"ppi_{k}" for k in _FIELDS), "ppi_n_labelled", "ppi_n_unlabelled",
               *(f"judge_{k}" for k in _FIELDS), "judge_n", "reason"]
    return frame_with_reasons(rows, columns)
