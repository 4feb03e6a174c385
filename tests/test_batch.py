"""Batch mode: ``score --batch openai`` through the OpenAI Batch API, and ``batch export`` /
``batch import`` for an engine elsewhere (vLLM's run-batch reads the same file). Against the
scripted server's files and batches endpoints, through the real openai client."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from judge_eval.cache import ResponseCache
from judge_eval.errors import InputError, JudgeUnavailableError
from judge_eval.evaluation import evaluate
from judge_eval.judge.batch import import_results
from judge_eval.run import Pricing
from judge_eval.testing.scripted_server import ScriptedServer

from judge_helpers import MINI, offline_scenario

RUNS = {name: MINI / "runs" / f"{name}.trec" for name in ("bm25", "dense")}
K = 2
SECRET = "sk-test-SECRET-batch"


@pytest.fixture(scope="module")
def scenario():
    from judge_eval.data.load import load_dataset

    ds = load_dataset(MINI / "questions.jsonl", RUNS, corpus=MINI / "corpus.jsonl")
    return offline_scenario(ds, depth=K)


def run_eval(server: ScriptedServer, cache: Path, **kw):
    return evaluate(MINI / "questions.jsonl", RUNS, MINI / "qrels.txt", corpus=MINI / "corpus.jsonl", judge="openai",
                    model="gpt-judge", base_url=server.base_url, ks=[K], cache=cache, **kw)


@pytest.fixture(scope="module")
def sync_results(scenario, tmp_path_factory):
    with ScriptedServer(scenario) as server:
        results = run_eval(server, tmp_path_factory.mktemp("sync") / "cache.sqlite")
    assert results.accounting.errors == 0
    return results


def same_numbers(a, b) -> None:
    pd.testing.assert_frame_equal(a.summary, b.summary)
    pd.testing.assert_frame_equal(a.per_question, b.per_question)


def paid(server: ScriptedServer) -> Counter:
    """Answers paid for, by messages key: synchronous requests and batch lines together."""
    return server.served_keys + server.batch_served


def test_a_batch_run_equals_the_synchronous_run_at_half_the_price(scenario, sync_results, tmp_path: Path) -> None:
    with ScriptedServer(scenario) as server:
        results = run_eval(server, tmp_path / "cache.sqlite", batch="openai", batch_poll=0.01,
                           pricing=Pricing(2.0, 8.0))
        assert server.completions == 1  # the probe: the endpoint's format is learnt before the batch
        assert len(server.batches) == 2  # the decompositions, then the chunk tasks
        assert max(paid(server).values()) == 1
        a = results.accounting
        assert sum(paid(server).values()) == a.tasks
        batch_usage, sync_usage = server.batch_usage, server.usage
    same_numbers(results, sync_results)
    assert (a.calls, a.batch_calls, a.cache_hits, a.errors) == (a.tasks, a.tasks - 1, 0, 0)
    assert a.batches == sorted(server.batches, key=lambda b: server.batches[b]["seq"])
    assert a.usage.prompt_tokens == batch_usage["prompt_tokens"] + sync_usage["prompt_tokens"]
    assert a.usage.completion_tokens == batch_usage["completion_tokens"] + sync_usage["completion_tokens"]
    expected = ((batch_usage["prompt_tokens"] * 2.0 + batch_usage["completion_tokens"] * 8.0) / 2
                + sync_usage["prompt_tokens"] * 2.0 + sync_usage["completion_tokens"] * 8.0) / 1e6
    assert a.cost == pytest.approx(expected, rel=1e-12)
    # every answer is in the cache: a rerun without --batch asks nothing
    with ScriptedServer(scenario) as server:
        again = run_eval(server, tmp_path / "cache.sqlite")
        assert server.requests == [] and again.accounting.cache_hits == again.accounting.tasks
    same_numbers(again, sync_results)


def test_expired_items_are_asked_synchronously_never_dropped(scenario, sync_results, tmp_path: Path) -> None:
    with ScriptedServer(scenario, batch_outcome="expire") as server:
        results = run_eval(server, tmp_path / "cache.sqlite", batch="openai", batch_poll=0.01)
        statuses = {b["status"] for b in server.batches.values()}
        assert statuses == {"expired"}
        assert max(paid(server).values()) == 1
        assert sum(server.batch_served.values()) == results.accounting.batch_calls > 0
        assert server.completions == results.accounting.calls - results.accounting.batch_calls > 1
    assert results.accounting.errors == 0
    same_numbers(results, sync_results)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    states = Counter(item["state"] for b in cache.batches() for item in cache.batch_items(b["id"]))
    assert states["failed"] > 0 and states["answered"] == results.accounting.batch_calls


def test_a_failed_batch_is_reported_and_a_rerun_judges_everything(scenario, sync_results, tmp_path: Path) -> None:
    with ScriptedServer(scenario, batch_outcome="fail") as server:
        with pytest.raises(JudgeUnavailableError) as info:
            run_eval(server, tmp_path / "cache.sqlite", batch="openai", batch_poll=0.01)
        (batch_id,) = server.batches
        assert sum(server.batch_served.values()) == 0 and server.completions == 1  # only the probe
    assert info.value.cause == "batch_failed" and batch_id in str(info.value)
    assert [b["state"] for b in ResponseCache(tmp_path / "cache.sqlite").batches()] == ["failed"]
    with ScriptedServer(scenario) as server:
        results = run_eval(server, tmp_path / "cache.sqlite", batch="openai", batch_poll=0.01)
        assert max(paid(server).values()) == 1
    assert results.accounting.errors == 0
    same_numbers(results, sync_results)


def test_a_reasoning_model_is_probed_once_and_its_batch_lines_take_its_parameters(scenario, tmp_path: Path) -> None:
    with ScriptedServer(scenario, reasoning_model=True) as server:
        results = run_eval(server, tmp_path / "cache.sqlite", batch="openai", batch_poll=0.01)
        assert [r["status"] for r in server.requests] == [400, 400, 200]  # max_tokens, temperature, answered
        bodies = [line["body"] for b in server.batches.values() for line in b["lines"]]
    assert results.accounting.errors == 0 and results.accounting.batch_calls == len(bodies)
    assert all("max_tokens" not in b and "temperature" not in b and b["max_completion_tokens"] == 1024
               for b in bodies)


# ----------------------------------------------------------------------------- killed while polling


def score_cmd(server: ScriptedServer, tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(MINI / "questions.jsonl"),
            "--corpus", str(MINI / "corpus.jsonl"), "--qrels", str(MINI / "qrels.txt"),
            *(a for name, path in RUNS.items() for a in ("--run", f"{name}={path}")),
            "--model", "gpt-judge", "--base-url", server.base_url, "-k", str(K), "--cache", str(tmp / "cache.sqlite"),
            "--no-progress", "--format", "json", "--batch", "openai", "--batch-poll", "0.02", *extra]


def env() -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": SECRET}


def batch_rows(path: Path) -> list[tuple]:
    if not path.exists():
        return []
    con = sqlite3.connect(path, timeout=5)
    try:
        return con.execute("SELECT id, state, input_file, remote_id FROM batches ORDER BY created").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def kill_while_polling(server: ScriptedServer, tmp: Path) -> str:
    """Start a batch run, SIGKILL it once its batch was polled twice; the batch id it recorded."""
    proc = subprocess.Popen(score_cmd(server, tmp), env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (len(server.batches) == 1 and next(iter(server.batches.values()))["polls"] >= 2):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the run never polled its batch"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    (row,) = batch_rows(tmp / "cache.sqlite")
    (remote,) = server.batches
    assert row[1:] == ("submitted", server.batches[remote]["input_file_id"], remote)  # recorded as soon as it existed
    return remote


def test_sigkill_while_polling_then_the_rerun_polls_the_same_batch_and_pays_nothing_twice(
        scenario, sync_results, tmp_path: Path) -> None:
    with ScriptedServer(scenario, batch_hold=True) as server:
        remote = kill_while_polling(server, tmp_path)
        assert server.batches[remote]["status"] == "in_progress" and sum(server.batch_served.values()) == 0
        probe = server.completions
        server.release_batches()
        polls = [r["path"] for r in server.api_requests]
        rerun = subprocess.run(score_cmd(server, tmp_path), env=env(), capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        after = [r for r in server.api_requests[len(polls):]]
        # the rerun's first request is a look at the batch the killed run created: no new upload for it
        assert after[0]["method"] == "GET" and after[0]["path"] == f"/v1/batches/{remote}"
        assert f"resuming batch {remote}" in rerun.stderr
        assert len(server.batches) == 2 and server.completions == probe  # the chunk batch; no synchronous call
        ids = [line["custom_id"] for b in server.batches.values() for line in b["lines"]]
        assert len(ids) == len(set(ids))  # no task was put in two batches
        assert max(paid(server).values()) == 1
        a = json.loads(rerun.stdout)["accounting"]
        assert sum(paid(server).values()) == a["tasks"]
    assert remote in a["batches"] and a["errors"] == 0
    assert a["batch_calls"] == a["tasks"] - probe and a["cache_hits"] == probe  # the probe was paid by the killed run
    summary = pd.DataFrame(json.loads(rerun.stdout)["summary"])
    expected = json.loads(sync_results.summary.to_json(orient="records"))
    assert json.loads(summary.to_json(orient="records")) == expected


def test_a_batch_created_by_a_run_killed_before_it_recorded_the_id_is_found_by_its_metadata(
        scenario, tmp_path: Path) -> None:
    with ScriptedServer(scenario, batch_hold=True) as server:
        remote = kill_while_polling(server, tmp_path)
        con = sqlite3.connect(tmp_path / "cache.sqlite")
        with con:  # as if the kill came between creating the batch and recording its id
            con.execute("UPDATE batches SET remote_id = NULL, state = 'uploaded'")
        con.close()
        server.release_batches()
        rerun = subprocess.run(score_cmd(server, tmp_path), env=env(), capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert len(server.batches) == 2 and max(paid(server).values()) == 1
    assert batch_rows(tmp_path / "cache.sqlite")[0][3] == remote


# ----------------------------------------------------------------------------- export / import


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judge_eval.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env(), **kw)


def export_args(server: ScriptedServer, tmp: Path, out: Path) -> list[str]:
    return ["batch", "export", "--data", str(MINI / "questions.jsonl"), "--corpus", str(MINI / "corpus.jsonl"),
            *(a for name, path in RUNS.items() for a in ("--run", f"{name}={path}")), "--model", "gpt-judge",
            "--base-url", server.base_url, "-k", str(K), "--cache", str(tmp / "cache.sqlite"), "--out", str(out)]


def test_export_answer_elsewhere_import_then_score_makes_no_call(scenario, sync_results, tmp_path: Path) -> None:
    with ScriptedServer(scenario) as server:
        # round 1: the decompositions (the chunk tasks need their statements)
        first = cli(*export_args(server, tmp_path, tmp_path / "r1.jsonl"))
        assert first.returncode == 0, first.stderr
        assert "wait for their reference's statements" in first.stderr
        lines = [json.loads(x) for x in (tmp_path / "r1.jsonl").read_text().splitlines()]
        assert {(x["method"], x["url"]) for x in lines} == {("POST", "/v1/chat/completions")}
        assert all(x["body"]["model"] == "gpt-judge" and len(x["custom_id"]) == 64 for x in lines)
        assert server.run_batch_file(tmp_path / "r1.jsonl", tmp_path / "a1.jsonl") == len(lines)
        imported = cli("batch", "import", str(tmp_path / "a1.jsonl"), "--cache", str(tmp_path / "cache.sqlite"))
        assert imported.returncode == 0, imported.stderr
        assert f"{len(lines)} answers stored" in imported.stderr
        # round 2: the chunk tasks
        second = cli(*export_args(server, tmp_path, tmp_path / "r2.jsonl"))
        assert second.returncode == 0 and "wait" not in second.stderr, second.stderr
        n2 = server.run_batch_file(tmp_path / "r2.jsonl", tmp_path / "a2.jsonl")
        loaded = cli("batch", "import", str(tmp_path / "a2.jsonl"), "--cache", str(tmp_path / "cache.sqlite"))
        assert loaded.returncode == 0, loaded.stderr
        third = cli(*export_args(server, tmp_path, tmp_path / "r3.jsonl"))
        assert "nothing to export" in third.stderr and not (tmp_path / "r3.jsonl").exists()
        # score: every answer is in the cache
        result = cli("score", "--data", str(MINI / "questions.jsonl"), "--corpus", str(MINI / "corpus.jsonl"),
                     "--qrels", str(MINI / "qrels.txt"),
                     *(a for name, path in RUNS.items() for a in ("--run", f"{name}={path}")),
                     "--model", "gpt-judge", "--base-url", server.base_url, "-k", str(K),
                     "--cache", str(tmp_path / "cache.sqlite"), "--format", "json", "--no-progress")
        assert result.returncode == 0, result.stderr
        assert server.requests == [] and server.api_requests == []
    a = json.loads(result.stdout)["accounting"]
    assert (a["calls"], a["errors"], a["cache_hits"]) == (0, 0, a["tasks"]) and a["tasks"] == len(lines) + n2
    expected = json.loads(sync_results.summary.to_json(orient="records"))
    assert json.loads(pd.DataFrame(json.loads(result.stdout)["summary"]).to_json(orient="records")) == expected


@pytest.fixture
def exported(scenario, tmp_path: Path):
    """A cache with exported decompositions and the engine's answers to them."""
    with ScriptedServer(scenario) as server:
        assert cli(*export_args(server, tmp_path, tmp_path / "r1.jsonl")).returncode == 0
        server.run_batch_file(tmp_path / "r1.jsonl", tmp_path / "a1.jsonl")
    return tmp_path / "cache.sqlite", (tmp_path / "a1.jsonl").read_text().splitlines()


