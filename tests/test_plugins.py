"""Judge plugins: the example of docs/plugins.md, run as written, through `judge-eval score --judge NAME`.

The plugin implements only a transport; the judge core gives it caching (a second run sends no
request), parsing, the repair and the checks, and the runner's evidence check rejects a quote the
plugin's backend invented. Registered both ways: register_judge() in this process, and an entry
point of an installed distribution in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

import judge_eval
from judge_eval.cli import main
from judge_eval.data.load import load_dataset
from judge_eval.errors import ConfigError, ExitCode
from judge_eval.judge.core import repair_text
from judge_eval.judge.parsing import InvalidOutput, parse_answer
from judge_eval.judge.prompts import load_prompt
from judge_eval.judge.protocol import Statements
from judge_eval.judge.registry import ENTRY_POINT_GROUP, create_judge, judge_names, unregister_judge
from judge_eval.testing.scripted_server import (
    INVENTED_EVIDENCE,
    MALFORMED_CONTENT,
    Fault,
    ScriptedServer,
    messages_key,
)

from judge_helpers import offline_scenario

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "plugins.md"
DATA = ROOT / "fixtures" / "bank_faq" / "data.jsonl"
K = 5


def example_source() -> str:
    """The plugin module of docs/plugins.md: the python block that starts with its file name."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if b.startswith("# judge_eval_gateway.py")]
    assert len(found) == 1, "docs/plugins.md must hold exactly one judge_eval_gateway.py example"
    return found[0]


