"""``agree()``: the judge's agreement with human labels given after scoring, for a results folder.

The twin of ``judge-eval agreement``: :func:`judge_eval.metrics.trust.trust` (which ``evaluate()``
calls itself whenever labels are given to it) applied to a results folder and a qrels file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from judge_eval.data.load import load_qrels
from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.errors import InputError
from judge_eval.metrics.evaluate_labelled import evaluate_runs
from judge_eval.metrics.judge_labelled import ir_measure_names
from judge_eval.metrics.trust import Trust, trust
from judge_eval.report.folder import read_results_dir, read_verdicts

__all__ = ["Trust", "agree"]

PathLike = str | os.PathLike


def _runs_from_verdicts(verdicts: pd.DataFrame) -> dict[str, Run]:
    """The judged top of every ranking, rebuilt from ``runs`` {run: rank} of each verdict."""
    ranked: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for qid, cid, runs in zip(verdicts["question_id"], verdicts["chunk_id"], verdicts["runs"], strict=True):
        for run, rank in runs.items():
            ranked.setdefault(run, {}).setdefault(str(qid), []).append((int(rank), str(cid)))
    return {run: Run(name=run, rankings={q: [Chunk(id=c) for _, c in sorted(items)] for q, items in by_q.items()})
            for run, by_q in ranked.items()}


def agree(results_dir: PathLike, qrels: PathLike | Qrels, *, columns: Mapping[str, str] | None = None,
          n_boot: int = 1000, seed: int = 0) -> Trust:
    """:func:`trust` for a results folder and human labels given now.

    The human metrics are recomputed from ``qrels`` over the judged top ``max(k)`` of every
    ranking (rebuilt from ``verdicts.jsonl``), so the qrels need not have been given to
    ``score``. Questions the judge did not see (no reference) have no judged values and take no
    part."""
    per_question, info = read_results_dir(results_dir)
    verdicts = read_verdicts(results_dir)
    labels = qrels if isinstance(qrels, Qrels) else load_qrels(qrels, columns=columns)
    settings = info.get("settings") or {}
    ks = [int(k) for k in settings.get("ks") or []]
    if not ks:
        raise InputError("summary.json has no settings.ks", path=Path(results_dir) / "summary.json",
                         field="settings.ks")
    threshold = int(settings.get("relevance_threshold", 1))
    questions = list(dict.fromkeys(per_question["question_id"].astype(str)))
    labelled = [q for q in questions if labels.for_question(q)]
    if not labelled:
        raise InputError(f"none of the {len(labels.grades)} labelled question ids is a question of {results_dir}",
                         path=None if isinstance(qrels, Qrels) else qrels, field="question_id")
    runs = _runs_from_verdicts(verdicts) if len(verdicts) else {}
    runs = {name: runs.get(name, Run(name=name)) for name in dict.fromkeys(per_question["run"].astype(str))}
    human = evaluate_runs(runs, labels, measures=ir_measure_names(ks), ks=ks, threshold=threshold, questions=labelled)
    judged = per_question.drop(columns=[c for c in human.columns[2:] if c in per_question.columns])
    judged = judged.astype({"run": str, "question_id": str})
    merged = judged.merge(human, on=["run", "question_id"], how="left", sort=False)
    return trust(merged, verdicts, labels, judge_relevance=int(settings.get("judge_relevance", 2)),
                 relevance_threshold=threshold, n_boot=n_boot, seed=seed)