@pytest.mark.parametrize("mangle, line, field, words", [
    (lambda rows: rows[:2] + ["{not json"] + rows[2:], 3, None, "invalid JSON"),
    (lambda rows: rows + ["[1, 2]"], "last", None, "expected a JSON object"),
    (lambda rows: [json.dumps({**json.loads(rows[0]), "custom_id": 7}), *rows[1:]], 1, "custom_id", "string"),
    (lambda rows: [*rows, json.dumps({**json.loads(rows[0]), "custom_id": "f" * 64})], "last", "custom_id",
     "not a request exported from this cache"),
    (lambda rows: [*rows, rows[0]], "last", "custom_id", "again (first on line 1)"),
    (lambda rows: [json.dumps({**json.loads(rows[0]), "response": {"status_code": 200, "body": {"choices": []}}}),
                   *rows[1:]], 1, "response.body.choices", "missing or empty"),
    (lambda rows: [json.dumps({**json.loads(rows[0]), "response": {"status_code": "200"}}), *rows[1:]], 1,
     "response.status_code", "integer"),
])
def test_import_names_the_bad_line_and_stores_nothing(exported, mangle, line, field, words, tmp_path: Path) -> None:
    cache_path, rows = exported
    bad = mangle(list(rows))
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(bad) + "\n")
    with pytest.raises(InputError) as info:
        import_results(ResponseCache(cache_path), src)
    err = info.value
    assert err.line == (len(bad) if line == "last" else line) and err.field == field and words in str(err)
    assert str(src) in str(err)
    assert len(ResponseCache(cache_path)) == 0
    result = cli("batch", "import", str(src), "--cache", str(cache_path))
    assert result.returncode == 2 and f"line {err.line}" in result.stderr
    assert len(ResponseCache(cache_path)) == 0


