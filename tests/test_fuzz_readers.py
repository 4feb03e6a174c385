"""Fuzzing the readers: random bytes and random mutations of valid files, fed to every loader.

The contract under test: a reader either succeeds or raises :class:`InputError` whose message
names the file; never any other exception. The CLI part checks the same at the command line:
exit code 0 or 2, on 2 a message naming the file, no traceback and no output folder (not even a
hidden temporary one).

Runs are derandomized and bounded (the file runs in well under 30 s). For a deeper local run:
``FUZZ_EXAMPLES=2000 python -m pytest -q tests/test_fuzz_readers.py``.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from judge_eval.cli import main
from judge_eval.data.load import load_corpus, load_dataset, load_qrels, load_questions, load_run
from judge_eval.data.models import Dataset, Run
from judge_eval.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
BANK = ROOT / "fixtures" / "bank_faq"
INPUTS = ROOT / "tests" / "data" / "inputs"

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- seeds: small valid files of every format ------------------------------------------------


def _jsonl(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _parquet(text: str, sep: str) -> bytes:
    buf = io.BytesIO()
    df = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False)
    for col in ("rank", "grade"):
        if col in df:
            df[col] = pd.to_numeric(df[col].replace("", None)).astype("Int64")
    if "score" in df:
        df["score"] = pd.to_numeric(df["score"].replace("", None))
    df.to_parquet(buf, index=False)
    return buf.getvalue()


RUN_CSV = (
    "question_id,chunk_id,rank,score,text\n"
    "q1,c7,1,0.82,Foreclosure of a fixed deposit attracts a penalty.\n"
    "q1,c2,2,0.79,\"A foreclosure charge of 2%, payable on closure.\"\n"
    "q1,c9,3,,\n"
    "q2,c1,1,3.5,Statements are in net banking.\n"
)
QRELS_CSV = "question_id,chunk_id,grade\nq1,c2,2\nq1,c4,1\nq2,c1,0\n"
QUESTIONS_CSV = (
    "question_id,question,reference,chunk_id,rank,score,text,grade\n"
    "q1,What is the foreclosure charge?,2%.,c2,1,0.9,A foreclosure charge of 2%.,2\n"
    "q1,What is the foreclosure charge?,2%.,c7,2,0.5,A fixed deposit penalty.,\n"
    "q2,Where are statements?,Net banking.,c1,1,1.0,Statements are in net banking.,1\n"
)
NATIVE = _jsonl(
    {"id": "q1", "question": "What is the foreclosure charge?", "reference": "2%.",
     "labels": {"c2": 2, "c7": 0}, "metadata": {"topic": "loans"},
     "contexts": [{"id": "c7", "text": "A fixed deposit penalty.", "score": 0.8},
                  {"id": "c2", "text": "A foreclosure charge of 2%.", "score": 0.7}]},
    {"id": 2, "question": "Where are statements?", "reference": None,
     "contexts": ["Statements are in net banking.", {"id": "c1"}]},
    {"id": "q3", "question": "No contexts here?", "extra": [1, 2]},
)
RUN_JSONL = _jsonl(
    {"id": "q1", "contexts": [{"id": "c2", "score": 3.2}, {"id": "c7", "text": "A penalty.", "score": 1}]},
    {"id": "q2", "contexts": ["Statements are in net banking.", {"id": "c1", "metadata": {"a": 1}}]},
)
QRELS_JSONL = _jsonl(
    {"query_id": "q1", "doc_id": "c2", "grade": 2},
    {"qid": "q1", "chunk_id": "c4", "relevance": 1},
    {"question_id": 2, "docid": "c1", "grade": 0},
)
RAGAS_JSONL = _jsonl(
    {"user_input": "Which method uses averages?", "retrieved_contexts": ["Seasonality.", "Canada."],
     "reference": "Seasonality.", "response": "Averages."},
    {"id": "q2", "user_input": "Russian blue?", "retrieved_contexts": ["A double coat."],
     "retrieved_context_ids": ["d2"]},
)
CORPUS_TSV = b"id\ttext\nc1\tStatements are in net banking.\nc2\tA foreclosure charge of 2%.\nc7\tA penalty.\n"
CORPUS_MAP = {"c1": "Statements.", "c2": "A charge.", "c4": "Waived.", "c7": "A penalty.", "c9": "GST.",
              "d1": "Seasonality.", "d2": "A double coat.", "d3": "Canada."}

RUN_READERS: list[Callable[[Path], object]] = [
    lambda p: load_run(p, "r"),
    lambda p: load_run(p, "r", corpus=CORPUS_MAP),
]

# seed name -> (content, readers). The name's extension drives format detection.
SEEDS: dict[str, tuple[bytes, list[Callable[[Path], object]]]] = {
    "dense.trec": ((BANK / "runs" / "dense.trec").read_bytes(), RUN_READERS),
    "dense.out": ((BANK / "runs" / "dense.trec").read_bytes(), RUN_READERS),  # detected by content
    "ties.trec": ((INPUTS / "beir" / "bm25.trec").read_bytes(), RUN_READERS),
    "run.jsonl": (RUN_JSONL, RUN_READERS),
    "run.csv": (RUN_CSV.encode(), RUN_READERS),
    "run.tsv": (RUN_CSV.replace(",", "\t").replace("\t payable", ", payable").encode(), RUN_READERS),
    "run.parquet": (_parquet(RUN_CSV, ","), RUN_READERS),
    "qrels.txt": ((BANK / "qrels.txt").read_bytes(), [load_qrels]),
    "qrels.jsonl": (QRELS_JSONL, [load_qrels]),
    "qrels.csv": (QRELS_CSV.encode(), [load_qrels]),
    "beir_qrels.tsv": ((INPUTS / "beir" / "qrels.tsv").read_bytes(), [load_qrels]),
    "qrels.parquet": (_parquet(QRELS_CSV, ","), [load_qrels]),
    "corpus.jsonl": ((BANK / "corpus.jsonl").read_bytes(), [load_corpus]),
    "beir_corpus.jsonl": ((INPUTS / "beir" / "corpus.jsonl").read_bytes(), [load_corpus]),
    "corpus.tsv": (CORPUS_TSV, [load_corpus]),
    "data.jsonl": ((BANK / "data.jsonl").read_bytes(), [lambda p: load_dataset(p)]),
    "native.jsonl": (NATIVE, [lambda p: load_dataset(p), lambda p: load_dataset(p, corpus=CORPUS_MAP)]),
    "ragas.json": ((INPUTS / "ragas.json").read_bytes(), [lambda p: load_dataset(p), load_questions]),
    "ragas.jsonl": (RAGAS_JSONL, [lambda p: load_dataset(p), lambda p: load_run(p, "r")]),
    "questions.csv": (QUESTIONS_CSV.encode(), [lambda p: load_dataset(p)]),
    "questions.tsv": (QUESTIONS_CSV.replace(",", "\t").encode(), [lambda p: load_dataset(p, columns={})]),
    "questions.parquet": (_parquet(QUESTIONS_CSV, ","), [lambda p: load_dataset(p, corpus=CORPUS_MAP)]),
    "queries.jsonl": ((INPUTS / "beir" / "queries.jsonl").read_bytes(), [load_questions]),
}
# Every loader also gets a whole dataset around the fuzzed file, so the cross-checks run too.
DATA_FILE = BANK / "data.jsonl"

# --- mutations -------------------------------------------------------------------------------

JUNK_TOKENS = [
    "", " ", "nan", "NaN", "inf", "-inf", "Infinity", "-Infinity", "1e999", "-1", "0", "-0", "1.5",
    "2.0", "1_0", "null", "true", "[]", "{}", '""', '" "', "\x00", "\u0661", "\u00e9", "\t", ",",
    '"', "[[[[", "'", "9" * 5000, "Q0", "\\ud800", '"\\udc00"', "[" * 3000, "1" + "0" * 400,
]
JUNK_BYTES = [b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\r", b"\n\n", b"\x1a"]
JUNK_JSON: list[Any] = [
    None, "", " ", "\t\n", math.nan, math.inf, -math.inf, -1, 0, 1.5, 2.0, True, [], {}, "x",
    10**400, [None], [""], {"id": None}, {"text": ""}, {"id": "c1", "text": " "}, ["", "a"],
    [[1]], "h:0", 7, "\ud800", "a\udfffb", "\ud83d\ude00", {"\udc00": 1}, -(10**400), 2**64,
]
DELIMITERS = [b" ", b"\t", b",", b":", b'"', b"\n"]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _json_mutate(data: st.DataObject, value: Any) -> Any:
    """Replace, delete or rename one node of a parsed JSON value."""
    paths = _paths(value)
    path = data.draw(st.sampled_from(paths))
    if not path:
        return data.draw(st.sampled_from(JUNK_JSON))
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    how = data.draw(st.sampled_from(["replace", "replace", "delete", "rename"]))
    if how == "replace":
        parent[key] = data.draw(st.sampled_from(JUNK_JSON))
    elif how == "delete":
        del parent[key]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["id", "text", "score", "contexts", "x", ""]))] = parent.pop(key)
    return value


def mutate(data: st.DataObject, content: bytes) -> bytes:
    """Apply one to three random mutations to ``content``."""
    for _ in range(data.draw(st.integers(1, 3))):
        lines = content.splitlines(keepends=True) or [b""]
        op = data.draw(st.sampled_from(
            ["delete", "duplicate", "swap", "token", "json", "json", "truncate", "insert", "delimiters"]
        ))
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "token":  # replace a field (text between delimiters) with junk
            parts = _split_keep(lines[i])
            k = data.draw(st.integers(0, max(len(parts) - 1, 0)))
            if parts:
                parts[k] = data.draw(st.sampled_from(JUNK_TOKENS)).encode("utf-8", "surrogatepass")
            lines[i] = b"".join(parts)
        elif op == "json":
            content = _json_op(data, content, lines, i)
            continue
        elif op == "truncate":
            content = content[: data.draw(st.integers(0, len(content)))]
            continue
        elif op == "insert":
            pos = data.draw(st.integers(0, len(content)))
            content = content[:pos] + data.draw(st.sampled_from(JUNK_BYTES)) + content[pos:]
            continue
        elif op == "delimiters":
            a, b = data.draw(st.sampled_from(DELIMITERS)), data.draw(st.sampled_from(DELIMITERS))
            content = content.replace(a, b)
            continue
        content = b"".join(lines)
    return content


def _split_keep(line: bytes) -> list[bytes]:
    import re

    return [p for p in re.split(rb"([\s,:\[\]{}\"]+)", line) if p != b""]


def _json_op(data: st.DataObject, content: bytes, lines: list[bytes], i: int) -> bytes:
    try:  # a whole JSON document (a JSON array file)
        doc = json.loads(content)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, list):
        return json.dumps(_json_mutate(data, doc), indent=1).encode()
    try:
        record = json.loads(lines[i])
    except (ValueError, RecursionError):
        return content  # not JSON: nothing to do
    lines[i] = json.dumps(_json_mutate(data, record)).encode() + b"\n"
    return b"".join(lines)


# --- the contract ----------------------------------------------------------------------------


def check(reader: Callable[[Path], object], path: Path) -> None:
    """``reader(path)`` succeeds with valid data, or raises an InputError naming ``path``;
    nothing else."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = reader(path)
        except InputError as exc:
            event("InputError")
            assert str(path) in str(exc), f"the error does not name {path}: {exc}"
            return
    event("read")
    _assert_valid(result)


