"""Shared helpers for the readers and writers: opening and decoding files, JSON records, value
checks that raise :class:`~judge_eval.errors.InputError`, and atomic writes.

Reading rules common to every text format:

* files are UTF-8; a UTF-8 byte-order mark at the start is stripped;
* lines are read one at a time (a 100k-line run is never held twice in memory);
* blank (whitespace-only) lines are skipped; a file with no non-blank line is an error,
  ``file is empty``;
* a line with bytes that are not UTF-8 is an error naming that line (and, where the rest of the
  line can be parsed, the field holding the bad bytes).
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import os
import re
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, Union

from judge_eval._jsonpath import first_path
from judge_eval.atomic import open_atomic
from judge_eval.errors import InputError

PathLike = Union[str, "os.PathLike[str]"]

BOM = b"\xef\xbb\xbf"


def check_file(path: PathLike) -> Path:
    """``path`` as a :class:`Path`, or an InputError if it is missing or not a regular file."""
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", path=p)
    if not p.is_file():
        raise InputError("not a regular file", path=p)
    return p


def _surrogate_field(text: str, columns: Sequence[str] | None) -> str | None:
    """Where in a line decoded with ``surrogateescape`` the bad bytes sit: a column name for
    whitespace-separated formats, a dotted JSON path for JSON lines, else ``None``."""

    def bad(s: str) -> bool:
        return any("\udc80" <= ch <= "\udcff" for ch in s)

    if columns is not None:
        for i, token in enumerate(text.split()):
            if bad(token):
                return columns[i] if i < len(columns) else "columns"
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None

    return first_path(obj, bad)


def decode_line(raw: bytes, path: PathLike, lineno: int, columns: Sequence[str] | None = None) -> str:
    """Decode one line of UTF-8; bad bytes raise an InputError naming line, byte column and,
    when it can be found, the field."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.end]
        field = _surrogate_field(raw.decode("utf-8", "surrogateescape"), columns)
        raise InputError(
            f"invalid UTF-8 at byte {exc.start + 1} of the line ({bad!r}); save the file as UTF-8",
            path=path,
            line=lineno,
            field=field,
        ) from None


