"""The OpenAI-compatible judge against a real local HTTP server through its real HTTP client.

The server (judge_eval.testing.scripted_server) answers from a scenario table and injects faults
into a deterministic share of distinct requests. Backoffs are shortened (retry_base_wait) so the
file runs in seconds; no assertion depends on a sleep being short.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from judge_eval.cache import ResponseCache, cache_key
from judge_eval.errors import ConfigError, JudgeCallError
from judge_eval.judge.openai_judge import OpenAIJudge, _parse_retry_after, endpoint_identity
from judge_eval.judge.parsing import InvalidOutput, extract_json, parse_answer, strict_json_schema
from judge_eval.judge.prompts import load_prompt, render_decompose
from judge_eval.judge.protocol import ChunkVerdict, Statements, Support, Usage
from judge_eval.testing.scripted_server import (
    INVENTED_EVIDENCE,
    ChunkScript,
    Fault,
    Scenario,
    ScriptedServer,
    default_evidence,
)

SECRET = "sk-test-SECRET-123"

REFS = {
    "The Eiffel Tower is 330 m tall. It was completed in 1889.": [
        "The Eiffel Tower is 330 m tall.",
        "The Eiffel Tower was completed in 1889.",
    ],
    "Water boils at 100 °C at sea level.": ["Water boils at 100 °C at sea level."],
    "ISO 3166 code FR means France. DE means Germany.": [
        "ISO 3166 code FR means France.",
        "ISO 3166 code DE means Germany.",
    ],
    "Mount Everest is 8849 m high.": ["Mount Everest is 8849 m high."],
}
QUESTION = "Tell me the facts."
CHUNKS = {
    "The Eiffel Tower, completed in 1889, is 330 m tall.": ChunkScript(
        supports=["The Eiffel Tower is 330 m tall.", "The Eiffel Tower was completed in 1889."], grade=3
    ),
    "Height facts: the Eiffel Tower is 330 m tall.": ChunkScript(supports=["The Eiffel Tower is 330 m tall."], grade=2),
    "Paris has many museums.": ChunkScript(supports=[], grade=1),
    "At sea level, water boils at 100 °C.": ChunkScript(supports=["Water boils at 100 °C at sea level."], grade=3),
    "Country codes: FR means France; DE means Germany.": ChunkScript(
        supports=["ISO 3166 code FR means France.", "ISO 3166 code DE means Germany."], grade=3
    ),
    "Bananas are yellow.": ChunkScript(supports=[], grade=0),
    "Everest: 8849 m high, says the 2020 survey.": ChunkScript(supports=["Mount Everest is 8849 m high."], grade=3),
    "Tides follow the moon.": ChunkScript(supports=[], grade=0),
}
# every chunk is judged against every reference's statements: 4 decompose + 32 judge_chunk tasks
TASKS = [("decompose", ref) for ref in REFS] + [
    ("judge_chunk", ref, chunk) for ref in REFS for chunk in CHUNKS
]


def scenario() -> Scenario:
    return Scenario(decompositions=REFS, verdicts=CHUNKS, default_grade=0)


def make_judge(server: ScriptedServer, **kw) -> OpenAIJudge:
    kw.setdefault("api_key", SECRET)
    kw.setdefault("retry_base_wait", 0.005)
    kw.setdefault("max_retry_wait", 0.5)
    kw.setdefault("timeout", 5.0)
    return OpenAIJudge(kw.pop("model", "scripted-judge"), base_url=server.base_url, **kw)


async def _one(judge: OpenAIJudge, task: tuple):
    if task[0] == "decompose":
        return await judge.decompose(task[1])
    return await judge.judge_chunk(QUESTION, REFS[task[1]], task[2])


def run_tasks(judge: OpenAIJudge, tasks=TASKS) -> dict:
    """task -> JudgeResponse or the exception it raised (all tasks concurrently)."""

    async def main():
        try:
            out = await asyncio.gather(*(_one(judge, t) for t in tasks), return_exceptions=True)
        finally:
            await judge.aclose()
        return dict(zip(tasks, out, strict=False))

    return asyncio.run(main())


def call(judge: OpenAIJudge, make):
    """Run ``make()`` (a coroutine factory) in a fresh loop and close the judge's client."""

    async def main():
        try:
            return await make()
        finally:
            await judge.aclose()

    return asyncio.run(main())


