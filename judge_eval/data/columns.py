"""Runs and qrels as columns (numpy arrays): what labelled metrics need, at scale.

A :class:`~judge_eval.data.models.Run` holds one pydantic :class:`~judge_eval.data.models.Chunk`
per retrieved chunk, with what the judge needs (texts, metadata); building one costs about
15 µs and 1 KB per chunk, 15 s and 1 GB for a 1M-line run. Labelled metrics need only the
question ids, the chunk ids in rank order and the grades, so :class:`RunColumns` and
:class:`QrelsColumns` hold those as a few arrays:

* the questions, ``qids``, in order of first appearance, and ``starts``: the entries of question
  ``qids[i]`` are ``starts[i]:starts[i + 1]`` (a run's in rank order, 1 first);
* per entry, the chunk id, dictionary-encoded as in a pandas ``Categorical``:
  ``vocabulary[chunk_codes]`` (:attr:`RunColumns.chunk_ids` decodes it), and the score (a run)
  or the grade (qrels).

The two forms hold the same data and convert both ways (``RunColumns.from_run(run)``,
``columns.to_run()``). :func:`judge_eval.metrics.evaluate_labelled.evaluate_runs` takes either.

:func:`read_trec_run_columns` and :func:`read_trec_qrels_columns` give exactly what
``RunColumns.from_run(read_trec_run(path))`` and ``QrelsColumns.from_qrels(read_trec_qrels(path))``
give, without building an object per line: the file is split into columns with numpy
(:mod:`judge_eval.data._tokens`) and checked column by column. Whenever that fast path meets
anything it does not handle itself (a bad or missing column, a rank that is not plain digits, a
docid given twice, invalid UTF-8, non-ASCII whitespace...), the file is read again by the
per-line reader, which raises its usual error naming file, line and field, or returns the run,
converted. So errors, tie-breaking and every accepted spelling are the per-line reader's by
construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from judge_eval.data import _tokens
from judge_eval.data._io import MAX_GRADE, PathLike
from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.data.trec import QRELS_COLUMNS, RUN_COLUMNS, read_trec_qrels, read_trec_run
from judge_eval.errors import InputError

__all__ = ["QrelsColumns", "RunColumns", "read_trec_qrels_columns", "read_trec_run_columns"]


def _starts(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _entry_question(starts: np.ndarray) -> np.ndarray:
    """The question index of every entry."""
    return np.repeat(np.arange(len(starts) - 1), np.diff(starts))


def _first_repeat(starts: np.ndarray, chunk_codes: np.ndarray, n_codes: int) -> int | None:
    """The first entry whose chunk already appeared for the same question, if any."""
    keys = _entry_question(starts) * max(n_codes, 1) + chunk_codes
    _, first = np.unique(keys, return_index=True)
    if len(first) == len(keys):
        return None
    repeated = np.ones(len(keys), dtype=bool)
    repeated[first] = False
    return int(np.flatnonzero(repeated)[0])


def _check_shape(qids: np.ndarray, starts: np.ndarray, n: int, what: str) -> None:
    if starts.shape != (len(qids) + 1,) or starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 0):
        raise ValueError(f"{what}: starts must rise from 0 to the number of entries, one more than the questions")


@dataclass(frozen=True, eq=False)
class RunColumns:
    """One retriever's output as arrays (see the module docstring). Invariant, as for
    :class:`Run`: within one ranking, chunk ids are unique.

    ``origins``: where each question's ranking starts in the input, ``qid -> (path, line)``,
    for error messages (may be empty)."""

    name: str
    qids: np.ndarray
    starts: np.ndarray
    chunk_codes: np.ndarray
    vocabulary: np.ndarray
    scores: np.ndarray
    origins: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.chunk_codes)
        _check_shape(self.qids, self.starts, n, f"run {self.name!r}")
        if self.scores.shape != (n,):
            raise ValueError(f"run {self.name!r}: one score per entry (NaN for none)")
        repeat = _first_repeat(self.starts, self.chunk_codes, len(self.vocabulary))
        if repeat is not None:
            q = int(np.searchsorted(self.starts, repeat, side="right")) - 1
            raise ValueError(
                f"run {self.name!r}, question {self.qids[q]!r}: chunk id "
                f"{self.vocabulary[self.chunk_codes[repeat]]!r} appears twice (again at rank "
                f"{repeat - int(self.starts[q]) + 1})"
            )

    def __len__(self) -> int:
        return len(self.chunk_codes)

    @property
    def chunk_ids(self) -> np.ndarray:
        """The chunk id of every entry (an object array of ``str``)."""
        return self.vocabulary[self.chunk_codes]

    def question_ids(self) -> list[str]:
        """The questions the run ranks, in order of first appearance."""
        return self.qids.tolist()

    def ranked_ids(self, qid: str) -> list[str]:
        """The chunk ids for ``qid`` in rank order (empty if the run has no ranking for it)."""
        where = np.flatnonzero(self.qids == qid)
        if len(where) == 0:
            return []
        i = int(where[0])
        return self.vocabulary[self.chunk_codes[self.starts[i] : self.starts[i + 1]]].tolist()

    def origin(self, qid: str) -> tuple[str, int] | None:
        """``(path, line)`` where the ranking for ``qid`` was first read, if known."""
        return self.origins.get(qid)

    @classmethod
    def from_run(cls, run: Run) -> RunColumns:
        """The same run as arrays (a chunk without a score has NaN)."""
        import pandas as pd

        rankings = run.rankings
        lengths = np.fromiter((len(c) for c in rankings.values()), dtype=np.int64, count=len(rankings))
        n = int(lengths.sum())
        ids = np.fromiter((c.id for chunks in rankings.values() for c in chunks), dtype=object, count=n)
        scores = np.fromiter(
            (np.nan if c.score is None else c.score for chunks in rankings.values() for c in chunks),
            dtype=np.float64, count=n,
        )
        codes, vocabulary = pd.factorize(ids) if n else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
        origins = {q: o for q in rankings if (o := run.origin(q)) is not None}
        return cls(
            name=run.name, qids=np.array(list(rankings), dtype=object), starts=_starts(lengths),
            chunk_codes=np.asarray(codes, dtype=np.int64), vocabulary=np.asarray(vocabulary, dtype=object),
            scores=scores, origins=origins,
        )

    def to_run(self) -> Run:
        """The same run as a :class:`Run` (chunks without texts)."""
        ids = self.chunk_ids.tolist()
        scores = [None if s != s else s for s in self.scores.tolist()]  # NaN: no score
        rankings = {
            q: [Chunk(id=ids[j], score=scores[j]) for j in range(int(a), int(b))]
            for q, a, b in zip(self.qids.tolist(), self.starts[:-1], self.starts[1:], strict=True)
        }
        run = Run(name=self.name, rankings=rankings)
        for q, (path, line) in self.origins.items():
            run.set_origin(q, path, line)
        return run


@dataclass(frozen=True, eq=False)
class QrelsColumns:
    """Human labels as arrays (see the module docstring): the labels of question ``qids[i]``
    are entries ``starts[i]:starts[i + 1]``, chunk ``vocabulary[chunk_codes[j]]`` with grade
    ``grades[j]`` (an integer >= 0). A (question, chunk) pair appears once."""

    qids: np.ndarray
    starts: np.ndarray
    chunk_codes: np.ndarray
    vocabulary: np.ndarray
    grades: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.chunk_codes)
        _check_shape(self.qids, self.starts, n, "qrels")
        if self.grades.shape != (n,) or (n and self.grades.min() < 0):
            raise ValueError("qrels: one grade >= 0 per entry")
        repeat = _first_repeat(self.starts, self.chunk_codes, len(self.vocabulary))
        if repeat is not None:
            raise ValueError(f"qrels: chunk {self.vocabulary[self.chunk_codes[repeat]]!r} is labelled twice")

    def __len__(self) -> int:
        return len(self.chunk_codes)

    def labelled_questions(self) -> list[str]:
        """The question ids that have at least one label, in order."""
        return self.qids[np.diff(self.starts) > 0].tolist()

    def for_question(self, qid: str) -> dict[str, int]:
        """``{chunk id: grade}`` for ``qid`` (empty if it has no label)."""
        where = np.flatnonzero(self.qids == qid)
        if len(where) == 0:
            return {}
        a, b = int(self.starts[where[0]]), int(self.starts[where[0] + 1])
        return dict(zip(self.vocabulary[self.chunk_codes[a:b]].tolist(), self.grades[a:b].tolist(), strict=True))

    @classmethod
    def from_qrels(cls, qrels: Qrels | Mapping[str, Mapping[str, int]]) -> QrelsColumns:
        """The same labels as arrays, from :class:`Qrels` or ``{question: {chunk: grade}}``
        (grades are int64: one above 2**63 - 1 is an :class:`InputError`)."""
        import pandas as pd

        grades_by_q = qrels.grades if isinstance(qrels, Qrels) else qrels
        lengths = np.fromiter((len(g) for g in grades_by_q.values()), dtype=np.int64, count=len(grades_by_q))
        n = int(lengths.sum())
        ids = np.fromiter((c for g in grades_by_q.values() for c in g), dtype=object, count=n)
        for q, by_chunk in grades_by_q.items():
            for c, v in by_chunk.items():
                if v > MAX_GRADE:
                    raise InputError(f"question {q!r}, chunk {c!r}: grade must be an integer from 0 to 2**63 - 1, "
                                     f"got {v}", field="grade")
        grades = np.fromiter((v for g in grades_by_q.values() for v in g.values()), dtype=np.int64, count=n)
        codes, vocabulary = pd.factorize(ids) if n else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
        return cls(qids=np.array(list(grades_by_q), dtype=object), starts=_starts(lengths),
                   chunk_codes=np.asarray(codes, dtype=np.int64), vocabulary=np.asarray(vocabulary, dtype=object),
                   grades=grades)

    def to_qrels(self) -> Qrels:
        """The same labels as :class:`Qrels`."""
        ids = self.vocabulary[self.chunk_codes].tolist()
        grades = self.grades.tolist()
        return Qrels(grades={
            q: {ids[j]: grades[j] for j in range(int(a), int(b))}
            for q, a, b in zip(self.qids.tolist(), self.starts[:-1], self.starts[1:], strict=True)
        })


# --------------------------------------------------------------------------- TREC readers


def read_trec_run_columns(path: PathLike, name: str | None = None) -> RunColumns:
    """:func:`~judge_eval.data.trec.read_trec_run` as columns: the same run, the same errors
    (see the module docstring), without an object per line."""
    fast = _fast_run(path, name or Path(path).stem)
    if fast is not None:
        return fast
    return RunColumns.from_run(read_trec_run(path, name))


def read_trec_qrels_columns(path: PathLike) -> QrelsColumns:
    """:func:`~judge_eval.data.trec.read_trec_qrels` as columns: the same labels, the same
    errors (see the module docstring), without an object per line."""
    fast = _fast_qrels(path)
    if fast is not None:
        return fast
    return QrelsColumns.from_qrels(read_trec_qrels(path))


def _group(question_codes: np.ndarray, n_questions: int, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the entries ``order`` (a selection or an ordering of the entries)
    stable-sorted by question, and where each question's entries start."""
    codes = question_codes[order]
    return order[np.argsort(codes, kind="stable")], _starts(np.bincount(codes, minlength=n_questions))


