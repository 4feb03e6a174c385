"""CSV, TSV and Parquet tables through pandas, in long format: one row per (question, chunk).

A column mapping says which column holds what: keys are our names, values the table's column
names, e.g. ``{"question_id": "qid", "chunk_id": "doc"}``. Keys not given map to a column of the
same name, if the table has one:

=============== =====================================================================
key             meaning
=============== =====================================================================
``question_id`` question id (required everywhere)
``chunk_id``    chunk id (required for runs and qrels)
``rank``        rank, an integer >= 1 (optional; without it the row order is the ranking;
                ties keep row order)
``score``       retrieval score, a finite number (optional)
``text``        chunk text (optional; an empty cell is no text, a blank one an error)
``grade``       human grade, an integer >= 0 (required for qrels)
``question``    question text (required for questions)
``reference``   reference answer (optional)
=============== =====================================================================

A column named in the mapping must exist. Rows are numbered from 1 (the first data row) and
errors say ``row N`` and the column. CSV/TSV cells are read as text; an empty cell is missing.
Parquet is read through pyarrow as plain values: a null is missing, a NaN is a NaN (an error as a
score, rank or grade).
A BEIR qrels TSV (header ``query-id corpus-id score``) is recognised without a mapping.
"""

from __future__ import annotations

import csv
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from judge_eval.data._io import (
    PathLike,
    as_grade,
    as_id,
    as_rank,
    as_score,
    as_text,
    check_file,
    is_missing,
    iter_lines,
    not_in_corpus,
)
from judge_eval.data.models import Chunk, Qrels, Question, Run
from judge_eval.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

KEYS = ("question_id", "chunk_id", "rank", "score", "text", "grade", "question", "reference")
TABLE_EXTENSIONS = {".csv": ",", ".tsv": "\t", ".parquet": None, ".pq": None}
BEIR_QRELS = {"question_id": "query-id", "chunk_id": "corpus-id", "grade": "score"}

Row = dict[str, Any]


def read_table(path: PathLike) -> pd.DataFrame:
    """Read a CSV/TSV (all cells as text, UTF-8, BOM stripped) or Parquet file."""
    import pandas as pd

    p = check_file(path)
    ext = p.suffix.lower()
    if ext not in TABLE_EXTENSIONS:
        raise InputError(
            f"not a table file (expected one of {', '.join(TABLE_EXTENSIONS)})", path=p, field="format"
        )
    sep = TABLE_EXTENSIONS[ext]
    if sep is None:
        df = _read_parquet(p)
    else:
        try:
            with warnings.catch_warnings():
                # index_col=False: when every data row has one field more than the header (a
                # trailing separator), pandas would otherwise make the first column the index
                # and shift every column by one, silently. It warns instead; we stop.
                warnings.simplefilter("error", pd.errors.ParserWarning)
                df = pd.read_csv(
                    p, sep=sep, dtype=str, keep_default_na=False, encoding="utf-8-sig", index_col=False,
                )
        except pd.errors.ParserWarning:
            raise _too_many_fields(p, sep) from None
        except UnicodeDecodeError:
            for _ in iter_lines(p):  # raises an InputError naming the line
                pass
            raise InputError("invalid UTF-8", path=p) from None
        except pd.errors.EmptyDataError:
            raise InputError("file is empty", path=p) from None
        except pd.errors.ParserError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise InputError(
                f"malformed {ext[1:].upper()}: {exc}".strip(), path=p, line=int(m.group(1)) if m else None
            ) from None
    if len(df) == 0:
        raise InputError("file is empty (no data rows)", path=p)
    return df


def _too_many_fields(p: Path, sep: str) -> InputError:
    """The error for a table whose data rows have more fields than its header, naming the
    first such row (rows counted as pandas counts them: blank lines skipped)."""
    name = "tab" if sep == "\t" else repr(sep)
    hint = f"a trailing {name} at the end of the rows, or a {name} inside an unquoted cell?"
    try:
        with p.open(encoding="utf-8-sig", newline="") as fh:
            rows = (row for row in csv.reader(fh, delimiter=sep) if row)
            header = next(rows, [])
            for n, row in enumerate(rows, start=1):
                if len(row) > len(header):
                    return InputError(
                        f"{len(row)} fields but the header has {len(header)}: {hint}",
                        path=p, line=n, kind="row",
                    )
    except (csv.Error, UnicodeDecodeError):
        pass
    return InputError(f"rows with more fields than the header: {hint}", path=p)