def values(results: dict) -> dict:
    return {t: (r.value if not isinstance(r, BaseException) else r) for t, r in results.items()}


def expected_value(task: tuple):
    """The scripted answer, computed independently of the judge."""
    if task[0] == "decompose":
        return Statements(statements=REFS[task[1]])
    statements = REFS[task[1]]
    script = CHUNKS[task[2]]
    supports = [
        Support(statement=n, evidence=default_evidence(task[2], s))
        for n, s in enumerate(statements, start=1)
        if s in script.supports
    ]
    return ChunkVerdict(supports=supports, grade=script.grade, reason="")


def same_verdict(a, b) -> bool:
    if isinstance(a, Statements):
        return a == b
    return (a.supports, a.grade) == (b.supports, b.grade)


def requests_of(server: ScriptedServer) -> list[dict]:
    return [r for r in server.requests if r["path"].endswith("chat/completions")]


def is_repair(r: dict) -> bool:
    return len(r["body"]["messages"]) > 2


@pytest.fixture(scope="module")
def baseline() -> dict:
    with ScriptedServer(scenario()) as server:
        return values(run_tasks(make_judge(server)))


# -- the round trip -----------------------------------------------------------------------------


def test_round_trip_matches_the_script_and_accounts_calls_and_tokens(baseline):
    with ScriptedServer(scenario()) as server:
        results = run_tasks(make_judge(server))
        assert all(not isinstance(r, BaseException) for r in results.values())
        for task, r in results.items():
            assert same_verdict(r.value, expected_value(task)), task
            assert (r.calls, r.cache_hit) == (1, False)
        assert server.completions == len(TASKS)
        total = sum((r.usage for r in results.values()), Usage())
        assert total.prompt_tokens == server.usage["prompt_tokens"]
        assert total.completion_tokens == server.usage["completion_tokens"]
        # first-choice format against an OpenAI-like server: strict json_schema
        first = requests_of(server)[0]["body"]
        assert first["response_format"]["type"] == "json_schema"
        assert first["response_format"]["json_schema"]["strict"] is True
        assert first["temperature"] == 0.0 and first["seed"] == 0 and first["max_tokens"] == 1024
    assert baseline == values(results)


def test_environment_supplies_base_url_and_key(monkeypatch):
    with ScriptedServer(scenario(), api_key=SECRET) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        judge = OpenAIJudge("scripted-judge")
        assert judge.identity == "openai:localhost/scripted-judge"  # no port; loopback is localhost
        r = run_tasks(judge, TASKS[:1])[TASKS[0]]
        assert r.value == expected_value(TASKS[0])
        assert requests_of(server)[0]["headers"]["authorization"] == f"Bearer {SECRET}"


def test_openai_endpoint_without_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIJudge("gpt-4o-mini")
    judge = OpenAIJudge("gpt-4o-mini", api_key="k")
    assert judge.identity == "openai:api.openai.com/gpt-4o-mini"
    assert endpoint_identity("http://user:pw@LocalHost:8080/v1?x=1", "m") == "openai:localhost/m"


# -- transient faults: retried, results unchanged ------------------------------------------------


@pytest.mark.parametrize("kind", ["429", "500", "503", "hang", "drop"])
def test_transient_faults_are_retried_to_the_fault_free_result(kind, baseline):
    fault = Fault(kind, share=0.3, times=1, retry_after=0.01, hang_seconds=30)
    with ScriptedServer(scenario(), faults=[fault]) as server:
        judge = make_judge(server, timeout=0.5 if kind == "hang" else 5.0)
        results = run_tasks(judge)
        faulted = [r for r in requests_of(server) if r["fault"] == kind]
        assert 3 <= len(faulted) <= 25  # about 30% of 36 distinct requests
        assert values(results) == baseline
        # every faulted request was retried once: calls add up to the requests the server saw
        assert sum(r.calls for r in results.values()) == len(requests_of(server)) == len(TASKS) + len(faulted)
        assert sorted(e.cause for e in judge.retry_log) == sorted(
            {"429": "rate_limited", "500": "server_error", "503": "server_error",
             "hang": "timeout", "drop": "connection"}[kind] for _ in faulted
        )


