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
    endpoint_params(
        endpoint TEXT PRIMARY KEY,  -- base URL + model, as endpoint_formats
        params   TEXT NOT NULL,     -- JSON: request parameter -> the name it is sent as, or null: not
                                    --   sent (e.g. {"max_tokens": "max_completion_tokens", "temperature": null})
        updated  TEXT NOT NULL
    )
    meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)   -- schema_version
    claims(
        key     TEXT PRIMARY KEY,  -- the cache key some process is asking the server for right now
        owner   TEXT NOT NULL,     -- "hostname:pid:random" of the ResponseCache that holds it
        expires REAL NOT NULL      -- Unix time the lease ends unless renewed
    )
    batches(
        id         TEXT PRIMARY KEY,  -- ours ("jeb-" + hex); also in the provider batch's metadata
        kind       TEXT NOT NULL,     -- "openai" (the Batch API) or "export" (a file judged elsewhere)
        endpoint   TEXT NOT NULL,     -- the judge's endpoint (base URL + model)
        identity   TEXT NOT NULL,
        state      TEXT NOT NULL,     -- created | uploaded | submitted | done | failed
        input_file TEXT,              -- the provider's id of the uploaded requests file
        remote_id  TEXT,              -- the provider's batch id, stored the moment it exists
        status     TEXT,              -- the provider's status, last seen
        counts     TEXT,              -- the provider's request counts (JSON), last seen
        created    TEXT NOT NULL,
        updated    TEXT NOT NULL
    )
    batch_items(
        batch    TEXT NOT NULL,  -- batches.id
        key      TEXT NOT NULL,  -- the cache key of the task: the custom_id of its request line
        identity TEXT NOT NULL,
        prompt   TEXT NOT NULL,
        request  TEXT NOT NULL,  -- canonical JSON of the hashed request (as in responses)
        inputs   TEXT NOT NULL,  -- JSON: what the prompt was rendered from (to check the answer)
        body     TEXT NOT NULL,  -- JSON: the chat-completions body sent for it
        state    TEXT NOT NULL,  -- pending | answered | failed
        PRIMARY KEY (batch, key)
    )

Every write is committed at once (autocommit), so a process killed with SIGKILL loses nothing it
already stored. Only successful answers are stored; errors never are.

The key (:func:`cache_key`) is the SHA-256 of the canonical JSON (sorted keys, ``(",", ":")``
separators, UTF-8, no ASCII escaping) of the request dictionary the judge builds: everything that
changes the answer (judge identity, prompt id, model, messages, temperature, top_p, seed,
max_tokens, response format, sample index). API keys and headers are never part of it, and
:meth:`ResponseCache.put` refuses a request that carries a field named like a credential.

Claims (cross-process coordination): two processes sharing a file pay each unique task once. On a
miss, :meth:`ResponseCache.acquire` claims the key (one short ``BEGIN IMMEDIATE`` transaction that
also re-checks ``responses``) before the judge asks the server. A key claimed by another live owner
is waited for (asyncio polling, 20 ms growing to 0.5 s) until its answer appears (returned as a
cache hit) or the claim goes away (then this process claims it and asks). A claim is taken over at
once when its lease expired or its owner is a dead process on this host (``os.kill(pid, 0)``); it
is released in the same transaction that stores the answer, or on failure or cancellation. While
the call is in flight a heartbeat renews the lease (``lease`` seconds, default 60, renewed every
``lease / 3``), so a slow call with retries is not taken over, and a crashed claimant's key is
free again after at most one lease. Claims exist only in modes ``use`` and ``refresh``. In
``refresh`` mode an answer counts only when it was written after this ``ResponseCache`` was
created (:attr:`ResponseCache.started`): a concurrent claimant's fresh answer, never an old one.

Errors: a path that is a directory, a file that is not SQLite, a corrupted database, an
unwritable location, a file that stays locked past ``busy_timeout``, all raise
:class:`CacheError` naming the file and what to do. :meth:`ResponseCache.check` opens and
verifies the file eagerly, so a caller can fail before any paid call; ``create=False`` opens an
existing cache only (management commands), never creating a file or directory.

Modes:

``use``      read and write (default);
``refresh``  never read (every task is asked again), write (overwrites old rows);
``replay``   read only; a miss is an error raised by the judge (``JudgeCallError("cache_miss")``),
             so a CI run is reproducible and makes no HTTP request;
``off``      neither read nor write; the file is not even opened by the judge path.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import math
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import quote

from judge_eval._jsonpath import first_path
from judge_eval.atomic import write_text
from judge_eval.errors import InputError, JudgeEvalError
from judge_eval.sqlite_tx import write_transaction
from judge_eval.usage import Usage

