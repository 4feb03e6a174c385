"""Labelled measures: the seeds' worked examples, hand-computed edge cases, the measure-string
grammar and whole-run evaluation. (Random cross-checks against trec_eval, ranx and ir_measures
are in test_metrics_crosscheck.py.)

The two seed texts are retrieval-metrics-course.txt and retrieval-metrics-relu-chat.txt; their
numbers are copied here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.errors import InputError
from judge_eval.metrics import labelled as L
from judge_eval.metrics.evaluate_labelled import evaluate_runs, labelled_questions
from judge_eval.metrics.stats import aggregate

LOG2_3 = math.log2(3)  # 1.58496...
LOG2_5 = math.log2(5)  # 2.32193...


def approx3(x: float | None) -> float:
    assert x is not None
    return round(x, 3)


# --------------------------------------------------------------------------- course seed

COURSE_RANKING = ["c7", "c2", "c9", "c4", "c1"]
COURSE_GRADES = {"c2": 2, "c4": 1, "c8": 1}


def test_course_worked_example() -> None:
    r, g = COURSE_RANKING, COURSE_GRADES
    assert L.hit_rate(r, g, 5) == 1.0
    assert approx3(L.recall(r, g, 5)) == 0.667  # 2 of {c2, c4, c8}; c8 missed
    assert L.precision(r, g, 5) == pytest.approx(0.4)  # 2 / 5
    assert L.reciprocal_rank(r, g) == 0.5  # first relevant (c2) at rank 2
    # DCG@5  = 2/log2(3) + 1/log2(5)           = 1.26186 + 0.43068 = 1.69254
    # IDCG@5 = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.63093 + 0.5 = 3.13093
    dcg = 2 / LOG2_3 + 1 / LOG2_5
    idcg = 2 + 1 / LOG2_3 + 1 / 2
    assert L.dcg(r, g, 5) == pytest.approx(dcg)
    assert L.ideal_dcg(g, 5) == pytest.approx(idcg)
    assert L.ndcg(r, g, 5) == pytest.approx(dcg / idcg)
    assert approx3(L.ndcg(r, g, 5)) == 0.541  # the text's "0.54" / code comment "0.540..."
    assert math.floor(L.ndcg(r, g, 5) * 1000) / 1000 == 0.540
    # The rest of the family on the same example:
    # AP = (P@2 + P@4) / 3 = (1/2 + 2/4) / 3 = 1/3; R = 3 -> R-precision = 1/3 (c2 in top 3)
    assert L.average_precision(r, g) == pytest.approx(1 / 3)
    assert L.r_precision(r, g) == pytest.approx(1 / 3)
    assert L.judged(r, g, 5) == pytest.approx(0.4)  # c2, c4 labelled; c7, c9, c1 not


def test_course_example_through_evaluate_ranking() -> None:
    out = L.evaluate_ranking(
        COURSE_RANKING, COURSE_GRADES, ["hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5"]
    )
    assert list(out) == ["hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5"]
    assert [round(v, 3) for v in out.values()] == [1.0, 0.667, 0.4, 0.5, 0.541]


# --------------------------------------------------------------------------- ReLU-chat seed

# Grades [3, 1, 2, 0] at ranks 1-4; the labelled set is exactly these four chunks.
RELU_RANKING = ["a", "b", "c", "d"]
RELU_GRADES = {"a": 3, "b": 1, "c": 2, "d": 0}
# "Swap the first two grades": [1, 3, 2, 0].
SWAPPED_RANKING = ["b", "a", "c", "d"]


def test_relu_chat_ndcg_with_jarvelin_discount() -> None:
    r, g = RELU_RANKING, RELU_GRADES
    # DCG@4  = 3 + 1/log2(2) + 2/log2(3) + 0/log2(4) = 3 + 1 + 1.26186 = 5.26186
    # IDCG@4 = 3 + 2/log2(2) + 1/log2(3) + 0         = 3 + 2 + 0.63093 = 5.63093
    dcg = L.dcg(r, g, 4, discount="jarvelin")
    idcg = L.ideal_dcg(g, 4, discount="jarvelin")
    assert dcg == pytest.approx(3 + 1 + 2 / LOG2_3)
    assert idcg == pytest.approx(3 + 2 + 1 / LOG2_3)
    assert round(dcg, 2) == 5.26 and round(idcg, 2) == 5.63
    assert approx3(L.ndcg(r, g, 4, discount="jarvelin")) == 0.934
    assert approx3(L.evaluate_ranking(r, g, ["ndcg_jarvelin@4"])["ndcg_jarvelin@4"]) == 0.934


def test_relu_chat_swapped_ranking_pitfall() -> None:
    """The text claims the swap [1, 3, 2, 0] drops nDCG to about 0.77. Under its own formula
    ranks 1 and 2 both have discount 1, so the swap changes nothing."""
    r, g = SWAPPED_RANKING, RELU_GRADES
    # jarvelin: DCG = 1/1 + 3/1 + 2/log2(3) + 0 = 5.26186 (same terms, same sum) -> 0.934
    assert approx3(L.ndcg(r, g, 4, discount="jarvelin")) == 0.934
    assert L.ndcg(r, g, 4, discount="jarvelin") == pytest.approx(
        L.ndcg(RELU_RANKING, g, 4, discount="jarvelin")
    )
    # log2(i+1), linear gain:
    #   DCG  = 1/1 + 3/log2(3) + 2/log2(4) + 0 = 1 + 1.89279 + 1 = 3.89279
    #   IDCG = 3/1 + 2/log2(3) + 1/log2(4) + 0 = 3 + 1.26186 + 0.5 = 4.76186
    #   nDCG = 0.81750
    expected = (1 + 3 / LOG2_3 + 2 / 2) / (3 + 2 / LOG2_3 + 1 / 2)
    assert L.ndcg(r, g, 4) == pytest.approx(expected)
    assert round(L.ndcg(r, g, 4), 4) == 0.8175
    # log2(i+1), exponential gain 2^g - 1 (gains 1, 7, 3, 0):
    #   DCG  = 1/1 + 7/log2(3) + 3/log2(4) = 1 + 4.41651 + 1.5 = 6.91651
    #   IDCG = 7/1 + 3/log2(3) + 1/log2(4) = 7 + 1.89279 + 0.5 = 9.39279
    #   nDCG = 0.73637
    expected_exp = (1 + 7 / LOG2_3 + 3 / 2) / (7 + 3 / LOG2_3 + 1 / 2)
    assert L.ndcg(r, g, 4, gain="exp") == pytest.approx(expected_exp)
    assert approx3(L.ndcg(r, g, 4, gain="exp")) == 0.736
    # and with both exp gain and jarvelin discount the swap is again free
    assert L.ndcg(r, g, 4, gain="exp", discount="jarvelin") == pytest.approx(
        L.ndcg(RELU_RANKING, g, 4, gain="exp", discount="jarvelin")
    )
    # For contrast, the unswapped ranking under log2(i+1):
    #   linear: (3 + 1/log2(3) + 2/2) / 4.76186 = 4.63093 / 4.76186 = 0.97250(4)
    #   exp:    (7 + 1/log2(3) + 3/2) / 9.39279 = 9.13093 / 9.39279 = 0.97212
    assert approx3(L.ndcg(RELU_RANKING, g, 4)) == 0.973
    assert approx3(L.ndcg(RELU_RANKING, g, 4, gain="exp")) == 0.972


def test_relu_chat_precision_and_recall() -> None:
    # 8 relevant fragments labelled; 10 returned, 6 of them relevant (ranks 1,2,4,5,7,9).
    relevant = [f"rel{i}" for i in range(8)]
    grades = {c: 1 for c in relevant}
    ranking = ["rel0", "rel1", "x0", "rel2", "rel3", "x1", "rel4", "x2", "rel5", "x3"]
    assert L.precision(ranking, grades, 10) == pytest.approx(6 / 10)
    assert L.recall(ranking, grades, 10) == pytest.approx(6 / 8)
    assert L.precision(ranking, grades, 2) == 1.0  # "precision@k = 1.0": top k all relevant


def test_relu_chat_mrr_80_20() -> None:
    # 10 questions: the first relevant chunk is at rank 1 for 8, at rank 2 for 2.
    grades = {f"q{i}": {"good": 1} for i in range(10)}
    rankings = {
        f"q{i}": [Chunk(id=c) for c in (["good", "other"] if i < 8 else ["other", "good"])]
        for i in range(10)
    }
    frame = evaluate_runs({"chat": Run(name="chat", rankings=rankings)}, Qrels(grades=grades),
                          ["mrr"])
    assert frame["mrr"].tolist() == [1.0] * 8 + [0.5] * 2
    summary = aggregate(frame, n_boot=200)
    assert summary.loc[0, "mean"] == pytest.approx(0.9)  # 0.8 * 1 + 0.2 * 1/2


# --------------------------------------------------------------------------- hand-computed cases


def test_jarvelin_discount_by_hand() -> None:
    # No library implements this discount: 1 for rank 1, log2(i) from rank 2 on.
    grades = {"a": 0, "b": 2, "c": 1, "d": 3, "e": 2}  # e never retrieved
    ranking = ["a", "b", "c", "d", "x"]
    # DCG@5 = 0/1 + 2/log2(2) + 1/log2(3) + 3/log2(4) + 0 = 2 + 0.63093 + 1.5 = 4.13093
    # IDCG@5 from grades sorted [3, 2, 2, 1, 0]: 3 + 2/1 + 2/log2(3) + 1/2 + 0 = 6.76186
    assert L.dcg(ranking, grades, 5, discount="jarvelin") == pytest.approx(2 + 1 / LOG2_3 + 1.5)
    assert L.ideal_dcg(grades, 5, discount="jarvelin") == pytest.approx(5.5 + 2 / LOG2_3)
    assert L.ndcg(ranking, grades, 5, discount="jarvelin") == pytest.approx(
        (3.5 + 1 / LOG2_3) / (5.5 + 2 / LOG2_3)
    )
    # exp gain, k = 3: DCG = 0 + 3/1 + 1/log2(3); IDCG = 7 + 3/1 + 3/log2(3)
    assert L.ndcg(ranking, grades, 3, gain="exp", discount="jarvelin") == pytest.approx(
        (3 + 1 / LOG2_3) / (10 + 3 / LOG2_3)
    )
    # k = 1: only rank 1 counts; grade 0 there -> 0 (defined, IDCG@1 = 3)
    assert L.ndcg(ranking, grades, 1, discount="jarvelin") == 0.0
    # k = 2: the jarvelin discount is 1 at both ranks, log2(i+1) is not
    assert L.ndcg(["b", "d"], grades, 2, discount="jarvelin") == pytest.approx(1.0)
    assert L.ndcg(["b", "d"], grades, 2) == pytest.approx((2 + 3 / LOG2_3) / (3 + 2 / LOG2_3))


def test_ideal_ranking_scores_one_for_every_variant() -> None:
    grades = {"a": 3, "b": 2, "c": 2, "d": 1, "e": 0}
    for gain in ("linear", "exp"):
        for discount in ("log2", "jarvelin"):
            for k in (1, 2, 3, 5, 10):
                value = L.ndcg(list("abcde"), grades, k, gain, discount)  # type: ignore[arg-type]
                assert value == pytest.approx(1.0)


def test_question_without_relevant_labels() -> None:
    # Labelled, but nothing relevant: undefined where a relevant chunk is needed.
    grades = {"a": 0, "b": 0}
    ranking = ["a", "x", "b"]
    assert L.hit_rate(ranking, grades, 3) is None
    assert L.recall(ranking, grades, 3) is None
    assert L.reciprocal_rank(ranking, grades) is None
    assert L.reciprocal_rank(ranking, grades, 2) is None
    assert L.average_precision(ranking, grades) is None
    assert L.r_precision(ranking, grades) is None
    assert L.ndcg(ranking, grades, 3) is None  # IDCG = 0
    assert L.ndcg(ranking, grades, 3, gain="exp", discount="jarvelin") is None
    assert L.precision(ranking, grades, 3) == 0.0  # defined: all three are noise
    assert L.judged(ranking, grades, 3) == pytest.approx(2 / 3)
    assert L.judged(ranking, grades, 5) == pytest.approx(2 / 5)  # over k, not over n


def test_threshold_two() -> None:
    grades = {"a": 1, "b": 2, "c": 3, "z": 1}
    ranking = ["a", "b", "x", "c"]
    # relevant at threshold 2: b, c (R = 2); a and z are "related" only
    assert L.precision(ranking, grades, 2, threshold=2) == 0.5
    assert L.recall(ranking, grades, 2, threshold=2) == 0.5
    assert L.reciprocal_rank(ranking, grades, threshold=2) == 0.5
    assert L.hit_rate(ranking, grades, 1, threshold=2) == 0.0
    assert L.average_precision(ranking, grades, threshold=2) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert L.r_precision(ranking, grades, threshold=2) == 0.5
    # nDCG uses the raw grades whatever the threshold (grade-1 chunks still gain 1)
    assert L.ndcg(ranking, grades, 4) == pytest.approx(
        (1 + 2 / LOG2_3 + 3 / LOG2_5) / (3 + 2 / LOG2_3 + 1 / 2 + 1 / LOG2_5)
    )
    # only grade-1 labels: nothing relevant at threshold 2, yet nDCG is defined
    only_related = {"a": 1}
    assert L.recall(["a"], only_related, 1, threshold=2) is None
    assert L.ndcg(["a"], only_related, 1) == 1.0


def test_empty_and_short_rankings() -> None:
    grades = {"a": 2, "b": 1, "c": 0}
    assert L.precision([], grades, 5) == 0.0
    assert L.recall([], grades, 5) == 0.0
    assert L.hit_rate([], grades, 5) == 0.0
    assert L.reciprocal_rank([], grades) == 0.0
    assert L.average_precision([], grades) == 0.0
    assert L.r_precision([], grades) == 0.0
    assert L.ndcg([], grades, 5) == 0.0
    assert L.judged([], grades, 5) == 0.0
    # fewer returned than k: precision and judged still divide by k
    assert L.precision(["a", "x"], grades, 10) == pytest.approx(0.1)
    assert L.judged(["a", "x"], grades, 10) == pytest.approx(0.1)
    assert L.recall(["a", "x"], grades, 10) == 0.5
    # R-precision divides by R = 2 even though only one chunk was returned
    assert L.r_precision(["b"], grades) == 0.5


def test_cutoffs() -> None:
    grades = {"r1": 1, "r2": 1, "r3": 1}
    ranking = ["r1", "n", "r2", "n2", "r3"]
    # AP = (1/1 + 2/3 + 3/5) / 3; AP@3 = (1 + 2/3) / 3 (the denominator stays R = 3)
    assert L.average_precision(ranking, grades) == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert L.average_precision(ranking, grades, 3) == pytest.approx((1 + 2 / 3) / 3)
    assert L.average_precision(ranking, grades, 1) == pytest.approx(1 / 3)
    assert L.reciprocal_rank(["n", "n2", "r1"], grades, 2) == 0.0
    assert L.reciprocal_rank(["n", "n2", "r1"], grades, 3) == pytest.approx(1 / 3)
    assert L.hit_rate(["n", "r1"], grades, 1) == 0.0
    assert L.hit_rate(["n", "r1"], grades, 2) == 1.0
    assert L.r_precision(ranking, grades) == pytest.approx(2 / 3)  # R = 3: r1, n, r2


def test_input_order_is_the_ranking() -> None:
    grades = {"a": 1}
    assert L.reciprocal_rank(("x", "a"), grades) == 0.5  # tuples work too
    assert L.reciprocal_rank(["a", "x"], grades) == 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: L.precision(["a"], {}, 0),
        lambda: L.recall(["a"], {}, -1),
        lambda: L.hit_rate(["a"], {}, True),  # type: ignore[arg-type]
        lambda: L.precision(["a"], {}, 2.0),  # type: ignore[arg-type]
        lambda: L.precision(["a"], {"a": 1}, 1, threshold=0),
        lambda: L.ndcg(["a"], {"a": 1}, 1, gain="cubic"),  # type: ignore[arg-type]
        lambda: L.ndcg(["a"], {"a": 1}, 1, discount="ln"),  # type: ignore[arg-type]
        lambda: L.evaluate_ranking(["a", "a"], {"a": 1}, ["precision@1"]),
        lambda: L.evaluate_ranking(["a"], {"a": -1}, ["precision@1"]),
        lambda: L.evaluate_ranking(["a"], {"a": 1.5}, ["precision@1"]),  # type: ignore[dict-item]
    ],
)
def test_bad_input_raises_input_error(call) -> None:
    with pytest.raises(InputError):
        call()


# --------------------------------------------------------------------------- measure grammar


def test_parse_measure_names_and_cutoffs() -> None:
    assert L.parse_measure("ndcg@5") == L.Measure("ndcg", 5)
    assert L.parse_measure(" NDCG_Exp @ 10 ").label == "ndcg_exp@10"
    assert L.parse_measure("ndcg_burges@3").label == "ndcg_exp@3"
    assert L.parse_measure("ndcg_jarvelin@5").label == "ndcg_jarvelin@5"
    assert L.parse_measure("ndcg_exp_jarvelin@5").label == "ndcg_exp_jarvelin@5"
    assert L.parse_measure("mrr").label == "mrr"
    assert L.parse_measure("RR@10").label == "mrr@10"
    assert L.parse_measure("map").k is None
    assert L.parse_measure("AP@100").label == "map@100"
    assert L.parse_measure("P@5").label == "precision@5"
    assert L.parse_measure("success@1").label == "hit_rate@1"
    assert L.parse_measure("Rprec").label == "r_precision"
    assert L.parse_measure("judged@10").label == "judged@10"
    assert set(L.MEASURES) == {
        "hit_rate", "precision", "recall", "mrr", "ndcg", "ndcg_exp", "ndcg_jarvelin",
        "ndcg_exp_jarvelin", "map", "r_precision", "judged",
    }


@pytest.mark.parametrize(
    "text", ["ndcg", "precision", "judged", "foo@5", "ndcg@0", "ndcg@x", "ndcg@5.0",
             "r_precision@5", "", "ndcg@5@6", "ndcg 5"]
)
def test_parse_measure_rejects(text: str) -> None:
    with pytest.raises(InputError):
        L.parse_measure(text)


def test_resolve_measures_expands_over_ks() -> None:
    labels = [m.label for m in L.resolve_measures(["precision", "mrr", "ndcg@3", "r_precision",
                                                   "map@10", "P@1"], ks=[1, 3])]
    assert labels == ["precision@1", "precision@3", "mrr", "ndcg@3", "r_precision", "map@10"]
    assert [m.label for m in L.resolve_measures("recall, judged@2", ks=[5])] == [
        "recall@5", "judged@2"]
    defaults = [m.label for m in L.resolve_measures()]
    assert defaults[:4] == ["hit_rate@1", "hit_rate@3", "hit_rate@5", "hit_rate@10"]
    assert "mrr" in defaults and "r_precision" in defaults and "judged@10" in defaults
    with pytest.raises(InputError):
        L.resolve_measures(["precision"], ks=[])
    with pytest.raises(InputError):
        L.resolve_measures(["precision"], ks=[0])


def test_measure_objects_are_callable() -> None:
    m = L.parse_measure("recall@5")
    assert m(COURSE_RANKING, COURSE_GRADES) == pytest.approx(2 / 3)
    assert str(m) == "recall@5"


# --------------------------------------------------------------------------- whole runs


def _run(name: str, rankings: dict[str, list[str]]) -> Run:
    return Run(name=name, rankings={q: [Chunk(id=c) for c in ids] for q, ids in rankings.items()})


def test_evaluate_runs_rows_columns_and_missing_rankings() -> None:
    qrels = Qrels(grades={
        "q1": {"a": 2, "b": 0},
        "q2": {"c": 0},          # labelled, nothing relevant
        "q3": {"d": 1},          # run A has no ranking for it
        "q4": {},                # no labels: not counted
    })
    runs = {
        "A": _run("A", {"q1": ["b", "a"], "q2": ["c", "x"], "extra": ["a"]}),
        "B": _run("B", {"q1": ["a"], "q2": [], "q3": ["d"]}),
    }
    frame = evaluate_runs(runs, qrels, ["precision@2", "recall@2", "mrr", "ndcg@2", "judged@2"])
    assert list(frame.columns) == ["run", "question_id", "precision@2", "recall@2", "mrr",
                                   "ndcg@2", "judged@2"]
    assert frame[["run", "question_id"]].values.tolist() == [
        ["A", "q1"], ["A", "q2"], ["A", "q3"], ["B", "q1"], ["B", "q2"], ["B", "q3"]]
    a = frame.set_index(["run", "question_id"])
    assert a.loc[("A", "q1"), "mrr"] == 0.5
    assert a.loc[("A", "q1"), "ndcg@2"] == pytest.approx((2 / LOG2_3) / 2)
    assert a.loc[("A", "q1"), "judged@2"] == 1.0
    # nothing relevant: recall, RR, nDCG undefined -> NaN; precision 0
    assert np.isnan(a.loc[("A", "q2"), "recall@2"]) and np.isnan(a.loc[("A", "q2"), "mrr"])
    assert np.isnan(a.loc[("A", "q2"), "ndcg@2"])
    assert a.loc[("A", "q2"), "precision@2"] == 0.0
    # no ranking for q3 in run A: scored as an empty ranking (trec_eval -c)
    assert a.loc[("A", "q3")].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert a.loc[("B", "q3")].tolist() == [0.5, 1.0, 1.0, 1.0, 0.5]
    assert frame["precision@2"].dtype == np.float64


def test_evaluate_runs_question_list_and_threshold() -> None:
    grades = {"q1": {"a": 1, "b": 2}, "q2": {"c": 2}}
    runs = {"A": _run("A", {"q1": ["a", "b"], "q2": ["c"]})}
    frame = evaluate_runs(
        runs, grades, ["mrr", "recall@1"], threshold=2, questions=["q2", "q1", "q9"]
    )
    assert frame["question_id"].tolist() == ["q2", "q1", "q9"]
    assert frame["mrr"].tolist()[:2] == [1.0, 0.5]
    assert frame["recall@1"].tolist()[:2] == [1.0, 0.0]
    assert frame.loc[2, ["mrr", "recall@1"]].isna().all()  # q9: no labels at all
    assert labelled_questions(grades) == ["q1", "q2"]


def test_evaluate_runs_empty_and_bad_input() -> None:
    frame = evaluate_runs({}, Qrels(grades={"q1": {"a": 1}}), ["mrr"])
    assert list(frame.columns) == ["run", "question_id", "mrr"] and len(frame) == 0
    with pytest.raises(InputError):
        evaluate_runs({"A": _run("A", {})}, {"q1": {"a": 1}}, ["mrr"], threshold=0)
    with pytest.raises(InputError):
        evaluate_runs({"A": _run("A", {})}, {"q1": {"a": 1}}, ["bogus@1"])
    with pytest.raises(InputError):
        evaluate_runs({"A": _run("A", {})}, {"q1": {"a": -2}}, ["mrr"])


def test_evaluate_runs_matches_evaluate_ranking() -> None:
    qrels = {"q1": COURSE_GRADES, "q2": RELU_GRADES}
    run = _run("A", {"q1": COURSE_RANKING, "q2": SWAPPED_RANKING})
    frame = evaluate_runs({"A": run}, qrels, ks=[1, 5])
    for _, row in frame.iterrows():
        expected = L.evaluate_ranking(run.ranked_ids(row["question_id"]),
                                      qrels[row["question_id"]], ks=[1, 5])
        got = row.drop(["run", "question_id"]).to_dict()
        assert list(got) == list(expected)
        for key, value in expected.items():
            assert (value is None and pd.isna(got[key])) or got[key] == pytest.approx(value)


# --------------------------------------------------------------------------- invariants

_ids = st.sampled_from([f"c{i}" for i in range(12)])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    ranking=st.lists(_ids, unique=True, max_size=12),
    grades=st.dictionaries(_ids, st.integers(0, 3), max_size=12),
    k=st.integers(1, 15),
    threshold=st.integers(1, 3),
)
def test_invariants(ranking: list[str], grades: dict[str, int], k: int, threshold: int) -> None:
    out = L.evaluate_ranking(ranking, grades, ["hit_rate", "precision", "recall", "mrr", "ndcg",
                                               "ndcg_exp_jarvelin", "map", "r_precision",
                                               "judged"], ks=[k], threshold=threshold)
    for value in out.values():
        assert value is None or 0.0 <= value <= 1.0 + 1e-12
    has_relevant = L.num_relevant(grades, threshold) > 0
    for name in ("hit_rate@", "recall@", "mrr", "map", "r_precision"):
        key = next(label for label in out if label.startswith(name))
        assert (out[key] is None) == (not has_relevant)
    assert out[f"precision@{k}"] <= out[f"judged@{k}"] + 1e-12
    if has_relevant:
        # a hit in the top k <=> RR@k > 0 <=> recall@k > 0 <=> AP@k > 0
        rr_k = L.reciprocal_rank(ranking, grades, k, threshold)
        ap_k = L.average_precision(ranking, grades, k, threshold)
        assert (out[f"hit_rate@{k}"] == 1.0) == (rr_k > 0) == (out[f"recall@{k}"] > 0) == (ap_k > 0)
        assert L.recall(ranking, grades, k, threshold) <= (
            L.recall(ranking, grades, k + 1, threshold) or 0) + 1e-12
    # nDCG of the labelled chunks sorted by grade is 1 (when defined)
    ideal = sorted(grades, key=lambda c: -grades[c])
    best = L.ndcg(ideal, grades, k)
    assert best is None or best == pytest.approx(1.0)
    assert (out[f"ndcg@{k}"] is None) == (best is None) == all(g == 0 for g in grades.values())
