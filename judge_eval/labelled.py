"""``evaluate_labelled()``: human-labelled metrics for several runs, the twin of ``judge-eval metrics``.

Loads the qrels and the runs, checks that they describe the same questions, scores every run on
every labelled question (:func:`judge_eval.metrics.evaluate_labelled.evaluate_runs`) and
aggregates with bootstrap CIs (:func:`judge_eval.metrics.stats.aggregate`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from judge_eval.data.columns import QrelsColumns, RunColumns
from judge_eval.data.load import DataWarning, load_qrels_columns, load_run_columns
from judge_eval.data.models import Qrels, Run
from judge_eval.errors import InputError
from judge_eval.metrics.evaluate_labelled import evaluate_runs, labelled_questions
from judge_eval.metrics.labelled import check_ks
from judge_eval.metrics.stats import aggregate

__all__ = ["LabelledResults", "evaluate_labelled"]

PathLike = str | os.PathLike


@dataclass
class LabelledResults:
    """``summary``: one row per (run, measure) with ``mean``, ``n``, ``n_missing``, ``ci_low``,
    ``ci_high``; ``per_question``: one row per (run, question), NaN where undefined."""

    summary: pd.DataFrame
    per_question: pd.DataFrame


def check_overlap(
    qrels: Qrels | QrelsColumns, runs: Mapping[str, Run | RunColumns], qrels_path: PathLike | None = None
) -> None:
    """Runs and labels must share question ids.

    None shared by any run: an :class:`InputError` (almost always the qrels of another dataset,
    which would otherwise print a table of zeros). A run that misses some labelled questions: one
    :class:`DataWarning` per run with the count (those questions score 0, as with trec_eval -c).
    """
    labelled = labelled_questions(qrels)
    if not labelled:
        return
    shared = {name: len(set(labelled).intersection(run.question_ids())) for name, run in runs.items()}
    if runs and not any(shared.values()):
        first = next(iter(runs.values()))
        example = next(iter(first.question_ids()), None)
        origin = first.origin(example) if example is not None else None
        where = f" ({origin[0]} line {origin[1]})" if origin else ""
        raise InputError(
            f"none of the {len(labelled)} labelled question ids appears in any run (labels for e.g. "
            f"{labelled[0]!r}, rankings for e.g. {example!r}{where}); are the qrels and the runs of the same "
            "dataset?",
            path=qrels_path, field="question_id",
        )
    for name, n in shared.items():
        if n < len(labelled):
            warnings.warn(
                f"run {name!r} has no ranking for {len(labelled) - n} of the {len(labelled)} labelled "
                "questions; they score 0 (as trec_eval -c)",
                DataWarning,
                stacklevel=3,
            )


def evaluate_labelled(
    qrels: PathLike | Qrels | QrelsColumns,
    runs: Mapping[str, PathLike | Run | RunColumns],
    *,
    measures: str | Iterable[str] | None = "hit_rate,precision,recall,mrr,ndcg",
    ks: Sequence[int] = (1, 3, 5, 10),
    threshold: int = 1,
    columns: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> LabelledResults:
    """Labelled metrics for ``runs`` (name -> run file, :class:`Run` or :class:`RunColumns`)
    against ``qrels`` (a file, :class:`Qrels` or :class:`QrelsColumns`), as ``judge-eval
    metrics`` prints them. Files are loaded as columns (:mod:`judge_eval.data.columns`): a
    1M-line TREC run takes about a second and 100 MB.

    Every question with at least one label counts; a run without a ranking for it scores an
    empty ranking (trec_eval -c) and a warning says how many. Undefined values (recall with no
    relevant label...) are NaN, left out of the mean and counted in ``n_missing``.
    """
    k_list = check_ks(ks)
    if isinstance(qrels, (Qrels, QrelsColumns)):
        labels, qrels_path = qrels, None
    else:
        labels, qrels_path = load_qrels_columns(qrels, columns=columns), qrels
    loaded = {
        name: r if isinstance(r, (Run, RunColumns)) else load_run_columns(r, name, columns=columns)
        for name, r in runs.items()
    }
    if not loaded:
        raise InputError("give at least one run", field="runs")
    check_overlap(labels, loaded, qrels_path)
    frame = evaluate_runs(loaded, labels, measures=measures, ks=k_list, threshold=threshold)
    return LabelledResults(summary=aggregate(frame, by=["run"], n_boot=n_boot, seed=seed), per_question=frame)
