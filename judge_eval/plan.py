"""Plan the judge work: which unique tasks a dataset and its cutoffs need. Nothing is run here.

The unit of judge work is a *task*, not a sample:

- one decomposition per unique reference text (a question without a reference needs none);
- one :class:`ChunkTask` per unique (question text, reference text, chunk text) among the top
  ``max(k)`` chunks of every ranking: a chunk that two retrievers both returned for the same
  question is judged once;
- optionally one :class:`JointTask` per unique (question, reference, concatenated top-k
  context), for the joint variant of context recall.

:func:`chunk_task` and :func:`joint_task` are the only places that derive a task from a question
and its chunks; the grid (:mod:`judge_eval.grid`) uses them to read the outcomes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from judge_eval.data.models import Chunk, Dataset, Question

__all__ = ["ChunkTask", "JointTask", "Plan", "chunk_task", "joint_context", "joint_task", "plan_tasks"]


@dataclass(frozen=True)
class ChunkTask:
    """Judge one chunk for a question and the statements of its reference."""

    question: str
    reference: str
    chunk: str


@dataclass(frozen=True)
class JointTask:
    """Judge the concatenated top-k context of one ranking as if it were a single chunk."""

    question: str
    reference: str
    context: str


JOINT_SEPARATOR = "\n\n---\n\n"


def joint_context(chunks: Sequence[str]) -> str:
    """The text judged by the joint variant: the chunks in rank order, separated by a rule."""
    return JOINT_SEPARATOR.join(chunks)


def chunk_task(q: Question, chunk: Chunk) -> ChunkTask:
    """The judge task for one chunk of a ranking for question ``q``."""
    return ChunkTask(q.question, q.reference or "", chunk.text or "")


def joint_task(q: Question, chunks: Sequence[Chunk], k: int) -> JointTask:
    """The joint-recall task for the top ``k`` chunks of a ranking for question ``q``."""
    return JointTask(q.question, q.reference or "", joint_context([c.text or "" for c in chunks[:k]]))


@dataclass(frozen=True)
class Plan:
    """The unique tasks, in first-seen order: ``references`` to decompose (every reference of
    the data, ranked or not: a question no run ranked still needs its statement count), then
    ``chunk_tasks`` and ``joint_tasks``. ``size`` is the number of tasks."""

    references: list[str] = field(default_factory=list)
    chunk_tasks: list[ChunkTask] = field(default_factory=list)
    joint_tasks: list[JointTask] = field(default_factory=list)

    @classmethod
    def of(cls, chunk_tasks: Sequence[ChunkTask], joint_tasks: Sequence[JointTask] = (),
           references: Sequence[str] = ()) -> Plan:
        """A plan from task lists that may repeat: duplicates are removed, and every task's
        reference is added to ``references``."""
        chunks = list(dict.fromkeys(chunk_tasks))
        joints = list(dict.fromkeys(joint_tasks))
        tasks: list[ChunkTask | JointTask] = [*chunks, *joints]
        refs = list(dict.fromkeys([*references, *(t.reference for t in tasks)]))
        return cls(refs, chunks, joints)

    @property
    def size(self) -> int:
        return len(self.references) + len(self.chunk_tasks) + len(self.joint_tasks)


def plan_tasks(ds: Dataset, ks: Sequence[int], joint: bool = False) -> Plan:
    """Every judge task the metrics of ``ds`` at cutoffs ``ks`` need (``ks`` sorted ascending)."""
    depth = ks[-1]
    chunk_tasks: list[ChunkTask] = []
    joint_tasks: list[JointTask] = []
    for run in ds.runs.values():
        for qid, chunks in run.rankings.items():
            q = ds.questions[qid]
            if not q.reference:
                continue
            chunk_tasks.extend(chunk_task(q, c) for c in chunks[:depth])
            if joint:
                joint_tasks.extend(joint_task(q, chunks, k) for k in ks)
    references = [q.reference for q in ds.questions.values() if q.reference]
    return Plan.of(chunk_tasks, joint_tasks, references)
