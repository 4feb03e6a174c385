"""Native JSON Lines: questions (optionally with one run inline), run files and qrels.

Questions file, one object per line::

    {"id": "q1", "question": "...", "reference": "...", "labels": {"c1": 2},
     "metadata": {...}, "contexts": ["chunk text", {"id": "c1", "text": "...", "score": 3.2}]}

Run file, one object per line: ``{"id": "q1", "contexts": [...]}`` (other keys are ignored, so a
questions file with ``contexts`` is also a valid run file).

Qrels file, one object per line: ``{"query_id"|"qid"|"question_id": ..., "doc_id"|"chunk_id"|
"docid"|"corpus_id": ..., "grade"|"relevance": ...}``.

A file whose first character is ``[`` is read as a JSON array of the same objects. Blank lines
are skipped. Integer ids are accepted and converted to strings (``7`` -> ``"7"``). A context's
text must not be empty or blank, and its score must be a finite number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from judge_eval.data._io import (
    PathLike,
    as_dict,
    as_grade,
    as_id,
    as_reference,
    as_score,
    as_text,
    atomic_write,
    dump_json_line,
    iter_json_records,
    not_in_corpus,
    type_name,
)
from judge_eval.data.models import Chunk, Qrels, Question, Run, content_id
from judge_eval.errors import InputError

QUESTION_KEYS = ("id", "question", "reference", "labels", "metadata", "contexts")
CHUNK_KEYS = ("id", "text", "score", "metadata")
QRELS_QID_KEYS = ("query_id", "qid", "question_id")
QRELS_DOC_KEYS = ("doc_id", "chunk_id", "docid", "corpus_id")
QRELS_GRADE_KEYS = ("grade", "relevance")


# --- parsing pieces (also used by the RAGAS and table readers) ----------------------------


def parse_chunk(
    value: Any,
    *,
    path: PathLike,
    line: int,
    field: str,
    corpus: Mapping[str, str] | None = None,
) -> Chunk:
    """One context: a string (the chunk text; id = :func:`content_id` of it) or an object
    ``{"id"?, "text"?, "score"?, "metadata"?}`` with at least one of id/text (id defaults to the
    content id of the text). Other keys of the object are kept in ``metadata``. If the chunk has
    no text and a ``corpus`` is given, the text is taken from it (a missing id is an error)."""
    if isinstance(value, str):
        return Chunk.from_text(as_text(value, path=path, line=line, field=field))
    if not isinstance(value, dict):
        raise InputError(
            f"a context must be a string or an object, got {type_name(value)}",
            path=path, line=line, field=field,
        )
    text = value.get("text")
    if text is not None:  # null: no text (given by id only)
        text = as_text(text, path=path, line=line, field=f"{field}.text")
    raw_id = value.get("id")
    if raw_id is not None:
        cid = as_id(raw_id, path=path, line=line, field=f"{field}.id")
    elif text is not None:
        cid = content_id(text)
    else:
        raise InputError("a context object needs an 'id' or a 'text'", path=path, line=line, field=field)
    score = value.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise InputError(
            f"score must be a number, got {type_name(score)}", path=path, line=line, field=f"{field}.score"
        )
    score = as_score(score, path=path, line=line, field=f"{field}.score")  # finite
    metadata = dict(as_dict(value.get("metadata"), path=path, line=line, field=f"{field}.metadata"))
    for key, extra in value.items():
        if key not in CHUNK_KEYS:
            metadata.setdefault(key, extra)
    if text is None and corpus is not None:
        if cid not in corpus:
            raise InputError(not_in_corpus("chunk id", cid, corpus), path=path, line=line, field=f"{field}.id")
        text = corpus[cid]
    return Chunk(id=cid, text=text, score=score, metadata=metadata)


def parse_contexts(
    value: Any,
    *,
    path: PathLike,
    line: int,
    field: str = "contexts",
    corpus: Mapping[str, str] | None = None,
) -> list[Chunk]:
    """A ranking: a list of contexts (rank 1 first) whose ids are unique."""
    if not isinstance(value, list):
        raise InputError(
            f"'{field}' must be a list, got {type_name(value)}", path=path, line=line, field=field
        )
    chunks: list[Chunk] = []
    first_rank: dict[str, int] = {}
    for i, item in enumerate(value):
        chunk = parse_chunk(item, path=path, line=line, field=f"{field}.{i}", corpus=corpus)
        if chunk.id in first_rank:
            raise InputError(
                f"chunk id {chunk.id!r} appears twice in one ranking (first at {field}."
                f"{first_rank[chunk.id]})",
                path=path, line=line, field=f"{field}.{i}.id",
            )
        first_rank[chunk.id] = i
        chunks.append(chunk)
    return chunks


def parse_labels(value: Any, *, path: PathLike, line: int, field: str = "labels") -> dict[str, int]:
    """``{chunk_id: grade}`` with integer grades >= 0 (and non-empty chunk ids)."""
    labels = as_dict(value, path=path, line=line, field=field)
    return {
        as_id(cid, path=path, line=line, field=f"{field}.{cid}"):
            as_grade(g, path=path, line=line, field=f"{field}.{cid}")
        for cid, g in labels.items()
    }


def require(obj: Mapping[str, Any], key: str, *, path: PathLike, line: int) -> Any:
    """``obj[key]``, or an InputError saying the field is missing."""
    if key not in obj:
        raise InputError(f"missing field '{key}'", path=path, line=line, field=key)
    return obj[key]


def question_id(obj: Mapping[str, Any], seen: Mapping[str, int], *, path: PathLike, line: int) -> str:
    """The record's ``id`` as a question id; an error if it is missing, not an id, or already
    used on an earlier line (``seen``: id -> line)."""
    qid = as_id(require(obj, "id", path=path, line=line), path=path, line=line, field="id")
    if qid in seen:
        raise duplicate_error("question id", qid, seen[qid], path=path, line=line, field="id")
    return qid


def first_key(obj: Mapping[str, Any], keys: Iterable[str], *, path: PathLike, line: int) -> tuple[str, Any]:
    """The first of ``keys`` present in ``obj`` with its value, or a 'missing field' error."""
    keys = tuple(keys)
    for key in keys:
        if key in obj:
            return key, obj[key]
    raise InputError(
        f"missing field '{keys[0]}' (also accepted: {', '.join(keys[1:])})",
        path=path, line=line, field=keys[0],
    )


def duplicate_error(what: str, key: str, first_line: int, *, path: PathLike, line: int, field: str) -> InputError:
    return InputError(
        f"duplicate {what} {key!r} (first on line {first_line})", path=path, line=line, field=field
    )


# --- readers -------------------------------------------------------------------------------


def read_questions_jsonl(
    path: PathLike,
    run_name: str = "contexts",
    *,
    corpus: Mapping[str, str] | None = None,
) -> tuple[dict[str, Question], Run | None]:
    """Read a native questions file. Returns the questions (in file order) and, if any line has
    ``contexts``, a run named ``run_name`` with those rankings (else ``None``).

    ``id`` (string or integer) and ``question`` (string) are required; ``reference`` (string or
    null), ``labels`` (``{chunk_id: grade}``) and ``metadata`` (object) are optional. Other keys
    are kept in the question's ``metadata``. A question id may appear on one line only.
    """
    questions: dict[str, Question] = {}
    first_seen: dict[str, int] = {}
    rankings: dict[str, list[Chunk]] = {}
    origins: dict[str, int] = {}
    for line, obj in iter_json_records(path):
        qid = question_id(obj, first_seen, path=path, line=line)
        first_seen[qid] = line
        text = require(obj, "question", path=path, line=line)
        if not isinstance(text, str):
            raise InputError(
                f"'question' must be a string, got {type_name(text)}", path=path, line=line, field="question"
            )
        metadata = dict(as_dict(obj.get("metadata"), path=path, line=line, field="metadata"))
        for key, extra in obj.items():
            if key not in QUESTION_KEYS:
                metadata.setdefault(key, extra)
        questions[qid] = Question(
            id=qid,
            question=text,
            reference=as_reference(obj.get("reference"), path=path, line=line),
            labels=parse_labels(obj.get("labels"), path=path, line=line),
            metadata=metadata,
        )
        if "contexts" in obj:
            rankings[qid] = parse_contexts(obj["contexts"], path=path, line=line, corpus=corpus)
            origins[qid] = line
    run = None
    if rankings:
        run = Run(name=run_name, rankings=rankings)
        for qid, line in origins.items():
            run.set_origin(qid, str(path), line)
    return questions, run


def read_run_jsonl(path: PathLike, name: str, *, corpus: Mapping[str, str] | None = None) -> Run:
    """Read a native run file: one ``{"id": qid, "contexts": [...]}`` per line. Other keys are
    ignored. A question id may appear on one line only. With a ``corpus``, chunks given by id
    only get their text from it."""
    rankings: dict[str, list[Chunk]] = {}
    origins: dict[str, int] = {}
    for line, obj in iter_json_records(path):
        qid = question_id(obj, origins, path=path, line=line)
        contexts = require(obj, "contexts", path=path, line=line)
        rankings[qid] = parse_contexts(contexts, path=path, line=line, corpus=corpus)
        origins[qid] = line
    run = Run(name=name, rankings=rankings)
    for qid, line in origins.items():
        run.set_origin(qid, str(path), line)
    return run


def read_qrels_jsonl(path: PathLike) -> Qrels:
    """Read qrels as JSON Lines (see the module docstring for the accepted key names). A
    (question, chunk) pair given twice must have the same grade."""
    grades: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    for line, obj in iter_json_records(path):
        qkey, qval = first_key(obj, QRELS_QID_KEYS, path=path, line=line)
        dkey, dval = first_key(obj, QRELS_DOC_KEYS, path=path, line=line)
        gkey, gval = first_key(obj, QRELS_GRADE_KEYS, path=path, line=line)
        qid = as_id(qval, path=path, line=line, field=qkey)
        cid = as_id(dval, path=path, line=line, field=dkey)
        grade = as_grade(gval, path=path, line=line, field=gkey)
        by_chunk = grades.setdefault(qid, {})
        if cid in by_chunk and by_chunk[cid] != grade:
            raise InputError(
                f"question {qid!r}, chunk {cid!r}: grade {grade} disagrees with grade "
                f"{by_chunk[cid]} on line {first[(qid, cid)]}",
                path=path, line=line, field=gkey,
            )
        first.setdefault((qid, cid), line)
        by_chunk[cid] = grade
    return Qrels(grades=grades)


# --- writers -------------------------------------------------------------------------------


def chunk_to_json(chunk: Chunk) -> dict[str, Any]:
    """The object form of a chunk, omitting empty fields (always with its id)."""
    out: dict[str, Any] = {"id": chunk.id}
    if chunk.text is not None:
        out["text"] = chunk.text
    if chunk.score is not None:
        out["score"] = chunk.score
    if chunk.metadata:
        out["metadata"] = chunk.metadata
    return out


def write_questions_jsonl(questions: Mapping[str, Question], path: PathLike, run: Run | None = None) -> None:
    """Write questions as native JSONL (in the mapping's order). With ``run``, each question's
    ranking is written as its ``contexts``; every question the run ranks must be in
    ``questions``. The file appears only when complete."""
    if run is not None:
        unknown = [qid for qid in run.rankings if qid not in questions]
        if unknown:
            raise InputError(
                f"run {run.name!r} ranks questions that are not being written: {unknown[:5]}",
                path=path, field="contexts",
            )
    with atomic_write(path) as fh:
        for q in questions.values():
            obj: dict[str, Any] = {"id": q.id, "question": q.question}
            if q.reference is not None:
                obj["reference"] = q.reference
            if q.labels:
                obj["labels"] = q.labels
            if q.metadata:
                obj["metadata"] = q.metadata
            if run is not None and q.id in run.rankings:
                obj["contexts"] = [chunk_to_json(c) for c in run.rankings[q.id]]
            fh.write(dump_json_line(obj))


def write_run_jsonl(run: Run, path: PathLike) -> None:
    """Write a run as native JSONL, one ``{"id", "contexts"}`` line per question."""
    with atomic_write(path) as fh:
        for qid, chunks in run.rankings.items():
            fh.write(dump_json_line({"id": qid, "contexts": [chunk_to_json(c) for c in chunks]}))


def write_qrels_jsonl(qrels: Qrels, path: PathLike) -> None:
    """Write qrels as JSONL, one ``{"query_id", "doc_id", "grade"}`` line per label."""
    with atomic_write(path) as fh:
        for qid, cid, grade in qrels:
            fh.write(dump_json_line({"query_id": qid, "doc_id": cid, "grade": grade}))
