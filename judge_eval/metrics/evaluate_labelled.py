"""Labelled measures over whole runs: one row per (run, question), one column per measure.

Which questions count (the denominator of every mean):

* by default every question of the qrels that has at least one label (of any grade, 0
  included), in qrels order; or exactly the ``questions`` given, in that order;
* a question the run has no ranking for is scored with an *empty* ranking: precision, hit rate,
  recall, RR, AP, R-precision, nDCG and judged are 0 where they are defined. This is trec_eval's
  ``-c`` behaviour (plain trec_eval and ranx skip such questions, which flatters a run that
  leaves hard questions out);
* rankings for questions outside that set are ignored (as trec_eval does).

Undefined values (see :mod:`judge_eval.metrics.labelled`, e.g. recall on a question with no
relevant label) are NaN in the frame and counted as ``n_missing`` by
:func:`judge_eval.metrics.stats.aggregate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from judge_eval.data.columns import QrelsColumns, RunColumns
from judge_eval.data.models import Qrels, Run
from judge_eval.errors import InputError
from judge_eval.metrics.labelled import (
    Discount,
    Gain,
    Measure,
    _check_inputs,
    _check_threshold,
    _discount,
    _gain,
    resolve_measures,
)

__all__ = ["evaluate_runs", "labelled_questions"]

QrelsLike = Qrels | QrelsColumns | Mapping[str, Mapping[str, int]]


def labelled_questions(qrels: QrelsLike) -> list[str]:
    """The question ids that have at least one label, in qrels order."""
    if isinstance(qrels, QrelsColumns):
        return qrels.labelled_questions()
    grades = qrels.grades if isinstance(qrels, Qrels) else qrels
    return [qid for qid, by_chunk in grades.items() if len(by_chunk) > 0]


def evaluate_runs(
    runs: Mapping[str, Run | RunColumns],
    qrels: QrelsLike,
    measures: str | Iterable[str | Measure] | None = None,
    ks: Iterable[int] | None = None,
    threshold: int = 1,
    questions: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Score every run on every counted question.

    ``runs``: run name -> :class:`Run` or :class:`RunColumns` (the key is what the ``run``
    column shows).
    ``qrels``: :class:`Qrels`, :class:`QrelsColumns` or a plain ``{question: {chunk: grade}}``
    mapping.
    ``measures``/``ks``: see :func:`judge_eval.metrics.labelled.resolve_measures`.
    ``threshold``: relevant iff grade >= threshold (int >= 1).
    ``questions``: the question ids to score (default: every question with a label).

    Returns a DataFrame with columns ``run``, ``question_id`` and one float column per measure
    label (``"ndcg@5"``...), NaN where the measure is undefined; rows are run-major in the
    order of ``runs``, then in question order.

    The measures are computed for all questions at once, over arrays (see :class:`_Scored`);
    each gives the very float the per-ranking function of
    :mod:`judge_eval.metrics.labelled` gives (the same operations in the same order; sums
    are taken in rank order by ``np.bincount``), which the tests check bit for bit.
    """
    _check_threshold(threshold)
    resolved = resolve_measures(measures, ks)
    qids = labelled_questions(qrels) if questions is None else list(dict.fromkeys(questions))
    if isinstance(qrels, QrelsColumns):
        labels = qrels
    else:
        grades_by_q: Mapping[str, Mapping[str, int]] = qrels.grades if isinstance(qrels, Qrels) else qrels
        for qid in qids:
            _check_inputs([], grades_by_q.get(qid, {}))
        labels = QrelsColumns.from_qrels({qid: grades_by_q[qid] for qid in qids if qid in grades_by_q})
    counted = _Labels.build(labels, qids, threshold)

    values = np.full((len(runs) * len(qids), len(resolved)), np.nan)
    for i, (run_name, run) in enumerate(runs.items()):
        if isinstance(run, Run):
            run = RunColumns.from_run(run)
        elif not isinstance(run, RunColumns):
            raise InputError(f"run {run_name!r} is not a Run", field="runs")
        scored = _Scored.build(run, counted)
        for j, m in enumerate(resolved):
            values[i * len(qids) : (i + 1) * len(qids), j] = VECTORISED[m.name](scored, m.k, threshold)
    frame = pd.DataFrame(values, columns=[m.label for m in resolved])
    frame.insert(0, "question_id", pd.Series(qids * len(runs), dtype=object))
    frame.insert(0, "run", pd.Series(np.repeat(np.array(list(runs), dtype=object), len(qids)), dtype=object))
    return frame


