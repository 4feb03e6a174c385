"""CSV / TSV / Parquet tables with a column mapping."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judge_eval.data.models import Chunk, Question
from judge_eval.data.tabular import read_qrels_table, read_questions_table, read_run_table
from judge_eval.errors import InputError

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


def _raised(call) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    return info.value


def test_parquet_nan_and_infinite_scores_are_errors_but_nulls_are_missing(tmp_path):
    path = tmp_path / "r.parquet"
    # pyarrow keeps a NaN a NaN (pandas' to_parquet would store it as a null)
    pq.write_table(pa.table({"question_id": ["q1", "q1", "q1"], "chunk_id": ["a", "b", "c"],
                             "score": pa.array([1.0, None, float("nan")])}), path)
    err = _raised(lambda: read_run_table(path, "r"))
    assert (err.line, err.kind, err.field) == (3, "row", "score") and "finite number, got nan" in str(err)
    pq.write_table(pa.table({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"],
                             "score": pa.array([None, -math.inf])}), path)
    err = _raised(lambda: read_run_table(path, "r"))
    assert (err.line, err.field) == (2, "score") and "got -inf" in str(err)
    pq.write_table(pa.table({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"],
                             "score": pa.array([None, 2.0])}), path)
    assert read_run_table(path, "r").rankings["q1"] == [Chunk(id="a"), Chunk(id="b", score=2.0)]


def test_parquet_nullable_integer_columns_with_nulls(tmp_path):
    # pandas writes an Int64 column; pd.read_parquet gave back pd.NA, which was neither missing
    # nor a number ("grade must be an integer >= 0, got <NA>")
    path = tmp_path / "q.parquet"
    pd.DataFrame({
        "question_id": pd.array([1, 1, 2], dtype="Int64"),
        "question": ["Who?", "Who?", "Why?"],
        "chunk_id": ["c1", "c2", "c1"],
        "rank": pd.array([1, 2, 1], dtype="Int64"),
        "grade": pd.array([2, None, 0], dtype="Int64"),
    }).to_parquet(path)
    questions, run = read_questions_table(path)
    assert questions["1"].labels == {"c1": 2} and questions["2"].labels == {"c1": 0}
    assert run is not None and run.ranked_ids("1") == ["c1", "c2"]


def test_parquet_ranks_must_be_integers_from_one(tmp_path):
    path = tmp_path / "r.parquet"
    for ranks, shown in (([1.0, 2.5], "got 2.5"), ([1, 0], "got 0"), ([1, -2], "got -2"), ([1, None], "got missing")):
        pd.DataFrame({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"], "rank": ranks}).to_parquet(path)
        err = _raised(lambda: read_run_table(path, "r"))
        assert (err.line, err.field) == (2, "rank") and "integer >= 1" in str(err) and shown in str(err), ranks


def test_parquet_grade_nan_is_an_error(tmp_path):
    path = tmp_path / "l.parquet"
    pq.write_table(pa.table({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"],
                             "grade": pa.array([1.0, float("nan")])}), path)
    err = _raised(lambda: read_qrels_table(path))
    assert (err.line, err.field) == (2, "grade") and "got nan" in str(err)


def test_table_texts_empty_cell_is_no_text_blank_cell_is_an_error(tmp_path):
    path = tmp_path / "r.parquet"
    pd.DataFrame({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"], "text": ["", None]}).to_parquet(path)
    assert read_run_table(path, "r").rankings["q1"] == [Chunk(id="a"), Chunk(id="b")]
    pd.DataFrame({"question_id": ["q1", "q1"], "chunk_id": ["a", "b"], "text": ["A", "\t "]}).to_parquet(path)
    err = _raised(lambda: read_run_table(path, "r"))
    assert (err.line, err.field) == (2, "text") and "chunk text is empty" in str(err)


def test_parquet_duplicate_column_names_are_an_error(tmp_path):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["q1"]), pa.array(["a"]), pa.array(["b"])],
                                        names=["question_id", "chunk_id", "chunk_id"]), path)
    err = _raised(lambda: read_run_table(path, "r"))
    assert err.field == "chunk_id" and "appears twice" in str(err)


def test_parquet_decimal_columns_are_numbers(tmp_path):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({
        "question_id": ["q1", "q1"], "chunk_id": ["a", "b"],
        "rank": pa.array([Decimal("2"), Decimal("1")]),
        "score": pa.array([Decimal("0.25"), None], pa.decimal128(5, 2)),
    }), path)
    assert read_run_table(path, "r").rankings["q1"] == [Chunk(id="b"), Chunk(id="a", score=0.25)]
