"""Whole-run labelled metrics over arrays (evaluate_runs, vectorised) against the per-ranking
functions of judge_eval.metrics.labelled, bit for bit: on random runs and labels (every measure,
every variant, thresholds 1-3, cutoffs beyond the ranking, questions without labels or without
a ranking), and on every fixture, where loading as columns or as objects gives the same frames.
(The per-ranking functions are cross-checked against trec_eval, ranx and ir_measures in
test_metrics_crosscheck.py, which also runs the whole-run path against trec_eval.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_eval.data.columns import QrelsColumns, RunColumns
from judge_eval.data.load import load_qrels, load_run
from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.errors import InputError
from judge_eval.labelled import evaluate_labelled
from judge_eval.metrics import labelled as L
from judge_eval.metrics.evaluate_labelled import VECTORISED, evaluate_runs

ROOT = Path(__file__).resolve().parent.parent
ALL_MEASURES = (
    L.resolve_measures(None, (1, 2, 3, 5, 10, 50))
    + L.resolve_measures("ndcg_exp,ndcg_jarvelin,ndcg_exp_jarvelin", (1, 4, 10, 30))
    + L.resolve_measures("mrr@1,mrr@3,mrr@10,map@1,map@5,map@100", ())
)


def reference(runs: dict[str, Run], grades: dict[str, dict[str, int]], measures, threshold: int,
              questions: list[str]) -> pd.DataFrame:
    """The frame evaluate_runs gave before it was vectorised: one measure call per ranking."""
    rows = []
    for name, run in runs.items():
        for qid in questions:
            ranking, g = run.ranked_ids(qid), grades.get(qid, {})
            values = [m(ranking, g, threshold) for m in measures]
            rows.append([name, qid, *[np.nan if v is None else v for v in values]])
    frame = pd.DataFrame([r[2:] for r in rows], columns=[m.label for m in measures], dtype=np.float64)
    frame.insert(0, "question_id", pd.Series([r[1] for r in rows], dtype=object))
    frame.insert(0, "run", pd.Series([r[0] for r in rows], dtype=object))
    return frame


def random_case(seed: int) -> tuple[dict[str, Run], dict[str, dict[str, int]]]:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(40)]
    grades: dict[str, dict[str, int]] = {}
    for q in range(rng.randint(1, 40)):
        kind = rng.random()
        if kind < 0.1:
            grades[f"q{q}"] = {}  # listed, but no label
        elif kind < 0.25:
            grades[f"q{q}"] = dict.fromkeys(rng.sample(pool, rng.randint(1, 5)), 0)
        else:
            grades[f"q{q}"] = {d: rng.choice([0, 1, 1, 2, 3, 4]) for d in rng.sample(pool, rng.randint(1, 15))}
    runs = {}
    for r in range(rng.randint(1, 3)):
        rankings = {}
        for q in rng.sample(range(50), rng.randint(0, 45)):  # some unlabelled, some labelled left out
            ids = rng.sample(pool, rng.randint(0, 35))
            rankings[f"q{q}"] = [Chunk(id=d, score=float(-i)) for i, d in enumerate(ids)]
        runs[f"run{r}"] = Run(name=f"run{r}", rankings=rankings)
    return runs, grades


def test_every_measure_has_a_vectorised_twin() -> None:
    assert set(VECTORISED) == set(L.MEASURES)


@pytest.mark.parametrize("threshold", [1, 2, 3])
@pytest.mark.parametrize("seed", range(25))
def test_random_runs_give_the_per_ranking_values_exactly(seed: int, threshold: int) -> None:
    runs, grades = random_case(seed)
    questions = [q for q, g in grades.items() if g]
    expected = reference(runs, grades, ALL_MEASURES, threshold, questions)
    for qrels in (grades, Qrels(grades=grades), QrelsColumns.from_qrels(grades)):
        got = evaluate_runs(runs, qrels, ALL_MEASURES, threshold=threshold)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
    as_columns = {name: RunColumns.from_run(run) for name, run in runs.items()}
    pd.testing.assert_frame_equal(evaluate_runs(as_columns, grades, ALL_MEASURES, threshold=threshold),
                                  expected, check_exact=True)


@pytest.mark.parametrize("seed", range(10))
def test_a_chosen_question_list_gives_the_per_ranking_values_exactly(seed: int) -> None:
    runs, grades = random_case(seed)
    rng = random.Random(seed)
    questions = rng.sample([f"q{i}" for i in range(60)], 30) + ["q-unknown", "q0", "q0"]
    expected = reference(runs, grades, ALL_MEASURES, 1, list(dict.fromkeys(questions)))
    got = evaluate_runs(runs, QrelsColumns.from_qrels(grades), ALL_MEASURES, questions=questions)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    rankings=st.dictionaries(st.sampled_from(["a", "b", "c"]),
                             st.lists(st.sampled_from("uvwxyz"), max_size=6, unique=True), max_size=3),
    grades=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                           st.dictionaries(st.sampled_from("uvwxyz"), st.integers(0, 3), max_size=6), max_size=4),
    threshold=st.integers(1, 3),
)
def test_tiny_cases(rankings, grades, threshold) -> None:
    run = Run(name="r", rankings={q: [Chunk(id=c) for c in ids] for q, ids in rankings.items()})
    measures = L.resolve_measures(None, (1, 2, 4, 7)) + L.resolve_measures("ndcg_exp_jarvelin@3,mrr@2", ())
    questions = [q for q, g in grades.items() if g]
    expected = reference({"r": run}, grades, measures, threshold, questions)
    pd.testing.assert_frame_equal(evaluate_runs({"r": run}, grades, measures, threshold=threshold), expected,
                                  check_exact=True)


def test_bad_input_is_still_refused() -> None:
    with pytest.raises(InputError, match="grade must be an integer >= 0, got -1"):
        evaluate_runs({"r": Run(name="r")}, {"q": {"a": -1}})
    with pytest.raises(InputError, match="grade must be an integer >= 0, got True"):
        evaluate_runs({"r": Run(name="r")}, {"q": {"a": True}})
    with pytest.raises(InputError, match=r"question 'q', chunk 'a': grade must be an integer from 0 to 2\*\*63 - 1"):
        evaluate_runs({"r": Run(name="r")}, Qrels(grades={"q": {"a": 2**63}, "other": {"b": 1}}))
    huge = {"q": {"a": 1}, "other": {"b": 2**70}}  # a question not counted: not looked at, as before
    assert evaluate_runs({"r": Run(name="r")}, huge, "precision@1", questions=["q"]).shape == (1, 3)
    with pytest.raises(InputError, match="run 'r' is not a Run"):
        evaluate_runs({"r": {"q": ["a"]}}, {"q": {"a": 1}})  # type: ignore[dict-item]
    with pytest.raises(InputError, match="threshold"):
        evaluate_runs({"r": Run(name="r")}, {"q": {"a": 1}}, threshold=0)


def test_no_question_and_no_run() -> None:
    frame = evaluate_runs({}, {"q": {"a": 1}}, "precision@1")
    assert list(frame.columns) == ["run", "question_id", "precision@1"] and len(frame) == 0
    frame = evaluate_runs({"r": Run(name="r")}, {}, "precision@1")
    assert len(frame) == 0


# --------------------------------------------------------------------------- fixtures

FIXTURES = [
    (ROOT / "fixtures" / "clapnq" / "qrels.txt", sorted((ROOT / "fixtures" / "clapnq" / "runs").glob("*.trec"))),
    (ROOT / "fixtures" / "clapnq" / "mini" / "qrels.txt",
     sorted((ROOT / "fixtures" / "clapnq" / "mini" / "runs").glob("*.trec"))),
    (ROOT / "fixtures" / "bank_faq" / "qrels.txt", sorted((ROOT / "fixtures" / "bank_faq" / "runs").glob("*"))),
]


@pytest.mark.parametrize("qrels_path, run_paths", FIXTURES, ids=lambda x: str(x)[-40:] if isinstance(x, Path) else "")
@pytest.mark.parametrize("threshold", [1, 2])
def test_fixtures_give_the_same_results_as_columns_and_as_objects(qrels_path: Path, run_paths: list[Path],
                                                                  threshold: int) -> None:
    assert run_paths
    measures = ["hit_rate", "precision", "recall", "mrr", "ndcg", "map", "r_precision", "judged", "ndcg_exp"]
    as_files = evaluate_labelled(qrels_path, {p.stem: p for p in run_paths}, measures=measures, ks=(1, 3, 5, 10, 20),
                                 threshold=threshold, n_boot=200)
    as_objects = evaluate_labelled(load_qrels(qrels_path), {p.stem: load_run(p, p.stem) for p in run_paths},
                                   measures=measures, ks=(1, 3, 5, 10, 20), threshold=threshold, n_boot=200)
    pd.testing.assert_frame_equal(as_files.per_question, as_objects.per_question, check_exact=True)
    pd.testing.assert_frame_equal(as_files.summary, as_objects.summary, check_exact=True)
    grades = load_qrels(qrels_path).grades
    runs = {p.stem: load_run(p, p.stem) for p in run_paths}
    resolved = L.resolve_measures(measures, (1, 3, 5, 10, 20))
    expected = reference(runs, grades, resolved, threshold, [q for q, g in grades.items() if g])
    pd.testing.assert_frame_equal(as_files.per_question, expected, check_exact=True)
