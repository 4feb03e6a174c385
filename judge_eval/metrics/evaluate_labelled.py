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

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from judge_eval.data.models import Qrels, Run
from judge_eval.errors import InputError
from judge_eval.metrics.labelled import (
    Measure,
    _check_inputs,
    _check_threshold,
    resolve_measures,
)

__all__ = ["evaluate_runs", "labelled_questions"]


def labelled_questions(qrels: Qrels | Mapping[str, Mapping[str, int]]) -> list[str]:
    """The question ids that have at least one label, in qrels order."""
    grades = qrels.grades if isinstance(qrels, Qrels) else qrels
    return [qid for qid, by_chunk in grades.items() if len(by_chunk) > 0]


def evaluate_runs(
    runs: Mapping[str, Run],
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    measures: str | Iterable[str | Measure] | None = None,
    ks: Iterable[int] | None = None,
    threshold: int = 1,
    questions: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Score every run on every counted question.

    ``runs``: run name -> :class:`Run` (the key is what the ``run`` column shows).
    ``qrels``: a :class:`Qrels` or a plain ``{question: {chunk: grade}}`` mapping.
    ``measures``/``ks``: see :func:`judge_eval.metrics.labelled.resolve_measures`.
    ``threshold``: relevant iff grade >= threshold (int >= 1).
    ``questions``: the question ids to score (default: every question with a label).

    Returns a DataFrame with columns ``run``, ``question_id`` and one float column per measure
    label (``"ndcg@5"``...), NaN where the measure is undefined; rows are run-major in the
    order of ``runs``, then in question order.
    """
    _check_threshold(threshold)
    resolved = resolve_measures(measures, ks)
    grades_by_q: Mapping[str, Mapping[str, int]] = (
        qrels.grades if isinstance(qrels, Qrels) else qrels
    )
    if questions is None:
        qids = labelled_questions(grades_by_q)
    else:
        qids = list(dict.fromkeys(questions))
    for qid in qids:
        _check_inputs([], grades_by_q.get(qid, {}))

    labels = [m.label for m in resolved]
    run_col: list[str] = []
    q_col: list[str] = []
    values = np.full((len(runs) * len(qids), len(resolved)), np.nan)
    row = 0
    for run_name, run in runs.items():
        if not isinstance(run, Run):
            raise InputError(f"run {run_name!r} is not a Run", field="runs")
        for qid in qids:
            ranking = run.ranked_ids(qid)
            grades = grades_by_q.get(qid, {})
            for j, m in enumerate(resolved):
                v = m(ranking, grades, threshold)
                if v is not None:
                    values[row, j] = v
            run_col.append(run_name)
            q_col.append(qid)
            row += 1
    frame = pd.DataFrame(values, columns=labels)
    frame.insert(0, "question_id", pd.Series(q_col, dtype=object))
    frame.insert(0, "run", pd.Series(run_col, dtype=object))
    return frame
