"""The small public API, and the `cache` subcommands a user shares caches with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import judge_eval
from judge_eval.cache import ResponseCache, cache_key
from judge_eval.cli import main
from judge_eval.judge.protocol import Usage

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_resolves() -> None:
    for name in judge_eval.__all__:
        assert getattr(judge_eval, name) is not None
    with pytest.raises(AttributeError):
        judge_eval.not_a_thing  # noqa: B018


def test_evaluate_from_trec_files_returns_dataframes(tmp_path: Path) -> None:
    bank = ROOT / "fixtures" / "bank_faq"
    results = judge_eval.evaluate(
        bank / "questions.jsonl", runs={"dense": bank / "runs" / "dense.trec"}, qrels=bank / "qrels.txt",
        corpus=bank / "corpus.jsonl", judge="offline", ks=(5,),
    )
    means = dict(zip(results.summary["measure"], results.summary["mean"], strict=True))
    assert means["context_recall@5"] == pytest.approx(2 / 3)
    assert means["recall@5"] == pytest.approx(2 / 3)
    assert list(results.per_question["run"]) == ["dense"]
    out = judge_eval.write_results(results, tmp_path / "res")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"]["approximate"] is True
    assert summary["dataset"]["fingerprint"] == results.info["dataset"]["fingerprint"]


def _seed_cache(path: Path) -> None:
    with ResponseCache(path) as cache:
        for i, identity in enumerate(["openai:a/m1", "openai:a/m1", "openai:b/m2"]):
            request = {"model": "m", "messages": [{"role": "user", "content": str(i)}]}
            cache.put(cache_key(request), identity=identity, prompt="judge_chunk@1", request=request,
                      response={"supports": [], "grade": i, "reason": ""},
                      usage=Usage(10, 2))


def test_cache_stats_export_import_clear(tmp_path: Path) -> None:
    src, dst, dump = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "dump.jsonl"
    _seed_cache(src)
    runner = CliRunner()
    stats = runner.invoke(main, ["cache", "stats", "--cache", str(src)])
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["rows"] == 3
    assert runner.invoke(main, ["cache", "export", "--cache", str(src), str(dump)]).exit_code == 0
    assert len(dump.read_text().splitlines()) == 3
    imported = runner.invoke(main, ["cache", "import", "--cache", str(dst), str(dump)])
    assert imported.exit_code == 0 and "imported 3" in imported.output
    again = runner.invoke(main, ["cache", "import", "--cache", str(dst), str(dump)])
    assert "imported 0" in again.output  # idempotent
    cleared = runner.invoke(main, ["cache", "clear", "--cache", str(dst), "--identity", "openai:a/m1", "--yes"])
    assert cleared.exit_code == 0 and "deleted 2" in cleared.output
    assert len(ResponseCache(dst)) == 1


def test_cache_import_of_a_bad_file_exits_2_and_imports_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n")
    result = CliRunner().invoke(main, ["cache", "import", "--cache", str(tmp_path / "c.sqlite"), str(bad)])
    assert result.exit_code == 2
    assert str(bad) in result.output and "line 1" in result.output
    assert len(ResponseCache(tmp_path / "c.sqlite")) == 0
