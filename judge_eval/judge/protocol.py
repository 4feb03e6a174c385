"""What a judge is: two asynchronous calls and the shapes of their answers.

A judge turns a reference answer into statements (:meth:`Judge.decompose`) and grades one chunk
against those statements (:meth:`Judge.judge_chunk`). Both return a :class:`JudgeResponse`
carrying the parsed answer plus accounting (calls made, cache hit, tokens). A call that fails
after its retries raises :class:`judge_eval.errors.JudgeCallError`; it never returns a default.

The evidence check (:mod:`judge_eval.judge.evidence`) runs after the judge, on every answer,
cached or not, so a cache never holds "verified" data that a later, stricter check would reject.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from judge_eval.usage import Usage

__all__ = ["ChunkVerdict", "ChunkVerdicts", "Judge", "JudgeResponse", "ListedVerdict", "Statements", "Support", "Usage"]


class Statements(BaseModel):
    """The answer of ``decompose``: atomic statements of a reference answer."""

    model_config = ConfigDict(extra="forbid")

    statements: list[str]


class Support(BaseModel):
    """One support claim: statement number (1-based, as numbered in the prompt) and a quote
    that the judge says it copied verbatim from the chunk."""

    model_config = ConfigDict(extra="forbid")

    statement: int
    evidence: str


class ChunkVerdict(BaseModel):
    """The answer of ``judge_chunk``.

    grade: 3 = states an answer to the question; 2 = supports part of the answer;
    1 = on topic but supports no statement; 0 = unrelated (UMBRELA / TREC 0..3 compatible).
    """

    model_config = ConfigDict(extra="forbid")

    supports: list[Support] = Field(default_factory=list)
    grade: int = Field(ge=0, le=3)
    reason: str = ""


class ListedVerdict(BaseModel):
    """One chunk's verdict in a listwise answer: ``chunk`` is the chunk's number in the prompt
    (1-based), the rest is a :class:`ChunkVerdict`."""

    model_config = ConfigDict(extra="forbid")

    chunk: int
    supports: list[Support] = Field(default_factory=list)
    grade: int = Field(ge=0, le=3)
    reason: str = ""

    def verdict(self) -> ChunkVerdict:
        return ChunkVerdict(supports=self.supports, grade=self.grade, reason=self.reason)


class ChunkVerdicts(BaseModel):
    """The answer of ``judge_chunks`` (listwise judging): one verdict per chunk of the prompt."""

    model_config = ConfigDict(extra="forbid")

    verdicts: list[ListedVerdict]


T = TypeVar("T", Statements, ChunkVerdict)


@dataclass
class JudgeResponse(Generic[T]):
    """A parsed answer and what it cost.

    ``calls`` counts HTTP requests actually sent (0 for a cache hit or the offline judge;
    retries and repair requests count). ``usage`` counts tokens the server reported for
    those requests (a cache hit reports the tokens it *saved* in ``saved_usage`` instead).
    """

    value: T
    calls: int = 0
    cache_hit: bool = False
    usage: Usage = field(default_factory=Usage)
    saved_usage: Usage = field(default_factory=Usage)


class Judge(Protocol):
    """The interface the runner drives. Implementations: :class:`~judge_eval.judge.core.JudgeCore`
    around a transport (``OpenAIJudge``, ``OfflineJudge``, plugins: docs/plugins.md), or any
    object with these members."""

    #: who judged, as recorded in results and cache rows: e.g. ``"openai:api.openai.com/gpt-4o-mini"``
    #: or ``"offline:v1"``. Never contains secrets.
    identity: str

    #: True for judges that are approximations (the offline judge), so reports can say so.
    approximate: bool

    async def decompose(self, reference: str, *, sample: int = 0) -> JudgeResponse[Statements]:
        ...

    async def judge_chunk(
        self, question: str, statements: list[str], chunk: str, *, sample: int = 0
    ) -> JudgeResponse[ChunkVerdict]:
        ...
