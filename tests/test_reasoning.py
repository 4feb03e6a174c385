"""Reasoning models (OpenAI's o-series, gpt-5): the judge learns which parameters a model refuses
from its 400s, sends what it takes, remembers that per endpoint, keys the cache honestly, and
counts the hidden reasoning tokens. Through the real openai client against the scripted server
(``reasoning_model=True`` answers 400 on ``max_tokens`` and on a temperature other than 1)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge_eval.cache import ResponseCache, cache_key
from judge_eval.errors import ConfigError, JudgeCallError
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.testing.scripted_server import ChunkScript, Scenario, ScriptedServer

from judge_helpers import MINI

REF = "The Eiffel Tower is 330 m tall. It was completed in 1889."
STATEMENTS = ["The Eiffel Tower is 330 m tall.", "The Eiffel Tower was completed in 1889."]
CHUNKS = {
    "The Eiffel Tower, completed in 1889, is 330 m tall.": ChunkScript(supports=STATEMENTS, grade=3),
    "Height facts: the Eiffel Tower is 330 m tall.": ChunkScript(supports=STATEMENTS[:1], grade=2),
    "Paris has many museums.": ChunkScript(grade=1),
    "Bananas are yellow.": ChunkScript(grade=0),
}
SECRET = "sk-test-SECRET-reasoning"


def scenario() -> Scenario:
    return Scenario(decompositions={REF: STATEMENTS}, verdicts=CHUNKS)


def judge_for(server: ScriptedServer, cache: ResponseCache | None, **kw) -> OpenAIJudge:
    return OpenAIJudge("o4-mini", base_url=server.base_url, api_key=SECRET, cache=cache, retry_base_wait=0.001,
                       **kw)


def ask_all(judge: OpenAIJudge) -> list:
    """The decomposition and every chunk's verdict, all at once (concurrency 8)."""

    async def main():
        try:
            return await asyncio.gather(judge.decompose(REF),
                                        *(judge.judge_chunk("How tall?", STATEMENTS, c) for c in CHUNKS))
        finally:
            await judge.aclose()

    return asyncio.run(main())


def failures(server: ScriptedServer) -> list[dict]:
    return [r for r in server.requests if r["status"] != 200]


