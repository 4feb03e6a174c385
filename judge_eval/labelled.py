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

from judge_eval.data.load import DataWarning, load_qrels, load_run
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


def check_overlap(qrels: Qrels, runs: Mapping[str, Run], qrels_path: PathLike | None = None) -> None:
    """Runs and labels must share question ids.

    None shared by any run: an :class:`InputError` (almost always the qrels of another dataset,
    which would otherwise print a table of zeros). A run that misses some labelled questions: one
    :class:`DataWarning` per run with the count (those questions score 0, as with trec_eval -c).
    """
    labelled = labelled_questions(qrels)
    if not labelled:
        return
    shared = {name: sum(1 for q in labelled if q in run.rankings) for name, run in runs.items()}
    if runs and not any(shared.values()):
        first = next(iter(runs.values()))
        example = next(iter(first.rankings), None)
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
    qrels: PathLike | Qrels,
    runs: Mapping[str, PathLike | Run],
    *,
    measures: str | Iterable[str] | None = "hit_rate,precision,recall,mrr,ndcg",
    ks: Sequence[int] = (1, 3, 5, 10),
    threshold: int = 1,
    columns: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> LabelledResults:
    """Labelled metrics for ``runs`` (name -> run file or :class:`Run`) against ``qrels`` (a
    file or :class:`Qrels`), as ``judge-eval metrics`` prints them.

    Every question with at least one label counts; a run without a ranking for it scores an
    empty ranking (trec_eval -c) and a warning says how many. Undefined values (recall with no
    relevant label...) are NaN, left out of the mean and counted in ``n_missing``.
    """
    k_list = check_ks(ks)
    labels = qrels if isinstance(qrels, Qrels) else load_qrels(qrels, columns=columns)
    loaded = {name: r if isinstance(r, Run) else load_run(r, name, columns=columns) for name, r in runs.items()}
    if not loaded:
        raise InputError("give at least one run", field="runs")
    check_overlap(labels, loaded, None if isinstance(qrels, Qrels) else qrels)
    frame = evaluate_runs(loaded, labels, measures=measures, ks=k_list, threshold=threshold)
    return LabelledResults(summary=aggregate(frame, by=["run"], n_boot=n_boot, seed=seed), per_question=frame)
