"""Loading with format detection, and :func:`load_dataset`, which puts the pieces together and
cross-checks them. The rules are documented for users in ``docs/formats.md``.

Format detection (``format=None``), by extension first:

* ``.trec``, ``.run``, ``.txt``, ``.qrels`` -> TREC (for questions: ``.txt`` is a queries file);
* ``.jsonl``, ``.json``, ``.ndjson`` -> by the keys of the first record: ``user_input`` means
  RAGAS; for questions, ``question`` means native and ``text``/``query`` (without ``question``)
  means a queries file; otherwise native;
* ``.csv``, ``.parquet``, ``.pq`` -> table; ``.tsv`` -> table, except for questions without a
  column mapping, where it is a queries file (``id<TAB>text``);
* any other extension: the first non-blank line decides (``{`` or ``[`` -> JSON; 6
  whitespace-separated columns -> a TREC run; 4 -> TREC qrels); else an error naming ``format``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

from judge_eval.data._io import PathLike, first_line, iter_json_records
from judge_eval.data.columns import QrelsColumns, RunColumns, read_trec_qrels_columns, read_trec_run_columns
from judge_eval.data.jsonl import read_qrels_jsonl, read_questions_jsonl, read_run_jsonl
from judge_eval.data.models import Dataset, Qrels, Question, Run
from judge_eval.data.ragas import read_ragas
from judge_eval.data.tabular import read_qrels_table, read_questions_table, read_run_table
from judge_eval.data.trec import read_corpus, read_queries, read_trec_qrels, read_trec_run
from judge_eval.errors import DataWarning, InputError

TREC_EXT = {".trec", ".run", ".txt", ".qrels"}
JSON_EXT = {".jsonl", ".json", ".ndjson"}
TABLE_EXT = {".csv", ".tsv", ".parquet", ".pq"}
FORMATS = {
    "run": ("trec", "jsonl", "ragas", "table"),
    "qrels": ("trec", "jsonl", "table"),
    "questions": ("jsonl", "ragas", "table", "queries"),
}
ALIASES = {"json": "jsonl", "native": "jsonl", "csv": "table", "tsv": "table", "parquet": "table"}




def _first_record_keys(path: PathLike) -> set[str] | None:
    try:
        with closing(iter_json_records(path)) as records:
            _line, obj = next(records)
            return set(obj)
    except (InputError, StopIteration):
        return None  # the reader will report the problem with its line


def detect_format(path: PathLike, kind: str, *, columns: Mapping[str, str] | None = None) -> str:
    """The format of ``path`` read as ``kind`` (``"run"``, ``"qrels"`` or ``"questions"``):
    one of ``trec``, ``jsonl``, ``ragas``, ``table``, ``queries`` (see the module docstring)."""
    ext = Path(path).suffix.lower()
    if ext in TABLE_EXT:
        if kind == "questions" and ext == ".tsv" and columns is None:
            return "queries"
        return "table"
    if ext in TREC_EXT:
        if kind == "questions":
            return "queries"
        return "trec"
    head = first_line(path)
    if head is None:
        raise InputError("file is empty", path=path)
    if ext in JSON_EXT or head[:1] in ("{", "["):
        keys = _first_record_keys(path) or set()
        if kind == "qrels":
            return "jsonl"
        if "user_input" in keys:
            return "ragas"
        if kind == "questions" and "question" not in keys and keys & {"text", "query"}:
            return "queries"
        return "jsonl"
    n_columns = len(head.split())
    if (kind, n_columns) in (("run", 6), ("qrels", 4)):
        return "trec"
    raise InputError(
        f"cannot tell the format of this {kind} file from its extension {ext or '(none)'} or "
        f"its first line; use .trec/.jsonl/.json/.csv/.tsv/.parquet or pass format= one of "
        f"{', '.join(FORMATS[kind])}",
        path=path, field="format",
    )


def _format(path: PathLike, kind: str, fmt: str | None, columns: Mapping[str, str] | None = None) -> str:
    if fmt is None:
        return detect_format(path, kind, columns=columns)
    name = ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS[kind]:
        raise InputError(
            f"unknown {kind} format {fmt!r}; use one of {', '.join(FORMATS[kind])}",
            path=path, field="format",
        )
    return name


def _corpus(corpus: PathLike | Mapping[str, str] | None) -> Mapping[str, str] | None:
    if corpus is None or isinstance(corpus, Mapping):
        return corpus
    return read_corpus(corpus)


def _question_field(fmt: str, columns: Mapping[str, str] | None) -> tuple[str, str]:
    """The field (and ``line``/``row``) that holds a question id in a run of format ``fmt``."""
    if fmt == "trec":
        return "qid", "line"
    if fmt == "table":
        return (columns or {}).get("question_id", "question_id"), "row"
    return "id", "line"


# --- public loaders ------------------------------------------------------------------------


def load_run(
    path: PathLike,
    name: str | None = None,
    *,
    format: str | None = None,
    corpus: PathLike | Mapping[str, str] | None = None,
    columns: Mapping[str, str] | None = None,
) -> Run:
    """Load one run. ``name`` defaults to the file name without its extension. ``corpus`` (a
    path or a ``{id: text}`` mapping) fills in the texts of chunks given by id only. ``columns``
    is the column mapping for tables."""
    return _load_run(path, name, format, _corpus(corpus), columns)[0]


def _load_run(
    path: PathLike, name: str | None, fmt: str | None, corpus: Mapping[str, str] | None,
    columns: Mapping[str, str] | None,
) -> tuple[Run, str]:
    fmt = _format(path, "run", fmt, columns)
    name = name or Path(path).stem
    if fmt == "trec":
        return read_trec_run(path, name, corpus=corpus), fmt
    if fmt == "ragas":
        return read_ragas(path, name)[1], fmt
    if fmt == "table":
        return read_run_table(path, name, columns, corpus=corpus), fmt
    return read_run_jsonl(path, name, corpus=corpus), fmt


def load_qrels(path: PathLike, *, format: str | None = None, columns: Mapping[str, str] | None = None) -> Qrels:
    """Load human labels: TREC qrels, JSONL or a table."""
    fmt = _format(path, "qrels", format, columns)
    if fmt == "trec":
        return read_trec_qrels(path)
    if fmt == "table":
        return read_qrels_table(path, columns)
    return read_qrels_jsonl(path)


def load_run_columns(
    path: PathLike, name: str | None = None, *, format: str | None = None, columns: Mapping[str, str] | None = None
) -> RunColumns:
    """Load one run as columns (:class:`~judge_eval.data.columns.RunColumns`: ids and scores,
    no texts), for labelled metrics: the same run as ``RunColumns.from_run(load_run(...))``,
    with the same errors; a TREC run is read without an object per line."""
    fmt = _format(path, "run", format, columns)
    if fmt == "trec":
        return read_trec_run_columns(path, name or Path(path).stem)
    return RunColumns.from_run(_load_run(path, name, fmt, None, columns)[0])


def load_qrels_columns(
    path: PathLike, *, format: str | None = None, columns: Mapping[str, str] | None = None
) -> QrelsColumns:
    """Load human labels as columns (:class:`~judge_eval.data.columns.QrelsColumns`): the same
    labels as ``QrelsColumns.from_qrels(load_qrels(...))``, with the same errors; TREC qrels
    are read without an object per line."""
    fmt = _format(path, "qrels", format, columns)
    if fmt == "trec":
        return read_trec_qrels_columns(path)
    return QrelsColumns.from_qrels(load_qrels(path, format=fmt, columns=columns))


def _load_data(
    path: PathLike, fmt: str | None, columns: Mapping[str, str] | None, run_name: str,
    corpus: Mapping[str, str] | None,
) -> tuple[dict[str, Question], Run | None]:
    fmt = _format(path, "questions", fmt, columns)
    if fmt == "ragas":
        return read_ragas(path, run_name)
    if fmt == "table":
        return read_questions_table(path, columns, run_name, corpus=corpus)
    if fmt == "queries":
        return {qid: Question(id=qid, question=text) for qid, text in read_queries(path).items()}, None
    return read_questions_jsonl(path, run_name, corpus=corpus)


def load_questions(
    path: PathLike, *, format: str | None = None, columns: Mapping[str, str] | None = None
) -> dict[str, Question]:
    """Load questions (in file order) from native JSONL, RAGAS records, a table or a queries
    file (the last gives questions without references). Inline contexts are not returned; use
    :func:`load_dataset` to get them as a run."""
    return _load_data(path, format, columns, "contexts", None)[0]


def load_corpus(path: PathLike) -> dict[str, str]:
    """Load a corpus: chunk id -> text (JSONL ``id``/``_id`` + ``text``/``contents``, or TSV)."""
    return read_corpus(path)


def load_queries(path: PathLike) -> dict[str, str]:
    """Load a queries file: question id -> text (TSV ``qid<TAB>text`` or JSONL)."""
    return read_queries(path)


def load_dataset(
    data: PathLike | None = None,
    runs: Mapping[str, PathLike] | None = None,
    qrels: PathLike | None = None,
    corpus: PathLike | Mapping[str, str] | None = None,
    queries: PathLike | None = None,
    *,
    data_format: str | None = None,
    columns: Mapping[str, str] | None = None,
    data_run_name: str = "contexts",
    strict: bool = True,
) -> Dataset:
    """Load and cross-check a dataset.

    * Questions come from ``data`` (which may also carry a run, named ``data_run_name``) or,
      without it, from ``queries``; giving both is an error. With neither, the questions are
      the question ids the runs rank (first run first), with empty texts: labelled metrics
      still work, judged ones need texts.
    * ``runs`` maps run names to files; the names must not repeat the inline run's name.
    * A run ranking a question id that is not among the questions is an error naming the run
      file and the line (or row) of that ranking (``strict=True``, the default); with
      ``strict=False`` those rankings are dropped with one :class:`DataWarning` per run (scoring
      a slice of a test set against full runs). Not every question needs a ranking.
    * Qrels for question ids that are not among the questions are kept but unused; they raise
      a :class:`DataWarning` (qrels files often cover more questions than a test set).
    * A grade given both inline (``labels``) and in the qrels must agree.
    * ``columns`` is the column mapping used for every table input.
    """
    corpus_map = _corpus(corpus)
    questions: dict[str, Question] | None = None
    all_runs: dict[str, Run] = {}
    id_fields: dict[str, tuple[str, str]] = {}
    if data is not None:
        if queries is not None:
            raise InputError(
                "give the question texts either in the data file or in a queries file, not both",
                path=queries, field="queries",
            )
        questions, inline = _load_data(data, data_format, columns, data_run_name, corpus_map)
        if inline is not None:
            all_runs[inline.name] = inline
            fmt = _format(data, "questions", data_format, columns)
            id_fields[inline.name] = _question_field(fmt, columns)
    elif queries is not None:
        questions = {qid: Question(id=qid, question=t) for qid, t in read_queries(queries).items()}
    for name, run_path in (runs or {}).items():
        if name in all_runs:
            raise InputError(f"two runs are named {name!r}", path=run_path, field="name")
        run, fmt = _load_run(run_path, name, None, corpus_map, columns)
        all_runs[name] = run
        id_fields[name] = _question_field(fmt, columns)
    if questions is None:
        if not all_runs:
            raise InputError("nothing to evaluate: give a data file, a queries file or run files")
        questions = {}
        for run in all_runs.values():
            for qid in run.rankings:
                questions.setdefault(qid, Question(id=qid, question=""))
    source = data if data is not None else queries
    for name, run in all_runs.items():
        extra = [qid for qid in run.rankings if qid not in questions]
        if not extra:
            continue
        if strict:
            where = run.origin(extra[0]) or (None, None)
            field, kind = id_fields[name]
            raise InputError(
                f"run {name!r} ranks question {extra[0]!r}, which is not in {source}"
                + (f" (nor are {len(extra) - 1} other questions it ranks)" if len(extra) > 1 else ""),
                path=where[0], line=where[1], field=field, kind=kind,
            )
        warnings.warn(
            f"run {name!r} ranks {len(extra)} question(s) that are not in {source}; they are "
            f"left out ({len(run.rankings) - len(extra)} of its {len(run.rankings)} rankings are used)",
            DataWarning,
            stacklevel=2,
        )
        for qid in extra:
            del run.rankings[qid]
    labels = load_qrels(qrels, columns=columns) if qrels is not None else None
    if labels is not None:
        unknown = [qid for qid in labels.grades if qid not in questions]
        if unknown:
            shown = ", ".join(repr(q) for q in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            warnings.warn(
                f"{qrels}: labels for {len(unknown)} question(s) not in the dataset are not "
                f"used: {shown}",
                DataWarning,
                stacklevel=2,
            )
    dataset = Dataset(questions=questions, runs=all_runs, qrels=labels)
    try:
        dataset.labels()
    except ValueError as exc:
        raise InputError(str(exc), path=qrels, field="grade") from None
    return dataset
