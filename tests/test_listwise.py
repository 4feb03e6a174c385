"""Listwise judging (prompt judge_chunks, ``--listwise B``): several chunks of one question in one
call, each chunk's verdict cached on its own, so answers and the cache are interchangeable with
judging one chunk per call. Over real HTTP against the scripted server, through the real openai
client."""

from __future__ import annotations

import asyncio
from pathlib import Path

from judge_eval.cache import ResponseCache
from judge_eval.evaluation import evaluate
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.judge.prompts import load_prompt
from judge_eval.testing.scripted_server import ScriptedServer
from tests.judge_helpers import BANK_CHUNKS, BANK_QUESTION, BANK_STATEMENTS, bank_dataset, bank_scenario

CHUNKS = [BANK_CHUNKS[c] for c in ("c7", "c2", "c9", "c4", "c1")]


def judge_of(server: ScriptedServer, cache: ResponseCache | None) -> OpenAIJudge:
    return OpenAIJudge("scripted-judge", base_url=server.base_url, api_key="k", cache=cache, max_attempts=2,
                       retry_base_wait=0.01)


def listwise(server: ScriptedServer, cache: ResponseCache | None, chunks=CHUNKS) -> list:
    async def go():
        judge = judge_of(server, cache)
        try:
            return await judge.judge_chunks(BANK_QUESTION, BANK_STATEMENTS, list(chunks))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def pointwise(server: ScriptedServer, cache: ResponseCache | None, chunks=CHUNKS) -> list:
    async def go():
        judge = judge_of(server, cache)
        try:
            return [await judge.judge_chunk(BANK_QUESTION, BANK_STATEMENTS, c) for c in chunks]
        finally:
            await judge.aclose()

    return asyncio.run(go())


def prompts_sent(server: ScriptedServer) -> list[str | None]:
    return [r["prompt"] for r in server.requests if r["status"] == 200]


def test_listwise_and_pointwise_give_the_same_verdicts_in_one_call(tmp_path: Path) -> None:
    with ScriptedServer(bank_scenario()) as server:
        alone = pointwise(server, None)
        server.reset_log()
        together = listwise(server, ResponseCache(tmp_path / "c.sqlite"))
        assert prompts_sent(server) == ["judge_chunks@1"]  # five chunks, one call
    assert [r.value for r in together] == [r.value for r in alone]
    assert [r.calls for r in together] == [1, 0, 0, 0, 0]  # the call is reported once
    assert together[0].usage.prompt_tokens > 0 and not any(r.cache_hit for r in together)


