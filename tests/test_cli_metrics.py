"""`judge-eval metrics`: several runs side by side, checked against a plain re-computation."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from judge_eval.cli import main

MINI = Path(__file__).resolve().parent.parent / "fixtures" / "clapnq" / "mini"


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        qid, _, doc, grade = line.split()
        out[qid][doc] = int(grade)
    return out


def _read_run(path: Path) -> dict[str, list[str]]:
    rows: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        qid, _, doc, rank, _score, _tag = line.split()
        rows[qid].append((int(rank), doc))
    return {q: [d for _, d in sorted(r)] for q, r in rows.items()}


def _plain_means(run: dict[str, list[str]], qrels: dict[str, dict[str, int]], k: int) -> dict[str, float]:
    """An independent, deliberately naive computation (trec_eval -c semantics)."""
    hits, recalls, rrs, ndcgs = [], [], [], []
    for qid, grades in qrels.items():
        ranking = run.get(qid, [])
        rel = {d for d, g in grades.items() if g >= 1}
        if not rel:
            continue
        top = ranking[:k]
        found = [d for d in top if d in rel]
        hits.append(1.0 if found else 0.0)
        recalls.append(len(found) / len(rel))
        rr = 0.0
        for i, d in enumerate(ranking[:k], start=1):
            if d in rel:
                rr = 1 / i
                break
        rrs.append(rr)
        dcg = sum(grades.get(d, 0) / math.log2(i + 1) for i, d in enumerate(top, start=1))
        ideal = sorted(grades.values(), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
        ndcgs.append(dcg / idcg)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {f"hit_rate@{k}": mean(hits), f"recall@{k}": mean(recalls), f"mrr@{k}": mean(rrs), f"ndcg@{k}": mean(ndcgs)}


def test_metrics_json_matches_a_plain_recomputation(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["metrics", "--qrels", str(MINI / "qrels.txt"), "-k", "5", "--format", "json",
            "--measures", "hit_rate,recall,mrr@5,ndcg"]
    for name in ("bm25", "dense", "hybrid"):
        args += ["--run", f"{name}={MINI / 'runs' / (name + '.trec')}"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    qrels = _read_qrels(MINI / "qrels.txt")
    for name in ("bm25", "dense", "hybrid"):
        expected = _plain_means(_read_run(MINI / "runs" / f"{name}.trec"), qrels, 5)
        got = {r["measure"]: r for r in records if r["run"] == name}
        for measure, value in expected.items():
            assert got[measure]["mean"] == pytest.approx(value, abs=1e-12), (name, measure)
            assert got[measure]["n"] == 20 and got[measure]["n_missing"] == 0
            assert got[measure]["ci_low"] <= got[measure]["mean"] <= got[measure]["ci_high"]


def test_metrics_table_has_one_row_per_run_and_one_column_per_measure() -> None:
    result = CliRunner().invoke(main, [
        "metrics", "--qrels", str(MINI / "qrels.txt"), "-k", "1,5",
        "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}", "--run", f"dense={MINI / 'runs' / 'dense.trec'}",
        "--measures", "recall,mrr",
    ])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split() == ["run", "recall@1", "recall@5", "mrr"]
    assert [line.split()[0] for line in lines[1:]] == ["bm25", "dense"]


def test_metrics_per_question_csv(tmp_path: Path) -> None:
    out = tmp_path / "pq.csv"
    result = CliRunner().invoke(main, [
        "metrics", "--qrels", str(MINI / "qrels.txt"), "-k", "5", "--measures", "recall",
        "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}", "--per-question", "--format", "csv", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    lines = out.read_text().strip().splitlines()
    assert lines[0] == "run,question_id,recall@5"
    assert len(lines) == 1 + 20


def test_bad_qrels_line_exits_2_names_file_line_field_and_writes_nothing(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 c1 1\nq1 0 c2 -1\n")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 c1 1 2.0 t\n")
    out = tmp_path / "out.json"
    result = subprocess.run(
        [sys.executable, "-m", "judge_eval.cli", "metrics", "--qrels", str(qrels), "--run", f"r={run}",
         "--format", "json", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 2
    assert str(qrels) in result.stderr and "line 2" in result.stderr and "grade" in result.stderr
    assert result.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize("args, needle", [
    (["-k", "0"], "-k"),
    (["--measures", "nope@5"], "unknown measure"),
    (["--run", "x=/does/not/exist.trec"], "/does/not/exist.trec"),
])
def test_bad_arguments_exit_2(args: list[str], needle: str) -> None:
    base = ["metrics", "--qrels", str(MINI / "qrels.txt"), "--run", f"bm25={MINI / 'runs' / 'bm25.trec'}"]
    result = CliRunner().invoke(main, base + args)
    assert result.exit_code == 2
    assert needle in result.output


def test_native_jsonl_run_scores_like_its_trec_twin(tmp_path: Path) -> None:
    """A run given as native JSONL (contexts by id) gives the same numbers as the TREC file."""
    trec = MINI / "runs" / "dense.trec"
    native = tmp_path / "dense.jsonl"
    with native.open("w") as fh:
        for qid, ranking in _read_run(trec).items():
            fh.write(json.dumps({"id": qid, "contexts": [{"id": c} for c in ranking]}) + "\n")
    outs = []
    for run in (f"dense={trec}", str(native)):  # NAME=PATH, and PATH alone (name = file stem)
        result = CliRunner().invoke(main, ["metrics", "--qrels", str(MINI / "qrels.txt"), "--run", run,
                                           "-k", "5,10", "--format", "json"])
        assert result.exit_code == 0, result.output
        outs.append(json.loads(result.output))
    assert outs[0] == outs[1]
    assert {r["run"] for r in outs[1]} == {"dense"}


def test_csv_run_with_a_column_mapping(tmp_path: Path) -> None:
    run = tmp_path / "dense.csv"
    lines = ["query,doc,pos"]
    for qid, ranking in _read_run(MINI / "runs" / "dense.trec").items():
        lines += [f"{qid},{doc},{i}" for i, doc in enumerate(ranking, start=1)]
    run.write_text("\n".join(lines) + "\n")
    args = ["metrics", "--qrels", str(MINI / "qrels.txt"), "-k", "5", "--format", "json"]
    mapped = CliRunner().invoke(
        main, args + ["--run", f"dense={run}", "--columns", "question_id=query,chunk_id=doc,rank=pos"])
    trec = CliRunner().invoke(main, args + ["--run", f"dense={MINI / 'runs' / 'dense.trec'}"])
    assert mapped.exit_code == 0, mapped.output
    assert json.loads(mapped.output) == json.loads(trec.output)
    bad = CliRunner().invoke(main, args + ["--run", f"dense={run}", "--columns", "question_id=nope,chunk_id=doc"])
    assert bad.exit_code == 2 and "nope" in bad.output and str(run) in bad.output
