"""Results folders for the report tests, scored once per test session with the offline judge.

- ``mini``: fixtures/clapnq/mini (20 questions, bm25 / dense / hybrid, human labels), k 3, 5;
- ``mini_baseline``: the same questions where ``dense`` was BM25 and ``hybrid`` was dense (a
  baseline in which each run was its predecessor), no labels;
- ``full`` / ``full_baseline``: the same over the 300 questions of fixtures/clapnq, k 5, 10 (the
  browser test and the README screenshot).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import judge_eval

ROOT = Path(__file__).resolve().parent.parent
CLAPNQ = ROOT / "fixtures" / "clapnq"
MINI = CLAPNQ / "mini"

_built: dict[str, Path] = {}


def _score(out: Path, base: Path, runs: dict[str, str], ks: tuple[int, ...], qrels: bool) -> Path:
    run_files = {n: base / "runs" / f"{f}.trec" for n, f in runs.items()}
    results = judge_eval.evaluate(base / "questions.jsonl", runs=run_files,
                                  qrels=base / "qrels.txt" if qrels else None, corpus=base / "corpus.jsonl",
                                  judge="offline", ks=ks)
    judge_eval.write_results(results, out)
    return out


SPECS: dict[str, tuple[Path, dict[str, str], tuple[int, ...], bool]] = {
    "mini": (MINI, {"bm25": "bm25", "dense": "dense", "hybrid": "hybrid"}, (3, 5), True),
    "mini_baseline": (MINI, {"dense": "bm25", "hybrid": "dense"}, (3, 5), False),
    "full": (CLAPNQ, {"bm25": "bm25", "dense": "dense", "hybrid": "hybrid"}, (5, 10), True),
    "full_baseline": (CLAPNQ, {"dense": "bm25", "hybrid": "dense"}, (5, 10), False),
}


def folder(name: str, tmp_path_factory: Any) -> Path:
    """The results folder ``name`` (see the module's docstring), scored on first use. Tests must
    not write into it: copy it first."""
    if name not in _built:
        base, runs, ks, qrels = SPECS[name]
        _built[name] = _score(tmp_path_factory.mktemp("report-" + name) / name, base, runs, ks, qrels)
    return _built[name]


def summary(path: Path) -> list[dict[str, Any]]:
    return json.loads((path / "summary.json").read_text(encoding="utf-8"))["summary"]


def specs(page: str) -> list[dict[str, Any]]:
    """The Vega-Lite specs a report page carries (``<script class='vl-spec'>``), in order."""
    import re

    blocks = re.findall(r"<script type='application/json' class='vl-spec' data-target='[^']+'>(.*?)</script>", page,
                        flags=re.S)
    return [json.loads(b) for b in blocks]


def audit_doc(audit_id: str, started: str, value: float, diff: float | None, verdict: str, baseline: str | None,
           regressed: list[dict]) -> dict:
    """An ``audit.json`` of docs/audit.md's schema with one check (dense, context_recall@5)."""
    check = {"run": "dense", "metric": "context_recall@5", "value": value, "ci_low": value - 0.1,
             "ci_high": value + 0.1, "n": 20, "floor": 0.3, "max_drop": 0.02,
             "baseline_value": None if diff is None else value - diff, "diff": diff,
             "diff_ci_low": None if diff is None else diff - 0.05,
             "diff_ci_high": None if diff is None else diff + 0.05,
             "n_paired": 20, "p_value": 0.001, "p_holm": 0.002, "below_floor": False,
             "significant_drop": verdict == "regression", "verdict": verdict,
             "reasons": ["drop 0.100 > allowed 0.020 (p_holm 0.0020 <= 0.05)"] if verdict == "regression" else [],
             "regressed_questions": regressed}
    return {"schema": "judge-eval/audit@1", "id": audit_id, "started": started, "finished": started,
            "verdict": verdict, "exit_code": 1 if verdict == "regression" else 0,
            "headline": [f"{verdict.upper()}: 1 run x 1 metric"], "notes": [],
            "judge": {"identity": "offline:v2", "approximate": True}, "prompts": {"decompose": "decompose@1"},
            "dataset": {"fingerprint": "f", "questions_fingerprint": "qf", "questions": 20,
                        "questions_with_reference": 20, "runs": ["dense"], "human_labels": 0},
            "baseline": None if baseline is None else {"mode": "previous", "ids": [baseline], "started": ["x"]},
            "gate": {"alpha": 0.05, "n_perm": 100, "seed": 0, "correction": "holm", "family_size": 1},
            "checks": [check], "regressions": [], "accounting": {"tasks": 1, "calls": 0, "cache_hits": 0, "errors": 0},
            "judge_failure": None,
            "canary": {"pairs": 2, "judged": 2, "errors": 0, "calls": 2, "statistic": "accuracy", "value": 0.5,
                       "floor": 0.8, "accuracy": 0.5, "cohen_kappa": 0.0, "drift": True, "cache": "bypassed",
                       "previous_audit": None, "changed": [],
                       "items": [{"question_id": "q1", "chunk_id": "c<2>", "human_grade": 2, "judge_grade": 0,
                                  "error": None}]},
            "trust": None, "files": {}}


def audit_folders(audits: Path, current: Path, baseline: Path) -> tuple[Path, Path, list[dict]]:
    """Two audit folders side by side: a first audit (``baseline``'s results, passed) and a
    second (``current``'s results) whose dense context_recall@5 regressed on the questions
    where it dropped; returns both folders and the regressed questions."""
    import shutil

    from judge_eval.report import analysis
    from judge_eval.report.render import read_source

    old, new = audits / "20250101T020000Z-aaaaaa", audits / "20250102T020000Z-bbbbbb"
    shutil.copytree(baseline, old)
    shutil.copytree(current, new)
    first = audit_doc(old.name, "2025-01-01T02:00:00Z", 0.7, None, "pass", None, [])
    (old / "audit.json").write_text(json.dumps(first))
    moved = analysis.movers(read_source(current), read_source(baseline), metric="context_recall@5", limit=1000)
    drops = [{"question_id": r["question_id"], "value": r["current"], "baseline": r["baseline"], "diff": r["delta"]}
             for r in moved["rows"] if r["run"] == "dense" and r["delta"] < 0][:3]
    assert drops, "the fixture's dense must drop on some question"
    doc = audit_doc(new.name, "2025-01-02T02:00:00Z", 0.6, -0.1, "regression", old.name, drops)
    (new / "audit.json").write_text(json.dumps(doc))
    return old, new, drops
