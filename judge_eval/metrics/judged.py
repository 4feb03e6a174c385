"""Label-free retrieval metrics from a judge's verified verdicts (RAGAS-style, done right).

Notation: a question with reference statements S (m = |S|, from ``decompose``) and ranked chunks
c_1..c_n from one run; top-k = the first min(k, n) chunks; supp(c) = the statements chunk c
supports with *verified* evidence (:func:`judge_eval.judge.evidence.verify`).

- context recall@k = |union_{i <= min(k, n)} supp(c_i)| / m; undefined when m = 0.
- useful_i = supp(c_i) is non-empty (rule ``"support"``, default) or grade_i >= threshold
  (rule ``"grade"``, the judge's grade as given, evidence not required).
- context precision@k = sum_{i<=k} useful_i * P@i / sum_{i<=k} useful_i, with P@i = share of
  useful chunks among the first i; 0.0 when nothing in the top k is useful. No epsilon, so a list
  whose useful chunks all come first scores exactly 1.0. RAGAS computes the same quantity with a
  1e-10 in the denominator (``_calculate_average_precision`` in
  ``ragas/metrics/_context_precision.py``); the two agree within 1e-9.
- joint context recall@k = |supp(top-k joined into one context)| / m: RAGAS's own form, one
  verdict for the concatenated top-k, for answers whose statements need several chunks together.
  Precision has no joint form: it needs a verdict per rank.

Undefined values are ``None`` with a reason, never 0 (see :func:`judged_question_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from judge_eval.judge.evidence import VerifiedVerdict
from judge_eval.metrics.labelled import check_k
from judge_eval.metrics.missing import MissingReason

if TYPE_CHECKING:
    from judge_eval.grid import VerdictGrid

__all__ = [
    "JudgedQuestionMetrics",
    "MissingReason",
    "UsefulRule",
    "context_precision",
    "context_recall",
    "is_useful",
    "joint_context_recall",
    "judged_frame",
    "judged_question_metrics",
]

UsefulRule = Literal["support", "grade"]
# MissingReason: re-exported from judge_eval.metrics.missing (it was a Literal of three of its
# values here; the enum's members are strings, so comparisons with "judge_error" still hold)




def _check_indices(n_statements: int, supported: frozenset[int]) -> None:
    bad = [i for i in supported if not 0 <= i < n_statements]
    if bad:
        raise ValueError(f"statement indices {sorted(bad)} outside 0..{n_statements - 1}")


def context_recall(n_statements: int, supported: Sequence[frozenset[int]], k: int) -> float | None:
    """|union of ``supported[i]`` for the first min(k, n) chunks| / m, with m = ``n_statements``.

    ``supported[i]`` is the set of 0-based statement indices chunk i+1 supports. ``None`` when
    m = 0 (nothing to recall). An empty ranking gives 0.0.
    """
    check_k(k)
    if n_statements < 0:
        raise ValueError(f"n_statements must be >= 0, got {n_statements}")
    if n_statements == 0:
        return None
    found: set[int] = set()
    for s in supported[:k]:
        _check_indices(n_statements, s)
        found |= s
    return len(found) / n_statements


def context_precision(useful: Sequence[bool], k: int) -> float:
    """sum_{i<=k} useful_i * P@i / sum_{i<=k} useful_i, where P@i = (useful among the first i) / i.

    0.0 when no chunk in the top k is useful (including an empty ranking). No epsilon: useful
    chunks all ranked first give exactly 1.0.
    """
    check_k(k)
    hits = 0
    total = 0.0
    for i, u in enumerate(useful[:k], start=1):
        if u:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


def joint_context_recall(n_statements: int, supported_by_joint_context: frozenset[int]) -> float | None:
    """|statements supported by the concatenated top-k context| / m; ``None`` when m = 0.

    The joint variant: one verdict for the top-k chunks joined into one context (RAGAS's form),
    so a statement that needs two chunks together can count; the per-chunk
    :func:`context_recall` only counts a statement that one chunk supports on its own.
    """
    if n_statements < 0:
        raise ValueError(f"n_statements must be >= 0, got {n_statements}")
    if n_statements == 0:
        return None
    _check_indices(n_statements, supported_by_joint_context)
    return len(supported_by_joint_context) / n_statements


def is_useful(v: VerifiedVerdict, *, rule: UsefulRule = "support", grade_threshold: int = 2) -> bool:
    """Whether a chunk counts as useful for context precision.

    ``rule="support"`` (default): it supports at least one statement with verified evidence.
    ``rule="grade"``: the judge's grade (as given, not capped) is >= ``grade_threshold``.
    """
    if rule == "support":
        return bool(v.supported)
    if rule == "grade":
        return v.grade >= grade_threshold
    raise ValueError(f"unknown useful rule {rule!r} (expected 'support' or 'grade')")


@dataclass(frozen=True)
class JudgedQuestionMetrics:
    """The judged metrics of one question for one run.

    ``values`` has every metric name (``context_recall@5``, ``context_precision@5``,
    ``joint_context_recall@5`` ...), ``None`` when undefined; ``missing`` has exactly the names
    whose value is ``None``, with the reason (a :class:`~judge_eval.metrics.missing.MissingReason`,
    whose members are strings): ``NO_REFERENCE`` (``"no_reference"``: the question has no
    reference answer), ``NO_STATEMENTS`` (``"no_statements"``: the reference decomposed into
    nothing, m = 0) or ``JUDGE_ERROR`` (``"judge_error"``: a judge call that the value needs failed).
    """

    values: dict[str, float | None] = field(default_factory=dict)
    missing: dict[str, MissingReason] = field(default_factory=dict)


def judged_question_metrics(
    n_statements: int | None,
    verdicts: Sequence[VerifiedVerdict | None],
    ks: Sequence[int],
    *,
    useful_rule: UsefulRule = "support",
    grade_threshold: int = 2,
    joint_verdicts: Mapping[int, VerifiedVerdict | None] | None = None,
    no_reference: bool = False,
) -> JudgedQuestionMetrics:
    """Context recall@k and context precision@k (and joint context recall@k if
    ``joint_verdicts`` is given) for every k in ``ks``.

    ``verdicts[i]`` is the verified verdict of the chunk at rank i+1, or ``None`` if judging it
    failed; ``n_statements`` is m, or ``None`` if decomposing the reference failed;
    ``joint_verdicts[k]`` is the verdict for the concatenated top-k (``None`` = failed).

    Missing values (never 0), by precedence:

    - ``no_reference=True``: every metric is missing, ``"no_reference"``;
    - recall@k: m unknown -> ``"judge_error"``; m = 0 -> ``"no_statements"``; a ``None``
      verdict among the first min(k, n) -> ``"judge_error"`` (an error below rank k does not
      affect @k);
    - precision@k with rule ``"support"``: like recall (usefulness needs the statements: with
      m unknown or 0 nothing could be useful, so 0 would be a fake value);
      with rule ``"grade"``: only a ``None`` verdict in the top k makes it missing;
    - joint recall@k: m unknown / m = 0 as for recall; ``joint_verdicts[k]`` ``None`` ->
      ``"judge_error"``.
    """
    out = JudgedQuestionMetrics()
    if useful_rule not in ("support", "grade"):
        raise ValueError(f"unknown useful rule {useful_rule!r} (expected 'support' or 'grade')")
    if n_statements is not None and n_statements < 0:
        raise ValueError(f"n_statements must be >= 0, got {n_statements}")

    def put(name: str, value: float | None, reason: MissingReason | None) -> None:
        out.values[name] = value if reason is None else None
        if reason is not None:
            out.missing[name] = reason

    statements_reason: MissingReason | None = (
        MissingReason.NO_REFERENCE if no_reference
        else MissingReason.JUDGE_ERROR if n_statements is None
        else MissingReason.NO_STATEMENTS if n_statements == 0
        else None
    )
    for k in dict.fromkeys(ks):
        check_k(k)
        top = list(verdicts[:k])
        top_error = MissingReason.JUDGE_ERROR if any(v is None for v in top) else None
        ok = [v for v in top if v is not None]

        reason = statements_reason or top_error
        recall = None
        if reason is None:
            assert n_statements is not None
            recall = context_recall(n_statements, [v.supported for v in ok], k)
        put(f"context_recall@{k}", recall, reason)

        if no_reference:
            reason = MissingReason.NO_REFERENCE
        elif useful_rule == "support":
            reason = statements_reason or top_error
        else:
            reason = top_error
        precision = None
        if reason is None:
            useful = [is_useful(v, rule=useful_rule, grade_threshold=grade_threshold) for v in ok]
            precision = context_precision(useful, k)
        put(f"context_precision@{k}", precision, reason)

        if joint_verdicts is not None:
            if k not in joint_verdicts:
                raise ValueError(f"joint_verdicts has no verdict for k={k}")
            jv = joint_verdicts[k]
            reason = statements_reason or (MissingReason.JUDGE_ERROR if jv is None else None)
            joint = None
            if reason is None:
                assert n_statements is not None and jv is not None
                joint = joint_context_recall(n_statements, jv.supported)
            put(f"joint_context_recall@{k}", joint, reason)
    return out


MISSING_COLUMNS = ["run", "question_id", "measure", "reason"]


def judged_frame(grid: VerdictGrid, *, useful_rule: UsefulRule = "support",
                 useful_grade: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judged metrics for every (run, question) of ``grid``: one row per (run, question) with
    ``context_recall@k``, ``context_precision@k`` (and ``joint_context_recall@k`` when the grid
    has joint verdicts), and the missing values with their reasons (``run``, ``question_id``,
    ``measure``, ``reason``).

    A question the run has no ranking for is scored as an empty ranking (trec_eval -c), as the
    labelled metrics do: leaving it out would flatter a run that skips questions. A value whose
    judge calls were only skipped by a budget is ``budget``, not ``judge_error``; a judge error
    names its causes (``judge_error:timeout,http_500``).
    """
    rows: list[dict] = []
    missing: list[dict] = []
    for row in grid:
        out: dict = {"run": row.run, "question_id": row.question_id}
        if not row.has_reference:
            result = judged_question_metrics(None, [], grid.ks, no_reference=True)
        else:
            n_statements = len(row.statements) if isinstance(row.statements, list) else None
            verdicts = [c.verdict if c.failure is None else None for c in row.cells]
            joint_verdicts = None
            if row.joint is not None:
                joint_verdicts = {k: (v if isinstance(v, VerifiedVerdict) else None) for k, v in row.joint.items()}
            result = judged_question_metrics(
                n_statements, verdicts, grid.ks, useful_rule=useful_rule, grade_threshold=useful_grade,  # type: ignore[arg-type]
                joint_verdicts=joint_verdicts,
            )
        failures = row.failures
        only_budget = bool(failures) and all(f.cause == "budget" for f in failures)
        for measure, value in result.values.items():
            out[measure] = np.nan if value is None else value
        for measure, reason in result.missing.items():
            text = reason.value
            if reason is MissingReason.JUDGE_ERROR and only_budget:
                text = MissingReason.BUDGET.value
            elif reason is MissingReason.JUDGE_ERROR:
                causes = sorted({f.cause for f in failures if f.cause != "budget"})
                text = "judge_error:" + ",".join(causes) if causes else text
            missing.append({"run": row.run, "question_id": row.question_id, "measure": measure, "reason": text})
        rows.append(out)
    return pd.DataFrame(rows), pd.DataFrame(missing, columns=MISSING_COLUMNS)
