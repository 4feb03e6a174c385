"""The results folder (DESIGN section 6).

- ``summary.json``: metrics with CIs per run and k, judge identity, prompt versions, dataset
  fingerprint, settings, calls, cache hits, tokens, cost, errors;
- ``per_question.csv``: one row per (run, question), one column per measure (empty = missing);
- ``missing.csv``: why each missing value is missing;
- ``verdicts.jsonl``: one line per (question, chunk) judged: supported statements with their
  evidence, grade, reason, rejected claims, or the error;
- ``statements.jsonl``: the statements each reference was decomposed into;
- ``report.md`` and ``report.html``: the report for people (:mod:`judge_eval.report.html`,
  :mod:`judge_eval.report.markdown`; ``judge-eval report DIR`` rewrites them).

The folder is built in a temporary sibling and moved into place at the end, so a failure never
leaves a half-written folder; a folder that holds anything but these files is never replaced
(:mod:`judge_eval.atomic`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from judge_eval.atomic import check_folder, write_folder
from judge_eval.errors import InputError
from judge_eval.report.tables import records

if TYPE_CHECKING:
    from judge_eval.results import Results


def json_ready(value: Any) -> Any:
    """``value`` with NaN as None and numpy scalars as Python numbers, recursively."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return json_ready(value.item())
    return value


def _jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(json_ready(row), ensure_ascii=False) + "\n")


def report_markdown(results: Results) -> str:
    """``report.md`` of an evaluation (:mod:`judge_eval.report.markdown`)."""
    from judge_eval.report.markdown import report_markdown as render
    from judge_eval.report.source import source_from_results

    return render(source_from_results(results))


def report_html(results: Results) -> str:
    """``report.html`` of an evaluation (:mod:`judge_eval.report.html`)."""
    from judge_eval.report.html import report_html as render
    from judge_eval.report.source import source_from_results

    return render(source_from_results(results))


#: the files of a results folder; a folder holding only these is one of ours (and may be replaced)
RESULT_FILES = ("summary.json", "per_question.csv", "missing.csv", "verdicts.jsonl", "statements.jsonl",
                "report.md", "report.html")


def check_results_dir(out_dir: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Check, before any judge call is paid for, that :func:`write_results` may write
    ``out_dir`` (see :mod:`judge_eval.atomic`); raises ConfigError (exit 2) if not."""
    return check_folder(out_dir, RESULT_FILES, force=force)


def write_results(results: Results, out_dir: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write every file of the results folder to ``out_dir``.

    The folder is built in a temporary sibling and moved into place when complete. An earlier
    results folder is replaced atomically; a folder holding anything else is refused (or, with
    ``force``, the result files are written into it and its other files are kept)."""

    def fill(tmp: Path) -> None:
        summary = {"summary": records(results.summary), **results.info}
        (tmp / "summary.json").write_text(json.dumps(json_ready(summary), indent=2, ensure_ascii=False) + "\n", "utf-8")
        results.per_question.to_csv(tmp / "per_question.csv", index=False)
        results.missing.to_csv(tmp / "missing.csv", index=False)
        _jsonl(tmp / "verdicts.jsonl", results.verdicts.to_dict(orient="records"))
        _jsonl(tmp / "statements.jsonl", results.statements.to_dict(orient="records"))
        (tmp / "report.md").write_text(report_markdown(results), "utf-8")
        (tmp / "report.html").write_text(report_html(results), "utf-8")

    return write_folder(out_dir, RESULT_FILES, fill, force=force)


# ----------------------------------------------------------------------------- reading a folder back


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a results folder's JSONL file; an
    :class:`InputError` naming the file and line for a missing file, bad UTF-8, bad JSON or a
    line that is not an object."""
    if not path.is_file():
        raise InputError(f"missing {path.name}: not a judge-eval results folder", path=path.parent)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("not valid UTF-8", path=path, line=lineno) from None
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except ValueError as exc:
                raise InputError(f"not valid JSON ({exc})", path=path, line=lineno) from None
            if not isinstance(row, dict):
                raise InputError("expected a JSON object", path=path, line=lineno)
            yield lineno, row


def read_verdicts(folder: str | os.PathLike[str]) -> pd.DataFrame:
    """``verdicts.jsonl`` of a results folder as a frame (one row per judged question and chunk);
    every row must carry ``runs`` ({run: rank})."""
    path = Path(folder) / "verdicts.jsonl"
    rows = []
    for lineno, row in iter_jsonl(path):
        if not isinstance(row.get("runs"), dict):
            raise InputError("expected an object with 'runs'", path=path, line=lineno, field="runs")
        rows.append(row)
    return pd.DataFrame(rows)


def read_results_dir(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``per_question.csv`` and the metadata of ``summary.json`` of a results folder; an
    :class:`InputError` naming the file when either is missing or unreadable."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("not a results folder (expected a folder written by judge-eval score --out)", path=folder)
    summary_path, pq_path = folder / "summary.json", folder / "per_question.csv"
    for p in (summary_path, pq_path):
        if not p.is_file():
            raise InputError(f"missing {p.name}: not a judge-eval results folder", path=folder)
    try:
        info = json.loads(summary_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", path=summary_path) from None
    if not isinstance(info, dict) or not isinstance(info.get("judge"), dict):
        raise InputError("not a judge-eval summary (no 'judge' object)", path=summary_path, field="judge")
    try:
        frame = pd.read_csv(pq_path, dtype={"run": str, "question_id": str}, keep_default_na=True)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it as CSV ({exc})", path=pq_path) from None
    for col in ("run", "question_id"):
        if col not in frame.columns:
            raise InputError("missing column", path=pq_path, field=col)
    return frame, info
