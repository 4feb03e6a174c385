"""Judge vs human agreement (judge_eval.metrics.agreement): every statistic against scikit-learn
and scipy on random data, hand-computed small cases, the undefined cases, the cluster bootstrap
against materialised resamples, and the report."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from sklearn.metrics import cohen_kappa_score, precision_score, recall_score, roc_auc_score
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from judge_eval.data.models import Qrels
from judge_eval.errors import InputError
from judge_eval.metrics import agreement as ag
from judge_eval.metrics.agreement import (
    agreement,
    bootstrap_weights,
    chunk_pairs,
    cohen_kappa,
    confusion_matrix,
    kendall_tau_b,
    metric_pairs,
    pearson,
    quadratic_weighted_kappa,
    relevant_precision,
    relevant_recall,
    roc_auc,
    spearman,
    system_kendall,
)
from judge_eval.metrics.stats import _resample_counts

SEEDS = [0, 1, 2, 3, 4]


def _graded(seed: int, n: int = 200, n_questions: int = 40):
    """Human grades 0-3, judge grades 0-3 that agree loosely, question ids."""
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 4, n)
    judge = np.clip(human + rng.integers(-2, 3, n), 0, 3)
    groups = [f"q{i}" for i in rng.integers(0, n_questions, n)]
    return human, judge, groups


def _paired(seed: int, n: int = 150, n_questions: int = 30):
    """Paired metric values with ties (rounded), question ids."""
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    y = np.round(0.6 * x + 0.4 * rng.random(n), 1)
    x = np.round(x, 2)
    groups = [f"q{i}" for i in rng.integers(0, n_questions, n)]
    return x, y, groups


# --------------------------------------------------------------------------- vs scikit-learn / scipy


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("human_threshold,judge_threshold", [(1, 2), (2, 2), (2, 1), (3, 3)])
def test_chunk_statistics_equal_sklearn(seed, human_threshold, judge_threshold):
    human, judge, groups = _graded(seed)
    h = (human >= human_threshold).astype(int)
    j = (judge >= judge_threshold).astype(int)
    opts = {"groups": groups, "n_boot": 50}
    assert cohen_kappa(h, j, **opts).value == pytest.approx(cohen_kappa_score(h, j), abs=1e-12)
    assert relevant_precision(h, j, **opts).value == pytest.approx(precision_score(h, j), abs=1e-12)
    assert relevant_recall(h, j, **opts).value == pytest.approx(recall_score(h, j), abs=1e-12)
    assert roc_auc(h, judge, **opts).value == pytest.approx(roc_auc_score(h, judge), abs=1e-12)
    assert (confusion_matrix(h, j).to_numpy() == sk_confusion_matrix(h, j, labels=[0, 1])).all()
    assert relevant_precision(h, j).n == j.sum() and relevant_recall(h, j).n == h.sum()


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_and_multiclass_kappa_equal_sklearn(seed):
    human, judge, groups = _graded(seed)
    qwk = quadratic_weighted_kappa(human, judge, groups=groups, n_boot=50).value
    assert qwk == pytest.approx(cohen_kappa_score(human, judge, weights="quadratic"), abs=1e-12)
    assert cohen_kappa(human, judge, n_boot=50).value == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_kappa_uses_grade_values_not_positions(seed):
    """Human grades {0, 1, 5} (the judge 0-3, so the union is 0 1 2 3 5): the weights are
    (a - b)^2 on the values, which is scikit-learn with every integer between min and max as a
    label; scikit-learn's default (positions in the observed labels) differs."""
    rng = np.random.default_rng(seed)
    human = rng.choice([0, 1, 5], 120)
    judge = np.clip(np.where(human == 5, 3, human) + rng.integers(-1, 2, 120), 0, 3)
    ours = quadratic_weighted_kappa(human, judge, n_boot=20).value
    by_value = cohen_kappa_score(human, judge, weights="quadratic", labels=list(range(6)))
    assert ours == pytest.approx(by_value, abs=1e-12)
    assert ours != pytest.approx(cohen_kappa_score(human, judge, weights="quadratic"), abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_equal_scipy(seed):
    x, y, groups = _paired(seed)
    for ours, theirs in ((pearson, scipy.stats.pearsonr), (spearman, scipy.stats.spearmanr),
                         (kendall_tau_b, scipy.stats.kendalltau)):
        st = ours(x, y, groups=groups, n_boot=50)
        assert st.value == pytest.approx(theirs(x, y).statistic, abs=1e-12)
        assert (st.n, st.n_questions) == (len(x), len(set(groups)))


def _materialised_ci(values_fn, arrays, groups, n_boot, seed, confidence=0.95):
    """The percentile CI computed the slow way: build each resample's rows and call the
    reference implementation on them."""
    codes, counts = bootstrap_weights(groups, n_boot, seed)
    reps = []
    for weights in counts:
        idx = np.repeat(np.arange(len(codes)), weights[codes].astype(int))
        with np.errstate(all="ignore"):
            try:
                reps.append(float(values_fn(*(a[idx] for a in arrays))))
            except ValueError:  # e.g. roc_auc_score with one class
                reps.append(math.nan)
    reps = np.array(reps)
    reps = reps[~np.isnan(reps)]
    alpha = 1 - confidence
    return tuple(np.quantile(reps, [alpha / 2, 1 - alpha / 2]))


def _sk_kappa_defined(a, b):
    # our kappa is undefined when a rater is constant (sklearn gives 0 there)
    if len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return cohen_kappa_score(a, b)


def _sk_qwk_defined(a, b):
    if len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_ci_equals_materialised_resamples(seed):
    """The weighted kernels give, on every resample, what scikit-learn / scipy give on the
    resample's rows built explicitly (questions drawn with replacement)."""
    human, judge, groups = _graded(seed, n=80, n_questions=12)
    h, j = (human >= 1).astype(int), (judge >= 2).astype(int)
    n_boot, bseed = 60, seed + 7
    opts = {"groups": groups, "n_boot": n_boot, "seed": bseed}
    cases = [
        (cohen_kappa(h, j, **opts), _sk_kappa_defined, (h, j)),
        (quadratic_weighted_kappa(human, judge, **opts), _sk_qwk_defined, (human, judge)),
        (relevant_precision(h, j, **opts), lambda a, b: precision_score(a, b, zero_division=np.nan), (h, j)),
        (relevant_recall(h, j, **opts), lambda a, b: recall_score(a, b, zero_division=np.nan), (h, j)),
        (roc_auc(h, judge, **opts), roc_auc_score, (h, judge)),
    ]
    x, y, pgroups = _paired(seed, n=70, n_questions=15)
    popts = {"groups": pgroups, "n_boot": n_boot, "seed": bseed}
    for ours, theirs in ((pearson, scipy.stats.pearsonr), (spearman, scipy.stats.spearmanr),
                         (kendall_tau_b, scipy.stats.kendalltau)):
        cases.append((ours(x, y, **popts), lambda a, b, f=theirs: f(a, b).statistic, (x, y)))
    for st, reference, arrays in cases:
        g = pgroups if arrays[0] is x else groups
        lo, hi = _materialised_ci(reference, arrays, g, n_boot, bseed)
        assert (st.ci_low, st.ci_high) == pytest.approx((lo, hi), abs=1e-9), reference


def test_kendall_resample_fallback_equals_pair_matrices(monkeypatch):
    x, y, groups = _paired(3, n=90, n_questions=20)
    fast = kendall_tau_b(x, y, groups=groups, n_boot=40, seed=5)
    monkeypatch.setattr(ag, "KENDALL_MATRIX_MAX_QUESTIONS", 0)
    slow = kendall_tau_b(x, y, groups=groups, n_boot=40, seed=5)
    assert (slow.value, slow.ci_low, slow.ci_high) == pytest.approx((fast.value, fast.ci_low, fast.ci_high), abs=1e-12)


def test_pair_matrices_in_several_blocks(monkeypatch):
    x, y, groups = _paired(4, n=120, n_questions=25)
    whole = kendall_tau_b(x, y, groups=groups, n_boot=30)
    monkeypatch.setattr(ag, "_BLOCK_CELLS", 500)  # a few questions per block
    blocks = kendall_tau_b(x, y, groups=groups, n_boot=30)
    assert (blocks.value, blocks.ci_low, blocks.ci_high) == pytest.approx((whole.value, whole.ci_low, whole.ci_high))


# --------------------------------------------------------------------------- hand-computed cases


def test_hand_computed_chunk_statistics():
    h = [1, 1, 0, 0]
    j = [1, 0, 0, 0]
    # p_o = 3/4; p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (3/4 - 1/2) / (1 - 1/2)
    assert cohen_kappa(h, j).value == pytest.approx(0.5)
    assert relevant_precision(h, j).value == 1.0  # TP 1, FP 0
    assert relevant_recall(h, j).value == 0.5  # TP 1, FN 1
    assert confusion_matrix(h, j).to_numpy().tolist() == [[2, 0], [1, 1]]
    # pos scores 3, 1; neg 1, 0: 3 > 1, 3 > 0, 1 = 1 (half), 1 > 0 -> 3.5 / 4
    assert roc_auc(h, [3, 1, 1, 0]).value == pytest.approx(0.875)
    # grades (0,0), (1,2), (2,2): observed sum w O = 1/3; p_h = 1/3 each of 0,1,2,
    # p_j = (1/3, 0, 2/3); sum w E = 1/3 (8/3 + 1 + 4/3) = 5/3; 1 - (1/3)/(5/3)
    assert quadratic_weighted_kappa([0, 1, 2], [0, 2, 2]).value == pytest.approx(0.8)


def test_hand_computed_correlations():
    x, y = [1, 2, 3], [1, 3, 2]
    # centred x = -1 0 1, y = -1 1 0: sxy = 1, sxx = syy = 2
    assert pearson(x, y).value == pytest.approx(0.5)
    assert spearman(x, y).value == pytest.approx(0.5)
    # pairs: (1,2) concordant, (1,3) concordant, (2,3) discordant
    assert kendall_tau_b(x, y).value == pytest.approx(1 / 3)
    # x tied on (1,2): P = 2, Q = 0, T_x = 1: 2 / sqrt((2 + 0) (2 + 1))
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]).value == pytest.approx(2 / math.sqrt(6))


