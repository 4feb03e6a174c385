"""Labelled metrics at scale: judge-eval beside pytrec_eval (trec_eval) and ranx.

Prints figures; asserts nothing (speed targets live here, not in unit tests). Run:

    python bench/bench_scale.py                        # 10,000 queries x 100 documents
    python bench/bench_scale.py --queries 50 --docs 10 --repeat 1   # the CI smoke size

It writes a TREC run (queries x docs lines, scores strictly decreasing with rank, so every tool
ranks alike) and TREC qrels (5-29 labels per query, grades 0-3, at least one relevant label per
query, so no value is undefined and every tool's mean is over the same queries) into --workdir,
then, for each tool, starts a fresh Python process that loads both files and computes the mean
of the same 17 measures (hit rate / success, precision, recall and nDCG at 1, 3, 5, 10, and
MRR), `--repeat` times: the first run is a warm-up (imports done, numba compiled for ranx), the
figure is the best of the others (of all runs when --repeat 1). Peak memory is the process's
peak resident set size (interpreter and imports included). Every tool's means are compared to
pytrec_eval's to 6 digits. PYTHONPATH=<an older checkout> measures that checkout's judge-eval.

* judge-eval: ``evaluate_labelled(qrels_path, {"run": run_path})``, exactly what
  ``judge-eval metrics`` does: load, check, score, and 1,000 bootstrap resamples per mean.
* pytrec_eval: ``parse_qrel``/``parse_run`` (its own Python readers) and ``evaluate``.
* ranx: ``Qrels.from_file``/``Run.from_file`` and ``evaluate`` (numba).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

KS = (1, 3, 5, 10)
TOOLS = ("judge-eval", "pytrec_eval", "ranx")
# our label -> pytrec_eval key, ranx metric
MEASURES: dict[str, tuple[str, str]] = {
    **{f"hit_rate@{k}": (f"success_{k}", f"hit_rate@{k}") for k in KS},
    **{f"precision@{k}": (f"P_{k}", f"precision@{k}") for k in KS},
    **{f"recall@{k}": (f"recall_{k}", f"recall@{k}") for k in KS},
    "mrr": ("recip_rank", "mrr"),
    **{f"ndcg@{k}": (f"ndcg_cut_{k}", f"ndcg@{k}") for k in KS},
}


# --------------------------------------------------------------------------- data


def write_data(folder: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    """The run and qrels files for this size (reused when already written)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    run_path = folder / f"run-{n_queries}x{n_docs}.trec"
    qrels_path = folder / f"qrels-{n_queries}x{n_docs}.txt"
    if run_path.exists() and qrels_path.exists():
        return run_path, qrels_path
    rng = np.random.default_rng(seed)
    pool = max(1000, n_queries * n_docs // 4)  # popular documents are retrieved for many queries
    rank_weights = 1.0 / (np.arange(n_docs) + 5.0)
    rank_weights /= rank_weights.sum()
    run_lines: list[str] = []
    qrels_lines: list[str] = []
    for i in range(n_queries):
        qid = f"q{i}"
        draw = rng.integers(0, pool, size=n_docs * 2)
        _, first = np.unique(draw, return_index=True)
        docs = draw[np.sort(first)][:n_docs]
        fracs = rng.random(len(docs)) * 0.9
        for rank, (doc, frac) in enumerate(zip(docs, fracs, strict=True), start=1):
            run_lines.append(f"{qid} Q0 doc{doc:08d} {rank} {n_docs + 1 - rank + frac:.6f} bench\n")
        n_labels = int(rng.integers(5, 30))
        from_run = rng.choice(len(docs), size=min(len(docs), n_labels * 2 // 3), replace=False,
                              p=rank_weights[: len(docs)] / rank_weights[: len(docs)].sum())
        labelled = [int(docs[j]) for j in from_run]
        labelled += [int(d) for d in rng.integers(0, pool, size=n_labels - len(labelled)) if d not in set(docs)]
        grades = rng.choice(4, size=len(labelled), p=[0.4, 0.3, 0.2, 0.1])
        grades[int(rng.integers(0, len(labelled)))] = int(rng.integers(1, 4))  # one relevant at least
        for doc, grade in dict(zip(labelled, grades.tolist(), strict=True)).items():
            qrels_lines.append(f"{qid} 0 doc{doc:08d} {grade}\n")
    tmp = run_path.with_suffix(".tmp")
    tmp.write_text("".join(run_lines))
    tmp.replace(run_path)
    tmp = qrels_path.with_suffix(".tmp")
    tmp.write_text("".join(qrels_lines))
    tmp.replace(qrels_path)
    return run_path, qrels_path


# --------------------------------------------------------------------------- one tool, in a child


def _judge_eval(run_path: str, qrels_path: str) -> dict[str, float]:
    from judge_eval.labelled import evaluate_labelled

    res = evaluate_labelled(qrels_path, {"run": run_path}, measures="hit_rate,precision,recall,mrr,ndcg", ks=KS)
    return {str(m): float(v) for m, v in zip(res.summary["measure"], res.summary["mean"], strict=True)}


def _pytrec_eval(run_path: str, qrels_path: str) -> dict[str, float]:
    import pytrec_eval

    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with open(run_path) as fh:
        run = pytrec_eval.parse_run(fh)
    cut = ",".join(str(k) for k in KS)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"success.{cut}", f"P.{cut}", f"recall.{cut}",
                                                       f"ndcg_cut.{cut}", "recip_rank"})
    per_query = evaluator.evaluate(run)
    return {ours: sum(v[key] for v in per_query.values()) / len(per_query)
            for ours, (key, _) in MEASURES.items()}


