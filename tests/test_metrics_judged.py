"""Judged (label-free) metrics: context recall / precision from verified verdicts."""

from __future__ import annotations

import asyncio
import random

import pytest

from judge_eval.judge.evidence import VerifiedVerdict, verify
from judge_eval.judge.offline import OfflineJudge
from judge_eval.metrics.judged import (
    context_precision,
    context_recall,
    is_useful,
    joint_context_recall,
    judged_question_metrics,
)


def ragas_average_precision(verdict_list: list[int]) -> float:
    """RAGAS's context precision, re-implemented exactly as in its source:
    explodinggradients/ragas, src/ragas/metrics/_context_precision.py,
    ``_calculate_average_precision`` (commit 0413a11120c7e8194b00c4fd0ad4b0a825841399;
    the LLM variant first maps verdicts to ``1 if ver.verdict else 0``)."""
    denominator = sum(verdict_list) + 1e-10
    numerator = sum(
        [(sum(verdict_list[: i + 1]) / (i + 1)) * verdict_list[i] for i in range(len(verdict_list))]
    )
    score = numerator / denominator
    return score


def vv(supported: set[int] | frozenset[int] = frozenset(), grade: int = 0) -> VerifiedVerdict:
    return VerifiedVerdict(supported=frozenset(supported), grade=grade)


# --- context precision ---------------------------------------------------------------------------