def _fast_run(path: PathLike, name: str) -> RunColumns | None:
    split = _tokens.split_columns(path, len(RUN_COLUMNS), wanted=(0, 2, 3, 4))
    if split is None:
        return None
    qid_tokens, doc_tokens, rank_tokens, score_tokens = split.columns
    ranks = _tokens.integers(rank_tokens)
    scores = _tokens.decimals(score_tokens)
    if ranks is None or scores is None or np.any(ranks < 1) or not np.all(np.isfinite(scores)):
        return None
    question_codes, qids = _tokens.factorize(qid_tokens)
    chunk_codes, vocabulary = _tokens.factorize(doc_tokens)
    # The ranking is the rank column, ties in input order: sort by rank (stable), then group by
    # question (stable), as read_trec_run does.
    by_rank = np.argsort(ranks, kind="stable")
    order, starts = _group(question_codes, len(qids), by_rank)
    if _first_repeat(starts, chunk_codes[order], len(vocabulary)) is not None:
        return None  # a docid given twice for a question: the per-line reader names both lines
    first_lines = split.lines[_tokens.first_positions(question_codes)].tolist()
    where = str(Path(path))
    origins = {q: (where, line) for q, line in zip(qids.tolist(), first_lines, strict=True)}
    return RunColumns(name=name, qids=qids, starts=starts, chunk_codes=chunk_codes[order],
                      vocabulary=vocabulary, scores=scores[order], origins=origins)


def _fast_qrels(path: PathLike) -> QrelsColumns | None:
    split = _tokens.split_columns(path, len(QRELS_COLUMNS), wanted=(0, 2, 3))
    if split is None:
        return None
    qid_tokens, doc_tokens, grade_tokens = split.columns
    grades = _tokens.integers(grade_tokens)
    if grades is None:
        return None
    question_codes, qids = _tokens.factorize(qid_tokens)
    chunk_codes, vocabulary = _tokens.factorize(doc_tokens)
    # A (question, docid) pair given again must repeat its grade; the first line counts.
    pairs, _ = _pandas_factorize(question_codes * len(vocabulary) + chunk_codes)
    first = _tokens.first_positions(pairs)
    if not np.array_equal(grades, grades[first][pairs]):
        return None  # the per-line reader names both lines
    order, starts = _group(question_codes, len(qids), first)
    return QrelsColumns(qids=qids, starts=starts, chunk_codes=chunk_codes[order], vocabulary=vocabulary,
                        grades=grades[order])


def _pandas_factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    codes, uniques = pd.factorize(values)
    return np.asarray(codes, dtype=np.int64), np.asarray(uniques)
