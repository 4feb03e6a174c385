"""The gate and the canary's numbers on small frames, against values computed by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from judge_eval.audit.canary import score_canary
from judge_eval.audit.gate import Baseline, baseline_values, choose_baseline, run_gate, signature
from judge_eval.metrics.stats import aggregate


def frame(values: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """{run: {metric: [q1, q2, ...]}} -> per_question frame."""
    rows = []
    for run, by_metric in values.items():
        n = len(next(iter(by_metric.values())))
        for i in range(n):
            rows.append({"run": run, "question_id": f"q{i + 1}", **{m: v[i] for m, v in by_metric.items()}})
    return pd.DataFrame(rows)


def long(values: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    pq = frame(values)
    return pq.melt(id_vars=["run", "question_id"], var_name="metric")[["run", "metric", "question_id", "value"]]


def gate(current, base, **kw):
    pq = frame(current)
    opts = dict(check=list(next(iter(current.values()))), floors={}, max_drops={}, alpha=0.05, n_perm=10000, seed=0,
                n_boot=200)
    opts.update(kw)
    b = Baseline("previous", ["b1"], ["t"], long(base)) if base is not None else None
    return run_gate(pq, aggregate(pq, n_boot=200), b, **opts)


def exact_sign_flip_p(d: list[float]) -> float:
    """Independent: enumerate every sign vector with itertools."""
    obs = abs(sum(d) / len(d))
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(d))
               if abs(sum(s * x for s, x in zip(signs, d, strict=True)) / len(d)) >= obs - 1e-12)
    return hits / 2 ** len(d)


def test_a_uniform_drop_by_hand() -> None:
    # six questions each 0.5 lower: mean diff -0.5; of the 64 sign vectors only the two with
    # all signs equal reach |mean| 0.5, so p = 2/64 = 0.03125; one check, so Holm changes nothing
    g = gate({"a": {"m": [0.5] * 6}}, {"a": {"m": [1.0] * 6}}, max_drops={"m": 0.1})
    (c,) = g.checks
    assert c["diff"] == pytest.approx(-0.5) and c["baseline_value"] == 1.0 and c["value"] == 0.5
    assert c["p_value"] == pytest.approx(2 / 64) and c["p_holm"] == pytest.approx(2 / 64)
    assert c["n_paired"] == 6 and c["significant_drop"] and c["verdict"] == "regression"
    assert c["reasons"] == ["drop 0.500 > allowed 0.1 (p_holm 0.0312 <= 0.05)"]
    assert [q["question_id"] for q in c["regressed_questions"]] == [f"q{i}" for i in range(1, 7)]
    assert g.family_size == 1


def test_holm_over_runs_and_metrics_can_turn_a_raw_p_below_alpha_into_a_pass() -> None:
    current = {"a": {"m": [0.5] * 6, "n": [0.6, 0.4, 0.6, 0.4, 0.5, 0.5]}}
    base = {"a": {"m": [1.0] * 6, "n": [0.5] * 6}}
    g = gate(current, base, max_drops={"m": 0.1, "n": 0.1})
    m, n = g.checks
    assert n["diff"] == pytest.approx(0.0) and n["p_value"] == pytest.approx(exact_sign_flip_p([0.1, -0.1, 0.1, -0.1,
                                                                                                  0, 0]))
    assert n["p_value"] == 1.0
    # Holm, m = 2: sorted p (2/64, 1): 2 * 2/64 = 0.0625, then max(0.0625, 1 * 1) = 1
    assert m["p_holm"] == pytest.approx(0.0625) and n["p_holm"] == 1.0
    assert m["verdict"] == "pass" and not m["significant_drop"]  # 0.0625 > 0.05
    g = gate(current, base, max_drops={"m": 0.1, "n": 0.1}, alpha=0.1)
    assert g.checks[0]["verdict"] == "regression"


def test_a_significant_drop_within_the_allowance_passes() -> None:
    g = gate({"a": {"m": [0.95] * 6}}, {"a": {"m": [1.0] * 6}}, max_drops={"m": 0.1})
    (c,) = g.checks
    assert c["diff"] == pytest.approx(-0.05) and c["p_value"] == pytest.approx(2 / 64)
    assert c["verdict"] == "pass"


def test_floor_and_missing_values() -> None:
    current = {"a": {"m": [0.2, np.nan, 0.4, 0.3]}}
    base = {"a": {"m": [0.2, 0.9, np.nan, 0.6]}}
    g = gate(current, base, floors={"m": 0.35}, max_drops={"m": 0.5})
    (c,) = g.checks
    assert c["value"] == pytest.approx(0.3)  # mean of the defined values
    assert c["below_floor"] and c["reasons"][0] == "0.300 below floor 0.35" and c["verdict"] == "regression"
    # paired over q1 and q4 only: diffs 0 and -0.3
    assert c["n_paired"] == 2 and c["diff"] == pytest.approx(-0.15)
    assert c["baseline_value"] == pytest.approx((0.2 + 0.9 + 0.6) / 3)
    assert c["p_value"] == pytest.approx(exact_sign_flip_p([0.0, -0.3]))
    assert [(q["question_id"], q["diff"]) for q in c["regressed_questions"]] == [("q4", pytest.approx(-0.3))]
    # undefined everywhere with a floor: a regression, not a pass
    g = gate({"a": {"m": [np.nan] * 3}}, None, floors={"m": 0.1})
    assert g.checks[0]["verdict"] == "regression" and "undefined on every question" in g.checks[0]["reasons"][0]


def test_no_baseline_and_no_drop_limit() -> None:
    g = gate({"a": {"m": [0.1] * 4}}, None)
    assert g.checks[0]["verdict"] == "pass" and g.checks[0]["p_value"] is None and g.family_size == 0
    # a baseline but no max_drop: the difference is reported, not tested
    g = gate({"a": {"m": [0.1] * 6}}, {"a": {"m": [0.9] * 6}})
    c = g.checks[0]
    assert c["diff"] == pytest.approx(-0.8) and c["p_holm"] is None and c["verdict"] == "pass"
    assert g.family_size == 0


def test_median_baseline_values() -> None:
    values = pd.DataFrame({
        "audit_id": ["x", "y", "z", "x", "y", "z"],
        "run": ["a"] * 6, "metric": ["m"] * 6,
        "question_id": ["q1", "q1", "q1", "q2", "q2", "q2"],
        "value": [0.1, 0.5, 0.3, np.nan, 0.8, 0.4],
    })
    med = baseline_values(values, "median").set_index("question_id")["value"]
    assert med["q1"] == pytest.approx(0.3) and med["q2"] == pytest.approx(0.6)  # NaN left out
    assert len(baseline_values(values, "previous")) == 6


def row(i: str, verdict: str = "pass", judge: str = "j1", started: str = "t") -> dict:
    return {"id": i, "verdict": verdict, "started": started, "judge_identity": judge, "prompts": {"p": "p@1"},
            "questions_fingerprint": "qf", "settings": {"useful_rule": "support"}}


def test_choose_baseline() -> None:
    sig = signature("j1", {"p": "p@1"}, "qf", {"useful_rule": "support"})
    audits = [row("e", "regression"), row("d", judge="j2"), row("c"), row("b", "judge_failed"), row("a")]
    assert choose_baseline([], sig, "previous") == ([], ["first audit: no baseline in the history, only floors "
                                                         "were checked"])
    chosen, notes = choose_baseline(audits, sig, "previous")
    assert [r["id"] for r in chosen] == ["c"] and notes == []
    chosen, notes = choose_baseline(audits, sig, "median", last=3)
    assert [r["id"] for r in chosen] == ["c", "a"] and "fewer than baseline.last = 3" in notes[0]
    chosen, _ = choose_baseline(audits, sig, "pinned", pinned="e")  # a pinned audit counts whatever its verdict
    assert [r["id"] for r in chosen] == ["e"]
    chosen, notes = choose_baseline(audits, sig, "pinned", pinned="d")
    assert chosen == [] and "judge identity" in notes[0]
    chosen, notes = choose_baseline([row("x", judge="j2")], sig, "previous")
    assert chosen == [] and "none of the 1 passing audits in the history is comparable" in notes[0]


def test_canary_statistics_by_hand() -> None:
    items = [
        {"question_id": "q1", "chunk_id": "c1", "human_grade": 2, "judge_grade": 3, "error": None},  # 1 / 1
        {"question_id": "q1", "chunk_id": "c2", "human_grade": 1, "judge_grade": 1, "error": None},  # 1 / 0
        {"question_id": "q2", "chunk_id": "c3", "human_grade": 0, "judge_grade": 0, "error": None},  # 0 / 0
        {"question_id": "q2", "chunk_id": "c4", "human_grade": 0, "judge_grade": 2, "error": None},  # 0 / 1
        {"question_id": "q3", "chunk_id": "c5", "human_grade": 3, "judge_grade": 2, "error": None},  # 1 / 1
        {"question_id": "q3", "chunk_id": "c6", "human_grade": 1, "judge_grade": None, "error": "timeout"},
    ]
    r = score_canary(items, statistic="accuracy", floor=0.7,
                     previous=("old", [{"question_id": "q1", "chunk_id": "c1", "judge_grade": 0},
                                       {"question_id": "q2", "chunk_id": "c3", "judge_grade": 0}]))
    # human relevant (>= 1): 1 1 0 0 1; judge relevant (>= 2): 1 0 0 1 1 -> 3 of 5 agree
    assert r.accuracy == pytest.approx(3 / 5) and r.value == r.accuracy and r.drift
    # kappa: p_o = 0.6; human 3/5 relevant, judge 3/5: p_e = 0.6*0.6 + 0.4*0.4 = 0.52
    assert r.cohen_kappa == pytest.approx((0.6 - 0.52) / (1 - 0.52))
    assert r.changed == [{"question_id": "q1", "chunk_id": "c1", "human_grade": 2, "judge_grade": 3,
                          "previous_judge_grade": 0}]
    assert "0.600 < floor 0.7 on 5 pairs" in r.reason and "1 pair failed to be judged" in r.reason
    assert "changed grade since audit old: q1/c1 0->3" in r.reason
    ok = score_canary(items, statistic="cohen_kappa", floor=0.1)
    assert ok.value == pytest.approx(1 / 6) and not ok.drift
    none = score_canary([dict(items[-1])], statistic="accuracy", floor=0.5)
    assert none.drift and none.value is None and "no canary pair could be judged" in none.reason


@pytest.mark.parametrize("line, field, words", [
    ('{"question_id": "q1", "chunk_id": "c", "grade": -1, "text": "t", "question": "q", "reference": "r"}', "grade",
     "integer >= 0"),
    ('{"question_id": "q1", "chunk_id": "c", "grade": 1, "question": "q", "reference": "r"}', "text", "non-empty"),
    ('{"question_id": "zz", "chunk_id": "c", "grade": 1, "text": "t"}', "question", "non-empty"),
    ('[1, 2]', None, "expected a JSON object"),
])
def test_canary_file_errors_name_the_line_and_field(line: str, field: str | None, words: str, tmp_path) -> None:
    from judge_eval.audit.canary import load_pairs
    from judge_eval.data.models import Question
    from judge_eval.errors import InputError

    good = '{"question_id": "q1", "chunk_id": "c0", "grade": 2, "text": "t"}'
    path = tmp_path / "canary.jsonl"
    path.write_text(good + "\n" + line + "\n")
    questions = {"q1": Question(id="q1", question="Q?", reference="R.")}
    with pytest.raises(InputError) as err:
        load_pairs(path, questions)
    assert (err.value.line, err.value.field) == (2, field) and words in str(err.value)
    path.write_text(good + "\n" + good + "\n")
    with pytest.raises(InputError, match="appears twice"):
        load_pairs(path, questions)
    path.write_text(good + "\n")
    (pair,) = load_pairs(path, questions)  # question and reference come from the dataset
    assert (pair.question, pair.reference, pair.grade) == ("Q?", "R.", 2)
