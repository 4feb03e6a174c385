"""The response cache: one SQLite row per successful judge answer.

Why: judging is the slow, paid part. A reference shared by several runs, a chunk returned by two
retrievers, a re-run after a crash, last night's run: all of these ask the same question again.
The cache answers them without a call, across processes and days.

Layout (SQLite, WAL journal, ``busy_timeout`` so two processes can share a file)::

    responses(
        key               TEXT PRIMARY KEY,  -- sha256 hex of the canonical request (cache_key)
        identity          TEXT NOT NULL,     -- judge identity, e.g. openai:api.openai.com/gpt-4o-mini
        prompt            TEXT NOT NULL,     -- prompt name@version, e.g. judge_chunk@1
        request           TEXT NOT NULL,     -- canonical JSON of the hashed request (no secrets)
        response          TEXT NOT NULL,     -- the parsed, validated answer as JSON
        prompt_tokens     INTEGER NOT NULL,  -- usage the server reported for the answer
        completion_tokens INTEGER NOT NULL,  --   (including a repair request, if one was needed)
        created           TEXT NOT NULL      -- ISO 8601 UTC time the row was written
    )
    endpoint_formats(endpoint TEXT PRIMARY KEY, format TEXT NOT NULL, updated TEXT NOT NULL)
    meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)   -- schema_version

Every write is committed at once (autocommit), so a process killed with SIGKILL loses nothing it
already stored. Only successful answers are stored; errors never are.

The key (:func:`cache_key`) is the SHA-256 of the canonical JSON (sorted keys, ``(",", ":")``
separators, UTF-8, no ASCII escaping) of the request dictionary the judge builds: everything that
changes the answer (judge identity, prompt id, model, messages, temperature, top_p, seed,
max_tokens, response format, sample index). API keys and headers are never part of it, and
:meth:`ResponseCache.put` refuses a request that carries a field named like a credential.

Modes:

``use``      read and write (default);
``refresh``  never read (every task is asked again), write (overwrites old rows);
``replay``   read only; a miss is an error raised by the judge (``JudgeCallError("cache_miss")``),
             so a CI run is reproducible and makes no HTTP request;
``off``      neither read nor write; the file is not even opened by the judge path.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal

from judge_eval._jsonpath import first_path
from judge_eval.errors import InputError
from judge_eval.judge.protocol import Usage

CacheMode = Literal["use", "refresh", "replay", "off"]
MODES: tuple[str, ...] = ("use", "refresh", "replay", "off")
FORMATS: tuple[str, ...] = ("json_schema", "json_object", "text")
SCHEMA_VERSION = "1"

#: field names that must never appear anywhere in a stored request (checked case-insensitively)
_SECRET_FIELDS = frozenset(
    {"api_key", "apikey", "api-key", "authorization", "headers", "extra_headers", "x-api-key", "password", "token"}
)

__all__ = [
    "CacheEntry",
    "CacheMode",
    "ResponseCache",
    "cache_key",
    "canonical_json",
]


def canonical_json(value: Any) -> str:
    """Canonical JSON text: ``sort_keys=True``, separators ``(",", ":")``, ``ensure_ascii=False``.
    Equal values give equal text; NaN/Infinity are refused (they are not JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def cache_key(request: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``request`` encoded as UTF-8."""
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _find_secret_field(value: Any) -> str | None:
    """The path of the first key that looks like a credential (``api_key``, ``authorization``...)."""
    return first_path(value, lambda key: key.lower() in _SECRET_FIELDS, strings=False)


@dataclass(frozen=True)
class CacheEntry:
    """One stored answer."""

    key: str
    identity: str
    prompt: str
    request: dict[str, Any]
    response: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    created: str = ""

    def to_json(self) -> dict[str, Any]:
        """The export/import line for this entry."""
        return {
            "key": self.key,
            "identity": self.identity,
            "prompt": self.prompt,
            "request": self.request,
            "response": self.response,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
            "created": self.created,
        }


_DDL = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    prompt TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_identity ON responses(identity);
CREATE INDEX IF NOT EXISTS responses_prompt ON responses(prompt);
CREATE TABLE IF NOT EXISTS endpoint_formats (
    endpoint TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class ResponseCache:
    """SQLite cache of judge answers (see the module docstring for layout, key and modes).

    One connection guarded by a lock: calls are short (a primary-key lookup or a one-row
    insert), so sharing it between asyncio tasks and threads is safe and cheap. Two processes may
    use the same file: WAL lets readers run beside a writer and ``busy_timeout`` makes a writer
    wait for the other's lock instead of failing.

    The connection is opened on first use, so ``ResponseCache(path, mode="off")`` never creates
    ``path`` unless a management method (stats, export, import, clear) is called.
    """

    def __init__(self, path: str | Path, mode: CacheMode = "use", *, busy_timeout: float = 30.0) -> None:
        if mode not in MODES:
            raise InputError(f"unknown cache mode {mode!r}; expected one of {', '.join(MODES)}", field="mode")
        self.path = Path(path)
        self.mode: CacheMode = mode
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        # what this process got from the cache (stats()["session"])
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.saved = Usage()

    # -- connection ---------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path),
                timeout=self.busy_timeout,
                isolation_level=None,  # autocommit: each statement is its own committed transaction
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: a commit survives a process crash (SIGKILL); only an OS crash or
            # power loss can drop the last commits.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_DDL)
            conn.execute(
                "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
            )
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Close the connection (the object reopens it if used again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r}, mode={self.mode!r})"

    # -- answers ------------------------------------------------------------------------------

    @property
    def reads(self) -> bool:
        """True when :meth:`get` looks at the file (modes ``use`` and ``replay``)."""
        return self.mode in ("use", "replay")

    @property
    def writes_enabled(self) -> bool:
        """True when :meth:`put` stores (modes ``use`` and ``refresh``)."""
        return self.mode in ("use", "refresh")

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None on a miss. Always None in ``refresh`` and
        ``off`` modes. (In ``replay`` mode the judge turns a miss into ``cache_miss``.)"""
        if not self.reads:
            return None
        with self._lock:
            row = self._db().execute(
                "SELECT key, identity, prompt, request, response, prompt_tokens, completion_tokens, created "
                "FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            self.misses += 1
            return None
        try:
            entry = CacheEntry(
                key=row[0],
                identity=row[1],
                prompt=row[2],
                request=json.loads(row[3]),
                response=json.loads(row[4]),
                usage=Usage(int(row[5]), int(row[6])),
                created=row[7],
            )
        except (ValueError, TypeError):
            self.misses += 1
            return None  # a damaged row is a miss; a later put overwrites it
        self.hits += 1
        self.saved = self.saved + entry.usage
        return entry

    def put(
        self,
        key: str,
        *,
        identity: str,
        prompt: str,
        request: dict[str, Any],
        response: dict[str, Any],
        usage: Usage | None = None,
    ) -> bool:
        """Store one answer (committed before returning). Returns True if written; a no-op
        returning False in ``replay`` and ``off`` modes. An existing row with the same key is
        replaced (so ``refresh`` overwrites).

        Raises ValueError if ``request`` carries a credential-like field (``api_key``,
        ``authorization``, ``headers`` ...): secrets must never reach the file.
        """
        if not self.writes_enabled:
            return False
        secret = _find_secret_field(request)
        if secret is not None:
            raise ValueError(f"refusing to cache a request with a credential-like field: {secret}")
        usage = usage or Usage()
        with self._lock:
            self._db().execute(
                "INSERT OR REPLACE INTO responses"
                "(key, identity, prompt, request, response, prompt_tokens, completion_tokens, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    identity,
                    prompt,
                    canonical_json(request),
                    canonical_json(response),
                    int(usage.prompt_tokens),
                    int(usage.completion_tokens),
                    _now(),
                ),
            )
            self.writes += 1
        return True

    def __len__(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    # -- endpoint capabilities ----------------------------------------------------------------

    def get_format(self, endpoint: str) -> str | None:
        """The structured-output format remembered for ``endpoint`` (``json_schema``,
        ``json_object`` or ``text``), or None. Not consulted in ``off`` mode."""
        if self.mode == "off":
            return None
        with self._lock:
            row = self._db().execute(
                "SELECT format FROM endpoint_formats WHERE endpoint = ?", (endpoint,)
            ).fetchone()
        return row[0] if row and row[0] in FORMATS else None

    def set_format(self, endpoint: str, fmt: str) -> None:
        """Remember that ``endpoint`` works with ``fmt``. A no-op in ``replay`` and ``off``."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}")
        if self.mode in ("replay", "off"):
            return
        with self._lock:
            self._db().execute(
                "INSERT OR REPLACE INTO endpoint_formats(endpoint, format, updated) VALUES (?, ?, ?)",
                (endpoint, fmt, _now()),
            )

    def formats(self) -> dict[str, str]:
        """All remembered endpoint formats."""
        with self._lock:
            return dict(self._db().execute("SELECT endpoint, format FROM endpoint_formats").fetchall())

    def clear_formats(self, endpoint: str | None = None) -> int:
        """Forget remembered formats (all, or one endpoint), e.g. after upgrading a server."""
        with self._lock:
            if endpoint is None:
                cur = self._db().execute("DELETE FROM endpoint_formats")
            else:
                cur = self._db().execute("DELETE FROM endpoint_formats WHERE endpoint = ?", (endpoint,))
            return cur.rowcount

    # -- management ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """What the file holds and what this process got from it.

        ``rows``; ``by_identity`` and ``by_prompt`` (row counts); ``prompt_tokens`` and
        ``completion_tokens`` stored (what one full reuse of every row saves); ``file_bytes``
        (database plus its WAL); ``formats`` (remembered endpoint formats); ``session``: hits,
        misses, writes and ``tokens_saved`` by hits in this process.
        """
        with self._lock:
            db = self._db()
            rows = int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            by_identity = dict(
                db.execute("SELECT identity, COUNT(*) FROM responses GROUP BY identity ORDER BY identity").fetchall()
            )
            by_prompt = dict(
                db.execute("SELECT prompt, COUNT(*) FROM responses GROUP BY prompt ORDER BY prompt").fetchall()
            )
            pt, ct = db.execute(
                "SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) FROM responses"
            ).fetchone()
            formats = dict(db.execute("SELECT endpoint, format FROM endpoint_formats").fetchall())
        size = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                size += p.stat().st_size
        return {
            "path": str(self.path),
            "mode": self.mode,
            "rows": rows,
            "by_identity": by_identity,
            "by_prompt": by_prompt,
            "prompt_tokens": int(pt),
            "completion_tokens": int(ct),
            "total_tokens": int(pt) + int(ct),
            "file_bytes": size,
            "formats": formats,
            "session": {
                "hits": self.hits,
                "misses": self.misses,
                "writes": self.writes,
                "tokens_saved": self.saved.total_tokens,
                "prompt_tokens_saved": self.saved.prompt_tokens,
                "completion_tokens_saved": self.saved.completion_tokens,
            },
        }

    def entries(self, identity: str | None = None) -> list[CacheEntry]:
        """All entries (optionally of one identity), ordered by key."""
        sql = (
            "SELECT key, identity, prompt, request, response, prompt_tokens, completion_tokens, created "
            "FROM responses"
        )
        args: tuple[Any, ...] = ()
        if identity is not None:
            sql += " WHERE identity = ?"
            args = (identity,)
        sql += " ORDER BY key"
        with self._lock:
            rows = self._db().execute(sql, args).fetchall()
        return [
            CacheEntry(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), Usage(int(r[5]), int(r[6])), r[7])
            for r in rows
        ]

    def export_jsonl(self, dest: str | Path | IO[str], *, identity: str | None = None) -> int:
        """Write every entry (or one identity's) as JSON lines, ordered by key; returns the count.
        ``dest`` is a path or a text stream."""
        entries = self.entries(identity)
        lines = "".join(json.dumps(e.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
        if isinstance(dest, (str, Path)):
            tmp = Path(str(dest) + ".tmp")
            tmp.write_text(lines, encoding="utf-8")
            os.replace(tmp, dest)
        else:
            dest.write(lines)
        return len(entries)

    def import_jsonl(self, src: str | Path | IO[str]) -> int:
        """Load entries written by :meth:`export_jsonl`; returns how many were new.

        Idempotent: a key already present is kept as is. Every line is validated first (a JSON
        object with ``key``, ``identity``, ``prompt``, ``request``, ``response``, optional
        ``usage`` and ``created``; ``key`` must equal :func:`cache_key` of ``request``; no
        credential-like fields); any bad line raises :class:`InputError` naming the line and
        nothing is imported. Works in every mode (it is an explicit request).
        """
        path: str | None
        if isinstance(src, (str, Path)):
            path = str(src)
            try:
                text = Path(src).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise InputError("file not found", path=path) from None
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text ({exc.reason})", path=path) from None
        else:
            path = getattr(src, "name", None)
            text = src.read()
        rows: list[tuple[Any, ...]] = []
        for lineno, line in enumerate(io.StringIO(text), start=1):
            if not line.strip():
                continue
            rows.append(self._validate_line(line, lineno, path))
        with self._lock:
            db = self._db()
            before = db.total_changes
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR IGNORE INTO responses"
                    "(key, identity, prompt, request, response, prompt_tokens, completion_tokens, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return db.total_changes - before

    @staticmethod
    def _validate_line(line: str, lineno: int, path: str | None) -> tuple[Any, ...]:
        def bad(msg: str, fld: str | None = None) -> InputError:
            return InputError(msg, path=path, line=lineno, field=fld)

        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise bad("expected a JSON object")
        for name in ("key", "identity", "prompt"):
            if not isinstance(obj.get(name), str) or not obj[name]:
                raise bad("missing or not a non-empty string", name)
        for name in ("request", "response"):
            if not isinstance(obj.get(name), dict):
                raise bad("missing or not a JSON object", name)
        key = obj["key"]
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise bad("not a lowercase sha256 hex digest", "key")
        secret = _find_secret_field(obj["request"])
        if secret is not None:
            raise bad("credential-like field in a request; refusing to import it", f"request.{secret}")
        try:
            expected = cache_key(obj["request"])
        except ValueError:
            raise bad("request is not valid JSON data (NaN or Infinity)", "request") from None
        if expected != key:
            raise bad("key does not match the SHA-256 of the request", "key")
        usage = obj.get("usage") or {}
        if not isinstance(usage, dict):
            raise bad("not a JSON object", "usage")
        tokens = []
        for name in ("prompt_tokens", "completion_tokens"):
            v = usage.get(name, 0)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad("not a non-negative integer", f"usage.{name}")
            tokens.append(v)
        created = obj.get("created") or _now()
        if not isinstance(created, str):
            raise bad("not a string", "created")
        return (
            key,
            obj["identity"],
            obj["prompt"],
            canonical_json(obj["request"]),
            canonical_json(obj["response"]),
            tokens[0],
            tokens[1],
            created,
        )

    def clear(self, identity: str | None = None) -> int:
        """Delete all stored answers, or those of one identity; returns the number deleted.
        Remembered endpoint formats are kept (see :meth:`clear_formats`)."""
        with self._lock:
            if identity is None:
                cur = self._db().execute("DELETE FROM responses")
            else:
                cur = self._db().execute("DELETE FROM responses WHERE identity = ?", (identity,))
            return cur.rowcount