def _frame(rows):
    return pd.DataFrame(rows, columns=["run", "question_id", "judge_recall@5", "recall@5"])


def test_hand_computed_system_kendall():
    # judged means a .9, b .5, c .1; human means a .8, b .2, c .4:
    # (a,b) and (a,c) concordant, (b,c) discordant -> (2 - 1) / 3
    rows = []
    for run, (j1, j2, h1, h2) in {"a": (1.0, 0.8, 0.8, 0.8), "b": (0.5, 0.5, 0.0, 0.4),
                                  "c": (0.2, 0.0, 0.4, 0.4)}.items():
        rows += [(run, "q1", j1, h1), (run, "q2", j2, h2)]
    # a question where the human value is undefined does not count for either mean
    rows.append(("a", "q3", 0.0, np.nan))
    st = system_kendall(_frame(rows), "judge_recall@5", "recall@5", n_boot=50)
    assert st.value == pytest.approx(1 / 3)
    assert (st.n, st.n_questions) == (3, 2)


def test_system_kendall_equals_scipy_on_means():
    rng = np.random.default_rng(11)
    rows = []
    for r in range(6):
        for q in range(30):
            judged = rng.random() + 0.05 * r
            human = np.nan if rng.random() < 0.1 else 0.5 * judged + 0.5 * rng.random()
            rows.append((f"run{r}", f"q{q}", judged, human))
    frame = _frame(rows)
    both = frame.dropna()
    means = both.groupby("run", sort=False)[["judge_recall@5", "recall@5"]].mean()
    st = system_kendall(frame, "judge_recall@5", "recall@5", n_boot=200)
    assert st.value == pytest.approx(scipy.stats.kendalltau(means["judge_recall@5"], means["recall@5"]).statistic)
    assert st.ci_low <= st.value <= st.ci_high
    # the CI resamples questions: recompute a few replicates by hand
    codes, counts = bootstrap_weights(list(dict.fromkeys(both["question_id"])), 200, 0)
    assert counts.shape == (200, 30)


