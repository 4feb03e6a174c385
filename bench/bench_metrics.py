"""Speed figures for the labelled metrics, the bootstrap and the judge pipeline.

Prints figures; asserts nothing (speed targets live here, not in unit tests). Run:

    python bench/bench_metrics.py

It uses the committed CLAP NQ fixture (300 questions, 3 runs of 20) and the scripted
OpenAI-compatible server on 127.0.0.1 for the HTTP pipeline.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from judge_eval.data.load import load_dataset, load_qrels, load_run
from judge_eval.data.models import Run
from judge_eval.evaluation import evaluate
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.metrics.evaluate_labelled import evaluate_runs
from judge_eval.metrics.stats import aggregate
from judge_eval.testing.scripted_server import Scenario, ScriptedServer

CLAP = Path(__file__).resolve().parent.parent / "fixtures" / "clapnq"
RUNS = ("bm25", "dense", "hybrid")


def timed(label: str, fn, repeat: int = 3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<60s} {best * 1000:9.1f} ms (best of {repeat})")
    return out


def main() -> None:
    qrels = timed("load qrels (2,034 lines)", lambda: load_qrels(CLAP / "qrels.txt"))
    runs = timed("load 3 TREC runs (18,000 lines)", lambda: {n: load_run(CLAP / "runs" / f"{n}.trec", n) for n in RUNS})
    frame = timed("evaluate_runs: 3 runs x 300 q x 17 measures",
                  lambda: evaluate_runs(runs, qrels, "hit_rate,precision,recall,mrr,ndcg", ks=(1, 3, 5, 10)))
    timed("aggregate with 1,000 bootstrap resamples", lambda: aggregate(frame, n_boot=1000))
    rng = np.random.default_rng(0)
    big = pd.DataFrame(rng.random((300, 50)), columns=[f"m{j}" for j in range(50)]).assign(run="A")
    timed("aggregate: 300 questions x 50 measures, 1,000 resamples", lambda: aggregate(big, n_boot=1000))

    timed("score, offline judge: 300 q x 3 runs, k=10 (5,835 tasks)", lambda: evaluate(
        CLAP / "questions.jsonl", {n: CLAP / "runs" / f"{n}.trec" for n in RUNS}, corpus=CLAP / "corpus.jsonl",
        judge="offline", ks=(5, 10), n_boot=1000), repeat=1)

    ds = load_dataset(CLAP / "questions.jsonl", {"dense": CLAP / "runs" / "dense.trec"}, corpus=CLAP / "corpus.jsonl")
    http_throughput(ds, latency=0.0, label="score over HTTP (scripted server)")
    # With 50 ms of server latency per answer (a real endpoint is slower still), concurrency pays.
    keep = list(ds.questions)[:30]
    small = ds.model_copy(update={
        "questions": {q: ds.questions[q] for q in keep},
        "runs": {"dense": Run(name="dense", rankings={q: ds.runs["dense"].rankings[q] for q in keep})},
    })
    http_throughput(small, latency=0.05, label="score over HTTP, 50 ms latency")


def http_throughput(ds, *, latency: float, label: str) -> None:
    """Judge ``ds`` through the real openai client against the scripted server, at three
    concurrency levels, with no cache."""
    with ScriptedServer(Scenario(), latency=latency) as server:
        for concurrency in (1, 8, 32):
            judge = OpenAIJudge("scripted-judge", base_url=server.base_url, api_key="x", concurrency=concurrency)
            start = time.perf_counter()
            res = evaluate(ds, judge=judge, ks=(5,), concurrency=concurrency, n_boot=200)
            took = time.perf_counter() - start
            calls = res.info["accounting"]["calls"]
            print(f"{label + ', concurrency ' + str(concurrency):<60s} "
                  f"{took * 1000:9.1f} ms  {calls} calls, {calls / took:7.1f} calls/s")

if __name__ == "__main__":
    main()
