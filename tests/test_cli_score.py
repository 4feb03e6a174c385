"""`judge-eval score` as a user runs it: a real subprocess, a real server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_eval.data.load import load_dataset
from judge_eval.testing.scripted_server import ScriptedServer

from judge_helpers import MINI, offline_scenario

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-test-SECRET-123"


def score_cmd(server: ScriptedServer, tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "judge_eval.cli", "score",
        "--data", str(MINI / "questions.jsonl"), "--corpus", str(MINI / "corpus.jsonl"),
        "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}", "--run", f"dense={MINI / 'runs' / 'dense.trec'}",
        "--qrels", str(MINI / "qrels.txt"),
        "--judge", "openai", "--model", "scripted-judge", "--base-url", server.base_url,
        "-k", "3", "--cache", str(tmp / "cache.sqlite"), "--no-progress", *extra,
    ]


def env_with_key() -> dict[str, str]:
    env = dict(os.environ)
    env["OPENAI_API_KEY"] = SECRET
    return env


@pytest.fixture(scope="module")
def mini_scenario():
    ds = load_dataset(MINI / "questions.jsonl", {n: MINI / "runs" / f"{n}.trec" for n in ("bm25", "dense")},
                      corpus=MINI / "corpus.jsonl")
    unique = {(ds.questions[q].question, c.text)
              for r in ds.runs.values() for q, cs in r.rankings.items() for c in cs[:3]}
    return offline_scenario(ds, depth=3), len(ds.questions) + len(unique)


def cache_rows(path: Path) -> int:
    if not path.exists():
        return 0
    con = sqlite3.connect(path, timeout=5)
    try:
        return con.execute("select count(*) from responses").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_sigkill_midway_then_rerun_pays_one_call_per_unique_task(mini_scenario, tmp_path: Path) -> None:
    scenario, n_tasks = mini_scenario
    answered_before_kill = 25
    with ScriptedServer(scenario, hold_after=answered_before_kill) as server:
        proc = subprocess.Popen(score_cmd(server, tmp_path, "--concurrency", "4"), env=env_with_key(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        # wait until the answered responses are all committed and the rest are held unanswered
        while not (server.completions == answered_before_kill and server.held > 0
                   and cache_rows(tmp_path / "cache.sqlite") == answered_before_kill):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the client never reached the kill point"
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no cleanup, no flush
        proc.wait(timeout=10)
        server.release()
        second = subprocess.run(score_cmd(server, tmp_path, "--concurrency", "4", "--format", "json"),
                                env=env_with_key(), capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert max(server.served_keys.values()) == 1  # nothing was paid twice
        assert sum(server.served_keys.values()) == n_tasks  # and everything was paid once
    summary = json.loads(second.stdout)
    a = summary["accounting"]
    assert a["cache_hits"] == answered_before_kill
    assert a["calls"] == n_tasks - answered_before_kill
    assert a["errors"] == 0


def test_the_api_key_appears_in_no_cache_row_log_or_output_file(mini_scenario, tmp_path: Path) -> None:
    scenario, _ = mini_scenario
    out = tmp_path / "out"
    with ScriptedServer(scenario) as server:
        result = subprocess.run(score_cmd(server, tmp_path, "--out", str(out), "--progress"),
                                env=env_with_key(), capture_output=True, text=True, timeout=120)
        seen_keys = {r["headers"].get("authorization") for r in server.requests}
    assert result.returncode == 0, result.stderr
    assert seen_keys == {f"Bearer {SECRET}"}  # it was really sent, so its absence below means something
    export = tmp_path / "export.jsonl"
    subprocess.run([sys.executable, "-m", "judge_eval.cli", "cache", "export", "--cache",
                    str(tmp_path / "cache.sqlite"), str(export)], check=True, capture_output=True)
    files = [p for p in out.iterdir()] + [export] + list(tmp_path.glob("cache.sqlite*"))
    assert {p.name for p in out.iterdir()} >= {"summary.json", "per_question.csv", "verdicts.jsonl",
                                               "report.md", "report.html", "missing.csv", "statements.jsonl"}
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.stdout and SECRET not in result.stderr


def test_no_endpoint_configured_exits_2_with_help(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    result = subprocess.run([sys.executable, "-m", "judge_eval.cli", "score", "--data",
                             str(ROOT / "fixtures" / "bank_faq" / "data.jsonl"), "--out", str(tmp_path / "out")],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and "--judge offline" in result.stderr
    assert not (tmp_path / "out").exists()


def test_bad_input_exits_2_and_writes_no_results_folder(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": "q1", "question": "?", "reference": "r", "contexts": ["a"]}\n{"id": "q1", "question": 3}\n')
    result = subprocess.run([sys.executable, "-m", "judge_eval.cli", "score", "--data", str(data), "--judge",
                             "offline", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 2
    assert str(data) in result.stderr and "line 2" in result.stderr
    assert not (tmp_path / "out").exists()


def test_offline_judge_on_the_bank_faq_fixture_reproduces_the_worked_example(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "judge_eval.cli", "score", "--data",
                             str(ROOT / "fixtures" / "bank_faq" / "data.jsonl"), "--judge", "offline",
                             "-k", "1,3,5", "--format", "json", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    got = {r["measure"]: r["mean"] for r in json.loads(result.stdout)["summary"]}
    assert got["context_recall@5"] == pytest.approx(2 / 3)
    assert got["context_precision@5"] == pytest.approx(0.5)
    assert got["context_recall@3"] == pytest.approx(1 / 3)
    assert got["context_recall@1"] == 0.0 and got["context_precision@1"] == 0.0
    assert got["recall@5"] == pytest.approx(2 / 3) and got["precision@5"] == pytest.approx(0.4)
    assert got["mrr@5"] == pytest.approx(0.5) and got["hit_rate@5"] == 1.0
    assert got["ndcg@5"] == pytest.approx(0.5405857679450102)
    verdicts = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    supported = {v["chunk_id"]: v["supported"] for v in verdicts}
    assert supported == {"c7": [], "c2": [1], "c9": [], "c4": [2], "c1": []}
    for v in verdicts:  # every kept evidence quote is verbatim in its chunk
        for quote in v["evidence"].values():
            assert quote in json.loads((ROOT / "fixtures" / "bank_faq" / "data.jsonl").read_text())["contexts"][
                ["c7", "c2", "c9", "c4", "c1"].index(v["chunk_id"])]["text"]


def test_offline_judge_scores_the_full_clapnq_fixture_end_to_end(tmp_path: Path) -> None:
    clap = ROOT / "fixtures" / "clapnq"
    result = subprocess.run([
        sys.executable, "-m", "judge_eval.cli", "score", "--data", str(clap / "questions.jsonl"),
        "--corpus", str(clap / "corpus.jsonl"), "--qrels", str(clap / "qrels.txt"),
        *[a for n in ("bm25", "dense", "hybrid") for a in ("--run", f"{n}={clap / 'runs' / (n + '.trec')}")],
        "--judge", "offline", "-k", "5", "--format", "json", "--out", str(tmp_path / "out"),
    ], capture_output=True, text=True, timeout=600, env={**os.environ, "no_proxy": "*"})
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    rows = {(r["run"], r["measure"]): r for r in summary["summary"]}
    for run in ("bm25", "dense", "hybrid"):
        r = rows[(run, "context_recall@5")]
        assert r["n"] == 300 and r["n_missing"] == 0
        assert 0 < r["mean"] < 1 and r["ci_low"] < r["mean"] < r["ci_high"]
    # the approximate judge must still order the retrievers like the human labels do
    human = {run: rows[(run, "recall@5")]["mean"] for run in ("bm25", "dense", "hybrid")}
    judged = {run: rows[(run, "context_recall@5")]["mean"] for run in ("bm25", "dense", "hybrid")}
    assert max(human, key=human.get) == max(judged, key=judged.get)
    assert min(human, key=human.get) == min(judged, key=judged.get) == "bm25"
    assert summary["judge"] == {"identity": "offline:v2", "approximate": True}
    assert summary["accounting"]["calls"] == 0 and summary["accounting"]["errors"] == 0


def test_score_reads_a_csv_questions_file_through_a_column_mapping(tmp_path: Path) -> None:
    bank = ROOT / "fixtures" / "bank_faq"
    q = json.loads((bank / "questions.jsonl").read_text().splitlines()[0])
    import csv

    with (tmp_path / "questions.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["qid", "text", "answer"])
        writer.writerow([q["id"], q["question"], q["reference"]])
    result = subprocess.run([
        sys.executable, "-m", "judge_eval.cli", "score", "--data", str(tmp_path / "questions.csv"),
        "--columns", "question_id=qid,question=text,reference=answer",
        "--run", f"dense={bank / 'runs' / 'dense.trec'}", "--corpus", str(bank / "corpus.jsonl"),
        "--judge", "offline", "-k", "5", "--format", "json",
    ], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    got = {r["measure"]: r["mean"] for r in json.loads(result.stdout)["summary"]}
    assert got["context_recall@5"] == pytest.approx(2 / 3) and got["context_precision@5"] == pytest.approx(0.5)
