"""``judge-eval report DIR``: write ``report.md`` and ``report.html`` for a results folder or an
audit folder (one holding ``audit.json``, docs/audit.md).

- :func:`read_source`: a results folder as a :class:`~judge_eval.report.source.ReportSource`;
- :func:`read_audit`: ``audit.json``, checked for the schema;
- :func:`audit_history`: the trend's rows, from the audit folders beside this one;
- :func:`write_report`: both files, for either kind of folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from judge_eval.atomic import check_file, write_text
from judge_eval.errors import ConfigError, InputError
from judge_eval.report.folder import iter_jsonl, read_results_dir, read_verdicts
from judge_eval.report.html import audit_html, report_html
from judge_eval.report.markdown import audit_markdown, report_markdown
from judge_eval.report.source import STATEMENT_COLUMNS, VERDICT_COLUMNS, ReportSource

__all__ = ["AUDIT_SCHEMA", "Written", "audit_history", "read_audit", "read_source", "write_report"]

AUDIT_SCHEMA = "judge-eval/audit@1"


def read_source(folder: str | os.PathLike[str]) -> ReportSource:
    """A results folder on disk. ``summary.json`` and ``per_question.csv`` are required (an
    :class:`InputError` naming the file otherwise); ``verdicts.jsonl``, ``statements.jsonl`` and
    ``missing.csv`` are read when present (an older folder without them gets a report without
    the sections that need them)."""
    path = Path(folder)
    per_question, info = read_results_dir(path)
    summary = info.pop("summary", None)
    if not isinstance(summary, list) or not all(isinstance(r, dict) for r in summary):
        raise InputError("expected a list of records under 'summary'", path=path / "summary.json", field="summary")
    for i, rec in enumerate(summary):
        for key in ("run", "measure", "mean"):
            if key not in rec:
                raise InputError(f"summary record {i + 1} has no {key!r}", path=path / "summary.json", field=key)
    src = ReportSource(summary=summary, info=info, per_question=per_question.astype({"run": str, "question_id": str}),
                       name=path.resolve().name)
    if (path / "verdicts.jsonl").is_file():
        verdicts = read_verdicts(path)
        src.verdicts = verdicts if len(verdicts) else pd.DataFrame(columns=VERDICT_COLUMNS)
    if (path / "statements.jsonl").is_file():
        rows = [row for _, row in iter_jsonl(path / "statements.jsonl")]
        src.statements = pd.DataFrame(rows) if rows else pd.DataFrame(columns=STATEMENT_COLUMNS)
    if (path / "missing.csv").is_file():
        try:
            src.missing = pd.read_csv(path / "missing.csv", dtype=str)
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read it as CSV ({exc})", path=path / "missing.csv") from None
    for frame in (src.verdicts, src.statements):
        if "question_id" in frame.columns:
            frame["question_id"] = frame["question_id"].astype(str)
    return src


def read_audit(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """``audit.json`` of an audit folder; an :class:`InputError` naming the file when it is not
    valid JSON or not a ``judge-eval/audit@1`` document."""
    path = Path(folder) / "audit.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read it ({exc.strerror})", path=path) from None
    if not isinstance(doc, dict) or doc.get("schema") != AUDIT_SCHEMA:
        raise InputError(f"not a judge-eval audit (expected \"schema\": \"{AUDIT_SCHEMA}\")", path=path, field="schema")
    if not isinstance(doc.get("checks", []), list):
        raise InputError("expected a list", path=path, field="checks")
    return doc


def audit_history(folder: str | os.PathLike[str], doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The trend of an audit: each checked (run, metric)'s value in every earlier audit folder
    beside this one (same parent, ``audit.json`` with the same questions fingerprint and judge,
    started no later), oldest first, then this audit. Rows: ``{audit, run, metric, value,
    ci_low, ci_high}``; ``audit`` is the start time."""
    here = Path(folder).resolve()
    wanted = {(c.get("run"), c.get("metric")) for c in doc.get("checks") or []}
    def key_of(d: dict[str, Any]) -> tuple[Any, Any]:
        return (d.get("dataset") or {}).get("questions_fingerprint"), (d.get("judge") or {}).get("identity")

    key = key_of(doc)
    docs = []
    for sibling in sorted(here.parent.iterdir()):
        if not (sibling / "audit.json").is_file():
            continue
        try:
            other = doc if sibling == here else read_audit(sibling)
        except InputError:
            continue
        if key_of(other) != key:
            continue
        if str(other.get("started") or "") <= str(doc.get("started") or ""):
            docs.append(other)
    docs.sort(key=lambda d: (str(d.get("started") or ""), str(d.get("id") or "")))
    rows = []
    for d in docs:
        for c in d.get("checks") or []:
            if (c.get("run"), c.get("metric")) in wanted and c.get("value") is not None:
                rows.append({"audit": str(d.get("id") or d.get("started")), "run": c.get("run"),
                             "metric": c.get("metric"), "value": c.get("value"), "ci_low": c.get("ci_low"),
                             "ci_high": c.get("ci_high")})
    return rows


