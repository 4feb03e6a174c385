"""Aggregation over questions and paired comparison of runs.

* :func:`aggregate`: macro mean per group (run) and measure over the questions where the value
  is defined, with ``n``, ``n_missing`` and a percentile-bootstrap confidence interval.
* :func:`paired_difference`: mean of per-question differences ``a - b`` with a bootstrap CI.
* :func:`randomization_test`: paired sign-flip test of ``mean(a - b) = 0``, two-sided.
* :func:`holm`: Holm-Bonferroni adjusted p-values.

Everything is seeded and deterministic: the bootstrap resamples for ``n`` values depend only on
``(seed, n)``, so a measure's CI does not change when other columns or groups are added.
Resampling is vectorised (a count matrix times the value matrix), so 1000 resamples of 300
questions x 50 measures take milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from judge_eval.errors import InputError

__all__ = [
    "PairedDifference",
    "aggregate",
    "bootstrap_ci",
    "holm",
    "paired_difference",
    "randomization_test",
]

_NON_MEASURE_COLUMNS = ("run", "question_id")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}", field="confidence")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be an integer >= 1, got {value!r}", field=name)


def _resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, n)`` matrix: how often each of ``n`` items is drawn in each bootstrap
    resample (n draws with replacement). Depends only on ``(seed, n, n_boot)``."""
    rng = np.random.default_rng([seed, n])
    # int32 draws are the very numbers int64 draws give (numpy draws both through the same
    # 32-bit path below 2**32), in half the memory; the counts are made a block of rows at a
    # time, so 1,000 resamples of 10,000 questions peak at ~130 MB, not ~320 MB.
    idx = rng.integers(0, n, size=(n_boot, n), dtype=np.int32 if n < 2**31 else np.int64)
    counts = np.empty((n_boot, n), dtype=np.float64)
    block = max(1, 2**20 // n)
    for start in range(0, n_boot, block):
        rows = idx[start : start + block]
        flat = (rows + (np.arange(len(rows), dtype=np.int64) * n)[:, None]).ravel()
        counts[start : start + len(rows)] = np.bincount(flat, minlength=len(rows) * n).reshape(len(rows), n)
    return counts


def _bootstrap_means(
    values: np.ndarray, n_boot: int, seed: int, cache: dict[int, np.ndarray] | None = None
) -> np.ndarray:
    """Bootstrap means of each column of ``values`` (``(n, m)``, no NaN): ``(n_boot, m)``.
    ``cache`` (n -> count matrix) saves redrawing for the same n within one call."""
    n = values.shape[0]
    if cache is None:
        counts = _resample_counts(n, n_boot, seed)
    else:
        if n not in cache:
            cache[n] = _resample_counts(n, n_boot, seed)
        counts = cache[n]
    return counts @ values / n


def _interval(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return lo, hi


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of ``values`` (NaN dropped).

    Draw ``n_boot`` resamples of size ``n`` with replacement, take each mean, and return the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles (numpy's linear
    interpolation). ``(nan, nan)`` when fewer than 2 values are defined.
    """
    _check_count("n_boot", n_boot)
    _check_confidence(confidence)
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size < 2:
        return (math.nan, math.nan)
    lo, hi = _interval(_bootstrap_means(x[:, None], n_boot, seed), confidence)
    return (float(lo[0]), float(hi[0]))


def _measure_columns(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    skip = set(by) | set(_NON_MEASURE_COLUMNS)
    return [c for c in frame.columns if c not in skip and pd.api.types.is_numeric_dtype(frame[c])]


def aggregate(
    per_question: pd.DataFrame,
    by: Sequence[str] | str = ("run",),
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    measures: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Summarise a per-question frame (e.g. from ``evaluate_runs``) per group and measure.

    Returns a long frame with the ``by`` columns, then ``measure``, ``mean``, ``n``,
    ``n_missing``, ``ci_low``, ``ci_high``; one row per group (in order of first appearance)
    and measure (in column order). ``measures`` defaults to every numeric column other than
    ``by``, ``run`` and ``question_id``.

    * ``mean`` = macro mean over the group's rows where the value is defined (not NaN);
      NaN when ``n = 0``.
    * ``n`` = rows with a value; ``n_missing`` = rows with NaN (undefined or failed).
    * ``ci_low``/``ci_high`` = percentile bootstrap over those rows (questions), ``n_boot``
      resamples, seeded; NaN when ``n < 2``.
    """
    _check_count("n_boot", n_boot)
    _check_confidence(confidence)
    by_cols = [by] if isinstance(by, str) else list(by)
    for col in by_cols:
        if col not in per_question.columns:
            raise InputError(f"no column {col!r} to group by", field="by")
    if measures is None:
        cols = _measure_columns(per_question, by_cols)
    else:
        cols = list(measures)
        for c in cols:
            if c not in per_question.columns:
                raise InputError(f"no measure column {c!r}", field="measures")
    rows: list[dict[str, object]] = []
    cache: dict[int, np.ndarray] = {}
    if by_cols:
        groups: Iterable[tuple[object, pd.DataFrame]] = per_question.groupby(
            by_cols, sort=False, dropna=False
        )
    else:
        groups = [((), per_question)]
    for key, sub in groups:
        keys = key if isinstance(key, tuple) else (key,)
        matrix = sub[cols].to_numpy(dtype=np.float64) if cols else np.empty((len(sub), 0))
        defined = ~np.isnan(matrix)
        stats = _column_stats(matrix, defined, n_boot, seed, confidence, cache)
        for j, col in enumerate(cols):
            row: dict[str, object] = dict(zip(by_cols, keys, strict=True))
            row["measure"] = col
            row.update({name: values[j] for name, values in stats.items()})
            rows.append(row)
    out = pd.DataFrame(
        rows, columns=[*by_cols, "measure", "mean", "n", "n_missing", "ci_low", "ci_high"]
    )
    return out.astype({"n": "int64", "n_missing": "int64"})


def _column_stats(
    matrix: np.ndarray,
    defined: np.ndarray,
    n_boot: int,
    seed: int,
    confidence: float,
    cache: dict[int, np.ndarray],
) -> dict[str, np.ndarray]:
    """Mean, n, n_missing and bootstrap CI of every column (one matrix product per distinct n)."""
    m = matrix.shape[1]
    n = defined.sum(axis=0)
    sums = np.where(defined, matrix, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
    lo = np.full(m, np.nan)
    hi = np.full(m, np.nan)
    by_n: dict[int, list[int]] = {}
    for j in range(m):
        if n[j] >= 2:
            by_n.setdefault(int(n[j]), []).append(j)
    for cols in by_n.values():
        # Each column's defined values, compacted; columns with the same n share one
        # resample matrix (it depends only on seed and n).
        values = np.column_stack([matrix[defined[:, j], j] for j in cols])
        boot = _bootstrap_means(values, n_boot, seed, cache)
        lo[cols], hi[cols] = _interval(boot, confidence)
    return {
        "mean": mean,
        "n": n.astype(np.int64),
        "n_missing": (matrix.shape[0] - n).astype(np.int64),
        "ci_low": lo,
        "ci_high": hi,
    }


# --------------------------------------------------------------------------- paired comparisons


@dataclass(frozen=True)
class PairedDifference:
    """Mean of ``a - b`` over the ``n`` pairs where both are defined, with a bootstrap CI."""

    mean_diff: float
    ci_low: float
    ci_high: float
    n: int


def _pairs(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise InputError(
            f"paired values need two 1-d arrays of the same length, got {x.shape} and {y.shape}",
            field="values",
        )
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep] - y[keep]


def paired_difference(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedDifference:
    """Paired comparison of two runs on the same questions (``a[i]``, ``b[i]``: question i).

    ``d_i = a_i - b_i`` over pairs where both are defined; ``mean_diff = mean(d)``; CI =
    percentile bootstrap of ``mean(d)`` resampling questions (NaN when fewer than 2 pairs;
    ``mean_diff`` NaN when none).
    """
    d = _pairs(a, b)
    mean = float(d.mean()) if d.size else math.nan
    lo, hi = bootstrap_ci(d, n_boot=n_boot, seed=seed, confidence=confidence)
    return PairedDifference(mean_diff=mean, ci_low=lo, ci_high=hi, n=int(d.size))


_EXACT_MAX_N = 16  # up to 2**16 sign vectors: enumerate them all (an exact test)


def randomization_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_perm: int = 10000,
    seed: int = 0,
) -> float:
    """Two-sided paired randomization (sign-flip) test of ``mean(a - b) = 0``.

    Under the null, each pair's difference ``d_i`` is equally likely to have either sign.
    ``T = |mean(d)|``; ``p = (1 + #{T* >= T}) / (1 + n_perm)`` over ``n_perm`` random sign
    vectors (seeded), or exactly ``#{T* >= T} / 2**n`` over all sign vectors when
    ``2**n <= n_perm`` and ``n <= 16``. Pairs with a NaN are dropped; with no pair left the
    p-value is NaN. Identical arrays give ``p = 1``. A relative tolerance of 1e-12 guards the
    comparison ``T* >= T`` against rounding.
    """
    _check_count("n_perm", n_perm)
    d = _pairs(a, b)
    n = d.size
    if n == 0:
        return math.nan
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= _EXACT_MAX_N and 2**n <= n_perm:
        codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1
        signs = 1.0 - 2.0 * codes
        stats = np.abs(signs @ d) / n
        return float(np.count_nonzero(stats >= observed - tol) / 2**n)
    rng = np.random.default_rng(seed)
    count = 0
    block = max(1, min(n_perm, 2_000_000 // max(n, 1)))
    done = 0
    while done < n_perm:
        size = min(block, n_perm - done)
        signs = rng.integers(0, 2, size=(size, n)) * 2.0 - 1.0
        stats = np.abs(signs @ d) / n
        count += int(np.count_nonzero(stats >= observed - tol))
        done += size
    return (1 + count) / (1 + n_perm)


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the input order.

    With the ``m`` non-NaN p-values sorted ascending, ``p_(1) <= ... <= p_(m)``:
    ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``. Reject where ``adj <= alpha`` to
    control the family-wise error rate at ``alpha``. NaN inputs stay NaN and do not count in
    ``m``.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise InputError("holm() needs a 1-d sequence of p-values", field="pvalues")
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise InputError("p-values must lie in [0, 1]", field="pvalues")
    m = ok.size
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out
