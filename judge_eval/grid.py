"""The verdict grid: what the judge said about every ranked chunk, per run and question, built once.

Every metric reads the judge's work through this grid instead of re-deriving task keys: for each
(run, question), the statements of the reference (or why there are none), the judged top
``depth`` chunks in rank order with their verdict or failure, and the joint verdicts when asked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from judge_eval.data.models import Chunk, Dataset
from judge_eval.judge.evidence import VerifiedVerdict
from judge_eval.plan import chunk_task, joint_task
from judge_eval.run import Failure, JudgeOutcome

__all__ = ["Cell", "QuestionGrid", "VerdictGrid"]


@dataclass(frozen=True)
class Cell:
    """One ranked chunk: its rank (1-based), the chunk, and the verdict or the failure."""

    rank: int
    chunk: Chunk
    verdict: VerifiedVerdict | Failure

    @property
    def failure(self) -> Failure | None:
        return self.verdict if isinstance(self.verdict, Failure) else None


@dataclass(frozen=True)
class QuestionGrid:
    """The judge's work for one run on one question.

    ``statements``: the reference's statements, a :class:`Failure` when the decomposition failed,
    or None when the question has no reference (then ``cells`` is empty: nothing is judged).
    ``cells``: the top ``depth`` chunks of the run's ranking (empty when the run did not rank the
    question). ``joint``: k -> joint verdict (or failure), when the joint variant was planned.
    """

    run: str
    question_id: str
    statements: list[str] | Failure | None
    cells: tuple[Cell, ...]
    joint: dict[int, VerifiedVerdict | Failure] | None = None

    @property
    def has_reference(self) -> bool:
        return self.statements is not None

    @property
    def failures(self) -> list[Failure]:
        """Every failure this question's values depend on (decomposition, chunks, joint)."""
        out = [self.statements] if isinstance(self.statements, Failure) else []
        out += [c.failure for c in self.cells if c.failure is not None]
        out += [v for v in (self.joint or {}).values() if isinstance(v, Failure)]
        return out


class VerdictGrid:
    """Every (run, question) of a dataset with the judge's verdicts, in run then question order."""

    def __init__(self, ds: Dataset, outcome: JudgeOutcome, ks: Sequence[int], joint: bool = False) -> None:
        self.dataset = ds
        self.outcome = outcome
        self.ks = list(ks)
        self.depth = self.ks[-1]
        self._rows: dict[tuple[str, str], QuestionGrid] = {}
        for name, run in ds.runs.items():
            for qid, q in ds.questions.items():
                chunks = run.rankings.get(qid, [])[: self.depth]
                if not q.reference:
                    self._rows[(name, qid)] = QuestionGrid(name, qid, None, ())
                    continue
                cells = tuple(Cell(rank, c, outcome.verdicts[chunk_task(q, c)])
                              for rank, c in enumerate(chunks, start=1))
                joint_verdicts = {k: outcome.joint[joint_task(q, chunks, k)] for k in self.ks} if joint else None
                self._rows[(name, qid)] = QuestionGrid(name, qid, outcome.statements[q.reference], cells,
                                                       joint_verdicts)

    @property
    def runs(self) -> list[str]:
        return list(self.dataset.runs)

    @property
    def question_ids(self) -> list[str]:
        return list(self.dataset.questions)

    def __getitem__(self, key: tuple[str, str]) -> QuestionGrid:
        return self._rows[key]

    def __iter__(self) -> Iterator[QuestionGrid]:
        return iter(self._rows.values())

    def unique_cells(self) -> Iterator[tuple[str, Cell, dict[str, int]]]:
        """Each judged (question, chunk id) once, first-seen order: the question id, the cell
        where it was first seen, and run name -> rank for every run that returned it."""
        seen: dict[tuple[str, str], tuple[str, Cell, dict[str, int]]] = {}
        for name, run in self.dataset.runs.items():
            for qid in run.rankings:  # the run's own order, as its file gave it
                row = self._rows[(name, qid)]
                for cell in row.cells:
                    key = (qid, cell.chunk.id)
                    if key in seen:
                        seen[key][2][name] = cell.rank
                    else:
                        seen[key] = (qid, cell, {name: cell.rank})
        return iter(seen.values())

    # -- frames for the results -------------------------------------------------------------

    def verdict_frame(self) -> pd.DataFrame:
        """One row per unique (question, chunk) judged, with the runs and ranks that returned
        it: supported statement numbers (1-based) with evidence, grade and capped grade, the
        reason, rejected claims; or the error. With several samples per chunk, also each
        sample's grade (``sample_grades``) and claimed statements (``sample_supported``).
        ``question`` and ``chunk_text`` carry the texts the judge saw, so the results folder
        alone is enough to review the verdicts (``judge-eval labels``)."""
        rows: list[dict[str, Any]] = []
        for qid, cell, runs in self.unique_cells():
            v = cell.verdict
            row: dict[str, Any] = {"question_id": qid, "chunk_id": cell.chunk.id, "runs": runs,
                                   "question": self.dataset.questions[qid].question,
                                   "chunk_text": cell.chunk.text}
            if isinstance(v, Failure):
                row.update(error=v.cause, error_message=v.message, grade=None, supported=[], evidence={},
                           unverified=0, invalid_statement=0, reason=None)
            else:
                row.update(error=None, error_message=None, grade=v.grade, capped_grade=v.capped_grade,
                           supported=sorted(i + 1 for i in v.supported),
                           evidence={str(i + 1): quote for i, quote in sorted(v.evidence.items())},
                           unverified=v.unverified, invalid_statement=v.invalid_statement, reason=v.reason,
                           rejected=[{"statement": r.statement, "evidence": r.evidence, "cause": r.cause}
                                     for r in v.rejected])
                samples = self.outcome.raw_verdicts.get(chunk_task(self.dataset.questions[qid], cell.chunk), [])
                if len(samples) > 1:  # what each sample said before the vote (its claims unverified)
                    row.update(sample_grades=[s.grade for s in samples],
                               sample_supported=[sorted({c.statement for c in s.supports}) for s in samples])
            rows.append(row)
        return pd.DataFrame(rows)

    def statement_frame(self) -> pd.DataFrame:
        """One row per (question, statement) (1-based numbers), or one row with the error when
        the decomposition failed; questions without a reference have none."""
        rows: list[dict[str, Any]] = []
        for qid, q in self.dataset.questions.items():
            if not q.reference or q.reference not in self.outcome.statements:
                continue
            st = self.outcome.statements[q.reference]
            if isinstance(st, Failure):
                rows.append({"question_id": qid, "statement": None, "text": None, "error": st.cause})
            else:
                for i, s in enumerate(st, start=1):
                    rows.append({"question_id": qid, "statement": i, "text": s, "error": None})
        return pd.DataFrame(rows, columns=["question_id", "statement", "text", "error"])