CacheMode = Literal["use", "refresh", "replay", "off"]
MODES: tuple[str, ...] = ("use", "refresh", "replay", "off")
FORMATS: tuple[str, ...] = ("json_schema", "json_object", "text")
SCHEMA_VERSION = "1"
#: seconds a claim lives unless renewed (a heartbeat renews it every third of that)
DEFAULT_LEASE = 60.0
#: longest pause between two looks at a key another process is asking for
MAX_POLL = 0.5

#: Set by a scheduler (the runner) around one judge call: ``while_waiting()`` gives an async
#: context that :meth:`ResponseCache.acquire` stays in while another process holds the key it
#: wants. The runner's context gives back the task's concurrency slot and takes one again before
#: the task goes on, so tasks waiting for another process's answers do not stop this process
#: from asking for the ones nobody has claimed.
while_waiting: ContextVar[Callable[[], AbstractAsyncContextManager[Any]] | None] = ContextVar(
    "judge_eval_while_waiting", default=None
)

#: field names that must never appear anywhere in a stored request (checked case-insensitively)
_SECRET_FIELDS = frozenset(
    {"api_key", "apikey", "api-key", "authorization", "headers", "extra_headers", "x-api-key", "password", "token"}
)

__all__ = [
    "BATCH_COLUMNS",
    "BATCH_FINAL",
    "CacheEntry",
    "CacheError",
    "CacheMode",
    "Claim",
    "ResponseCache",
    "cache_key",
    "canonical_json",
    "json_object_line",
    "read_text_file",
]


def canonical_json(value: Any) -> str:
    """Canonical JSON text: ``sort_keys=True``, separators ``(",", ":")``, ``ensure_ascii=False``.
    Equal values give equal text; NaN/Infinity are refused (they are not JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def cache_key(request: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``request`` encoded as UTF-8."""
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


def _now() -> str:
    # milliseconds: refresh mode compares ``created`` with the time it started
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _timestamp(created: str) -> float:
    """Unix time of a ``created`` value (-inf when unparseable: older than anything)."""
    try:
        when = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        return -math.inf
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


class CacheError(JudgeEvalError):
    """The cache file cannot be used: names the file, what is wrong and what to do."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"cache {self.path}: {self.message}" if self.path else self.message


_MOVE_ASIDE = "move it aside (or delete it) or pass another --cache"

#: (words in an sqlite3 error, what to tell the user), first match wins
_SQLITE_ADVICE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("is locked", "database is busy"),
     "locked by another process for longer than the busy timeout ({busy:g} s); wait for that process "
     "(or kill it) and retry, or pass another --cache"),
    (("not a database",), "not an SQLite database, so not a judge-eval cache; {move}"),
    (("malformed", "corrupt"),
     "the SQLite database is corrupted ({text}); {move} (`sqlite3 FILE .recover` may save its rows)"),
    (("readonly", "read-only"),
     "not writable ({text}); fix its permissions, use --cache-mode replay to only read it, or pass another --cache"),
    (("unable to open",), "cannot be opened ({text}: missing directory or no permission); pass another --cache"),
)


def _cache_error(path: Path, exc: BaseException, busy_timeout: float) -> CacheError:
    """The :class:`CacheError` for an sqlite3/OS error raised while using ``path``."""
    text = str(exc)
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
        return CacheError(f"cannot create its directory ({exc.strerror or text}); pass another --cache", path=path)
    low = text.lower()
    for needles, advice in _SQLITE_ADVICE:
        if any(n in low for n in needles):
            return CacheError(advice.format(text=text, busy=busy_timeout, move=_MOVE_ASIDE), path=path)
    return CacheError(f"SQLite error: {text}; {_MOVE_ASIDE}", path=path)


def _host() -> str:
    return socket.gethostname()


def _owner_alive(owner: str) -> bool:
    """False only when ``owner`` (``host:pid:random``) is a process of this host that is gone."""
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != _host() or not pid_text.isdigit() or os.name == "nt":  # os.kill(pid, 0) kills on Windows
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def json_object_line(line: str, lineno: int, path: str | None, what: str = "") -> dict[str, Any]:
    """The JSON object on line ``lineno`` of a JSONL file; an InputError naming the file and line
    when it is not JSON or not an object (``what`` says what the line should be)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno) from None
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object{what}", path=path, line=lineno)
    return obj


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of ``path``; an InputError naming it when it is missing or not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", path=str(path)) from None


def _where(sql: str, conditions: dict[str, Any]) -> tuple[str, list[Any]]:
    """``sql`` (ending in a WHERE clause) with ``AND column = ?`` for each condition not None."""
    args = []
    for column, value in conditions.items():
        if value is not None:
            sql += f" AND {column} = ?"
            args.append(value)
    return sql, args