def _read_parquet(p: Path) -> pd.DataFrame:
    """A Parquet file as a table of plain Python values (object columns): a null is ``None``
    and a NaN stays a NaN, so that a missing score is told apart from an invalid one
    (``pd.read_parquet`` turns both into NaN, and nullable integers into ``pd.NA``)."""
    import pandas as pd

    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            "reading Parquet needs pyarrow: pip install 'judge-eval[parquet]'", path=p, field="format"
        ) from None
    try:
        with pq.ParquetFile(p) as pf:
            table = pf.read()
        names = [str(n) for n in table.column_names]
        values = [col.to_pylist() for col in table.columns]
    except Exception as exc:  # pyarrow raises many types; all mean "not readable"
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read Parquet: {reason}", path=p) from None
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise InputError(f"column {dup!r} appears twice in the table", path=p, field=dup)
    return pd.DataFrame({n: pd.Series(v, dtype=object) for n, v in zip(names, values, strict=True)}, columns=names)


def _resolve(
    df: pd.DataFrame,
    path: Path,
    columns: Mapping[str, str] | None,
    required: Sequence[str],
    optional: Sequence[str],
) -> dict[str, str]:
    """Map our keys to the table's columns: required keys and explicitly mapped keys must
    exist; optional keys are used when a column of that name exists."""
    mapping = dict(columns or {})
    header_line = None if path.suffix.lower() in (".parquet", ".pq") else 1
    for key in mapping:
        if key not in KEYS:
            raise InputError(
                f"unknown column-mapping key {key!r}; known keys: {', '.join(KEYS)}",
                path=path, field=key,
            )
    resolved: dict[str, str] = {}
    have = [str(c) for c in df.columns]
    for key in (*required, *optional):
        col = mapping.get(key, key)
        if col in have:
            resolved[key] = col
        elif key in required or key in mapping:
            raise InputError(
                f"column {col!r} (for {key}) not found; the table has: {', '.join(have)}",
                path=path, line=header_line, field=col,
            )
    return resolved


def _rows(df: pd.DataFrame, resolved: Mapping[str, str]) -> Iterator[tuple[int, Row]]:
    """``(row_number, {key: cell})`` for each data row, row 1 first."""
    keys = list(resolved)
    cols = [df[resolved[k]].tolist() for k in keys]
    for n, values in enumerate(zip(*cols, strict=True), start=1):
        yield n, dict(zip(keys, values, strict=True))


class _RowAt(TypedDict):
    """Where a cell is, as the ``path``/``line``/``kind`` keywords of the value checks and InputError."""

    path: Path
    line: int
    kind: str


def _at_row(path: Path, n: int) -> _RowAt:
    return {"path": path, "line": n, "kind": "row"}


class _RunBuilder:
    """Collects (question, chunk) rows into rankings; checks duplicates and fills texts."""

    def __init__(self, path: Path, resolved: Mapping[str, str], corpus: Mapping[str, str] | None) -> None:
        self.path, self.resolved, self.corpus = path, resolved, corpus
        self.entries: dict[str, list[tuple[int, Chunk]]] = {}
        self.seen: dict[str, dict[str, int]] = {}
        self.origins: dict[str, int] = {}

    def add(self, n: int, row: Row, qid: str) -> None:
        col = self.resolved
        kw = _at_row(self.path, n)
        cid = as_id(row["chunk_id"], field=col["chunk_id"], **kw)
        rank = as_rank(row["rank"], field=col["rank"], **kw) if "rank" in row else n
        score = as_score(row["score"], field=col["score"], **kw) if "score" in row else None
        text = self.text(row.get("text"), kw)
        first = self.seen.setdefault(qid, {})
        if cid in first:
            raise InputError(
                f"chunk id {cid!r} appears twice for question {qid!r} (first in row {first[cid]})",
                field=col["chunk_id"], **kw,
            )
        first[cid] = n
        if text is None and self.corpus is not None:
            if cid not in self.corpus:
                raise InputError(not_in_corpus("chunk id", cid, self.corpus), field=col["chunk_id"], **kw)
            text = self.corpus[cid]
        self.origins.setdefault(qid, n)
        self.entries.setdefault(qid, []).append((rank, Chunk(id=cid, text=text, score=score)))

    def text(self, value: Any, kw: _RowAt) -> str | None:
        """The chunk text of a cell: an empty cell (or a null) is no text (``None``); a cell of
        whitespace only is an error (an empty text cannot be judged)."""
        if value is None or value == "":
            return None
        return as_text(value if isinstance(value, str) else str(value), field=self.resolved["text"], **kw)

    def build(self, name: str) -> Run:
        rankings = {}
        for qid, items in self.entries.items():
            items.sort(key=lambda item: item[0])  # stable: ties keep row order
            rankings[qid] = [c for _r, c in items]
        run = Run(name=name, rankings=rankings)
        for qid, n in self.origins.items():
            run.set_origin(qid, str(self.path), n)
        return run


