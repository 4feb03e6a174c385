"""Speed figures for the labelled metrics, the bootstrap and the judge pipeline.

Prints figures; asserts nothing (speed targets live here, not in unit tests). Run:

    python bench/bench_metrics.py            # the CLAP NQ fixture: 300 questions, 3 runs of 20
    python bench/bench_metrics.py --tiny     # its 20-question mini version, one pass (CI smoke)

It uses the committed CLAP NQ fixture and the scripted OpenAI-compatible server on 127.0.0.1
for the HTTP pipeline. Labelled metrics at scale (10,000 queries, beside trec_eval and ranx):
bench/bench_scale.py.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from judge_eval.data.load import load_dataset, load_qrels, load_qrels_columns, load_run, load_run_columns
from judge_eval.data.models import Run
from judge_eval.evaluation import evaluate
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.metrics.evaluate_labelled import evaluate_runs
from judge_eval.metrics.stats import aggregate
from judge_eval.testing.scripted_server import Scenario, ScriptedServer

CLAP = Path(__file__).resolve().parent.parent / "fixtures" / "clapnq"
RUNS = ("bm25", "dense", "hybrid")
REPEAT = 3


def timed(label: str, fn, repeat: int | None = None):
    repeat = repeat or REPEAT
    best = float("inf")
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<60s} {best * 1000:9.1f} ms (best of {repeat})")
    return out


def main(argv: list[str] | None = None) -> None:
    global REPEAT
    ap = argparse.ArgumentParser(description="Speed figures for labelled metrics, the bootstrap and scoring.")
    ap.add_argument("--tiny", action="store_true", help="the 20-question mini fixture, one pass (a smoke test)")
    args = ap.parse_args(argv)
    folder = CLAP / "mini" if args.tiny else CLAP
    REPEAT = 1 if args.tiny else 3
    n_boot = 50 if args.tiny else 1000
    n_q = sum(1 for _ in (folder / "questions.jsonl").open())
    n_lines = sum(1 for _ in (folder / "runs" / "bm25.trec").open()) * len(RUNS)
    run_files = {n: folder / "runs" / f"{n}.trec" for n in RUNS}

    qrels = timed("load qrels", lambda: load_qrels(folder / "qrels.txt"))
    runs = timed(f"load 3 TREC runs ({n_lines:,} lines)", lambda: {n: load_run(p, n) for n, p in run_files.items()})
    timed("load qrels as columns", lambda: load_qrels_columns(folder / "qrels.txt"))
    timed(f"load 3 TREC runs as columns ({n_lines:,} lines)",
          lambda: {n: load_run_columns(p, n) for n, p in run_files.items()})
    frame = timed(f"evaluate_runs: 3 runs x {n_q} q x 17 measures",
                  lambda: evaluate_runs(runs, qrels, "hit_rate,precision,recall,mrr,ndcg", ks=(1, 3, 5, 10)))
    timed(f"aggregate with {n_boot:,} bootstrap resamples", lambda: aggregate(frame, n_boot=n_boot))
    rng = np.random.default_rng(0)
    big = pd.DataFrame(rng.random((n_q, 50)), columns=[f"m{j}" for j in range(50)]).assign(run="A")
    timed(f"aggregate: {n_q} questions x 50 measures, {n_boot:,} resamples", lambda: aggregate(big, n_boot=n_boot))

    timed(f"score, offline judge: {n_q} q x 3 runs, k=10", lambda: evaluate(
        folder / "questions.jsonl", run_files, corpus=folder / "corpus.jsonl",
        judge="offline", ks=(5, 10), n_boot=n_boot), repeat=1)

    ds = load_dataset(folder / "questions.jsonl", {"dense": run_files["dense"]}, corpus=folder / "corpus.jsonl")
    keep = list(ds.questions)[: 5 if args.tiny else 30]
    small = ds.model_copy(update={
        "questions": {q: ds.questions[q] for q in keep},
        "runs": {"dense": Run(name="dense", rankings={q: ds.runs["dense"].rankings[q] for q in keep})},
    })
    levels = (1, 8) if args.tiny else (1, 8, 32)
    http_throughput(small if args.tiny else ds, latency=0.0, label="score over HTTP (scripted server)",
                    levels=levels)
    # With 50 ms of server latency per answer (a real endpoint is slower still), concurrency pays.
    if not args.tiny:
        http_throughput(small, latency=0.05, label="score over HTTP, 50 ms latency", levels=levels)


def http_throughput(ds, *, latency: float, label: str, levels: tuple[int, ...] = (1, 8, 32)) -> None:
    """Judge ``ds`` through the real openai client against the scripted server, at three
    concurrency levels, with no cache."""
    with ScriptedServer(Scenario(), latency=latency) as server:
        for concurrency in levels:
            judge = OpenAIJudge("scripted-judge", base_url=server.base_url, api_key="x", concurrency=concurrency)
            start = time.perf_counter()
            res = evaluate(ds, judge=judge, ks=(5,), concurrency=concurrency, n_boot=200)
            took = time.perf_counter() - start
            calls = res.info["accounting"]["calls"]
            print(f"{label + ', concurrency ' + str(concurrency):<60s} "
                  f"{took * 1000:9.1f} ms  {calls} calls, {calls / took:7.1f} calls/s")

if __name__ == "__main__":
    main()
