"""How far can the judge be trusted? Agreement with human labels and human-corrected estimates.

:func:`trust` takes the frames of an evaluation (``evaluate()`` calls it whenever human labels
exist; :func:`judge_eval.agree.agree` does it for a results folder) and returns a :class:`Trust`:

- ``agreement``: chunk, question and system level agreement of the judge with the humans
  (:mod:`judge_eval.metrics.agreement`, docs/agreement.md);
- ``estimates``: per run and human metric, the human-only mean, the prediction-powered estimate
  (the judge on every question, corrected by the labelled ones) and the judge-only mean, each
  with a 95% CI (:mod:`judge_eval.metrics.ppi`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from judge_eval.data.models import Qrels
from judge_eval.metrics.agreement import AgreementReport, agreement
from judge_eval.metrics.ppi import ppi_table

__all__ = ["Trust", "trust"]


@dataclass
class Trust:
    """Agreement of the judge with human labels, and the human metrics estimated from both."""

    agreement: AgreementReport
    estimates: pd.DataFrame
    labelled_questions: int
    questions: int

    def to_dict(self) -> dict[str, Any]:
        records = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                   for r in self.estimates.to_dict(orient="records")]
        return {"agreement": self.agreement.to_dict(), "estimates": records,
                "labelled_questions": self.labelled_questions, "questions": self.questions}

    def render_estimates(self) -> str:
        """The estimates as a fixed-width table, or one line saying none is needed."""
        e = self.estimates
        if e.empty or not (e["ppi_n_unlabelled"] > 0).any():
            return (f"Human metrics: all {self.labelled_questions} questions with a judged value are labelled, so "
                    "the human numbers need no correction from the judge.")
        lines = [f"Human metrics on all questions: {self.labelled_questions} of {self.questions} questions are "
                 "labelled; 'corrected' = the judge on every question, corrected by the labelled ones "
                 "(prediction-powered, 95% CI)"]
        header = ["run", "measure", "labelled only", "corrected", "judge only", "labelled/unlabelled"]
        body = []
        for r in e.itertuples(index=False):
            body.append([str(r.run), str(r.human), _est(r.human_mean, r.human_ci_low, r.human_ci_high),
                         _est(r.ppi_mean, r.ppi_ci_low, r.ppi_ci_high), _est(r.judge_mean, r.judge_ci_low,
                                                                              r.judge_ci_high),
                         f"{r.ppi_n_labelled}/{r.ppi_n_unlabelled}"])
        widths = [max(len(x) for x in col) for col in zip(header, *body)]
        for row in [header, *body]:
            lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                          for i, (c, w) in enumerate(zip(row, widths))))
        return "\n".join(lines)

    def render(self) -> str:
        return self.agreement.render() + "\n\n" + self.render_estimates()


def _est(mean: float, lo: float, hi: float) -> str:
    if mean != mean:
        return "-"
    return f"{mean:.3f} [{lo:.2f},{hi:.2f}]" if lo == lo else f"{mean:.3f}"


def trust(per_question: pd.DataFrame, verdicts: pd.DataFrame, qrels: Qrels | Mapping[str, Mapping[str, int]], *,
          judge_relevance: int = 2, relevance_threshold: int = 1, n_boot: int = 1000, seed: int = 0) -> Trust:
    """Agreement and estimates from an evaluation's frames (``per_question`` must hold the human
    metrics of the labelled questions beside the judged ones)."""
    grades = qrels.grades if isinstance(qrels, Qrels) else qrels
    report = agreement(per_question, verdicts, grades, judge_threshold=judge_relevance,
                       human_threshold=relevance_threshold, n_boot=n_boot, seed=seed)
    questions = list(dict.fromkeys(per_question["question_id"]))
    labelled = [q for q in questions if any(True for _ in grades.get(q, {}))]
    return Trust(agreement=report, estimates=ppi_table(per_question, labelled), labelled_questions=len(labelled),
                 questions=len(questions))
