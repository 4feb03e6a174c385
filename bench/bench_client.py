"""The judge client's cost and throughput against a simulated OpenAI-compatible judge.

Prints figures; asserts nothing (tests/test_judge_bench.py runs it at a tiny size). Run:

    python bench/bench_client.py                      # cost and throughput tables, 30 questions x 10 chunks
    python bench/bench_client.py --only cost          # or --only throughput
    python bench/bench_client.py --listwise 1,4,8 --concurrency 8,32,64 --latency 0.2 --repeat 3
    python bench/bench_client.py --client-path /tmp/old     # another checkout's client (git archive <commit>)

It writes a dataset of N questions (references of two sentences) and R runs of K chunks each per
question, run r ranking chunks r*K*(1-overlap) .. that + K (so with the default 50 % overlap three
runs of 10 chunks share to 20 unique chunks per question), starts the scripted server
(judge_eval.testing.scripted_server) on 127.0.0.1 with a set latency in this process, and runs
``judge-eval score`` in a child process against it, with a fresh cache per measurement.

Cost: calls (requests the server answered), prompt and completion tokens (the server's usage,
ceil(chars / 4)) for one run cold, R runs in a row on one cache cold, and the same again warm,
against the floor (one decomposition per question + for each run, its new chunks per question
divided by B, rounded up); prompt tokens split into fixed instructions (the template text) and payload
(question, statements, chunks, references substituted into it).

Throughput: one cold run at each concurrency: the process's wall time, the judging wall (first
request received to last answer sent, at the server) against the floor ceil(calls / concurrency)
x latency, and the client's CPU (user + system time of the child process) cold and warm (every
answer cached: start-up, loading, cache reads, scoring), and per call: the marginal CPU of a
request of the judge path (OpenAIJudge in a child process, one warm-up request, then the calls
timed with process_time, so start-up, imports and scoring are not in it; the difference of two
whole-process runs of different sizes was tried and is too noisy on a shared machine). Each
measurement is repeated ``--repeat`` times and the best taken (the machine may be busy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from judge_eval.judge.prompts import recognise
from judge_eval.testing.scripted_server import Scenario, ScriptedServer


def write_dataset(folder: Path, n: int, runs: int, k: int, overlap: float) -> tuple[Path, Path, list[Path]]:
    step = max(1, round(k * (1 - overlap)))
    unique = k + step * (runs - 1)
    questions, corpus = folder / "questions.jsonl", folder / "corpus.jsonl"
    run_files = [folder / f"run{r}.trec" for r in range(runs)]
    with questions.open("w") as q, corpus.open("w") as c:
        for i in range(n):
            q.write(json.dumps({"id": f"q{i}", "question": f"What is known about fact {i}?",
                                "reference": f"Fact {i} is true. Fact {i} was measured in {2000 + i}."}) + "\n")
            for j in range(unique):
                c.write(json.dumps({"id": f"c{i}-{j}", "text": f"Chunk {j} about fact {i}: it was measured in "
                                    f"{2000 + i} by team {j}, which reported the value in a short note."}) + "\n")
    for r, path in enumerate(run_files):
        with path.open("w") as f:
            for i in range(n):
                for rank, j in enumerate(range(r * step, r * step + k), start=1):
                    f.write(f"q{i} Q0 c{i}-{j} {rank} {k - rank} bench\n")
    return questions, corpus, run_files


@dataclass
class Measured:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    fixed_tokens: int
    payload_tokens: int
    wall: float
    judge_wall: float
    cpu: float


def split_prompt(body: dict) -> tuple[int, int]:
    """(fixed, payload) characters of a request's messages: the template text vs what was
    substituted into it."""
    total = sum(len(m.get("content") or "") for m in body["messages"])
    found = recognise(body["messages"][:2])
    if found is None:
        return total, 0
    prompt, inputs = found
    payload = sum(len(v) for v in prompt.values(**inputs).values())
    return total - payload, payload


class Bench:
    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.args = args
        self.folder = folder
        self.questions, self.corpus, self.runs = write_dataset(folder, args.questions, args.runs, args.chunks,
                                                                args.overlap)
        self.env = dict(os.environ, OPENAI_API_KEY="sk-bench")
        self.env.pop("OPENAI_BASE_URL", None)
        if args.client_path:
            self.env["PYTHONPATH"] = args.client_path

    def score(self, server: ScriptedServer, cache: Path, run: Path, concurrency: int, listwise: int) -> Measured:
        """One ``score`` process; what the server saw and what the process spent."""
        server.reset_log()
        cmd = [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(self.questions),
               "--corpus", str(self.corpus), "--run", f"r={run}", "--judge", "openai", "--model", "bench",
               "--base-url", server.base_url, "-k", str(self.args.chunks), "--cache", str(cache), "--no-progress",
               "--concurrency", str(concurrency), "--format", "json"]
        if listwise > 1:
            cmd += ["--listwise", str(listwise)]
        start = time.perf_counter()
        # cwd: the temporary folder, so `-m judge_eval.cli` imports the client code asked for
        proc = subprocess.Popen(cmd, env=self.env, cwd=self.folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        out, err = proc.communicate(timeout=900)
        wall = time.perf_counter() - start
        cpu = self._child_cpu(proc)
        if proc.returncode != 0:
            raise SystemExit(f"score failed ({proc.returncode}):\n{err[-3000:]}")
        ok = [r for r in server.requests if r["status"] == 200]
        fixed = payload = prompt_chars = 0
        for r in ok:
            f, p = split_prompt(r["body"])
            fixed, payload, prompt_chars = fixed + f, payload + p, prompt_chars + f + p
        prompt_tokens = server.usage["prompt_tokens"]
        share = fixed / prompt_chars if prompt_chars else 0.0
        times = [(r["received"], r["sent"]) for r in server.requests if r.get("sent") is not None]
        judge_wall = max(t for _, t in times) - min(t for t, _ in times) if times else 0.0
        return Measured(server.completions, prompt_tokens, server.usage["completion_tokens"],
                        getattr(server, "cached_tokens", 0), round(prompt_tokens * share),
                        prompt_tokens - round(prompt_tokens * share), wall, judge_wall, cpu)

    def judge_cpu(self, server: ScriptedServer, calls: int, concurrency: int) -> float:
        """Milliseconds of CPU per call of the judge path alone (a child process: one warm-up call,
        then ``calls`` chunk verdicts at once through OpenAIJudge with a fresh cache, timed with
        process_time, so start-up, imports and scoring are not in it)."""
        code = f"""
