"""TREC-style files: run files, qrels, a corpus and a queries file.

* run: ``qid Q0 docid rank score tag`` (6 whitespace-separated columns; ``Q0`` and ``tag`` are
  not used; ``rank`` an integer >= 1, ``score`` a finite number). The ranking is the ``rank``
  column, ties broken by input order. (trec_eval ignores the rank column and sorts by score,
  descending, then by docid, descending; so it accepts ranks of 0 or -1, which we reject.)
* qrels: ``qid iter docid grade`` (4 columns; ``iter`` is not used; grade an integer >= 0).
* corpus: JSONL ``{"id"|"_id"|"docid"|"doc_id", "text"|"contents", ...}`` (BEIR / pyserini), or a
  TSV ``id<TAB>text`` whose first line may be a header. A text must not be empty or blank.
* queries: TSV ``qid<TAB>text`` (extra columns ignored, an optional header line), or JSONL
  ``{"id"|"_id"|"query_id"|"qid", "text"|"query"|"question"}``.

Blank lines are skipped everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from judge_eval.data._io import (
    Corpus,
    PathLike,
    as_grade,
    as_id,
    as_rank,
    as_score,
    as_text,
    atomic_write,
    first_line,
    iter_json_records,
    iter_lines,
    not_in_corpus,
    type_name,
)
from judge_eval.data.jsonl import first_key
from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.errors import InputError

RUN_COLUMNS = ("qid", "Q0", "docid", "rank", "score", "tag")
QRELS_COLUMNS = ("qid", "iter", "docid", "grade")
CORPUS_ID_KEYS = ("id", "_id", "docid", "doc_id")
CORPUS_TEXT_KEYS = ("text", "contents")
QUERY_ID_KEYS = ("id", "_id", "query_id", "qid")
QUERY_TEXT_KEYS = ("text", "query", "question")
# A first TSV line whose first cell is one of these is a header and is skipped.
HEADER_CELLS = {"id", "_id", "qid", "query_id", "query-id", "question_id", "docid", "doc_id", "pid"}


def _columns(text: str, names: Sequence[str], *, path: PathLike, line: int) -> list[str]:
    parts = text.split()
    if len(parts) < len(names):
        raise InputError(
            f"expected {len(names)} whitespace-separated columns ({' '.join(names)}), "
            f"got {len(parts)}",
            path=path, line=line, field=names[len(parts)],
        )
    if len(parts) > len(names):
        raise InputError(
            f"expected {len(names)} whitespace-separated columns ({' '.join(names)}), "
            f"got {len(parts)}: extra text after '{names[-1]}'",
            path=path, line=line, field=names[-1],
        )
    return parts


def read_trec_run(
    path: PathLike, name: str | None = None, *, corpus: Mapping[str, str] | None = None
) -> Run:
    """Read a TREC run file into a :class:`Run` named ``name`` (default: the file name without
    its extension). Chunk scores are the score column. A docid may appear once per question.
    With a ``corpus``, every chunk's text is filled from it and a docid missing from the corpus
    is an error naming the run line."""
    p = Path(path)
    entries: dict[str, list[tuple[int, Chunk]]] = {}
    seen: dict[str, dict[str, int]] = {}
    origins: dict[str, int] = {}
    for line, text in iter_lines(p, columns=RUN_COLUMNS):
        qid, _q0, docid, rank_s, score_s, _tag = _columns(text, RUN_COLUMNS, path=p, line=line)
        rank = as_rank(rank_s, path=p, line=line, field="rank")
        score = as_score(score_s, path=p, line=line, field="score")
        lines_of = seen.setdefault(qid, {})
        if docid in lines_of:
            raise InputError(
                f"docid {docid!r} appears twice for question {qid!r} (first on line {lines_of[docid]})",
                path=p, line=line, field="docid",
            )
        lines_of[docid] = line
        chunk_text = None
        if corpus is not None:
            if docid not in corpus:
                raise InputError(not_in_corpus("docid", docid, corpus), path=p, line=line, field="docid")
            chunk_text = corpus[docid]
        origins.setdefault(qid, line)
        entries.setdefault(qid, []).append((rank, Chunk(id=docid, text=chunk_text, score=score)))
    rankings = {}
    for qid, items in entries.items():
        items.sort(key=lambda item: item[0])  # stable: ties keep input order
        rankings[qid] = [chunk for _rank, chunk in items]
    run = Run(name=name or p.stem, rankings=rankings)
    for qid, line in origins.items():
        run.set_origin(qid, str(p), line)
    return run


def read_trec_qrels(path: PathLike) -> Qrels:
    """Read TREC qrels. A (qid, docid) pair given twice must have the same grade."""
    grades: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    for line, text in iter_lines(path, columns=QRELS_COLUMNS):
        qid, _iter, docid, grade_s = _columns(text, QRELS_COLUMNS, path=path, line=line)
        grade = as_grade(grade_s, path=path, line=line, field="grade")
        by_doc = grades.setdefault(qid, {})
        if docid in by_doc and by_doc[docid] != grade:
            raise InputError(
                f"question {qid!r}, docid {docid!r}: grade {grade} disagrees with grade "
                f"{by_doc[docid]} on line {first[(qid, docid)]}",
                path=path, line=line, field="grade",
            )
        first.setdefault((qid, docid), line)
        by_doc[docid] = grade
    return Qrels(grades=grades)


def _is_json(path: PathLike) -> bool:
    head = first_line(path)
    return head is not None and head[:1] in ("{", "[")


def _read_id_text(
    path: PathLike, id_keys: Sequence[str], text_keys: Sequence[str], what: str, *, nonblank: bool = False
) -> Corpus:
    """``{id: text}`` from JSONL records or a TSV file (see the module docstring). With
    ``nonblank``, an empty or whitespace-only text is an error."""
    out = Corpus(path=path)
    first: dict[str, int] = {}
    if _is_json(path):
        for line, obj in iter_json_records(path):
            id_key, raw_id = first_key(obj, id_keys, path=path, line=line)
            text_key, text = first_key(obj, text_keys, path=path, line=line)
            key = as_id(raw_id, path=path, line=line, field=id_key)
            if not isinstance(text, str):
                raise InputError(
                    f"'{text_key}' must be a string, got {type_name(text)}",
                    path=path, line=line, field=text_key,
                )
            if nonblank:
                as_text(text, path=path, line=line, field=text_key)
            _add(out, first, key, text, what=what, path=path, line=line, field=id_key)
        return out
    for n, (line, text) in enumerate(iter_lines(path)):
        parts = text.split("\t")
        if n == 0 and parts[0].strip().lower() in HEADER_CELLS:
            continue
        if len(parts) < 2:
            raise InputError(
                "expected 'id<TAB>text' (no tab on this line)", path=path, line=line, field="text"
            )
        key = as_id(parts[0].strip(), path=path, line=line, field="id")
        if nonblank:
            as_text(parts[1], path=path, line=line, field="text")
        _add(out, first, key, parts[1], what=what, path=path, line=line, field="id")
    if not out:
        raise InputError("file is empty (a header line only)", path=path)
    return out


def _add(out: Corpus, first: dict[str, int], key: str, text: str, *, what: str,
         path: PathLike, line: int, field: str) -> None:
    if key in first:
        raise InputError(
            f"duplicate {what} id {key!r} (first on line {first[key]})", path=path, line=line, field=field
        )
    first[key] = line
    out[key] = text


def read_corpus(path: PathLike) -> Corpus:
    """Read a corpus: chunk id -> text (JSONL or TSV, see the module docstring). A text must
    not be empty or whitespace-only."""
    return _read_id_text(path, CORPUS_ID_KEYS, CORPUS_TEXT_KEYS, "corpus", nonblank=True)


def read_queries(path: PathLike) -> dict[str, str]:
    """Read a queries file: question id -> question text (TSV or JSONL)."""
    return _read_id_text(path, QUERY_ID_KEYS, QUERY_TEXT_KEYS, "query")


# --- writers -------------------------------------------------------------------------------


def _check_token(value: str, *, path: PathLike, field: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise InputError(
            f"{value!r} cannot be written to a TREC file (empty or contains whitespace)",
            path=path, field=field,
        )
    return value


def write_trec_run(run: Run, path: PathLike, tag: str | None = None) -> None:
    """Write ``run`` as a TREC run file: ranks 1..n in ranking order; the score column is the
    chunk's score when set, else ``n - rank + 1`` (so trec_eval's sort by score keeps the order).
    ``tag`` defaults to the run name. Chunk texts are not written; empty rankings cannot be
    represented and are left out. Ids with whitespace are an error (nothing is written)."""
    tag = _check_token(tag if tag is not None else run.name, path=path, field="tag")
    with atomic_write(path) as fh:
        for qid, chunks in run.rankings.items():
            _check_token(qid, path=path, field="qid")
            n = len(chunks)
            for rank, chunk in enumerate(chunks, start=1):
                docid = _check_token(chunk.id, path=path, field="docid")
                score = repr(chunk.score) if chunk.score is not None else str(n - rank + 1)
                fh.write(f"{qid} Q0 {docid} {rank} {score} {tag}\n")


def write_trec_qrels(qrels: Qrels, path: PathLike) -> None:
    """Write ``qrels`` as TREC qrels: ``qid 0 docid grade`` per label."""
    with atomic_write(path) as fh:
        for qid, docid, grade in qrels:
            _check_token(qid, path=path, field="qid")
            _check_token(docid, path=path, field="docid")
            fh.write(f"{qid} 0 {docid} {grade}\n")
