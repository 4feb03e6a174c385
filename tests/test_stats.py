"""Aggregation, bootstrap CIs, paired comparisons and Holm's correction."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from judge_eval.errors import InputError
from judge_eval.metrics.stats import (
    PairedDifference,
    aggregate,
    bootstrap_ci,
    holm,
    paired_difference,
    randomization_test,
)


def _frame(values: dict[str, list[float]], runs: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(values)
    frame.insert(0, "question_id", [f"q{i}" for i in range(len(frame))])
    frame.insert(0, "run", runs)
    return frame


# --------------------------------------------------------------------------- aggregate


def test_aggregate_means_counts_and_missing() -> None:
    frame = _frame(
        {
            "recall@5": [1.0, 0.5, np.nan, 0.0, 1.0, np.nan],
            "mrr": [1.0, 0.5, 0.25, np.nan, np.nan, np.nan],
        },
        ["A", "A", "A", "B", "B", "B"],
    )
    out = aggregate(frame, n_boot=200)
    assert list(out.columns) == ["run", "measure", "mean", "n", "n_missing", "ci_low", "ci_high"]
    assert out[["run", "measure"]].values.tolist() == [
        ["A", "recall@5"], ["A", "mrr"], ["B", "recall@5"], ["B", "mrr"]]
    assert out["mean"].tolist()[:3] == pytest.approx([0.75, 1.75 / 3, 0.5])
    assert math.isnan(out.loc[3, "mean"])  # B has no mrr value at all
    assert out["n"].tolist() == [2, 3, 2, 0]
    assert out["n_missing"].tolist() == [1, 0, 1, 3]
    assert out["n"].dtype == np.int64
    # CI NaN for n < 2 only
    assert out[["ci_low", "ci_high"]].iloc[:3].notna().all().all()
    assert out[["ci_low", "ci_high"]].iloc[3].isna().all()


def test_aggregate_single_value_has_no_ci() -> None:
    out = aggregate(_frame({"m": [0.3, np.nan]}, ["A", "A"]))
    assert out.loc[0, "mean"] == pytest.approx(0.3) and out.loc[0, "n"] == 1
    assert math.isnan(out.loc[0, "ci_low"]) and math.isnan(out.loc[0, "ci_high"])


def test_aggregate_ci_is_the_percentile_bootstrap() -> None:
    """The vectorised count-matrix bootstrap equals a plain loop over resamples drawn with the
    same generator (seed, n)."""
    rng = np.random.default_rng(7)
    x = rng.random(57)
    x[[3, 10, 20]] = np.nan
    out = aggregate(_frame({"m": x}, ["A"] * 57), n_boot=500, seed=11, confidence=0.9)
    v = x[~np.isnan(x)]
    n = v.size
    idx = np.random.default_rng([11, n]).integers(0, n, size=(500, n))
    means = v[idx].mean(axis=1)
    lo, hi = np.quantile(means, [0.05, 0.95])
    assert out.loc[0, "ci_low"] == pytest.approx(lo, abs=1e-12)
    assert out.loc[0, "ci_high"] == pytest.approx(hi, abs=1e-12)
    assert bootstrap_ci(x, n_boot=500, seed=11, confidence=0.9) == pytest.approx((lo, hi))


def test_aggregate_is_reproducible_and_seeded() -> None:
    rng = np.random.default_rng(3)
    frame = _frame({"a": rng.random(80), "b": rng.random(80)}, ["A"] * 40 + ["B"] * 40)
    first = aggregate(frame, seed=5)
    pd.testing.assert_frame_equal(first, aggregate(frame, seed=5))
    assert not np.allclose(first["ci_low"], aggregate(frame, seed=6)["ci_low"])
    # A measure's CI does not depend on the other columns or groups in the frame (up to the
    # rounding of a matrix product with a different number of columns).
    alone = aggregate(frame[frame["run"] == "B"][["run", "question_id", "b"]], seed=5)
    row = first[(first["run"] == "B") & (first["measure"] == "b")].iloc[0]
    assert alone.loc[0, "ci_low"] == pytest.approx(row["ci_low"], abs=1e-12)
    assert alone.loc[0, "ci_high"] == pytest.approx(row["ci_high"], abs=1e-12)


def test_aggregate_ci_contains_mean_and_narrows_with_n() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (20, 80, 320, 1280):
        x = rng.normal(0.6, 0.2, n)
        out = aggregate(_frame({"m": x}, ["A"] * n), n_boot=1000, seed=0).iloc[0]
        assert out["ci_low"] < out["mean"] < out["ci_high"]
        widths.append(out["ci_high"] - out["ci_low"])
        # close to the normal-theory interval mean +- 1.96 * sd / sqrt(n)
        normal = 2 * 1.96 * x.std(ddof=1) / math.sqrt(n)
        assert widths[-1] == pytest.approx(normal, rel=0.15)
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 4  # width ~ 1/sqrt(n): 64x the data, ~1/8 the width


def test_aggregate_grouping_options() -> None:
    frame = _frame({"m": [1.0, 0.0, 1.0, 1.0]}, ["A", "A", "B", "B"])
    frame["split"] = ["x", "y", "x", "x"]
    both = aggregate(frame, by=["run", "split"], n_boot=100)
    assert both[["run", "split", "measure", "n"]].values.tolist() == [
        ["A", "x", "m", 1], ["A", "y", "m", 1], ["B", "x", "m", 2]]
    overall = aggregate(frame.drop(columns="split"), by=[], n_boot=100)
    assert overall[["measure", "mean", "n"]].values.tolist() == [["m", 0.75, 4]]
    chosen = aggregate(frame, by="run", measures=["m"], n_boot=100)
    assert chosen["measure"].tolist() == ["m", "m"]
    with pytest.raises(InputError):
        aggregate(frame, by=["nope"])
    with pytest.raises(InputError):
        aggregate(frame, measures=["nope"])
    with pytest.raises(InputError):
        aggregate(frame, confidence=1.0)
    with pytest.raises(InputError):
        aggregate(frame, n_boot=0)


def test_aggregate_300_questions_50_measures() -> None:
    """Shape and definedness at realistic size; its speed is measured in bench/bench_metrics.py."""
    rng = np.random.default_rng(1)
    x = rng.random((300, 50))
    x[rng.random(x.shape) < 0.05] = np.nan
    frame = _frame({f"m{j}": x[:, j] for j in range(50)}, ["A"] * 300)
    out = aggregate(frame, n_boot=1000)
    assert len(out) == 50 and out["ci_low"].notna().all()
    assert (out["n"] + out["n_missing"] == 300).all()
    assert (out["ci_low"] <= out["mean"]).all() and (out["mean"] <= out["ci_high"]).all()


# --------------------------------------------------------------------------- paired comparisons


def test_paired_difference() -> None:
    a = np.array([0.9, 0.8, np.nan, 0.7, 1.0, 0.6])
    b = np.array([0.5, 0.8, 0.3, 0.2, np.nan, 0.5])
    res = paired_difference(a, b, n_boot=500, seed=1)
    assert isinstance(res, PairedDifference)
    assert res.n == 4  # pairs with a NaN are dropped
    assert res.mean_diff == pytest.approx((0.4 + 0.0 + 0.5 + 0.1) / 4)
    assert res.ci_low <= res.mean_diff <= res.ci_high
    assert paired_difference(a, b, n_boot=500, seed=1) == res
    same = paired_difference([0.1, 0.5, 0.9], [0.1, 0.5, 0.9])
    assert (same.mean_diff, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    none = paired_difference([np.nan], [1.0])
    assert none.n == 0 and math.isnan(none.mean_diff) and math.isnan(none.ci_low)
    with pytest.raises(InputError):
        paired_difference([1.0, 2.0], [1.0])


def test_randomization_test_identical_and_shifted() -> None:
    rng = np.random.default_rng(4)
    a = rng.random(200)
    assert randomization_test(a, a.copy()) == 1.0
    assert randomization_test(a[:5], a[:5]) == 1.0  # the exact path
    shifted = a + 0.1 + rng.normal(0, 0.05, 200)
    p = randomization_test(shifted, a, n_perm=2000, seed=0)
    assert p == pytest.approx(1 / 2001)  # no sign vector reaches the observed mean
    noise = rng.normal(0, 1, 200)
    assert randomization_test(noise, rng.normal(0, 1, 200), n_perm=2000) > 0.01
    assert randomization_test(shifted, a, seed=3) == randomization_test(shifted, a, seed=3)


def test_randomization_test_exact_small_cases() -> None:
    # d = [1, 2, 3]: T = |mean| = 2. Sums over the 8 sign vectors: +-6, +-4, +-2, 0, 0;
    # |sum| / 3 >= 2 only for +-6 -> p = 2/8.
    assert randomization_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # d = [1, 1, 1, 1]: only all-plus and all-minus reach |sum| = 4 -> p = 2/16.
    assert randomization_test([1.0] * 4, [0.0] * 4) == pytest.approx(0.125)
    # d = [1, -1]: sums 0, 0, 2, -2 -> all four reach T = 0 -> p = 1.
    assert randomization_test([1.0, 0.0], [0.0, 1.0]) == 1.0
    assert math.isnan(randomization_test([np.nan], [1.0]))


def test_randomization_test_monte_carlo_agrees_with_exact() -> None:
    rng = np.random.default_rng(9)
    a, b = rng.normal(0.3, 1, 12), rng.normal(0, 1, 12)
    exact = randomization_test(a, b, n_perm=5000)  # 2**12 = 4096 <= 5000: enumerated
    sampled = randomization_test(a, b, n_perm=4000, seed=2)  # 4000 < 4096: Monte Carlo
    assert sampled == pytest.approx(exact, abs=0.03)


# --------------------------------------------------------------------------- Holm


def test_holm_hand_checked() -> None:
    # m = 4. Sorted: 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04;
    # running max: 0.02, 0.03, 0.06, 0.06; back in input order:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1; ties keep their order
    assert holm([0.5, 0.5, 0.2]) == pytest.approx([1.0, 1.0, 0.6])
    # NaN stays NaN and does not count in m (m = 2 here)
    out = holm([0.02, np.nan, 0.04])
    assert out[0] == pytest.approx(0.04) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)
    assert holm([]).size == 0
    with pytest.raises(InputError):
        holm([1.5])