import asyncio, os, sys, tempfile, time
from judge_eval.cache import ResponseCache
from judge_eval.judge.openai_judge import OpenAIJudge
async def main():
    cache = ResponseCache(os.path.join(tempfile.mkdtemp(), "c.sqlite"))
    judge = OpenAIJudge("bench", base_url={server.base_url!r}, api_key="x", cache=cache, concurrency={concurrency})
    await judge.judge_chunk("Warm up?", ["a"], "warm up")
    start = time.process_time()
    await asyncio.gather(*(judge.judge_chunk(f"What is known about fact {{i}}?", ["Fact is true.", "Measured in 2001."],
                                             f"Chunk {{i}} about the fact, measured in 2001 by team {{i}}.")
                           for i in range({calls})))
    print((time.process_time() - start) / {calls} * 1000)
    await judge.aclose()
asyncio.run(main())
"""
        proc = subprocess.run([sys.executable, "-c", code], env=self.env, cwd=self.folder, capture_output=True,
                              text=True, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"judge_cpu failed:\n{proc.stderr[-3000:]}")
        self._child_cpu(proc)
        return float(proc.stdout.strip().splitlines()[-1])

    _cpu_seen = 0.0

    def _child_cpu(self, proc: object) -> float:
        """CPU seconds of the child that just ended (RUSAGE_CHILDREN grows by it)."""
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = usage.ru_utime + usage.ru_stime
        spent, self._cpu_seen = total - self._cpu_seen, total
        return spent

    def best(self, measure, repeat: int) -> Measured:
        results = [measure() for _ in range(repeat)]
        return min(results, key=lambda m: m.cpu + m.wall)

    # -- tables ---------------------------------------------------------------------------

    def cost(self, server: ScriptedServer, listwise: list[int]) -> None:
        a = self.args
        step = max(1, round(a.chunks * (1 - a.overlap)))
        unique = a.chunks + step * (a.runs - 1)
        print(f"\n## cost: {a.questions} questions x {a.runs} runs x {a.chunks} chunks, overlap {a.overlap:.0%} "
              f"({unique} unique chunks per question), latency {a.latency * 1000:.0f} ms, concurrency 32")
        print("| B | runs | cache | calls | floor | prompt tokens | fixed | payload | completion tokens "
              "| cached prompt tokens | prompt tokens per chunk verdict |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for b in listwise:
            for n_runs, label in ((1, "1 run"), (a.runs, f"{a.runs} runs")):
                cache = self.folder / f"cost-{b}-{n_runs}.sqlite"
                cache.unlink(missing_ok=True)
                uniq = a.chunks if n_runs == 1 else unique
                # runs one after the other: run r brings `step` new chunks per question (the first K)
                floor = a.questions * (1 + sum(math.ceil((a.chunks if r == 0 else step) / b) for r in range(n_runs)))
                verdicts = a.questions * uniq
                for state in ("cold", "warm"):
                    tot = Measured(0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
                    for run in self.runs[:n_runs]:
                        m = self.score(server, cache, run, 32, b)
                        tot = Measured(*(x + y for x, y in zip(vars(tot).values(), vars(m).values(), strict=True)))
                    per = (tot.prompt_tokens / verdicts) if tot.calls else 0
                    print(f"| {b} | {label} | {state} | {tot.calls} | {floor if state == 'cold' else 0} "
                          f"| {tot.prompt_tokens} | {tot.fixed_tokens} | {tot.payload_tokens} "
                          f"| {tot.completion_tokens} | {tot.cached_tokens} | {per:.0f} |")

    def throughput(self, server: ScriptedServer, concurrency: list[int], listwise: list[int]) -> None:
        a = self.args
        print(f"\n## throughput: one run, {a.questions} questions x {a.chunks} chunks, latency "
              f"{a.latency * 1000:.0f} ms, best of {a.repeat}")
        print("| B | concurrency | calls | process wall | judging wall | floor | judging / floor "
              "| client CPU cold | client CPU warm | client CPU per call |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for b in listwise:
            for c in concurrency:
                def cold(c: int = c, b: int = b) -> Measured:
                    cache = self.folder / f"tp-{b}-{c}.sqlite"
                    cache.unlink(missing_ok=True)
                    return self.score(server, cache, self.runs[0], c, b)

                def warm(c: int = c, b: int = b) -> Measured:
                    return self.score(server, self.folder / f"tp-{b}-{c}.sqlite", self.runs[0], c, b)

                m = self.best(cold, a.repeat)
                w = self.best(warm, a.repeat)
                floor = math.ceil(m.calls / c) * a.latency
                ratio = f"{m.judge_wall / floor:.2f}x" if floor else "-"
                path = min(self.judge_cpu(server, m.calls, c) for _ in range(a.repeat))
                print(f"| {b} | {c} | {m.calls} | {m.wall:.2f} s | {m.judge_wall:.2f} s | {floor:.2f} s | {ratio} "
                      f"| {m.cpu:.2f} s | {w.cpu:.2f} s | {path:.2f} ms |")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--chunks", type=int, default=10, help="chunks per question per run (K)")
    ap.add_argument("--runs", type=int, default=3, help="runs sharing chunks, for the cost table (R)")
    ap.add_argument("--overlap", type=float, default=0.5, help="share of a run's chunks the next run also ranks")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server waits per answer")
    ap.add_argument("--concurrency", type=_ints, default=[8, 32, 64])
    ap.add_argument("--listwise", type=_ints, default=[1, 4, 8], help="chunks per judge call (B)")
    ap.add_argument("--repeat", type=int, default=3, help="throughput: repeat each measurement, take the best")
    ap.add_argument("--only", choices=["cost", "throughput"])
    ap.add_argument("--client-path", help="run the score processes with the judge_eval in this folder (an old commit)")
    ap.add_argument("--prompt-cache", action="store_true",
                    help="the server reports cached prompt tokens (OpenAI-style prefix caching, 1024-token minimum)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(Scenario(), latency=args.latency,
                                                                 **_server_options(args)) as server:
        bench = Bench(args, Path(tmp))
        if args.only in (None, "cost"):
            bench.cost(server, args.listwise)
        if args.only in (None, "throughput"):
            bench.throughput(server, args.concurrency, args.listwise[:1])


def _server_options(args: argparse.Namespace) -> dict:
    import inspect

    if args.prompt_cache and "prompt_cache" in inspect.signature(ScriptedServer).parameters:
        return {"prompt_cache": True}
    return {}


if __name__ == "__main__":
    main()