# --------------------------------------------------------------------------- the arrays


def _segment_rank(starts: np.ndarray) -> np.ndarray:
    """1, 2, ... within each segment ``starts[i]:starts[i + 1]``."""
    lengths = np.diff(starts)
    return np.arange(starts[-1], dtype=np.int64) - np.repeat(starts[:-1], lengths) + 1


@dataclass(frozen=True)
class _Labels:
    """The labels of the counted questions (rows 0..n-1 in counting order), ready for lookups:
    ``keys`` (sorted) = row * len(vocabulary) + chunk code of every label, with its grade;
    ``relevant[row]`` = R; ``ideal_*``: each row's grades in decreasing order, with their rank
    in that order (for IDCG)."""

    questions: pd.Index
    vocabulary: pd.Index
    keys: np.ndarray
    grades: np.ndarray
    relevant: np.ndarray
    ideal_row: np.ndarray
    ideal_rank: np.ndarray
    ideal_grade: np.ndarray

    @property
    def n(self) -> int:
        return len(self.questions)

    @classmethod
    def build(cls, labels: QrelsColumns, qids: list[str], threshold: int) -> _Labels:
        questions = pd.Index(qids, dtype=object)
        row = np.repeat(questions.get_indexer(pd.Index(labels.qids, dtype=object)), np.diff(labels.starts))
        keep = row >= 0
        row, codes, grades = row[keep], labels.chunk_codes[keep], labels.grades[keep]
        keys = row * max(len(labels.vocabulary), 1) + codes
        order = np.argsort(keys, kind="stable")
        ideal = np.lexsort((-grades, row))
        ideal_row = row[ideal]
        return cls(
            questions=questions, vocabulary=pd.Index(labels.vocabulary, dtype=object),
            keys=keys[order], grades=grades[order],
            relevant=np.bincount(row[grades >= threshold], minlength=len(qids)),
            ideal_row=ideal_row, ideal_rank=_segment_rank(np.searchsorted(ideal_row, np.arange(len(qids) + 1))),
            ideal_grade=grades[ideal],
        )


