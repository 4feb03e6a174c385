"""The columnar readers (judge_eval.data.columns) against the per-line readers: on every fixture,
on random files and on mutated ones, the same run or labels, or the same error (message, file,
line and field). And the fast path is really taken on ordinary files."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_eval.data import _tokens
from judge_eval.data import columns as C
from judge_eval.data.columns import (
    QrelsColumns,
    RunColumns,
    read_trec_qrels_columns,
    read_trec_run_columns,
)
from judge_eval.data.load import load_qrels, load_qrels_columns, load_run, load_run_columns
from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.data.trec import read_trec_qrels, read_trec_run
from judge_eval.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RUNS = sorted((ROOT / "fixtures").rglob("*.trec"))
FIXTURE_QRELS = sorted(p for p in (ROOT / "fixtures").rglob("qrels*.txt"))


def run_state(run: RunColumns) -> tuple:
    return (run.name, run.qids.tolist(), run.starts.tolist(), run.chunk_ids.tolist(),
            [None if s != s else s for s in run.scores.tolist()], dict(run.origins))


def qrels_state(qrels: QrelsColumns) -> list:
    grades = qrels.to_qrels().grades
    return [(q, list(g.items())) for q, g in grades.items()]


def outcome(fn, state):
    """``("ok", state)`` or ``("error", message, path, line, field)``: what a reader did."""
    try:
        return ("ok", state(fn()))
    except InputError as exc:
        return ("error", str(exc), exc.path, exc.line, exc.field)


def same_run_outcome(path: Path) -> tuple:
    ours = outcome(lambda: read_trec_run_columns(path, "r"), run_state)
    theirs = outcome(lambda: RunColumns.from_run(read_trec_run(path, "r")), run_state)
    assert ours == theirs
    return ours


def same_qrels_outcome(path: Path) -> tuple:
    ours = outcome(lambda: read_trec_qrels_columns(path), qrels_state)
    theirs = outcome(lambda: QrelsColumns.from_qrels(read_trec_qrels(path)), qrels_state)
    assert ours == theirs
    return ours


@pytest.fixture
def fast_only(monkeypatch):
    """Fail if a reader falls back to the per-line reader."""
    def refuse(*args, **kwargs):
        raise AssertionError("the per-line reader was used")
    monkeypatch.setattr(C, "read_trec_run", refuse)
    monkeypatch.setattr(C, "read_trec_qrels", refuse)


# --------------------------------------------------------------------------- fixtures


def test_there_are_fixtures() -> None:
    assert len(FIXTURE_RUNS) >= 6 and len(FIXTURE_QRELS) >= 3


@pytest.mark.parametrize("path", FIXTURE_RUNS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixture_runs_read_the_same_on_the_fast_path(path: Path, fast_only) -> None:
    ours = read_trec_run_columns(path, "r")
    assert run_state(ours) == run_state(RunColumns.from_run(Run.model_validate(_slow_run(path))))


@pytest.mark.parametrize("path", FIXTURE_QRELS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixture_qrels_read_the_same_on_the_fast_path(path: Path, fast_only) -> None:
    assert qrels_state(read_trec_qrels_columns(path)) == qrels_state(QrelsColumns.from_qrels(_slow_qrels(path)))


def _slow_run(path: Path) -> Run:
    return read_trec_run(path, "r")


def _slow_qrels(path: Path) -> Qrels:
    return read_trec_qrels(path)


# --------------------------------------------------------------------------- random files

SPACES = [" ", " ", " ", "\t", "  ", " \t ", "\x0b", "\x0c", "\x1f", "\r"]
EOLS = ["\n", "\n", "\n", "\r\n", " \n", "\n\n", "\n \t\n"]


def random_run_text(rng: random.Random) -> str:
    """A valid TREC run, written the ways real files are: lines out of order, tied ranks, odd
    whitespace, blank lines, CRLF, a BOM, non-ASCII ids, scores in every notation."""
    lines = []
    for q in range(rng.randint(1, 12)):
        qid = rng.choice([f"q{q}", f"{q:03d}", f"Q-{q}", f"frage{q}ü"])
        docs = rng.sample([f"d{i}" for i in range(40)] + ["doc-é", "文書", "x" * 30], rng.randint(1, 12))
        for doc in docs:
            rank = rng.choice([rng.randint(1, 5), rng.randint(1, 30), rng.randint(1, 10**12)])
            score = rng.choice([f"{rng.uniform(-50, 50):.6f}", repr(rng.uniform(0, 1)), str(rng.randint(-9, 9)),
                                f"{rng.uniform(0, 1):.3e}", "-0.0", "+2.5", ".5", "7.", "1E3",
                                "0.1000000000000000055511"])
            sep = rng.choice(SPACES)
            lines.append(sep.join([qid, "Q0", doc, f"{rank:0{rng.choice([1, 3])}d}", score, "tag"]))
    rng.shuffle(lines)
    text = "".join(line + rng.choice(EOLS) for line in lines)
    if rng.random() < 0.3:
        text = "  " + text
    if rng.random() < 0.2:
        text = text.rstrip("\n")
    return text


def random_qrels_text(rng: random.Random) -> str:
    lines = []
    for q in range(rng.randint(1, 12)):
        for doc in rng.sample([f"d{i}" for i in range(30)] + ["doc-é"], rng.randint(1, 8)):
            grade = rng.choice([0, 0, 1, 2, 3, 10**9])
            lines.append(rng.choice(SPACES).join([f"q{q}", rng.choice(["0", "Q0"]), doc, str(grade)]))
            if rng.random() < 0.2:  # the same label again (same grade: allowed)
                lines.append(lines[-1])
    rng.shuffle(lines)
    return "".join(line + rng.choice(EOLS) for line in lines)


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_read_the_same(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "r.trec"
    data = random_run_text(rng).encode()
    path.write_bytes((b"\xef\xbb\xbf" if seed % 5 == 0 else b"") + data)
    assert same_run_outcome(path)[0] == "ok"
    assert C._fast_run(path, "r") is not None  # all of it is the fast path's to read


@pytest.mark.parametrize("seed", range(40))
def test_random_qrels_read_the_same(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "l.qrels"
    path.write_text(random_qrels_text(random.Random(seed)))
    assert same_qrels_outcome(path)[0] == "ok"
    assert C._fast_qrels(path) is not None


def test_a_run_of_many_blocks_with_ties_keeps_input_order(tmp_path: Path, fast_only, monkeypatch) -> None:
    """Read in blocks of about 1 KB (not 4 MB), every rank tied within a question, questions
    interleaved."""
    monkeypatch.setattr(_tokens, "_BLOCK", 1000)
    rng = np.random.default_rng(0)
    n = 20_000
    q = rng.integers(0, 500, size=n)
    lines = [f"q{q[i]} Q0 d{i} {1 + i % 3} {rng.random():.4f} t\n" + ("\n" if i % 7 == 0 else "") for i in range(n)]
    path = tmp_path / "big.trec"
    path.write_text("".join(lines))
    ours = read_trec_run_columns(path, "r")
    expected: dict[str, list[tuple[int, int, str]]] = {}
    for i, line in enumerate(lines):
        qid, _, doc, rank, _, _ = line.split()
        expected.setdefault(qid, []).append((int(rank), i, doc))
    assert ours.question_ids() == list(expected)
    for qid in list(expected)[:50]:
        assert ours.ranked_ids(qid) == [doc for _, _, doc in sorted(expected[qid])]
    monkeypatch.undo()
    assert run_state(ours) == run_state(RunColumns.from_run(read_trec_run(path, "r")))  # line numbers too


# --------------------------------------------------------------------------- bad files

RUN_OK = "q1 Q0 d1 1 2.0 t\n"
BAD_RUNS = {
    "too-few-columns": RUN_OK + "q1 Q0 d2 2 1.0\n",
    "too-many-columns": RUN_OK + "q1 Q0 d2 2 1.0 my run\n",
    "three-columns": "q1 d2 1\n",
    "rank-word": RUN_OK + "q1 Q0 d2 second 1.0 t\n",
    "rank-zero": RUN_OK + "q1 Q0 d2 0 1.0 t\n",
    "rank-negative": RUN_OK + "q1 Q0 d2 -3 1.0 t\n",
    "rank-float": RUN_OK + "q1 Q0 d2 3.0 1.0 t\n",
    "rank-exponent": RUN_OK + "q1 Q0 d2 1e2 1.0 t\n",
    "rank-signed": RUN_OK + "q1 Q0 d2 +3 1.0 t\n",
    "rank-underscore": RUN_OK + "q1 Q0 d2 1_0 1.0 t\n",
    "rank-huge": RUN_OK + "q1 Q0 d2 99999999999999999999999 1.0 t\n",
    "score-word": RUN_OK + "q1 Q0 d2 2 high t\n",
    "score-nan": RUN_OK + "q1 Q0 d2 2 nan t\n",
    "score-inf": RUN_OK + "q1 Q0 d2 2 -inf t\n",
    "score-overflow": RUN_OK + "q1 Q0 d2 2 1e999 t\n",
    "score-hex": RUN_OK + "q1 Q0 d2 2 0x10 t\n",
    "score-two-dots": RUN_OK + "q1 Q0 d2 2 1.2.3 t\n",
    "score-underscore": RUN_OK + "q1 Q0 d2 2 1_000.5 t\n",
    "score-dangling-exponent": RUN_OK + "q1 Q0 d2 2 1.5e t\n",
    "duplicate-docid": RUN_OK + "q1 Q0 d2 2 1.0 t\nq1 Q0 d1 3 0.5 t\n",
    "empty": "",
    "blank-lines-only": "\n  \n\t\n",
    "nbsp-inside-a-line": RUN_OK + "q1\u00a0Q0 d2 2 1.0 t\n",
    "ideographic-space": RUN_OK + "q1 Q0 d2 2 1.0\u3000t\n",
    "nel-line-end": RUN_OK + "q1 Q0 d2 2 1.0 t\u0085",
    "control-character": RUN_OK + "q1 Q0 d\x012 2 1.0 t\n",
    "nul-byte": RUN_OK + "q1 Q0 d2\x00 2 1.0 t\n",
    "lone-cr-joins-lines": "q1 Q0 d1 1 2.0 t\rq1 Q0 d2 2 1.0 t\n",
    "bom-in-the-middle": RUN_OK + "\ufeffq1 Q0 d2 2 1.0 t\n",
}


@pytest.mark.parametrize("name", BAD_RUNS)
def test_unusual_runs_give_the_per_line_readers_result(tmp_path: Path, name: str) -> None:
    path = tmp_path / "r.trec"
    path.write_text(BAD_RUNS[name], encoding="utf-8")
    same_run_outcome(path)


def test_bad_bytes_give_the_per_line_readers_error(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    path.write_bytes(RUN_OK.encode() + b"q1 Q0 d2 2 1.0 t\nq1 Q0 d\xff3 3 0.5 t\n")
    assert same_run_outcome(path)[:5] == ("error", f"{path}, line 3, field 'docid': invalid UTF-8 at byte 8 of the "
                                          "line (b'\\xff'); save the file as UTF-8", str(path), 3, "docid")
    path.write_bytes(b"q1 Q0 \xed\xa0\x80 1 1.0 t\n")  # an encoded surrogate is not UTF-8
    assert same_run_outcome(path)[0] == "error"


BAD_QRELS = {
    "negative-grade": "q1 0 d1 1\nq1 0 d2 -1\n",
    "fraction-grade": "q1 0 d1 1.5\n",
    "word-grade": "q1 0 d1 1\n\nq1 0 d2 x\n",
    "signed-grade": "q1 0 d1 +1\n",
    "too-few-columns": "q1 0 d1 1\nq1 d2 1\n",
    "too-many-columns": "q1 0 d1 1 extra\n",
    "conflicting-grades": "q1 0 d1 1\nq1 0 d1 2\n",
    "repeated-grade": "q1 0 d1 1\nq2 0 d1 0\nq1 0 d1 1\n",
    "largest-grade": "q1 0 d1 9223372036854775807\n",
    "grade-beyond-64-bits": "q1 0 d1 1\nq1 0 d2 9223372036854775808\n",
    "empty": "",
}


@pytest.mark.parametrize("name", BAD_QRELS)
def test_unusual_qrels_give_the_per_line_readers_result(tmp_path: Path, name: str) -> None:
    path = tmp_path / "l.qrels"
    path.write_text(BAD_QRELS[name])
    same_qrels_outcome(path)


def test_missing_file_is_the_same_error(tmp_path: Path) -> None:
    same_run_outcome(tmp_path / "nope.trec")
    same_qrels_outcome(tmp_path / "nope.qrels")


# --------------------------------------------------------------------------- fuzzing

TOKENS = ["", "x", "0", "-1", "+1", "1.5", "1e3", "nan", "inf", "1_0", "é", "\u00a0", "\u3000", "\t", "\r",
          "\x0b", "\x00", "\x01", "\ufeff", "\n", " ", "q1", "d1", "Q0", "99999999999999999999"]


def mutate(data: st.DataObject, content: bytes) -> bytes:
    for _ in range(data.draw(st.integers(1, 3))):
        lines = content.splitlines(keepends=True) or [b""]
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["delete", "duplicate", "swap", "token", "insert", "bytes"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "token":
            parts = lines[i].split(b" ")
            k = data.draw(st.integers(0, len(parts) - 1))
            parts[k] = data.draw(st.sampled_from(TOKENS)).encode()
            lines[i] = b" ".join(parts)
        elif op == "insert":
            pos = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + data.draw(st.sampled_from(TOKENS)).encode() + lines[i][pos:]
        else:
            pos = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + data.draw(st.binary(min_size=1, max_size=3)) + lines[i][pos:]
        content = b"".join(lines)
    return content


# FUZZ_EXAMPLES=3000 for a deeper local run, as in test_fuzz_readers.py
FUZZ = settings(derandomize=True, database=None, deadline=None,
                max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
                suppress_health_check=[HealthCheck.function_scoped_fixture])


KINDS = {"run": (random_run_text, same_run_outcome), "qrels": (random_qrels_text, same_qrels_outcome)}


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(data=st.data())
def test_mutated_files_read_the_same(tmp_path: Path, kind: str, data) -> None:
    make, check = KINDS[kind]
    path = tmp_path / f"{kind}.txt"
    path.write_bytes(mutate(data, make(random.Random(data.draw(st.integers(0, 99)))).encode()))
    check(path)


# --------------------------------------------------------------------------- the models


def test_run_columns_round_trip_and_keep_origins() -> None:
    run = Run(name="r", rankings={"q1": [Chunk(id="a", score=2.0), Chunk(id="b")], "q2": [], "q3": [Chunk(id="a")]})
    run.set_origin("q1", "r.trec", 4)
    cols = RunColumns.from_run(run)
    assert cols.question_ids() == ["q1", "q2", "q3"] and len(cols) == 3
    assert cols.ranked_ids("q1") == ["a", "b"] and cols.ranked_ids("q2") == [] and cols.ranked_ids("q9") == []
    assert cols.origin("q1") == ("r.trec", 4) and cols.origin("q3") is None
    back = cols.to_run()
    assert back.model_dump() == run.model_dump() and back.origin("q1") == ("r.trec", 4)
    empty = RunColumns.from_run(Run(name="e"))
    assert len(empty) == 0 and empty.to_run().rankings == {}


def test_run_columns_refuse_a_repeated_chunk() -> None:
    with pytest.raises(ValueError, match=r"question 'q1': chunk id 'a' appears twice \(again at rank 3\)"):
        RunColumns(name="r", qids=np.array(["q1"], dtype=object), starts=np.array([0, 3]),
                   chunk_codes=np.array([0, 1, 0]), vocabulary=np.array(["a", "b"], dtype=object),
                   scores=np.zeros(3))
    with pytest.raises(ValueError, match="starts"):
        RunColumns(name="r", qids=np.array(["q1"], dtype=object), starts=np.array([0, 2]),
                   chunk_codes=np.array([0, 1, 0]), vocabulary=np.array(["a", "b"], dtype=object),
                   scores=np.zeros(3))


def test_qrels_columns_round_trip() -> None:
    qrels = Qrels(grades={"q1": {"a": 2, "b": 0}, "q2": {}, "q3": {"a": 1}})
    cols = QrelsColumns.from_qrels(qrels)
    assert cols.labelled_questions() == ["q1", "q3"] and len(cols) == 3
    assert cols.for_question("q1") == {"a": 2, "b": 0} and cols.for_question("q2") == {}
    assert cols.to_qrels() == qrels
    assert QrelsColumns.from_qrels({"q": {"x": 3}}).for_question("q") == {"x": 3}
    with pytest.raises(ValueError, match="grade >= 0"):
        QrelsColumns(qids=np.array(["q"], dtype=object), starts=np.array([0, 1]), chunk_codes=np.array([0]),
                     vocabulary=np.array(["a"], dtype=object), grades=np.array([-1]))


@pytest.mark.parametrize("name", ["run.jsonl", "run.csv"])
def test_other_formats_load_as_columns_through_the_object_model(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text('{"id": "q1", "contexts": [{"id": "c2", "score": 3.2}, {"id": "c7"}]}\n'
                        '{"id": "q2", "contexts": ["Statements are in net banking."]}\n')
    else:
        path.write_text("question_id,chunk_id,rank,score\nq1,c7,2,0.5\nq1,c2,1,0.9\nq2,c1,1,\n")
    assert run_state(load_run_columns(path, "r")) == run_state(RunColumns.from_run(load_run(path, "r")))
    qrels = tmp_path / "qrels.csv"
    qrels.write_text("question_id,chunk_id,grade\nq1,c2,2\nq1,c4,1\nq2,c1,0\n")
    assert qrels_state(load_qrels_columns(qrels)) == qrels_state(QrelsColumns.from_qrels(load_qrels(qrels)))
