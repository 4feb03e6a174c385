"""Bad input: every problem is an InputError naming the file, the line (or row) and the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from judge_eval.data.jsonl import read_qrels_jsonl, read_questions_jsonl, read_run_jsonl, write_questions_jsonl
from judge_eval.data.load import load_corpus, load_dataset, load_qrels, load_questions, load_run
from judge_eval.data.models import Chunk, Question, Run
from judge_eval.data.ragas import read_ragas
from judge_eval.data.tabular import read_qrels_table, read_run_table
from judge_eval.data.trec import read_queries, read_trec_qrels, read_trec_run, write_trec_run
from judge_eval.errors import InputError

Q1 = '{"id": "q1", "question": "What?"}\n'
RUN = "q1 Q0 d1 1 2.0 t\n"


def case(id: str, files: dict[str, str | bytes], call: Callable[[Path], object], file: str,
         line: int | None, field: str | None, fragment: str, kind: str = "line"):
    return pytest.param(files, call, file, line, field, fragment, kind, id=id)


CASES = [
    # --- native JSONL questions ---
    case("invalid-json", {"q.jsonl": Q1 + '{"id": "q2", "question": }\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, None, "invalid JSON"),
    case("json-not-object", {"q.jsonl": Q1 + '"just a string"\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, None, "expected a JSON object, got a string"),
    case("missing-id", {"q.jsonl": Q1 + '{"question": "Why?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, "id", "missing field 'id'"),
    case("missing-question", {"q.jsonl": '{"id": "q1", "reference": "x"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "question", "missing field 'question'"),
    case("question-not-string", {"q.jsonl": '{"id": "q1", "question": 5}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "question", "must be a string"),
    case("id-list", {"q.jsonl": Q1 + '{"id": ["q2"], "question": "Why?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, "id", "got a list"),
    case("id-null", {"q.jsonl": '{"id": null, "question": "Why?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "id", "got missing"),
    case("id-empty", {"q.jsonl": '{"id": "  ", "question": "Why?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "id", "id is empty"),
    case("contexts-not-list", {"q.jsonl": '{"id": "q1", "question": "?", "contexts": "a chunk"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "contexts", "must be a list"),
    case("context-without-id-or-text",
         {"q.jsonl": '{"id": "q1", "question": "?", "contexts": ["a", {"score": 1}]}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "contexts.1", "needs an 'id' or a 'text'"),
    case("context-score-string",
         {"q.jsonl": '{"id": "q1", "question": "?", "contexts": [{"id": "c1", "score": "high"}]}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "contexts.0.score", "must be a number"),
    case("duplicate-question-id", {"q.jsonl": Q1 + '{"id": "q2", "question": "?"}\n' + Q1},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 3, "id", "first on line 1"),
    case("duplicate-question-id-int-vs-str", {"q.jsonl": '{"id": 7, "question": "?"}\n{"id": "7", "question": "?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, "id", "duplicate question id '7'"),
    case("duplicate-chunk-jsonl",
         {"q.jsonl": Q1 + '{"id": "q2", "question": "?", "contexts": [{"id": "c1"}, {"id": "c1", "text": "x"}]}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, "contexts.1.id", "appears twice"),
    case("duplicate-chunk-same-text",
         {"q.jsonl": '{"id": "q1", "question": "?", "contexts": ["same", "same"]}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "contexts.1.id", "appears twice"),
    case("label-negative", {"q.jsonl": '{"id": "q1", "question": "?", "labels": {"c1": -1}}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "labels.c1", "integer >= 0"),
    case("label-fraction", {"q.jsonl": '{"id": "q1", "question": "?", "labels": {"c1": 1.5}}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 1, "labels.c1", "got 1.5"),
    case("invalid-utf8-jsonl", {"q.jsonl": Q1.encode() + b'{"id": "q2", "question": "caf\xe9?"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 2, "question", "invalid UTF-8"),
    case("empty-jsonl", {"q.jsonl": ""},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", None, None, "file is empty"),
    case("blank-lines-only", {"q.jsonl": "\n  \n\n"},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", None, None, "file is empty"),
    case("line-number-after-blank-lines", {"q.jsonl": Q1 + "\n\n" + '{"id": "q2"}\n'},
         lambda d: read_questions_jsonl(d / "q.jsonl"), "q.jsonl", 4, "question", "missing field"),
    case("json-array-bad-record", {"q.json": '[\n  {"id": "q1", "question": "?"},\n  {"id": "q2"}\n]\n'},
         lambda d: read_questions_jsonl(d / "q.json"), "q.json", 3, "question", "missing field"),
    case("json-array-truncated", {"q.json": '[\n  {"id": "q1", "question": "?"},\n  {"id": \n'},
         lambda d: read_questions_jsonl(d / "q.json"), "q.json", 4, None, "invalid JSON"),
    # --- native JSONL runs and qrels ---
    case("run-duplicate-question", {"r.jsonl": '{"id": "q1", "contexts": []}\n{"id": "q1", "contexts": []}\n'},
         lambda d: read_run_jsonl(d / "r.jsonl", "r"), "r.jsonl", 2, "id", "duplicate question id"),
    case("run-missing-contexts", {"r.jsonl": '{"id": "q1"}\n'},
         lambda d: read_run_jsonl(d / "r.jsonl", "r"), "r.jsonl", 1, "contexts", "missing field"),
    case("run-jsonl-id-not-in-corpus", {"r.jsonl": '{"id": "q1", "contexts": [{"id": "d1"}, {"id": "d9"}]}\n',
                                         "c.jsonl": '{"id": "d1", "text": "one"}\n'},
         lambda d: load_run(d / "r.jsonl", corpus=d / "c.jsonl"), "r.jsonl", 1, "contexts.1.id", "not in the corpus"),
    case("qrels-jsonl-missing-grade", {"l.jsonl": '{"query_id": "q1", "doc_id": "d1"}\n'},
         lambda d: read_qrels_jsonl(d / "l.jsonl"), "l.jsonl", 1, "grade", "missing field 'grade'"),
    case("qrels-jsonl-conflict", {"l.jsonl": '{"qid": "q1", "doc_id": "d1", "relevance": 1}\n'
                                              '{"qid": "q1", "doc_id": "d1", "relevance": 2}\n'},
         lambda d: read_qrels_jsonl(d / "l.jsonl"), "l.jsonl", 2, "relevance", "disagrees"),
    # --- RAGAS ---
    case("ragas-context-not-string",
         {"r.jsonl": '{"user_input": "?", "retrieved_contexts": ["a", {"text": "b"}]}\n'},
         lambda d: read_ragas(d / "r.jsonl"), "r.jsonl", 1, "retrieved_contexts.1", "must be a string"),
    case("ragas-ids-length",
         {"r.jsonl": '{"user_input": "?", "retrieved_contexts": ["a", "b"], "retrieved_context_ids": ["c1"]}\n'},
         lambda d: read_ragas(d / "r.jsonl"), "r.jsonl", 1, "retrieved_context_ids", "as long as"),
    case("ragas-same-question-no-id",
         {"r.jsonl": '{"user_input": "?", "retrieved_contexts": []}\n{"user_input": "?", "retrieved_contexts": []}\n'},
         lambda d: read_ragas(d / "r.jsonl"), "r.jsonl", 2, "user_input", "give the records ids"),
    case("ragas-missing-user-input", {"r.jsonl": '{"question": "?", "retrieved_contexts": []}\n'},
         lambda d: read_ragas(d / "r.jsonl"), "r.jsonl", 1, "user_input", "missing field"),
    # --- TREC runs ---
    case("trec-duplicate-docid", {"r.trec": RUN + "q1 Q0 d2 2 1.0 t\nq1 Q0 d1 3 0.5 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 3, "docid", "first on line 1"),
    case("trec-run-too-few-columns", {"r.trec": RUN + "q1 Q0 d2 2 1.0\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "tag", "expected 6"),
    case("trec-run-three-columns", {"r.trec": "q1 d2 1\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 1, "rank", "got 3"),
    case("trec-run-too-many-columns", {"r.trec": "q1 Q0 d2 2 1.0 my run\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 1, "tag", "got 7"),
    case("trec-rank-not-integer", {"r.trec": RUN + "q1 Q0 d2 second 1.0 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "rank", "rank must be an integer"),
    case("trec-score-not-number", {"r.trec": RUN + "q1 Q0 d2 2 high t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "score", "score must be a number"),
    case("trec-run-empty", {"r.trec": ""},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", None, None, "file is empty"),
    case("trec-invalid-utf8", {"r.trec": RUN.encode() + b"q1 Q0 d2 2 1.0 t\nq1 Q0 d\xff3 3 0.5 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 3, "docid", "invalid UTF-8"),
    case("trec-docid-not-in-corpus", {"r.trec": RUN + "q1 Q0 d7 2 1.0 t\n", "c.jsonl": '{"_id": "d1", "text": "x"}\n'},
         lambda d: load_run(d / "r.trec", corpus=d / "c.jsonl"), "r.trec", 2, "docid", "'d7' is not in the corpus"),
    # --- TREC qrels ---
    case("qrels-negative-grade", {"l.qrels": "q1 0 d1 1\nq1 0 d2 -1\n"},
         lambda d: read_trec_qrels(d / "l.qrels"), "l.qrels", 2, "grade", "integer >= 0, got -1"),
    case("qrels-fraction-grade", {"l.qrels": "q1 0 d1 1.5\n"},
         lambda d: read_trec_qrels(d / "l.qrels"), "l.qrels", 1, "grade", "got '1.5'"),
    case("qrels-word-grade", {"l.qrels": "q1 0 d1 1\n\nq1 0 d2 x\n"},
         lambda d: read_trec_qrels(d / "l.qrels"), "l.qrels", 3, "grade", "got 'x'"),
    case("qrels-too-few-columns", {"l.qrels": "q1 0 d1 1\nq1 d2 1\n"},
         lambda d: read_trec_qrels(d / "l.qrels"), "l.qrels", 2, "grade", "expected 4"),
    case("qrels-conflicting-grades", {"l.qrels": "q1 0 d1 1\nq1 0 d1 2\n"},
         lambda d: read_trec_qrels(d / "l.qrels"), "l.qrels", 2, "grade", "disagrees with grade 1 on line 1"),
    # --- corpus and queries ---
    case("corpus-duplicate-id", {"c.jsonl": '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n'},
         lambda d: load_corpus(d / "c.jsonl"), "c.jsonl", 2, "_id", "duplicate corpus id"),
    case("corpus-missing-text", {"c.jsonl": '{"id": "d1", "title": "a"}\n'},
         lambda d: load_corpus(d / "c.jsonl"), "c.jsonl", 1, "text", "also accepted: contents"),
    case("queries-tsv-no-tab", {"q.tsv": "q1\tWhat?\nq2 Why?\n"},
         lambda d: read_queries(d / "q.tsv"), "q.tsv", 2, "text", "no tab"),
    # --- tables ---
    case("csv-missing-mapped-column", {"r.csv": "question,doc\nq1,d1\n"},
         lambda d: read_run_table(d / "r.csv", "r", {"question_id": "qid", "chunk_id": "doc"}),
         "r.csv", 1, "qid", "column 'qid' (for question_id) not found"),
    case("csv-missing-default-column", {"r.csv": "question_id,doc\nq1,d1\n"},
         lambda d: read_run_table(d / "r.csv", "r"), "r.csv", 1, "chunk_id", "not found"),
    case("csv-empty-question-id", {"r.csv": "qid,doc\nq1,d1\n,d2\n"},
         lambda d: read_run_table(d / "r.csv", "r", {"question_id": "qid", "chunk_id": "doc"}),
         "r.csv", 2, "qid", "id is empty", "row"),
    case("csv-rank-not-integer", {"r.csv": "question_id,chunk_id,rank\nq1,d1,1\nq1,d2,two\n"},
         lambda d: read_run_table(d / "r.csv", "r"), "r.csv", 2, "rank", "rank must be an integer", "row"),
    case("csv-duplicate-chunk", {"r.csv": "question_id,chunk_id\nq1,d1\nq2,d1\nq1,d1\n"},
         lambda d: read_run_table(d / "r.csv", "r"), "r.csv", 3, "chunk_id", "first in row 1", "row"),
    case("csv-grade-negative", {"l.csv": "question_id,chunk_id,grade\nq1,d1,2\nq1,d2,-3\n"},
         lambda d: read_qrels_table(d / "l.csv"), "l.csv", 2, "grade", "got -3", "row"),
    case("csv-header-only", {"r.csv": "question_id,chunk_id\n"},
         lambda d: read_run_table(d / "r.csv", "r"), "r.csv", None, None, "file is empty"),
    case("csv-unknown-mapping-key", {"r.csv": "question_id,chunk_id\nq1,d1\n"},
         lambda d: read_run_table(d / "r.csv", "r", {"doc": "chunk_id"}), "r.csv", None, "doc",
         "unknown column-mapping key"),
    case("csv-invalid-utf8", {"r.csv": b"question_id,chunk_id\nq1,d1\nq1,d\xe92\n"},
         lambda d: read_run_table(d / "r.csv", "r"), "r.csv", 3, None, "invalid UTF-8"),
    case("tsv-questions-differ", {"q.tsv": "question_id\tquestion\tchunk_id\nq1\tWhat?\td1\nq1\tWhy?\td2\n"},
         lambda d: load_questions(d / "q.tsv", columns={}), "q.tsv", 2, "question", "differs from row 1", "row"),
    # --- format detection and loading ---
    case("unknown-extension", {"r.xml": "<run/>\n"},
         lambda d: load_run(d / "r.xml"), "r.xml", None, "format", "cannot tell the format"),
    case("unknown-format-name", {"r.trec": RUN},
         lambda d: load_run(d / "r.trec", format="xml"), "r.trec", None, "format", "unknown run format 'xml'"),
    case("file-not-found", {},
         lambda d: load_qrels(d / "missing.qrels"), "missing.qrels", None, None, "file not found"),
    case("run-unknown-question", {"q.jsonl": Q1, "r.trec": RUN + "q1 Q0 d2 2 1.0 t\nq9 Q0 d1 1 1.0 t\n"},
         lambda d: load_dataset(d / "q.jsonl", runs={"bm25": d / "r.trec"}), "r.trec", 3, "qid",
         "run 'bm25' ranks question 'q9'"),
    case("run-jsonl-unknown-question",
         {"q.jsonl": Q1, "r.jsonl": '{"id": "q1", "contexts": []}\n{"id": "q2", "contexts": []}\n'},
         lambda d: load_dataset(d / "q.jsonl", runs={"dense": d / "r.jsonl"}), "r.jsonl", 2, "id",
         "ranks question 'q2'"),
    case("run-table-unknown-question", {"q.jsonl": Q1, "r.csv": "qid,doc\nq1,d1\nq5,d1\n"},
         lambda d: load_dataset(d / "q.jsonl", runs={"t": d / "r.csv"},
                                columns={"question_id": "qid", "chunk_id": "doc"}),
         "r.csv", 2, "qid", "ranks question 'q5'", "row"),
    case("inline-label-disagrees-with-qrels",
         {"q.jsonl": '{"id": "q1", "question": "?", "labels": {"d1": 2}}\n', "l.qrels": "q1 0 d1 1\n"},
         lambda d: load_dataset(d / "q.jsonl", qrels=d / "l.qrels"), "l.qrels", None, "grade", "disagrees"),
    case("run-name-clash", {"q.jsonl": '{"id": "q1", "question": "?", "contexts": ["a"]}\n', "r.trec": RUN},
         lambda d: load_dataset(d / "q.jsonl", runs={"contexts": d / "r.trec"}), "r.trec", None, "name",
         "two runs are named 'contexts'"),
    # --- scores must be finite numbers (NaN and infinities cannot be ranked or averaged) ---
    case("trec-score-nan", {"r.trec": RUN + "q1 Q0 d2 2 nan t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "score", "finite number, got 'nan'"),
    case("trec-score-inf", {"r.trec": "q1 Q0 d2 1 -inf t\n"},
         lambda d: load_run(d / "r.trec"), "r.trec", 1, "score", "finite number, got '-inf'"),
    case("trec-score-infinity-word", {"r.trec": RUN + "q1 Q0 d2 2 Infinity t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "score", "finite number"),
    case("jsonl-score-nan", {"r.jsonl": '{"id": "q1", "contexts": [{"id": "c1", "score": NaN}]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.0.score", "finite number, got nan"),
    case("jsonl-score-infinity",
         {"q.jsonl": '{"id": "q1", "question": "?", "contexts": ["a", {"id": "c1", "score": -Infinity}]}\n'},
         lambda d: load_dataset(d / "q.jsonl"), "q.jsonl", 1, "contexts.1.score", "finite number, got -inf"),
    case("jsonl-score-overflows-float",  # 1e400 as an integer: float() raised OverflowError
         {"r.jsonl": '{"id": "q1", "contexts": [{"id": "c1", "score": 1' + "0" * 400 + '}]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.0.score", "finite number, got 1000"),
    case("jsonl-score-exponent-overflow", {"r.jsonl": '{"id": "q1", "contexts": [{"id": "c1", "score": 1e999}]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.0.score", "finite number, got inf"),
    case("csv-score-nan", {"r.csv": "question_id,chunk_id,score\nq1,d1,1.5\nq1,d2,NaN\n"},
         lambda d: load_run(d / "r.csv"), "r.csv", 2, "score", "finite number, got 'NaN'", "row"),
    case("tsv-score-inf", {"r.tsv": "qid\tdoc\tsim\nq1\td1\tinf\n"},
         lambda d: load_run(d / "r.tsv", columns={"question_id": "qid", "chunk_id": "doc", "score": "sim"}),
         "r.tsv", 1, "sim", "finite number, got 'inf'", "row"),
    case("questions-csv-score-inf", {"q.csv": "question_id,question,chunk_id,score\nq1,?,d1,-Infinity\n"},
         lambda d: load_dataset(d / "q.csv"), "q.csv", 1, "score", "finite number", "row"),
    # --- ranks are integers >= 1 (the TREC rank column orders the ranking; 0 or -1 is nonsense) ---
    case("trec-rank-zero", {"r.trec": RUN + "q1 Q0 d2 0 1.0 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "rank", "integer >= 1, got 0"),
    case("trec-rank-negative", {"r.trec": "q1 Q0 d2 -3 1.0 t\n"},
         lambda d: load_run(d / "r.trec"), "r.trec", 1, "rank", "integer >= 1, got -3"),
    case("trec-rank-fraction", {"r.trec": RUN + "q1 Q0 d2 1.5 1.0 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "rank", "integer >= 1, got '1.5'"),
    case("trec-rank-nan", {"r.trec": RUN + "q1 Q0 d2 nan 1.0 t\n"},
         lambda d: read_trec_run(d / "r.trec"), "r.trec", 2, "rank", "integer >= 1, got 'nan'"),
    case("csv-rank-zero", {"r.csv": "question_id,chunk_id,rank\nq1,d1,1\nq1,d2,0\n"},
         lambda d: load_run(d / "r.csv"), "r.csv", 2, "rank", "integer >= 1, got 0", "row"),
    case("tsv-rank-negative", {"r.tsv": "qid\tdoc\tpos\nq1\td1\t-1\n"},
         lambda d: load_run(d / "r.tsv", columns={"question_id": "qid", "chunk_id": "doc", "rank": "pos"}),
         "r.tsv", 1, "pos", "integer >= 1, got -1", "row"),
    case("csv-rank-missing", {"r.csv": "question_id,chunk_id,rank\nq1,d1,1\nq1,d2,\n"},
         lambda d: load_run(d / "r.csv"), "r.csv", 2, "rank", "integer >= 1, got missing", "row"),
    # --- chunk texts must not be empty (an empty text cannot be judged) ---
    case("corpus-jsonl-empty-text", {"c.jsonl": '{"id": "d1", "text": "one"}\n{"id": "d2", "text": ""}\n'},
         lambda d: load_corpus(d / "c.jsonl"), "c.jsonl", 2, "text", "chunk text is empty"),
    case("corpus-jsonl-blank-contents", {"c.jsonl": '{"id": "d1", "contents": " \\t\\n "}\n'},
         lambda d: load_corpus(d / "c.jsonl"), "c.jsonl", 1, "contents", "chunk text is empty"),
    case("corpus-tsv-empty-text", {"c.tsv": "d1\tone\nd2\t\n"},
         lambda d: load_corpus(d / "c.tsv"), "c.tsv", 2, "text", "chunk text is empty"),
    case("corpus-tsv-blank-text", {"c.tsv": "id\ttext\nd1\t   \ttitle\n"},
         lambda d: load_corpus(d / "c.tsv"), "c.tsv", 2, "text", "chunk text is empty"),
    case("jsonl-context-empty-string", {"q.jsonl": '{"id": "q1", "question": "?", "contexts": ["a", ""]}\n'},
         lambda d: load_dataset(d / "q.jsonl"), "q.jsonl", 1, "contexts.1", "chunk text is empty"),
    case("jsonl-context-blank-text",
         {"r.jsonl": '{"id": "q1", "contexts": [{"id": "c1", "text": "  "}]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.0.text", "chunk text is empty"),
    case("jsonl-context-text-not-string",
         {"r.jsonl": '{"id": "q1", "contexts": [{"id": "c1", "text": 5}]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.0.text", "must be a string, got a number"),
    case("ragas-empty-context",
         {"r.jsonl": '{"user_input": "?", "retrieved_contexts": ["a", "\\n"]}\n'},
         lambda d: load_dataset(d / "r.jsonl"), "r.jsonl", 1, "retrieved_contexts.1", "chunk text is empty"),
    case("csv-text-blank", {"r.csv": "question_id,chunk_id,text\nq1,d1,one\nq1,d2,\"   \"\n"},
         lambda d: load_run(d / "r.csv"), "r.csv", 2, "text", "chunk text is empty", "row"),
    case("questions-tsv-text-blank", {"q.tsv": "question_id\tquestion\tchunk_id\tpassage\nq1\t?\td1\t \n"},
         lambda d: load_dataset(d / "q.tsv", columns={"text": "passage"}), "q.tsv", 1, "passage",
         "chunk text is empty", "row"),
    # --- grades: integers >= 0; NaN, infinities and fractions are errors ---
    case("qrels-grade-nan", {"l.qrels": "q1 0 d1 1\nq1 0 d2 nan\n"},
         lambda d: load_qrels(d / "l.qrels"), "l.qrels", 2, "grade", "got 'nan'"),
    case("qrels-grade-inf", {"l.qrels": "q1 0 d1 inf\n"},
         lambda d: load_qrels(d / "l.qrels"), "l.qrels", 1, "grade", "got 'inf'"),
    case("qrels-jsonl-grade-nan", {"l.jsonl": '{"qid": "q1", "doc_id": "d1", "grade": NaN}\n'},
         lambda d: load_qrels(d / "l.jsonl"), "l.jsonl", 1, "grade", "got nan"),
    case("qrels-jsonl-grade-infinity", {"l.jsonl": '{"qid": "q1", "doc_id": "d1", "relevance": Infinity}\n'},
         lambda d: load_qrels(d / "l.jsonl"), "l.jsonl", 1, "relevance", "got inf"),
    case("label-empty-chunk-id", {"q.jsonl": '{"id": "q1", "question": "?", "labels": {"c1": 1, " ": 2}}\n'},
         lambda d: load_dataset(d / "q.jsonl"), "q.jsonl", 1, "labels. ", "id is empty"),
    case("label-nan", {"q.jsonl": '{"id": "q1", "question": "?", "labels": {"c1": NaN}}\n'},
         lambda d: load_dataset(d / "q.jsonl"), "q.jsonl", 1, "labels.c1", "got nan"),
    case("csv-grade-inf", {"l.csv": "question_id,chunk_id,grade\nq1,d1,inf\n"},
         lambda d: load_qrels(d / "l.csv"), "l.csv", 1, "grade", "got 'inf'", "row"),
    case("csv-grade-fraction", {"l.csv": "question_id,chunk_id,grade\nq1,d1,2.5\n"},
         lambda d: load_qrels(d / "l.csv"), "l.csv", 1, "grade", "got '2.5'", "row"),
    # --- JSON nested deeper than Python's parser can go (it raised RecursionError) ---
    case("jsonl-nested-too-deeply",
         {"r.jsonl": '{"id": "q1", "contexts": []}\n{"id": "q2", "x": ' + "[" * 100000 + "\n"},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 2, None, "nested too deeply"),
    case("json-array-nested-too-deeply", {"r.json": "[\n" + "[" * 100000 + "\n"},
         lambda d: load_run(d / "r.json"), "r.json", 2, None, "nested too deeply"),
    # --- every data row one field wider than the header: pandas made the first column the index and
    # shifted the others, so question ids were read as chunk ids, silently ---
    case("csv-trailing-comma-on-every-row", {"r.csv": "question_id,chunk_id\nq1,d1,\nq1,d2,\n"},
         lambda d: load_run(d / "r.csv"), "r.csv", 1, None, "3 fields but the header has 2", "row"),
    case("tsv-extra-field-on-every-row", {"l.tsv": "question_id\tchunk_id\tgrade\n\nq1\td1\t1\tx\nq1\td2\t0\ty\n"},
         lambda d: load_qrels(d / "l.tsv"), "l.tsv", 1, None, "a trailing tab", "row"),
    # --- a lone UTF-16 surrogate escape is not text (it raised UnicodeEncodeError when hashed) ---
    case("jsonl-lone-surrogate-context", {"r.jsonl": '{"id": "q1", "contexts": ["ok", "a\\ud800b"]}\n'},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, "contexts.1", "lone UTF-16 surrogate"),
    case("json-array-lone-surrogate-user-input",
         {"r.json": '[{"user_input": "x", "retrieved_contexts": ["a"]},\n'
                    ' {"user_input": "\\udc00", "retrieved_contexts": ["a"]}]\n'},
         lambda d: load_dataset(d / "r.json"), "r.json", 2, "user_input", "lone UTF-16 surrogate"),
    case("corpus-lone-surrogate-id", {"c.jsonl": '{"id": "d\\udfff", "text": "x"}\n'},
         lambda d: load_corpus(d / "c.jsonl"), "c.jsonl", 1, "id", "lone UTF-16 surrogate"),
    case("invalid-utf8-and-deep-nesting",
         {"r.jsonl": b'{"id": "q1", "x": "\xff", "contexts": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"},
         lambda d: load_run(d / "r.jsonl"), "r.jsonl", 1, None, "invalid UTF-8"),
]


def _write(d: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        data = content.encode("utf-8") if isinstance(content, str) else content
        (d / name).write_bytes(data)


@pytest.mark.parametrize("files, call, file, line, field, fragment, kind", CASES)
def test_bad_input_names_file_line_and_field(tmp_path, files, call, file, line, field, fragment, kind):
    _write(tmp_path, files)
    with pytest.raises(InputError) as info:
        call(tmp_path)
    err = info.value
    message = str(err)
    assert err.path is not None and Path(err.path).name == file
    assert err.line == line
    assert err.field == field
    assert err.kind == kind
    assert fragment in message
    assert str(tmp_path / file) in message
    if line is not None:
        assert f"{kind} {line}" in message
    if field is not None:
        assert f"field '{field}'" in message


def test_parquet_null_question_id_names_row_and_column(tmp_path):
    path = tmp_path / "r.parquet"
    pd.DataFrame({"qid": ["q1", None, "q2"], "doc": ["d1", "d2", "d3"]}).to_parquet(path)
    with pytest.raises(InputError) as info:
        read_run_table(path, "r", {"question_id": "qid", "chunk_id": "doc"})
    assert (info.value.line, info.value.kind, info.value.field) == (2, "row", "qid")
    assert "got missing" in str(info.value)


def test_writer_error_leaves_no_file(tmp_path):
    out = tmp_path / "out.jsonl"
    run = Run(name="r", rankings={"q9": [Chunk(id="c1")]})
    with pytest.raises(InputError, match="q9"):
        write_questions_jsonl({"q1": Question(id="q1", question="?")}, out, run=run)
    assert list(tmp_path.iterdir()) == []


def test_trec_writer_rejects_whitespace_ids_and_keeps_old_file(tmp_path):
    out = tmp_path / "r.trec"
    out.write_text("old\n")
    run = Run(name="r", rankings={"q1": [Chunk(id="d1"), Chunk(id="d 2")]})
    with pytest.raises(InputError) as info:
        write_trec_run(run, out)
    assert info.value.field == "docid"
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.trec"]


@pytest.mark.parametrize("run_file, content", [
    ("r.trec", RUN + "q1 Q0 d7 2 1.0 t\n"),
    ("r.jsonl", '{"id": "q1", "contexts": [{"id": "d1"}, {"id": "d7"}]}\n'),
    ("r.csv", "question_id,chunk_id\nq1,d1\nq1,d7\n"),
])
def test_chunk_missing_from_the_corpus_names_both_files(tmp_path, run_file, content):
    # The run names the chunk, the corpus lacks it: either file may be the wrong one.
    _write(tmp_path, {run_file: content, "c.jsonl": '{"id": "d1", "text": "one"}\n'})
    with pytest.raises(InputError) as info:
        load_dataset(runs={"r": tmp_path / run_file}, corpus=tmp_path / "c.jsonl")
    assert info.value.path == str(tmp_path / run_file)
    assert f"'d7' is not in the corpus {tmp_path / 'c.jsonl'}" in str(info.value)
