"""Agreement between the judge and human labels, at three levels (docs/agreement.md).

* **chunk level**: over the (question, chunk) pairs that humans labelled *and* the judge judged
  without error: :func:`confusion_matrix`, :func:`cohen_kappa` (relevant / not),
  :func:`quadratic_weighted_kappa` (grades), :func:`relevant_precision`,
  :func:`relevant_recall` (the judge's "relevant" against the humans'), :func:`roc_auc` (the
  judge's grade as a score for human relevance);
* **question level**: :func:`pearson`, :func:`spearman`, :func:`kendall_tau_b` between a judged
  metric and its human counterpart over the (run, question) rows where both are defined;
* **system level**: :func:`system_kendall`, Kendall tau-b between the runs ranked by the judged
  mean and by the human mean.

:func:`agreement` computes all of them from ``Results.per_question``, ``Results.verdicts`` and
the qrels and returns an :class:`AgreementReport`.

Every statistic is a :class:`Statistic`: the value, ``n`` (the pairs or rows it is computed
over), ``n_questions``, a percentile-bootstrap CI and, when the value is undefined, NaN and the
``reason`` (never 0). The bootstrap resamples **questions** (a question's pairs or rows move
together, since they are not independent): resample b gives question q the weight
``counts[b, q]`` (how often it was drawn), and each statistic is computed on the weighted data,
which equals the statistic of the materialised resample (the tests check this against
scikit-learn and scipy). The resamples depend only on ``(seed, number of questions)``, as in
:mod:`judge_eval.metrics.stats`. Replicates where the statistic is undefined are left out of
the quantiles; the CI is NaN when the value is undefined or there are fewer than 2 questions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import scipy.sparse
import scipy.stats

from judge_eval.data.models import Qrels
from judge_eval.errors import InputError
from judge_eval.metrics.stats import _check_confidence, _check_count, _resample_counts

__all__ = [
    "AgreementReport",
    "ChunkCounts",
    "Statistic",
    "agreement",
    "bootstrap_weights",
    "chunk_pairs",
    "cohen_kappa",
    "frame_with_reasons",
    "confusion_matrix",
    "kendall_tau_b",
    "metric_pairs",
    "pearson",
    "quadratic_weighted_kappa",
    "relevant_precision",
    "relevant_recall",
    "roc_auc",
    "spearman",
    "system_kendall",
]

ArrayLike: TypeAlias = "Sequence[float] | np.ndarray | pd.Series"

#: Above this many questions the Kendall bootstrap resamples one by one (scipy) instead of
#: through the (questions x questions) pair matrices, which would take too much memory.
KENDALL_MATRIX_MAX_QUESTIONS = 3000
#: Rough number of float64 cells a bootstrap block may hold at once.
_BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class Statistic:
    """One agreement statistic.

    - ``value``: the statistic on the data; NaN when undefined (``reason`` says why).
    - ``n``: the pairs (chunk level) or rows (question level) or runs (system level) it uses.
    - ``n_questions``: the questions those come from (the units the bootstrap resamples).
    - ``ci_low``, ``ci_high``: percentile-bootstrap CI; NaN when the value is undefined, when
      there are fewer than 2 questions, or when no replicate is defined.
    - ``reason``: why ``value`` is NaN, else None.
    """

    value: float
    n: int
    n_questions: int
    ci_low: float = math.nan
    ci_high: float = math.nan
    reason: str | None = None


# --------------------------------------------------------------------------- bootstrap driver


def bootstrap_weights(groups: Sequence[Any] | np.ndarray, n_boot: int = 1000,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The resampling scheme every statistic here uses.

    Returns ``(codes, counts)``: ``codes[i]`` is the index of row i's group (question), groups
    numbered in order of first appearance; ``counts`` is ``(n_boot, n_groups)``, how often
    each group is drawn in each resample (``n_groups`` draws with replacement; the same matrix
    as :func:`judge_eval.metrics.stats.bootstrap_ci` draws for ``n_groups`` values). In resample b
    row i has weight ``counts[b, codes[i]]``.
    """
    _check_count("n_boot", n_boot)
    codes, uniques = pd.factorize(pd.Series(list(groups), dtype=object), sort=False)
    n_groups = len(uniques)
    counts = _resample_counts(n_groups, n_boot, seed) if n_groups else np.zeros((n_boot, 0))
    return codes.astype(np.int64), counts


def _groups(groups: Sequence[Any] | np.ndarray | None, n: int) -> np.ndarray | Sequence[Any]:
    if groups is None:
        return np.arange(n)
    if len(groups) != n:
        raise InputError(f"groups has {len(groups)} entries for {n} values", field="groups")
    return groups