@pytest.mark.parametrize("kind", ["malformed", "truncated", "wrong_schema"])
def test_bad_output_is_repaired_once(kind, baseline):
    with ScriptedServer(scenario(), faults=[Fault(kind, share=0.3, times=1)]) as server:
        results = run_tasks(make_judge(server))
        reqs = requests_of(server)
        primaries = [r for r in reqs if not is_repair(r) and r["fault"] == kind]
        repairs = [r for r in reqs if is_repair(r)]
        assert len(primaries) >= 3
        assert len(repairs) == len(primaries)  # exactly one repair per bad answer
        for r in repairs:
            msgs = r["body"]["messages"]
            assert msgs[2]["role"] == "assistant" and msgs[3]["role"] == "user"
            assert "could not be used" in msgs[3]["content"]
            assert msgs[1]["content"] in msgs[3]["content"]  # the task is restated
        # a repair is a new distinct request: the server may fault it too (deterministically);
        # those tasks fail with the fault's cause, all others equal the fault-free run
        failed_repairs = {r["key"] for r in repairs if r["fault"] == kind}
        errors = {t: r for t, r in results.items() if isinstance(r, BaseException)}
        assert len(errors) == len(failed_repairs)
        for err in errors.values():
            assert isinstance(err, JudgeCallError)
            assert err.cause == ("truncated" if kind == "truncated" else "invalid_output")
        assert len(errors) < len(primaries)  # some repairs succeeded
        for task, v in values(results).items():
            if task not in errors:
                assert v == baseline[task], task


def test_invented_evidence_is_passed_through_for_the_evidence_check():
    with ScriptedServer(scenario(), faults=[Fault("invented_evidence", share=1.0, times=1)]) as server:
        task = ("judge_chunk", next(iter(REFS)), next(iter(CHUNKS)))
        r = run_tasks(make_judge(server), [task])[task]
        assert r.calls == 1  # schema-valid: no repair; quotes are checked later, not here
        assert INVENTED_EVIDENCE in [s.evidence for s in r.value.supports]
        assert all(s in r.value.supports for s in expected_value(task).supports)


def test_statement_number_out_of_range_is_invalid_output():
    # with no statements, the invented-evidence claim names statement 1: out of range
    with ScriptedServer(scenario(), faults=[Fault("invented_evidence", share=1.0, times=1)]) as server:
        judge = make_judge(server)

        async def main():
            return await judge.judge_chunk(QUESTION, [], "Bananas are yellow.")

        with pytest.raises(JudgeCallError) as err:
            call(judge, main)
        assert err.value.cause == "invalid_output"
        assert "valid numbers are none" in str(err.value)
        assert len(requests_of(server)) == 2  # the answer and its one repair


# -- persistent faults: the right cause ---------------------------------------------------------


@pytest.mark.parametrize(
    "kind, cause, requests",
    [
        ("429", "rate_limited", 3),
        ("500", "server_error", 3),
        ("503", "server_error", 3),
        ("hang", "timeout", 3),
        ("drop", "connection", 3),
        ("malformed", "invalid_output", 2),
        ("wrong_schema", "invalid_output", 2),
        ("truncated", "truncated", 2),
        ("400", "http_400", 1),
        ("401", "http_401", 1),
    ],
)
def test_persistent_faults_raise_with_their_cause(kind, cause, requests):
    fault = Fault(kind, share=1.0, times=10**9, retry_after=0.01, hang_seconds=30)
    with ScriptedServer(scenario(), faults=[fault]) as server:
        cache = ResponseCache(":memory:")
        judge = make_judge(server, max_attempts=3, timeout=0.3 if kind == "hang" else 5.0, cache=cache)
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        assert err.value.cause == cause
        assert len(requests_of(server)) == requests  # 400/401 are never retried
        assert SECRET not in str(err.value)
        assert err.value.__cause__ is None and err.value.__suppress_context__
        assert len(cache) == 0  # errors are never cached


