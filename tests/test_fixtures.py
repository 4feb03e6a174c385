"""Structure of the committed fixtures (fixtures/clapnq, fixtures/bank_faq).

Plain-Python parsing on purpose (json, str.split): these tests check the files themselves, not
the package's readers, so a reader bug cannot hide a fixture bug or the other way round.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAPNQ = FIXTURES / "clapnq"
BANK = FIXTURES / "bank_faq"
RUN_NAMES = ("bm25", "dense", "hybrid")
TOP_K = 20


# --- plain parsers ---------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """qid -> chunk id -> grade; asserts the 4-column format and no duplicate pairs."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for line in read_lines(path):
        cols = line.split()
        assert len(cols) == 4, line
        qid, it, cid, grade = cols
        assert it == "0", line
        assert cid not in out[qid], f"duplicate qrels pair: {line}"
        out[qid][cid] = int(grade)
    return dict(out)


def read_run(path: Path, tag: str) -> dict[str, list[tuple[str, int, float]]]:
    """qid -> [(chunk id, rank, score)] in file order; asserts the 6-column format and tag."""
    out: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
    for line in read_lines(path):
        cols = line.split()
        assert len(cols) == 6, line
        qid, q0, cid, rank, score, name = cols
        assert q0 == "Q0" and name == tag, line
        out[qid].append((cid, int(rank), float(score)))
    return dict(out)


def check_ranking(qid: str, rows: list[tuple[str, int, float]], k: int) -> None:
    ids = [c for c, _, _ in rows]
    assert len(ids) == k, f"{qid}: {len(ids)} lines, expected {k}"
    assert len(set(ids)) == k, f"{qid}: repeated chunk id"
    assert [r for _, r, _ in rows] == list(range(1, k + 1)), f"{qid}: ranks not 1..{k} in order"
    scores = [s for _, _, s in rows]
    assert all(a > b for a, b in pairwise(scores)), f"{qid}: scores not strictly decreasing"


# --- clapnq ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clap() -> dict:
    return {
        "questions": read_jsonl(CLAPNQ / "questions.jsonl"),
        "corpus": read_jsonl(CLAPNQ / "corpus.jsonl"),
        "qrels": read_qrels(CLAPNQ / "qrels.txt"),
        "qrels_lines": read_lines(CLAPNQ / "qrels.txt"),
        "runs": {n: read_run(CLAPNQ / "runs" / f"{n}.trec", n) for n in RUN_NAMES},
        "run_lines": {n: read_lines(CLAPNQ / "runs" / f"{n}.trec") for n in RUN_NAMES},
    }


def test_clapnq_questions(clap: dict) -> None:
    qs = clap["questions"]
    assert len(qs) == 300
    assert len({q["id"] for q in qs}) == 300
    for q in qs:
        assert set(q) == {"id", "question", "reference", "metadata"}, q["id"]
        assert isinstance(q["id"], str) and q["id"]
        assert isinstance(q["question"], str) and q["question"].strip()
        assert isinstance(q["reference"], str) and q["reference"].strip()
        assert "\r" not in q["reference"]
        assert q["metadata"]["reference_round"] in (1, 2)


def test_clapnq_corpus(clap: dict) -> None:
    corpus = clap["corpus"]
    assert len(corpus) == 4989
    assert len({c["id"] for c in corpus}) == len(corpus)
    by_passage: dict[str, list[int]] = defaultdict(list)
    for c in corpus:
        assert set(c) == {"id", "text", "metadata"}
        meta = c["metadata"]
        assert set(meta) == {"passage_id", "title", "sentence"}
        assert c["id"] == f"{meta['passage_id']}#s{meta['sentence']}"
        assert isinstance(c["text"], str) and c["text"].strip()
        by_passage[meta["passage_id"]].append(meta["sentence"])
    assert len(by_passage) == 597
    for pid, idx in by_passage.items():
        assert idx == list(range(len(idx))), f"passage {pid}: sentences not 0..n-1 in order"
    # every question's gold passage is in the corpus
    for q in clap["questions"]:
        assert q["metadata"]["passage_id"] in by_passage


def test_clapnq_qrels(clap: dict) -> None:
    qrels = clap["qrels"]
    qids = {q["id"] for q in clap["questions"]}
    corpus_ids = {c["id"] for c in clap["corpus"]}
    assert set(qrels) == qids
    grades = Counter(g for by in qrels.values() for g in by.values())
    assert set(grades) <= {0, 1, 2}
    assert grades == Counter({2: 765, 1: 128, 0: 1141})
    sentences_of: dict[str, set[str]] = defaultdict(set)
    for c in clap["corpus"]:
        sentences_of[c["metadata"]["passage_id"]].add(c["id"])
    for q in clap["questions"]:
        labelled = set(qrels[q["id"]])
        assert labelled <= corpus_ids
        # every sentence of the gold passage is labelled (explicit 0s), nothing else is
        assert labelled == sentences_of[q["metadata"]["passage_id"]], q["id"]
    with_positive = sum(any(g > 0 for g in by.values()) for by in qrels.values())
    assert with_positive == 299  # one question's annotators selected no sentence


