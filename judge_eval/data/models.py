"""The data models: questions, chunks, runs, human labels (qrels) and a dataset holding them.

All models are pydantic v2. Readers in this package build them and report bad input as
:class:`judge_eval.errors.InputError` naming file, line and field; the models themselves
re-check the invariants so that data built in Python is held to the same rules.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PrivateAttr, model_validator


def content_id(text: str) -> str:
    """A stable id for a chunk that came without one: ``"h:"`` + the first 16 hex digits of the
    SHA-256 of its NFC-normalised UTF-8 text. The same text always gets the same id, on any
    machine and in any run, so chunks without ids can still be cached and labelled."""
    normalised = unicodedata.normalize("NFC", text)
    return "h:" + hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


def number_repeated_texts(chunks: list[Chunk], generated: list[bool]) -> tuple[list[Chunk], int]:
    """Give a chunk whose id was generated from its text (:func:`content_id`) and whose text
    already appeared earlier in the same ranking the id ``<content id>#<n>`` (n = 2, 3 ...).

    Retrievers without chunk ids (RAGAS records) often return the same text twice; both ranks
    are kept, and since the judge's task is keyed by the text, it is judged once. Chunks with
    ids given by the user are left alone (a repeated given id stays an error). Returns the
    chunks and how many were renumbered."""
    seen: dict[str, int] = {}
    out: list[Chunk] = []
    repeats = 0
    for chunk, gen in zip(chunks, generated, strict=True):
        if gen and chunk.id in seen:
            seen[chunk.id] += 1
            repeats += 1
            chunk = chunk.model_copy(update={"id": f"{chunk.id}#{seen[chunk.id]}"})
        elif gen:
            seen[chunk.id] = 1
        out.append(chunk)
    return out, repeats


class Chunk(BaseModel):
    """One retrieved chunk. ``text`` may be ``None`` when a run names chunks by id only (TREC runs
    without a corpus); the judge needs the text, labelled metrics do not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str, **kwargs: Any) -> Chunk:
        """A chunk whose id is the :func:`content_id` of its text."""
        return cls(id=content_id(text), text=text, **kwargs)


class Question(BaseModel):
    """A test question with its reference answer (needed for judged metrics) and, optionally,
    human grades for chunks (``labels``: chunk id -> grade >= 0)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str
    reference: str | None = None
    labels: dict[str, NonNegativeInt] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Run(BaseModel):
    """The output of one retriever: per question id, the ranked chunks (rank 1 first).

    Invariant: within one ranking, chunk ids are unique.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    rankings: dict[str, list[Chunk]] = Field(default_factory=dict)
    # Where each question's ranking came from ("path:line"), for error messages that point
    # at the input, e.g. a run naming a question the dataset does not have.
    _origins: dict[str, tuple[str, int]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _unique_chunk_ids(self) -> Run:
        for qid, chunks in self.rankings.items():
            seen: set[str] = set()
            for rank, chunk in enumerate(chunks, start=1):
                if chunk.id in seen:
                    raise ValueError(
                        f"run {self.name!r}, question {qid!r}: chunk id {chunk.id!r} appears "
                        f"twice (again at rank {rank})"
                    )
                seen.add(chunk.id)
        return self

    def question_ids(self) -> list[str]:
        """The questions the run ranks, in order."""
        return list(self.rankings)

    def ranked_ids(self, qid: str) -> list[str]:
        """The chunk ids for ``qid`` in rank order (empty if the run has no ranking for it)."""
        return [c.id for c in self.rankings.get(qid, [])]

    def origin(self, qid: str) -> tuple[str, int] | None:
        """``(path, line)`` where the ranking for ``qid`` was first read, if known."""
        return self._origins.get(qid)

    def set_origin(self, qid: str, path: str, line: int) -> None:
        self._origins.setdefault(qid, (path, line))


class Qrels(BaseModel):
    """Human relevance labels: question id -> chunk id -> grade (an integer >= 0).

    A chunk without a label has grade 0 for every measure; ``judged@k`` tells how much of a
    ranking was labelled at all.
    """

    model_config = ConfigDict(extra="forbid")

    grades: dict[str, dict[str, NonNegativeInt]] = Field(default_factory=dict)

    def for_question(self, qid: str) -> dict[str, int]:
        return self.grades.get(qid, {})

    def __len__(self) -> int:
        return sum(len(g) for g in self.grades.values())

    def __iter__(self) -> Iterator[tuple[str, str, int]]:  # type: ignore[override]
        for qid, by_chunk in self.grades.items():
            for cid, grade in by_chunk.items():
                yield qid, cid, grade


class Dataset(BaseModel):
    """Questions (in input order), the runs to evaluate, and human labels if any.

    ``qrels`` holds labels given in a separate file; labels given inline on questions are merged
    into it by :meth:`labels` (a grade given both ways must agree).
    """

    model_config = ConfigDict(extra="forbid")

    questions: dict[str, Question] = Field(default_factory=dict)
    runs: dict[str, Run] = Field(default_factory=dict)
    qrels: Qrels | None = None

    def labels(self) -> Qrels | None:
        """All human labels: the qrels file merged with the questions' inline ``labels``."""
        merged: dict[str, dict[str, int]] = {}
        if self.qrels is not None:
            for qid, by_chunk in self.qrels.grades.items():
                merged[qid] = dict(by_chunk)
        for q in self.questions.values():
            if q.labels:
                target = merged.setdefault(q.id, {})
                for cid, grade in q.labels.items():
                    if cid in target and target[cid] != grade:
                        raise ValueError(
                            f"question {q.id!r}, chunk {cid!r}: inline label {grade} disagrees "
                            f"with the qrels grade {target[cid]}"
                        )
                    target[cid] = grade
        if not merged and self.qrels is None:
            return None
        return Qrels(grades=merged)
