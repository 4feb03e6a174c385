"""`judge-eval audit` end to end: the real openai client against the scripted server on
127.0.0.1, a real SQLite history and cache, the CLI's exit codes and first lines.

The dataset is the CLAP NQ mini fixture (20 questions, runs bm25 and dense), answered by the
scripted server like the offline judge would (judge_helpers.offline_scenario)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from judge_eval.audit import History, run_audit
from judge_eval.cache import ResponseCache
from judge_eval.cli import main
from judge_eval.errors import ExitCode
from judge_eval.metrics.stats import holm, randomization_test
from judge_eval.testing.scripted_server import ChunkScript, Fault, Scenario, ScriptedServer

from judge_helpers import (
    BANK_CHUNKS,
    BANK_GRADES,
    BANK_QUESTION,
    BANK_REFERENCE,
    MINI,
    bank_scenario,
    mini_dataset,
    offline_scenario,
)

ROOT = Path(__file__).resolve().parent.parent
CHECK = ["context_recall@10", "context_precision@10", "judge_ndcg@10"]


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    ds = mini_dataset(n_questions=20)
    s = offline_scenario(ds, depth=10)
    bank = bank_scenario()  # the canary's question is the bank FAQ example
    s.decompositions.update(bank.decompositions)
    s.verdicts.update(bank.verdicts)
    return s


def shuffled_run(src: Path, dest: Path, seed: int = 0) -> Path:
    """``src`` with the top 10 of every ranking shuffled (seeded); ranks rewritten."""
    by_q: dict[str, list[str]] = {}
    for line in src.read_text().splitlines():
        q, _, doc, *_ = line.split()
        by_q.setdefault(q, []).append(doc)
    rng = random.Random(seed)
    out = []
    for q, docs in by_q.items():
        top = docs[:10]
        rng.shuffle(top)
        out += [f"{q} Q0 {d} {i + 1} {100 - i} shuffled" for i, d in enumerate(top + docs[10:])]
    dest.write_text("\n".join(out) + "\n")
    return dest


def write_config(folder: Path, server: ScriptedServer, *, runs: dict[str, Path] | None = None, extra: str = "",
                 thresholds: str = 'default_max_drop = 0.02\n', cache: str = "cache.sqlite",
                 cache_mode: str = "use") -> Path:
    runs = runs or {"bm25": MINI / "runs" / "bm25.trec", "dense": MINI / "runs" / "dense.trec"}
    run_tables = "".join(f'[runs.{name}]\nfile = "{path}"\n' for name, path in runs.items())
    text = f'''
[dataset]
data = "{MINI / 'questions.jsonl'}"
corpus = "{MINI / 'corpus.jsonl'}"

{run_tables}
[judge]
name = "openai"
model = "scripted-judge"
base_url = "{server.base_url}"
timeout = 5
concurrency = 4

[cache]
path = "{cache}"
mode = "{cache_mode}"

[metrics]
ks = [5, 10]
check = {json.dumps(CHECK)}

[thresholds]
{thresholds}
[history]
path = "history.sqlite"

[output]
dir = "audits"
{extra}
'''
    path = folder / "audit.toml"
    path.write_text(text)
    return path


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def audit_json(folder: Path) -> dict:
    return json.loads((folder / "audit.json").read_text())


def latest_folder(ws: Path) -> Path:
    """The folder of the audit recorded last (two audits may start within the same second)."""
    return ws / "audits" / History(ws / "history.sqlite").audits()[0]["id"]


# ----------------------------------------------------------------------------- the gate


def test_first_audit_passes_with_a_note_then_a_rerun_is_free_then_a_shuffle_regresses(scenario, tmp_path: Path):
    ws = tmp_path
    with ScriptedServer(scenario) as server:
        config = write_config(ws, server)
        first = cli("audit", "--config", str(config))
        assert first.exit_code == ExitCode.OK, first.output
        lines = first.output.splitlines()
        assert lines[0].startswith("PASS (exit 0)") and "without baseline" in lines[0]
        assert "note: first audit: no baseline in the history, only floors were checked" in first.output
        assert server.completions > 0
        one = audit_json(latest_folder(ws))
        assert one["baseline"] is None and one["verdict"] == "pass"

        server.reset_log()
        again = cli("audit", "--config", str(config))
        assert again.exit_code == ExitCode.OK, again.output
        assert server.requests == []  # zero judge calls: every answer came from the cache
        two = audit_json(latest_folder(ws))
        assert two["accounting"]["calls"] == 0 and two["accounting"]["cache_hits"] == one["accounting"]["calls"]
        assert two["baseline"]["ids"] == [one["id"]]
        assert all(c["diff"] == 0 and c["p_value"] == 1 and c["verdict"] == "pass" for c in two["checks"])

        shuffled = shuffled_run(MINI / "runs" / "dense.trec", ws / "dense_shuffled.trec")
        config = write_config(ws, server, runs={"bm25": MINI / "runs" / "bm25.trec", "dense": shuffled})
        bad = cli("audit", "--config", str(config))
        assert server.requests == []  # same chunks, other order: still nothing to pay for
    assert bad.exit_code == ExitCode.REGRESSION, bad.output
    lines = bad.output.splitlines()
    assert lines[0].startswith("REGRESSION (exit 1)")
    three = audit_json(latest_folder(ws))
    regressed = {(r["run"], r["metric"]) for r in three["regressions"]}
    assert regressed and {run for run, _ in regressed} == {"dense"}
    # the first lines name the run, the metric and the questions that dropped most
    for run, metric in regressed:
        line = next(x for x in lines[1:1 + len(regressed)] if f"metric {metric}:" in x)
        assert line.startswith(f"REGRESSION run {run}, metric {metric}: ")
        check = next(c for c in three["checks"] if (c["run"], c["metric"]) == (run, metric))
        worst = check["regressed_questions"][0]
        assert f"largest drops: {worst['question_id']} {worst['diff']:+.3f}" in line
    # a shuffle inside the top 10 cannot change what the top 10 holds: recall@10 is unchanged
    recall = next(c for c in three["checks"] if (c["run"], c["metric"]) == ("dense", "context_recall@10"))
    assert recall["diff"] == 0 and recall["verdict"] == "pass"
    # the baseline is the last passing audit
    assert three["baseline"]["ids"] == [two["id"]]
    # report.md (for CI logs and PR comments) starts with the same lines, Markdown-escaped
    from judge_eval.report.markdown import md

    top = (latest_folder(ws) / "report.md").read_text().splitlines()[:2 + len(three["headline"])]
    assert three["headline"] == lines[:len(three["headline"])]
    assert all(f"- {md(h)}" in top for h in three["headline"])


def test_the_gate_numbers_are_the_independent_computation(scenario, tmp_path: Path):
    """diff, baseline value, p and Holm's p of audit.json recomputed from the two audit folders'
    per_question.csv with numpy and a brute-force Holm."""
    with ScriptedServer(scenario) as server:
        run_audit(write_config(tmp_path, server))
        base_folder = latest_folder(tmp_path)
        shuffled = shuffled_run(MINI / "runs" / "dense.trec", tmp_path / "d.trec", seed=3)
        audit = run_audit(write_config(tmp_path, server, runs={"bm25": MINI / "runs" / "bm25.trec", "dense": shuffled}))
    old = pd.read_csv(base_folder / "per_question.csv", dtype={"question_id": str})
    new = pd.read_csv(audit.folder / "per_question.csv", dtype={"question_id": str})
    raw_p = []
    for c in audit.document["checks"]:
        a = new[new["run"] == c["run"]].set_index("question_id")[c["metric"]]
        b = old[old["run"] == c["run"]].set_index("question_id")[c["metric"]].reindex(a.index)
        both = a.notna() & b.notna()
        assert c["value"] == pytest.approx(a.mean())
        assert c["baseline_value"] == pytest.approx(b.mean())
        assert c["diff"] == pytest.approx((a[both] - b[both]).mean())
        assert c["n_paired"] == int(both.sum())
        assert c["p_value"] == pytest.approx(randomization_test(a.to_numpy(), b.to_numpy(), n_perm=10000, seed=0))
        raw_p.append(c["p_value"])
        drops = sorted(((a - b)[both & (a < b)]).items(), key=lambda t: (t[1], t[0]))[:10]
        assert [(q["question_id"], q["diff"]) for q in c["regressed_questions"]] == \
            [(q, pytest.approx(d)) for q, d in drops]
    # Holm by hand: sort, scale by (m - rank), running maximum, cap at 1
    m = len(raw_p)
    order = np.argsort(raw_p, kind="stable")
    expected = np.empty(m)
    running = 0.0
    for i, idx in enumerate(order):
        running = max(running, (m - i) * raw_p[idx])
        expected[idx] = min(1.0, running)
    assert [c["p_holm"] for c in audit.document["checks"]] == pytest.approx(list(expected))
    assert list(holm(raw_p)) == pytest.approx(list(expected))
    assert audit.document["gate"]["family_size"] == m == 2 * len(CHECK)


def test_a_floor_breach_fails_without_a_baseline(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        config = write_config(tmp_path, server, thresholds='[thresholds.floor]\n"context_recall@10" = 0.95\n')
        result = cli("audit", "--config", str(config))
    assert result.exit_code == ExitCode.REGRESSION, result.output
    lines = result.output.splitlines()
    doc = audit_json(latest_folder(tmp_path))
    assert doc["baseline"] is None
    values = {c["run"]: c["value"] for c in doc["checks"] if c["metric"] == "context_recall@10"}
    assert all(v < 0.95 for v in values.values())
    assert lines[0].startswith("REGRESSION (exit 1)")
    assert lines[1] == f"REGRESSION run bm25, metric context_recall@10: {values['bm25']:.3f} below floor 0.95"
    assert lines[2] == f"REGRESSION run dense, metric context_recall@10: {values['dense']:.3f} below floor 0.95"
    # a regressed audit is recorded but never becomes a baseline
    assert History(tmp_path / "history.sqlite").audits()[0]["verdict"] == "regression"


def test_a_regressed_audit_is_not_the_next_baseline(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        first = run_audit(write_config(tmp_path, server))
        shuffled = shuffled_run(MINI / "runs" / "dense.trec", tmp_path / "d.trec")
        cfg = write_config(tmp_path, server, runs={"bm25": MINI / "runs" / "bm25.trec", "dense": shuffled})
        second = run_audit(cfg)
        third = run_audit(cfg)
    assert (first.exit_code, second.exit_code, third.exit_code) == (0, 1, 1)
    assert second.document["baseline"]["ids"] == third.document["baseline"]["ids"] == [first.id]


def test_median_baseline_is_the_per_question_median(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        ids = [run_audit(write_config(tmp_path, server)).id for _ in range(2)]
        cfg = write_config(tmp_path, server, extra='[baseline]\nmode = "median"\nlast = 3\n')
        audit = run_audit(cfg)
    assert audit.document["baseline"]["mode"] == "median"
    assert set(audit.document["baseline"]["ids"]) == set(ids)
    assert any("fewer than baseline.last = 3" in n for n in audit.document["notes"])
    assert audit.exit_code == 0 and all(c["diff"] == 0 for c in audit.document["checks"])


# ----------------------------------------------------------------------------- the canary


def canary_file(path: Path, scenario: Scenario) -> Path:
    """The bank FAQ's six chunks with their human grades, plus two chunks of the mini fixture
    that the runs also retrieve (so they are in the cache), labelled as the judge grades them."""
    lines = [{"question_id": "bank-q1", "chunk_id": cid, "grade": BANK_GRADES.get(cid, 0), "text": text,
              "question": BANK_QUESTION, "reference": BANK_REFERENCE} for cid, text in BANK_CHUNKS.items()]
    ds = mini_dataset(n_questions=20)
    qid = next(iter(ds.questions))
    for chunk in ds.runs["dense"].rankings[qid][:2]:
        grade = scenario.verdicts[chunk.text].grade
        lines.append({"question_id": qid, "chunk_id": chunk.id, "grade": 2 if grade >= 2 else 0, "text": chunk.text})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def drifted(scenario: Scenario) -> Scenario:
    """The same judge, except that it no longer finds any bank chunk relevant."""
    verdicts = dict(scenario.verdicts)
    for text in BANK_CHUNKS.values():
        verdicts[text] = ChunkScript(grade=0)
    return Scenario(decompositions=scenario.decompositions, verdicts=verdicts)


def test_canary_drift_exits_3_and_only_the_canary_bypasses_the_cache(scenario, tmp_path: Path):
    pairs = canary_file(tmp_path / "canary.jsonl", scenario)
    n_pairs = len(pairs.read_text().splitlines())
    extra = f'[canary]\npairs = "{pairs}"\nfloor = 0.8\n'
    with ScriptedServer(scenario) as night1:
        night1_result = cli("audit", "--config", str(write_config(tmp_path, night1, extra=extra)))
    assert night1_result.exit_code == ExitCode.OK, night1_result.output
    one = audit_json(latest_folder(tmp_path))
    assert one["canary"]["accuracy"] == 1.0 and one["canary"]["cohen_kappa"] == 1.0
    assert one["canary"]["drift"] is False and one["canary"]["pairs"] == n_pairs
    cached = len(ResponseCache(tmp_path / "cache.sqlite"))

    # night 2: another port, the same judge identity (the port is not part of it), other answers
    with ScriptedServer(drifted(scenario)) as night2:
        result = cli("audit", "--config", str(write_config(tmp_path, night2, extra=extra)))
        requests = list(night2.requests)
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("JUDGE FAILED (exit 3)")
    drift_line = next(x for x in lines if x.startswith("JUDGE DRIFT: "))
    # hand count: humans call c2, c4, c8 relevant; the drifted judge none: 3 of 6 bank pairs
    # disagree; both mini pairs still agree -> accuracy (8 - 3) / 8
    assert f"(accuracy) {5 / 8:.3f} < floor 0.8 on 8 pairs" in drift_line
    assert "changed grade since audit " + one["id"] in drift_line
    two = audit_json(latest_folder(tmp_path))
    assert two["canary"]["drift"] is True and two["canary"]["value"] == pytest.approx(5 / 8)
    assert {(c["chunk_id"], c["previous_judge_grade"], c["judge_grade"]) for c in two["canary"]["changed"]} == {
        ("c2", 3, 0), ("c4", 2, 0), ("c8", 2, 0), ("c7", 1, 0)}
    # what night 2 asked: exactly the canary (one decomposition per canary question, one verdict
    # per pair), the two mini chunks included although the runs' answers for them are cached
    kinds = sorted(r["kind"] for r in requests)
    assert kinds == sorted(["decompose"] * 2 + ["judge_chunk"] * n_pairs)
    asked = {text for r in requests for text in [r["body"]["messages"][1]["content"]]}
    for x in map(json.loads, pairs.read_text().splitlines()[-2:]):
        assert any(x["text"] in a for a in asked)
    assert two["accounting"]["calls"] == 0  # the runs: all from the cache
    # and the canary wrote nothing to the cache the runs read
    assert len(ResponseCache(tmp_path / "cache.sqlite")) == cached


def test_the_canary_spends_what_the_runs_left_of_the_budget(scenario, tmp_path: Path):
    from judge_eval.audit.canary import remaining_budget
    from judge_eval.run import Budget

    assert remaining_budget(Budget(10, 1000, 1.0), {"calls": 4, "total_tokens": 1500, "cost_usd": 0.25}) == Budget(
        6, 0, 0.75)
    assert remaining_budget(Budget(max_calls=2), {"calls": 5}) == Budget(max_calls=0)
    assert remaining_budget(None, {"calls": 5}) == Budget()

    pairs = canary_file(tmp_path / "canary.jsonl", scenario)
    canary = f'[canary]\npairs = "{pairs}"\nfloor = 0.8\n'
    with ScriptedServer(scenario) as server:
        assert cli("audit", "--config", str(write_config(tmp_path, server, extra=canary))).exit_code == 0
        first = audit_json(latest_folder(tmp_path))
        assert first["canary"]["calls"] == 10 and first["canary"]["tokens"] > 0  # 2 decompositions + 8 pairs
        server.reset_log()
        # the runs are all cached now (0 calls): the canary gets the whole cap of 3 calls (a
        # budget stops new calls: up to concurrency - 1 = 3 more were already under way)
        budget = canary + "[budget]\nmax_calls = 3\n"
        result = cli("audit", "--config", str(write_config(tmp_path, server, extra=budget)))
        sent = len(server.requests)
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    doc = audit_json(latest_folder(tmp_path))
    assert doc["accounting"]["calls"] == 0 and doc["canary"]["calls"] == sent and 3 <= sent <= 6
    skipped = doc["canary"]["errors"]
    assert doc["canary"]["partial"] and skipped > 0 and doc["canary"]["judged"] == 8 - skipped
    assert doc["judge_failure"] == f"a budget was reached during the canary: {skipped} of 8 pairs not judged"
    assert result.output.splitlines()[0].startswith("JUDGE FAILED (exit 3)")


# ----------------------------------------------------------------------------- judge failures


def test_judge_errors_above_the_tolerated_rate_exit_3_and_are_recorded(scenario, tmp_path: Path):
    with ScriptedServer(scenario, faults=[Fault("400", share=0.3, times=10**9, only="judge_chunk")]) as server:
        result = cli("audit", "--config", str(write_config(tmp_path, server)))
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert result.output.splitlines()[0].startswith("JUDGE FAILED (exit 3)")
    assert "JUDGE ERRORS: " in result.output and "more than --max-errors allows (5% of the tasks)" in result.output
    row = History(tmp_path / "history.sqlite").audits()[0]
    assert (row["verdict"], row["exit_code"]) == ("judge_failed", 3)


def test_an_unreachable_judge_is_recorded_as_judge_failed_and_never_becomes_the_baseline(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        assert cli("audit", "--config", str(write_config(tmp_path, server))).exit_code == 0
        first = History(tmp_path / "history.sqlite").audits()[0]["id"]
    with ScriptedServer(scenario, faults=[Fault("401", times=10**9)]) as server:  # a revoked key, say
        # a fresh cache, so the judge has to be asked
        result = cli("audit", "--config", str(write_config(tmp_path, server, cache="other.sqlite")))
        sent = len(server.requests)
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("JUDGE FAILED (exit 3): the judge refused the run or could not be reached (http_401); "
                        "nothing was scored")
    assert lines[1].startswith("JUDGE ERRORS: the judge refused the run or could not be reached (http_401)")
    assert sent == 1
    history = History(tmp_path / "history.sqlite")
    row = history.audits()[0]
    assert (row["verdict"], row["exit_code"], row["judge_identity"]) == ("judge_failed", 3,
                                                                        "openai:localhost/scripted-judge")
    assert row["questions_fingerprint"] == history.audits()[1]["questions_fingerprint"]  # what it was to score
    failed = tmp_path / "audits" / row["id"]
    assert sorted(p.name for p in failed.iterdir()) == ["audit.json", "report.md"]
    doc = audit_json(failed)
    assert doc["judge_unavailable"] == "http_401" and doc["checks"] == [] and doc["accounting"]["calls"] == 1
    assert "nothing was scored" in (failed / "report.md").read_text()
    assert history.question_values([row["id"]], CHECK).empty
    shown = cli("history", "show", row["id"], "--history", str(tmp_path / "history.sqlite"))
    assert shown.exit_code == 0 and "http_401" in shown.output
    with ScriptedServer(scenario) as server:  # the judge is back: compared with the last audit that passed
        again = cli("audit", "--config", str(write_config(tmp_path, server)))
    assert again.exit_code == 0, again.output
    assert audit_json(latest_folder(tmp_path))["baseline"]["ids"] == [first]


def test_a_budget_reached_exits_3(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        result = cli("audit", "--config", str(write_config(tmp_path, server, extra="[budget]\nmax_calls = 3\n")))
        assert server.completions <= 3 + 4  # calls in flight when the cap is reached finish
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert "a budget stopped the judge" in result.output


# ----------------------------------------------------------------------------- run commands


def test_a_run_command_writes_its_file_and_a_failing_or_slow_one_is_exit_2(scenario, tmp_path: Path):
    src = MINI / "runs" / "dense.trec"
    with ScriptedServer(scenario) as server:
        config = write_config(tmp_path, server, runs={"dense": tmp_path / "made.trec"})
        text = config.read_text().replace(
            f'file = "{tmp_path / "made.trec"}"\n',
            f'file = "{tmp_path / "made.trec"}"\ncommand = "cp {src} \\"$JUDGE_EVAL_RUN_FILE\\""\n')
        config.write_text(text)
        ok = cli("audit", "--config", str(config))
        assert ok.exit_code == 0, ok.output
        assert (tmp_path / "made.trec").read_bytes() == src.read_bytes()

        n_audits = len(History(tmp_path / "history.sqlite").audits())
        for command, words in [("exit 7", ["runs.dense.command", "status 7"]),
                               ("true", ["runs.dense.command", "did not write"]),
                               ("sleep 30", ["runs.dense.command", "within 0.5 s", "killed"])]:
            config.write_text(text.replace(f'command = "cp {src} \\"$JUDGE_EVAL_RUN_FILE\\""',
                                           f'command = "{command}"\ntimeout = 0.5'))
            server.reset_log()
            bad = cli("audit", "--config", str(config))
            assert bad.exit_code == ExitCode.USAGE, bad.output
            assert all(w in bad.output for w in words), bad.output
            assert server.requests == []
        assert len(History(tmp_path / "history.sqlite").audits()) == n_audits  # nothing recorded


# ----------------------------------------------------------------------------- crash safety


def test_sigkill_in_the_middle_of_an_audit_leaves_the_history_readable_and_the_next_audit_completes(
        scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        first = run_audit(write_config(tmp_path, server))
    with ScriptedServer(scenario, hold_after=5) as server:
        config = write_config(tmp_path, server, cache_mode="refresh")  # ask again: the judge is busy when killed
        proc = subprocess.Popen([sys.executable, "-m", "judge_eval.cli", "audit", "--config", str(config)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        while server.held == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.held > 0, "the audit must be waiting on the judge when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        server.release()
        history = History(tmp_path / "history.sqlite")
        assert [a["id"] for a in history.audits()] == [first.id]
        assert history.integrity() == "ok"
        assert history.document(first.id)["id"] == first.id
        nxt = cli("audit", "--config", str(write_config(tmp_path, server)))
    assert nxt.exit_code == 0, nxt.output
    rows = History(tmp_path / "history.sqlite").audits()
    assert len(rows) == 2 and rows[1]["id"] == first.id and rows[0]["baseline"] == [first.id]
    assert [p.name for p in (tmp_path / "audits").iterdir() if p.name.startswith(".")] == []


def test_a_locked_history_is_a_clear_error_and_earlier_records_survive(scenario, tmp_path: Path):
    import sqlite3

    with ScriptedServer(scenario) as server:
        config = write_config(tmp_path, server, extra="")
        text = config.read_text().replace('path = "history.sqlite"', 'path = "history.sqlite"\ntimeout = 0.2')
        config.write_text(text)
        first = run_audit(config)
        holder = sqlite3.connect(tmp_path / "history.sqlite", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another audit writing
        try:
            result = cli("audit", "--config", str(config))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "history.sqlite: locked by another process" in result.output
    assert "Traceback" not in result.output
    history = History(tmp_path / "history.sqlite")
    assert [a["id"] for a in history.audits()] == [first.id] and history.integrity() == "ok"
    assert [p.name for p in (tmp_path / "audits").iterdir()] == [first.id]  # nothing half-written


@pytest.mark.parametrize("damage", ["not_a_database", "corrupt_page"])
def test_a_corrupt_history_is_a_clear_error_before_any_judge_call_and_is_left_as_it_is(
        damage: str, scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        config = write_config(tmp_path, server)
        run_audit(config)
        path = tmp_path / "history.sqlite"
        data = bytearray(path.read_bytes())
        if damage == "not_a_database":
            data = bytearray(b"these are not the audits you are looking for\n" * 100)
        else:
            page = 4096
            assert len(data) > 3 * page
            data[page:3 * page] = bytes(range(256)) * (2 * page // 256)
        path.write_bytes(bytes(data))
        server.reset_log()
        result = cli("audit", "--config", str(config))
        assert server.requests == []
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"history {path}:" in result.output and "left as it is" in result.output
    assert path.read_bytes() == bytes(data)
    listed = cli("history", "list", "--history", str(path))
    assert listed.exit_code == ExitCode.USAGE and "Traceback" not in listed.output


# ----------------------------------------------------------------------------- the folder and the CLI


def test_the_audit_folder_holds_results_audit_json_and_report_md(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        audit = run_audit(write_config(tmp_path, server))
    names = sorted(p.name for p in audit.folder.iterdir())
    assert names == sorted(["audit.json", "summary.json", "per_question.csv", "missing.csv", "verdicts.jsonl",
                            "statements.jsonl", "report.md", "report.html"])
    doc = audit_json(audit.folder)
    assert doc == audit.document
    assert doc["schema"] == "judge-eval/audit@1" and doc["id"] == audit.folder.name
    assert doc["config"]["hash"].startswith("sha256:") and doc["package_version"]
    assert doc["judge"]["identity"] == "openai:localhost/scripted-judge"
    assert doc["dataset"]["questions"] == 20 and doc["dataset"]["runs"] == ["bm25", "dense"]
    assert [(c["run"], c["metric"]) for c in doc["checks"]] == [(r, m) for r in ("bm25", "dense") for m in CHECK]
    # report.md and report.html come from the renderers of `judge-eval report`, so rendering the
    # folder again gives the same report.md
    md_text = (audit.folder / "report.md").read_text()
    assert md_text.splitlines()[0] == f"# judge-eval audit {doc['id']}: **PASS**"
    assert "## Checks" in md_text and "`context_precision@10`" in md_text
    html_text = (audit.folder / "report.html").read_text()
    assert html_text.startswith("<!doctype html>") and doc["id"] in html_text
    from judge_eval.report.markdown import audit_markdown
    from judge_eval.report.render import read_source

    assert audit_markdown(doc, current=read_source(audit.folder)) == md_text
    # the history holds the same audit, with per-question values of every measure
    history = History(tmp_path / "history.sqlite")
    assert history.document(doc["id"]) == doc
    pq = pd.read_csv(audit.folder / "per_question.csv", dtype={"question_id": str})
    stored = history.question_values([doc["id"]], ["context_precision@10"])
    merged = stored.merge(pq[["run", "question_id", "context_precision@10"]], on=["run", "question_id"])
    assert len(merged) == 40
    assert np.allclose(merged["value"], merged["context_precision@10"], equal_nan=True)


def test_history_commands(scenario, tmp_path: Path):
    with ScriptedServer(scenario) as server:
        config = write_config(tmp_path, server)
        a, b = run_audit(config), run_audit(config)
    listed = cli("history", "list", "--config", str(config))
    assert listed.exit_code == 0
    rows = listed.output.splitlines()
    assert rows[1].startswith(b.id) and rows[2].startswith(a.id)
    shown = cli("history", "show", b.id[:-2], "--history", str(tmp_path / "history.sqlite"), "--format", "json")
    assert json.loads(shown.output) == b.document
    trend = cli("history", "trend", "context_recall@10", "--run", "dense", "--config", str(config), "--format", "csv")
    frame = pd.read_csv(__import__("io").StringIO(trend.output))
    value = next(c["value"] for c in a.document["checks"] if (c["run"], c["metric"]) == ("dense", "context_recall@10"))
    assert list(frame["audit_id"]) == [a.id, b.id] and frame["value"].tolist() == pytest.approx([value, value])
    unknown = cli("history", "trend", "nope@3", "--config", str(config))
    assert unknown.exit_code == ExitCode.USAGE and "recorded metrics: " in unknown.output
    missing = cli("history", "list")
    assert missing.exit_code == ExitCode.USAGE and "--history" in missing.output


def test_audit_init_writes_a_config_that_loads_once_its_files_exist(tmp_path: Path, monkeypatch):
    from judge_eval.audit import load_config

    monkeypatch.chdir(tmp_path)
    result = cli("audit", "init")
    assert result.exit_code == 0 and (tmp_path / "audit.toml").is_file()
    again = cli("audit", "init")
    assert again.exit_code == ExitCode.USAGE and "--force" in again.output
    for name in ("questions.jsonl", "corpus.jsonl", "runs/dense.trec", "runs/bm25.trec"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    cfg = load_config(tmp_path / "audit.toml")
    assert cfg.check == ["context_recall@10", "context_precision@10", "judge_ndcg@10"]
    assert cfg.floors == {"context_recall@10": 0.4}
    assert cfg.max_drops == dict.fromkeys(cfg.check, 0.02)
    assert cfg.history == tmp_path / "audit-history.sqlite"


def test_a_human_labelled_subset_adds_agreement_corrected_estimates_and_human_checks(tmp_path: Path):
    from test_audit_config import GOOD  # the offline judge, one run (dense)

    from judge_eval.evaluation import evaluate

    config = tmp_path / "audit.toml"
    config.write_text(GOOD.replace('check = ["context_recall@10", "judge_ndcg@10"]',
                                   'check = ["context_recall@10", "recall@10"]')
                      .replace('"judge_ndcg@10" = 0.05', '"recall@10" = 0.05')
                      + '[labels]\nqrels = "%s"\n' % (MINI / "qrels.txt"))
    audit = run_audit(config)
    assert audit.exit_code == 0
    doc = audit.document
    direct = evaluate(MINI / "questions.jsonl", {"dense": MINI / "runs" / "dense.trec"}, MINI / "qrels.txt",
                      corpus=MINI / "corpus.jsonl", judge="offline", ks=(5, 10))
    assert doc["trust"] == json.loads(json.dumps(direct.trust.to_dict(), allow_nan=True).replace("NaN", "null"))
    human = next(c for c in doc["checks"] if c["metric"] == "recall@10")
    want = direct.summary.set_index(["run", "measure"]).loc[("dense", "recall@10")]
    assert human["value"] == pytest.approx(want["mean"]) and human["n"] == want["n"]
    assert "kappa" in (audit.folder / "report.md").read_text().lower()  # the agreement reaches the report
