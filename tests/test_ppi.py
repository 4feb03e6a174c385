"""Prediction-powered estimates (judge_eval.metrics.ppi): hand-computed values, edge cases,
coverage of the 95% CI in simulation, and the per-run table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from judge_eval.errors import InputError
from judge_eval.metrics.ppi import Estimate, human_only_mean, judge_only_mean, ppi_mean, ppi_table

Z = scipy.stats.norm.ppf(0.975)


def test_hand_computed_ppi():
    # f_U = .5 .7 .9: mean .7, var .04; f_L - y_L = .1 -.2: mean -.05, var .045
    est = ppi_mean([0.5, 0.7, 0.9], [0.6, 0.8], [0.5, 1.0])
    se = math.sqrt(0.04 / 3 + 0.045 / 2)
    assert est.method == "ppi" and est.reason is None
    assert est.mean == pytest.approx(0.75)
    assert est.se == pytest.approx(se)
    assert (est.ci_low, est.ci_high) == pytest.approx((0.75 - Z * se, 0.75 + Z * se))
    assert (est.n_labelled, est.n_unlabelled) == (2, 3)
    # alpha = 0.1 uses z = 1.645
    assert ppi_mean([0.5, 0.7, 0.9], [0.6, 0.8], [0.5, 1.0], alpha=0.1).ci_high == pytest.approx(
        0.75 + scipy.stats.norm.ppf(0.95) * se)


def test_hand_computed_human_and_judge_only():
    # y = 0 .5 1: mean .5, sd .5, se .5 / sqrt(3)
    h = human_only_mean([0.0, 0.5, 1.0])
    assert (h.method, h.mean, h.n_labelled, h.n_unlabelled) == ("human_only", 0.5, 3, 0)
    assert h.se == pytest.approx(0.5 / math.sqrt(3))
    assert h.ci_low == pytest.approx(0.5 - Z * 0.5 / math.sqrt(3))
    j = judge_only_mean([0.2, 0.4])
    assert (j.method, j.mean, j.n_unlabelled) == ("judge_only", pytest.approx(0.3), 2)
    assert j.se == pytest.approx(math.sqrt(0.02) / math.sqrt(2))


def test_ppi_removes_a_constant_judge_bias():
    """A judge that is always 0.2 too high: the correction removes exactly 0.2, and the
    rectifier has no variance."""
    y_unlabelled = np.array([0.1, 0.4, 0.3, 0.9, 0.5])
    y_labelled = np.array([0.2, 0.6, 0.7])
    est = ppi_mean(y_unlabelled + 0.2, y_labelled + 0.2, y_labelled)
    assert est.mean == pytest.approx(y_unlabelled.mean())
    assert est.se == pytest.approx(y_unlabelled.std(ddof=1) / math.sqrt(5))


def test_edge_cases():
    no_unlabelled = ppi_mean([], [0.6, 0.8, 0.1], [0.5, 1.0, 0.0])
    assert no_unlabelled.method == "human_only"
    assert no_unlabelled.mean == pytest.approx(0.5) and no_unlabelled.se == human_only_mean([0.5, 1.0, 0.0]).se
    assert "the human-only estimate" in no_unlabelled.reason
    assert ppi_mean([0.3], [0.6, 0.8], [0.5, 1.0]).method == "human_only"
    for est in (ppi_mean([0.1, 0.2, 0.3], [0.6], [0.5]), human_only_mean([0.5]), judge_only_mean([])):
        assert math.isnan(est.mean) and math.isnan(est.se) and math.isnan(est.ci_low)
        assert est.reason.startswith("fewer than 2")
    with pytest.raises(InputError):
        ppi_mean([0.1, np.nan], [0.6, 0.8], [0.5, 1.0])
    with pytest.raises(InputError):
        ppi_mean([0.1, 0.2], [0.6, 0.8], [0.5])
    with pytest.raises(InputError):
        human_only_mean([0.1, 0.2], alpha=1.5)


# --------------------------------------------------------------------------- simulation

TRIALS = 1000
TRUE_MEAN = 2 / 7  # y ~ Beta(2, 5)


def _simulate(seed: int, n: int, big_n: int, slope: float, bias: float, noise: float):
    """``TRIALS`` data sets at once: human values y for n labelled + N unlabelled questions and
    a judge f = slope * y + bias + N(0, noise)."""
    rng = np.random.default_rng(seed)
    y = rng.beta(2, 5, (TRIALS, n + big_n))
    f = slope * y + bias + rng.normal(0.0, noise, (TRIALS, n + big_n))
    return y, f


def _run(y, f, n):
    ppi = [ppi_mean(f[t, n:], f[t, :n], y[t, :n]) for t in range(TRIALS)]
    human = [human_only_mean(y[t, :n]) for t in range(TRIALS)]
    judge = [judge_only_mean(f[t]) for t in range(TRIALS)]

    def coverage(estimates: list[Estimate]) -> float:
        return float(np.mean([e.ci_low <= TRUE_MEAN <= e.ci_high for e in estimates]))

    def width(estimates: list[Estimate]) -> float:
        return float(np.mean([e.ci_high - e.ci_low for e in estimates]))

    return coverage(ppi), coverage(human), coverage(judge), width(ppi), width(human)


def test_ppi_covers_and_beats_human_only_with_an_informative_judge():
    """A biased but informative judge (f = 0.8 y + 0.15 + noise 0.05), 100 labelled and 1000
    unlabelled questions: the PPI CI covers the true mean ~95% of the time and is narrower
    than the human-only CI; the judge-only CI, blind to the bias, almost never covers it."""
    y, f = _simulate(0, n=100, big_n=1000, slope=0.8, bias=0.15, noise=0.05)
    ppi_cov, human_cov, judge_cov, ppi_width, human_width = _run(y, f, 100)
    assert 0.93 <= ppi_cov <= 0.97
    assert 0.93 <= human_cov <= 0.97
    assert ppi_width < 0.6 * human_width
    assert judge_cov < 0.5


def test_ppi_covers_with_a_noisy_judge_and_design_md_variant_overcovers():
    """A noisy judge (noise 0.3) and as many labelled as unlabelled questions: PPI still
    covers ~95% (its CI is wide: the judge adds little). DESIGN.md's variant, mean_N(f) over all
    questions with the same SE formula, ignores the covariance of its two terms and
    over-covers (its SE is too large): why ppi_mean uses the unlabelled questions only."""
    n = big_n = 200
    y, f = _simulate(1, n=n, big_n=big_n, slope=1.0, bias=0.1, noise=0.3)
    ppi_cov, *_ = _run(y, f, n)
    assert 0.93 <= ppi_cov <= 0.97
    error = f[:, :n] - y[:, :n]
    theta = f.mean(axis=1) - error.mean(axis=1)
    se = np.sqrt(f.var(axis=1, ddof=1) / (n + big_n) + error.var(axis=1, ddof=1) / n)
    design_cov = np.mean(np.abs(theta - TRUE_MEAN) <= Z * se)
    assert design_cov > 0.99


# --------------------------------------------------------------------------- the table


def _per_question():
    rng = np.random.default_rng(5)
    rows = []
    for run in ("a", "b"):
        for q in range(12):
            y = rng.random()
            rows.append({"run": run, "question_id": f"q{q}",
                         "judge_recall@5": np.nan if q in (0, 7) else y + 0.1 + rng.normal(0, 0.1),
                         "recall@5": y if q < 6 and q != 2 else np.nan,
                         "context_recall@5": y, "judge_hit_rate@5": float(y > 0.5),
                         "hit_rate@5": float(y > 0.4) if q < 6 else np.nan})
    return pd.DataFrame(rows)


def test_ppi_table_sets_and_values():
    pq = _per_question()
    labelled = [f"q{q}" for q in range(6)]
    table = ppi_table(pq, labelled, pairs={"recall@5": "judge_recall@5"})
    assert table[["run", "human", "judged"]].values.tolist() == [["a", "recall@5", "judge_recall@5"],
                                                                 ["b", "recall@5", "judge_recall@5"]]
    a = pq[pq["run"] == "a"].set_index("question_id")
    # labelled: q0..q5; q2 has no human value (dropped), q0 no judge value (dropped from PPI)
    lab = ["q1", "q3", "q4", "q5"]
    unl = ["q6", "q8", "q9", "q10", "q11"]  # q7 has no judge value
    expected = ppi_mean(a.loc[unl, "judge_recall@5"], a.loc[lab, "judge_recall@5"], a.loc[lab, "recall@5"])
    row = table.iloc[0]
    assert (row["ppi_n_labelled"], row["ppi_n_unlabelled"]) == (4, 5)
    assert (row["ppi_mean"], row["ppi_se"], row["ppi_ci_low"]) == pytest.approx(
        (expected.mean, expected.se, expected.ci_low))
    human = human_only_mean(a.loc[["q0", "q1", "q3", "q4", "q5"], "recall@5"])
    assert (row["human_mean"], row["human_n"]) == (pytest.approx(human.mean), 5)
    judge = judge_only_mean(a["judge_recall@5"].dropna())
    assert (row["judge_mean"], row["judge_n"]) == (pytest.approx(judge.mean), 10)
    assert row["reason"] is None


def test_ppi_table_default_pairs_and_reasons():
    pq = _per_question()
    table = ppi_table(pq, ["q0", "q1"], alpha=0.1)
    # default: X with judge_X only (context_recall is not a judge_ column)
    assert table[["human", "judged"]].drop_duplicates().values.tolist() == [["recall@5", "judge_recall@5"],
                                                                            ["hit_rate@5", "judge_hit_rate@5"]]
    recall_a = table[(table["run"] == "a") & (table["human"] == "recall@5")].iloc[0]
    # labelled q0 (no judge value) and q1: one labelled pair left -> PPI undefined; human-only has 2
    assert math.isnan(recall_a["ppi_mean"]) and recall_a["reason"] == "ppi: fewer than 2 labelled questions (1)"
    assert recall_a["human_n"] == 2 and not math.isnan(recall_a["human_mean"])
    with pytest.raises(InputError):
        ppi_table(pq, ["q0"], pairs={"ndcg@5": "judge_ndcg@5"})
