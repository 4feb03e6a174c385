"""Agreement with human labels wired into score, the results folder and `judge-eval agreement`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import judge_eval
from judge_eval.agree import agree
from judge_eval.cli import main

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "fixtures" / "clapnq" / "mini"


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> tuple[judge_eval.Results, Path]:
    out = tmp_path_factory.mktemp("trust") / "res"
    runs = {n: MINI / "runs" / f"{n}.trec" for n in ("bm25", "dense")}
    results = judge_eval.evaluate(MINI / "questions.jsonl", runs=runs,
                                  qrels=MINI / "qrels.txt", corpus=MINI / "corpus.jsonl", judge="offline", ks=(3, 5))
    judge_eval.write_results(results, out)
    return results, out


def test_score_with_qrels_reports_agreement_everywhere(scored) -> None:
    results, out = scored
    assert results.trust is not None
    summary = json.loads((out / "summary.json").read_text())
    chunk = {r["statistic"]: r for r in summary["trust"]["agreement"]["chunk"]}
    assert set(chunk) == {"cohen_kappa", "weighted_kappa", "precision", "recall", "roc_auc"}
    assert chunk["cohen_kappa"]["value"] == pytest.approx(
        results.trust.agreement.chunk.set_index("statistic").loc["cohen_kappa", "value"])
    assert "How far the judge can be trusted" in (out / "report.md").read_text()
    assert "How far the judge can be trusted" in (out / "report.html").read_text()
    from judge_eval.report.summary import render_score_summary

    text = render_score_summary(results)
    kappa = results.trust.agreement.chunk.set_index("statistic").loc["cohen_kappa", "value"]
    assert f"judge vs humans on {results.trust.agreement.counts.pairs} labelled chunks: kappa {kappa:.3f}" in text
    assert "  context_recall@5 vs recall@5  r " in text and "Kendall tau of the order of the runs" in text


def test_the_agreement_command_on_a_folder_equals_what_score_computed(scored) -> None:
    results, out = scored
    later = agree(out, MINI / "qrels.txt")
    assert later.to_dict() == json.loads(json.dumps(results.trust.to_dict()))  # same numbers, JSON round trip
    cli = CliRunner().invoke(main, ["agreement", "--results", str(out), "--qrels", str(MINI / "qrels.txt"),
                                    "--format", "json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output) == later.to_dict()


def test_partial_labels_give_corrected_estimates(scored, tmp_path: Path) -> None:
    _, out = scored
    lines = (MINI / "qrels.txt").read_text().splitlines()
    qids = list(dict.fromkeys(line.split()[0] for line in lines))
    keep = set(qids[: len(qids) // 2])
    partial = tmp_path / "half.txt"
    partial.write_text("\n".join(line for line in lines if line.split()[0] in keep) + "\n")
    result = agree(out, partial)
    e = result.estimates
    assert result.labelled_questions == len(keep)
    assert (e["ppi_n_unlabelled"] > 0).all()
    assert ((e["ppi_ci_low"] >= 0) & (e["ppi_ci_high"] <= 1)).all()
    text = CliRunner().invoke(main, ["agreement", "--results", str(out), "--qrels", str(partial)]).output
    assert f"{len(keep)} of {len(qids)} questions are labelled" in text and "corrected" in text


def test_bad_inputs_exit_2(scored, tmp_path: Path) -> None:
    _, out = scored
    (tmp_path / "empty").mkdir()
    other = tmp_path / "other.txt"
    other.write_text("zz 0 c1 1\n")
    for args, words in ((["--results", str(tmp_path / "empty"), "--qrels", str(MINI / "qrels.txt")], ["summary.json"]),
                        (["--results", str(out), "--qrels", str(other)], ["none of the 1 labelled question ids"])):
        result = CliRunner().invoke(main, ["agreement", *args])
        assert result.exit_code == 2 and "Traceback" not in result.output
        for w in words:
            assert w in result.output
