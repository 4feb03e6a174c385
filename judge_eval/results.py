"""What :func:`judge_eval.evaluate` returns: the frames of numbers and typed facts about the run.

``Results.info`` is the JSON form of the typed parts (``judge``, ``prompts``, ``dataset``,
``settings``, ``accounting``), the same dictionary ``summary.json`` carries beside the summary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from judge_eval.metrics.missing import MissingReason
from judge_eval.run import Accounting, ErrorTolerance

if TYPE_CHECKING:  # scipy comes with it: only runs with human labels pay for that import
    from judge_eval.metrics.trust import Trust

__all__ = ["DatasetInfo", "JudgeInfo", "MissingReason", "Results", "Settings", "scored"]


@dataclass(frozen=True)
class JudgeInfo:
    """Who judged: the identity in results and cache keys, and whether it is the offline
    approximation."""

    identity: str
    approximate: bool = False


@dataclass(frozen=True)
class DatasetInfo:
    """What was scored: ``fingerprint`` (questions, references and every ranking; two results
    with the same fingerprint scored the same inputs), ``questions_fingerprint`` (questions and
    references only: two results with the same one scored the same test set, perhaps with other
    runs), question counts, run names in order, and the number of human labels."""

    fingerprint: str
    questions: int
    questions_with_reference: int
    runs: list[str]
    human_labels: int = 0
    questions_fingerprint: str = ""


@dataclass(frozen=True)
class Settings:
    """The settings of :func:`judge_eval.evaluate` that shape the numbers."""

    ks: list[int]
    samples: int = 1
    joint: bool = False
    useful_rule: str = "support"
    useful_grade: int = 2
    judge_relevance: int = 2
    relevance_threshold: int = 1
    n_boot: int = 1000
    seed: int = 0
    concurrency: int = 8
    cache_mode: str = "use"
    budget: dict[str, Any] = field(default_factory=dict)
    pricing: dict[str, Any] = field(default_factory=dict)


def scored(judge: JudgeInfo, prompts: dict[str, str], dataset: DatasetInfo, settings: Settings) -> dict[str, Any]:
    """What was scored and how, as JSON-ready dictionaries: the ``judge``, ``prompts``,
    ``dataset`` and ``settings`` of ``summary.json`` (and of a judge failure before any result)."""
    return {"judge": asdict(judge), "prompts": dict(prompts), "dataset": asdict(dataset), "settings": asdict(settings)}


@dataclass
class Results:
    """The result of an evaluation.

    - ``summary``: one row per (run, measure): ``mean``, ``ci_low``, ``ci_high`` (95% bootstrap
      over questions), ``n`` (questions with a value), ``n_missing`` (questions without one).
    - ``per_question``: one row per (run, question), one column per measure (NaN = missing).
    - ``missing``: why each missing value is missing: (run, question_id, measure, reason), the
      reason one of :class:`MissingReason` (a judge error may name its causes after a colon).
    - ``verdicts``: one row per (question, chunk) the judge saw: supported statements with their
      evidence quotes, grade, rejected claims, or the error.
    - ``statements``: one row per (question, statement).
    - ``judge``, ``prompts`` (name -> ``name@version``), ``dataset``, ``settings``,
      ``accounting`` (calls, cache hits, tokens, cost, errors).
    - ``trust``: with human labels, the judge's agreement with them and the human metrics
      estimated on every question (:class:`~judge_eval.metrics.trust.Trust`); None without.
    """

    summary: pd.DataFrame
    per_question: pd.DataFrame
    missing: pd.DataFrame
    verdicts: pd.DataFrame
    statements: pd.DataFrame
    judge: JudgeInfo
    prompts: dict[str, str]
    dataset: DatasetInfo
    settings: Settings
    accounting: Accounting
    trust: Trust | None = None

    @property
    def info(self) -> dict[str, Any]:
        """The typed parts as JSON-ready dictionaries (the metadata of ``summary.json``)."""
        info = {**scored(self.judge, self.prompts, self.dataset, self.settings),
                "accounting": self.accounting.as_dict()}
        if self.trust is not None:
            info["trust"] = self.trust.to_dict()
        return info

    @property
    def partial(self) -> bool:
        """True when a budget stopped the judge before every task ran."""
        return self.accounting.partial

    def judge_failure(self, max_errors: ErrorTolerance | str = "5%") -> str | None:
        """Why this result should not count as a success, or None: more failed judge tasks
        than ``max_errors`` tolerates (an :class:`~judge_eval.run.ErrorTolerance`, or its text
        form ``"5%"``/``"0.05"``/``"10"``), or a budget that stopped the judge early. The CLI
        exits 3 when this is not None."""
        tolerance = max_errors if isinstance(max_errors, ErrorTolerance) else ErrorTolerance.parse(max_errors)
        a = self.accounting
        problems = []
        if tolerance.exceeded(a.errors, a.tasks):
            causes = ", ".join(f"{c} {n}" for c, n in sorted(a.error_causes.items()))
            problems.append(f"{a.errors} of {a.tasks} judge tasks failed ({causes}), more than --max-errors allows "
                            f"({tolerance}); their values are missing (missing.csv says which)")
        if self.partial:
            problems.append(f"a budget stopped the judge: {a.skipped} of {a.tasks} tasks were not run, "
                            "so the result is partial")
        return "; ".join(problems) or None
