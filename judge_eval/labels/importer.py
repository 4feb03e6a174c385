"""Reading reviewed label proposals back: our JSONL (also what the review page downloads), our
CSV, a Label Studio JSON export and an Argilla 2.x records export: nested, as
``records.to_json`` writes it (``Record.to_dict()``), or flat, as ``records.to_list(flatten=True)``
gives it (which keeps each answer's status: drafts and discarded answers are not labels).

Every reader returns :class:`Review` rows: the item, the judge's proposed grade, the reviewer's
grade (``None``: nobody reviewed it), who and when. Validation is strict and complete before
anything is written: an unknown item id (one that is not the id of its question and chunk), a
grade outside 0-3, a missing column or field, two rows for one item, two reviewers who disagree,
or an export of another Label Studio project is an :class:`~judge_eval.errors.InputError` naming
the file, the row (line, CSV data row, task or record number, 1-based) and the field; the
message also counts the other rows with a problem.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_eval.errors import InputError
from judge_eval.labels.propose import item_id

__all__ = ["Review", "detect_format", "read_reviews"]

PathLike = str | os.PathLike
GRADES = range(0, 4)


@dataclass(frozen=True)
class Review:
    """One reviewed (or not yet reviewed) item. ``row`` is where it is in the file."""

    item_id: str
    question_id: str
    chunk_id: str
    proposed_grade: int | None
    grade: int | None
    reviewer: str = ""
    reviewed_at: str = ""
    note: str = ""
    row: int = 0
    kind: str = "row"


class _Problems:
    """Collects every problem of a file, then raises one InputError: the first, plus a count."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.found: list[InputError] = []

    def add(self, message: str, row: int | None, field: str | None) -> None:
        self.found.append(InputError(message, path=self.path, line=row, field=field, kind=self.kind))

    def raise_any(self) -> None:
        if not self.found:
            return
        first = self.found[0]
        if len(self.found) > 1:
            more = "; ".join(f"{e.kind} {e.line} field '{e.field}'" if e.field else f"{e.kind} {e.line}"
                             for e in self.found[1:6])
            extra = f" and {len(self.found) - 6} more" if len(self.found) > 6 else ""
            first = InputError(f"{first.message} (also: {more}{extra}); nothing was written", path=first.path,
                               line=first.line, field=first.field, kind=first.kind)
        else:
            first = InputError(f"{first.message}; nothing was written", path=first.path, line=first.line,
                               field=first.field, kind=first.kind)
        raise first


def _grade(value: Any, problems: _Problems, row: int, field: str, *, optional: bool) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if optional:
            return None
        problems.add("no grade", row, field)
        return None
    grade: int | None = None
    if isinstance(value, bool):
        grade = None
    elif isinstance(value, int):
        grade = value
    elif isinstance(value, float) and value.is_integer():
        grade = int(value)
    elif isinstance(value, str):
        text = value.strip()
        grade = int(text) if text.isdigit() else (int(float(text)) if _integral(text) else None)
    if grade is None or grade not in GRADES:
        problems.add(f"grade must be an integer 0-3, got {value!r}", row, field)
        return None
    return grade


def _integral(text: str) -> bool:
    try:
        return float(text).is_integer()
    except ValueError:
        return False


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _review(fields: dict[str, Any], problems: _Problems, row: int, names: dict[str, str]) -> Review | None:
    """A Review from a flat record; ``names`` maps our field to how the file calls it."""
    ok = True
    ids = {}
    for key in ("item_id", "question_id", "chunk_id"):
        value = fields.get(key)
        if value is None or not str(value).strip():
            problems.add("missing", row, names[key])
            ok = False
        ids[key] = _text(value).strip()
    if ok and item_id(ids["question_id"], ids["chunk_id"]) != ids["item_id"]:
        problems.add(f"unknown item id {ids['item_id']!r}: not the id of question {ids['question_id']!r} "
                     f"chunk {ids['chunk_id']!r} (was the row edited, or does it come from another file?)",
                     row, names["item_id"])
        ok = False
    proposed = _grade(fields.get("proposed_grade"), problems, row, names["proposed_grade"], optional=True)
    n_before = len(problems.found)
    grade = _grade(fields.get("grade"), problems, row, names["grade"], optional=True)
    if not ok or len(problems.found) > n_before:
        return None
    return Review(ids["item_id"], ids["question_id"], ids["chunk_id"], proposed, grade,
                  _text(fields.get("reviewer")), _text(fields.get("reviewed_at")), _text(fields.get("note")), row,
                  problems.kind)