def load_example(tmp_path: Path) -> ModuleType:
    path = tmp_path / "judge_eval_gateway.py"
    path.write_text(example_source(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("judge_eval_gateway", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scenario():
    return offline_scenario(load_dataset(DATA), K)


def malformed_decompose_only() -> Fault:
    """A ``malformed`` fault that selects the decompose request of the data but not its repair
    (which has other messages: the bad reply and the repair turn)."""
    reference = load_dataset(DATA).questions["q1"].reference
    primary = load_prompt("decompose").render(reference=reference)
    try:
        parse_answer(MALFORMED_CONTENT, Statements)
    except InvalidOutput as bad:
        repair = [*primary, {"role": "assistant", "content": MALFORMED_CONTENT},
                  {"role": "user", "content": repair_text(bad, primary)}]
    for seed in range(200):
        fault = Fault("malformed", share=0.5, seed=seed, only="decompose")
        if fault.selects(messages_key(primary)) and not fault.selects(messages_key(repair)):
            return fault
    raise AssertionError("no seed selects only the first request")


def chat_requests(server: ScriptedServer) -> list[dict]:
    return [r for r in server.requests if r["path"].endswith("chat/completions")]


def score(server: ScriptedServer, cache: Path, *extra: str):
    args = ["score", "--data", str(DATA), "--judge", "gateway", "--model", "scripted-judge",
            "--base-url", server.base_url, "--cache", str(cache), "--no-progress", "-k", str(K),
            "--format", "json", *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False, env={"GATEWAY_TEAM": "search"})


@pytest.fixture()
def gateway(tmp_path: Path):
    module = load_example(tmp_path)
    judge_eval.register_judge("gateway", module.factory)
    try:
        yield module
    finally:
        unregister_judge("gateway")


def test_the_documented_plugin_runs_through_score_and_gets_caching_from_the_core(gateway, tmp_path: Path) -> None:
    assert "gateway" in judge_names()
    cache = tmp_path / "c.sqlite"
    with ScriptedServer(scenario()) as server:
        first = score(server, cache)
        sent = len(chat_requests(server))
        second = score(server, cache)
        again = len(chat_requests(server)) - sent
        headers = {r["headers"].get("x-team") for r in chat_requests(server)}
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    tasks = a["accounting"]["tasks"]
    assert a["judge"]["identity"] == "gateway:scripted-judge"
    assert a["prompts"] == {"decompose": "decompose@1", "judge_chunk": "judge_chunk@1"}
    assert a["accounting"]["calls"] == sent == tasks and a["accounting"]["cache_hits"] == 0
    assert a["accounting"]["prompt_tokens"] > 0  # the plugin's usage reached the accounting
    assert headers == {"search"}  # the plugin's own header went out
    # the second run: every task is a cache hit, the transport is never called
    assert again == 0
    assert b["accounting"]["calls"] == 0 and b["accounting"]["cache_hits"] == tasks
    assert b["accounting"]["saved_tokens"] == a["accounting"]["total_tokens"]
    assert b["summary"] == a["summary"]


def test_an_invented_quote_from_the_plugin_is_rejected_and_a_bad_answer_repaired(gateway, tmp_path: Path) -> None:
    with ScriptedServer(scenario()) as server:
        clean = json.loads(score(server, tmp_path / "clean.sqlite").stdout)
    # every judge_chunk answer carries one extra claim quoting text that is not in the chunk
    with ScriptedServer(scenario(), faults=[Fault("invented_evidence")]) as server:
        result = score(server, tmp_path / "invented.sqlite", "--out", str(tmp_path / "out"))
        invented = [r for r in chat_requests(server) if r["fault"] == "invented_evidence"]
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert len(invented) == out["accounting"]["tasks"] - 1  # every judge_chunk task (one decompose)
    assert out["accounting"]["unverified_evidence"] == len(invented)
    assert out["summary"] == clean["summary"]  # the invented support changed no number
    verdicts = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(v["unverified"] == 1 for v in verdicts), verdicts[0]
    # a reply that is not JSON: the core repairs it once, through the plugin
    with ScriptedServer(scenario(), faults=[malformed_decompose_only()]) as server:
        result = score(server, tmp_path / "repair.sqlite")
        repairs = [r for r in chat_requests(server) if len(r["body"]["messages"]) == 4]
    assert result.exit_code == 0, result.output
    assert len(repairs) == 1 and "could not be used" in repairs[0]["body"]["messages"][3]["content"]
    assert json.loads(result.stdout)["summary"] == clean["summary"]


def test_an_installed_entry_point_reaches_the_cli_in_a_subprocess(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "judge_eval_gateway-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "judge_eval_gateway.py").write_text(example_source(), encoding="utf-8")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: judge-eval-gateway\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ngateway = judge_eval_gateway:factory\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "GATEWAY_TEAM": "search"}
    cmd = [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(DATA), "--no-progress", "-k", str(K),
           "--format", "json", "--cache", str(tmp_path / "c.sqlite")]
    with ScriptedServer(scenario()) as server:
        done = subprocess.run([*cmd, "--judge", "gateway", "--model", "scripted-judge", "--base-url", server.base_url],
                              capture_output=True, text=True, env=env, timeout=120)
        sent = len(chat_requests(server))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["judge"]["identity"] == "gateway:scripted-judge"
    assert sent > 0
    unknown = subprocess.run([*cmd, "--judge", "nope"], capture_output=True, text=True, env=env, timeout=120)
    assert unknown.returncode == ExitCode.USAGE
    assert "unknown judge 'nope'; known judges: gateway, offline, openai" in unknown.stderr


def test_an_unknown_judge_name_is_a_usage_error_listing_the_known_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["score", "--data", str(DATA), "--judge", "nope"])
    assert result.exit_code == ExitCode.USAGE
    assert "known judges: offline, openai" in result.output and "Traceback" not in result.output
    with pytest.raises(ConfigError, match="unknown judge 'nope'; known judges: offline, openai"):
        judge_eval.evaluate(DATA, judge="nope")


def test_register_judge_refuses_to_replace_and_checks_what_factories_return() -> None:
    with pytest.raises(ValueError, match="already registered"):
        judge_eval.register_judge("openai", lambda settings: None)
    with pytest.raises(ValueError):
        judge_eval.register_judge(" spaced ", lambda settings: None)
    judge_eval.register_judge("broken", lambda settings: object())
    try:
        with pytest.raises(TypeError, match="neither a Judge"):
            create_judge("broken")
    finally:
        unregister_judge("broken")


def test_a_plugin_entry_point_that_cannot_be_imported_is_a_config_error(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    dist = site / "judge_eval_missing-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: judge-eval-missing\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nmissing = no_such_module:factory\n")
    monkeypatch.syspath_prepend(str(site))
    assert "missing" in judge_names()
    with pytest.raises(ConfigError, match="the judge plugin 'missing' .* cannot be loaded: ModuleNotFoundError"):
        create_judge("missing")


def test_an_invented_quote_constant_is_not_in_any_chunk() -> None:
    assert INVENTED_EVIDENCE not in DATA.read_text(encoding="utf-8")