def _assert_valid(result: object) -> None:
    """What was read keeps the rules: finite scores, non-blank texts, text that is UTF-8."""
    runs: list[Run] = []
    if isinstance(result, Run):
        runs = [result]
    elif isinstance(result, Dataset):
        runs = list(result.runs.values())
    elif isinstance(result, tuple):
        runs = [r for r in result if isinstance(r, Run)]
    elif isinstance(result, dict) and all(isinstance(v, str) for v in result.values()):  # a corpus
        for cid, text in result.items():
            assert text.strip(), cid
            (cid + text).encode("utf-8")
    for run in runs:
        for qid, chunks in run.rankings.items():
            qid.encode("utf-8")
            for chunk in chunks:
                chunk.id.encode("utf-8")
                assert chunk.score is None or math.isfinite(chunk.score), chunk
                assert chunk.text is None or chunk.text.strip(), chunk


CASES = [
    pytest.param(name, i, id=f"{name}-{i}") for name, (_c, readers) in SEEDS.items() for i in range(len(readers))
]


@pytest.mark.parametrize("name", list(SEEDS))
def test_seeds_are_valid(tmp_path: Path, name: str) -> None:
    content, readers = SEEDS[name]
    path = tmp_path / name
    path.write_bytes(content)
    for reader in readers:
        reader(path)


