"""RAGAS-style evaluation records (ragas >= 0.2 ``SingleTurnSample`` field names).

One record per question, as JSON Lines or a JSON array::

    {"user_input": "...", "retrieved_contexts": ["text", ...], "reference": "...",
     "retrieved_context_ids": ["c1", ...], "id": "q1"}

* ``user_input`` (string) and ``retrieved_contexts`` (list of strings) are required.
* ``reference`` (string or null) is optional.
* ``retrieved_context_ids`` (optional) gives the chunk ids, same length as the contexts; without
  it a chunk's id is the :func:`~judge_eval.data.models.content_id` of its text, and a text
  retrieved twice for one question keeps both ranks (the repeat's id gets ``#2``; the judge sees
  the text once), with one warning per file.
* The question id is ``id`` or ``question_id`` when present, else the content id of
  ``user_input`` (``"h:..."``), which is stable when records are reordered or added; two records
  with the same ``user_input`` and no id are then an error (give them ids).
* Any other key (``response``, ``reference_contexts``...) is kept in the question's metadata.
"""

from __future__ import annotations

import warnings

from judge_eval.data._io import PathLike, as_id, as_reference, as_text, iter_json_records, type_name
from judge_eval.data.jsonl import duplicate_error, require
from judge_eval.data.models import Chunk, Question, Run, content_id, number_repeated_texts
from judge_eval.errors import DataWarning, InputError

RAGAS_KEYS = ("user_input", "retrieved_contexts", "reference", "retrieved_context_ids", "id", "question_id")


def read_ragas(path: PathLike, name: str = "contexts") -> tuple[dict[str, Question], Run]:
    """Read RAGAS-style records: the questions (file order) and the run named ``name``."""
    questions: dict[str, Question] = {}
    rankings: dict[str, list[Chunk]] = {}
    first_seen: dict[str, int] = {}
    repeated: list[int] = []
    n_repeats = 0
    for line, obj in iter_json_records(path):
        user_input = require(obj, "user_input", path=path, line=line)
        if not isinstance(user_input, str):
            raise InputError(
                f"'user_input' must be a string, got {type_name(user_input)}",
                path=path, line=line, field="user_input",
            )
        id_key = "id" if "id" in obj else "question_id" if "question_id" in obj else None
        if id_key is not None:
            qid = as_id(obj[id_key], path=path, line=line, field=id_key)
        else:
            qid = content_id(user_input)
        if qid in first_seen:
            if id_key is not None:
                raise duplicate_error("question id", qid, first_seen[qid], path=path, line=line, field=id_key)
            raise InputError(
                f"the same user_input as line {first_seen[qid]} and no 'id': give the records ids",
                path=path, line=line, field="user_input",
            )
        first_seen[qid] = line
        chunks, repeats = _chunks(obj, path=path, line=line)
        if repeats:
            repeated.append(line)
            n_repeats += repeats
        metadata = {k: v for k, v in obj.items() if k not in RAGAS_KEYS}
        questions[qid] = Question(
            id=qid,
            question=user_input,
            reference=as_reference(obj.get("reference"), path=path, line=line),
            metadata=metadata,
        )
        rankings[qid] = chunks
    if n_repeats:
        warn_repeated_texts(path, n_repeats, repeated)
    run = Run(name=name, rankings=rankings)
    for qid, line in first_seen.items():
        run.set_origin(qid, str(path), line)
    return questions, run


def warn_repeated_texts(path: PathLike, n: int, lines: list[int]) -> None:
    """One warning per file for texts retrieved twice for one question (kept, judged once)."""
    shown = ", ".join(str(x) for x in lines[:5]) + (" ..." if len(lines) > 5 else "")
    warnings.warn(f"{path}: {n} retrieved context(s) repeat a text already retrieved for the same question "
                  f"(lines {shown}); each keeps its rank and is judged once", DataWarning, stacklevel=4)


def _chunks(obj: dict, *, path: PathLike, line: int) -> tuple[list[Chunk], int]:
    texts = require(obj, "retrieved_contexts", path=path, line=line)
    if not isinstance(texts, list):
        raise InputError(
            f"'retrieved_contexts' must be a list of strings, got {type_name(texts)}",
            path=path, line=line, field="retrieved_contexts",
        )
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputError(
                f"a retrieved context must be a string, got {type_name(t)}",
                path=path, line=line, field=f"retrieved_contexts.{i}",
            )
        as_text(t, path=path, line=line, field=f"retrieved_contexts.{i}")
    ids_value = obj.get("retrieved_context_ids")
    if ids_value is None:
        ids = [content_id(t) for t in texts]
        field = "retrieved_contexts"
    else:
        field = "retrieved_context_ids"
        if not isinstance(ids_value, list) or len(ids_value) != len(texts):
            got = f"{len(ids_value)} ids" if isinstance(ids_value, list) else type_name(ids_value)
            raise InputError(
                f"'retrieved_context_ids' must be a list as long as 'retrieved_contexts' "
                f"({len(texts)}), got {got}",
                path=path, line=line, field=field,
            )
        ids = [as_id(v, path=path, line=line, field=f"{field}.{i}") for i, v in enumerate(ids_value)]
    chunks = [Chunk(id=cid, text=t) for cid, t in zip(ids, texts, strict=True)]
    if ids_value is None:  # ids made from the texts: a repeated text is a repeat, not an error
        return number_repeated_texts(chunks, [True] * len(chunks))
    first: dict[str, int] = {}
    for i, cid in enumerate(ids):
        if cid in first:
            raise InputError(
                f"chunk id {cid!r} appears twice in one ranking (first at {field}.{first[cid]})",
                path=path, line=line, field=f"{field}.{i}",
            )
        first[cid] = i
    return chunks, 0
