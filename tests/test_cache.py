"""The SQLite response cache: keys, modes, durability, concurrency, export/import, stats."""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import signal
import sqlite3
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from judge_eval.cache import CacheError, ResponseCache, cache_key, canonical_json
from judge_eval.errors import InputError, JudgeEvalError
from judge_eval.judge.protocol import Usage

ROOT = Path(__file__).resolve().parents[1]


def request(i: int = 0, **extra) -> dict:
    req = {
        "identity": "openai:api.example.com/m",
        "prompt": "decompose@1",
        "model": "m",
        "messages": [{"role": "user", "content": f"question {i} — é"}],
        "temperature": 0.0,
        "top_p": None,
        "seed": 0,
        "max_tokens": 64,
        "response_format": {"type": "json_object"},
        "sample": 0,
    }
    req.update(extra)
    return req


def put(cache: ResponseCache, i: int, *, identity: str = "openai:api.example.com/m", prompt: str = "decompose@1",
        usage: Usage | None = None) -> str:
    req = request(i, identity=identity, prompt=prompt)
    key = cache_key(req)
    cache.put(key, identity=identity, prompt=prompt, request=req,
              response={"statements": [f"s{i}"]}, usage=usage or Usage(10 + i, 2))
    return key


# -- keys ---------------------------------------------------------------------------------------


def test_canonical_json_and_key_are_order_independent_and_hand_checkable():
    a = {"b": 1, "a": "é", "c": [1, {"y": 2, "x": None}]}
    b = {"c": [1, {"x": None, "y": 2}], "a": "é", "b": 1}
    text = '{"a":"é","b":1,"c":[1,{"x":null,"y":2}]}'
    assert canonical_json(a) == canonical_json(b) == text
    assert cache_key(a) == cache_key(b) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert cache_key({"a": 1}) != cache_key({"a": 1.5})


def test_nan_is_refused_in_keys():
    with pytest.raises(ValueError):
        cache_key({"temperature": float("nan")})


# -- rows ---------------------------------------------------------------------------------------