@pytest.mark.parametrize("name", RUN_NAMES)
def test_clapnq_runs(clap: dict, name: str) -> None:
    run = clap["runs"][name]
    corpus_ids = {c["id"] for c in clap["corpus"]}
    assert set(run) == {q["id"] for q in clap["questions"]}
    for qid, rows in run.items():
        check_ranking(qid, rows, TOP_K)
        assert {c for c, _, _ in rows} <= corpus_ids, qid
    # lines of one question are contiguous
    qid_order = [line.split()[0] for line in clap["run_lines"][name]]
    assert sum(1 for a, b in pairwise(qid_order) if a != b) == 299


def test_clapnq_runs_differ(clap: dict) -> None:
    top = {n: [[c for c, _, _ in clap["runs"][n][q["id"]]] for q in clap["questions"]] for n in RUN_NAMES}
    assert top["bm25"] != top["dense"] != top["hybrid"] != top["bm25"]


def test_clapnq_mini_is_a_consistent_subset(clap: dict) -> None:
    mini = CLAPNQ / "mini"
    mq = read_jsonl(mini / "questions.jsonl")
    assert mq == clap["questions"][:20]
    keep = {q["id"] for q in mq}

    mqrels_lines = read_lines(mini / "qrels.txt")
    assert mqrels_lines == [ln for ln in clap["qrels_lines"] if ln.split()[0] in keep]
    mentioned = {ln.split()[2] for ln in mqrels_lines}
    for name in RUN_NAMES:
        lines = read_lines(mini / "runs" / f"{name}.trec")
        assert lines == [ln for ln in clap["run_lines"][name] if ln.split()[0] in keep]
        assert len(lines) == 20 * TOP_K
        mentioned |= {ln.split()[2] for ln in lines}

    mcorpus = read_jsonl(mini / "corpus.jsonl")
    # exactly the chunks the mini runs and qrels mention, rows identical and in full-corpus order
    assert [c["id"] for c in mcorpus] == [c["id"] for c in clap["corpus"] if c["id"] in mentioned]
    full = {c["id"]: c for c in clap["corpus"]}
    assert all(full[c["id"]] == c for c in mcorpus)


def test_clapnq_licence_and_credit() -> None:
    assert "Apache License" in (CLAPNQ / "LICENSE").read_text(encoding="utf-8")
    readme = (CLAPNQ / "README.md").read_text(encoding="utf-8")
    for needle in ("2404.02103", "primeqa/clapnq", "eb26840d130f4dcf4c4c5c12a47d0beffc9cc586",
                   "Natural Questions", "Wikipedia", "build_clapnq_fixture.py"):
        assert needle in readme


# --- bank_faq --------------------------------------------------------------------------------

SEED_RANKING = ["c7", "c2", "c9", "c4", "c1"]
SEED_GRADES = {"c2": 2, "c4": 1, "c8": 1}
QUESTION = "What is the foreclosure charge on a home loan?"


def test_bank_faq_matches_seed() -> None:
    qs = read_jsonl(BANK / "questions.jsonl")
    assert len(qs) == 1 and qs[0]["id"] == "q1" and qs[0]["question"] == QUESTION
    corpus = {c["id"]: c["text"] for c in read_jsonl(BANK / "corpus.jsonl")}
    assert set(corpus) == {"c1", "c2", "c4", "c7", "c8", "c9"}
    assert read_qrels(BANK / "qrels.txt") == {"q1": SEED_GRADES}
    run = read_run(BANK / "runs" / "dense.trec", "dense")
    assert set(run) == {"q1"}
    check_ranking("q1", run["q1"], 5)
    assert [c for c, _, _ in run["q1"]] == SEED_RANKING

    (data,) = read_jsonl(BANK / "data.jsonl")
    assert data["id"] == "q1" and data["question"] == QUESTION
    assert data["reference"] == qs[0]["reference"]
    assert data["labels"] == SEED_GRADES
    assert [c["id"] for c in data["contexts"]] == SEED_RANKING
    assert all(c["text"] == corpus[c["id"]] for c in data["contexts"])
    # the reference has exactly three statements (sentences), as the README's judged values assume
    assert len([s for s in data["reference"].split(". ") if s.strip()]) == 3


def test_bank_faq_reproduces_seed_numbers() -> None:
    """The seed's own formulas on the files give the seed's published values."""
    ranked = [c for c, _, _ in read_run(BANK / "runs" / "dense.trec", "dense")["q1"]]
    grades = read_qrels(BANK / "qrels.txt")["q1"]
    relevant = {c for c, g in grades.items() if g > 0}
    k = 5
    assert any(c in relevant for c in ranked[:k])  # hit rate@5 = 1
    assert len(set(ranked[:k]) & relevant) / len(relevant) == pytest.approx(2 / 3)
    assert len(set(ranked[:k]) & relevant) / k == pytest.approx(0.4)
    assert next(1 / r for r, c in enumerate(ranked, 1) if c in relevant) == 0.5
    dcg = sum(grades.get(c, 0) / math.log2(i + 2) for i, c in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    ndcg = dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    assert ndcg == pytest.approx(0.5406, abs=5e-5)
    assert round(ndcg, 2) == 0.54
