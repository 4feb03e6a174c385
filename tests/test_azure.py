"""Azure OpenAI's classic deployment URLs: the judge reaches
``/openai/deployments/<deployment>/chat/completions?api-version=...`` with an ``api-key`` header
(or an Entra ID token as a bearer token), and the key is in no output or cache byte. Through the
judge's real HTTP client (and, for batches, ``openai.AsyncAzureOpenAI``) against the scripted
server, which serves Azure's paths too."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge_eval.cache import ResponseCache
from judge_eval.errors import ConfigError
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.testing.scripted_server import ChunkScript, Scenario, ScriptedServer

from judge_helpers import MINI, offline_scenario

SECRET = "azure-key-SECRET-0123456789abcdef"
TOKEN = "eyJ0eXAiOiJKV1Qi.entra-TOKEN-SECRET.sig"
VERSION = "2024-10-21"
REF = "Water boils at 100 °C at sea level."


def azure_judge(server: ScriptedServer, **kw) -> OpenAIJudge:
    # the resource endpoint: the server's root, without /v1
    return OpenAIJudge("judge-deployment", base_url=f"http://127.0.0.1:{server.port}", api_version=VERSION,
                       azure=True, retry_base_wait=0.001, **kw)


def decompose(judge: OpenAIJudge):
    async def main():
        try:
            return await judge.decompose(REF)
        finally:
            await judge.aclose()

    return asyncio.run(main())


def test_a_request_carries_the_deployment_path_the_api_version_and_the_api_key_header(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", SECRET)
    scenario = Scenario(decompositions={REF: [REF]}, verdicts={"x": ChunkScript()})
    with ScriptedServer(scenario, api_key=SECRET) as server:
        judge = azure_judge(server, cache=ResponseCache(tmp_path / "c.sqlite"))
        assert judge.identity == "openai:localhost/judge-deployment"  # as the v1 form: one model, one cache
        assert SECRET not in repr(judge) and SECRET not in judge.endpoint
        assert decompose(judge).value.statements == [REF]
        (request,) = server.requests
    assert request["path"] == "/openai/deployments/judge-deployment/chat/completions"
    assert request["query"] == {"api-version": VERSION}
    assert request["headers"]["api-key"] == SECRET
    assert "authorization" not in request["headers"]
    assert request["body"]["model"] == "judge-deployment"


def test_an_entra_id_token_from_the_environment_is_a_bearer_token(monkeypatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_VERSION", VERSION)
    with ScriptedServer(Scenario(decompositions={REF: [REF]}), api_key=TOKEN) as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", f"http://127.0.0.1:{server.port}/")
        judge = OpenAIJudge("judge-deployment", azure=True)
        assert decompose(judge).value.statements == [REF]
        (request,) = server.requests
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert "api-key" not in request["headers"]
    assert request["query"] == {"api-version": VERSION}


def test_azure_settings_are_checked_before_any_request(monkeypatch) -> None:
    for var in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"):
        monkeypatch.delenv(var, raising=False)
    base = "https://res.openai.azure.com"
    with pytest.raises(ConfigError, match="api-version"):
        OpenAIJudge("dep", base_url=base, azure=True, api_key="k")
    with pytest.raises(ConfigError, match="AZURE_OPENAI_API_KEY"):
        OpenAIJudge("dep", base_url=base, azure=True, api_version=VERSION)
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT"):
        OpenAIJudge("dep", azure=True, api_version=VERSION, api_key="k")
    with pytest.raises(ConfigError, match="v1"):
        OpenAIJudge("dep", base_url=f"{base}/openai/v1/", azure=True, api_version=VERSION, api_key="k")
    with pytest.raises(ConfigError, match="deployment is --model"):
        OpenAIJudge("dep", base_url=f"{base}/openai/deployments/dep", azure=True, api_version=VERSION, api_key="k")
    ok = OpenAIJudge("dep", base_url=f"{base}/", azure=True, api_version=VERSION, api_key="k")
    assert ok.identity == "openai:res.openai.azure.com/dep"
    assert ok.endpoint == f"{base}/openai/deployments/dep?api-version={VERSION} dep"


def test_score_through_azure_leaves_the_key_in_no_output_or_cache_byte(tmp_path: Path) -> None:
    from judge_eval.data.load import load_dataset

    ds = load_dataset(MINI / "questions.jsonl", {"dense": MINI / "runs" / "dense.trec"}, corpus=MINI / "corpus.jsonl")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_"))}
    env["AZURE_OPENAI_API_KEY"] = SECRET
    with ScriptedServer(offline_scenario(ds, depth=2), api_key=SECRET) as server:
        cmd = [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(MINI / "questions.jsonl"),
               "--corpus", str(MINI / "corpus.jsonl"), "--run", f"dense={MINI / 'runs' / 'dense.trec'}",
               "--model", "judge-deployment", "--base-url", f"http://127.0.0.1:{server.port}",
               "--api-version", VERSION, "-k", "2", "--cache", str(tmp_path / "cache.sqlite"), "--out", str(out),
               "--progress", "--format", "json"]
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    assert requests and all(r["status"] == 200 for r in requests)
    assert {r["path"] for r in requests} == {"/openai/deployments/judge-deployment/chat/completions"}
    assert {r["query"]["api-version"] for r in requests} == {VERSION}
    assert {r["headers"]["api-key"] for r in requests} == {SECRET}  # really sent, so its absence below counts
    export = tmp_path / "export.jsonl"
    subprocess.run([sys.executable, "-m", "judge_eval.cli", "cache", "export", "--cache",
                    str(tmp_path / "cache.sqlite"), str(export)], check=True, capture_output=True, env=env)
    files = [*out.iterdir(), export, *tmp_path.glob("cache.sqlite*")]
    assert len(files) > 3
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.stdout and SECRET not in result.stderr