def test_put_get_round_trip_and_miss(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    key = put(cache, 1, usage=Usage(11, 3))
    entry = cache.get(key)
    assert entry is not None
    assert entry.key == key
    assert entry.identity == "openai:api.example.com/m"
    assert entry.prompt == "decompose@1"
    assert entry.request == request(1)
    assert entry.response == {"statements": ["s1"]}
    assert entry.usage == Usage(11, 3)
    assert entry.created.endswith("+00:00")
    assert cache.get("0" * 64) is None
    assert len(cache) == 1


def test_rows_are_committed_immediately_and_file_is_wal(tmp_path):
    path = tmp_path / "c.db"
    cache = ResponseCache(path)
    key = put(cache, 1)
    # another connection sees the row while the cache is still open: nothing is pending
    other = sqlite3.connect(path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        row = other.execute(
            "SELECT identity, prompt, request, response FROM responses WHERE key = ?", (key,)
        ).fetchone()
    finally:
        other.close()
    assert row[0] == "openai:api.example.com/m"
    assert row[1] == "decompose@1"
    assert json.loads(row[2]) == request(1)
    assert row[2] == canonical_json(request(1))
    assert json.loads(row[3]) == {"statements": ["s1"]}


def test_put_refuses_credential_fields(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    req = request(1, extra_headers={"Authorization": "Bearer sk-x"})
    with pytest.raises(ValueError, match="extra_headers"):
        cache.put(cache_key(req), identity="i", prompt="p@1", request=req, response={})
    req = request(1, api_key="sk-x")
    with pytest.raises(ValueError, match="api_key"):
        cache.put(cache_key(req), identity="i", prompt="p@1", request=req, response={})
    assert len(cache) == 0


def test_unknown_mode_is_input_error(tmp_path):
    with pytest.raises(InputError, match="cache mode"):
        ResponseCache(tmp_path / "c.db", mode="sometimes")  # type: ignore[arg-type]


# -- modes --------------------------------------------------------------------------------------


def test_refresh_mode_never_reads_but_writes(tmp_path):
    path = tmp_path / "c.db"
    key = put(ResponseCache(path), 1)
    refresh = ResponseCache(path, mode="refresh")
    assert refresh.get(key) is None
    req = request(1)
    assert refresh.put(key, identity="x", prompt="decompose@1", request=req, response={"statements": ["new"]})
    assert ResponseCache(path).get(key).response == {"statements": ["new"]}


def test_replay_mode_reads_but_never_writes(tmp_path):
    path = tmp_path / "c.db"
    key = put(ResponseCache(path), 1)
    replay = ResponseCache(path, mode="replay")
    assert replay.get(key).response == {"statements": ["s1"]}
    req = request(2)
    assert not replay.put(cache_key(req), identity="x", prompt="decompose@1", request=req, response={})
    replay.set_format("http://h/v1 m", "text")
    assert len(replay) == 1
    assert replay.get_format("http://h/v1 m") is None


def test_off_mode_touches_nothing(tmp_path):
    path = tmp_path / "sub" / "c.db"
    off = ResponseCache(path, mode="off")
    req = request(1)
    assert off.get(cache_key(req)) is None
    assert not off.put(cache_key(req), identity="x", prompt="decompose@1", request=req, response={})
    off.set_format("http://h/v1 m", "text")
    assert off.get_format("http://h/v1 m") is None
    assert not path.exists()


# -- endpoint formats ---------------------------------------------------------------------------


def test_endpoint_format_is_remembered_across_instances(tmp_path):
    path = tmp_path / "c.db"
    ResponseCache(path).set_format("http://127.0.0.1:8080/v1 llama", "text")
    again = ResponseCache(path)
    assert again.get_format("http://127.0.0.1:8080/v1 llama") == "text"
    assert again.get_format("https://api.openai.com/v1 gpt") is None
    again.set_format("http://127.0.0.1:8080/v1 llama", "json_object")
    assert ResponseCache(path).formats() == {"http://127.0.0.1:8080/v1 llama": "json_object"}
    with pytest.raises(ValueError):
        again.set_format("x", "xml")
    assert again.clear_formats() == 1
    assert again.formats() == {}


# -- stats, clear -------------------------------------------------------------------------------


def test_stats_counts_rows_tokens_and_session(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    k1 = put(cache, 1, identity="a", prompt="decompose@1", usage=Usage(100, 10))
    put(cache, 2, identity="a", prompt="judge_chunk@1", usage=Usage(200, 20))
    put(cache, 3, identity="b", prompt="judge_chunk@1", usage=Usage(300, 30))
    cache.set_format("http://h/v1 m", "json_schema")
    assert cache.get(k1) is not None
    assert cache.get(k1) is not None
    assert cache.get("f" * 64) is None
    s = cache.stats()
    assert s["rows"] == 3
    assert s["by_identity"] == {"a": 2, "b": 1}
    assert s["by_prompt"] == {"decompose@1": 1, "judge_chunk@1": 2}
    assert (s["prompt_tokens"], s["completion_tokens"], s["total_tokens"]) == (600, 60, 660)
    assert s["formats"] == {"http://h/v1 m": "json_schema"}
    assert s["file_bytes"] > 0
    assert s["session"] == {
        "hits": 2, "misses": 1, "writes": 3,
        "tokens_saved": 220, "prompt_tokens_saved": 200, "completion_tokens_saved": 20,
    }


def test_clear_all_or_one_identity(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    for i in range(3):
        put(cache, i, identity="a")
    put(cache, 9, identity="b")
    assert cache.clear("a") == 3
    assert cache.stats()["by_identity"] == {"b": 1}
    assert cache.clear() == 1
    assert len(cache) == 0


# -- export / import ----------------------------------------------------------------------------


def test_export_import_round_trip_is_idempotent(tmp_path):
    src = ResponseCache(tmp_path / "a.db")
    keys = sorted(put(src, i, identity="a" if i % 2 else "b") for i in range(5))
    out = tmp_path / "dump.jsonl"
    assert src.export_jsonl(out) == 5
    lines = out.read_text("utf-8").splitlines()
    assert [json.loads(line)["key"] for line in lines] == keys  # ordered by key

    dst = ResponseCache(tmp_path / "b.db")
    assert dst.import_jsonl(out) == 5
    assert dst.import_jsonl(out) == 0  # idempotent
    assert [e.to_json() for e in dst.entries()] == [e.to_json() for e in src.entries()]

    stream = io.StringIO()
    assert dst.export_jsonl(stream, identity="a") == 2
    assert all(json.loads(line)["identity"] == "a" for line in stream.getvalue().splitlines())


def test_import_validates_every_line_and_imports_nothing_on_error(tmp_path):
    src = ResponseCache(tmp_path / "a.db")
    put(src, 1)
    put(src, 2)
    good = io.StringIO()
    src.export_jsonl(good)
    first, second = good.getvalue().splitlines()
    dst = ResponseCache(tmp_path / "b.db")

    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(first + "\n{not json\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        dst.import_jsonl(bad_json)
    assert err.value.line == 2 and err.value.path == str(bad_json)
    assert len(dst) == 0  # the good first line was not imported either

    tampered = json.loads(second)
    tampered["request"]["temperature"] = 1.0
    with pytest.raises(InputError) as err:
        dst.import_jsonl(io.StringIO(first + "\n\n" + json.dumps(tampered) + "\n"))
    assert (err.value.line, err.value.field) == (3, "key")

    missing = json.loads(first)
    del missing["response"]
    with pytest.raises(InputError) as err:
        dst.import_jsonl(io.StringIO(json.dumps(missing)))
    assert (err.value.line, err.value.field) == (1, "response")

    secret = json.loads(first)
    secret["request"]["api_key"] = "sk-leak"
    secret["key"] = cache_key(secret["request"])
    with pytest.raises(InputError) as err:
        dst.import_jsonl(io.StringIO(json.dumps(secret)))
    assert err.value.field == "request.api_key"

    negative = json.loads(first)
    negative["usage"]["prompt_tokens"] = -1
    with pytest.raises(InputError) as err:
        dst.import_jsonl(io.StringIO(json.dumps(negative)))
    assert err.value.field == "usage.prompt_tokens"

    with pytest.raises(InputError, match="not found"):
        dst.import_jsonl(tmp_path / "nope.jsonl")
    assert len(dst) == 0


# -- concurrency and durability -----------------------------------------------------------------


def test_many_threads_share_one_cache(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")

    def work(i: int) -> bool:
        key = put(cache, i)
        return cache.get(key) is not None

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(work, range(200)))
    assert len(cache) == 200


def _writer(path: str, start: int, n: int) -> None:
    cache = ResponseCache(path)
    for i in range(start, start + n):
        put(cache, i)
    cache.close()


def test_two_processes_write_the_same_file(tmp_path):
    path = str(tmp_path / "c.db")
    ResponseCache(path).stats()  # create the file first
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, k * 1000, 60)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    cache = ResponseCache(path)
    assert len(cache) == 120
    assert cache.get(cache_key(request(1059))) is not None


def test_sigkilled_process_loses_nothing_already_stored(tmp_path):
    path = tmp_path / "c.db"
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from judge_eval.cache import ResponseCache
        from test_cache import put
        cache = ResponseCache({str(path)!r})
        for i in range(25):
            put(cache, i)
        print("stored", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.strip() == "stored"
    cache = ResponseCache(path)
    assert len(cache) == 25
    assert cache.get(cache_key(request(24))).response == {"statements": ["s24"]}


# -- bad cache files: one clear CacheError naming the file --------------------------------------


def _every_use(cache: ResponseCache, tmp_path: Path) -> list:
    """Every public operation, each a thunk, for asserting they all raise CacheError."""
    return [
        cache.check,
        lambda: cache.get("0" * 64),
        lambda: put(cache, 1),
        cache.stats,
        lambda: cache.export_jsonl(tmp_path / "out.jsonl"),
        lambda: cache.import_jsonl(io.StringIO("")),
        cache.clear,
        lambda: len(cache),
        lambda: cache.get_format("http://h/v1 m"),
    ]


def _assert_cache_errors(cache: ResponseCache, tmp_path: Path, match: str) -> None:
    for use in _every_use(cache, tmp_path):
        with pytest.raises(CacheError, match=match) as err:
            use()
        assert isinstance(err.value, JudgeEvalError)  # the CLI turns it into one message, exit 2
        assert str(cache.path) in str(err.value)
        assert "--cache" in str(err.value)  # says what to do


def test_a_file_that_is_not_sqlite_is_a_cache_error(tmp_path):
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database, just some bytes \x00\xff" * 200)
    _assert_cache_errors(ResponseCache(path), tmp_path, "not an SQLite database")
    _assert_cache_errors(ResponseCache(path, create=False), tmp_path, "not an SQLite database")
    assert path.read_bytes().startswith(b"this is not a database")  # left untouched


def test_a_corrupted_database_is_a_cache_error(tmp_path):
    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        for i in range(300):
            put(cache, i)
    assert not Path(str(path) + "-wal").exists()  # checkpointed into the main file on close
    data = bytearray(path.read_bytes())
    assert len(data) > 16 * 4096
    middle = len(data) // 2 // 4096 * 4096
    data[middle:middle + 3 * 4096] = b"\xa5" * (3 * 4096)  # three pages in the middle
    path.write_bytes(bytes(data))
    cache = ResponseCache(path)
    with pytest.raises(CacheError, match="corrupted") as err:
        cache.check()  # eager: before any paid call
    assert str(path) in str(err.value) and "move it aside" in str(err.value)
    with pytest.raises(CacheError, match="corrupted"):
        cache.export_jsonl(tmp_path / "out.jsonl")  # a full read reaches the damaged pages


def test_a_directory_is_a_cache_error(tmp_path):
    path = tmp_path / "adir"
    path.mkdir()
    _assert_cache_errors(ResponseCache(path), tmp_path, "is a directory")
    with pytest.raises(CacheError, match="is a directory"):
        ResponseCache(path, create=False)


def test_a_foreign_sqlite_database_is_a_cache_error(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    _assert_cache_errors(ResponseCache(path), tmp_path, "not a judge-eval cache")
    con = sqlite3.connect(path)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["people"]  # not modified
    con.close()


def test_create_false_opens_only_an_existing_cache_and_creates_nothing(tmp_path):
    missing = tmp_path / "new" / "dir" / "x.sqlite"
    with pytest.raises(CacheError, match="no cache at") as err:
        ResponseCache(missing, create=False)
    assert str(missing) in str(err.value)
    assert not (tmp_path / "new").exists()
    path = tmp_path / "c.sqlite"
    put(ResponseCache(path), 1)
    cache = ResponseCache(path, create=False)
    cache.check()
    assert cache.stats()["rows"] == 1
    path.unlink()  # gone between construction and first use: still not created
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    late = ResponseCache(tmp_path / "late.sqlite", create=True)
    late.check()
    late.close()
    gone = ResponseCache(tmp_path / "late.sqlite", create=False)
    (tmp_path / "late.sqlite").unlink()
    with pytest.raises(CacheError, match="no cache at"):
        gone.stats()
    assert not (tmp_path / "late.sqlite").exists()


def test_an_uncreatable_location_is_a_cache_error(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    cache = ResponseCache(blocker / "sub" / "c.sqlite")  # a directory under a regular file
    with pytest.raises(CacheError, match="cannot create its directory") as err:
        cache.check()
    assert str(blocker / "sub" / "c.sqlite") in str(err.value)


def test_a_file_locked_past_the_busy_timeout_is_a_cache_error(tmp_path):
    path = tmp_path / "c.sqlite"
    ResponseCache(path).check()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        cache = ResponseCache(path, busy_timeout=0.2)
        assert cache.get("0" * 64) is None  # readers are not blocked (WAL)
        with pytest.raises(CacheError, match="locked by another process") as err:
            put(cache, 1)
        assert str(path) in str(err.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    put(cache, 1)  # usable again once the lock is gone


def test_check_accepts_a_good_cache_and_a_new_file(tmp_path):
    ResponseCache(tmp_path / "deep" / "new.sqlite").check()  # created, with its directory
    assert (tmp_path / "deep" / "new.sqlite").exists()
    ResponseCache(tmp_path / "unused.sqlite", mode="off").check()  # off: never opened
    assert not (tmp_path / "unused.sqlite").exists()