@dataclass(frozen=True)
class _Scored:
    """One run against the labels: every chunk the run retrieved for a counted question, in
    rank order (a question's chunks are contiguous), with its question ``row``, ``rank`` (1 =
    first), ``grade`` (0 if unlabelled) and whether it is ``labelled``; ``first``/``lengths``:
    where each question's chunks start, and how many there are."""

    labels: _Labels
    row: np.ndarray
    rank: np.ndarray
    grade: np.ndarray
    labelled: np.ndarray
    first: np.ndarray
    lengths: np.ndarray

    @classmethod
    def build(cls, run: RunColumns, labels: _Labels) -> _Scored:
        row = np.repeat(labels.questions.get_indexer(pd.Index(run.qids, dtype=object)), np.diff(run.starts))
        rank = _segment_rank(run.starts)
        # each chunk's code in the labels' vocabulary (-1: labelled for no question)
        code = labels.vocabulary.get_indexer(pd.Index(run.vocabulary, dtype=object))[run.chunk_codes]
        keep = row >= 0
        row, rank, code = row[keep], rank[keep], code[keep]
        grade = np.zeros(len(row), dtype=np.int64)
        labelled = np.zeros(len(row), dtype=bool)
        candidates = np.flatnonzero(code >= 0)
        if len(candidates) and len(labels.keys):
            keys = row[candidates] * max(len(labels.vocabulary), 1) + code[candidates]
            at = np.minimum(np.searchsorted(labels.keys, keys), len(labels.keys) - 1)
            found = labels.keys[at] == keys
            grade[candidates[found]] = labels.grades[at[found]]
            labelled[candidates[found]] = True
        first = np.flatnonzero(np.diff(row, prepend=-1) != 0)
        return cls(labels=labels, row=row, rank=rank, grade=grade, labelled=labelled, first=first,
                   lengths=np.diff(np.append(first, len(row))))

    def top(self, k: int | None) -> np.ndarray:
        return np.ones(len(self.rank), dtype=bool) if k is None else self.rank <= k

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per question: how many of its chunks ``mask`` selects."""
        return np.bincount(self.row[mask], minlength=self.labels.n)

    def total(self, mask: np.ndarray, terms: np.ndarray) -> np.ndarray:
        """Per question: the sum of ``terms`` (one per selected chunk), added in rank order."""
        return np.bincount(self.row[mask], weights=terms, minlength=self.labels.n)


# --------------------------------------------------------------------------- the measures
#
# One function per measure of judge_eval.metrics.labelled, over every question at once:
# ``f(scored, k, threshold)`` -> one float per question, NaN where undefined.

_Vectorised = Callable[[_Scored, "int | None", int], np.ndarray]


def _over_relevant(s: _Scored, values: np.ndarray) -> np.ndarray:
    """``values / R``, undefined (NaN) where R = 0."""
    big_r = s.labels.relevant
    return np.where(big_r > 0, values / np.maximum(big_r, 1), np.nan)


def _defined_if_relevant(s: _Scored, values: np.ndarray) -> np.ndarray:
    return np.where(s.labels.relevant > 0, values, np.nan)


def _hit_rate(s: _Scored, k: int | None, t: int) -> np.ndarray:
    hits = s.count((s.grade >= t) & s.top(k))
    return _defined_if_relevant(s, (hits > 0).astype(np.float64))


def _precision(s: _Scored, k: int | None, t: int) -> np.ndarray:
    return s.count((s.grade >= t) & s.top(k)) / k


def _recall(s: _Scored, k: int | None, t: int) -> np.ndarray:
    return _over_relevant(s, s.count((s.grade >= t) & s.top(k)))


def _reciprocal_rank(s: _Scored, k: int | None, t: int) -> np.ndarray:
    hit = (s.grade >= t) & s.top(k)
    rr = np.zeros(s.labels.n)
    rows, first = np.unique(s.row[hit], return_index=True)  # a question's first hit: its best rank
    rr[rows] = 1.0 / s.rank[hit][first]
    return _defined_if_relevant(s, rr)


def _average_precision(s: _Scored, k: int | None, t: int) -> np.ndarray:
    relevant = s.grade >= t
    running = np.cumsum(relevant)
    hits = running - np.repeat(running[s.first] - relevant[s.first], s.lengths)  # within its question
    hit = relevant & s.top(k)
    return _over_relevant(s, s.total(hit, hits[hit] / s.rank[hit]))


def _r_precision(s: _Scored, k: int | None, t: int) -> np.ndarray:
    return _over_relevant(s, s.count((s.grade >= t) & (s.rank <= s.labels.relevant[s.row])))


def _judged(s: _Scored, k: int | None, t: int) -> np.ndarray:
    return s.count(s.labelled & s.top(k)) / k


def _lookup(values: np.ndarray, fn: Callable[[int], float]) -> np.ndarray:
    """``fn`` of every value, computed once per distinct value (by the scalar definition)."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return np.array([fn(int(v)) for v in distinct], dtype=np.float64)[inverse]


def _ndcg(gain: Gain, discount: Discount) -> _Vectorised:
    def gains(s: _Scored, mask: np.ndarray, grades: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        return _lookup(grades[mask], lambda g: _gain(g, gain)) / _lookup(ranks[mask], lambda i: _discount(i, discount))

    def ndcg(s: _Scored, k: int | None, t: int) -> np.ndarray:
        lab = s.labels
        found = (s.rank <= k) & (s.grade > 0)
        dcg = s.total(found, gains(s, found, s.grade, s.rank))
        best = (lab.ideal_rank <= k) & (lab.ideal_grade > 0)
        idcg = np.bincount(lab.ideal_row[best], weights=gains(s, best, lab.ideal_grade, lab.ideal_rank),
                           minlength=lab.n)
        return np.where(idcg != 0.0, dcg / np.where(idcg != 0.0, idcg, 1.0), np.nan)

    return ndcg


#: measure name -> its vectorised twin (the same keys as ``labelled.MEASURES``)
VECTORISED: dict[str, _Vectorised] = {
    "hit_rate": _hit_rate,
    "precision": _precision,
    "recall": _recall,
    "mrr": _reciprocal_rank,
    "ndcg": _ndcg("linear", "log2"),
    "ndcg_exp": _ndcg("exp", "log2"),
    "ndcg_jarvelin": _ndcg("linear", "jarvelin"),
    "ndcg_exp_jarvelin": _ndcg("exp", "jarvelin"),
    "map": _average_precision,
    "r_precision": _r_precision,
    "judged": _judged,
}