def read_run_table(
    path: PathLike,
    name: str | None = None,
    columns: Mapping[str, str] | None = None,
    *,
    corpus: Mapping[str, str] | None = None,
) -> Run:
    """Read a run from a table: ``question_id`` and ``chunk_id`` required; ``rank``, ``score``,
    ``text`` optional. ``name`` defaults to the file name without its extension. With a
    ``corpus``, chunks without a text get it from there."""
    df = read_table(path)
    p = Path(path)
    resolved = _resolve(df, p, columns, ("question_id", "chunk_id"), ("rank", "score", "text"))
    builder = _RunBuilder(p, resolved, corpus)
    for n, row in _rows(df, resolved):
        qid = as_id(row["question_id"], path=p, line=n, field=resolved["question_id"], kind="row")
        builder.add(n, row, qid)
    return builder.build(name or p.stem)


def read_qrels_table(path: PathLike, columns: Mapping[str, str] | None = None) -> Qrels:
    """Read qrels from a table: ``question_id``, ``chunk_id`` and ``grade`` (integer >= 0). A
    (question, chunk) pair given twice must have the same grade."""
    df = read_table(path)
    p = Path(path)
    if columns is None and set(BEIR_QRELS.values()) <= {str(c) for c in df.columns}:
        columns = BEIR_QRELS
    resolved = _resolve(df, p, columns, ("question_id", "chunk_id", "grade"), ())
    grades: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    for n, row in _rows(df, resolved):
        kw = _at_row(p, n)
        qid = as_id(row["question_id"], field=resolved["question_id"], **kw)
        cid = as_id(row["chunk_id"], field=resolved["chunk_id"], **kw)
        grade = as_grade(row["grade"], field=resolved["grade"], **kw)
        by_chunk = grades.setdefault(qid, {})
        if cid in by_chunk and by_chunk[cid] != grade:
            raise InputError(
                f"question {qid!r}, chunk {cid!r}: grade {grade} disagrees with grade "
                f"{by_chunk[cid]} in row {first[(qid, cid)]}",
                field=resolved["grade"], **kw,
            )
        first.setdefault((qid, cid), n)
        by_chunk[cid] = grade
    return Qrels(grades=grades)


def read_questions_table(
    path: PathLike,
    columns: Mapping[str, str] | None = None,
    run_name: str = "contexts",
    *,
    corpus: Mapping[str, str] | None = None,
) -> tuple[dict[str, Question], Run | None]:
    """Read questions from a table: ``question_id`` and ``question`` required, ``reference``
    optional. A question may span several rows (one per chunk); its text and reference must be
    the same on each. If the table also has ``chunk_id``, the rows form a run named ``run_name``
    (as in :func:`read_run_table`), and a ``grade`` cell, when not empty, is an inline label."""
    df = read_table(path)
    p = Path(path)
    resolved = _resolve(
        df, p, columns, ("question_id", "question"), ("reference", "chunk_id", "rank", "score", "text", "grade")
    )
    questions: dict[str, Question] = {}
    first_row: dict[str, int] = {}
    builder = _RunBuilder(p, resolved, corpus) if "chunk_id" in resolved else None
    for n, row in _rows(df, resolved):
        kw = _at_row(p, n)
        qid = as_id(row["question_id"], field=resolved["question_id"], **kw)
        text = "" if is_missing(row["question"]) else str(row["question"])
        reference = None if is_missing(row.get("reference")) else str(row["reference"])
        if qid not in questions:
            questions[qid] = Question(id=qid, question=text, reference=reference)
            first_row[qid] = n
        else:
            q = questions[qid]
            for key, old, new in (("question", q.question, text), ("reference", q.reference, reference)):
                if old != new:
                    raise InputError(
                        f"question {qid!r}: {key} differs from row {first_row[qid]}",
                        field=resolved[key], **kw,
                    )
        if builder is not None:
            builder.add(n, row, qid)
            if not is_missing(row.get("grade")):
                grade = as_grade(row["grade"], field=resolved["grade"], **kw)
                questions[qid].labels[as_id(row["chunk_id"], field=resolved["chunk_id"], **kw)] = grade
    return questions, builder.build(run_name) if builder is not None else None
