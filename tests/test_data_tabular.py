"""CSV / TSV / Parquet tables with a column mapping."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from judge_eval.data.models import Chunk, Question
from judge_eval.data.tabular import read_qrels_table, read_questions_table, read_run_table

INPUTS = Path(__file__).parent / "data" / "inputs"


def test_csv_run_with_mapping_rank_score_and_text(tmp_path):
    path = tmp_path / "dense.csv"
    path.write_text(
        "qid,doc,pos,sim,passage,extra\n"
        "q1,d3,2,0.5,\"third, with a comma\",x\n"
        "q1,d1,1,0.9,first,x\n"
        "q2,d1,1,,,x\n"
        "q1,d2,2,0.7,second,x\n"
    )
    run = read_run_table(path, columns={"question_id": "qid", "chunk_id": "doc", "rank": "pos",
                                        "score": "sim", "text": "passage"})
    assert run.name == "dense"
    assert run.rankings == {
        "q1": [Chunk(id="d1", text="first", score=0.9), Chunk(id="d3", text="third, with a comma", score=0.5),
               Chunk(id="d2", text="second", score=0.7)],  # d3 and d2 tie at rank 2: row order
        "q2": [Chunk(id="d1")],  # empty cells are missing values
    }
    assert run.origin("q1") == (str(path), 1) and run.origin("q2") == (str(path), 3)


def test_default_column_names_and_row_order_without_rank(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("question_id\tchunk_id\tscore\nq1\tb\t1\nq1\ta\t2\n")
    run = read_run_table(path, "r")
    assert run.ranked_ids("q1") == ["b", "a"]  # no rank column: row order, scores not re-sorted


def test_csv_with_bom_does_not_corrupt_first_column(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(b"\xef\xbb\xbfquestion_id,chunk_id\nq1,d1\n")
    assert read_run_table(path, "r").ranked_ids("q1") == ["d1"]


def test_ids_stay_text_in_csv(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("question_id,chunk_id\n007,1.50\n")
    assert read_run_table(path, "r").ranked_ids("007") == ["1.50"]


def test_parquet_run_with_integer_ids_and_nulls(tmp_path):
    path = tmp_path / "r.parquet"
    pd.DataFrame({
        "question_id": [7, 7, 8],
        "chunk_id": ["a", "b", "a"],
        "rank": [2, 1, 1],
        "score": [0.1, None, 0.3],
        "text": ["A", None, "A"],
    }).to_parquet(path)
    run = read_run_table(path, "p", corpus={"b": "B from corpus"})
    assert run.rankings == {
        "7": [Chunk(id="b", text="B from corpus"), Chunk(id="a", text="A", score=0.1)],
        "8": [Chunk(id="a", text="A", score=0.3)],
    }


def test_qrels_csv_and_beir_tsv():
    qrels = read_qrels_table(INPUTS / "beir" / "qrels.tsv")  # header query-id corpus-id score
    assert qrels.grades == {"q1": {"d1": 2}, "q2": {"d2": 1, "d3": 0}}


def test_qrels_parquet_with_mapping(tmp_path):
    path = tmp_path / "l.parquet"
    pd.DataFrame({"q": ["a", "a", "b"], "c": ["x", "y", "x"], "rel": [1, 0, 3]}).to_parquet(path)
    qrels = read_qrels_table(path, {"question_id": "q", "chunk_id": "c", "grade": "rel"})
    assert qrels.grades == {"a": {"x": 1, "y": 0}, "b": {"x": 3}}


def test_questions_table_long_format_gives_questions_run_and_labels(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text(
        "question_id,question,reference,chunk_id,text,grade\n"
        "q1,Who?,Ada.,c1,Ada wrote it.,2\n"
        "q1,Who?,Ada.,c2,Unrelated.,\n"
        "q2,Why?,,c1,Ada wrote it.,0\n"
    )
    questions, run = read_questions_table(path, run_name="long")
    assert questions == {
        "q1": Question(id="q1", question="Who?", reference="Ada.", labels={"c1": 2}),
        "q2": Question(id="q2", question="Why?", labels={"c1": 0}),
    }
    assert run is not None and run.name == "long"
    assert run.rankings["q1"] == [Chunk(id="c1", text="Ada wrote it."), Chunk(id="c2", text="Unrelated.")]


def test_clapnq_questions_tsv_with_mapping():
    questions, run = read_questions_table(
        INPUTS / "clapnq_questions.tsv",
        {"question_id": "id", "question": "question", "reference": "answers"},
    )
    assert run is None
    assert list(questions) == ["6401197308716204890", "-1218875241352839456", "7812627963583184440"]
    cat = questions["-1218875241352839456"]
    assert cat.question == "difference between russian blue and british blue cat"
    assert cat.reference is not None
    assert cat.reference.endswith("The British Blue cat is just a British Shorthair with a blue coat.")
    assert cat.reference.startswith("Russian Blue is with the undercoat")
