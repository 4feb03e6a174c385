"""The audit history: one SQLite file, every audit written in one transaction.

Layout::

    meta(name TEXT PRIMARY KEY, value TEXT)            -- schema_version, application
    audits(id TEXT PRIMARY KEY, started, finished, verdict, exit_code, config_hash,
           dataset_fingerprint, questions_fingerprint, judge_identity, prompts (JSON),
           settings (JSON: the settings that change what a metric means), package_version,
           baseline (JSON list of audit ids), document (the audit.json text))
    run_metrics(audit_id, run, metric, value, ci_low, ci_high, n)        -- every measure
    question_values(audit_id, run, metric, question_id, value)          -- every measure
    canary_items(audit_id, question_id, chunk_id, human_grade, judge_grade, error)

Safety: WAL journal, ``busy_timeout``, and :meth:`History.record` writes an audit and all its
rows in one ``BEGIN IMMEDIATE`` transaction: a process killed in the middle, a full disk or an
error leaves the file as it was before (SQLite rolls the transaction back), and a second audit
writing at the same time waits for the first (up to ``timeout`` seconds). Readers never block
on a writer (WAL). A file that is not a judge-eval history, a corrupt one, or one still locked
after the timeout raises :class:`HistoryError` naming the file (exit 2); the file is never
replaced or rewritten to "repair" it.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from judge_eval.errors import ExitCode, JudgeEvalError
from judge_eval.sqlite_tx import write_transaction

__all__ = ["History", "HistoryError", "SCHEMA_VERSION"]

SCHEMA_VERSION = "1"
APPLICATION = "judge-eval audit history"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audits(
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT NOT NULL,
    verdict TEXT NOT NULL,
    exit_code INTEGER NOT NULL,
    config_hash TEXT NOT NULL,
    dataset_fingerprint TEXT NOT NULL,
    questions_fingerprint TEXT NOT NULL,
    judge_identity TEXT NOT NULL,
    prompts TEXT NOT NULL,
    settings TEXT NOT NULL,
    package_version TEXT NOT NULL,
    baseline TEXT NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_metrics(
    audit_id TEXT NOT NULL REFERENCES audits(id),
    run TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL, ci_low REAL, ci_high REAL,
    n INTEGER NOT NULL,
    PRIMARY KEY(audit_id, run, metric)
);
CREATE TABLE IF NOT EXISTS question_values(
    audit_id TEXT NOT NULL REFERENCES audits(id),
    run TEXT NOT NULL,
    metric TEXT NOT NULL,
    question_id TEXT NOT NULL,
    value REAL,
    PRIMARY KEY(audit_id, run, metric, question_id)
);
CREATE TABLE IF NOT EXISTS canary_items(
    audit_id TEXT NOT NULL REFERENCES audits(id),
    question_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    human_grade INTEGER NOT NULL,
    judge_grade INTEGER,
    error TEXT,
    PRIMARY KEY(audit_id, question_id, chunk_id)
);
"""