def test_client_errors_fail_only_their_tasks_and_are_not_cached(tmp_path, baseline):
    cache = ResponseCache(tmp_path / "c.db")
    with ScriptedServer(scenario(), faults=[Fault("400", share=0.3, times=1)]) as server:
        results = run_tasks(make_judge(server, cache=cache))
        errors = {t for t, r in results.items() if isinstance(r, JudgeCallError)}
        assert errors and all(results[t].cause == "http_400" for t in errors)
        faulted = [r for r in requests_of(server) if r["fault"] == "400"]
        assert len(faulted) == len(errors)  # one request each: not retried
        assert len(cache) == len(TASKS) - len(errors)
        # the next run asks only for the failed tasks (attempt 2 of those bodies is clean)
        before = len(requests_of(server))
        again = run_tasks(make_judge(server, cache=cache))
        assert len(requests_of(server)) - before == len(errors)
        assert values(again) == baseline


# -- Retry-After --------------------------------------------------------------------------------


def test_retry_after_is_honoured_and_capped():
    with ScriptedServer(scenario(), faults=[Fault("429", share=1.0, times=2, retry_after=0.2)]) as server:
        judge = make_judge(server, retry_base_wait=0.001, max_retry_wait=5.0)
        t0 = time.monotonic()
        r = call(judge, lambda: judge.decompose(next(iter(REFS))))
        elapsed = time.monotonic() - t0
        assert r.calls == 3
        assert [e.retry_after for e in judge.retry_log] == [0.2, 0.2]
        assert all(e.wait >= 0.2 and e.cause == "rate_limited" for e in judge.retry_log)
        assert elapsed >= 0.4  # a lower bound: the two waits really happened
    with ScriptedServer(scenario(), faults=[Fault("429", share=1.0, times=1, retry_after=30)]) as server:
        judge = make_judge(server, max_retry_wait=0.05)
        call(judge, lambda: judge.decompose(next(iter(REFS))))
        assert [e.retry_after for e in judge.retry_log] == [30.0]
        assert judge.retry_log[0].wait == 0.05


def test_retry_after_header_forms():
    import httpx2

    assert _parse_retry_after(httpx2.Headers({"retry-after-ms": "250"})) == 0.25
    assert _parse_retry_after(httpx2.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert _parse_retry_after(httpx2.Headers({"Retry-After": "1.5"})) == 1.5
    assert _parse_retry_after(httpx2.Headers({"Retry-After": "soon"})) is None
    assert _parse_retry_after(httpx2.Headers({"Retry-After": "-3"})) is None
    assert _parse_retry_after(httpx2.Headers({})) is None
    past = _parse_retry_after(httpx2.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}))
    assert past == 0.0


# -- structured-output fallback -----------------------------------------------------------------


def _formats(server: ScriptedServer) -> list[str]:
    return [(r["body"].get("response_format") or {}).get("type", "text") for r in requests_of(server)]


def test_format_fallback_chain_is_probed_once_and_remembered(tmp_path, baseline):
    cache = ResponseCache(tmp_path / "c.db")
    with ScriptedServer(scenario(), refuse_json_schema=True, refuse_json_object=True) as server:
        judge = make_judge(server, cache=cache)
        results = run_tasks(judge)
        assert values(results) == baseline  # text mode: JSON extracted from prose + fence
        fmts = _formats(server)
        # one task probes while the others wait: one refusal per refused format in total
        assert fmts[:2] == ["json_schema", "json_object"]
        assert fmts.count("json_schema") == 1 and fmts.count("json_object") == 1
        assert fmts.count("text") == len(TASKS)
        assert [r["status"] for r in requests_of(server)[:2]] == [400, 400]
        probe = next(r for r in results.values() if r.calls == 3)
        assert probe.calls == 3
        assert cache.get_format(judge.endpoint) == "text"

        # a second judge on the same cache (and new tasks): no json_schema attempt at all
        server.reset_log()
        second = make_judge(server, cache=cache)
        r = call(second, lambda: second.decompose("A brand new reference. Two sentences."))
        assert r.value.statements == ["A brand new reference.", "Two sentences."]
        assert _formats(server) == ["text"]
        # the answers found in text mode are cache hits for it
        server.reset_log()
        assert all(not isinstance(x, BaseException) and x.cache_hit for x in run_tasks(second).values())
        assert requests_of(server) == []


def test_json_object_when_only_json_schema_is_refused():
    with ScriptedServer(scenario(), refuse_json_schema=True) as server:
        judge = make_judge(server)  # no cache: remembered in memory
        run_tasks(judge, TASKS[:3])
        assert _formats(server) == ["json_schema", "json_object", "json_object", "json_object"]
        assert judge.current_format() == "json_object"