def _baseline_folder(folder: Path, doc: dict[str, Any]) -> Path | None:
    base = doc.get("baseline") if isinstance(doc.get("baseline"), dict) else None
    ids = (base or {}).get("ids") or []
    if len(ids) != 1:  # a median baseline is not one folder's chunks
        return None
    candidate = folder.resolve().parent / str(ids[0])
    return candidate if (candidate / "summary.json").is_file() else None


@dataclass(frozen=True)
class Written:
    """What :func:`write_report` wrote: the two files, and whether the folder was an audit."""

    markdown: Path
    html: Path
    audit: bool


def write_report(folder: str | os.PathLike[str], *, baseline: str | os.PathLike[str] | None = None,
                 out: str | os.PathLike[str] | None = None, metric: str | None = None, limit: int = 15,
                 with_plots: bool = True) -> Written:
    """Write ``report.md`` and ``report.html`` for ``folder`` (a results folder, or an audit
    folder holding ``audit.json``) into ``out`` (default: ``folder`` itself; each file replaced
    atomically). ``baseline``: an earlier results folder, for the questions that moved most (an
    audit uses its own baseline). ``metric``: the measure whose per-question changes are shown.
    Bad folders are :class:`InputError`, bad options :class:`ConfigError` (exit 2), found before
    anything is written."""
    path = Path(folder)
    if not path.is_dir():
        raise InputError("not a folder (expected a results folder or an audit folder)", path=path)
    target = Path(out) if out is not None else path
    md_path, html_path = target / "report.md", target / "report.html"
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{target} is not a folder", option="--out")
    check_file(md_path), check_file(html_path)
    is_audit = (path / "audit.json").is_file()
    if is_audit:
        if baseline is not None:
            raise ConfigError("an audit compares with its own baseline (audit.json); leave --baseline out",
                              option="--baseline")
        doc = read_audit(path)
        current = read_source(path) if (path / "summary.json").is_file() else None
        base_dir = _baseline_folder(path, doc)
        base = read_source(base_dir) if base_dir is not None else None
        history = audit_history(path, doc)
        md_text = audit_markdown(doc, current=current, limit=limit)
        html_text = audit_html(doc, current=current, baseline=base, history=history, limit=limit,
                               with_plots=with_plots)
    else:
        src = read_source(path)
        base = read_source(baseline) if baseline is not None else None
        if metric is not None:
            shared = [m for m in src.per_question.columns if base is None or m in base.per_question.columns]
            if metric not in shared or metric in ("run", "question_id"):
                where = "the folder and its baseline have" if base is not None else "the folder has"
                known = ", ".join(m for m in shared if m not in ("run", "question_id"))
                raise ConfigError(f"unknown metric {metric!r}; {where}: {known}", option="--metric")
        md_text = report_markdown(src, baseline=base, metric=metric, limit=limit)
        html_text = report_html(src, baseline=base, metric=metric, limit=limit, with_plots=with_plots)
    target.mkdir(parents=True, exist_ok=True)
    write_text(md_path, md_text)
    write_text(html_path, html_text)
    return Written(markdown=md_path, html=html_path, audit=is_audit)
