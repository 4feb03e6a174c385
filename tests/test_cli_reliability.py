"""The command line's edges: output folders, exit codes, option checks, Ctrl-C, warnings.

Each test is one finding of the reliability review (issue 6) as a user would meet it.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from judge_eval.cli import main
from judge_eval.errors import ExitCode
from judge_eval.testing.scripted_server import Fault, ScriptedServer

from judge_helpers import MINI, offline_scenario

ROOT = Path(__file__).resolve().parent.parent
BANK = ROOT / "fixtures" / "bank_faq"
CLAP = ROOT / "fixtures" / "clapnq"


def offline_args(*extra: str) -> list[str]:
    return ["score", "--data", str(BANK / "data.jsonl"), "--judge", "offline", "-k", "1,3,5", *extra]


def invoke(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def assert_clean_usage_error(result, *words: str) -> None:
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "Traceback" not in result.output
    for w in words:
        assert w in result.output, result.output


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


# ----------------------------------------------------------------------------- 1. data loss


def test_out_on_a_folder_with_user_files_is_refused_and_the_files_survive(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("x")
    result = invoke(offline_args("--out", str(ws)))
    assert_clean_usage_error(result, "notes.txt", "--force")
    assert sorted(p.name for p in ws.iterdir()) == ["notes.txt"]
    assert (ws / "notes.txt").read_text() == "x"
    assert siblings(ws) == []


def test_out_on_the_folder_holding_the_inputs_keeps_the_inputs(tmp_path: Path, monkeypatch) -> None:
    for name in ("data.jsonl",):
        (tmp_path / name).write_bytes((BANK / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for out in (str(tmp_path), "."):
        result = invoke(["score", "--data", "data.jsonl", "--judge", "offline", "--out", out])
        assert_clean_usage_error(result, "data.jsonl")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_force_writes_the_result_files_beside_the_users_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("x")
    result = invoke(offline_args("--out", str(ws), "--force"))
    assert result.exit_code == 0, result.output
    names = {p.name for p in ws.iterdir()}
    assert "notes.txt" in names and "summary.json" in names and (ws / "notes.txt").read_text() == "x"
    # a second forced run replaces only our files
    result = invoke(offline_args("--out", str(ws), "--force", "-k", "1"))
    assert result.exit_code == 0 and (ws / "notes.txt").read_text() == "x"
    assert json.loads((ws / "summary.json").read_text())["settings"]["ks"] == [1]


def test_an_earlier_results_folder_is_replaced_and_permissions_are_the_usual_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert invoke(offline_args("--out", str(out), "-k", "1,3")).exit_code == 0
    assert invoke(offline_args("--out", str(out), "-k", "5")).exit_code == 0
    assert json.loads((out / "summary.json").read_text())["settings"]["ks"] == [5]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((out / "summary.json").stat().st_mode) == 0o666 & ~umask
    assert siblings(out) == []


def test_out_into_an_empty_current_directory_works(tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    result = invoke(offline_args("--out", "."))
    assert result.exit_code == 0, result.output
    assert (empty / "summary.json").is_file() and Path.cwd() == empty


@pytest.mark.parametrize("where", ["file", "file/sub", "/proc/judge-eval-x", "/proc/judge-eval-x/y"])
def test_unwritable_out_is_refused_before_any_judge_call(where: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("keep")
    out = where if where.startswith("/") else str(tmp_path / where)
    with ScriptedServer(offline_scenario_bank()) as server:
        result = invoke(["score", "--data", str(BANK / "data.jsonl"), "--judge", "openai", "--model", "m",
                         "--base-url", server.base_url, "--cache", str(tmp_path / "c.sqlite"), "--out", out])
        assert_clean_usage_error(result, "--out")
        assert server.requests == []  # nothing was paid for
    assert (tmp_path / "file").read_text() == "keep"


def test_metrics_out_is_checked_and_written_atomically(tmp_path: Path) -> None:
    args = ["metrics", "--qrels", str(BANK / "qrels.txt"), "--run", f"dense={BANK / 'runs' / 'dense.trec'}"]
    (tmp_path / "file").write_text("keep")
    assert_clean_usage_error(invoke([*args, "--out", str(tmp_path / "file" / "x.txt")]), "--out")
    assert_clean_usage_error(invoke([*args, "--out", "/proc/judge-eval-x.txt"]), "--out")
    result = invoke([*args, "--out", str(tmp_path / "m.txt")])
    assert result.exit_code == 0 and "hit_rate@1" in (tmp_path / "m.txt").read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "m.txt").stat().st_mode) == 0o666 & ~umask


def offline_scenario_bank():
    from judge_helpers import bank_scenario

    return bank_scenario()


# ----------------------------------------------------------------------------- 2 and 4. options


@pytest.mark.parametrize(("option", "value"), [
    ("--concurrency", "0"), ("--samples", "0"), ("--samples", "-3"), ("--timeout", "-1"), ("--timeout", "nan"),
    ("--timeout", "inf"), ("--price-in", "-1"), ("--price-out", "-0.5"), ("--price-in", "nan"),
    ("--max-calls", "-1"), ("--max-tokens", "-5"), ("--max-cost", "-1"), ("--max-cost", "inf"),
    ("--max-errors", "-1"), ("--max-errors", "150%"), ("--max-errors", "lots"), ("-k", "5,,10"),
    ("-k", "0"), ("-k", "5,"), ("-k", "x"),
])
def test_nonsense_options_exit_2_naming_the_option(option: str, value: str, tmp_path: Path) -> None:
    result = invoke(offline_args(option, value, "--out", str(tmp_path / "out")))
    assert_clean_usage_error(result, option)
    assert not (tmp_path / "out").exists()


def test_help_describes_every_option_and_shows_defaults() -> None:
    text = invoke(["score", "--help"]).output
    assert "[default: openai]" in text
    for option in ("--cache-mode", "--format", "--out", "--force", "--judge-id", "--max-errors", "--strict"):
        block = text.split(option, 1)[1].split("\n  -", 1)[0]
        assert len(block.split()) > 4, f"{option} has no description"
    assert "replaced" in text.split("--out", 1)[1].split("--force", 1)[0]


# ----------------------------------------------------------------------------- 3. exit codes of a failing judge


def _score_with(server: ScriptedServer | None, tmp_path: Path, *extra: str, base_url: str | None = None):
    args = ["score", "--data", str(BANK / "data.jsonl"), "--judge", "openai", "--model", "m",
            "--base-url", base_url or server.base_url, "--cache", str(tmp_path / "c.sqlite"), "--no-progress",
            "-k", "5", *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False, env={"OPENAI_API_KEY": "sk-test-key-123456"})


def test_a_401_stops_the_run_at_once_with_exit_3(tmp_path: Path) -> None:
    with ScriptedServer(offline_scenario_bank(), faults=[Fault("401", times=10**9)]) as server:
        result = _score_with(server, tmp_path, "--concurrency", "1", "--out", str(tmp_path / "out"))
        sent = len(server.requests)
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert "http_401" in result.output and "Traceback" not in result.output
    assert sent == 1  # the first refusal stops the run; nothing else is sent
    assert not (tmp_path / "out").exists()


def test_a_401_at_the_default_concurrency_sends_one_request_not_one_per_task_in_flight(tmp_path: Path) -> None:
    # 20 references decomposed at once (--concurrency 32): the first 401 fails the others
    # waiting behind it without sending them
    args = ["score", "--data", str(MINI / "questions.jsonl"), "--corpus", str(MINI / "corpus.jsonl"),
            "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}", "--judge", "openai", "--model", "m",
            "--cache", str(tmp_path / "c.sqlite"), "--no-progress", "-k", "3"]
    with ScriptedServer(offline_scenario_bank(), faults=[Fault("401", times=10**9)]) as server:
        result = CliRunner().invoke(main, [*args, "--base-url", server.base_url], catch_exceptions=False,
                                    env={"OPENAI_API_KEY": "sk-test-key-123456"})
        sent = len(server.requests)
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert sent == 1 and "stopped after 1 call," in result.output


def test_a_refused_connection_stops_the_run_with_exit_3(tmp_path: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.monotonic()
    result = _score_with(None, tmp_path, base_url=f"http://127.0.0.1:{port}/v1")
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert "connection" in result.output and "Traceback" not in result.output
    assert time.monotonic() - start < 30


def test_replay_with_misses_exits_3_and_says_why(tmp_path: Path) -> None:
    with ScriptedServer(offline_scenario_bank()) as server:
        result = _score_with(server, tmp_path, "--cache-mode", "replay")
        assert server.requests == []
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert "cache_miss" in result.output and "--max-errors" in result.output
    # the table does not call judge errors "undefined"
    assert "judge error for 1 of 1 questions" in result.output
    assert "undefined for" not in result.output


def test_errors_within_max_errors_exit_0_and_above_exit_3(tmp_path: Path) -> None:
    # every chunk verdict is malformed JSON, also after the repair: 5 failed tasks of 6
    faults = [Fault("malformed", share=1.0, times=10**9, only="judge_chunk")]
    from judge_helpers import BANK_CHUNKS

    with ScriptedServer(offline_scenario_bank(), faults=faults) as server:
        result = _score_with(server, tmp_path, "--max-errors", "100%")
        assert result.exit_code == 0, result.output
        result = _score_with(server, tmp_path, "--max-errors", "4")
        assert result.exit_code == ExitCode.JUDGE_FAILED
        assert "5 of 6 judge tasks failed (invalid_output 5)" in result.output
    assert BANK_CHUNKS  # the scenario's chunks are the ones judged


def test_a_budget_stop_is_written_but_exits_3(tmp_path: Path) -> None:
    with ScriptedServer(offline_scenario_bank()) as server:
        result = _score_with(server, tmp_path, "--max-calls", "2", "--concurrency", "1", "--out", str(tmp_path / "o"))
    assert result.exit_code == ExitCode.JUDGE_FAILED, result.output
    assert "budget" in result.output and (tmp_path / "o" / "summary.json").is_file()
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["accounting"]["partial"] is True


# ----------------------------------------------------------------------------- 7. Ctrl-C


def test_ctrl_c_exits_130_and_says_a_rerun_resumes(tmp_path: Path) -> None:
    from judge_eval.data.load import load_dataset

    ds = load_dataset(MINI / "questions.jsonl", {n: MINI / "runs" / f"{n}.trec" for n in ("bm25",)},
                      corpus=MINI / "corpus.jsonl")
    with ScriptedServer(offline_scenario(ds, depth=3), hold_after=6) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(MINI / "questions.jsonl"),
             "--corpus", str(MINI / "corpus.jsonl"), "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}",
             "--judge", "openai", "--model", "m", "--base-url", server.base_url, "-k", "3",
             "--cache", str(tmp_path / "c.sqlite"), "--no-progress", "--out", str(tmp_path / "out")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not (server.completions == 6 and server.held > 0):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)  # let the client store the six answers
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        server.release()
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert "Traceback" not in err
    assert "6 judge answers from this run are stored in the cache" in err and "resume" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- 8 and 9. messages, subsets


def test_warnings_are_one_line_without_a_source_line_and_a_slice_of_the_data_scores(tmp_path: Path) -> None:
    lines = (CLAP / "questions.jsonl").read_text().splitlines()[:12]
    (tmp_path / "q12.jsonl").write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(tmp_path / "q12.jsonl"),
         "--corpus", str(CLAP / "corpus.jsonl"), "--run", f"dense={CLAP / 'runs' / 'dense.trec'}",
         "--judge", "offline", "-k", "5", "--format", "json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    assert warnings == [f"warning: run 'dense' ranks 288 question(s) that are not in {tmp_path / 'q12.jsonl'}; "
                        "they are left out (12 of its 300 rankings are used)"]
    summary = json.loads(result.stdout)
    assert summary["dataset"]["questions"] == 12
    strict = subprocess.run(
        [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(tmp_path / "q12.jsonl"),
         "--corpus", str(CLAP / "corpus.jsonl"), "--run", f"dense={CLAP / 'runs' / 'dense.trec'}",
         "--judge", "offline", "--strict"], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 2 and "dense.trec" in strict.stderr and "Traceback" not in strict.stderr


def test_the_missing_note_names_the_runs() -> None:
    result = invoke(["metrics", "--qrels", str(CLAP / "qrels.txt"),
                     "--run", f"bm25={CLAP / 'runs' / 'bm25.trec'}", "--run", f"dense={CLAP / 'runs' / 'dense.trec'}",
                     "-k", "5"])
    assert result.exit_code == 0
    assert ("undefined for 1 of 300 questions in every run (left out of the mean): hit_rate@5, recall@5, mrr, "
            "ndcg@5") in result.output


def test_qrels_of_another_dataset_are_an_error_not_a_table_of_zeros(tmp_path: Path) -> None:
    result = invoke(["metrics", "--qrels", str(BANK / "qrels.txt"), "--run", f"bm25={CLAP / 'runs' / 'bm25.trec'}"])
    assert_clean_usage_error(result, str(BANK / "qrels.txt"), "none of the 1 labelled question ids")


def test_a_run_missing_some_labelled_questions_warns_with_the_count(tmp_path: Path) -> None:
    run = tmp_path / "half.trec"
    lines = (CLAP / "runs" / "bm25.trec").read_text().splitlines()
    qids = list(dict.fromkeys(line.split()[0] for line in lines))[:150]
    run.write_text("\n".join(line for line in lines if line.split()[0] in set(qids)) + "\n")
    result = subprocess.run([sys.executable, "-m", "judge_eval.cli", "metrics", "--qrels", str(CLAP / "qrels.txt"),
                             "--run", f"half={run}", "-k", "5"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "warning: run 'half' has no ranking for 150 of the 300 labelled questions; they score 0" in result.stderr


# ----------------------------------------------------------------------------- 2 and 8. cache files


def test_a_cache_that_is_not_sqlite_is_a_clear_error_before_any_call(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database\n" * 100)
    with ScriptedServer(offline_scenario_bank()) as server:
        result = CliRunner().invoke(main, ["score", "--data", str(BANK / "data.jsonl"), "--judge", "openai",
                                           "--model", "m", "--base-url", server.base_url, "--cache", str(bad)],
                                    catch_exceptions=False)
        assert server.requests == []
    assert_clean_usage_error(result, str(bad), "not an SQLite database")
    assert_clean_usage_error(invoke(["cache", "stats", "--cache", str(bad)]), str(bad))
    assert bad.read_bytes() == b"this is not a database\n" * 100


def test_cache_stats_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new" / "x.sqlite"
    for args in (["cache", "stats"], ["cache", "export", str(tmp_path / "e.jsonl")], ["cache", "clear", "--yes"]):
        assert_clean_usage_error(invoke([*args, "--cache", str(target)]), "no cache at")
    assert not (tmp_path / "new").exists() and not (tmp_path / "e.jsonl").exists()


# ----------------------------------------------------------------------------- 6. judge identity


def test_judge_id_names_the_judge_in_results_and_cache_keys(tmp_path: Path) -> None:
    import sqlite3

    with ScriptedServer(offline_scenario_bank()) as server:
        first = _score_with(server, tmp_path, "--judge-id", "qwen-7b-q4@lab", "--format", "json")
        assert first.exit_code == 0, first.output
        assert json.loads(first.output)["judge"]["identity"] == "qwen-7b-q4@lab"
        sent = len(server.requests)
    con = sqlite3.connect(tmp_path / "c.sqlite")
    assert {r[0] for r in con.execute("select identity from responses")} == {"qwen-7b-q4@lab"}
    con.close()
    # the same name replays without the server (even gone); another name is another judge
    gone = "http://127.0.0.1:9/v1"
    again = _score_with(None, tmp_path, "--judge-id", "qwen-7b-q4@lab", "--cache-mode", "replay", base_url=gone)
    assert again.exit_code == 0, again.output
    other = _score_with(None, tmp_path, "--judge-id", "another", "--cache-mode", "replay", base_url=gone)
    assert other.exit_code == ExitCode.JUDGE_FAILED and "cache_miss" in other.output
    assert sent == 6
    assert_clean_usage_error(_score_with(None, tmp_path, "--judge-id", " ", base_url=gone), "--judge-id")
