"""Two `judge-eval score` processes on one cache: how many judge answers are paid twice?

Prints figures; asserts nothing (the test tests/test_cache_coordination.py asserts the exact
count). Run:

    python bench/bench_shared_cache.py [--questions 36] [--chunks 15] [--latency 0.05]
    python bench/bench_shared_cache.py --client-path /path/to/another/checkout   # its client code

It writes a dataset with Q questions whose references decompose into sentences and C distinct
chunks each (Q + Q*C unique tasks: 36 questions x 15 chunks = 576, the figure of the
reliability review), starts the scripted OpenAI-compatible server on 127.0.0.1 with a set
latency, runs two `score` processes at once against it with one shared cache file, and prints
the unique tasks, the requests the server answered, and how many tasks were paid twice.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from judge_eval.testing.scripted_server import Scenario, ScriptedServer


def write_dataset(folder: Path, n_questions: int, n_chunks: int) -> tuple[Path, Path, Path]:
    questions, corpus, run = folder / "questions.jsonl", folder / "corpus.jsonl", folder / "run.trec"
    with questions.open("w") as q, corpus.open("w") as c, run.open("w") as r:
        for i in range(n_questions):
            q.write(json.dumps({"id": f"q{i}", "question": f"What is fact {i}?",
                                "reference": f"Fact {i} is true. Fact {i} was measured in {2000 + i}."}) + "\n")
            for j in range(n_chunks):
                c.write(json.dumps({"id": f"c{i}-{j}", "text": f"Chunk {j} about fact {i} in {2000 + i}."}) + "\n")
                r.write(f"q{i} Q0 c{i}-{j} {j + 1} {n_chunks - j} bench\n")
    return questions, corpus, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=36)
    ap.add_argument("--chunks", type=int, default=15)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the server waits per answer")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--client-path", help="run the score processes with this checkout's judge_eval")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(Scenario(), latency=args.latency) as server:
        folder = Path(tmp)
        questions, corpus, run = write_dataset(folder, args.questions, args.chunks)
        env = dict(os.environ, OPENAI_API_KEY="sk-bench")
        if args.client_path:
            env["PYTHONPATH"] = args.client_path
        cmd = [sys.executable, "-m", "judge_eval.cli", "score", "--data", str(questions), "--corpus", str(corpus),
               "--run", f"r={run}", "--judge", "openai", "--model", "bench", "--base-url", server.base_url,
               "-k", str(args.chunks), "--cache", str(folder / "shared.sqlite"), "--no-progress",
               "--concurrency", str(args.concurrency), "--format", "json"]
        start = time.perf_counter()
        # cwd: the temporary folder, so `-m judge_eval.cli` imports the client code asked for, not ./judge_eval
        procs = [subprocess.Popen(cmd, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=600) for p in procs]
        wall = time.perf_counter() - start
        unique = args.questions * (1 + args.chunks)
        served = Counter(server.served_keys)
        twice = sum(1 for n in served.values() if n > 1)
        print(f"client code: {args.client_path or 'this checkout'}")
        print(f"unique tasks {unique}; requests answered {sum(served.values())}; tasks paid twice {twice}; "
              f"exit codes {[p.returncode for p in procs]}; wall {wall:.1f} s at {args.latency * 1000:.0f} ms latency")
        for p, (_out, err) in zip(procs, outs, strict=True):
            if p.returncode != 0:
                print(err[-2000:], file=sys.stderr)


if __name__ == "__main__":
    main()