def _find_secret_field(value: Any) -> str | None:
    """The path of the first key that looks like a credential (``api_key``, ``authorization``...)."""
    return first_path(value, lambda key: key.lower() in _SECRET_FIELDS, strings=False)


@dataclass(frozen=True)
class CacheEntry:
    """One stored answer. ``request`` (the hashed request, about 2 KB of JSON with the rendered
    messages) is decoded from ``request_json`` on first use: a cache hit needs only the
    response, and decoding every request cost about a tenth of a warm run."""

    key: str
    identity: str
    prompt: str
    request_json: str = field(repr=False)
    response: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    created: str = ""

    @cached_property
    def request(self) -> dict[str, Any]:
        """The hashed request (identity, prompt id, messages, decoding, sample, transport fields)."""
        value = json.loads(self.request_json)
        if not isinstance(value, dict):
            raise ValueError("the stored request is not a JSON object")
        return value

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
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS endpoint_params (
    endpoint TEXT PRIMARY KEY,
    params TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    identity TEXT NOT NULL,
    state TEXT NOT NULL,
    input_file TEXT,
    remote_id TEXT,
    status TEXT,
    counts TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_items (
    batch TEXT NOT NULL,
    key TEXT NOT NULL,
    identity TEXT NOT NULL,
    prompt TEXT NOT NULL,
    request TEXT NOT NULL,
    inputs TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (batch, key)
);
CREATE INDEX IF NOT EXISTS batch_items_key ON batch_items(key);
"""

_TABLES = frozenset({"responses", "endpoint_formats", "meta", "claims", "endpoint_params", "batches", "batch_items"})
#: the columns of a batches row, in order
BATCH_COLUMNS = ("id", "kind", "endpoint", "identity", "state", "input_file", "remote_id", "status", "counts",
                 "created", "updated")
#: batch states after which nothing more happens to a batch
BATCH_FINAL = ("done", "failed")
_ENTRY_COLUMNS = "key, identity, prompt, request, response, prompt_tokens, completion_tokens, created"


def _entry(row: tuple[Any, ...]) -> CacheEntry:
    """A :class:`CacheEntry` from a ``SELECT {_ENTRY_COLUMNS}`` row (ValueError/TypeError if damaged)."""
    return CacheEntry(
        key=row[0],
        identity=row[1],
        prompt=row[2],
        request_json=str(row[3]),
        response=json.loads(row[4]),
        usage=Usage(int(row[5]), int(row[6])),
        created=row[7],
    )


class Claim:
    """This process's claim on one key, from :meth:`ResponseCache.acquire`: use it as
    ``async with claim:`` around the server call. Inside, a heartbeat renews the lease every
    ``lease / 3`` seconds; on leaving, the claim is released (a no-op when :meth:`ResponseCache.put`
    already released it with the answer). An inactive claim (modes ``replay`` and ``off``) does
    nothing."""

    def __init__(self, cache: ResponseCache, key: str, active: bool) -> None:
        self.cache = cache
        self.key = key
        self.active = active
        self._beat: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Claim:
        if self.active:
            self._beat = asyncio.get_running_loop().create_task(self._heartbeat())
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(failing=exc_type is not None)

    def close(self, *, failing: bool = False) -> None:
        """Stop the heartbeat and release the claim. When ``failing`` (an exception is already on
        its way) a cache error here is swallowed: the lease then simply expires."""
        if self._beat is not None:
            self._beat.cancel()  # not awaited: awaiting could swallow a cancellation of our own
            self._beat = None
        if self.active:
            try:
                self.cache.release(self.key)
            except CacheError:
                if not failing:
                    raise

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.cache.lease / 3)
            try:
                self.cache.renew(self.key)
            except CacheError:
                pass  # keep trying; at worst the lease expires and another process asks too


class ResponseCache:
    """SQLite cache of judge answers (see the module docstring for layout, key and modes).

    One connection guarded by a lock: calls are short (a primary-key lookup or a one-row
    insert), so sharing it between asyncio tasks and threads is safe and cheap. Two processes may
    use the same file: WAL lets readers run beside a writer and ``busy_timeout`` makes a writer
    wait for the other's lock instead of failing.

    The connection is opened on first use, so ``ResponseCache(path, mode="off")`` never creates
    ``path`` unless a management method (stats, export, import, clear) is called. Call
    :meth:`check` to open and verify it at once.

    ``create=False`` opens an existing cache only: a missing file raises ``CacheError("no cache
    at PATH")`` here, and no file or directory is ever created (a cache written by an earlier
    version only gains the tables added since). ``lease``: seconds a claim lives unless renewed
    (see the module docstring). Every failure of the file raises :class:`CacheError`.
    """

    def __init__(
        self,
        path: str | Path,
        mode: CacheMode = "use",
        *,
        busy_timeout: float = 30.0,
        create: bool = True,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        if mode not in MODES:
            raise InputError(f"unknown cache mode {mode!r}; expected one of {', '.join(MODES)}", field="mode")
        if not (isinstance(lease, (int, float)) and math.isfinite(lease) and lease > 0):
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        self.path = Path(path)
        self.mode: CacheMode = mode
        self.busy_timeout = busy_timeout
        self.create = create
        self.lease = float(lease)
        #: Unix time this object was made: in ``refresh`` mode, only answers written after it count
        self.started = time.time()
        if not create and not self._memory and not self.path.exists():
            raise CacheError(f"no cache at {self.path}")
        if not create and self.path.is_dir():
            raise CacheError("is a directory, not a cache file; pass a file path to --cache", path=self.path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._owner = ""
        self._owner_pid = -1
        self._held: set[str] = set()  # keys this object holds claims on
        # what this process got from the cache (stats()["session"])
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.saved = Usage()

    # -- connection ---------------------------------------------------------------------------

    @property
    def _memory(self) -> bool:
        return str(self.path) in (":memory:", "")

    def _db(self) -> sqlite3.Connection:
        """The connection, opened (and the file verified) on first use. Call under ``_locked``."""
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        path = self.path
        if path.is_dir():
            raise CacheError("is a directory, not a cache file; pass a file path to --cache", path=path)
        if self._memory:
            target, uri = str(path), False
        elif self.create:
            if not path.parent.exists():
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise _cache_error(path, exc, self.busy_timeout) from None
            target, uri = str(path), False
        else:
            if not path.exists():
                raise CacheError(f"no cache at {path}")
            target, uri = f"file:{quote(str(path.absolute()))}?mode=rw", True
        try:
            conn = sqlite3.connect(
                target,
                timeout=self.busy_timeout,
                isolation_level=None,  # autocommit: each statement is its own committed transaction
                check_same_thread=False,
                uri=uri,
            )
        except sqlite3.Error as exc:
            raise _cache_error(path, exc, self.busy_timeout) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            tables = self._checked_tables(conn)
            if not _TABLES <= tables:  # a new file, or one written before a table was added: no write otherwise
                # in one transaction, looking again under the write lock: two processes opening a
                # new file at once must not see each other's half-made schema (one would refuse it
                # as "not a judge-eval cache")
                with write_transaction(conn):
                    if not _TABLES <= self._checked_tables(conn):
                        for statement in _DDL.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                        conn.execute(
                            "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                        )
            self._use_wal(conn)
            # NORMAL in WAL mode: a commit survives a process crash (SIGKILL); only an OS crash or
            # power loss can drop the last commits.
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException as exc:
            conn.close()
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise _cache_error(path, exc, self.busy_timeout) from None
            raise
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (kept in the file: once is enough). SQLite answers "database
        is locked" at once, without waiting, while another connection has the file open in the
        middle of a statement, so a new file opened by several processes at once is retried
        here until the busy timeout."""
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _checked_tables(self, conn: sqlite3.Connection) -> set[str]:
        """The file's tables, when they are a judge-eval cache of this schema version (or none,
        when a new file may be made); CacheError otherwise."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "responses" in tables and "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if row is not None and row[0] != SCHEMA_VERSION:
                raise CacheError(
                    f"schema version {row[0]}, this judge-eval reads version {SCHEMA_VERSION}; "
                    "use the judge-eval that wrote it, or pass another --cache",
                    path=self.path,
                )
        elif tables or not self.create:
            raise CacheError(
                f"an SQLite database but not a judge-eval cache (tables: {', '.join(sorted(tables)) or 'none'}); "
                f"{_MOVE_ASIDE}",
                path=self.path,
            )
        return tables

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; any SQLite failure becomes a :class:`CacheError`."""
        with self._lock:
            try:
                yield self._db()
            except sqlite3.Error as exc:
                raise _cache_error(self.path, exc, self.busy_timeout) from None

    def check(self) -> None:
        """Open the file now and verify it is a usable judge-eval cache: an SQLite database with
        this version's schema whose pages pass ``PRAGMA quick_check``. Raises :class:`CacheError`
        (naming the file and what to do) otherwise, so a caller can fail before any paid call.
        Does nothing in ``off`` mode."""
        if self.mode == "off":
            return
        with self._locked() as db:
            db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            problems = [r[0] for r in db.execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise CacheError(
                f"the SQLite database is corrupted ({'; '.join(problems)}); {_MOVE_ASIDE} "
                "(`sqlite3 FILE .recover` may save its rows)",
                path=self.path,
            )

    def close(self) -> None:
        """Close the connection (the object reopens it if used again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ResponseCache:
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
        with self._locked() as db:
            entry = self._lookup(db, key)
        self._count(entry)
        return entry

    def _lookup(
        self,
        db: sqlite3.Connection,
        key: str,
        since: float | None = None,
        accept: Callable[[CacheEntry], bool] | None = None,
    ) -> CacheEntry | None:
        """The usable entry under ``key``: None when absent, damaged (a later put overwrites
        it), written before ``since`` or refused by ``accept``."""
        row = db.execute(f"SELECT {_ENTRY_COLUMNS} FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            entry = _entry(row)
        except (ValueError, TypeError):
            return None
        if since is not None and _timestamp(entry.created) < since:
            return None
        if accept is not None and not accept(entry):
            return None
        return entry

    def _count(self, entry: CacheEntry | None) -> None:
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
            self.saved = self.saved + entry.usage

    # -- claims -------------------------------------------------------------------------------

    @property
    def owner(self) -> str:
        """This object's claim owner id, ``hostname:pid:random`` (new after a fork)."""
        pid = os.getpid()
        if self._owner_pid != pid:
            self._owner = f"{_host()}:{pid}:{secrets.token_hex(4)}"
            self._owner_pid = pid
        return self._owner

    def _claim_free(self, row: tuple[Any, ...] | None, now: float) -> bool:
        """Whether a claims row (owner, expires) may be taken: none, expired, or a dead owner."""
        return row is None or float(row[1]) < now or not _owner_alive(str(row[0]))

    def try_acquire(
        self, key: str, *, accept: Callable[[CacheEntry], bool] | None = None
    ) -> CacheEntry | bool:
        """One non-blocking attempt (modes ``use`` and ``refresh``): the stored answer if there
        is a usable one (``accept`` may refuse an entry; in ``refresh`` mode only answers written
        after :attr:`started` count), True if this object now holds the claim on ``key``, False
        if another live owner (or another task of this object) holds it."""
        since = self.started if self.mode == "refresh" else None
        now = time.time()
        with self._locked() as db:
            # cheap look without the write lock first
            entry = self._lookup(db, key, since, accept)
            if entry is not None:
                return entry
            row = db.execute("SELECT owner, expires FROM claims WHERE key = ?", (key,)).fetchone()
            if not self._claim_free(row, now):
                return False
            with write_transaction(db):
                # again under the write lock: the answer may have been stored since the look above
                entry = self._lookup(db, key, since, accept)
                row = db.execute("SELECT owner, expires FROM claims WHERE key = ?", (key,)).fetchone()
                won = entry is None and self._claim_free(row, now)
                if won:
                    db.execute(
                        "INSERT OR REPLACE INTO claims(key, owner, expires) VALUES (?, ?, ?)",
                        (key, self.owner, time.time() + self.lease),
                    )
            if entry is not None:
                return entry
            if won:
                self._held.add(key)
            return won

    async def acquire(
        self, key: str, *, accept: Callable[[CacheEntry], bool] | None = None
    ) -> CacheEntry | Claim:
        """The stored answer under ``key`` or this process's :class:`Claim` on it.

        ``use`` / ``refresh``: wait (asyncio, polling every 20 ms growing to 0.5 s) while another
        live owner holds the key, until its answer appears (returned, counted as a hit) or its
        claim goes away or expires (then claimed here); the wait happens inside the context of
        :data:`while_waiting`, when one is set. ``replay``: the stored answer or an inactive
        claim (the caller reports the miss). ``off``: an inactive claim, the file is not touched.
        """
        if self.mode == "off":
            return Claim(self, key, active=False)
        if self.mode == "replay":
            with self._locked() as db:
                entry = self._lookup(db, key, None, accept)
            self._count(entry)
            return entry if entry is not None else Claim(self, key, active=False)
        delay = 0.02
        waiting: AbstractAsyncContextManager[Any] | None = None
        try:
            while True:
                got = self.try_acquire(key, accept=accept)
                if isinstance(got, CacheEntry):
                    self._count(got)
                    return got
                if got:
                    if self.reads:
                        self._count(None)
                    return Claim(self, key, active=True)
                if waiting is None and (make := while_waiting.get()) is not None:
                    waiting = make()
                    await waiting.__aenter__()
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, MAX_POLL)
        finally:
            if waiting is not None:
                await waiting.__aexit__(None, None, None)

    def renew(self, key: str) -> bool:
        """Extend this object's lease on ``key`` by :attr:`lease` seconds; False if it no longer
        holds it (released, or taken over after the lease expired)."""
        with self._locked() as db:
            cur = db.execute(
                "UPDATE claims SET expires = ? WHERE key = ? AND owner = ?", (time.time() + self.lease, key, self.owner)
            )
            return cur.rowcount > 0

    def release(self, key: str) -> None:
        """Give up this object's claim on ``key`` (a no-op if it holds none)."""
        with self._locked() as db:
            if key in self._held:
                self._held.discard(key)
                db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, self.owner))

    def claims(self) -> list[tuple[str, str, float]]:
        """Every claim row: (key, owner, expires)."""
        with self._locked() as db:
            rows = db.execute("SELECT key, owner, expires FROM claims ORDER BY key").fetchall()
        return [(r[0], r[1], float(r[2])) for r in rows]

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
        replaced (so ``refresh`` overwrites). A claim this object holds on ``key`` is released in
        the same transaction.

        Raises ValueError if ``request`` carries a credential-like field (``api_key``,
        ``authorization``, ``headers`` ...): secrets must never reach the file.
        """
        if not self.writes_enabled:
            return False
        secret = _find_secret_field(request)
        if secret is not None:
            raise ValueError(f"refusing to cache a request with a credential-like field: {secret}")
        usage = usage or Usage()
        row = (
            key,
            identity,
            prompt,
            canonical_json(request),
            canonical_json(response),
            int(usage.prompt_tokens),
            int(usage.completion_tokens),
            _now(),
        )
        insert = f"INSERT OR REPLACE INTO responses({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        with self._locked() as db:
            if key not in self._held:
                db.execute(insert, row)
            else:
                with write_transaction(db):
                    db.execute(insert, row)
                    db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, self.owner))
                self._held.discard(key)
            self.writes += 1
        return True

    def put_many(self, entries: list[dict[str, Any]]) -> int:
        """Store several answers in one transaction (all or none); each entry has the keyword
        arguments of :meth:`put` plus ``key``. Returns how many were written (0 in ``replay`` and
        ``off`` modes). Raises ValueError, before writing anything, if a request carries a
        credential-like field."""
        if not self.writes_enabled or not entries:
            return 0
        rows = []
        for e in entries:
            secret = _find_secret_field(e["request"])
            if secret is not None:
                raise ValueError(f"refusing to cache a request with a credential-like field: {secret}")
            usage = e.get("usage") or Usage()
            rows.append((e["key"], e["identity"], e["prompt"], canonical_json(e["request"]),
                         canonical_json(e["response"]), int(usage.prompt_tokens), int(usage.completion_tokens),
                         _now()))
        with self._locked() as db:
            with write_transaction(db):
                db.executemany(
                    f"INSERT OR REPLACE INTO responses({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
            self.writes += len(rows)
        return len(rows)

    def find(self, key: str, *, accept: Callable[[CacheEntry], bool] | None = None) -> CacheEntry | None:
        """The usable entry under ``key`` (``accept`` may refuse one), counted as a hit when there
        is one; a miss is not counted (the caller looks elsewhere next: listwise judging looks up
        a chunk's verdict under its pointwise and its listwise key). None in ``off`` mode; in
        ``refresh`` mode only an answer written after :attr:`started`."""
        if self.mode == "off":
            return None
        since = self.started if self.mode == "refresh" else None
        with self._locked() as db:
            entry = self._lookup(db, key, since, accept)
        if entry is not None:
            self._count(entry)
        return entry

    def has_prompt(self, prompt: str) -> bool:
        """Whether any stored answer was made with the prompt ``prompt`` (``name@version``)."""
        if self.mode == "off":
            return False
        with self._locked() as db:
            return db.execute("SELECT 1 FROM responses WHERE prompt = ? LIMIT 1", (prompt,)).fetchone() is not None

    def peek(self, key: str) -> CacheEntry | None:
        """The entry under ``key`` without counting a hit or a miss (batch planning); in
        ``refresh`` mode only one written after :attr:`started`. Always None in ``off`` mode."""
        if self.mode == "off":
            return None
        since = self.started if self.mode == "refresh" else None
        with self._locked() as db:
            return self._lookup(db, key, since)

    def __len__(self) -> int:
        with self._locked() as db:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    # -- endpoint capabilities ----------------------------------------------------------------

    def get_format(self, endpoint: str) -> str | None:
        """The structured-output format remembered for ``endpoint`` (``json_schema``,
        ``json_object`` or ``text``), or None. Not consulted in ``off`` mode."""
        if self.mode == "off":
            return None
        with self._locked() as db:
            row = db.execute("SELECT format FROM endpoint_formats WHERE endpoint = ?", (endpoint,)).fetchone()
        return row[0] if row and row[0] in FORMATS else None

    def set_format(self, endpoint: str, fmt: str) -> None:
        """Remember that ``endpoint`` works with ``fmt``. A no-op in ``replay`` and ``off``."""
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}")
        if self.mode in ("replay", "off"):
            return
        with self._locked() as db:
            db.execute(
                "INSERT OR REPLACE INTO endpoint_formats(endpoint, format, updated) VALUES (?, ?, ?)",
                (endpoint, fmt, _now()),
            )

    def formats(self) -> dict[str, str]:
        """All remembered endpoint formats."""
        with self._locked() as db:
            return dict(db.execute("SELECT endpoint, format FROM endpoint_formats").fetchall())

    def clear_formats(self, endpoint: str | None = None) -> int:
        """Forget what was learnt about endpoints (all, or one): their formats and request
        parameters (:meth:`get_params`), e.g. after upgrading a server. Returns the rows deleted."""
        deleted = 0
        with self._locked() as db:
            for table in ("endpoint_formats", "endpoint_params"):
                if endpoint is None:
                    cur = db.execute(f"DELETE FROM {table}")
                else:
                    cur = db.execute(f"DELETE FROM {table} WHERE endpoint = ?", (endpoint,))
                deleted += cur.rowcount
        return deleted

    def get_params(self, endpoint: str) -> dict[str, str | None] | None:
        """The request parameters remembered for ``endpoint``: parameter -> the name it is sent as,
        or None when it is not sent (``{"max_tokens": "max_completion_tokens", "temperature":
        None}``); ``{}`` when the endpoint took every parameter as it was; None when nothing is
        remembered. Not consulted in ``off`` mode."""
        if self.mode == "off":
            return None
        with self._locked() as db:
            row = db.execute("SELECT params FROM endpoint_params WHERE endpoint = ?", (endpoint,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
        ):
            return None  # damaged: probe again
        return value

    def set_params(self, endpoint: str, params: dict[str, str | None]) -> None:
        """Remember the request parameters of ``endpoint`` (see :meth:`get_params`). A no-op in
        ``replay`` and ``off``."""
        if self.mode in ("replay", "off"):
            return
        with self._locked() as db:
            db.execute(
                "INSERT OR REPLACE INTO endpoint_params(endpoint, params, updated) VALUES (?, ?, ?)",
                (endpoint, canonical_json(params), _now()),
            )

    def params(self) -> dict[str, dict[str, str | None]]:
        """All remembered endpoint parameters."""
        with self._locked() as db:
            rows = db.execute("SELECT endpoint, params FROM endpoint_params").fetchall()
        return {endpoint: json.loads(params) for endpoint, params in rows}

    # -- batches ------------------------------------------------------------------------------

    def add_batch(self, batch: dict[str, Any], items: list[dict[str, Any]]) -> None:
        """Record a batch (``id``, ``kind``, ``endpoint``, ``identity``; state ``created``) and its
        items (``key``, ``identity``, ``prompt``, ``request``, ``inputs``, ``body``; state
        ``pending``) in one transaction. Works in every mode but ``off`` (it is an explicit
        request). Raises ValueError if a request or body carries a credential-like field."""
        now = _now()
        rows = []
        for item in items:
            for name in ("request", "body"):
                secret = _find_secret_field(item[name])
                if secret is not None:
                    raise ValueError(f"refusing to store a batch {name} with a credential-like field: {secret}")
            rows.append((batch["id"], item["key"], item["identity"], item["prompt"], canonical_json(item["request"]),
                         canonical_json(item["inputs"]), canonical_json(item["body"]), "pending"))
        with self._locked() as db:
            with write_transaction(db):
                db.execute(
                    "INSERT INTO batches(id, kind, endpoint, identity, state, created, updated) "
                    "VALUES (?, ?, ?, ?, 'created', ?, ?)",
                    (batch["id"], batch["kind"], batch["endpoint"], batch["identity"], now, now),
                )
                db.executemany("INSERT INTO batch_items(batch, key, identity, prompt, request, inputs, body, state) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def update_batch(self, batch_id: str, **fields: Any) -> None:
        """Set columns of a batches row (``state``, ``input_file``, ``remote_id``, ``status``,
        ``counts``: a dict, stored as JSON); committed at once."""
        allowed = {"state", "input_file", "remote_id", "status", "counts"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown batch fields {sorted(unknown)}")
        values = {k: canonical_json(v) if k == "counts" and v is not None else v for k, v in fields.items()}
        sets = ", ".join(f"{k} = ?" for k in values)
        with self._locked() as db:
            db.execute(f"UPDATE batches SET {sets}, updated = ? WHERE id = ?", (*values.values(), _now(), batch_id))

    def batches(self, *, kind: str | None = None, endpoint: str | None = None,
                open_only: bool = False) -> list[dict[str, Any]]:
        """Batch rows (dicts of :data:`BATCH_COLUMNS`, ``counts`` decoded), oldest first;
        ``open_only``: those not done or failed."""
        sql, args = _where(f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches WHERE 1 = 1",
                           {"kind": kind, "endpoint": endpoint})
        if open_only:
            sql += f" AND state NOT IN ({', '.join('?' for _ in BATCH_FINAL)})"
            args.extend(BATCH_FINAL)
        sql += " ORDER BY created, id"
        with self._locked() as db:
            rows = db.execute(sql, args).fetchall()
        out = []
        for row in rows:
            batch = dict(zip(BATCH_COLUMNS, row, strict=True))
            batch["counts"] = json.loads(batch["counts"]) if batch["counts"] else None
            out.append(batch)
        return out

    def batch_items(self, batch_id: str | None = None, *, key: str | None = None,
                    state: str | None = None) -> list[dict[str, Any]]:
        """Items of one batch, or every item recorded for ``key`` (newest batch first), optionally
        only those in ``state``; ``request``, ``inputs`` and ``body`` decoded."""
        sql, args = _where("SELECT i.batch, i.key, i.identity, i.prompt, i.request, i.inputs, i.body, i.state "
                           "FROM batch_items i JOIN batches b ON b.id = i.batch WHERE 1 = 1",
                           {"i.batch": batch_id, "i.key": key, "i.state": state})
        sql += " ORDER BY b.created DESC, i.batch, i.rowid"
        with self._locked() as db:
            rows = db.execute(sql, args).fetchall()
        names = ("batch", "key", "identity", "prompt", "request", "inputs", "body", "state")
        out = []
        for row in rows:
            item = dict(zip(names, row, strict=True))
            for name in ("request", "inputs", "body"):
                item[name] = json.loads(item[name])
            out.append(item)
        return out

    def set_item_states(self, batch_id: str, states: dict[str, str]) -> None:
        """Set the state (``answered``, ``failed``, ``pending``) of items of a batch, by key."""
        with self._locked() as db:
            with write_transaction(db):
                db.executemany("UPDATE batch_items SET state = ? WHERE batch = ? AND key = ?",
                               [(state, batch_id, key) for key, state in states.items()])

    # -- management ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """What the file holds and what this process got from it.

        ``rows``; ``by_identity`` and ``by_prompt`` (row counts); ``prompt_tokens`` and
        ``completion_tokens`` stored (what one full reuse of every row saves); ``file_bytes``
        (database plus its WAL); ``formats`` (remembered endpoint formats); ``params`` (remembered
        request parameters); ``claims`` (keys being asked right now, or left by a crashed process
        until taken over); ``batches`` (batch rows by state); ``session``: hits,
        misses, writes and ``tokens_saved`` by hits in this process.
        """
        with self._locked() as db:
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
            params = {e: json.loads(p) for e, p in db.execute("SELECT endpoint, params FROM endpoint_params")}
            claims = int(db.execute("SELECT COUNT(*) FROM claims").fetchone()[0])
            batches = dict(db.execute("SELECT state, COUNT(*) FROM batches GROUP BY state ORDER BY state").fetchall())
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
            "params": params,
            "claims": claims,
            "batches": batches,
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
        sql = f"SELECT {_ENTRY_COLUMNS} FROM responses"
        args: tuple[Any, ...] = ()
        if identity is not None:
            sql += " WHERE identity = ?"
            args = (identity,)
        sql += " ORDER BY key"
        with self._locked() as db:
            rows = db.execute(sql, args).fetchall()
        return [_entry(r) for r in rows]

    def export_jsonl(self, dest: str | Path | IO[str], *, identity: str | None = None) -> int:
        """Write every entry (or one identity's) as JSON lines, ordered by key; returns the count.
        ``dest`` is a path or a text stream."""
        entries = self.entries(identity)
        lines = "".join(json.dumps(e.to_json(), ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
        if isinstance(dest, (str, Path)):
            write_text(dest, lines, option="OUT")  # a temporary sibling renamed into place
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
            text = read_text_file(src)
        else:
            path = getattr(src, "name", None)
            text = src.read()
        rows: list[tuple[Any, ...]] = []
        for lineno, line in enumerate(io.StringIO(text), start=1):
            if not line.strip():
                continue
            rows.append(self._validate_line(line, lineno, path))
        with self._locked() as db:
            before = db.total_changes
            with write_transaction(db):
                db.executemany(
                    f"INSERT OR IGNORE INTO responses({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
            return db.total_changes - before

    @staticmethod
    def _validate_line(line: str, lineno: int, path: str | None) -> tuple[Any, ...]:
        def bad(msg: str, fld: str | None = None) -> InputError:
            return InputError(msg, path=path, line=lineno, field=fld)

        obj = json_object_line(line, lineno, path)
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
        with self._locked() as db:
            if identity is None:
                cur = db.execute("DELETE FROM responses")
            else:
                cur = db.execute("DELETE FROM responses WHERE identity = ?", (identity,))
            return cur.rowcount