def iter_lines(path: PathLike, *, columns: Sequence[str] | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every non-blank line of a UTF-8 text file, lazily.

    The line ending is removed; a BOM at the start is stripped. ``columns`` names the
    whitespace-separated columns of the format, so an invalid-UTF-8 error can name the field.
    Raises ``file is empty`` if no non-blank line is found.
    """
    p = check_file(path)
    seen = False
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            text = decode_line(raw, p, lineno, columns).rstrip("\r\n")
            if not text.strip():
                continue
            seen = True
            yield lineno, text
    if not seen:
        raise InputError("file is empty", path=p)


def read_text(path: PathLike) -> str:
    """The whole file as text (BOM stripped); invalid UTF-8 names its line."""
    p = check_file(path)
    data = p.read_bytes()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end]
        raise InputError(
            f"invalid UTF-8 ({bad!r}); save the file as UTF-8", path=p, line=lineno
        ) from None


def first_line(path: PathLike) -> str | None:
    """The first non-blank line (decoded leniently, BOM stripped), or ``None``: for sniffing."""
    p = check_file(path)
    with p.open("rb") as fh:
        for i, raw in enumerate(fh):
            if i == 0 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            text = raw.decode("utf-8", "replace").strip()
            if text:
                return text
    return None


NESTED_TOO_DEEPLY = "invalid JSON: nested too deeply"

# A JSON escape of a UTF-16 surrogate (\ud800-\udfff): a pair is one character, a lone one is not
# text at all (it cannot be encoded as UTF-8, so it would fail later, far from the input).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _lone_surrogate(s: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in s)


def _check_surrogates(value: Any, text: str, path: PathLike, lineno: int) -> Any:
    """``value`` (parsed from ``text``), or an InputError naming the field that holds a lone
    surrogate escape such as ``"\\ud800"``."""
    if _SURROGATE_ESCAPE.search(text) is None:  # the fast path: no surrogate escape at all
        return value
    try:
        field = first_path(value, _lone_surrogate)
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, path=path, line=lineno) from None
    if field is None and not (isinstance(value, str) and _lone_surrogate(value)):
        return value  # only surrogate pairs: proper characters
    raise InputError(
        "invalid JSON: a lone UTF-16 surrogate escape (\\ud800-\\udfff) is not text",
        path=path, line=lineno,
        field=field.encode("utf-8", "backslashreplace").decode("utf-8") if field else None,
    )


def _loads(text: str, path: PathLike, lineno: int) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, path=path, line=lineno) from None
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        col = getattr(exc, "colno", None)
        where = f" (column {col})" if col is not None else ""
        raise InputError(f"invalid JSON: {msg}{where}", path=path, line=lineno) from None
    return _check_surrogates(value, text, path, lineno)


def iter_json_records(path: PathLike) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """Yield ``(line_number, object)`` for each record of a JSONL file or a JSON array file.

    A file whose first non-blank character is ``[`` is read as one JSON array (the line number of
    a record is the line where it starts); otherwise as JSON Lines, one object per line, blank
    lines skipped. A record that is not a JSON object is an error.
    """
    head = first_line(path)
    if head is None:
        raise InputError("file is empty", path=path)
    if head.startswith("["):
        yield from _iter_json_array(path)
        return
    for lineno, text in iter_lines(path):
        yield lineno, _as_object(_loads(text, path, lineno), path, lineno)


def _as_object(value: Any, path: PathLike, lineno: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(
            f"expected a JSON object, got {type_name(value)}", path=path, line=lineno
        )
    return value


def _iter_json_array(path: PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text(path)
    decoder = json.JSONDecoder()

    counted = [0, 1]  # position up to which newlines were counted, and the line there

    def line_of(pos: int) -> int:  # positions only grow, so counting is linear overall
        done, line = counted
        if pos < done:
            return text.count("\n", 0, pos) + 1
        counted[:] = [pos, line + text.count("\n", done, pos)]
        return counted[1]

    def skip_ws(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        return pos

    pos = skip_ws(0) + 1  # past "["
    pos = skip_ws(pos)
    if pos < len(text) and text[pos] == "]":
        if text[skip_ws(pos + 1) :]:
            raise InputError("invalid JSON: extra data after the array", path=path, line=line_of(pos))
        raise InputError("file is empty (an empty JSON array)", path=path)
    while True:
        start = pos
        try:
            value, pos = decoder.raw_decode(text, pos)
        except RecursionError:
            raise InputError(NESTED_TOO_DEEPLY, path=path, line=line_of(start)) from None
        except ValueError as exc:
            raise InputError(
                f"invalid JSON: {getattr(exc, 'msg', exc)} (column {getattr(exc, 'colno', '?')})",
                path=path,
                line=getattr(exc, "lineno", line_of(start)),
            ) from None
        _check_surrogates(value, text[start:pos], path, line_of(start))
        yield line_of(start), _as_object(value, path, line_of(start))
        pos = skip_ws(pos)
        if pos < len(text) and text[pos] == ",":
            pos = skip_ws(pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            if text[skip_ws(pos + 1) :]:
                raise InputError(
                    "invalid JSON: extra data after the array", path=path, line=line_of(pos)
                )
            return
        raise InputError(
            "invalid JSON: expected ',' or ']' in the array", path=path, line=line_of(pos)
        )


# --- value checks -------------------------------------------------------------------------


def type_name(value: Any) -> str:
    """A short English name of a JSON value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def is_missing(value: Any) -> bool:
    """``None`` (JSON null, a Parquet null) or an empty/whitespace string (an empty CSV cell).
    NaN is not a missing value: it is a number, and an invalid one wherever a number is read."""
    return value is None or (isinstance(value, str) and not value.strip())


def _integer(value: Any) -> int | None:
    """``value`` as an int if it is an integer (Python or numpy) or an integral float, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, decimal.Decimal):  # a Parquet decimal column
        return int(value) if value.is_finite() and value == value.to_integral_value() else None
    if isinstance(value, numbers.Real):
        f = float(value)
        return int(f) if f.is_integer() else None
    return None


def _shown(value: Any) -> str:
    """``value`` for a message: ``missing``, or its repr (cut short: it may be junk)."""
    if is_missing(value):
        return "missing"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def as_id(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> str:
    """An id: a non-empty string, or an integer (``7`` becomes ``"7"``; an integral float from a
    table, ``7.0``, too). Anything else (null, list, object, boolean, 1.5) is an error."""
    if isinstance(value, str):
        if not value.strip():
            raise InputError("id is empty", path=path, line=line, field=field, kind=kind)
        return value
    as_int = _integer(value)
    if as_int is not None:
        return str(as_int)
    got = "missing" if is_missing(value) else type_name(value)
    raise InputError(
        f"id must be a string or an integer, got {got}", path=path, line=line, field=field, kind=kind
    )


#: the largest grade: grades are held as 64-bit integers (labelled metrics over arrays)
MAX_GRADE = 2**63 - 1


def as_grade(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> int:
    """A relevance grade: an integer from 0 to :data:`MAX_GRADE`. Strings are parsed as integers
    (``"2"``; ``"1.5"`` and ``"x"`` are errors); a float is accepted only when integral (JSON
    ``2.0`` is 2)."""
    grade: int | None = None
    if isinstance(value, str):
        try:
            grade = int(value)
        except ValueError:
            grade = None
    else:
        grade = _integer(value)
    if grade is None:
        raise InputError(
            f"grade must be an integer >= 0, got {_shown(value)}",
            path=path, line=line, field=field, kind=kind,
        )
    if grade < 0:
        raise InputError(
            f"grade must be an integer >= 0, got {grade} (map negative grades to 0)",
            path=path, line=line, field=field, kind=kind,
        )
    if grade > MAX_GRADE:
        raise InputError(
            f"grade must be an integer from 0 to 2**63 - 1, got {_shown(value)}",
            path=path, line=line, field=field, kind=kind,
        )
    return grade


def as_score(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> float | None:
    """A retrieval score: a finite number, or missing (``None`` or an empty/whitespace string).
    Strings are parsed as floats. NaN and +/-infinity (``nan``, ``inf``, ``Infinity``, JSON
    ``NaN``, a number too large for a float) are errors: they cannot be ranked or averaged."""
    score: float | None = None
    if isinstance(value, str):  # the common case (text files) first: it is the fast path
        if not value.strip():
            return None
        try:
            score = float(value)
        except ValueError:
            pass
    elif value is None:
        return None
    elif isinstance(value, (numbers.Real, decimal.Decimal)) and not isinstance(value, bool):
        try:
            score = float(value)
        except OverflowError:  # an integer beyond the float range
            score = math.inf
    if score is None:
        raise InputError(
            f"score must be a number, got {_shown(value)}", path=path, line=line, field=field, kind=kind
        )
    if not math.isfinite(score):
        raise InputError(
            f"score must be a finite number, got {_shown(value)}",
            path=path, line=line, field=field, kind=kind,
        )
    return score


def as_rank(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> int:
    """A rank: an integer >= 1 (strings parsed; an integral float such as ``3.0`` accepted)."""
    rank: int | None = None
    if isinstance(value, str):  # the common case first: it is the fast path
        try:
            rank = int(value)
        except ValueError:
            rank = None
    else:
        rank = _integer(value)
    if rank is None:
        raise InputError(
            f"rank must be an integer >= 1, got {_shown(value)}", path=path, line=line, field=field, kind=kind
        )
    if rank < 1:
        raise InputError(
            f"rank must be an integer >= 1, got {rank}", path=path, line=line, field=field, kind=kind
        )
    return rank


def as_text(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> str:
    """A chunk text: a string with at least one non-whitespace character (an empty text cannot
    be judged)."""
    if not isinstance(value, str):
        raise InputError(
            f"a chunk text must be a string, got {type_name(value)}",
            path=path, line=line, field=field, kind=kind,
        )
    if not value.strip():
        raise InputError(
            "chunk text is empty (an empty text cannot be judged; give the chunk a text or leave it out)",
            path=path, line=line, field=field, kind=kind,
        )
    return value


def as_opt_str(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> str | None:
    """A string or ``None`` (JSON null); anything else is an error."""
    if value is None or isinstance(value, str):
        return value
    raise InputError(
        f"expected a string, got {type_name(value)}", path=path, line=line, field=field, kind=kind
    )


def as_reference(value: Any, *, path: PathLike, line: int | None, field: str = "reference") -> str | None:
    """A reference answer: a string or ``None``. A list of several acceptable answers (as MS MARCO
    and Natural Questions give) is refused with what to do: judge-eval scores one reference per
    question, because its statements are the denominator of context recall (taking the
    best-supported of several would give each run its own denominator, and joining them counts
    paraphrases twice)."""
    if isinstance(value, list):
        n = len(value)
        raise InputError(
            f"a list of {n} reference answers; give one string per question: the most complete answer "
            "(e.g. the first), or the answers joined into one text when each covers a different part "
            "(with jq: '.reference |= join(\" \")'); see docs/judged-metrics.md",
            path=path, line=line, field=field,
        )
    return as_opt_str(value, path=path, line=line, field=field)


def as_dict(value: Any, *, path: PathLike, line: int | None, field: str, kind: str = "line") -> dict[str, Any]:
    """An object (``None`` is an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(
            f"expected an object, got {type_name(value)}", path=path, line=line, field=field, kind=kind
        )
    return value


class Corpus(dict[str, str]):
    """A corpus read from a file: ``{chunk id: text}`` that remembers its ``path``, so that a
    chunk missing from it can be reported with both files."""

    def __init__(self, items: Any = (), *, path: PathLike | None = None) -> None:
        super().__init__(items)
        self.path = None if path is None else str(path)


def not_in_corpus(what: str, cid: str, corpus: Any) -> str:
    """The message for a chunk id that ``corpus`` lacks (naming the corpus file when known)."""
    where = getattr(corpus, "path", None)
    return f"{what} {cid!r} is not in the corpus" + (f" {where}" if where else "")


# --- writing ------------------------------------------------------------------------------


#: open a file for writing so that it appears only when complete (:func:`judge_eval.atomic.open_atomic`)
atomic_write = open_atomic


def dump_json_line(obj: Any) -> str:
    """One compact JSON line (non-ASCII kept as is), with the newline."""
    return json.dumps(obj, ensure_ascii=False) + "\n"