class HistoryError(JudgeEvalError):
    """The history file cannot be used (locked, not a history, corrupt, unwritable, disk full)."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, path: str | Path) -> None:
        self.path = str(path)
        self.message = message
        super().__init__(f"history {self.path}: {message}")


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


class History:
    """The audit history file at ``path`` (see the module docstring).

    ``create``: make the file (and its folder) when missing; otherwise a missing file is a
    :class:`HistoryError`. ``timeout``: seconds to wait for another writer's lock.
    """

    def __init__(self, path: str | Path, *, create: bool = False, timeout: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        self.create = create
        self.timeout = timeout

    # -- connection ------------------------------------------------------------------------

    def _error(self, exc: BaseException, doing: str) -> HistoryError:
        text = str(exc)
        low = text.lower()
        if "locked" in low or "busy" in low:
            msg = (f"locked by another process (another audit?) for more than {self.timeout:g} s while {doing}; "
                   "nothing was recorded and earlier audits are untouched. Run the audit again when it is free")
        elif "not a database" in low or "malformed" in low or "corrupt" in low:
            msg = (f"not a judge-eval history or corrupt ({text}) while {doing}; the file was left as it is. "
                   "Restore it from a backup or point history.path at a new file")
        elif "full" in low or "disk i/o" in low or "readonly" in low or "unable to open" in low:
            msg = (f"cannot write ({text}) while {doing}: is the disk full or the folder read-only? "
                   "Nothing was recorded and earlier audits are untouched")
        else:
            msg = f"{text} while {doing}"
        return HistoryError(msg, path=self.path)

    def _connect(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise HistoryError("is a folder; history.path must name a file", path=self.path)
        exists = self.path.exists()
        if not exists and not self.create:
            raise HistoryError("no such file (no audit has been recorded there yet)", path=self.path)
        try:
            if not exists:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc, "opening it") from None
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if not exists or self._needs_schema(db):
                with write_transaction(db):
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)
                    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
                    db.execute("INSERT OR IGNORE INTO meta VALUES ('application', ?)", (APPLICATION,))
                db.execute("PRAGMA journal_mode = WAL")
            self._check_schema(db)
        except HistoryError:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise self._error(exc, "opening it") from None
        return db

    def _needs_schema(self, db: sqlite3.Connection) -> bool:
        """An empty file (size 0, or a database without tables) gets the schema; anything else
        must already be a history."""
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return not tables and self.create

    def _check_schema(self, db: sqlite3.Connection) -> None:
        try:
            row = db.execute("SELECT value FROM meta WHERE name = 'application'").fetchone()
            version = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise HistoryError("is an SQLite file but not a judge-eval audit history; the file was left as "
                                   "it is", path=self.path) from None
            raise
        if row is None or row[0] != APPLICATION:
            raise HistoryError("is an SQLite file but not a judge-eval audit history; the file was left as it is",
                               path=self.path)
        if version is None or version[0] != SCHEMA_VERSION:
            raise HistoryError(f"has schema version {version[0] if version else '?'}, this judge-eval reads "
                               f"{SCHEMA_VERSION}; use a matching judge-eval or a new history file", path=self.path)

    @contextmanager
    def _read(self, doing: str) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            yield db
        except sqlite3.Error as exc:
            raise self._error(exc, doing) from None
        finally:
            db.close()

    def check(self) -> None:
        """Open the file (creating it when ``create``) and verify it is an intact history:
        called before an audit pays for any judge call."""
        with self._read("checking it") as db:
            result = db.execute("PRAGMA quick_check").fetchone()
            if result is None or result[0] != "ok":
                raise HistoryError(f"is corrupt (quick_check: {result[0] if result else '?'}); the file was left "
                                   "as it is. Restore it from a backup or point history.path at a new file",
                                   path=self.path)

    # -- writing ---------------------------------------------------------------------------

    def record(self, document: dict[str, Any], per_question: pd.DataFrame, summary: pd.DataFrame,
               canary_items: Sequence[dict[str, Any]] = ()) -> None:
        """Write one audit: its ``audit.json`` document, every (run, measure) of ``summary``
        (``run, measure, mean, ci_low, ci_high, n``), every value of ``per_question`` (``run,
        question_id`` and one column per measure) and the canary's items, in one transaction."""
        doc = document
        measures = [c for c in per_question.columns if c not in ("run", "question_id")]
        long = per_question.melt(id_vars=["run", "question_id"], value_vars=measures, var_name="metric")
        q_rows = [(doc["id"], str(r), str(m), str(q), _num(v))
                  for r, q, m, v in zip(long["run"], long["question_id"], long["metric"], long["value"], strict=True)]
        m_rows = [(doc["id"], str(r.run), str(r.measure), _num(r.mean), _num(r.ci_low), _num(r.ci_high), int(r.n))
                  for r in summary.itertuples(index=False)]
        c_rows = [(doc["id"], str(i["question_id"]), str(i["chunk_id"]), int(i["human_grade"]),
                   None if i.get("judge_grade") is None else int(i["judge_grade"]), i.get("error"))
                  for i in canary_items]
        ds, judge = doc["dataset"], doc["judge"]
        audit_row = (doc["id"], doc["started"], doc["finished"], doc["verdict"], int(doc["exit_code"]),
                     doc["config"]["hash"], ds.get("fingerprint", ""), ds.get("questions_fingerprint", ""),
                     judge["identity"], json.dumps(doc["prompts"], sort_keys=True),
                     json.dumps(doc.get("settings", {}), sort_keys=True), doc["package_version"],
                     json.dumps((doc.get("baseline") or {}).get("ids", [])),
                     json.dumps(doc, ensure_ascii=False, allow_nan=False))
        db = self._connect()
        try:
            with write_transaction(db):
                db.execute("INSERT INTO audits VALUES (" + ",".join("?" * 14) + ")", audit_row)
                db.executemany("INSERT INTO run_metrics VALUES (?,?,?,?,?,?,?)", m_rows)
                db.executemany("INSERT INTO question_values VALUES (?,?,?,?,?)", q_rows)
                db.executemany("INSERT INTO canary_items VALUES (?,?,?,?,?,?)", c_rows)
        except sqlite3.Error as exc:
            raise self._error(exc, f"recording audit {doc['id']}") from None
        finally:
            db.close()

    # -- reading ---------------------------------------------------------------------------

    def audits(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Every audit, newest (last recorded) first: id, started, finished, verdict, exit_code, config_hash,
        dataset_fingerprint, questions_fingerprint, judge_identity, prompts, settings,
        package_version, baseline (lists and dicts decoded)."""
        with self._read("listing audits") as db:
            cur = db.execute("SELECT id, started, finished, verdict, exit_code, config_hash, dataset_fingerprint, "
                             "questions_fingerprint, judge_identity, prompts, settings, package_version, baseline "
                             "FROM audits ORDER BY rowid DESC" + (f" LIMIT {int(limit)}" if limit else ""))
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        for r in rows:
            for key in ("prompts", "settings", "baseline"):
                r[key] = json.loads(r[key])
        return rows

    def resolve(self, audit_id: str) -> str:
        """The full id of ``audit_id`` (the id or a unique prefix); HistoryError if none or several."""
        with self._read("looking up an audit") as db:
            rows = [r[0] for r in db.execute("SELECT id FROM audits WHERE id = ? OR substr(id, 1, ?) = ? "
                                             "ORDER BY id", (audit_id, len(audit_id), audit_id))]
        if audit_id in rows:
            return audit_id
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise HistoryError(f"no audit {audit_id!r} (judge-eval history list shows the ids)", path=self.path)
        raise HistoryError(f"{audit_id!r} matches {len(rows)} audits ({', '.join(rows[:5])}); give more of the id",
                           path=self.path)

    def document(self, audit_id: str) -> dict[str, Any]:
        """The ``audit.json`` of an audit (id or unique prefix)."""
        full = self.resolve(audit_id)
        with self._read("reading an audit") as db:
            (text,) = db.execute("SELECT document FROM audits WHERE id = ?", (full,)).fetchone()
        return json.loads(text)

    def question_values(self, audit_ids: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
        """``audit_id, run, metric, question_id, value`` (NaN when undefined) of those audits."""
        if not audit_ids or not metrics:
            return pd.DataFrame(columns=["audit_id", "run", "metric", "question_id", "value"])
        with self._read("reading per-question values") as db:
            qa = ",".join("?" * len(audit_ids))
            qm = ",".join("?" * len(metrics))
            rows = db.execute(f"SELECT audit_id, run, metric, question_id, value FROM question_values "
                              f"WHERE audit_id IN ({qa}) AND metric IN ({qm})", [*audit_ids, *metrics]).fetchall()
        frame = pd.DataFrame(rows, columns=["audit_id", "run", "metric", "question_id", "value"])
        frame["value"] = frame["value"].astype(float)
        return frame

    def trend(self, metric: str, run: str | None = None, limit: int | None = None) -> pd.DataFrame:
        """One row per (audit, run) with ``metric``, oldest first: audit_id, started, verdict,
        run, value, ci_low, ci_high, n (the last ``limit`` audits)."""
        with self._read("reading a trend") as db:
            sql = ("SELECT a.id, a.started, a.verdict, m.run, m.value, m.ci_low, m.ci_high, m.n FROM run_metrics m "
                   "JOIN audits a ON a.id = m.audit_id WHERE m.metric = ?" + (" AND m.run = ?" if run else "")
                   + " ORDER BY a.rowid DESC, m.run")
            rows = db.execute(sql, (metric, run) if run else (metric,)).fetchall()
            known = [r[0] for r in db.execute("SELECT DISTINCT metric FROM run_metrics ORDER BY metric")]
            runs = [r[0] for r in db.execute("SELECT DISTINCT run FROM run_metrics ORDER BY run")]
        if not rows:
            if metric not in known:
                raise HistoryError(f"no audit recorded metric {metric!r}; recorded metrics: "
                                   f"{', '.join(known) or 'none'}", path=self.path)
            raise HistoryError(f"no audit recorded run {run!r}; recorded runs: {', '.join(runs)}", path=self.path)
        frame = pd.DataFrame(rows, columns=["audit_id", "started", "verdict", "run", "value", "ci_low", "ci_high",
                                            "n"])
        if limit:
            keep = list(dict.fromkeys(frame["audit_id"]))[:limit]
            frame = frame[frame["audit_id"].isin(keep)]
        frame = frame.iloc[::-1].reset_index(drop=True)
        for c in ("value", "ci_low", "ci_high"):
            frame[c] = frame[c].astype(float)
        return frame

    def last_canary(self) -> tuple[str | None, list[dict[str, Any]]]:
        """The newest audit that judged a canary, and its items."""
        with self._read("reading the last canary") as db:
            row = db.execute("SELECT a.id FROM audits a WHERE EXISTS (SELECT 1 FROM canary_items c "
                             "WHERE c.audit_id = a.id) ORDER BY a.rowid DESC LIMIT 1").fetchone()
            if row is None:
                return None, []
            items = db.execute("SELECT question_id, chunk_id, human_grade, judge_grade, error FROM canary_items "
                               "WHERE audit_id = ?", (row[0],)).fetchall()
        return row[0], [dict(zip(("question_id", "chunk_id", "human_grade", "judge_grade", "error"), i, strict=True))
                        for i in items]

    def integrity(self) -> str:
        """``PRAGMA integrity_check``'s answer (``"ok"`` for an intact file)."""
        with self._read("checking integrity") as db:
            return str(db.execute("PRAGMA integrity_check").fetchone()[0])