def test_a_fixed_format_is_not_walked_down():
    with ScriptedServer(scenario(), refuse_json_schema=True) as server:
        judge = make_judge(server, response_format="json_schema")
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        assert err.value.cause == "http_400"
        assert len(requests_of(server)) == 1


def test_strict_schema_is_valid_for_openai_strict_mode():
    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert sorted(node["required"]) == sorted(node["properties"])
            assert "$ref" not in node and "default" not in node
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for model in (Statements, ChunkVerdict):
        walk(strict_json_schema(model))
    schema = strict_json_schema(ChunkVerdict)
    assert schema["properties"]["grade"] == {"type": "integer", "enum": [0, 1, 2, 3]}
    assert schema["required"] == ["supports", "grade", "reason"]


# -- the cache ----------------------------------------------------------------------------------


def test_second_identical_call_is_a_cache_hit_without_requests(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    with ScriptedServer(scenario()) as server:
        first = run_tasks(make_judge(server, cache=cache))
        n = len(requests_of(server))
        again = run_tasks(make_judge(server, cache=cache))
        assert len(requests_of(server)) == n
        for task in TASKS:
            a, b = first[task], again[task]
            assert (b.cache_hit, b.calls, b.usage) == (True, 0, Usage())
            assert b.saved_usage == a.usage and b.value == a.value
        stats = cache.stats()
        assert stats["rows"] == len(TASKS)
        assert stats["by_prompt"] == {"decompose@1": 4, "judge_chunk@1": 32}
        assert stats["session"]["hits"] == len(TASKS)


class _OtherStatements(Statements):
    """The answer schema with one more field: a schema change must change the key."""

    note: str = ""


def test_cache_key_changes_with_everything_that_changes_the_answer():
    with ScriptedServer(scenario()) as server:
        base = make_judge(server)
        prompt = load_prompt("decompose")
        inputs = {"reference": "Some reference."}

        def key(judge=base, prompt=prompt, fmt="json_schema", sample=0, inputs=inputs):
            request = judge.request(prompt, inputs, sample)
            return cache_key(judge.key_request(request, judge.transport.key_fields(request, fmt)))

        variants = {
            "base": key(),
            "model": key(make_judge(server, model="other-model")),
            "prompt version": key(prompt=dataclasses.replace(prompt, version="2")),
            "temperature": key(make_judge(server, temperature=0.7)),
            "top_p": key(make_judge(server, top_p=0.9)),
            "seed": key(make_judge(server, seed=1)),
            "no seed": key(make_judge(server, seed=None)),
            "max_tokens": key(make_judge(server, max_tokens=256)),
            "json_object": key(fmt="json_object"),
            "text": key(fmt="text"),
            "sample": key(sample=1),
            "messages": key(inputs={"reference": "Another reference."}),
            "namespace": key(make_judge(server, namespace="team-judge")),
            "schema": key(prompt=dataclasses.replace(
                prompt, task=dataclasses.replace(prompt.task, output=_OtherStatements))),
        }
        assert len(set(variants.values())) == len(variants)
        # ... and not with the API key, the timeout or the retry settings
        assert key(make_judge(server, api_key="sk-other", timeout=1.0, max_attempts=2)) == variants["base"]
        request = base.key_request(base.request(prompt, inputs, 0))
        assert set(request) == {"identity", "prompt", "model", "messages", "temperature", "top_p", "seed",
                                "max_tokens", "response_format", "sample"}
        assert request["messages"] == render_decompose("Some reference.")


def test_samples_are_distinct_requests_with_distinct_seeds(tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    with ScriptedServer(scenario()) as server:
        judge = make_judge(server, cache=cache, seed=7)
        ref = next(iter(REFS))

        async def main():
            return [await judge.decompose(ref, sample=s) for s in range(3)]

        out = call(judge, main)
        assert [r.cache_hit for r in out] == [False, False, False]
        assert [r["body"]["seed"] for r in requests_of(server)] == [7, 8, 9]
        assert len(cache) == 3
        assert sorted(e.request["sample"] for e in cache.entries()) == [0, 1, 2]


def test_replay_miss_is_an_error_without_http(tmp_path):
    path = tmp_path / "c.db"
    with ScriptedServer(scenario()) as server:
        judge = make_judge(server, cache=ResponseCache(path, mode="replay"))
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        assert err.value.cause == "cache_miss"
        assert requests_of(server) == []
        # filled in use mode, replay then answers everything with no request
        run_tasks(make_judge(server, cache=ResponseCache(path)))
        server.reset_log()
        replayed = run_tasks(make_judge(server, cache=ResponseCache(path, mode="replay")))
        assert all(r.cache_hit for r in replayed.values())
        assert requests_of(server) == []


def test_refresh_mode_asks_again_and_overwrites(tmp_path):
    path = tmp_path / "c.db"
    tasks = TASKS[:5]
    with ScriptedServer(scenario()) as server:
        run_tasks(make_judge(server, cache=ResponseCache(path)), tasks)
        server.reset_log()
        refreshed = run_tasks(make_judge(server, cache=ResponseCache(path, mode="refresh")), tasks)
        assert len(requests_of(server)) == len(tasks)
        assert all(not r.cache_hit and r.calls == 1 for r in refreshed.values())
        assert len(ResponseCache(path)) == len(tasks)


def test_off_mode_never_touches_the_file(tmp_path):
    path = tmp_path / "c.db"
    with ScriptedServer(scenario()) as server:
        run_tasks(make_judge(server, cache=ResponseCache(path, mode="off")), TASKS[:3])
        run_tasks(make_judge(server, cache=ResponseCache(path, mode="off")), TASKS[:3])
        assert len(requests_of(server)) == 6
    assert not path.exists()


def test_export_import_then_replay_elsewhere(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with ScriptedServer(scenario(), refuse_json_schema=True) as server:
        cache_a = ResponseCache(a)
        first = run_tasks(make_judge(server, cache=cache_a, namespace="shared-judge"))
        dump = io.StringIO()
        assert cache_a.export_jsonl(dump) == len(TASKS)
        cache_b = ResponseCache(b)
        assert cache_b.import_jsonl(io.StringIO(dump.getvalue())) == len(TASKS)
        # the format is an endpoint property, not exported; replay asks the format it was told
        server.reset_log()
        replay = make_judge(server, cache=ResponseCache(b, mode="replay"), namespace="shared-judge",
                            response_format="json_object")
        again = run_tasks(replay)
        assert requests_of(server) == []
        assert values(again) == values(first)


def test_identity_has_no_port_and_every_loopback_spelling_is_localhost():
    for url in ["http://127.0.0.1:8080/v1", "http://127.0.0.1:9999/v1", "http://localhost:11434/v1",
                "http://LOCALHOST/v1", "http://127.1.2.3:80/v1", "http://[::1]:8000/v1", "http://0.0.0.0:8080/v1",
                "http://[::ffff:127.0.0.1]:8080/v1", "http://user:pw@localhost:1/v1"]:
        assert endpoint_identity(url, "m") == "openai:localhost/m", url
    assert endpoint_identity("https://api.openai.com/v1", "gpt-4o-mini") == "openai:api.openai.com/gpt-4o-mini"
    assert endpoint_identity("http://gpu-box.lan:8000/v1", "m") == "openai:gpu-box.lan/m"
    assert endpoint_identity("http://10.0.0.5:8000/v1", "m") == "openai:10.0.0.5/m"
    assert endpoint_identity("http://[2001:db8::1]:8000/v1", "m") == "openai:[2001:db8::1]/m"
    judge = OpenAIJudge("m", base_url="http://127.0.0.1:8080/v1", api_key="k", namespace="my-judge")
    assert judge.identity == "my-judge"  # an explicit identity wins
    # the remembered structured-output format stays keyed by the full URL
    assert judge.endpoint == "http://127.0.0.1:8080/v1 m"


def test_answers_cached_through_one_port_are_replayed_through_another(tmp_path):
    path = tmp_path / "c.db"
    with ScriptedServer(scenario()) as first:
        original = run_tasks(make_judge(first, cache=ResponseCache(path)))
        port = first.port
    with ScriptedServer(scenario()) as second:  # the server restarted on another port
        assert second.port != port
        judge = make_judge(second, cache=ResponseCache(path, mode="replay"))
        replayed = run_tasks(judge)
        assert requests_of(second) == []  # zero requests
    assert all(not isinstance(r, BaseException) and r.cache_hit and r.calls == 0 for r in replayed.values())
    assert values(replayed) == values(original)


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    return port


def test_a_refused_connection_to_a_never_seen_endpoint_fails_at_once(tmp_path):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    judge = OpenAIJudge("m", base_url=base_url, api_key=SECRET, max_attempts=5, retry_base_wait=2.0,
                        cache=ResponseCache(tmp_path / "c.db"))
    started = time.monotonic()
    with pytest.raises(JudgeCallError) as err:
        call(judge, lambda: judge.decompose(next(iter(REFS))))
    assert time.monotonic() - started < 1.5  # no 2 s backoff: not retried
    assert err.value.cause == "connection_refused"
    assert base_url in err.value.message and "refused" in err.value.message
    assert err.value.calls == 1 and judge.retry_log == []
    assert SECRET not in str(err.value)
    assert ResponseCache(tmp_path / "c.db").claims() == []  # the claim went with the failure


def test_a_refused_connection_after_the_endpoint_answered_is_retried():
    with ScriptedServer(scenario()) as server:
        judge = make_judge(server, max_attempts=3)

        async def main():
            first = await judge.decompose(next(iter(REFS)))
            server.close()  # the server goes away (a restart) after it answered once
            try:
                await judge.decompose(list(REFS)[1])
            finally:
                await judge.aclose()
            return first

        with pytest.raises(JudgeCallError) as err:
            asyncio.run(main())
    assert err.value.cause == "connection"
    assert err.value.calls == 3
    assert len(judge.retry_log) >= 2 and {e.cause for e in judge.retry_log} == {"connection"}


def test_a_server_restart_between_retries_is_survived():
    with ScriptedServer(scenario()) as server:
        port = server.port
        judge = make_judge(server, max_attempts=6, retry_base_wait=0.2, max_retry_wait=0.4)
        restarted: list[ScriptedServer] = []

        async def main():
            await judge.decompose(next(iter(REFS)))
            server.close()
            loop = asyncio.get_running_loop()
            loop.call_later(0.3, lambda: restarted.append(ScriptedServer(scenario(), port=port).start()))
            try:
                return await judge.decompose(list(REFS)[1])
            finally:
                await judge.aclose()

        try:
            resp = asyncio.run(main())
        finally:
            for s in restarted:
                s.close()
    assert resp.value.statements == REFS[list(REFS)[1]]
    assert resp.calls >= 2 and judge.retry_log and judge.retry_log[0].cause == "connection"


@pytest.mark.parametrize("base_url", ["not a url", "ftp://x", "localhost:8080/v1", "http://", "http:///v1",
                                      "http://host:99999/v1", "ftp://user:hunter2@x/v1"])
def test_a_base_url_that_is_not_http_host_is_a_config_error(base_url):
    with pytest.raises(ConfigError, match="base_url must be an http") as err:
        OpenAIJudge("m", base_url=base_url, api_key="k")
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5"])
def test_a_timeout_that_is_not_positive_and_finite_is_a_config_error(timeout):
    with pytest.raises(ConfigError, match="timeout"):
        OpenAIJudge("m", base_url="http://127.0.0.1:1/v1", api_key="k", timeout=timeout)


class _Status403(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self):  # noqa: N802 - http.server's naming
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": {"message": "forbidden (test)", "type": "permission_error"}}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_401_403_404_are_not_retried_and_have_distinct_causes():
    causes = {}
    with ScriptedServer(scenario(), faults=[Fault("401", share=1.0, times=10**9)]) as server:
        judge = make_judge(server, max_attempts=5)
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        causes[401] = (err.value.cause, len(requests_of(server)))
    with ScriptedServer(scenario()) as server:  # a wrong path: the server answers 404
        judge = OpenAIJudge("m", base_url=f"http://127.0.0.1:{server.port}/nope/v1", api_key="k", max_attempts=5)
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        causes[404] = (err.value.cause, err.value.calls)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Status403)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        judge = OpenAIJudge("m", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="k",
                            max_attempts=5)
        with pytest.raises(JudgeCallError) as err:
            call(judge, lambda: judge.decompose(next(iter(REFS))))
        causes[403] = (err.value.cause, _Status403.hits)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert causes == {401: ("http_401", 1), 403: ("http_403", 1), 404: ("http_404", 1)}


# -- secrets ------------------------------------------------------------------------------------


def test_api_key_never_reaches_cache_rows_exports_or_errors(tmp_path):
    path = tmp_path / "c.db"
    faults = [Fault("429", share=0.3, times=1, retry_after=0.01), Fault("malformed", share=0.3, times=1, seed=1)]
    with ScriptedServer(scenario(), faults=faults, api_key=SECRET, refuse_json_schema=True) as server:
        cache = ResponseCache(path)
        judge = make_judge(server, cache=cache)
        results = run_tasks(judge)
        assert any(not isinstance(r, BaseException) for r in results.values())
        # the key really was sent
        assert all(r["headers"]["authorization"] == f"Bearer {SECRET}" for r in requests_of(server))
        assert SECRET not in repr(judge) and SECRET not in judge.identity and SECRET not in judge.endpoint
        for r in results.values():
            if isinstance(r, BaseException):
                assert SECRET not in str(r)
        # a wrong key: the 401 message does not echo what we sent
        wrong = make_judge(server, api_key="sk-test-SECRET-999")
        with pytest.raises(JudgeCallError) as err:
            call(wrong, lambda: wrong.judge_chunk(QUESTION, ["x"], "never cached chunk"))
        assert err.value.cause == "http_401"
        assert "SECRET" not in str(err.value) and "SECRET" not in repr(err.value)
        dump = io.StringIO()
        cache.export_jsonl(dump)
        assert dump.getvalue() and "SECRET" not in dump.getvalue()
        cache.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("c.db"))
    assert b"SECRET" not in raw and b"sk-test" not in raw
    assert b"decompose@1" in raw  # the grep does look at real content


def test_error_messages_are_scrubbed_of_key_like_strings():
    judge = OpenAIJudge("m", base_url="http://127.0.0.1:9/v1", api_key=SECRET)
    text = judge.transport.scrub(f"Incorrect API key provided: {SECRET}; header Bearer {SECRET}; other sk-abcdef123456")
    assert "SECRET" not in text and "abcdef123456" not in text


# -- concurrency --------------------------------------------------------------------------------


def test_concurrency_bound_is_respected():
    """The server marks a request answered before writing the response, so the number of logged
    requests without a status is at most the number the client really has in flight."""
    with ScriptedServer(scenario(), latency=0.1) as server:
        judge = make_judge(server, concurrency=3)
        peak = 0
        stop = threading.Event()

        def watch():
            nonlocal peak
            while not stop.is_set():
                open_now = sum(1 for r in list(server.requests) if r["status"] is None)
                peak = max(peak, open_now)
                time.sleep(0.002)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            results = run_tasks(judge, TASKS[:12])
        finally:
            stop.set()
            watcher.join()
        assert all(not isinstance(r, BaseException) for r in results.values())
        assert 2 <= peak <= 3


# -- parsing ------------------------------------------------------------------------------------


def test_extract_json_from_prose_fences_and_raw():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here it is:\n```json\n{"a": [1, 2]}\n```\nThanks') == {"a": [1, 2]}
    assert extract_json('```\n{"a": 2}\n```') == {"a": 2}
    assert extract_json('Answer: {"a": {"b": "}"}} and {"c": 3}') == {"a": {"b": "}"}}
    for bad in ("", "   ", "no json here", '{"a": [1, '):
        with pytest.raises(InvalidOutput):
            extract_json(bad)


def test_parse_answer_explains_what_is_wrong():
    with pytest.raises(InvalidOutput, match=r"grade: Input should be less than or equal to 3"):
        parse_answer('{"supports": [], "grade": 5, "reason": ""}', ChunkVerdict)
    with pytest.raises(InvalidOutput, match=r"answer: Extra inputs"):
        parse_answer('{"statements": [], "answer": "yes"}', Statements)
    with pytest.raises(InvalidOutput, match="expected a JSON object"):
        parse_answer("[1, 2]", Statements)
    with pytest.raises(InvalidOutput) as err:
        parse_answer('{"statements": ["a"]}', Statements, truncated=True)
    assert err.value.truncated
    v = parse_answer('{"supports": [{"statement": 1, "evidence": "q"}], "grade": 2}', ChunkVerdict)
    assert v == ChunkVerdict(supports=[Support(statement=1, evidence="q")], grade=2, reason="")