def test_a_listwise_answer_fills_the_per_chunk_cache_that_pointwise_judging_reads(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ScriptedServer(bank_scenario()) as server:
        together = listwise(server, cache)
        assert len(cache) == len(CHUNKS)  # one row per chunk, none for the call as a whole
        server.reset_log()
        alone = pointwise(server, cache)
        assert server.completions == 0  # every chunk from the listwise rows
        # and any other batch of the same chunks: nothing asked again
        assert all(r.cache_hit for r in listwise(server, cache, CHUNKS[:2]) + listwise(server, cache, CHUNKS[::-1]))
        assert server.completions == 0
    assert [r.value for r in alone] == [r.value for r in together] and all(r.cache_hit for r in alone)
    assert {e.prompt for e in cache.entries()} == {"judge_chunks@1"}


def test_pointwise_answers_are_read_by_listwise_judging_chunk_by_chunk(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ScriptedServer(bank_scenario()) as server:
        alone = pointwise(server, cache, CHUNKS[:3])
        server.reset_log()
        together = listwise(server, cache)
        # the three judged alone are hits; the two others go in one listwise call
        assert prompts_sent(server) == ["judge_chunks@1"]
        sent = server.requests[0]["body"]["messages"]
        assert load_prompt("judge_chunks").parse(sent)["chunks"] == CHUNKS[3:]
    assert [r.cache_hit for r in together] == [True, True, True, False, False]
    assert [r.value for r in together[:3]] == [r.value for r in alone]


def test_one_chunk_left_needs_no_listwise_call(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ScriptedServer(bank_scenario()) as server:
        pointwise(server, cache, CHUNKS[:4])
        server.reset_log()
        listwise(server, cache)
        assert prompts_sent(server) == ["judge_chunk@1"]


def test_a_chunk_missing_from_the_listwise_answer_is_judged_alone_never_defaulted(tmp_path: Path) -> None:
    missing = CHUNKS[1]  # c2: supports statement 1, grade 3 (a default would be grade 0, no support)
    with ScriptedServer(bank_scenario()) as server:
        expected = pointwise(server, None)
    cache = ResponseCache(tmp_path / "c.sqlite")
    with ScriptedServer(bank_scenario(), listwise_omit=[missing]) as server:
        got = listwise(server, cache)
        assert prompts_sent(server) == ["judge_chunks@1", "judge_chunk@1"]
        fallback = load_prompt("judge_chunk").parse(server.requests[1]["body"]["messages"])
        assert fallback["chunk"] == missing
    assert [r.value for r in got] == [r.value for r in expected]
    assert got[1].value.grade == 3 and got[1].value.supports
    assert sum(r.calls for r in got) == 2
    # the fallback is stored under its pointwise key: a second run asks nothing
    with ScriptedServer(bank_scenario(), listwise_omit=[missing]) as server:
        assert all(r.cache_hit for r in listwise(server, cache)) and server.completions == 0


def test_listwise_runs_share_the_cache_with_pointwise_runs_and_score_the_same(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with ScriptedServer(bank_scenario()) as server:
        kw = dict(judge="openai", model="scripted-judge", base_url=server.base_url, ks=(5,), n_boot=50)
        one = evaluate(bank_dataset(), cache=str(tmp_path / "one.sqlite"), **kw)
        server.reset_log()
        four = evaluate(bank_dataset(), cache=str(cache), listwise=4, **kw)
        assert server.completions == 1 + 2  # the decomposition, 4 chunks in one call, 1 in another
        assert four.accounting.calls == 3 and four.prompts["judge_chunks"] == "judge_chunks@1"
        server.reset_log()
        again = evaluate(bank_dataset(), cache=str(cache), **kw)  # B = 1 on the B = 4 cache
        assert server.completions == 0 and again.accounting.cache_hits == 6
    for a, b in ((one, four), (one, again)):
        assert a.per_question.equals(b.per_question)
        assert a.verdicts.equals(b.verdicts)


def test_cached_prompt_tokens_are_counted_when_the_api_reports_them(tmp_path: Path) -> None:
    long_question = BANK_QUESTION + " " + "Please consider every detail of the loan terms. " * 100
    with ScriptedServer(bank_scenario(), prompt_cache=True) as server:
        async def go():
            judge = judge_of(server, None)
            try:
                return await judge.judge_chunks(long_question, BANK_STATEMENTS, CHUNKS[:2]), \
                    await judge.judge_chunks(long_question, BANK_STATEMENTS, CHUNKS[2:4])
            finally:
                await judge.aclose()

        first, second = asyncio.run(go())
        # the instructions, the question and the statements come first: the second call of the
        # question starts with the same 1024+ tokens, which the provider serves from its cache
        assert first[0].usage.cached_tokens == 0
        assert 1024 <= second[0].usage.cached_tokens < second[0].usage.prompt_tokens
        assert server.cached_tokens == second[0].usage.cached_tokens


def test_the_runner_groups_only_the_chunks_not_yet_cached(tmp_path: Path) -> None:
    cache = str(tmp_path / "c.sqlite")
    with ScriptedServer(bank_scenario()) as server:
        kw = dict(judge="openai", model="scripted-judge", base_url=server.base_url, ks=(5,), n_boot=50, cache=cache)
        evaluate(bank_dataset(["c7", "c2", "c9", "c4", "c1"]), listwise=4, **kw)
        server.reset_log()
        # c7 c2 c9 c4 are cached: only c8 is new, asked alone, whatever its rank
        evaluate(bank_dataset(["c7", "c8", "c2", "c9", "c4"]), listwise=4, **kw)
        assert prompts_sent(server) == ["judge_chunk@1"]
        server.reset_log()
        evaluate(bank_dataset(["c8", "c2", "c7", "c4", "c1"]), listwise=2, **kw)
        assert server.completions == 0
