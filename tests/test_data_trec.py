"""TREC runs and qrels, corpus and queries files: reading, ordering, writing, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_eval.data.models import Chunk, Qrels, Run
from judge_eval.data.trec import (
    read_corpus,
    read_queries,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)
from judge_eval.errors import InputError

INPUTS = Path(__file__).parent / "data" / "inputs"


def test_rank_column_orders_and_ties_keep_input_order(tmp_path):
    path = tmp_path / "bm25.run"
    path.write_text(
        "q1 Q0 dA 3 9.0 x\n"
        "q1 Q0 dB 1 1.0 x\n"
        "q2 Q0 dZ 1 5.0 x\n"
        "q1 Q0 dC 2 2.0 x\n"
        "q1 Q0 dD 2 8.0 x\n"  # tie with dC at rank 2: dC came first
        "q1\tQ0\tdE  1  0.5\tx\n"  # tabs and runs of spaces separate too; ties with dB, after it
    )
    run = read_trec_run(path)
    assert run.name == "bm25"
    assert list(run.rankings) == ["q1", "q2"]
    assert run.ranked_ids("q1") == ["dB", "dE", "dC", "dD", "dA"]
    # trec_eval would order q1 by score (desc): dA 9.0, dD 8.0, dC 2.0, dB 1.0, dE 0.5
    assert [c.score for c in run.rankings["q1"]] == [1.0, 0.5, 2.0, 8.0, 9.0]
    assert all(c.text is None for c in run.rankings["q1"])
    assert run.origin("q1") == (str(path), 1) and run.origin("q2") == (str(path), 3)


def test_beir_corpus_fills_texts_and_tie_keeps_file_order():
    corpus = read_corpus(INPUTS / "beir" / "corpus.jsonl")
    assert list(corpus) == ["d1", "d2", "d3"]
    run = read_trec_run(INPUTS / "beir" / "bm25.trec", "bm25", corpus=corpus)
    assert run.ranked_ids("q2") == ["d3", "d2"]
    assert run.rankings["q1"][0] == Chunk(id="d1", text=corpus["d1"], score=12.5)


def test_corpus_forms(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"id": "a", "text": "one"}\n{"_id": "b", "contents": "two", "title": "t"}\n'
                     '{"docid": 3, "text": " x "}\n')
    assert read_corpus(jsonl) == {"a": "one", "b": "two", "3": " x "}
    tsv = tmp_path / "collection.tsv"
    tsv.write_text("id\ttext\ttitle\np1\tfirst passage\tT1\np2\tsecond\tT2\n")
    assert read_corpus(tsv) == {"p1": "first passage", "p2": "second"}
    no_header = tmp_path / "c.tsv"
    no_header.write_text("0\tzero\n1\tone\n")
    assert read_corpus(no_header) == {"0": "zero", "1": "one"}


def test_queries_forms(tmp_path):
    assert read_queries(INPUTS / "beir" / "queries.jsonl") == {
        "q1": "which method of forecasting uses averages",
        "q2": "difference between russian blue and british blue cat",
    }
    tsv = tmp_path / "queries.tsv"
    tsv.write_bytes("\ufeff1048585\twhat is paula deen's brother\n2\tcafé?\n".encode())
    assert read_queries(tsv) == {"1048585": "what is paula deen's brother", "2": "café?"}
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"query_id": "a", "query": "x?"}\n{"qid": 5, "question": "y?"}\n')
    assert read_queries(jsonl) == {"a": "x?", "5": "y?"}


def test_clapnq_tsv_with_quoted_multiline_cells_is_not_a_queries_file():
    # The CLAP NQ questions TSV quotes cells that span lines: read it as a table instead
    # (see test_data_tabular); as a line-based queries file it fails on the continuation line.
    with pytest.raises(InputError) as info:
        read_queries(INPUTS / "clapnq_questions.tsv")
    assert (info.value.line, info.value.field) == (4, "text")


def test_qrels_reading_and_identical_repeats(tmp_path):
    path = tmp_path / "l.qrels"
    path.write_text("q1 0 d1 2\nq1 0 d2 0\n\nq2 Q0 d1 1\nq1 0 d1 2\n")
    qrels = read_trec_qrels(path)
    assert qrels.grades == {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": 1}}
    assert len(qrels) == 3


def test_write_trec_run_exact_text_and_fallback_scores(tmp_path):
    run = Run(name="hybrid", rankings={
        "q1": [Chunk(id="a"), Chunk(id="b"), Chunk(id="c")],
        "q2": [Chunk(id="z", score=0.125), Chunk(id="y", score=-2.0)],
        "q3": [],
    })
    path = tmp_path / "r.trec"
    write_trec_run(run, path)
    assert path.read_text() == (
        "q1 Q0 a 1 3 hybrid\n"
        "q1 Q0 b 2 2 hybrid\n"
        "q1 Q0 c 3 1 hybrid\n"
        "q2 Q0 z 1 0.125 hybrid\n"
        "q2 Q0 y 2 -2.0 hybrid\n"
    )
    write_trec_run(run, path, tag="T")
    assert path.read_text().splitlines()[0] == "q1 Q0 a 1 3 T"


def test_trec_run_round_trip(tmp_path):
    run = Run(name="r", rankings={
        "q1": [Chunk(id="d3", score=1e-9), Chunk(id="d1", score=-0.3), Chunk(id="d2", score=-0.3)],
        "q_2": [Chunk(id="ünï", score=7.0)],
    })
    path = tmp_path / "r.trec"
    write_trec_run(run, path)
    back = read_trec_run(path, "r")
    assert (back.name, back.rankings) == (run.name, run.rankings)
    # with a corpus, the texts come back too
    corpus = {"d1": "one", "d2": "two", "d3": "three", "ünï": "four"}
    with_text = read_trec_run(path, "r", corpus=corpus)
    assert [c.text for c in with_text.rankings["q1"]] == ["three", "one", "two"]


def test_trec_run_round_trip_without_scores_gets_rank_scores(tmp_path):
    run = Run(name="r", rankings={"q1": [Chunk(id="a"), Chunk(id="b")]})
    path = tmp_path / "r.trec"
    write_trec_run(run, path)
    back = read_trec_run(path, "r")
    assert back.ranked_ids("q1") == ["a", "b"]
    assert [c.score for c in back.rankings["q1"]] == [2.0, 1.0]


def test_trec_qrels_round_trip(tmp_path):
    qrels = Qrels(grades={"q1": {"d1": 3, "d2": 0}, "q2": {"d1": 1}})
    path = tmp_path / "l.qrels"
    write_trec_qrels(qrels, path)
    assert path.read_text() == "q1 0 d1 3\nq1 0 d2 0\nq2 0 d1 1\n"
    assert read_trec_qrels(path) == qrels


def test_large_run_is_read(tmp_path):
    path = tmp_path / "big.trec"
    n_q, depth = 1000, 100
    with path.open("w") as fh:
        for q in range(n_q):
            for r in range(depth, 0, -1):  # written in reverse rank order
                fh.write(f"q{q} Q0 d{q}_{r} {r} {1.0 / r} big\n")
    run = read_trec_run(path)
    assert len(run.rankings) == n_q
    assert sum(len(v) for v in run.rankings.values()) == 100_000
    assert run.ranked_ids("q999")[:3] == ["d999_1", "d999_2", "d999_3"]
    assert run.origin("q5") == (str(path), 5 * depth + 1)


def test_documented_tie_breaking_differs_from_trec_eval(tmp_path):
    """Ties in the rank column keep input order here; trec_eval ignores ranks and sorts by
    score, descending, then by docid in reverse lexical order (docs/formats.md says so)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    path = tmp_path / "tie.trec"
    path.write_text("q Q0 a 1 1.0 t\nq Q0 b 1 1.0 t\n")
    run = read_trec_run(path)
    assert run.ranked_ids("q") == ["a", "b"]  # ours: input order, so "a" is at rank 1
    evaluator = pytrec_eval.RelevanceEvaluator({"q": {"a": 1, "b": 0}}, {"P_1"})
    scores = {"q": {c.id: c.score for c in run.rankings["q"]}}
    assert evaluator.evaluate(scores)["q"]["P_1"] == 0.0  # trec_eval puts "b" first
