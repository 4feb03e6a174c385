"""load_*: format detection, the same data in every format, and load_dataset's cross-checks."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from judge_eval.data.jsonl import write_questions_jsonl, write_run_jsonl
from judge_eval.data.load import (
    DataWarning,
    detect_format,
    load_corpus,
    load_dataset,
    load_qrels,
    load_queries,
    load_questions,
    load_run,
)
from judge_eval.data.models import Chunk, Question, Run
from judge_eval.data.trec import write_trec_qrels, write_trec_run

INPUTS = Path(__file__).parent / "data" / "inputs"
BEIR = INPUTS / "beir"


@pytest.mark.parametrize(
    "name, content, kind, expected",
    [
        ("r.trec", "q Q0 d 1 1 t\n", "run", "trec"),
        ("r.run", "q Q0 d 1 1 t\n", "run", "trec"),
        ("r.txt", "q Q0 d 1 1 t\n", "run", "trec"),
        ("r", "q Q0 d 1 1 t\n", "run", "trec"),  # no extension: 6 columns
        ("l", "q 0 d 1\n", "qrels", "trec"),  # no extension: 4 columns
        ("l.qrels", "q 0 d 1\n", "qrels", "trec"),
        ("r.jsonl", '{"id": "q", "contexts": []}\n', "run", "jsonl"),
        ("r.json", '[{"user_input": "?", "retrieved_contexts": []}]', "run", "ragas"),
        ("r.ndjson", '{"user_input": "?", "retrieved_contexts": []}\n', "run", "ragas"),
        ("r.out", '{"id": "q", "contexts": []}\n', "run", "jsonl"),  # sniffed from "{"
        ("r.csv", "question_id,chunk_id\nq,d\n", "run", "table"),
        ("r.tsv", "question_id\tchunk_id\nq\td\n", "run", "table"),
        ("q.jsonl", '{"id": "q", "question": "?"}\n', "questions", "jsonl"),
        ("q.jsonl", '{"_id": "q", "text": "?"}\n', "questions", "queries"),
        ("q.jsonl", '{"user_input": "?"}\n', "questions", "ragas"),
        ("q.tsv", "q\t?\n", "questions", "queries"),
        ("q.csv", "question_id,question\nq,?\n", "questions", "table"),
        ("l.jsonl", '{"qid": "q", "doc_id": "d", "grade": 1}\n', "qrels", "jsonl"),
        ("l.tsv", "query-id\tcorpus-id\tscore\nq\td\t1\n", "qrels", "table"),
        ("q.jsonl", "not json\n", "questions", "jsonl"),  # the reader reports the bad line
    ],
)
def test_detect_format(tmp_path, name, content, kind, expected):
    path = tmp_path / name
    path.write_text(content)
    assert detect_format(path, kind) == expected


def _reference_run() -> Run:
    return Run(name="bm25", rankings={
        "q1": [Chunk(id="d1", text="one", score=3.0), Chunk(id="d3", text="three", score=2.0)],
        "q2": [Chunk(id="d2", text="two", score=5.0)],
    })


def test_same_run_in_every_format_loads_the_same(tmp_path):
    ref = _reference_run()
    corpus = {"d1": "one", "d2": "two", "d3": "three"}
    write_trec_run(ref, tmp_path / "bm25.trec")
    write_run_jsonl(ref, tmp_path / "bm25.jsonl")
    rows = [{"question_id": q, "chunk_id": c.id, "rank": r, "score": c.score, "text": c.text}
            for q, chunks in ref.rankings.items() for r, c in enumerate(chunks, start=1)]
    pd.DataFrame(rows).to_csv(tmp_path / "bm25.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "bm25.parquet")
    for name in ("bm25.trec", "bm25.jsonl", "bm25.csv", "bm25.parquet"):
        run = load_run(tmp_path / name, corpus=corpus)
        assert (run.name, run.rankings) == (ref.name, ref.rankings), name


def test_load_run_with_corpus_path_and_explicit_format(tmp_path):
    path = tmp_path / "run.dat"
    path.write_text("q1 Q0 d2 1 1.0 t\n")
    run = load_run(path, "x", format="trec", corpus=BEIR / "corpus.jsonl")
    assert run.name == "x" and run.rankings["q1"][0].text.startswith("The Russian Blue")


def test_load_qrels_questions_corpus_queries():
    assert load_qrels(BEIR / "qrels.tsv").grades["q2"] == {"d2": 1, "d3": 0}
    assert list(load_questions(BEIR / "queries.jsonl")) == ["q1", "q2"]
    assert load_questions(INPUTS / "ragas.json")["q2"].reference.startswith("A British Blue")
    assert len(load_corpus(BEIR / "corpus.jsonl")) == 3
    assert load_queries(BEIR / "queries.jsonl")["q1"] == "which method of forecasting uses averages"


def test_dataset_trec_style_with_queries_corpus_and_qrels():
    ds = load_dataset(runs={"bm25": BEIR / "bm25.trec"}, qrels=BEIR / "qrels.tsv",
                      corpus=BEIR / "corpus.jsonl", queries=BEIR / "queries.jsonl")
    assert list(ds.questions) == ["q1", "q2"]
    assert ds.questions["q1"] == Question(id="q1", question="which method of forecasting uses averages")
    assert ds.runs["bm25"].rankings["q2"][0].text.startswith("The prime minister")
    assert ds.labels().grades == {"q1": {"d1": 2}, "q2": {"d2": 1, "d3": 0}}


def test_dataset_from_runs_and_qrels_only(tmp_path):
    (tmp_path / "a.trec").write_text("q2 Q0 d1 1 1 a\nq1 Q0 d1 1 1 a\n")
    (tmp_path / "b.trec").write_text("q3 Q0 d1 1 1 b\nq1 Q0 d2 1 1 b\n")
    (tmp_path / "l.qrels").write_text("q1 0 d1 1\n")
    ds = load_dataset(runs={"a": tmp_path / "a.trec", "b": tmp_path / "b.trec"}, qrels=tmp_path / "l.qrels")
    # questions: the ids the runs rank, first run first, without texts
    assert list(ds.questions) == ["q2", "q1", "q3"]
    assert all(q.question == "" and q.reference is None for q in ds.questions.values())
    assert list(ds.runs) == ["a", "b"]


def test_dataset_native_data_with_inline_run_and_more_runs(tmp_path):
    questions = {"q1": Question(id="q1", question="Who?", reference="Ada.", labels={"c1": 1}),
                 "q2": Question(id="q2", question="Why?")}
    inline = Run(name="contexts", rankings={"q1": [Chunk(id="c1", text="Ada.")]})
    write_questions_jsonl(questions, tmp_path / "data.jsonl", run=inline)
    (tmp_path / "dense.jsonl").write_text('{"id": "q2", "contexts": [{"id": "c1"}]}\n')
    (tmp_path / "l.qrels").write_text("q1 0 c1 1\nq2 0 c7 2\n")
    ds = load_dataset(tmp_path / "data.jsonl", runs={"dense": tmp_path / "dense.jsonl"},
                      qrels=tmp_path / "l.qrels", corpus={"c1": "Ada."}, data_run_name="inline")
    assert list(ds.runs) == ["inline", "dense"]
    assert ds.runs["dense"].rankings["q2"] == [Chunk(id="c1", text="Ada.")]
    assert ds.labels().grades == {"q1": {"c1": 1}, "q2": {"c7": 2}}


def test_qrels_for_unknown_questions_warn_and_are_kept(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "?"}\n')
    (tmp_path / "l.qrels").write_text("q1 0 d1 1\nq8 0 d1 1\nq9 0 d2 2\n")
    with pytest.warns(DataWarning, match=r"2 question\(s\) not in the dataset.*'q8', 'q9'"):
        ds = load_dataset(tmp_path / "q.jsonl", qrels=tmp_path / "l.qrels")
    assert ds.qrels is not None and set(ds.qrels.grades) == {"q1", "q8", "q9"}


def test_no_warning_when_qrels_match(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "?"}\n')
    (tmp_path / "l.qrels").write_text("q1 0 d1 1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(tmp_path / "q.jsonl", qrels=tmp_path / "l.qrels")


def test_dataset_ragas_data(tmp_path):
    ds = load_dataset(INPUTS / "ragas.json", qrels=None)
    assert list(ds.runs) == ["contexts"]
    assert ds.runs["contexts"].ranked_ids("q2") == ["d2"]


def test_dataset_table_data_with_mapping(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("qid,q,doc,g\nq1,Who?,c1,2\nq1,Who?,c2,0\n")
    ds = load_dataset(path, columns={"question_id": "qid", "question": "q", "chunk_id": "doc", "grade": "g"})
    assert ds.questions["q1"].labels == {"c1": 2, "c2": 0}
    assert ds.runs["contexts"].ranked_ids("q1") == ["c1", "c2"]


def test_dataset_needs_something_and_not_both_question_sources(tmp_path):
    from judge_eval.errors import InputError

    with pytest.raises(InputError, match="nothing to evaluate"):
        load_dataset()
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "?"}\n')
    with pytest.raises(InputError, match="not both") as info:
        load_dataset(tmp_path / "q.jsonl", queries=BEIR / "queries.jsonl")
    assert info.value.field == "queries"


def test_qrels_written_then_loaded_through_load_qrels(tmp_path):
    ds = load_dataset(runs={"bm25": BEIR / "bm25.trec"}, qrels=BEIR / "qrels.tsv")
    write_trec_qrels(ds.qrels, tmp_path / "l.qrels")
    assert load_qrels(tmp_path / "l.qrels") == ds.qrels
