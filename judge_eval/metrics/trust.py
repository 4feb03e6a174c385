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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
        widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
        for row in [header, *body]:
            lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                          for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        return "\n".join(lines)

    def render(self) -> str:
        """Everything: the agreement report, then the estimates."""
        return self.agreement.render() + "\n\n" + self.render_estimates()

    def render_brief(self, measures: list[str] | None = None) -> str:
        """Three lines for the end of ``score``'s summary: chunk-level agreement, how the judged
        metrics in ``measures`` track their human twins per question and across runs, and where
        the rest is."""
        a = self.agreement
        chunk = a.chunk.set_index("statistic")

        def stat(name: str, with_ci: bool = False) -> str:
            r = chunk.loc[name]
            if r["value"] != r["value"]:
                return "n/a"
            ci = f" [{r['ci_low']:.2f},{r['ci_high']:.2f}]" if with_ci and r["ci_low"] == r["ci_low"] else ""
            return f"{r['value']:.3f}{ci}"

        lines = [f"judge vs humans on {a.counts.pairs} labelled chunks: kappa {stat('cohen_kappa', True)}, "
                 f"precision {stat('precision')}, recall {stat('recall')}, ROC AUC {stat('roc_auc')}"]
        q = a.question[a.question["statistic"] == "pearson"]
        if measures is not None:
            q = q[q["judged"].isin(measures)]
        system = a.system.set_index(["judged", "human"])
        rows = []
        for r in q.itertuples(index=False):
            tau = system.loc[(r.judged, r.human), "value"] if (r.judged, r.human) in system.index else float("nan")
            rows.append((f"{r.judged} vs {r.human}", "n/a" if r.value != r.value else f"{r.value:.2f}",
                         "n/a" if tau != tau else f"{tau:.2f}"))
        if rows:
            width = max(len(name) for name, _, _ in rows)
            lines.append("judged vs human metric: Pearson r over questions, Kendall tau of the order of the runs")
            lines += [f"  {name:<{width}}  r {r_text:>5}  tau {tau_text:>5}" for name, r_text, tau_text in rows]
        lines.append("full agreement report: report.md in the results folder, or judge-eval agreement "
                     "(docs/agreement.md)")
        if not self.estimates.empty and (self.estimates["ppi_n_unlabelled"] > 0).any():
            lines.append(f"{self.labelled_questions} of {self.questions} questions are labelled: human metrics "
                         "corrected by the judge for every question are in the same places")
        return "\n".join(lines)


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
    labelled = [q for q in questions if grades.get(q)]
    return Trust(agreement=report, estimates=ppi_table(per_question, labelled), labelled_questions=len(labelled),
                 questions=len(questions))