def test_precision_equals_ragas_on_random_verdict_lists():
    rng = random.Random(7)
    n_lists = n_none_useful = 0
    for _ in range(300):
        n = rng.randint(0, 20)
        p = rng.choice([0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
        useful = [rng.random() < p for _ in range(n)]
        n_lists += 1
        n_none_useful += not any(useful)
        for k in range(1, n + 3):
            ours = context_precision(useful, k)
            theirs = ragas_average_precision([1 if u else 0 for u in useful[:k]])
            assert abs(ours - theirs) <= 1e-9, (useful, k, ours, theirs)
    assert n_lists >= 100 and n_none_useful >= 20


def test_no_useful_chunk_is_zero_as_in_ragas():
    for useful in ([], [False], [False] * 7):
        assert context_precision(useful, 5) == 0.0
        assert ragas_average_precision([int(u) for u in useful[:5]]) == 0.0


def test_useful_chunks_first_score_exactly_one():
    for n_useful in range(1, 12):
        useful = [True] * n_useful + [False] * 5
        assert context_precision(useful, len(useful)) == 1.0
        # RAGAS's epsilon makes it fall short of 1.0
        assert ragas_average_precision([int(u) for u in useful]) < 1.0


def test_precision_hand_computed():
    assert context_precision([False, True, False, True, False], 5) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert context_precision([True, False, True], 3) == pytest.approx((1 + 2 / 3) / 2)
    assert context_precision([False, False, True], 2) == 0.0


def test_k_must_be_positive():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            context_precision([True], bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            context_recall(2, [frozenset({0})], bad)  # type: ignore[arg-type]


# --- context recall ------------------------------------------------------------------------------


def test_recall_union_over_top_k():
    sup = [frozenset(), frozenset({0}), frozenset({0, 2}), frozenset({1})]
    assert context_recall(4, sup, 1) == 0.0
    assert context_recall(4, sup, 2) == 0.25
    assert context_recall(4, sup, 3) == 0.5
    assert context_recall(4, sup, 4) == 0.75
    assert context_recall(4, sup, 100) == 0.75  # k > n: the first min(k, n)
    assert context_recall(3, [], 5) == 0.0


def test_recall_undefined_without_statements():
    assert context_recall(0, [frozenset()], 5) is None
    assert joint_context_recall(0, frozenset()) is None


def test_recall_rejects_out_of_range_indices():
    with pytest.raises(ValueError):
        context_recall(2, [frozenset({2})], 1)
    with pytest.raises(ValueError):
        joint_context_recall(2, frozenset({-1}))


def test_joint_recall():
    assert joint_context_recall(3, frozenset({0, 2})) == pytest.approx(2 / 3)
    assert joint_context_recall(3, frozenset()) == 0.0


def test_is_useful_rules():
    supported_low = vv({0}, grade=1)
    unsupported_high = vv(set(), grade=3)
    assert is_useful(supported_low) and not is_useful(unsupported_high)
    assert not is_useful(supported_low, rule="grade")
    assert is_useful(unsupported_high, rule="grade")
    assert is_useful(supported_low, rule="grade", grade_threshold=1)
    with pytest.raises(ValueError):
        is_useful(supported_low, rule="nope")  # type: ignore[arg-type]


# --- the bank FAQ worked example -----------------------------------------------------------------
# ranking c7 c2 c9 c4 c1; the reference has 3 statements; c2 supports statement 1, c4 statement 2,
# c8 (not retrieved) would support statement 3.

BANK = [vv(), vv({0}, grade=2), vv(), vv({1}, grade=2), vv()]


def test_bank_faq_worked_example():
    sup = [v.supported for v in BANK]
    useful = [is_useful(v) for v in BANK]
    assert context_recall(3, sup, 5) == pytest.approx(2 / 3)
    assert context_precision(useful, 5) == pytest.approx((1 / 2 + 2 / 4) / 2) == pytest.approx(0.5)
    assert context_recall(3, sup, 1) == 0.0
    assert context_precision(useful, 1) == 0.0
    assert context_recall(3, sup, 3) == pytest.approx(1 / 3)
    assert context_precision(useful, 3) == pytest.approx(0.5)

    m = judged_question_metrics(3, BANK, [1, 3, 5])
    assert m.missing == {}
    assert m.values == pytest.approx(
        {
            "context_recall@1": 0.0, "context_precision@1": 0.0,
            "context_recall@3": 1 / 3, "context_precision@3": 0.5,
            "context_recall@5": 2 / 3, "context_precision@5": 0.5,
        }
    )


BANK_QUESTION = "What does the Flex Home Loan cost?"
BANK_REFERENCE = (
    "The Flex Home Loan (HL-FLX-02) charges an arrangement fee of 2% of the loan amount. "
    "Overpayments of up to 10% a year are free of charge. "
    "Larger overpayments incur an early repayment charge of 3%."
)
BANK_CHUNKS = {
    "c7": "Our branches are open Monday to Friday from 9am to 5pm.",
    "c2": "Flex Home Loan (HL-FLX-02): the arrangement fee is 2% of the loan amount, added to the loan.",
    "c9": "The Fixed Saver account pays 4% interest a year.",
    "c4": "With the Flex Home Loan, overpayments of up to 10% a year are free.",
    "c1": "Credit cards: a 3% fee applies to cash withdrawals abroad.",
    "c8": "Overpayments above 10% a year incur an early repayment charge of 3%.",
}


def test_bank_faq_through_the_offline_judge():
    """The same example end to end: offline judge -> evidence check -> metrics."""
    judge = OfflineJudge()
    statements = asyncio.run(judge.decompose(BANK_REFERENCE)).value.statements
    assert len(statements) == 3

    def verdict(cid: str) -> VerifiedVerdict:
        raw = asyncio.run(judge.judge_chunk(BANK_QUESTION, statements, BANK_CHUNKS[cid])).value
        return verify(raw, BANK_CHUNKS[cid], len(statements))

    ranking = ["c7", "c2", "c9", "c4", "c1"]
    verdicts = [verdict(c) for c in ranking]
    assert [v.supported for v in verdicts] == [frozenset(), {0}, frozenset(), {1}, frozenset()]
    assert 2 in verdict("c8").supported
    m = judged_question_metrics(len(statements), verdicts, [5])
    assert m.values == pytest.approx({"context_recall@5": 2 / 3, "context_precision@5": 0.5})


# --- missing values ------------------------------------------------------------------------------


def test_judge_error_inside_top_k_is_missing_never_zero():
    verdicts = [vv(), vv({0}), None, vv({1}), vv()]
    m = judged_question_metrics(3, verdicts, [2, 3, 5])
    assert m.values["context_recall@2"] == pytest.approx(1 / 3)
    assert m.values["context_precision@2"] == pytest.approx(0.5)
    for k in (3, 5):
        assert m.values[f"context_recall@{k}"] is None
        assert m.values[f"context_precision@{k}"] is None
        assert m.missing[f"context_recall@{k}"] == "judge_error"
        assert m.missing[f"context_precision@{k}"] == "judge_error"
    assert set(m.missing) == {"context_recall@3", "context_precision@3", "context_recall@5", "context_precision@5"}


def test_judge_error_below_rank_k_does_not_matter():
    verdicts = [vv({0}), vv(), vv({1}), None, None]
    m = judged_question_metrics(2, verdicts, [3])
    assert m.missing == {}
    assert m.values == pytest.approx({"context_recall@3": 1.0, "context_precision@3": (1 + 2 / 3) / 2})


def test_error_beyond_a_short_ranking():
    # fewer chunks than k: the top k is the whole list
    m = judged_question_metrics(2, [vv({0})], [5])
    assert m.values == {"context_recall@5": 0.5, "context_precision@5": 1.0}
    m = judged_question_metrics(2, [], [5])
    assert m.values == {"context_recall@5": 0.0, "context_precision@5": 0.0}


def test_no_statements():
    verdicts = [vv(grade=3), vv(grade=0)]
    m = judged_question_metrics(0, verdicts, [5])
    assert m.values == {"context_recall@5": None, "context_precision@5": None}
    assert m.missing == {"context_recall@5": "no_statements", "context_precision@5": "no_statements"}
    g = judged_question_metrics(0, verdicts, [5], useful_rule="grade")
    assert g.values == {"context_recall@5": None, "context_precision@5": 1.0}
    assert g.missing == {"context_recall@5": "no_statements"}


def test_decomposition_failed():
    verdicts = [vv(grade=0), vv(grade=2)]
    m = judged_question_metrics(None, verdicts, [2])
    assert m.missing == {"context_recall@2": "judge_error", "context_precision@2": "judge_error"}
    g = judged_question_metrics(None, verdicts, [2], useful_rule="grade", grade_threshold=2)
    assert g.values == {"context_recall@2": None, "context_precision@2": 0.5}
    assert g.missing == {"context_recall@2": "judge_error"}


def test_no_reference():
    m = judged_question_metrics(None, [None, None], [1, 5], useful_rule="grade", joint_verdicts={1: None, 5: None},
                                no_reference=True)
    assert all(v is None for v in m.values.values())
    assert set(m.missing.values()) == {"no_reference"}
    assert len(m.missing) == 6


def test_grade_rule_in_question_metrics():
    verdicts = [vv(grade=1), vv({0}, grade=3), vv(grade=2)]
    m = judged_question_metrics(1, verdicts, [3], useful_rule="grade", grade_threshold=2)
    assert m.values["context_precision@3"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    m1 = judged_question_metrics(1, verdicts, [3], useful_rule="grade", grade_threshold=1)
    assert m1.values["context_precision@3"] == 1.0
    with pytest.raises(ValueError):
        judged_question_metrics(1, verdicts, [3], useful_rule="other")  # type: ignore[arg-type]


def test_joint_variant_in_question_metrics():
    verdicts = [vv(), vv({0}), vv(), vv({1}), vv()]
    joint = {3: vv({0, 2}), 5: None}
    m = judged_question_metrics(3, verdicts, [3, 5], joint_verdicts=joint)
    assert m.values["joint_context_recall@3"] == pytest.approx(2 / 3)
    assert m.values["joint_context_recall@5"] is None
    assert m.missing == {"joint_context_recall@5": "judge_error"}
    missing = judged_question_metrics(0, verdicts, [3], joint_verdicts=joint).missing
    assert missing["joint_context_recall@3"] == "no_statements"
    with pytest.raises(ValueError):
        judged_question_metrics(3, verdicts, [1], joint_verdicts=joint)


def test_duplicate_ks_and_key_order():
    m = judged_question_metrics(3, [vv({0})], [5, 1, 5])
    assert list(m.values) == ["context_recall@5", "context_precision@5", "context_recall@1", "context_precision@1"]
