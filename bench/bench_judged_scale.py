"""Judged metrics at scale from a warm cache: 10,000 questions x 20 chunks.

Prints figures; asserts nothing (speed targets live here, not in unit tests). Run:

    python bench/bench_judged_scale.py                               # 10,000 questions x 20 chunks
    python bench/bench_judged_scale.py --questions 40 --chunks 5 --repeat 1    # the CI smoke size

It writes questions (a reference of two sentences each), a corpus of questions x chunks distinct
chunks and one TREC run ranking each question's chunks, then fills a response cache with an answer
for every task the OpenAI-compatible judge would ask: one decomposition per reference (its two
sentences) and one verdict per chunk (rank 1 supports both statements with quotes taken from the
chunk, grade 3; rank 2 supports the second, grade 2; then grades 1, 0, 0, 1, 0, 0, ... with no
support). The rows go in through ``ResponseCache.import_jsonl`` (what ``judge-eval cache import``
does), keyed as the judge keys them (``OpenAIJudge.key_request``), so a run finds every answer.

Then, ``--repeat`` times each, in fresh processes (imports and peak memory their own):

* **stages**: what ``evaluate()`` does, step by step: load and check the files and plan the tasks
  (``prepare_dataset``, ``plan_tasks``); read every answer from the cache (``run_plan`` with an
  endpoint that is never reached: every task is a cache hit, each answer validated and its
  evidence checked against its chunk); build the verdict grid; the judged metrics (context
  recall/precision at 5, 10, 20) and the judge-labelled ones (hit rate, precision, recall, nDCG,
  MRR); the means with 1,000 bootstrap resamples each;
* **evaluate()**: the one call, as ``judge-eval score`` makes it, with the process's peak RSS.

The best of the repeats is printed (the machine may be busy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KS = (5, 10, 20)
MODEL = "bench"
DEAD_URL = "http://127.0.0.1:9/v1"  # never reached: every task must be a cache hit


def statements_of(i: int) -> list[str]:
    return [f"Fact {i} is true.", f"Fact {i} was measured in {2000 + i % 100}."]


def chunk_text(i: int, j: int) -> str:
    return (f"Chunk {j} about fact {i}: it was measured in {2000 + i % 100} by team {j}, which reported "
            f"the value in a short note on page {j + 1}.")


def verdict_of(i: int, j: int) -> dict:
    """The scripted verdict of chunk j (0-based rank) of question i."""
    text = chunk_text(i, j)
    if j == 0:
        return {"supports": [{"statement": 1, "evidence": f"about fact {i}"},
                             {"statement": 2, "evidence": f"measured in {2000 + i % 100}"}],
                "grade": 3, "reason": "states both"}
    if j == 1:
        return {"supports": [{"statement": 2, "evidence": f"measured in {2000 + i % 100}"}], "grade": 2,
                "reason": "states the year"}
    assert f"team {j}" in text
    return {"supports": [], "grade": 1 if j % 3 == 2 else 0, "reason": "on topic" if j % 3 == 2 else "no"}


def write_inputs(folder: Path, n: int, k: int) -> tuple[Path, Path, Path]:
    questions, corpus, run = folder / "questions.jsonl", folder / "corpus.jsonl", folder / "run.trec"
    with questions.open("w") as q, corpus.open("w") as c, run.open("w") as r:
        for i in range(n):
            q.write(json.dumps({"id": f"q{i}", "question": f"What is known about fact {i}?",
                                "reference": " ".join(statements_of(i))}) + "\n")
            for j in range(k):
                c.write(json.dumps({"id": f"c{i}-{j}", "text": chunk_text(i, j)}) + "\n")
                r.write(f"q{i} Q0 c{i}-{j} {j + 1} {k - j} bench\n")
    return questions, corpus, run


def fill_cache(folder: Path, n: int, k: int) -> tuple[Path, int, float]:
    """The warm cache: one row per task, imported in one transaction; (path, rows, seconds)."""
    from judge_eval.cache import ResponseCache, cache_key
    from judge_eval.judge.openai_judge import OpenAIJudge

    start = time.perf_counter()
    path = folder / "cache.sqlite"
    cache = ResponseCache(path)
    judge = OpenAIJudge(MODEL, base_url=DEAD_URL, api_key="sk-bench", cache=cache)
    decompose, judge_chunk = judge.prompts["decompose"], judge.prompts["judge_chunk"]
    rows = folder / "rows.jsonl"
    count = 0
    with rows.open("w") as out:
        def put(prompt, inputs: dict, response: dict) -> None:
            request = judge.key_request(judge.request(prompt, inputs))
            out.write(json.dumps({"key": cache_key(request), "identity": judge.identity, "prompt": prompt.id,
                                  "request": request, "response": response,
                                  "usage": {"prompt_tokens": 200, "completion_tokens": 40}}) + "\n")

        for i in range(n):
            statements = statements_of(i)
            put(decompose, {"reference": " ".join(statements)}, {"statements": statements})
            for j in range(k):
                put(judge_chunk, {"question": f"What is known about fact {i}?", "statements": statements,
                                  "chunk": chunk_text(i, j)}, verdict_of(i, j))
            count += 1 + k
    cache.import_jsonl(rows)
    rows.unlink()
    cache.close()
    return path, count, time.perf_counter() - start


FILL = r"""
import json, runpy, sys
from pathlib import Path
bench = runpy.run_path(sys.argv[1], run_name="bench_judged_scale_fill")
path, rows, seconds = bench["fill_cache"](Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
print(json.dumps({"path": str(path), "rows": rows, "seconds": seconds}))
"""

STAGES = r"""
import json, resource, sys, time


def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


t = time.perf_counter()
from judge_eval.cache import ResponseCache
from judge_eval.data.prepare import prepare_dataset
from judge_eval.grid import VerdictGrid
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.metrics.judge_labelled import judge_labelled_frame
from judge_eval.metrics.judged import judged_frame
from judge_eval.metrics.stats import aggregate
from judge_eval.plan import plan_tasks
from judge_eval.run import Runner, run_plan
questions, corpus, run, cache, ks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
marks = {"imports": time.perf_counter() - t}
rss = {"imports": peak()}
t = time.perf_counter()
ds = prepare_dataset(questions, {"run": run}, corpus=corpus)
plan = plan_tasks(ds, ks)
marks["load and plan"] = time.perf_counter() - t
rss["load and plan"] = peak()
t = time.perf_counter()
judge = OpenAIJudge("MODEL", base_url="DEAD_URL", api_key="sk-bench", cache=ResponseCache(cache))
outcome = run_plan(Runner(judge, concurrency=32), plan)
marks["read verdicts"] = time.perf_counter() - t
rss["read verdicts"] = peak()
assert outcome.accounting.calls == 0 and outcome.accounting.cache_hits == plan.size, outcome.accounting.as_dict()
t = time.perf_counter()
grid = VerdictGrid(ds, outcome, ks)
marks["verdict grid"] = time.perf_counter() - t
rss["verdict grid"] = peak()
t = time.perf_counter()
judged, _ = judged_frame(grid)
labelled, _ = judge_labelled_frame(grid)
per_question = judged.merge(labelled, on=["run", "question_id"])
marks["judged metrics"] = time.perf_counter() - t
rss["judged metrics"] = peak()
t = time.perf_counter()
summary = aggregate(per_question, by=["run"], n_boot=1000, seed=0)
marks["means + bootstrap"] = time.perf_counter() - t
rss["means + bootstrap"] = peak()
marks["peak_mb"] = peak()
marks["rss"] = rss
marks["tasks"] = plan.size
marks["recall"] = float(summary.loc[summary.measure == f"context_recall@{ks[-1]}", "mean"].iloc[0])
marks["precision"] = float(summary.loc[summary.measure == f"context_precision@{ks[-1]}", "mean"].iloc[0])
print(json.dumps(marks))
""".replace("DEAD_URL", DEAD_URL).replace('"MODEL"', repr(MODEL))

WHOLE = r"""
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import judge_eval
from judge_eval.cache import ResponseCache
from judge_eval.judge.openai_judge import OpenAIJudge
questions, corpus, run, cache, ks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
judge = OpenAIJudge("MODEL", base_url="DEAD_URL", api_key="sk-bench", cache=ResponseCache(cache))
results = judge_eval.evaluate(questions, {"run": run}, corpus=corpus, judge=judge, ks=ks)
assert results.accounting.calls == 0
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "measures": int(results.summary.shape[0])}))
""".replace("DEAD_URL", DEAD_URL).replace('"MODEL"', repr(MODEL))


def child(code: str, args: list[str], cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=10_000)
    ap.add_argument("--chunks", type=int, default=20, help="chunks per question (the run's depth)")
    ap.add_argument("--repeat", type=int, default=2, help="measure each this many times, print the best")
    ap.add_argument("--workdir", help="keep the files here (default: a temporary folder)")
    a = ap.parse_args(argv)
    ks = sorted({k for k in KS if k <= a.chunks} | {a.chunks})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.workdir) if a.workdir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        files = write_inputs(folder, a.questions, a.chunks)
        # in a child too: a process's peak RSS starts at its parent's RSS at the fork, so the
        # measuring processes must be forked from a parent that never held the cache's rows
        filled = child(FILL, [str(Path(__file__).resolve()), str(folder), str(a.questions), str(a.chunks)], folder)
        cache, rows, seconds = Path(filled["path"]), filled["rows"], filled["seconds"]
        print(f"\n## judged metrics from a warm cache: {a.questions:,} questions x {a.chunks} chunks, k = "
              f"{', '.join(map(str, ks))} (cache: {rows:,} answers, {cache.stat().st_size / 2**20:.0f} MB, filled in "
              f"{seconds:.1f} s; load average {os.getloadavg()[0]:.2f}; best of {a.repeat})")
        args = [*map(str, files), str(cache), json.dumps(ks)]
        names = ["imports", "load and plan", "read verdicts", "verdict grid", "judged metrics", "means + bootstrap"]
        stages = min((child(STAGES, args, folder) for _ in range(a.repeat)), key=lambda m: sum(m[n] for n in names))
        whole = min((child(WHOLE, args, folder) for _ in range(a.repeat)), key=lambda m: m["wall"])
        print("| stage | seconds | peak RSS after it |\n|---|---|---|")
        for name in names:
            print(f"| {name} | {stages[name]:.2f} | {stages['rss'][name]:.0f} MB |")
        print(f"| total | {sum(stages[n] for n in names):.2f} | |")
        print(f"\nstages: {stages['tasks']:,} tasks read from the cache, peak RSS {stages['peak_mb']:.0f} MB; "
              f"context_recall@{ks[-1]} {stages['recall']:.3f} (expected 1: rank 1 supports both statements), "
              f"context_precision@{ks[-1]} {stages['precision']:.3f} (expected 1: the useful chunks are ranks 1 and 2)")
        print(f"evaluate() in one call: wall {whole['wall']:.2f} s, CPU {whole['cpu']:.2f} s, peak RSS "
              f"{whole['peak_mb']:.0f} MB, {whole['measures']} means")


if __name__ == "__main__":
    main()