def test_one_probe_learns_the_parameters_and_a_second_run_sends_no_failing_request(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with ScriptedServer(scenario(), reasoning_model=True, reasoning_tokens=40) as server:
        got = ask_all(judge_for(server, ResponseCache(path)))
        assert [r.value.grade for r in got[1:]] == [3, 2, 1, 0]
        # one task probed alone: 400 on max_tokens, then 400 on temperature, then it went through
        bad = failures(server)
        assert [r["status"] for r in bad] == [400, 400]
        assert "max_tokens" in bad[0]["body"] and "temperature" in bad[0]["body"]
        assert "max_tokens" not in bad[1]["body"] and bad[1]["body"]["max_completion_tokens"] == 1024
        assert "temperature" in bad[1]["body"]
        assert bad[0]["key"] == bad[1]["key"]  # the same task, not one refusal per task
        ok = [r["body"] for r in server.requests if r["status"] == 200]
        assert len(ok) == 1 + len(CHUNKS)
        for body in ok:  # what a reasoning model takes: max_completion_tokens, no temperature
            assert body["max_completion_tokens"] == 1024 and "max_tokens" not in body and "temperature" not in body
            assert body["seed"] == 0 and body["response_format"]["type"] == "json_schema"
        # reasoning tokens: counted, and a part of the completion tokens the server billed
        used = [r.usage for r in got]
        assert sum(u.reasoning_tokens for u in used) == 40 * len(ok)
        assert sum(u.completion_tokens for u in used) == server.usage["completion_tokens"]
        assert sum(u.total_tokens for u in used) == server.usage["total_tokens"]

        endpoint = f"{server.base_url} o4-mini"
        assert ResponseCache(path).params() == {endpoint: {"max_tokens": "max_completion_tokens", "temperature": None}}
        # a second run (refresh: every task asked again) sends what the model takes from the start
        server.reset_log()
        again = ask_all(judge_for(server, ResponseCache(path, mode="refresh")))
        assert failures(server) == []
        assert len(server.requests) == 1 + len(CHUNKS)
    assert [r.value for r in again] == [r.value for r in got]


def test_left_out_temperature_is_in_the_key_and_a_renamed_max_tokens_is_not(tmp_path: Path) -> None:
    """Leaving out temperature changes the answer (the model's default applies): a new key. Renaming
    max_tokens does not: the key of a chat model's answer."""

    def keys(**server_kw) -> dict[str, dict]:
        cache = ResponseCache(tmp_path / f"{sorted(server_kw)}.sqlite")
        with ScriptedServer(scenario(), **server_kw) as server:
            ask_all(judge_for(server, cache))
        return {e.key: e.request for e in cache.entries()}

    plain = keys()
    renamed = keys(refuse_params=["max_tokens"])
    reasoning = keys(reasoning_model=True)
    assert set(renamed) == set(plain)
    assert not set(reasoning) & set(plain)
    for key, request in reasoning.items():
        assert request["server_default"] == ["temperature"]
        assert request["temperature"] == 0.0  # what was asked for stays recorded
        assert key == cache_key(request)
    assert all("server_default" not in r for r in plain.values())


def test_a_hit_needs_the_remembered_parameters(tmp_path: Path) -> None:
    """A run on the same cache finds the reasoning model's answers (its keys include what was left
    out) without one request."""
    path = tmp_path / "cache.sqlite"
    with ScriptedServer(scenario(), reasoning_model=True) as server:
        ask_all(judge_for(server, ResponseCache(path)))
        server.reset_log()
        again = ask_all(judge_for(server, ResponseCache(path)))
        assert server.requests == []
    assert all(r.cache_hit and r.calls == 0 for r in again)


def test_reasoning_effort_is_sent_keyed_and_never_dropped(tmp_path: Path) -> None:
    with ScriptedServer(scenario(), reasoning_model=True) as server:
        cache = ResponseCache(tmp_path / "c.sqlite")
        ask_all(judge_for(server, cache, reasoning_effort="low"))
        assert {r["body"].get("reasoning_effort") for r in server.requests} == {"low"}
    assert {e.request["reasoning_effort"] for e in cache.entries()} == {"low"}
    # a chat model refuses it: an error of the task (http_400), not a silent drop
    with ScriptedServer(scenario()) as server:
        judge = judge_for(server, None, reasoning_effort="high")

        async def one():
            try:
                return await judge.decompose(REF)
            finally:
                await judge.aclose()

        with pytest.raises(JudgeCallError) as info:
            asyncio.run(one())
        assert info.value.cause == "http_400" and "reasoning_effort" in info.value.message
        assert len(server.requests) == 1
    with pytest.raises(ConfigError, match="--reasoning-effort"):
        OpenAIJudge("o4-mini", base_url="http://127.0.0.1:9/v1", reasoning_effort="max")


def score(server: ScriptedServer, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "judge_eval.cli", "score",
           "--data", str(MINI / "questions.jsonl"), "--corpus", str(MINI / "corpus.jsonl"),
           "--run", f"dense={MINI / 'runs' / 'dense.trec'}", "--judge", "openai", "--model", "o4-mini",
           "--base-url", server.base_url, "-k", "2", "--cache", str(tmp / "cache.sqlite"), "--no-progress",
           "--format", "json", "--price-in", "1.25", "--price-out", "10", *extra]
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mini_scenario():
    from judge_eval.data.load import load_dataset

    from judge_helpers import offline_scenario

    ds = load_dataset(MINI / "questions.jsonl", {"dense": MINI / "runs" / "dense.trec"}, corpus=MINI / "corpus.jsonl")
    return offline_scenario(ds, depth=2)


def test_score_against_a_reasoning_model_counts_reasoning_tokens_and_their_cost(mini_scenario, tmp_path: Path) -> None:
    with ScriptedServer(mini_scenario, reasoning_model=True, reasoning_tokens=25) as server:
        first = score(server, tmp_path)
        assert first.returncode == 0, first.stderr
        assert len(failures(server)) == 2  # the probe: max_tokens, then temperature
        served = server.usage
        server.reset_log()
        second = score(server, tmp_path, "--cache-mode", "refresh")
        assert second.returncode == 0, second.stderr
        assert failures(server) == []
        line = score_line(tmp_path, server)
    a = json.loads(first.stdout)["accounting"]
    assert a["errors"] == 0 and a["calls"] == a["tasks"] + 2
    assert a["reasoning_tokens"] == 25 * a["tasks"]
    assert (a["prompt_tokens"], a["completion_tokens"]) == (served["prompt_tokens"], served["completion_tokens"])
    # reasoning tokens are billed as completion tokens, which already include them: no double count
    assert a["cost_usd"] == pytest.approx((a["prompt_tokens"] * 1.25 + a["completion_tokens"] * 10) / 1e6, abs=1e-6)
    assert f"(reasoning {a['reasoning_tokens']})" in line
    assert json.loads(second.stdout)["summary"] == json.loads(first.stdout)["summary"]


def score_line(tmp: Path, server: ScriptedServer) -> str:
    """The accounting line of the table output (a rerun in refresh mode, so tokens are spent)."""
    out = score(server, tmp, "--cache-mode", "refresh", "--format", "table")
    assert out.returncode == 0, out.stderr
    return next(line for line in out.stdout.splitlines() if line.startswith("tasks "))