def test_failed_and_invalid_results_stay_pending_for_score(exported, scenario, tmp_path: Path) -> None:
    cache_path, rows = exported
    first, second, third, *rest = [json.loads(r) for r in rows]
    second = {**second, "response": {"status_code": 400, "body": {"error": {"message": "no"}}}}
    third = {**third, "response": None, "error": {"code": "batch_expired", "message": "expired"}}
    body = first["response"]["body"]
    first = {**first, "response": {**first["response"], "body": {
        **body, "choices": [{**body["choices"][0], "message": {"role": "assistant", "content": "not json"}}]}}}
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in [first, second, third, *rest]))
    report = import_results(ResponseCache(cache_path), src)
    assert report.stored == len(rest) and report.already == 0
    assert report.not_answered == Counter({"invalid_output": 1, "http_400": 1, "expired": 1})
    again = import_results(ResponseCache(cache_path), src)  # idempotent
    assert (again.stored, again.already) == (0, len(rest))
    # a following score asks the three left (and every chunk task) synchronously, and nothing else
    with ScriptedServer(scenario) as server:
        results = evaluate(MINI / "questions.jsonl", RUNS, corpus=MINI / "corpus.jsonl", judge="openai",
                           model="gpt-judge", base_url=server.base_url, ks=[K], cache=cache_path, n_boot=50)
        decomposed = sum(1 for r in server.requests if r["kind"] == "decompose")
    assert decomposed == 3 and results.accounting.errors == 0
