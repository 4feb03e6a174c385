"""The judge core: one path (prompt -> cache -> transport -> parse -> checks -> one repair -> store)
for every backend, and prompt versions selected end to end.

Backends here are the real OpenAI transport against the scripted server on 127.0.0.1, and small
in-process transports (what a plugin implements); the openai client is never patched.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judge_eval.cache import ResponseCache
from judge_eval.cli import main
from judge_eval.errors import ConfigError, JudgeCallError
from judge_eval.evaluation import evaluate
from judge_eval.judge.core import Completion, CompletionRequest, Decoding, JudgeCore
from judge_eval.judge.offline import OfflineJudge
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.judge.protocol import ChunkVerdict, Statements
from judge_eval.testing.scripted_server import ChunkScript, Fault, Scenario, ScriptedServer
from judge_eval.usage import Usage

from judge_helpers import BANK_RANKING, bank_dataset, bank_scenario

REF = "The Eiffel Tower is 330 m tall. It was completed in 1889."
STATEMENTS = ["The Eiffel Tower is 330 m tall.", "The Eiffel Tower was completed in 1889."]
CHUNK = "The Eiffel Tower, completed in 1889, is 330 m tall."

#: The keys the judge wrote before the judge core existed (commit 4f34cf9), per response format:
#: existing caches must keep hitting, so these never change.
GOLDEN_KEYS = {
    "json_schema": {
        "decompose@1 0": "530021487ffecf26bbf9c819d7da6b5b18d9c0a5a4bc29125e82f6e42c4b1ca8",
        "judge_chunk@1 0": "a28871dea641bdd012c3f27658bdf4073f501d2a881f2de42e09edf6a3f5cb93",
        "judge_chunk@1 1": "bc93296213a51248af562e03c12499cd923a8ac6367c6091886540cc6a1adb38",
    },
    "json_object": {
        "decompose@1 0": "db202b076e867b538c7e72798a6155124b63404b7b7f954c24703b9450a794c1",
        "judge_chunk@1 0": "4b657b9bb89b9093dae226421a95d87d8d02e999f3b93665c067a161e43be4ea",
        "judge_chunk@1 1": "e040a964261eb4276b8a4ebf29305a63f4d5a11bfb1dcb6a78b5fd7e658dce01",
    },
    "text": {
        "decompose@1 0": "f552acec2340e53d63e81a32febd33dad7c24fd0d1158b9fc10d78ff66a88163",
        "judge_chunk@1 0": "0f401fc6aec4163900e42ae30a2a5193d3080112759ce8a74d5cb27c72cb4d1a",
        "judge_chunk@1 1": "e995a753e9a1a7097929308b4f481ddc6675b6090295bcf9ce5d1a5768ab3854",
    },
}


def scenario() -> Scenario:
    return Scenario(decompositions={REF: STATEMENTS}, verdicts={CHUNK: ChunkScript(supports=STATEMENTS, grade=3)})


@pytest.mark.parametrize("fmt", ["json_schema", "json_object", "text"])
def test_cache_keys_are_the_ones_written_before_the_core(fmt: str) -> None:
    refuse = {"json_schema": {}, "json_object": {"refuse_json_schema": True},
              "text": {"refuse_json_schema": True, "refuse_json_object": True}}[fmt]
    with ScriptedServer(scenario(), **refuse) as server:
        cache = ResponseCache(":memory:")
        judge = OpenAIJudge("scripted-judge", base_url=server.base_url, api_key="k", cache=cache,
                            retry_base_wait=0.001)

        async def main() -> None:
            await judge.decompose(REF)
            await judge.judge_chunk("When?", STATEMENTS, CHUNK)
            await judge.judge_chunk("When?", [], CHUNK, sample=1)
            await judge.aclose()

        asyncio.run(main())
    keys = {f"{e.prompt} {e.request['sample']}": e.key for e in cache.entries()}
    assert keys == GOLDEN_KEYS[fmt]


# ----------------------------------------------------------------------------- the path, in-process


class Scripted:
    """A transport that replies from a list (what a plugin implements), counting its calls."""

    identity = "scripted:list"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []

    def key_fields(self, request: CompletionRequest) -> dict[str, Any]:
        return {"backend": "list"}

    async def complete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, dict):
            return Completion(data=reply, usage=Usage(3, 1))
        return Completion(text=reply, usage=Usage(10, 2))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_failed_check_is_repaired_once_with_the_error_and_the_task() -> None:
    bad = json.dumps({"supports": [{"statement": 3, "evidence": "x"}], "grade": 2})
    good = json.dumps({"supports": [{"statement": 1, "evidence": "330 m tall"}], "grade": 2, "reason": "r"})
    transport = Scripted(bad, good)
    judge = JudgeCore(transport)
    r = run(judge.judge_chunk("Q?", STATEMENTS, CHUNK))
    assert r.value.supports[0].statement == 1
    assert (r.calls, r.usage, r.cache_hit) == (2, Usage(20, 4), False)
    first, repair = transport.requests
    assert first.repair is None and repair.repair is not None and repair.repair.text == bad
    assert repair.messages[:2] == first.messages and repair.messages[2] == {"role": "assistant", "content": bad}
    turn = repair.messages[3]["content"]
    assert "supports names statement(s) [3]; valid numbers are 1..2" in turn
    assert first.messages[1]["content"] in turn  # the task is restated


def test_still_invalid_after_the_repair_fails_with_the_whole_tasks_cost() -> None:
    judge = JudgeCore(Scripted("not json", '{"grade": 9}'))
    with pytest.raises(JudgeCallError) as err:
        run(judge.judge_chunk("Q?", STATEMENTS, CHUNK))
    assert err.value.cause == "invalid_output"
    assert (err.value.calls, err.value.usage) == (2, Usage(20, 4))
    assert err.value.__suppress_context__


def test_a_transport_error_carries_the_calls_of_the_task_so_far() -> None:
    judge = JudgeCore(Scripted("not json", JudgeCallError("timeout", "slow", calls=3, usage=Usage(1, 0))))
    with pytest.raises(JudgeCallError) as err:
        run(judge.decompose(REF))
    assert err.value.cause == "timeout"
    assert (err.value.calls, err.value.usage) == (4, Usage(11, 2))


def test_structured_answers_are_validated_and_cached_like_text(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    transport = Scripted({"statements": STATEMENTS})
    judge = JudgeCore(transport, cache=cache, namespace="team-judge", decoding=Decoding(temperature=0.5, seed=None))
    first = run(judge.decompose(REF))
    again = run(JudgeCore(Scripted(), cache=cache, namespace="team-judge",
                          decoding=Decoding(temperature=0.5, seed=None)).decompose(REF))
    assert first.value == again.value == Statements(statements=STATEMENTS)
    assert (again.cache_hit, again.calls, again.saved_usage) == (True, 0, Usage(3, 1))
    (entry,) = cache.entries()
    assert entry.identity == "team-judge" and entry.prompt == "decompose@1"
    assert entry.request["backend"] == "list" and entry.request["temperature"] == 0.5
    assert entry.request["seed"] is None and entry.request["messages"] == transport.requests[0].messages


def test_a_stored_answer_that_fails_the_prompts_checks_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    judge = JudgeCore(Scripted(), cache=cache)
    request = judge.request(judge.prompts["judge_chunk"], {"question": "Q?", "statements": [], "chunk": CHUNK})
    stored = judge.key_request(request)
    from judge_eval.cache import cache_key

    cache.put(cache_key(stored), identity=judge.identity, prompt="judge_chunk@1", request=stored,
              response={"supports": [{"statement": 1, "evidence": "x"}], "grade": 2, "reason": ""})
    fresh = Scripted(json.dumps({"supports": [], "grade": 1, "reason": ""}))
    r = run(JudgeCore(fresh, cache=cache).judge_chunk("Q?", [], CHUNK))
    assert (r.cache_hit, r.calls, r.value.grade) == (False, 1, 1)  # asked again: the row names statement 1 of 0


def test_transport_key_fields_may_not_override_the_cores() -> None:
    class Bad(Scripted):
        def key_fields(self, request: CompletionRequest) -> dict[str, Any]:
            return {"seed": 1}

    judge = JudgeCore(Bad(), cache=ResponseCache(":memory:"))
    with pytest.raises(ValueError, match="seed"):
        run(judge.decompose(REF))


def test_the_offline_judge_goes_through_the_core_without_a_cache() -> None:
    judge = OfflineJudge(prompts=["judge_chunk@2"])
    assert judge.cache is None and judge.approximate and judge.identity == "offline:v2"
    assert judge.prompts["judge_chunk"].id == "judge_chunk@2"
    r = run(judge.judge_chunk("How tall?", STATEMENTS, CHUNK, sample=3))
    assert isinstance(r.value, ChunkVerdict) and (r.calls, r.usage, r.cache_hit) == (0, Usage(), False)
    assert {s.statement for s in r.value.supports} == {1, 2}


# ----------------------------------------------------------------------------- prompt versions end to end


def opts(server: ScriptedServer) -> dict[str, Any]:
    return dict(api_key="k", timeout=5.0, retry_base_wait=0.01, max_retry_wait=0.2)


def test_either_judge_chunk_version_scores_end_to_end_with_its_own_cache_entries(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    chunk_tasks = len(BANK_RANKING)
    results = {}
    with ScriptedServer(bank_scenario()) as server:
        for version in ("1", "2", "1"):
            server.reset_log()
            judge = OpenAIJudge("scripted-judge", base_url=server.base_url, cache=ResponseCache(path),
                                prompts={"judge_chunk": version}, **opts(server))
            res = evaluate(bank_dataset(), judge=judge, ks=(5,))
            results.setdefault(version, []).append((res, [r["prompt"] for r in server.requests]))
    (v1, log1), (v1_again, log1_again) = results["1"]
    ((v2, log2),) = results["2"]
    assert v1.prompts == {"decompose": "decompose@1", "judge_chunk": "judge_chunk@1"}
    assert v2.prompts == {"decompose": "decompose@1", "judge_chunk": "judge_chunk@2"}
    # the server recognised each version through the prompt objects
    assert sorted(log1) == sorted(["decompose@1"] + ["judge_chunk@1"] * chunk_tasks)
    assert log2 == ["judge_chunk@2"] * chunk_tasks  # decompose@1 was cached; @2 has entries of its own
    assert log1_again == []  # and @1's entries are still there
    assert v2.accounting.cache_hits == 1 and v1_again.accounting.cache_hits == 1 + chunk_tasks
    by_prompt = ResponseCache(path).stats()["by_prompt"]
    assert by_prompt == {"decompose@1": 1, "judge_chunk@1": chunk_tasks, "judge_chunk@2": chunk_tasks}
    # the scripted judge answers both versions alike: the same numbers
    pd_cols = ["run", "question_id", "context_recall@5", "context_precision@5"]
    assert v1.per_question[pd_cols].equals(v2.per_question[pd_cols])


def test_the_prompt_option_selects_a_version_on_the_command_line(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parent.parent / "fixtures" / "bank_faq" / "data.jsonl"
    with ScriptedServer(bank_scenario()) as server:
        args = ["score", "--data", str(data), "--judge", "openai", "--model", "m", "--base-url", server.base_url,
                "--cache", str(tmp_path / "c.sqlite"), "--no-progress", "-k", "5", "--format", "json"]
        result = CliRunner().invoke(main, [*args, "--prompt", "judge_chunk@2"], env={"OPENAI_API_KEY": "k"})
        prompts = {r["prompt"] for r in server.requests}
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["prompts"] == {"decompose": "decompose@1", "judge_chunk": "judge_chunk@2"}
    assert prompts == {"decompose@1", "judge_chunk@2"}
    bad = CliRunner().invoke(main, [*args, "--prompt", "judge_chunk@9"])
    assert bad.exit_code == 2 and "no prompt judge_chunk@9; shipped prompts: decompose@1, judge_chunk@1" in bad.output
    twice = CliRunner().invoke(main, [*args, "--prompt", "judge_chunk@1", "--prompt", "judge_chunk@2"])
    assert twice.exit_code == 2 and "two versions of judge_chunk" in twice.output


def test_evaluate_records_the_selected_prompts_and_refuses_a_conflicting_judge() -> None:
    res = evaluate(bank_dataset(), judge="offline", ks=(5,), prompts=["judge_chunk@2"])
    assert res.prompts == {"decompose": "decompose@1", "judge_chunk": "judge_chunk@2"}
    with pytest.raises(ConfigError, match="--prompt"):
        evaluate(bank_dataset(), judge=OfflineJudge(), ks=(5,), prompts={"judge_chunk": "2"})
    same = evaluate(bank_dataset(), judge=OfflineJudge(prompts={"judge_chunk": "2"}), ks=(5,),
                    prompts={"judge_chunk": "judge_chunk@2"})
    assert same.prompts["judge_chunk"] == "judge_chunk@2"


def test_a_repair_of_a_judge_chunk_v2_answer_is_still_recognised() -> None:
    with ScriptedServer(bank_scenario(), faults=[Fault("malformed", share=1.0, times=1, only="judge_chunk")]) as server:
        judge = OpenAIJudge("scripted-judge", base_url=server.base_url, prompts=["judge_chunk@2"], **opts(server))

        async def main() -> Any:
            try:
                return await judge.judge_chunk("Q?", ["s"], "text")
            finally:
                await judge.aclose()

        with pytest.raises(JudgeCallError):  # the fault hits the repair too (share 1)
            run(main())
        assert [(r["prompt"], len(r["body"]["messages"])) for r in server.requests] == [
            ("judge_chunk@2", 2), ("judge_chunk@2", 4)]