@pytest.mark.parametrize("name, i", CASES)
@SETTINGS
@given(data=st.data())
def test_mutated_files_are_read_or_rejected_with_the_path(tmp_path: Path, name: str, i: int, data) -> None:
    content, readers = SEEDS[name]
    path = tmp_path / name
    path.write_bytes(mutate(data, content))
    check(readers[i], path)


def _run_in_dataset(p: Path) -> object:
    return load_dataset(DATA_FILE, runs={"r": p}, qrels=BANK / "qrels.txt", corpus=BANK / "corpus.jsonl")


RUN_SEEDS = ["dense.trec", "run.jsonl", "run.csv", "run.parquet", "ragas.jsonl"]


@pytest.mark.parametrize("name", RUN_SEEDS)
@SETTINGS
@given(data=st.data())
def test_mutated_runs_inside_a_dataset(tmp_path: Path, name: str, data) -> None:
    path = tmp_path / name
    path.write_bytes(mutate(data, SEEDS[name][0]))
    check(_run_in_dataset, path)


@pytest.mark.parametrize("name", ["qrels.txt", "corpus.jsonl"])
@SETTINGS
@given(data=st.data())
def test_mutated_qrels_and_corpus_inside_a_dataset(tmp_path: Path, name: str, data) -> None:
    path = tmp_path / name
    path.write_bytes(mutate(data, SEEDS[name][0]))
    kw = {"qrels": path} if name == "qrels.txt" else {"corpus": path}
    check(lambda p: load_dataset(DATA_FILE, runs={"r": BANK / "runs" / "dense.trec"}, **kw), path)