# --------------------------------------------------------------------------- undefined cases


@pytest.mark.parametrize("fn", [cohen_kappa, quadratic_weighted_kappa])
def test_kappa_undefined_when_a_rater_is_constant(fn):
    st = fn([1, 0, 1, 0], [1, 1, 1, 1])
    assert math.isnan(st.value) and math.isnan(st.ci_low) and "judge gave every pair the same label" in st.reason
    # scikit-learn says 0 here: a number that says nothing about the judge
    assert cohen_kappa_score([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0
    assert "humans gave every pair" in fn([2, 2, 2], [0, 1, 2]).reason
    assert fn([], []).reason == "no pairs"


def test_other_chunk_statistics_undefined():
    assert relevant_precision([1, 0], [0, 0]).reason == "the judge called no pair relevant"
    assert relevant_recall([0, 0], [1, 0]).reason == "humans called no pair relevant"
    st = roc_auc([1, 1, 1], [0, 2, 3])
    assert math.isnan(st.value) and "AUC needs both classes" in st.reason


def test_correlations_undefined():
    for fn in (pearson, spearman, kendall_tau_b):
        st = fn([0.1, 0.5, 0.9], [1.0, 1.0, 1.0], names=("judge_recall@5", "recall@5"))
        assert math.isnan(st.value) and st.reason == "recall@5 is constant (1) over the 3 rows: no variance"
        assert "fewer than 2 rows" in fn([0.3], [0.2]).reason
    # defined, but a single question: no CI
    st = pearson([0.1, 0.5, 0.9], [0.2, 0.1, 0.9], groups=["q1"] * 3)
    assert not math.isnan(st.value) and math.isnan(st.ci_low)


def test_constant_resamples_are_left_out_of_the_ci():
    # q1's rows alone are constant in x: resamples drawing only q1 are undefined, not 0
    x = [0.5, 0.5, 0.1, 0.9]
    y = [0.2, 0.4, 0.1, 0.8]
    st = pearson(x, y, groups=["q1", "q1", "q2", "q2"], n_boot=200)
    assert st.ci_high <= 1.0 and st.ci_low >= -1.0 and not math.isnan(st.ci_low)


def test_system_kendall_undefined():
    one_run = _frame([("a", "q1", 0.5, 0.5), ("a", "q2", 0.1, 0.3)])
    assert system_kendall(one_run, "judge_recall@5", "recall@5").reason == \
        "needs at least 2 runs with both values, got 1"
    tied = _frame([("a", "q1", 0.5, 0.5), ("b", "q1", 0.5, 0.3)])
    st = system_kendall(tied, "judge_recall@5", "recall@5")
    assert math.isnan(st.value) and "every run has the same mean judge_recall@5" in st.reason


def test_bad_input():
    with pytest.raises(InputError):
        cohen_kappa([1, 0], [1])
    with pytest.raises(InputError):
        pearson([0.1, np.nan], [0.2, 0.3])
    with pytest.raises(InputError):
        relevant_precision([2, 0], [1, 0])
    with pytest.raises(InputError):
        cohen_kappa([0.5, 1], [1, 0])
    with pytest.raises(InputError):
        pearson([0.1, 0.2], [0.2, 0.3], groups=["q1"])


# --------------------------------------------------------------------------- seeds


def test_bootstrap_is_seeded_and_reproducible():
    x, y, groups = _paired(0)
    a = spearman(x, y, groups=groups, seed=3)
    b = spearman(x, y, groups=groups, seed=3)
    c = spearman(x, y, groups=groups, seed=4)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    codes, counts = bootstrap_weights(groups, 100, 3)
    assert (counts == _resample_counts(len(set(groups)), 100, 3)).all()
    assert (counts.sum(axis=1) == len(set(groups))).all()
    assert codes.tolist() == pd.factorize(pd.Series(groups))[0].tolist()


# --------------------------------------------------------------------------- the report


def test_metric_pairs():
    cols = ["run", "question_id", "context_recall@10", "context_recall@5", "context_precision@5", "judge_recall@5",
            "judge_mrr@10", "judge_hit_rate@5", "recall@5", "recall@10", "mrr@10", "ndcg@5", "judge_ndcg@10"]
    assert metric_pairs(cols) == [("context_recall@5", "recall@5"), ("context_recall@10", "recall@10"),
                                  ("judge_recall@5", "recall@5"), ("judge_mrr@10", "mrr@10")]


def _scenario(seed: int = 0):
    """Two runs over 25 questions; verdicts for the chunks they retrieved (some errors, some
    unlabelled); qrels with some labels no run retrieved."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    verdict_rows = []
    pq_rows = []
    for q in range(25):
        qid = f"q{q}"
        qrels[qid] = {}
        for c in range(6):
            cid = f"{qid}c{c}"
            grade = int(rng.integers(0, 4))
            if c < 4:
                qrels[qid][cid] = grade
            if c == 5:
                continue  # labelled? no (c >= 4) and never retrieved
            if c == 4 and q % 5 == 0:
                verdict_rows.append({"question_id": qid, "chunk_id": cid, "runs": {"a": 5}, "error": "timeout",
                                     "grade": None})
                continue
            if c == 3 and q % 7 == 0:
                verdict_rows.append({"question_id": qid, "chunk_id": cid, "runs": {"a": 4}, "error": "timeout",
                                     "grade": None})
                continue
            judge = int(np.clip(grade + rng.integers(-1, 2), 0, 3))
            verdict_rows.append({"question_id": qid, "chunk_id": cid, "runs": {"a": c + 1}, "error": None,
                                 "grade": judge, "capped_grade": judge})
        qrels[qid][f"{qid}c9"] = 2  # labelled, never retrieved
        for run in ("a", "b", "c"):
            human = rng.random()
            pq_rows.append({"run": run, "question_id": qid, "context_recall@5": 0.7 * human + 0.3 * rng.random(),
                            "judge_recall@5": np.nan if q == 3 else human + rng.normal(0, 0.2),
                            "recall@5": np.nan if q == 4 else human + (0.2 if run == "a" else 0.0)})
    return pd.DataFrame(pq_rows), pd.DataFrame(verdict_rows), qrels


def test_chunk_pairs_counts():
    _, verdicts, qrels = _scenario()
    pairs, counts = chunk_pairs(verdicts, qrels)
    errored_labelled = sum(1 for q in range(25) if q % 7 == 0)
    assert counts.judged == 25 * 5
    assert counts.errored == 5 + errored_labelled
    assert counts.errored_labelled == errored_labelled
    assert counts.unlabelled == 25 - 5  # c4 of the questions without an error there
    assert counts.pairs == 25 * 4 - errored_labelled
    assert counts.labelled_not_judged == 25  # every c9
    assert len(pairs) == counts.pairs
    assert pairs.columns.tolist() == ["question_id", "chunk_id", "human_grade", "judge_grade"]
    assert chunk_pairs(verdicts, Qrels(grades=qrels))[1] == counts


def test_agreement_report():
    per_question, verdicts, qrels = _scenario()
    rep = agreement(per_question, verdicts, qrels, n_boot=200, seed=1)
    pairs, _ = chunk_pairs(verdicts, qrels)
    h = (pairs["human_grade"] >= 1).astype(int)
    j = (pairs["judge_grade"] >= 2).astype(int)
    chunk = rep.chunk.set_index("statistic")
    assert chunk.loc["cohen_kappa", "value"] == pytest.approx(cohen_kappa_score(h, j))
    assert chunk.loc["weighted_kappa", "value"] == pytest.approx(
        cohen_kappa_score(pairs["human_grade"], pairs["judge_grade"], weights="quadratic"))
    assert chunk.loc["precision", "value"] == pytest.approx(precision_score(h, j))
    assert chunk.loc["recall", "value"] == pytest.approx(recall_score(h, j))
    assert chunk.loc["roc_auc", "value"] == pytest.approx(roc_auc_score(h, pairs["judge_grade"]))
    assert (chunk["n_questions"] == 25).all()
    assert (rep.confusion.to_numpy() == sk_confusion_matrix(h, j, labels=[0, 1])).all()

    assert rep.question[["judged", "human"]].drop_duplicates().values.tolist() == [
        ["context_recall@5", "recall@5"], ["judge_recall@5", "recall@5"]]
    both = per_question.dropna(subset=["judge_recall@5", "recall@5"])
    q = rep.question.set_index(["judged", "statistic"])
    assert q.loc[("judge_recall@5", "kendall"), "value"] == pytest.approx(
        scipy.stats.kendalltau(both["judge_recall@5"], both["recall@5"]).statistic)
    assert q.loc[("judge_recall@5", "pearson"), "n"] == 3 * 23
    assert q.loc[("context_recall@5", "spearman"), "n_questions"] == 24

    system = rep.system.set_index("judged")
    assert system.loc["judge_recall@5", "n"] == 3
    means = both.groupby("run")[["judge_recall@5", "recall@5"]].mean()
    assert system.loc["judge_recall@5", "value"] == pytest.approx(
        scipy.stats.kendalltau(means["judge_recall@5"], means["recall@5"]).statistic)

    d = rep.to_dict()
    json.dumps(d, allow_nan=False)  # NaN became None
    assert set(d) == {"settings", "counts", "confusion", "chunk", "question", "system"}
    assert d["counts"]["pairs"] == len(pairs)
    assert d["confusion"]["human_relevant"]["judge_relevant"] == int(((h == 1) & (j == 1)).sum())
    assert [r["statistic"] for r in d["chunk"]] == ["cohen_kappa", "weighted_kappa", "precision", "recall", "roc_auc"]
    assert set(d["question"][0]) == {"judged", "human", "statistic", "value", "n", "n_questions", "ci_low",
                                     "ci_high", "reason"}
    text = rep.render()
    assert "judge errors" in text and "Kendall tau-b over runs" in text
    assert f"{chunk.loc['cohen_kappa', 'value']:.3f}" in text
    assert max(len(line) for line in text.splitlines()) <= 140


def test_agreement_with_nothing_to_compare():
    per_question = pd.DataFrame({"run": ["a"], "question_id": ["q1"], "context_recall@5": [0.5]})
    verdicts = pd.DataFrame({"question_id": ["q1"], "chunk_id": ["c1"], "error": ["timeout"], "grade": [None]})
    rep = agreement(per_question, verdicts, {"q2": {"c1": 1}}, n_boot=20)
    assert rep.counts.errored == 1 and rep.counts.pairs == 0 and rep.counts.labelled_not_judged == 1
    assert rep.chunk["value"].isna().all() and (rep.chunk["reason"] == "no pairs").all()
    assert rep.question.empty and rep.system.empty
    json.dumps(rep.to_dict(), allow_nan=False)
    assert "n/a = cohen_kappa: no pairs" in rep.render()


def test_agreement_rejects_bad_options():
    per_question, verdicts, qrels = _scenario()
    with pytest.raises(InputError):
        agreement(per_question, verdicts, qrels, judge_threshold=0)
    with pytest.raises(InputError):
        agreement(per_question, verdicts, qrels, pairs=[("judge_ndcg@5", "ndcg@5")])
    with pytest.raises(InputError):
        agreement(per_question, verdicts.drop(columns="capped_grade"), qrels)


def test_report_mixes_defined_and_undefined_statistics():
    """A judge that never grades above 1: kappa on relevant/not and precision are undefined,
    weighted kappa, recall (0) and AUC are not; defined rows keep reason None."""
    per_question, verdicts, qrels = _scenario(2)
    verdicts = verdicts.assign(capped_grade=verdicts["capped_grade"].clip(upper=1))
    rep = agreement(per_question, verdicts, qrels, n_boot=50)
    chunk = rep.chunk.set_index("statistic")
    assert chunk.loc["cohen_kappa", "reason"].startswith("the judge gave every pair the same label (0)")
    assert chunk.loc["precision", "reason"] == "the judge called no pair relevant"
    assert chunk.loc["recall", "value"] == 0.0
    assert chunk.loc["weighted_kappa", "reason"] is None and chunk.loc["roc_auc", "reason"] is None
    text = rep.render()
    assert "nan" not in text
    assert [line.strip().split(" = ")[1].split(":")[0] for line in text.splitlines() if "n/a =" in line] == [
        "cohen_kappa", "precision"]
