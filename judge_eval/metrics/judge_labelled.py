"""Judge-labelled IR measures: the judge's grades used as relevance labels.

The labels are the capped grades (:attr:`~judge_eval.judge.evidence.VerifiedVerdict.capped_grade`)
of the *judged pool* of a question: every chunk any run returned in its judged top ``max(k)``.
A chunk is relevant iff its grade >= ``judge_relevance`` (default 2). The measures are the
labelled ones (:mod:`judge_eval.metrics.labelled`) with a ``judge_`` prefix, so:

- ``judge_recall@k`` and ``judge_ndcg@k`` are relative to the pool (the runs scored together);
  undefined (reason ``undefined: no chunk in the judged pool is relevant``) when nothing in the
  pool is relevant;
- ``judge_hit_rate@k`` and ``judge_mrr@K`` are 0 in that case: the pool is only what the runs
  retrieved, so "nothing relevant" there means every run missed (with human labels such a
  question is left out instead: nothing relevant is known to exist);
- a failed judge call anywhere in the pool makes every judge-labelled value of the question
  missing (``judge_error (in the judged pool)``, or ``budget (in the judged pool)`` when the calls
  were only skipped by a budget): the pool, and so every denominator, is unknown;
- a question without a reference is not judged: every judge-labelled value is missing
  (``no_reference``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from judge_eval.data.models import Qrels, Run
from judge_eval.metrics.evaluate_labelled import evaluate_runs
from judge_eval.metrics.missing import MissingReason

if TYPE_CHECKING:
    from judge_eval.grid import VerdictGrid

__all__ = ["IR_MEASURES", "JUDGE_PREFIX", "ir_measure_names", "judge_labelled_frame", "undefined_reasons"]

#: Measures computed from the judge's grades (used as labels) and from human labels.
IR_MEASURES: tuple[str, ...] = ("hit_rate", "precision", "recall", "mrr", "ndcg")
JUDGE_PREFIX = "judge_"
MISSING_COLUMNS = ["run", "question_id", "measure", "reason"]


def ir_measure_names(ks: Sequence[int]) -> list[str]:
    """``hit_rate@k``, ``precision@k``, ``recall@k``, ``mrr@max(k)``, ``ndcg@k`` for every k."""
    names: list[str] = []
    for m in IR_MEASURES:
        if m == "mrr":
            names.append(f"mrr@{ks[-1]}")
        else:
            names.extend(f"{m}@{k}" for k in ks)
    return names


def undefined_reasons(frame: pd.DataFrame, reason: str) -> pd.DataFrame:
    """The NaN cells of a per-question frame as missing rows with ``reason``."""
    cols = [c for c in frame.columns if c not in ("run", "question_id")]
    long = frame.melt(id_vars=["run", "question_id"], value_vars=cols, var_name="measure")
    long = long[long["value"].isna()].drop(columns="value")
    long["reason"] = reason
    return long.reset_index(drop=True)


def judge_labelled_frame(grid: VerdictGrid, judge_relevance: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The judge-labelled measures for every (run, question with a reference) of ``grid``, and
    the missing values with their reasons (see the module docstring)."""
    ds = grid.dataset
    grades: dict[str, dict[str, int]] = {}
    failed: dict[str, set[str]] = {}
    for row in grid:
        for cell in row.cells:
            if cell.failure is not None:
                failed.setdefault(row.question_id, set()).add(
                    MissingReason.BUDGET.value if cell.failure.cause == "budget" else MissingReason.JUDGE_ERROR.value)
            else:
                grades.setdefault(row.question_id, {})[cell.chunk.id] = cell.verdict.capped_grade  # type: ignore[union-attr]
    truncated = {name: Run(name=name, rankings={qid: chunks[: grid.depth] for qid, chunks in run.rankings.items()
                                               if qid in ds.questions})
                 for name, run in ds.runs.items()}
    qids = [qid for qid, q in ds.questions.items() if q.reference]
    frame = evaluate_runs(truncated, Qrels(grades=grades), measures=ir_measure_names(grid.ks), ks=grid.ks,
                          threshold=judge_relevance, questions=qids)
    measure_cols = [c for c in frame.columns if c not in ("run", "question_id")]
    missing: list[dict] = []
    for i, qid in enumerate(frame["question_id"]):
        if qid in failed:
            only_budget = failed[qid] == {MissingReason.BUDGET.value}
            reason = MissingReason.BUDGET.value if only_budget else MissingReason.JUDGE_ERROR.value
            frame.loc[i, measure_cols] = np.nan
            for m in measure_cols:
                missing.append({"run": frame.loc[i, "run"], "question_id": qid, "measure": JUDGE_PREFIX + m,
                                "reason": reason + " (in the judged pool)"})
    # Nothing in the pool is judge-relevant: hit rate and RR are 0 (every run missed); recall
    # and nDCG have no relevant chunk to recover. nDCG must be masked here: its ideal ranking
    # counts every graded chunk, so grade-1 ("on topic") chunks alone would make it defined and
    # usually 1.0.
    no_relevant = {qid for qid in qids if qid not in failed
                   and not any(g >= judge_relevance for g in grades.get(qid, {}).values())}
    empty_pool = frame["question_id"].isin(list(no_relevant))
    for col in measure_cols:
        family = col.split("@")[0]
        if family in ("hit_rate", "mrr"):
            frame.loc[empty_pool & frame[col].isna(), col] = 0.0
        elif family.startswith("ndcg") or family == "recall":
            frame.loc[empty_pool, col] = np.nan
    undefined = undefined_reasons(frame, MissingReason.NO_RELEVANT_IN_POOL.value)
    undefined = undefined[~undefined["question_id"].isin(list(failed))].copy()
    undefined["measure"] = JUDGE_PREFIX + undefined["measure"]
    frame = frame.rename(columns={c: JUDGE_PREFIX + c for c in measure_cols})
    no_reference = [{"run": name, "question_id": qid, "measure": JUDGE_PREFIX + m,
                     "reason": MissingReason.NO_REFERENCE.value}
                    for name in ds.runs for qid, q in ds.questions.items() if not q.reference for m in measure_cols]
    missing_frame = pd.concat([pd.DataFrame(missing, columns=MISSING_COLUMNS), undefined,
                               pd.DataFrame(no_reference, columns=MISSING_COLUMNS)], ignore_index=True)
    return frame, missing_frame