_OURS = {"item_id": "id", "question_id": "question_id", "chunk_id": "chunk_id", "proposed_grade": "proposed_grade",
         "grade": "grade"}


def _flat(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "item_id": obj.get("id")}


# ----------------------------------------------------------------------------- our formats


def _read_jsonl(path: Path) -> list[Review]:
    problems = _Problems(path, "line")
    out = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                problems.add("not valid UTF-8", lineno, None)
                continue
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as exc:  # a JSONDecodeError, or e.g. an integer too long to convert
                detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                problems.add(f"not valid JSON ({detail})", lineno, None)
                continue
            if not isinstance(obj, dict):
                problems.add("expected a JSON object", lineno, None)
                continue
            for key in ("id", "question_id", "chunk_id", "proposed_grade", "grade"):
                if key not in obj:
                    problems.add("missing field", lineno, key)
            if any(e.line == lineno for e in problems.found):
                continue
            r = _review(_flat(obj), problems, lineno, _OURS)
            if r:
                out.append(r)
    problems.raise_any()
    return out


def _read_csv(path: Path) -> list[Review]:
    problems = _Problems(path, "row")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})", path=path) from None
    reader = csv.DictReader(text.splitlines(keepends=True), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    header = reader.fieldnames or []
    missing = [c for c in ("id", "question_id", "chunk_id", "proposed_grade", "grade") if c not in header]
    if missing:
        raise InputError(f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"(the header has: {', '.join(header) or 'nothing'}); nothing was written",
                         path=path, line=None, field=missing[0])
    out = []
    for rowno, row in enumerate(reader, start=1):
        if None in row:
            problems.add("more cells than the header has columns", rowno, None)
            continue
        r = _review(_flat(row), problems, rowno, _OURS)
        if r:
            out.append(r)
    problems.raise_any()
    return out


# ----------------------------------------------------------------------------- Label Studio


def _ls_grade(results: Any) -> tuple[Any, str | None]:
    """The grade an annotation's results give (the ``grade`` choices result), and the note."""
    grade, note = None, None
    for res in results or []:
        if not isinstance(res, dict):
            continue
        value = res.get("value") or {}
        if res.get("from_name") == "grade" and res.get("type") == "choices":
            choices = value.get("choices") or []
            grade = choices[0] if len(choices) == 1 else choices
        elif res.get("from_name") == "note" and res.get("type") == "textarea":
            note = " ".join(str(t) for t in value.get("text") or [])
    return grade, note


def _ls_user(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("email") or value.get("username") or value.get("id") or "")
    return "" if value is None else f"user {value}"


def _read_label_studio(path: Path, tasks: list[Any]) -> list[Review]:
    problems = _Problems(path, "task")
    out = []
    for n, task in enumerate(tasks, start=1):
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            problems.add("not a Label Studio task (no 'data' object)", n, "data")
            continue
        data = task["data"]
        absent = [k for k in ("item_id", "question_id", "chunk_id") if k not in data]
        if absent:
            problems.add("this task was not made by `judge-eval labels propose --format label-studio` "
                         "(an export of another project?)", n, f"data.{absent[0]}")
            continue
        grades: list[tuple[Any, str, str, str]] = []
        for a_no, ann in enumerate(task.get("annotations") or []):
            if not isinstance(ann, dict) or ann.get("was_cancelled"):
                continue
            grade, note = _ls_grade(ann.get("result"))
            if grade is None:
                problems.add("an annotation has no 'grade' choice (an export of another project?)", n,
                             f"annotations.{a_no}.result")
                continue
            grades.append((grade, _ls_user(ann.get("completed_by")),
                           _text(ann.get("updated_at") or ann.get("created_at")), note or ""))
        fields = {"item_id": data.get("item_id"), "question_id": data.get("question_id"),
                  "chunk_id": data.get("chunk_id"), "proposed_grade": data.get("proposed_grade")}
        picked = _one_answer(grades, problems, n, "annotations")
        if picked is not None:
            fields.update(grade=picked[0], reviewer=picked[1], reviewed_at=picked[2], note=picked[3])
        names = {"item_id": "data.item_id", "question_id": "data.question_id", "chunk_id": "data.chunk_id",
                 "proposed_grade": "data.proposed_grade", "grade": "annotations.result.grade"}
        r = _review(fields, problems, n, names)
        if r:
            out.append(r)
    problems.raise_any()
    return out


def _one_answer(answers: list[tuple[Any, ...]], problems: _Problems, row: int, field: str) -> tuple[Any, ...] | None:
    """The reviewers' answer for one item: none, one, or several that agree on the grade (the
    last one is kept, with every reviewer named); reviewers who disagree are an error."""
    if not answers:
        return None
    if len({str(a[0]) for a in answers}) > 1:
        shown = ", ".join(f"{a[1] or 'someone'}: {a[0]}" for a in answers)
        problems.add(f"the reviewers disagree ({shown}); settle it in the tool and export again", row, field)
        return None
    last = answers[-1]
    reviewers = ", ".join(dict.fromkeys(a[1] for a in answers if a[1]))
    return (last[0], reviewers, last[2], "; ".join(a[3] for a in answers if a[3]))


# ----------------------------------------------------------------------------- Argilla


def _read_argilla(path: Path, records: list[Any]) -> list[Review]:
    problems = _Problems(path, "record")
    out = []
    for n, rec in enumerate(records, start=1):
        if not isinstance(rec, dict) or not isinstance(rec.get("fields"), dict):
            problems.add("not an Argilla record (no 'fields' object)", n, "fields")
            continue
        meta = rec.get("metadata") or {}
        absent = [k for k in ("question_id", "chunk_id") if k not in meta]
        if absent:
            problems.add("this record was not made by `judge-eval labels propose --format argilla` "
                         "(an export of another dataset?)", n, f"metadata.{absent[0]}")
            continue
        responses = rec.get("responses") or {}
        answers = []
        for resp in (responses.get("grade") or []) if isinstance(responses, dict) else []:
            if not isinstance(resp, dict) or resp.get("status", "submitted") != "submitted":
                continue  # drafts and discarded answers are not labels
            answers.append((resp.get("value"), _text(resp.get("user_id")), "", ""))
        notes = [str(r.get("value")) for r in (responses.get("note") or []) if isinstance(r, dict)
                 and r.get("status", "submitted") == "submitted" and r.get("value")
                 ] if isinstance(responses, dict) else []
        suggestion = ((rec.get("suggestions") or {}).get("grade") or {})
        fields = {"item_id": rec.get("id"), "question_id": meta.get("question_id"), "chunk_id": meta.get("chunk_id"),
                  "proposed_grade": suggestion.get("value", meta.get("proposed_grade"))}
        picked = _one_answer(answers, problems, n, "responses.grade")
        if picked is not None:
            fields.update(grade=picked[0], reviewer=picked[1], note="; ".join(notes))
        names = {"item_id": "id", "question_id": "metadata.question_id", "chunk_id": "metadata.chunk_id",
                 "proposed_grade": "suggestions.grade.value", "grade": "responses.grade"}
        r = _review(fields, problems, n, names)
        if r:
            out.append(r)
    problems.raise_any()
    return out


# ----------------------------------------------------------------------------- detection


def detect_format(path: PathLike) -> str:
    """``csv``, ``jsonl``, ``label-studio`` or ``argilla``, from the file's name and first
    characters (a JSON array is an export: Label Studio tasks have ``data``, Argilla records
    ``fields``)."""
    p = Path(path)
    if p.suffix.lower() in (".csv", ".tsv"):
        return "csv"
    with p.open("rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        return "json-array"
    if head.startswith(b"{"):
        return "jsonl"
    raise InputError("not a reviewed proposals file: expected our JSONL or CSV, a Label Studio JSON export "
                     "or an Argilla records export", path=p)


def _unflatten_argilla(rec: Any) -> Any:
    """A record of Argilla's ``records.to_list(flatten=True)`` (fields and metadata at the top,
    ``grade.responses``, ``grade.responses.users``, ``grade.responses.status``,
    ``grade.suggestion``) in the nested shape of ``Record.to_dict()``."""
    if not isinstance(rec, dict):
        return rec
    values = rec.get("grade.responses") or []
    users = rec.get("grade.responses.users") or [None] * len(values)
    status = rec.get("grade.responses.status") or [None] * len(values)
    responses = [{"value": v, "user_id": u, **({"status": s} if s is not None else {})}
                 for v, u, s in zip(values, users, status, strict=True)]  # lengths: _check_flat_argilla
    meta = {k: rec[k] for k in ("question_id", "chunk_id", "proposed_grade") if k in rec}
    suggestion = {"value": rec["grade.suggestion"]} if rec.get("grade.suggestion") is not None else {}
    return {"id": rec.get("id"), "fields": {}, "metadata": meta, "suggestions": {"grade": suggestion},
            "responses": {"grade": responses}}


def _check_flat_argilla(path: Path, records: list[Any]) -> None:
    """Each flattened record's ``grade.responses.users`` and ``grade.responses.status`` (when
    given) have one entry per response: a shorter list cannot say whose answer, or whether it was
    submitted, the others are."""
    problems = _Problems(path, "record")
    for n, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            continue
        values = rec.get("grade.responses") or []
        if not isinstance(values, list):
            problems.add("must be a list of the grades given", n, "grade.responses")
            continue
        for name in ("grade.responses.users", "grade.responses.status"):
            given = rec.get(name)
            if given and (not isinstance(given, list) or len(given) != len(values)):
                count = len(given) if isinstance(given, list) else "not a list of"
                problems.add(f"{count} entries for {len(values)} responses: each response needs its own "
                             "(export the records again, or fix the file by hand)", n, name)
    problems.raise_any()


def _read_array(path: Path) -> list[Review]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", path=path) from None
    first = next((x for x in data if isinstance(x, dict)), {}) if isinstance(data, list) else {}
    if "data" in first:
        return _read_label_studio(path, data)
    if "fields" in first:
        return _read_argilla(path, data)
    if any(k.endswith((".suggestion", ".responses")) for k in first):
        _check_flat_argilla(path, data)
        return _read_argilla(path, [_unflatten_argilla(r) for r in data])
    if not data:
        raise InputError("the export holds no task or record; nothing was written", path=path)
    raise InputError("a JSON array, but neither a Label Studio export (tasks with 'data') nor an Argilla "
                     "export (records with 'fields')", path=path, line=1, field="data", kind="item")


READERS: dict[str, Callable[[Path], list[Review]]] = {"csv": _read_csv, "jsonl": _read_jsonl, "json-array": _read_array}


def read_reviews(path: PathLike) -> list[Review]:
    """Every item of a reviewed file, validated (see the module docstring); the same item twice
    is an error."""
    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", path=p)
    reviews = READERS[detect_format(p)](p)
    _no_duplicates(p, reviews)
    if not reviews:
        raise InputError("no item in the file; nothing was written", path=p)
    return reviews


def _no_duplicates(path: Path, reviews: Iterable[Review]) -> None:
    seen: dict[str, int] = {}
    for r in reviews:
        if r.item_id in seen:
            raise InputError(f"item {r.item_id} (question {r.question_id!r}, chunk {r.chunk_id!r}) appears twice "
                             f"(first at {r.kind} {seen[r.item_id]}); nothing was written", path=path, line=r.row,
                             field="id", kind=r.kind)
        seen[r.item_id] = r.row