def _statistic(
    kernel: Callable[[np.ndarray], np.ndarray],
    reason: str | None,
    groups: Sequence[Any] | np.ndarray,
    n: int,
    n_boot: int,
    seed: int,
    confidence: float,
    *,
    codes_counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> Statistic:
    """Evaluate ``kernel`` (group weights ``(B, n_groups)`` -> ``B`` values, NaN where
    undefined) at weight 1 for the value and at the bootstrap counts for the CI."""
    _check_count("n_boot", n_boot)
    _check_confidence(confidence)
    codes, counts = codes_counts if codes_counts is not None else bootstrap_weights(groups, n_boot, seed)
    n_groups = counts.shape[1]
    if reason is not None:
        return Statistic(math.nan, n, n_groups, reason=reason)
    value = float(kernel(np.ones((1, n_groups)))[0])
    if math.isnan(value):  # a kernel's own undefined case the reason checks did not name
        return Statistic(math.nan, n, n_groups, reason="undefined")
    if n_groups < 2:
        return Statistic(value, n, n_groups)
    block = max(1, _BLOCK_CELLS // max(n, n_groups, 1))
    boot = np.concatenate([kernel(counts[i:i + block]) for i in range(0, counts.shape[0], block)])
    lo, hi = _percentile_interval(boot, confidence)
    return Statistic(value, n, n_groups, lo, hi)


def _percentile_interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    """The (1 - confidence)/2 and (1 + confidence)/2 quantiles (numpy's linear interpolation)
    of the defined replicates; NaN when none is defined."""
    ok = boot[~np.isnan(boot)]
    if ok.size == 0:
        return math.nan, math.nan
    alpha = 1.0 - confidence
    lo, hi = np.quantile(ok, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- chunk level


def _as_int_array(values: ArrayLike, name: str) -> np.ndarray:
    arr: np.ndarray = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-d", field=name)
    if arr.dtype == bool:
        return arr.astype(np.int64)
    try:
        as_float = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must hold integer grades", field=name) from None
    if np.isnan(as_float).any() or not np.all(as_float == np.round(as_float)):
        raise InputError(f"{name} must hold integer grades (no NaN)", field=name)
    return as_float.astype(np.int64)


def _two_raters(human: ArrayLike, judge: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    h = _as_int_array(human, "human")
    j = _as_int_array(judge, "judge")
    if h.shape != j.shape:
        raise InputError(f"human and judge need the same length, got {h.size} and {j.size}", field="judge")
    return h, j


def _tables(h: np.ndarray, j: np.ndarray, codes: np.ndarray, n_groups: int,
            categories: np.ndarray) -> np.ndarray:
    """``(n_groups, K, K)``: per question, how many pairs have human category a, judge b."""
    k = categories.size
    hi = np.searchsorted(categories, h)
    ji = np.searchsorted(categories, j)
    flat = (codes * k + hi) * k + ji
    return np.bincount(flat, minlength=n_groups * k * k).reshape(n_groups, k, k).astype(np.float64)




def _constant_rater(h: np.ndarray, j: np.ndarray) -> str | None:
    if h.size == 0:
        return "no pairs"
    if np.unique(h).size < 2:
        return f"humans gave every pair the same label ({int(h[0])}): agreement beyond chance is undefined"
    if np.unique(j).size < 2:
        return f"the judge gave every pair the same label ({int(j[0])}): agreement beyond chance is undefined"
    return None


def _kappa_from_tables(t: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``1 - sum(w O) / sum(w E)`` per table (``(B, K, K)``), with ``E`` the product of the
    margins; NaN when either margin has a single category or ``sum(w E) = 0``."""
    n = t.sum(axis=(1, 2))
    rows = t.sum(axis=2)
    cols = t.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[:, :, None] * cols[:, None, :] / n[:, None, None]
        disagree_exp = (weights * expected).sum(axis=(1, 2))
        disagree_obs = (weights * t).sum(axis=(1, 2))
        kappa = 1.0 - disagree_obs / disagree_exp
    degenerate = ((rows > 0).sum(axis=1) < 2) | ((cols > 0).sum(axis=1) < 2) | (disagree_exp <= 0)
    return np.where(degenerate, np.nan, kappa)


def _kappa(human: ArrayLike, judge: ArrayLike, weighting: str, groups: Sequence[Any] | None, n_boot: int,
           seed: int, confidence: float) -> Statistic:
    """Kappa with disagreement weights ``1 - [a = b]`` (nominal) or ``(a - b)^2`` (quadratic)."""
    h, j = _two_raters(human, judge)
    g = _groups(groups, h.size)
    cats = np.union1d(h, j)
    codes, counts = bootstrap_weights(g, n_boot, seed)
    tables = _tables(h, j, codes, counts.shape[1], cats)
    if weighting == "quadratic":
        weights = (cats[:, None] - cats[None, :]).astype(np.float64) ** 2
    else:
        weights = 1.0 - np.eye(cats.size)
    return _statistic(lambda w: _kappa_from_tables(np.tensordot(w, tables, axes=1), weights),
                      _constant_rater(h, j), g, h.size, n_boot, seed, confidence, codes_counts=(codes, counts))


def cohen_kappa(human: ArrayLike, judge: ArrayLike, *, groups: Sequence[Any] | None = None,
                n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> Statistic:
    """Cohen's kappa between two raters' labels (any integer categories; 0/1 for relevant/not).

    ``kappa = (p_o - p_e) / (1 - p_e)``, ``p_o`` = the share of pairs where they agree,
    ``p_e = sum_c p_human(c) p_judge(c)`` the agreement expected by chance from the margins.
    1 = perfect agreement, 0 = chance level, < 0 = worse than chance.

    Undefined (NaN, with the reason) when there is no pair or when either rater gives every pair
    the same label: scikit-learn then returns 0 (or NaN when both are constant and equal), but
    that 0 says nothing about the judge (a constant rater scores 0 whatever the other does).
    ``groups`` (the question of each pair) are the bootstrap's units; default: each pair.
    """
    return _kappa(human, judge, "nominal", groups, n_boot, seed, confidence)


def quadratic_weighted_kappa(human: ArrayLike, judge: ArrayLike, *, groups: Sequence[Any] | None = None,
                             n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> Statistic:
    """Quadratic-weighted kappa between two raters' integer grades.

    ``kappa_w = 1 - sum_ab w_ab O_ab / sum_ab w_ab E_ab`` with ``O`` the observed share of pairs
    graded (a by humans, b by the judge), ``E_ab = p_human(a) p_judge(b)`` (chance) and
    ``w_ab = (a - b)^2`` on the **grade values**. The category set is the union of the grades the
    two raters gave; since the weights use the values, a category nobody used changes nothing,
    so this equals scikit-learn's ``cohen_kappa_score(h, j, weights="quadratic",
    labels=range(min, max + 1))`` (scikit-learn weights by position in ``labels``, which is the
    value only for a contiguous label set). A near miss (3 vs 2) costs a quarter of a miss by 2
    (3 vs 1). It only means something when both raters use the same scale (e.g. 0-3).

    Undefined when there is no pair or either rater gives every pair the same grade (as
    :func:`cohen_kappa`).
    """
    return _kappa(human, judge, "quadratic", groups, n_boot, seed, confidence)


def _binary(values: ArrayLike, name: str) -> np.ndarray:
    arr = _as_int_array(values, name)
    if not np.isin(arr, (0, 1)).all():
        raise InputError(f"{name} must be relevant (1/True) or not (0/False)", field=name)
    return arr


def confusion_matrix(human_relevant: ArrayLike, judge_relevant: ArrayLike) -> pd.DataFrame:
    """2 x 2 counts of pairs: rows ``human`` (not relevant, relevant), columns ``judge`` (not
    relevant, relevant); the same layout as scikit-learn's ``confusion_matrix(human, judge,
    labels=[0, 1])``: ``[[TN, FP], [FN, TP]]`` with the human label as the truth."""
    h, j = _two_raters(_binary(human_relevant, "human"), _binary(judge_relevant, "judge"))
    counts = np.bincount(h * 2 + j, minlength=4).reshape(2, 2)
    labels = ["not relevant", "relevant"]
    return pd.DataFrame(counts, index=pd.Index(labels, name="human"), columns=pd.Index(labels, name="judge"))


def _share_relevant(human_relevant: ArrayLike, judge_relevant: ArrayLike, among: str,
                    groups: Sequence[Any] | None, n_boot: int, seed: int, confidence: float) -> Statistic:
    """TP over the pairs ``among`` ("judge" or "human") calls relevant: precision or recall."""
    h, j = _two_raters(_binary(human_relevant, "human"), _binary(judge_relevant, "judge"))
    g = _groups(groups, h.size)
    codes, counts = bootstrap_weights(g, n_boot, seed)
    tables = _tables(h, j, codes, counts.shape[1], np.array([0, 1]))
    n_pos = int((j if among == "judge" else h).sum())
    who = "the judge" if among == "judge" else "humans"
    reason = None if n_pos else "no pairs" if h.size == 0 else f"{who} called no pair relevant"

    def kernel(w: np.ndarray) -> np.ndarray:
        t = np.tensordot(w, tables, axes=1)  # (B, human 0/1, judge 0/1)
        den = t[:, :, 1].sum(axis=1) if among == "judge" else t[:, 1, :].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, t[:, 1, 1] / den, np.nan)

    return _statistic(kernel, reason, g, n_pos, n_boot, seed, confidence, codes_counts=(codes, counts))


def relevant_precision(human_relevant: ArrayLike, judge_relevant: ArrayLike, *,
                       groups: Sequence[Any] | None = None, n_boot: int = 1000, seed: int = 0,
                       confidence: float = 0.95) -> Statistic:
    """Precision of the judge's "relevant": ``TP / (TP + FP)``, the share of the pairs the judge
    calls relevant that humans call relevant. ``n`` = the pairs the judge calls relevant.
    Undefined when the judge calls no pair relevant (scikit-learn's ``zero_division=nan``)."""
    return _share_relevant(human_relevant, judge_relevant, "judge", groups, n_boot, seed, confidence)


def relevant_recall(human_relevant: ArrayLike, judge_relevant: ArrayLike, *,
                    groups: Sequence[Any] | None = None, n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> Statistic:
    """Recall of the judge's "relevant": ``TP / (TP + FN)``, the share of the pairs humans call
    relevant that the judge calls relevant. ``n`` = the pairs humans call relevant. Undefined
    when humans call no pair relevant."""
    return _share_relevant(human_relevant, judge_relevant, "human", groups, n_boot, seed, confidence)


def _auc_from_tables(t: np.ndarray) -> np.ndarray:
    """AUC from ``(B, 2, S)`` tables (human not/relevant x sorted score values)."""
    neg, pos = t[:, 0, :], t[:, 1, :]
    below = np.cumsum(neg, axis=1) - neg
    n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (pos * (below + 0.5 * neg)).sum(axis=1) / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), auc, np.nan)


def roc_auc(human_relevant: ArrayLike, judge_score: ArrayLike, *, groups: Sequence[Any] | None = None,
            n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> Statistic:
    """ROC AUC of the judge's score (its grade) as a ranking of human-relevant over
    non-relevant pairs.

    ``AUC = P(s_pos > s_neg) + 0.5 P(s_pos = s_neg)`` over all (relevant, non-relevant) pairs of
    pairs: the Mann-Whitney form, which is what scikit-learn's ``roc_auc_score`` gives with tied
    scores (a tie counts half). 0.5 = no better than chance, 1 = every relevant pair graded
    above every non-relevant one. With grades 0-3 most pairs are tied, so a judge that agrees
    perfectly on relevant/not but not on grades still reaches 1.

    Undefined when humans call every pair relevant or none (one class only).
    """
    h = _binary(human_relevant, "human")
    s = np.asarray(judge_score, dtype=np.float64)
    if s.shape != h.shape:
        raise InputError(f"human and judge need the same length, got {h.size} and {s.size}", field="judge")
    if np.isnan(s).any():
        raise InputError("judge scores must not be NaN", field="judge")
    g = _groups(groups, h.size)
    codes, counts = bootstrap_weights(g, n_boot, seed)
    values, score_idx = np.unique(s, return_inverse=True)
    k = values.size
    flat = (codes * 2 + h) * k + score_idx
    tables = np.bincount(flat, minlength=counts.shape[1] * 2 * k).reshape(counts.shape[1], 2, k).astype(float)
    if h.size == 0:
        reason: str | None = "no pairs"
    elif h.min() == h.max():
        reason = f"humans called {'every' if h[0] else 'no'} pair relevant: AUC needs both classes"
    else:
        reason = None
    return _statistic(lambda w: _auc_from_tables(np.tensordot(w, tables, axes=1)), reason, g, h.size,
                      n_boot, seed, confidence, codes_counts=(codes, counts))


# --------------------------------------------------------------------------- question level


def _paired_values(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise InputError(f"x and y must be 1-d of the same length, got {a.shape} and {b.shape}", field="y")
    if np.isnan(a).any() or np.isnan(b).any():
        raise InputError("x and y must not hold NaN: keep only the rows where both are defined", field="y")
    return a, b


def _correlation_reason(x: np.ndarray, y: np.ndarray, names: tuple[str, str]) -> str | None:
    if x.size < 2:
        return f"fewer than 2 rows with both values ({x.size})"
    for values, name in ((x, names[0]), (y, names[1])):
        if values.min() == values.max():
            return f"{name} is constant ({values[0]:g}) over the {values.size} rows: no variance"
    return None


class _ValueGroups:
    """Distinct values of one column, with the group-by-value count matrix for resampling."""

    def __init__(self, values: np.ndarray, codes: np.ndarray, n_groups: int) -> None:
        self.distinct, self.index = np.unique(values, return_inverse=True)
        ones = np.ones(values.size)
        self.matrix = scipy.sparse.csr_matrix((ones, (codes, self.index)),
                                              shape=(n_groups, self.distinct.size))

    def weights(self, w: np.ndarray) -> np.ndarray:
        """``(B, n_distinct)``: the weight of each distinct value in each resample."""
        return np.asarray((self.matrix.T @ w.T).T)

    def ranks(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-row average ranks (1-based, ties averaged) in each resample, and whether the
        resample has at least 2 distinct values."""
        gw = self.weights(w)
        below = np.cumsum(gw, axis=1) - gw
        return (below + (gw + 1.0) / 2.0)[:, self.index], (gw > 0).sum(axis=1) >= 2

    def varies(self, w: np.ndarray) -> np.ndarray:
        return (self.weights(w) > 0).sum(axis=1) >= 2


def _weighted_pearson(x: np.ndarray, y: np.ndarray, rw: np.ndarray) -> np.ndarray:
    """Pearson r per row of the row weights ``rw`` (``(B, n)``); ``x``, ``y`` ``(n,)`` or
    ``(B, n)``. Two-pass (means first) for accuracy."""
    total = rw.sum(axis=1, keepdims=True)
    cx = x - (rw * x).sum(axis=1, keepdims=True) / total
    cy = y - (rw * y).sum(axis=1, keepdims=True) / total
    sxy = (rw * cx * cy).sum(axis=1)
    sxx = (rw * cx * cx).sum(axis=1)
    syy = (rw * cy * cy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = sxy / np.sqrt(sxx * syy)
    return np.clip(r, -1.0, 1.0)


def _pearson_or_spearman(x: ArrayLike, y: ArrayLike, ranked: bool, groups: Sequence[Any] | None, n_boot: int,
                         seed: int, confidence: float, names: tuple[str, str]) -> Statistic:
    a, b = _paired_values(x, y)
    g = _groups(groups, a.size)
    codes, counts = bootstrap_weights(g, n_boot, seed)
    gx, gy = _ValueGroups(a, codes, counts.shape[1]), _ValueGroups(b, codes, counts.shape[1])

    def kernel(w: np.ndarray) -> np.ndarray:
        if ranked:
            (rx, vx), (ry, vy) = gx.ranks(w), gy.ranks(w)
            return np.where(vx & vy, _weighted_pearson(rx, ry, w[:, codes]), np.nan)
        return np.where(gx.varies(w) & gy.varies(w), _weighted_pearson(a, b, w[:, codes]), np.nan)

    return _statistic(kernel, _correlation_reason(a, b, names), g, a.size, n_boot, seed, confidence,
                      codes_counts=(codes, counts))


def pearson(x: ArrayLike, y: ArrayLike, *, groups: Sequence[Any] | None = None, n_boot: int = 1000,
            seed: int = 0, confidence: float = 0.95, names: tuple[str, str] = ("x", "y")) -> Statistic:
    """Pearson's r: ``cov(x, y) / (sd(x) sd(y))``, the linear association of paired values
    (scipy's ``pearsonr``). 1 = on one increasing line.

    Rows with NaN are refused (pass only the rows where both are defined). Undefined when fewer
    than 2 rows or when x or y is constant (no variance). ``groups`` (the question of each row)
    are the bootstrap's units; ``names`` name x and y in the reason.
    """
    return _pearson_or_spearman(x, y, False, groups, n_boot, seed, confidence, names)


def spearman(x: ArrayLike, y: ArrayLike, *, groups: Sequence[Any] | None = None, n_boot: int = 1000,
             seed: int = 0, confidence: float = 0.95, names: tuple[str, str] = ("x", "y")) -> Statistic:
    """Spearman's rho: Pearson's r of the ranks (ties get their average rank), scipy's
    ``spearmanr``. 1 = the same order. Undefined as :func:`pearson` (a constant column has
    constant ranks)."""
    return _pearson_or_spearman(x, y, True, groups, n_boot, seed, confidence, names)


def _pair_matrices(x: np.ndarray, y: np.ndarray, codes: np.ndarray, n_groups: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pair of questions (q, r): ``S[q, r] = sum sign(x_i - x_j) sign(y_i - y_j)``,
    ``TX[q, r] = #{x_i = x_j}``, ``TY[q, r] = #{y_i = y_j}`` over rows i of q and j of r (i = j
    included), and the rows per question."""
    order = np.argsort(codes, kind="stable")
    xs, ys, cs = x[order], y[order], codes[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    ends = np.r_[starts[1:], cs.size]
    s = np.zeros((n_groups, n_groups))
    tx = np.zeros((n_groups, n_groups))
    ty = np.zeros((n_groups, n_groups))
    per_block = max(1, _BLOCK_CELLS // max(cs.size, 1))
    g0 = 0
    while g0 < n_groups:
        g1 = g0 + 1
        while g1 < n_groups and ends[g1] - starts[g0] <= per_block:
            g1 += 1
        r0, r1 = starts[g0], ends[g1 - 1]
        dx = xs[r0:r1, None] - xs[None, :]
        dy = ys[r0:r1, None] - ys[None, :]
        local = starts[g0:g1] - r0
        for target, cells in ((s, np.sign(dx) * np.sign(dy)), (tx, (dx == 0).astype(float)),
                              (ty, (dy == 0).astype(float))):
            by_col = np.add.reduceat(cells, starts, axis=1)
            target[cs[starts[g0:g1]]] = np.add.reduceat(by_col, local, axis=0)
        g0 = g1
    sizes = np.bincount(codes, minlength=n_groups).astype(float)
    return s, tx, ty, sizes


def _tau_b(s: np.ndarray, not_tied_x: np.ndarray, not_tied_y: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt(not_tied_x * not_tied_y)
    return np.where((not_tied_x > 0) & (not_tied_y > 0), np.clip(tau, -1.0, 1.0), np.nan)


def kendall_tau_b(x: ArrayLike, y: ArrayLike, *, groups: Sequence[Any] | None = None, n_boot: int = 1000,
                  seed: int = 0, confidence: float = 0.95, names: tuple[str, str] = ("x", "y")) -> Statistic:
    """Kendall's tau-b (scipy's ``kendalltau``):

        tau_b = (P - Q) / sqrt((P + Q + T_y) (P + Q + T_x))

    over all pairs of rows: P concordant, Q discordant, T_x tied in x only, T_y tied in y only
    (pairs tied in both count in neither). The share of row pairs ordered alike minus the
    share ordered oppositely, corrected for ties. Undefined as :func:`pearson`.

    The bootstrap uses per-question-pair sums (``n_questions^2`` memory); above
    ``KENDALL_MATRIX_MAX_QUESTIONS`` questions it resamples one by one with scipy instead.
    """
    a, b = _paired_values(x, y)
    g = _groups(groups, a.size)
    codes, counts = bootstrap_weights(g, n_boot, seed)
    n_groups = counts.shape[1]
    reason = _correlation_reason(a, b, names)
    if reason is None and n_groups > KENDALL_MATRIX_MAX_QUESTIONS:
        return _statistic(_kendall_by_resample(a, b, codes), reason, g, a.size, n_boot, seed, confidence,
                          codes_counts=(codes, counts))
    s, tx, ty, sizes = (_pair_matrices(a, b, codes, n_groups) if reason is None
                        else (np.zeros((0, 0)),) * 3 + (np.zeros(0),))

    def kernel(w: np.ndarray) -> np.ndarray:
        total = w @ sizes
        all_pairs = total * (total - 1.0) / 2.0
        diff = 0.5 * ((w @ s) * w).sum(axis=1)
        tied_x = 0.5 * (((w @ tx) * w).sum(axis=1) - total)
        tied_y = 0.5 * (((w @ ty) * w).sum(axis=1) - total)
        return _tau_b(diff, all_pairs - tied_x, all_pairs - tied_y)

    return _statistic(kernel, reason, g, a.size, n_boot, seed, confidence, codes_counts=(codes, counts))


def _kendall_by_resample(a: np.ndarray, b: np.ndarray, codes: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def kernel(w: np.ndarray) -> np.ndarray:
        out = np.empty(w.shape[0])
        for i, weights in enumerate(w):
            idx = np.repeat(np.arange(a.size), weights[codes].astype(np.int64))
            out[i] = scipy.stats.kendalltau(a[idx], b[idx]).statistic if idx.size >= 2 else np.nan
        return out
    return kernel


# --------------------------------------------------------------------------- system level


def system_kendall(per_question: pd.DataFrame, judged: str, human: str, *, n_boot: int = 1000, seed: int = 0,
                   confidence: float = 0.95) -> Statistic:
    """Kendall tau-b between the runs ranked by the judged metric's mean and by the human
    metric's mean. Would the judge pick the same winner, and order the runs alike?

    Each run's means are taken over its questions where **both** values are defined (the rows
    the question level uses), so the two rankings are over the same questions. ``n`` = runs
    with such a question, ``n_questions`` = questions with at least one; the bootstrap resamples
    questions and recomputes every run's two means (a replicate where some run has no question
    left is undefined). Undefined when fewer than 2 runs, or when every run has the same
    judged (or human) mean.
    """
    for col in ("run", "question_id", judged, human):
        if col not in per_question.columns:
            raise InputError(f"per_question has no column {col!r}", field=col)
    both = per_question[["run", "question_id", judged, human]].dropna(subset=[judged, human])
    runs = list(dict.fromkeys(both["run"]))
    questions = list(dict.fromkeys(both["question_id"]))
    jv = both.pivot_table(index="question_id", columns="run", values=judged, aggfunc="first"
                          ).reindex(index=questions, columns=runs)
    hv = both.pivot_table(index="question_id", columns="run", values=human, aggfunc="first"
                          ).reindex(index=questions, columns=runs)
    defined = (jv.notna() & hv.notna()).to_numpy(dtype=np.float64)
    j_sum = jv.fillna(0.0).to_numpy(dtype=np.float64) * defined
    h_sum = hv.fillna(0.0).to_numpy(dtype=np.float64) * defined

    def means(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        den = w @ defined
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w @ j_sum) / den, (w @ h_sum) / den

    reason: str | None = None
    if len(runs) < 2:
        reason = f"needs at least 2 runs with both values, got {len(runs)}"
    else:
        mj, mh = means(np.ones((1, len(questions))))
        if np.unique(mj[0]).size < 2:
            reason = f"every run has the same mean {judged} ({mj[0, 0]:g}): no ranking"
        elif np.unique(mh[0]).size < 2:
            reason = f"every run has the same mean {human} ({mh[0, 0]:g}): no ranking"

    iu = np.triu_indices(len(runs), k=1)

    def kernel(w: np.ndarray) -> np.ndarray:
        mj, mh = means(w)
        sx = np.sign(mj[:, :, None] - mj[:, None, :])[:, iu[0], iu[1]]
        sy = np.sign(mh[:, :, None] - mh[:, None, :])[:, iu[0], iu[1]]
        tau = _tau_b((sx * sy).sum(axis=1), (sx != 0).sum(axis=1).astype(float),
                     (sy != 0).sum(axis=1).astype(float))
        return np.where(np.isnan(mj).any(axis=1) | np.isnan(mh).any(axis=1), np.nan, tau)

    return _statistic(kernel, reason, questions, len(runs), n_boot, seed, confidence)


# --------------------------------------------------------------------------- inputs


#: judged metric name -> its human counterpart, in the order the question table lists them.
JUDGED_TO_HUMAN: tuple[tuple[str, str], ...] = (
    ("context_recall", "recall"),
    ("judge_recall", "recall"),
    ("judge_ndcg", "ndcg"),
    ("judge_precision", "precision"),
    ("judge_hit_rate", "hit_rate"),
    ("judge_mrr", "mrr"),
)


def metric_pairs(columns: Iterable[str]) -> list[tuple[str, str]]:
    """The (judged, human) column pairs present in ``columns``: ``context_recall@k`` and
    ``judge_recall@k`` with ``recall@k``, ``judge_ndcg@k`` with ``ndcg@k``,
    ``judge_precision@k`` with ``precision@k``, ``judge_hit_rate@k`` with ``hit_rate@k``,
    ``judge_mrr@K`` with ``mrr@K`` (same cutoff); in that order, k ascending."""
    cols = list(columns)
    present = set(cols)
    out: list[tuple[str, str]] = []
    for judged, human in JUDGED_TO_HUMAN:
        pattern = re.compile(rf"^{re.escape(judged)}(@(\d+))?$")
        found = [(int(m.group(2) or 0), m.group(1) or "") for c in cols if (m := pattern.match(c))]
        for _, suffix in sorted(found):
            if human + suffix in present:
                out.append((judged + suffix, human + suffix))
    return out


@dataclass(frozen=True)
class ChunkCounts:
    """Where the judged (question, chunk) pairs went.

    - ``judged``: rows of ``verdicts`` (unique judged pairs);
    - ``errored``: of those, the judge failed (``errored_labelled`` of them had a human label);
    - ``unlabelled``: judged without error but without a human label (not used);
    - ``pairs``: judged without error and labelled: the chunk-level sample;
    - ``labelled_not_judged``: human labels of chunks no run put in the judged top k (not used).
    """

    judged: int
    errored: int
    errored_labelled: int
    unlabelled: int
    pairs: int
    labelled_not_judged: int


def _grades_of(qrels: Qrels | Mapping[str, Mapping[str, int]]) -> Mapping[str, Mapping[str, int]]:
    return qrels.grades if isinstance(qrels, Qrels) else qrels


def chunk_pairs(verdicts: pd.DataFrame, qrels: Qrels | Mapping[str, Mapping[str, int]]
                ) -> tuple[pd.DataFrame, ChunkCounts]:
    """The chunk-level sample: one row per (question, chunk) that humans labelled and the judge
    judged without error, with ``question_id``, ``chunk_id``, ``human_grade``, ``judge_grade``
    (the capped grade: a grade of 2-3 whose evidence all failed counts as 1, as for the
    judge-labelled metrics), and the counts of what was left out."""
    for col in ("question_id", "chunk_id", "error"):
        if col not in verdicts.columns and not verdicts.empty:
            raise InputError(f"verdicts has no column {col!r}", field=col)
    grades = _grades_of(qrels)
    v = verdicts.reindex(columns=["question_id", "chunk_id", "error", "capped_grade"])
    errored = v["error"].notna().to_numpy(dtype=bool)
    if "capped_grade" not in verdicts.columns and not errored.all():
        # every row has one unless all of them failed (grid.verdict_frame)
        raise InputError("verdicts has no column 'capped_grade'", field="capped_grade")
    human = [grades.get(str(q), {}).get(str(c)) for q, c in zip(v["question_id"], v["chunk_id"], strict=True)]
    labelled = np.array([g is not None for g in human], dtype=bool)
    use = labelled & ~errored
    if v.loc[use, "capped_grade"].isna().any():
        raise InputError("a verdict without error has no capped_grade", field="capped_grade")
    pairs = pd.DataFrame({
        "question_id": v.loc[use, "question_id"].astype(str).to_numpy(),
        "chunk_id": v.loc[use, "chunk_id"].astype(str).to_numpy(),
        "human_grade": np.array([g for g, u in zip(human, use, strict=True) if u], dtype=np.int64),
        "judge_grade": v.loc[use, "capped_grade"].to_numpy(dtype=np.float64).astype(np.int64),
    })
    judged_keys = set(zip(v["question_id"].astype(str), v["chunk_id"].astype(str), strict=True))
    n_labels = sum(len(by_chunk) for by_chunk in grades.values())
    labelled_judged = sum(1 for q, by_chunk in grades.items() for c in by_chunk if (str(q), str(c)) in judged_keys)
    counts = ChunkCounts(judged=len(v), errored=int(errored.sum()), errored_labelled=int((errored & labelled).sum()),
                         unlabelled=int((~labelled & ~errored).sum()), pairs=int(use.sum()),
                         labelled_not_judged=n_labels - labelled_judged)
    return pairs, counts


# --------------------------------------------------------------------------- the report


STAT_COLUMNS = ["value", "n", "n_questions", "ci_low", "ci_high", "reason"]


@dataclass(frozen=True)
class AgreementReport:
    """Judge vs human agreement (:func:`agreement`).

    - ``chunk``: one row per chunk-level statistic: ``statistic`` (``cohen_kappa``,
      ``weighted_kappa``, ``precision``, ``recall``, ``roc_auc``) and the :class:`Statistic`
      fields;
    - ``confusion``: 2 x 2 pair counts, rows ``human``, columns ``judge`` (not relevant,
      relevant);
    - ``question``: one row per (judged, human, statistic) with ``statistic`` in ``pearson``,
      ``spearman``, ``kendall``;
    - ``system``: one row per (judged, human): Kendall tau-b over runs (``n`` = runs);
    - ``counts``: :class:`ChunkCounts`; ``settings``: thresholds, n_boot, seed, confidence.
    """

    chunk: pd.DataFrame
    confusion: pd.DataFrame
    question: pd.DataFrame
    system: pd.DataFrame
    counts: ChunkCounts
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes None; frames become lists of records."""
        c = self.confusion
        return {
            "settings": dict(self.settings),
            "counts": asdict(self.counts),
            "confusion": {
                f"human_{h.replace(' ', '_')}": {f"judge_{j.replace(' ', '_')}": int(c.loc[h, j]) for j in c.columns}
                for h in c.index
            },
            "chunk": _records(self.chunk),
            "question": _records(self.question),
            "system": _records(self.system),
        }

    def render(self) -> str:
        """A plain-text summary for the terminal (fixed width)."""
        s = self.settings
        ci = f"{round(s['confidence'] * 100):d}% CI"
        c, k = self.counts, self.confusion
        lines = [
            f"Judge vs human agreement ({ci}: bootstrap over questions, {s['n_boot']} resamples, seed {s['seed']})",
            "",
            "Chunks: does the judge label a chunk as humans did? "
            f"(judge relevant = capped grade >= {s['judge_threshold']}, human relevant = grade >= "
            f"{s['human_threshold']})",
            f"  {c.pairs} pairs labelled by humans and judged; left out: {c.unlabelled} unlabelled, "
            f"{c.errored} judge errors ({c.errored_labelled} labelled), {c.labelled_not_judged} labels never retrieved",
            f"  {'pairs':<21}{'judge: not relevant':>20}{'relevant':>10}",
            f"  {'human: not relevant':<21}{k.iloc[0, 0]:>20}{k.iloc[0, 1]:>10}",
            f"  {'       relevant':<21}{k.iloc[1, 0]:>20}{k.iloc[1, 1]:>10}",
            "  kappa: agreement beyond chance (0 chance, 1 perfect); precision, recall: the judge's 'relevant' "
            "vs the humans';",
            "  roc_auc: chance the judge grades a human-relevant chunk above a non-relevant one (0.5 = a coin)",
        ]
        lines += _value_lines(self.chunk, ["statistic"], [16], ci, "n")
        lines += ["", "Questions: does a question's judged metric move with its human one? "
                  "(value [CI], over (run, question) rows with both)"]
        if self.question.empty:
            lines.append("  no judged metric with a human counterpart in per_question")
        else:
            undefined: list[str] = []
            lines.append(f"  {'judged':<20}{'human':<13}{'pearson':<22}{'spearman':<22}{'kendall':<22}{'rows':>5}")
            for (judged, human), sub in self.question.groupby(["judged", "human"], sort=False):
                by = {r.statistic: r for r in sub.itertuples(index=False)}
                cells = "".join(f"{_fmt(by[st].value) + ' ' + _ci(by[st]):<22}"
                                for st in ("pearson", "spearman", "kendall"))
                lines.append(f"  {judged:<20}{human:<13}{cells}{sub['n'].iloc[0]:>5}")
                undefined += [f"{judged} vs {human} {r.statistic}: {r.reason}" for r in sub.itertuples() if r.reason]
            lines += [f"  n/a = {u}" for u in undefined]
        lines += ["", "Systems: do the judged and the human means rank the runs alike? (Kendall tau-b over runs)"]
        if self.system.empty:
            lines.append("  no judged metric with a human counterpart in per_question")
        else:
            lines += _value_lines(self.system.rename(columns={"value": "tau"}), ["judged", "human"], [20, 13], ci,
                                  "runs", value="tau")
        return "\n".join(lines)


def _fmt(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _ci(row: Any) -> str:
    lo, hi = (row["ci_low"], row["ci_high"]) if isinstance(row, dict) else (row.ci_low, row.ci_high)
    return "" if math.isnan(lo) else f"[{lo:.2f}, {hi:.2f}]"


def _value_lines(frame: pd.DataFrame, keys: list[str], widths: list[int], ci: str, n_label: str,
                 value: str = "value") -> list[str]:
    """A header, one line per row (keys, value, CI, n), then ``n/a = <keys>: <reason>`` for
    every undefined value."""
    head = "".join(f"{k:<{w}}" for k, w in zip(keys, widths, strict=True))
    lines = [f"  {head}{value:>7}  {ci:<18}{n_label:>5}"]
    undefined = []
    for row in frame.to_dict(orient="records"):
        label = "".join(f"{row[k]:<{w}}" for k, w in zip(keys, widths, strict=True))
        lines.append(f"  {label}{_fmt(row[value]):>7}  {_ci(row):<18}{row['n']:>5}")
        if row["reason"]:
            undefined.append(f"  n/a = {' vs '.join(row[k] for k in keys)}: {row['reason']}")
    return lines + undefined


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for rec in frame.to_dict(orient="records"):
        out.append({key: (None if isinstance(v, float) and math.isnan(v) else
                          int(v) if isinstance(v, np.integer) else float(v) if isinstance(v, np.floating) else v)
                    for key, v in rec.items()})
    return out


def frame_with_reasons(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """A frame of ``rows`` whose ``reason`` column keeps None for "no reason" (pandas would
    otherwise infer a string column and turn None into NaN)."""
    frame = pd.DataFrame(rows, columns=columns)
    frame["reason"] = pd.Series([row.get("reason") for row in rows], index=frame.index, dtype=object)
    return frame


def _row(stat: Statistic, **keys: Any) -> dict[str, Any]:
    return {**keys, **asdict(stat)}


def agreement(
    per_question: pd.DataFrame,
    verdicts: pd.DataFrame,
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    *,
    judge_threshold: int = 2,
    human_threshold: int = 1,
    pairs: Sequence[tuple[str, str]] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AgreementReport:
    """Judge vs human agreement at chunk, question and system level (module docstring).

    ``per_question`` and ``verdicts`` are ``Results.per_question`` and ``Results.verdicts``;
    ``qrels`` maps question id -> chunk id -> human grade. A pair is judge-relevant iff its
    capped grade >= ``judge_threshold``, human-relevant iff its grade >= ``human_threshold``.
    ``pairs`` (judged column, human column) defaults to :func:`metric_pairs` of the frame.
    """
    for name, value in (("judge_threshold", judge_threshold), ("human_threshold", human_threshold)):
        _check_count(name, value)
    _check_count("n_boot", n_boot)
    _check_confidence(confidence)
    opts: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    sample, counts = chunk_pairs(verdicts, qrels)
    groups = sample["question_id"].tolist()
    h, j = sample["human_grade"].to_numpy(), sample["judge_grade"].to_numpy()
    h_rel = (h >= human_threshold).astype(np.int64)
    j_rel = (j >= judge_threshold).astype(np.int64)
    chunk_stats = {
        "cohen_kappa": cohen_kappa(h_rel, j_rel, groups=groups, **opts),
        "weighted_kappa": quadratic_weighted_kappa(h, j, groups=groups, **opts),
        "precision": relevant_precision(h_rel, j_rel, groups=groups, **opts),
        "recall": relevant_recall(h_rel, j_rel, groups=groups, **opts),
        "roc_auc": roc_auc(h_rel, j, groups=groups, **opts),
    }
    chunk = frame_with_reasons([_row(st, statistic=name) for name, st in chunk_stats.items()],
                               ["statistic", *STAT_COLUMNS])

    chosen = metric_pairs(per_question.columns) if pairs is None else list(pairs)
    q_rows: list[dict[str, Any]] = []
    s_rows: list[dict[str, Any]] = []
    for judged, human in chosen:
        for col in (judged, human):
            if col not in per_question.columns:
                raise InputError(f"per_question has no column {col!r}", field="pairs")
        both = per_question.dropna(subset=[judged, human])
        x, y, g = both[judged].to_numpy(), both[human].to_numpy(), both["question_id"].tolist()
        for name, fn in (("pearson", pearson), ("spearman", spearman), ("kendall", kendall_tau_b)):
            st = fn(x, y, groups=g, names=(judged, human), **opts)
            q_rows.append(_row(st, judged=judged, human=human, statistic=name))
        s_rows.append(_row(system_kendall(per_question, judged, human, **opts), judged=judged, human=human,
                           statistic="kendall"))
    question = frame_with_reasons(q_rows, ["judged", "human", "statistic", *STAT_COLUMNS])
    system = frame_with_reasons(s_rows, ["judged", "human", "statistic", *STAT_COLUMNS])
    settings = {"judge_threshold": judge_threshold, "human_threshold": human_threshold, **opts}
    return AgreementReport(chunk=chunk, confusion=confusion_matrix(h_rel, j_rel), question=question,
                           system=system, counts=counts, settings=settings)