ALL_READERS = [
    pytest.param(name, i, id=f"{name}-{i}") for name, (_c, readers) in SEEDS.items()
    for i in range(len(readers)) if i == 0
]
NEAR_TEXT = "q1Q0c 0123456789.-+eE \t\n,;:{}[]\"'nanifINFNAtrueflsx\\\x00\u00e9\ufeff"


@pytest.mark.parametrize("name, i", ALL_READERS)
@SETTINGS
@given(raw=st.binary(max_size=600) | st.text(alphabet=NEAR_TEXT, max_size=300).map(str.encode))
def test_random_bytes_are_read_or_rejected_with_the_path(tmp_path: Path, name: str, i: int, raw: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(raw)
    check(SEEDS[name][1][i], path)


# --- the command line ------------------------------------------------------------------------


def _check_cli(result, bad: Path, out: Path | None = None) -> None:
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    event(f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert str(bad) in result.output, result.output
        assert "Traceback" not in result.output
        if out is not None:
            assert not out.exists(), "the results folder was written although the input was bad"
            hidden = [p.name for p in out.parent.iterdir() if p.name.startswith(".")]
            assert not hidden, f"temporary files or folders were left behind: {hidden}"


CLI_EXAMPLES = max(EXAMPLES // 4, 5)


@pytest.mark.parametrize("which", ["qrels", "run"])
@settings(SETTINGS, max_examples=CLI_EXAMPLES)
@given(data=st.data())
def test_cli_metrics_with_a_mutated_input(tmp_path: Path, which: str, data) -> None:
    qrels, run = BANK / "qrels.txt", BANK / "runs" / "dense.trec"
    bad = tmp_path / ("qrels.txt" if which == "qrels" else "dense.trec")
    bad.write_bytes(mutate(data, (qrels if which == "qrels" else run).read_bytes()))
    if which == "qrels":
        qrels = bad
    else:
        run = bad
    result = CliRunner().invoke(main, ["metrics", "--qrels", str(qrels), "--run", f"r={run}"])
    _check_cli(result, bad)


@pytest.mark.parametrize("which", ["data", "run", "corpus"])
@settings(SETTINGS, max_examples=CLI_EXAMPLES)
@given(data=st.data())
def test_cli_score_with_a_mutated_input(tmp_path: Path, which: str, data) -> None:
    files = {"data": BANK / "data.jsonl", "run": BANK / "runs" / "dense.trec", "corpus": BANK / "corpus.jsonl"}
    bad = tmp_path / "in" / files[which].name
    bad.parent.mkdir(exist_ok=True)
    bad.write_bytes(mutate(data, files[which].read_bytes()))
    files[which] = bad
    out = tmp_path / "results"
    shutil.rmtree(out, ignore_errors=True)
    result = CliRunner().invoke(main, [
        "score", "--data", str(files["data"]), "--run", f"r={files['run']}", "--corpus", str(files["corpus"]),
        "--judge", "offline", "-k", "3", "--out", str(out), "--cache", str(tmp_path / "cache.sqlite"),
        "--no-progress",
    ])
    _check_cli(result, bad, out)