def _ranx(run_path: str, qrels_path: str) -> dict[str, float]:
    import ranx

    qrels = ranx.Qrels.from_file(qrels_path, kind="trec")
    run = ranx.Run.from_file(run_path, kind="trec")
    means = ranx.evaluate(qrels, run, [r for _, r in MEASURES.values()])
    return {ours: float(means[r]) for ours, (_, r) in MEASURES.items()}


CHILDREN = {"judge-eval": _judge_eval, "pytrec_eval": _pytrec_eval, "ranx": _ranx}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(tool: str, run_path: str, qrels_path: str, repeat: int) -> None:
    fn = CHILDREN[tool]
    walls = []
    means: dict[str, float] = {}
    for _ in range(repeat):
        start = time.perf_counter()
        means = fn(run_path, qrels_path)
        walls.append(time.perf_counter() - start)
    timed = walls[1:] or walls
    print(json.dumps({"tool": tool, "wall": min(timed), "first": walls[0], "peak_mb": _rss_mb(), "means": means}))


# --------------------------------------------------------------------------- the parent


def run_tool(tool: str, run_path: Path, qrels_path: Path, repeat: int, env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", tool, "--run", str(run_path), "--qrels", str(qrels_path),
         "--repeat", str(repeat)],
        capture_output=True, text=True, env=env, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2, help="runs per tool; the first is a warm-up")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "judge-eval-bench")
    ap.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    ap.add_argument("--write-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--qrels", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.run, args.qrels, args.repeat)
        return 0
    if args.write_only:
        write_data(args.workdir, args.queries, args.docs)
        return 0
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    for t in tools:
        if t not in TOOLS:
            ap.error(f"unknown tool {t!r} (known: {', '.join(TOOLS)})")
    # the files are written by a child: a process's peak RSS starts at its parent's RSS at the fork,
    # so the tools' processes must be forked from a parent that never held the 1M lines
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--write-only", "--queries", str(args.queries),
                    "--docs", str(args.docs), "--workdir", str(args.workdir)], check=True)
    run_path, qrels_path = write_data(args.workdir, args.queries, args.docs)  # written: just the paths
    n_run = sum(1 for _ in run_path.open())
    n_qrels = sum(1 for _ in qrels_path.open())
    print(f"{args.queries:,} queries x {args.docs} documents: run {n_run:,} lines, qrels {n_qrels:,} lines "
          f"({run_path.parent})")
    env = dict(os.environ)
    load_before = os.getloadavg()[0]
    results = {t: run_tool(t, run_path, qrels_path, args.repeat, env) for t in tools}
    print(f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after: other processes slow "
          "every tool alike; compare the ratios of one run")
    reference = results.get("pytrec_eval")
    print(f"{'tool':<12s} {'wall':>9s} {'first run':>10s} {'peak RSS':>10s}  means vs pytrec_eval")
    for t, r in results.items():
        if reference is None or t == "pytrec_eval":
            same = "-"
        else:
            diffs = [abs(r["means"][m] - reference["means"][m]) for m in MEASURES]
            same = "same to 6 digits" if max(diffs) < 5e-7 else f"DIFFER (max {max(diffs):.2e})"
        ratio = f" ({r['wall'] / reference['wall']:.2f}x)" if reference and t != "pytrec_eval" else ""
        print(f"{t:<12s} {r['wall']:8.2f}s {r['first']:9.2f}s {r['peak_mb']:8.0f} MB  {same}{ratio}")
    print(json.dumps({t: {k: r[k] for k in ("wall", "first", "peak_mb")} for t, r in results.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
