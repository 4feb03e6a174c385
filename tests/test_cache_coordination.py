"""Cross-process coordination through the cache's claims table: two processes on one cache file
pay each unique judge task once; dead or expired claims are taken over; waiters get the other
process's answer as a cache hit."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from judge_eval.cache import CacheEntry, Claim, ResponseCache, cache_key
from judge_eval.data.load import load_dataset
from judge_eval.errors import JudgeCallError
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.judge.prompts import load_prompt
from judge_eval.judge.protocol import Usage
from judge_eval.testing.scripted_server import Fault, Scenario, ScriptedServer

from judge_helpers import offline_scenario

REFERENCE = "The tower is 330 m tall. It was completed in 1889."
STATEMENTS = ["The tower is 330 m tall.", "It was completed in 1889."]


def make_judge(server: ScriptedServer, cache: ResponseCache, **kw) -> OpenAIJudge:
    kw.setdefault("retry_base_wait", 0.005)
    kw.setdefault("max_retry_wait", 0.2)
    kw.setdefault("timeout", 5.0)
    return OpenAIJudge("scripted-judge", base_url=server.base_url, api_key="k", cache=cache, **kw)


def decompose_key(judge: OpenAIJudge, reference: str = REFERENCE) -> str:
    return cache_key(judge.key_request(judge.request(load_prompt("decompose"), {"reference": reference})))


def store(cache: ResponseCache, judge: OpenAIJudge, statements: list[str], reference: str = REFERENCE) -> str:
    """Write an answer for decompose(reference) the way the judge would."""
    prompt = load_prompt("decompose")
    request = judge.key_request(judge.request(prompt, {"reference": reference}))
    key = cache_key(request)
    cache.put(key, identity=judge.identity, prompt=prompt.id, request=request,
              response={"statements": statements}, usage=Usage(7, 3))
    return key


def insert_claim(path: Path, key: str, owner: str, expires: float) -> None:
    import sqlite3

    con = sqlite3.connect(path)
    try:
        con.execute("INSERT OR REPLACE INTO claims(key, owner, expires) VALUES (?, ?, ?)", (key, owner, expires))
        con.commit()
    finally:
        con.close()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid no longer exists
    return proc.pid


# -- claims: take over, wait, release ----------------------------------------------------------


def _open_at_the_barrier(path: str, barrier) -> str:
    barrier.wait()
    try:
        ResponseCache(path).check()
    except Exception as exc:  # reported to the test, which names it
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_processes_opening_a_new_cache_file_at_once_all_succeed(tmp_path):
    # the schema is made in one transaction under the write lock: a process must never see
    # another's half-made schema (it refused the file as "not a judge-eval cache")
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(6) as pool:
        for attempt in range(4):
            barrier = manager.Barrier(6)
            path = str(tmp_path / f"new-{attempt}.sqlite")
            results = pool.starmap(_open_at_the_barrier, [(path, barrier)] * 6)
            assert results == ["ok"] * 6, results
            assert len(ResponseCache(path)) == 0


def test_a_claim_held_by_a_dead_process_is_taken_over_at_once(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    cache.check()
    key = "a" * 64
    insert_claim(path, key, f"{socket.gethostname()}:{dead_pid()}:feedbeef", time.time() + 3600)
    started = time.monotonic()
    assert cache.try_acquire(key) is True
    assert time.monotonic() - started < 1.0
    assert cache.claims() == [(key, cache.owner, pytest.approx(time.time() + cache.lease, abs=5))]


def test_an_expired_lease_is_taken_over_and_a_live_one_is_not(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    cache.check()
    expired, live = "b" * 64, "c" * 64
    # another host: its pid cannot be checked, only its lease counts
    insert_claim(path, expired, "elsewhere.example:4242:0001", time.time() - 1)
    insert_claim(path, live, "elsewhere.example:4242:0001", time.time() + 3600)
    assert cache.try_acquire(expired) is True
    assert cache.try_acquire(live) is False
    # this process, another ResponseCache: alive (same host, our own pid)
    other = ResponseCache(path)
    assert other.try_acquire(expired) is False
    cache.release(expired)
    assert other.try_acquire(expired) is True


def test_a_waiter_returns_the_other_owners_answer_as_a_cache_hit(tmp_path):
    path = tmp_path / "c.sqlite"
    with ScriptedServer(Scenario(decompositions={REFERENCE: ["never asked"]})) as server:
        holder = ResponseCache(path)
        holder_judge = make_judge(server, holder)
        key = decompose_key(holder_judge)
        assert holder.try_acquire(key) is True  # "another process" is asking for this key

        def answer_later() -> None:
            time.sleep(0.4)
            store(holder, holder_judge, STATEMENTS)  # stores and releases in one transaction

        waiter_cache = ResponseCache(path)
        judge = make_judge(server, waiter_cache)
        thread = threading.Thread(target=answer_later)
        thread.start()
        started = time.monotonic()
        resp = asyncio.run(judge.decompose(REFERENCE))
        waited = time.monotonic() - started
        thread.join()
        assert resp.cache_hit and resp.calls == 0
        assert resp.value.statements == STATEMENTS
        assert resp.saved_usage == Usage(7, 3)
        assert waited >= 0.3  # it really waited for the other owner
        assert server.requests == []  # and never asked the server itself
        assert holder.claims() == []
        assert waiter_cache.stats()["session"]["hits"] == 1


def test_a_task_waiting_for_another_process_gives_its_slot_to_the_next_task(tmp_path):
    """--concurrency 1, and the first reference is being asked by "another process": the runner
    asks for the second one meanwhile instead of sitting in its only slot."""
    from judge_eval.plan import Plan
    from judge_eval.run import Runner, run_plan

    path = tmp_path / "c.sqlite"
    other = "Paris is the capital of France."
    with ScriptedServer(Scenario(decompositions={REFERENCE: ["never asked"], other: [other]})) as server:
        holder = ResponseCache(path)
        holder_judge = make_judge(server, holder)
        assert holder.try_acquire(decompose_key(holder_judge)) is True  # the other process's claim
        seen_first: list[bool] = []

        def answer_when_the_other_task_ran() -> None:
            deadline = time.monotonic() + 5
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            seen_first.append(bool(server.requests))  # asked while the first task waited?
            store(holder, holder_judge, STATEMENTS)

        thread = threading.Thread(target=answer_when_the_other_task_ran)
        thread.start()
        judge = make_judge(server, ResponseCache(path))
        outcome = run_plan(Runner(judge, concurrency=1), Plan(references=[REFERENCE, other]))
        thread.join()
    assert seen_first == [True]
    assert [r["body"]["messages"][-1]["content"].count(other) > 0 for r in server.requests] == [True]
    assert outcome.statements == {REFERENCE: STATEMENTS, other: [other]}
    assert (outcome.accounting.calls, outcome.accounting.cache_hits, outcome.accounting.done) == (1, 1, 2)


def test_a_waiter_asks_itself_when_the_other_owner_gives_up(tmp_path):
    path = tmp_path / "c.sqlite"
    with ScriptedServer(Scenario(decompositions={REFERENCE: STATEMENTS})) as server:
        holder = ResponseCache(path)
        key = decompose_key(make_judge(server, holder))
        assert holder.try_acquire(key) is True
        threading.Timer(0.3, holder.release, args=(key,)).start()  # the other one failed
        judge = make_judge(server, ResponseCache(path))
        resp = asyncio.run(judge.decompose(REFERENCE))
        assert not resp.cache_hit and resp.calls == 1
        assert resp.value.statements == STATEMENTS
        assert len(server.requests) == 1
        assert holder.claims() == []  # released with the stored answer


def test_the_lease_is_renewed_while_the_call_is_in_flight(tmp_path):
    path = tmp_path / "c.sqlite"
    # a 0.3 s lease and a server that takes 1.2 s: without renewal the key would be free
    with ScriptedServer(Scenario(decompositions={REFERENCE: STATEMENTS}), latency=1.2) as server:
        cache = ResponseCache(path, lease=0.3)
        judge = make_judge(server, cache)
        key = decompose_key(judge)
        other = ResponseCache(path)

        async def main():
            task = asyncio.create_task(judge.decompose(REFERENCE))
            while not other.claims():
                await asyncio.sleep(0.01)
            seen = []
            for _ in range(8):
                await asyncio.sleep(0.1)
                seen.append(other.try_acquire(key))
            return await task, seen

        resp, seen = asyncio.run(main())
        assert seen == [False] * 8  # never free while the call ran (0.8 s > 2 leases)
        assert resp.calls == 1 and not resp.cache_hit
        assert other.claims() == []


def test_a_claim_is_released_on_failure_and_on_cancellation(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    with ScriptedServer(Scenario(), faults=[Fault("400", share=1.0, times=10**9)]) as server:
        with pytest.raises(JudgeCallError) as err:
            asyncio.run(make_judge(server, cache).decompose(REFERENCE))
        assert err.value.cause == "http_400"
        assert cache.claims() == []
    with ScriptedServer(Scenario(), latency=30) as server:
        judge = make_judge(server, cache, timeout=60)

        async def main():
            task = asyncio.create_task(judge.decompose(REFERENCE))
            while not cache.claims():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert cache.claims() == []


def test_refresh_waits_for_a_fresh_answer_and_never_takes_an_old_one(tmp_path):
    path = tmp_path / "c.sqlite"
    with ScriptedServer(Scenario(decompositions={REFERENCE: ["asked by refresh"]})) as server:
        old = ResponseCache(path)
        old_judge = make_judge(server, old)
        store(old, old_judge, ["old answer"])
        time.sleep(0.01)

        refresh = ResponseCache(path, mode="refresh")
        judge = make_judge(server, refresh)
        # a concurrent refresh run is asking; its answer comes after this refresh run started
        holder = ResponseCache(path, mode="refresh")
        key = decompose_key(old_judge)
        assert holder.try_acquire(key) is True
        threading.Timer(0.3, store, args=(holder, old_judge, ["fresh answer"])).start()
        resp = asyncio.run(judge.decompose(REFERENCE))
        assert resp.cache_hit and resp.calls == 0
        assert resp.value.statements == ["fresh answer"]
        assert server.requests == []

        # without a claimant, refresh asks again: the stored answer predates this run
        again = make_judge(server, ResponseCache(path, mode="refresh"))
        resp = asyncio.run(again.decompose(REFERENCE))
        assert not resp.cache_hit and resp.calls == 1
        assert resp.value.statements == ["asked by refresh"]


def test_replay_and_off_modes_take_no_claims(tmp_path):
    path = tmp_path / "c.sqlite"
    ResponseCache(path).check()
    replay = ResponseCache(path, mode="replay")
    got = asyncio.run(replay.acquire("d" * 64))
    assert isinstance(got, Claim) and not got.active
    off = ResponseCache(tmp_path / "never.sqlite", mode="off")
    got = asyncio.run(off.acquire("d" * 64))
    assert isinstance(got, Claim) and not got.active
    assert not (tmp_path / "never.sqlite").exists()
    assert ResponseCache(path).claims() == []


def test_an_answer_stored_between_look_and_claim_is_returned_not_claimed(tmp_path):
    path = tmp_path / "c.sqlite"
    with ScriptedServer(Scenario()) as server:
        cache = ResponseCache(path)
        judge = make_judge(server, cache)
        key = store(ResponseCache(path), judge, STATEMENTS)
        got = cache.try_acquire(key)
        assert isinstance(got, CacheEntry) and got.response == {"statements": STATEMENTS}
        assert cache.claims() == []
        # an answer the caller cannot use (accept=False) is asked again
        assert cache.try_acquire(key, accept=lambda e: False) is True


# -- two real `score` processes on one cache file ----------------------------------------------


def write_dataset(root: Path, n_questions: int = 20, n_chunks: int = 14) -> dict[str, Path]:
    """Questions whose references decompose into 2-3 statements, and a TREC run with
    ``n_chunks`` distinct chunks per question (no chunk shared): n_questions * (1 + n_chunks)
    unique judge tasks."""
    questions, corpus, run = [], [], []
    for q in range(1, n_questions + 1):
        facts = [f"Item {q} weighs {q * 3} kg.", f"Item {q} was made in {1900 + q}.", f"Item {q} is painted blue."]
        questions.append({"id": f"q{q}", "question": f"What do we know about item {q}?",
                          "reference": " ".join(facts[: 2 + q % 2])})
        for c in range(1, n_chunks + 1):
            cid = f"q{q}c{c}"
            text = facts[c % 3] if c <= 3 else f"Note {c} about item {q}: nothing relevant here ({cid})."
            corpus.append({"id": cid, "text": f"{text} [{cid}]"})
            run.append(f"q{q} Q0 {cid} {c} {100 - c} sys")
    paths = {"questions": root / "questions.jsonl", "corpus": root / "corpus.jsonl", "run": root / "sys.trec"}
    paths["questions"].write_text("".join(json.dumps(x) + "\n" for x in questions))
    paths["corpus"].write_text("".join(json.dumps(x) + "\n" for x in corpus))
    paths["run"].write_text("\n".join(run) + "\n")
    return paths


def test_two_score_processes_on_one_cache_pay_each_task_once(tmp_path):
    paths = write_dataset(tmp_path)
    ds = load_dataset(paths["questions"], {"sys": paths["run"]}, corpus=paths["corpus"])
    unique_chunks = {
        (ds.questions[q].question, c.text) for r in ds.runs.values() for q, cs in r.rankings.items() for c in cs
    }
    n_tasks = len(ds.questions) + len(unique_chunks)
    assert n_tasks == 300
    env = dict(os.environ, OPENAI_API_KEY="sk-test")
    # latency so the two runs overlap for their whole length
    with ScriptedServer(offline_scenario(ds, depth=14), latency=0.03) as server:
        cmd = [
            sys.executable, "-m", "judge_eval.cli", "score",
            "--data", str(paths["questions"]), "--corpus", str(paths["corpus"]), "--run", f"sys={paths['run']}",
            "--judge", "openai", "--model", "m", "--base-url", server.base_url, "-k", "14",
            "--cache", str(tmp_path / "shared.sqlite"), "--no-progress", "--format", "json",
        ]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (_, err) in zip(procs, outs, strict=False):
            assert p.returncode == 0, err
        assert all(r["fault"] is None and r["status"] == 200 for r in server.requests)
        assert len(server.requests) == server.completions == 300  # every unique task paid exactly once
        assert max(server.served_keys.values()) == 1
    results = [json.loads(out) for out, _ in outs]
    assert results[0]["summary"] == results[1]["summary"]  # the same numbers
    accounting = [r["accounting"] for r in results]
    assert all(a["calls"] > 0 for a in accounting)  # they really ran side by side
    assert sum(a["calls"] for a in accounting) == 300
    assert sum(a["cache_hits"] for a in accounting) == 300  # each got the other's answers as hits
    assert all(a["errors"] == 0 for a in accounting)
    assert ResponseCache(tmp_path / "shared.sqlite").claims() == []
