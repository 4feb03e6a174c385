"""Native JSONL (questions, runs, qrels) and RAGAS records: reading, writing, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_eval.data.jsonl import (
    read_qrels_jsonl,
    read_questions_jsonl,
    read_run_jsonl,
    write_qrels_jsonl,
    write_questions_jsonl,
    write_run_jsonl,
)
from judge_eval.data.models import Chunk, Qrels, Question, Run, content_id
from judge_eval.data.ragas import read_ragas

INPUTS = Path(__file__).parent / "data" / "inputs"


def same_run(a: Run | None, b: Run | None) -> bool:
    """Runs are equal in name and rankings. (pydantic's ``==`` also compares the private
    ``_origins``, which only a run read from a file has.)"""
    if a is None or b is None:
        return a is b
    return (a.name, a.rankings) == (b.name, b.rankings)


def test_questions_every_field_and_context_form(tmp_path):
    path = tmp_path / "q.jsonl"
    lines = [
        {"id": "q1", "question": "Who?", "reference": "Ada.", "labels": {"c1": 2, "c9": 0},
         "metadata": {"topic": "history"}, "answers": ["Ada"],
         "contexts": ["plain text", {"id": "c1", "text": "Ada wrote it.", "score": 3.5, "title": "T"},
                      {"text": "no id"}, {"id": 42}]},
        {"id": 7, "question": "Why?", "reference": None},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    questions, run = read_questions_jsonl(path)
    assert list(questions) == ["q1", "7"]  # file order; the integer id 7 becomes "7"
    q1 = questions["q1"]
    assert q1.question == "Who?" and q1.reference == "Ada."
    assert q1.labels == {"c1": 2, "c9": 0}
    # unknown top-level keys are kept in metadata
    assert q1.metadata == {"topic": "history", "answers": ["Ada"]}
    assert questions["7"] == Question(id="7", question="Why?")
    assert run is not None and run.name == "contexts"
    assert run.rankings["q1"] == [
        Chunk(id=content_id("plain text"), text="plain text"),
        Chunk(id="c1", text="Ada wrote it.", score=3.5, metadata={"title": "T"}),
        Chunk(id=content_id("no id"), text="no id"),
        Chunk(id="42"),
    ]
    assert "7" not in run.rankings  # no contexts key: no ranking (not an empty one)
    assert run.origin("q1") == (str(path), 1)


def test_content_id_is_hand_checkable():
    import hashlib

    assert content_id("plain text") == "h:" + hashlib.sha256(b"plain text").hexdigest()[:16]


def test_questions_without_contexts_give_no_run(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "q1", "question": "?"}\n')
    questions, run = read_questions_jsonl(path, "mine")
    assert run is None and list(questions) == ["q1"]


def test_empty_contexts_list_is_an_empty_ranking(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "q1", "question": "?", "contexts": []}\n')
    _, run = read_questions_jsonl(path, "mine")
    assert run is not None and run.name == "mine" and run.rankings == {"q1": []}


def test_bom_blank_lines_and_crlf(tmp_path):
    path = tmp_path / "q.jsonl"
    body = '{"id": "q1", "question": "?"}\r\n\r\n   \r\n{"id": "q2", "question": "!"}\r\n\r\n'
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    questions, _ = read_questions_jsonl(path)
    assert list(questions) == ["q1", "q2"]  # not "\ufeffq1"
    assert questions["q2"].question == "!"


def test_bom_on_a_run_file_does_not_corrupt_first_id(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "q1", "contexts": ["a"]}\n')
    run = read_run_jsonl(path, "r")
    assert list(run.rankings) == ["q1"]


def test_json_array_reads_like_jsonl(tmp_path):
    records = [{"id": "q1", "question": "?", "contexts": ["a", "b"]}, {"id": "q2", "question": "!"}]
    a, b = tmp_path / "q.json", tmp_path / "q.jsonl"
    a.write_text(json.dumps(records, indent=2))
    b.write_text("".join(json.dumps(r) + "\n" for r in records))
    qa, ra = read_questions_jsonl(a)
    qb, rb = read_questions_jsonl(b)
    assert qa == qb and same_run(ra, rb)
    # the origin of a record in an array is the line where the record starts
    assert ra is not None and ra.origin("q1") == (str(a), 2)


def test_run_file_ignores_other_keys_and_fills_text_from_corpus(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "q1", "question": "ignored", "contexts": [{"id": "d2"}, {"id": "d1", "text": "mine"}]}\n')
    run = read_run_jsonl(path, "dense", corpus={"d1": "one", "d2": "two"})
    assert run.rankings["q1"] == [Chunk(id="d2", text="two"), Chunk(id="d1", text="mine")]


def test_qrels_jsonl_key_aliases(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(
        '{"query_id": "q1", "doc_id": "d1", "grade": 2}\n'
        '{"qid": "q1", "chunk_id": "d2", "relevance": 0}\n'
        '{"question_id": 5, "docid": "d1", "grade": 1.0}\n'
        '{"query_id": "q1", "doc_id": "d1", "grade": 2}\n'  # an identical repeat is fine
    )
    assert read_qrels_jsonl(path).grades == {"q1": {"d1": 2, "d2": 0}, "5": {"d1": 1}}


# --- writers: read(write(x)) == x -------------------------------------------------------------


def _sample() -> tuple[dict[str, Question], Run]:
    questions = {
        "q1": Question(id="q1", question="Wer? ünïcode", reference="Ada.", labels={"c1": 3},
                       metadata={"split": "dev", "n": [1, 2]}),
        "q2": Question(id="q2", question="Why?"),
        "q3": Question(id="q3", question="Empty ranking"),
    }
    run = Run(name="dense", rankings={
        "q1": [Chunk(id="c1", text="Ada.", score=0.25, metadata={"src": "wiki"}), Chunk.from_text("x\ny")],
        "q3": [],
    })
    return questions, run


def test_questions_round_trip_with_and_without_run(tmp_path):
    questions, run = _sample()
    path = tmp_path / "out" / "q.jsonl"
    write_questions_jsonl(questions, path, run=run)
    got_q, got_run = read_questions_jsonl(path, "dense")
    assert got_q == questions and same_run(got_run, run)
    write_questions_jsonl(questions, path)
    assert read_questions_jsonl(path) == (questions, None)


def test_run_round_trip(tmp_path):
    _, run = _sample()
    path = tmp_path / "r.jsonl"
    write_run_jsonl(run, path)
    assert same_run(read_run_jsonl(path, "dense"), run)
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first["contexts"][0] == {"id": "c1", "text": "Ada.", "score": 0.25, "metadata": {"src": "wiki"}}


def test_qrels_jsonl_round_trip(tmp_path):
    qrels = Qrels(grades={"q1": {"d1": 2, "d2": 0}, "q2": {"d9": 1}})
    path = tmp_path / "l.jsonl"
    write_qrels_jsonl(qrels, path)
    assert read_qrels_jsonl(path) == qrels


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(
    lambda s: s.strip() != ""
)


@st.composite
def _runs(draw) -> Run:
    rankings = {}
    for qid in draw(st.lists(_ids, unique=True, max_size=4)):
        ids = draw(st.lists(_ids, unique=True, max_size=4))
        rankings[qid] = [
            Chunk(id=cid, text=draw(st.none() | _text.filter(str.strip)),  # a text is never blank
                  score=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)))
            for cid in ids
        ]
    return Run(name="r", rankings=rankings)


@settings(max_examples=60, deadline=None)
@given(run=_runs())
def test_run_round_trip_property(tmp_path_factory, run):
    path = tmp_path_factory.mktemp("rt") / "r.jsonl"
    if not run.rankings:
        return  # an empty file is an error by design
    write_run_jsonl(run, path)
    assert same_run(read_run_jsonl(path, "r"), run)


# --- RAGAS ---------------------------------------------------------------------------------


def test_ragas_json_array_with_and_without_ids():
    questions, run = read_ragas(INPUTS / "ragas.json", "rag")
    first = content_id("Which method of forecasting uses averages?")
    assert list(questions) == [first, "q2"]
    assert questions[first].reference == "Seasonality."
    assert questions[first].metadata == {"response": "Seasonal averages."}
    assert run.name == "rag"
    assert run.ranked_ids(first) == [content_id("Seasonality is a regular change."),
                                     content_id("Canada has a prime minister.")]
    assert run.rankings["q2"] == [Chunk(id="d2", text="The Russian Blue has a double coat.")]


def test_ragas_jsonl_with_question_id_and_integer_ids(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"question_id": 3, "user_input": "?", "retrieved_contexts": ["a", "b"], '
                    '"retrieved_context_ids": [10, "c2"], "reference": null}\n')
    questions, run = read_ragas(path)
    assert questions == {"3": Question(id="3", question="?")}
    assert run.ranked_ids("3") == ["10", "c2"]


@pytest.mark.parametrize("grade", [0, 3, 2.0])
def test_labels_accept_integers_and_integral_floats(tmp_path, grade):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "?", "labels": {"c": grade}}) + "\n")
    assert read_questions_jsonl(path)[0]["q"].labels == {"c": int(grade)}


def test_escaped_surrogate_pair_is_one_character(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "q1", "contexts": ["smile \\ud83d\\ude00"]}\n')  # a lone \ud83d would be an error
    assert read_run_jsonl(path, "r").rankings["q1"][0].text == "smile \U0001F600"
