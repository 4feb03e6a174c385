"""`judge-eval compare`: paired differences, randomization tests, Holm, and refusing apples vs oranges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

import judge_eval
from judge_eval.cli import main
from judge_eval.compare import compare, render
from judge_eval.metrics.stats import holm, randomization_test

ROOT = Path(__file__).resolve().parent.parent
BANK = ROOT / "fixtures" / "bank_faq"


def write_folder(path: Path, values: dict[str, list[float]], *, identity: str = "openai:localhost/m",
                 prompts: dict | None = None, measure: str = "context_recall@5") -> Path:
    """A minimal results folder: summary.json metadata and per_question.csv."""
    path.mkdir()
    rows = [{"run": run, "question_id": f"q{i}", measure: v} for run, vs in values.items() for i, v in enumerate(vs)]
    pd.DataFrame(rows).to_csv(path / "per_question.csv", index=False)
    info = {"summary": [], "judge": {"identity": identity, "approximate": False},
            "prompts": prompts or {"decompose": "decompose@1", "judge_chunk": "judge_chunk@1"},
            "dataset": {"questions_fingerprint": "abc"}, "settings": {"useful_rule": "support"}}
    (path / "summary.json").write_text(json.dumps(info))
    return path


def test_a_known_winner_gives_the_exact_difference_ci_and_p_value(tmp_path: Path) -> None:
    a = [0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.6, 0.0, 0.8, 0.7, 0.5, 0.2]
    b = [x + 0.1 for x in a]  # b beats a by exactly 0.1 on every question
    folder = write_folder(tmp_path / "r", {"a": a, "b": b})
    result = compare([folder], measures=["context_recall@5"])
    pair = result.pairs.iloc[0]
    assert (pair.run_a, pair.run_b) == ("a", "b")
    assert pair.mean_diff == pytest.approx(-0.1)
    assert pair.ci_low == pytest.approx(-0.1) and pair.ci_high == pytest.approx(-0.1)
    assert pair.n == 12
    # exact sign-flip test: only the two all-equal sign vectors reach |mean| = 0.1
    assert pair.p_value == pytest.approx(2 / 2**12)
    assert pair.p_holm == pytest.approx(2 / 2**12)  # one pair: Holm changes nothing
    assert pair.significant and pair.winner == "b"
    assert result.wins("context_recall@5", "b") == ["a"] and result.wins("context_recall@5", "a") == []
    means = result.summary.set_index("run")["mean"]
    assert means["a"] == pytest.approx(np.mean(a)) and means["b"] == pytest.approx(np.mean(b))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_randomization_test_equals_scipys_exact_permutation_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(size=11)
    b = a + rng.normal(0.1, 0.2, size=11)
    ours = randomization_test(a, b, n_perm=10**6)  # 2**11 <= n_perm: exact
    ref = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                 n_resamples=np.inf, alternative="two-sided").pvalue
    assert ours == pytest.approx(ref, rel=1e-12)


def test_holm_is_applied_over_the_pairs_of_each_measure(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(size=40)
    values = {"a": base, "b": base + rng.normal(0.05, 0.1, 40), "c": base + rng.normal(0.0, 0.1, 40)}
    folder = write_folder(tmp_path / "r", {k: list(v) for k, v in values.items()})
    result = compare([folder])
    pairs = list(result.pairs[["run_a", "run_b"]].itertuples(index=False, name=None))
    assert pairs == [("a", "b"), ("a", "c"), ("b", "c")]
    assert np.allclose(result.pairs["p_holm"], holm(result.pairs["p_value"].to_numpy()))
    for r in result.pairs.itertuples(index=False):
        assert r.p_value == randomization_test(values[r.run_a], values[r.run_b])
        assert r.significant == (r.p_holm <= 0.05)


def test_different_judges_are_refused_unless_allowed(tmp_path: Path) -> None:
    one = write_folder(tmp_path / "one", {"a": [0.1, 0.2, 0.3]})
    two = write_folder(tmp_path / "two", {"a": [0.3, 0.2, 0.4]}, identity="openai:api.openai.com/gpt-4o-mini",
                       prompts={"decompose": "decompose@1", "judge_chunk": "judge_chunk@2"})
    refused = CliRunner().invoke(main, ["compare", str(one), str(two)])
    assert refused.exit_code == 2
    assert "judge identity differs" in refused.output and "prompt versions differ" in refused.output
    allowed = CliRunner().invoke(main, ["compare", str(one), str(two), "--allow-different"])
    assert allowed.exit_code == 0, allowed.output
    assert "two/a (b)" in allowed.output  # the second folder's run is renamed, not merged
    assert "compared although judge identity differs" in allowed.output


def test_one_score_folder_compares_its_runs_in_every_format(tmp_path: Path) -> None:
    out = tmp_path / "res"
    dense = judge_eval.load_run(BANK / "runs" / "dense.trec", "dense", corpus=BANK / "corpus.jsonl")
    reverse = judge_eval.Run(name="bm25", rankings={q: list(reversed(c)) for q, c in dense.rankings.items()})
    results = judge_eval.evaluate(BANK / "questions.jsonl", runs={"dense": dense, "bm25": reverse},
                                  qrels=BANK / "qrels.txt", corpus=BANK / "corpus.jsonl", judge="offline", ks=(5,))
    judge_eval.write_results(results, out)
    runner = CliRunner()
    table = runner.invoke(main, ["compare", str(out)])
    assert table.exit_code == 0, table.output
    assert "dense (a)" in table.output and "bm25 (b)" in table.output and "context_recall@5" in table.output
    data = json.loads(runner.invoke(main, ["compare", str(out), "--format", "json"]).output)
    assert data["runs"] == ["dense", "bm25"] and {p["measure"] for p in data["pairs"]} >= {"context_recall@5"}
    md = runner.invoke(main, ["compare", str(out), "--format", "markdown", "--measures", "all"]).output
    assert md.startswith("| measure |") and "| context_recall@5 |" in md
    csv_text = runner.invoke(main, ["compare", str(out), "--format", "csv"]).output
    assert csv_text.splitlines()[0].startswith("measure,run_a,run_b,mean_diff")
    # the same numbers from Python, from the Results object or from its folder
    from_python, from_folder = compare([results]), compare([out])
    pd.testing.assert_frame_equal(from_python.pairs, from_folder.pairs)
    assert render(from_python, "table") == render(from_folder, "table")


@pytest.mark.parametrize("args,words", [
    (["--runs", "nope"], ["unknown run", "nope"]),
    (["--measures", "bogus@3"], ["unknown measure", "bogus@3"]),
    (["--alpha", "1.5"], ["--alpha"]),
    (["--runs", "a"], ["at least two runs"]),
    (["--runs", ","], ["--runs", "names no run"]),
    (["--runs", ""], ["--runs", "names no run"]),
])
def test_bad_options_exit_2(tmp_path: Path, args: list[str], words: list[str]) -> None:
    folder = write_folder(tmp_path / "r", {"a": [0.1, 0.2], "b": [0.2, 0.3]})
    result = CliRunner().invoke(main, ["compare", str(folder), *args])
    assert result.exit_code == 2 and "Traceback" not in result.output
    for w in words:
        assert w in result.output


def test_a_folder_that_is_not_a_results_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "x")])
    assert result.exit_code == 2 and str(tmp_path / "x") in result.output and "summary.json" in result.output
