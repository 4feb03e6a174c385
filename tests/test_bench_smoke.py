"""The benchmark scripts run, at a tiny size: a smoke test only. Nothing here asserts a speed
(the figures live in bench/README.md); it checks that the scripts still work with the code and
print their tables, and that judge-eval's means match pytrec_eval's and ranx's."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def script(name: str) -> dict:
    return runpy.run_path(str(BENCH / name), run_name="bench_smoke")


def test_bench_metrics_tiny(capsys) -> None:
    script("bench_metrics.py")["main"](["--tiny"])
    out = capsys.readouterr().out
    for label in ("load 3 TREC runs as columns", "evaluate_runs: 3 runs x 20 q", "score, offline judge",
                  "score over HTTP (scripted server), concurrency 8"):
        assert label in out, out


def test_bench_scale_tiny(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")  # ranx without its ~30 s compile
    script("bench_scale.py")["main"](["--queries", "30", "--docs", "10", "--repeat", "1",
                                      "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "30 queries x 10 documents: run 300 lines" in out, out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["judge-eval"], ["ranx"])}
    assert "same to 6 digits" in lines["judge-eval"] and "same to 6 digits" in lines["ranx"], out


def test_bench_shared_cache_tiny(capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_shared_cache.py", "--questions", "2", "--chunks", "2", "--latency", "0"])
    script("bench_shared_cache.py")["main"]()
    out = capsys.readouterr().out
    assert "unique tasks 6;" in out and "exit codes [0, 0]" in out, out


def test_bench_judged_scale_tiny(tmp_path: Path, capsys) -> None:
    script("bench_judged_scale.py")["main"](["--questions", "12", "--chunks", "4", "--repeat", "1",
                                             "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    # 12 decompositions + 48 verdicts, every one a cache hit (the script asserts no call was made)
    assert "12 questions x 4 chunks, k = 4 (cache: 60 answers" in out and "60 tasks read from the cache" in out, out
    assert "context_recall@4 1.000" in out and "context_precision@4 1.000" in out, out


@pytest.mark.parametrize("name", ["bench_metrics.py", "bench_scale.py", "bench_shared_cache.py",
                                  "bench_judged_scale.py"])
def test_bench_scripts_say_how_to_run_them(name: str) -> None:
    assert f"python bench/{name}" in (BENCH / name).read_text()
    assert f"`python bench/{name}" in (BENCH / "README.md").read_text()
