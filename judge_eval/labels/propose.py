"""Label proposals: one item per judged (question, chunk) of a results folder, for people to review.

An item holds what a reviewer needs and nothing they must look up elsewhere: the question, the
reference statements, the chunk text, the judge's proposed grade (the capped grade: the label the
judge's verdict counts as in judged metrics), the statements it supports with their evidence
quotes and the quotes' offsets in the chunk, the reason, a confidence with its signals
(:mod:`judge_eval.labels.confidence`), and empty reviewer fields (``grade``, ``reviewer``,
``reviewed_at``, ``note``).

Everything comes from the results folder (``judge-eval score --out``): ``verdicts.jsonl`` (with
the question and chunk texts), ``statements.jsonl`` and ``summary.json``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from judge_eval.errors import ConfigError, InputError
from judge_eval.labels.confidence import confidence, signals
from judge_eval.labels.spans import locate
from judge_eval.report.folder import iter_jsonl, read_results_dir

__all__ = ["ORDERS", "Proposals", "item_id", "load_proposals"]

PathLike = str | os.PathLike
Order = Literal["uncertainty", "question", "run"]
ORDERS = ("uncertainty", "question", "run")
#: the reviewer fields every item carries, empty until someone reviews it
REVIEW_FIELDS = ("grade", "reviewer", "reviewed_at", "note")


def item_id(question_id: str, chunk_id: str) -> str:
    """The id of the item for (question, chunk): 16 hex digits of SHA-256 over both ids. The
    importer recomputes it, so an id that does not belong to its row is caught."""
    return hashlib.sha256(f"{question_id}\x00{chunk_id}".encode()).hexdigest()[:16]


@dataclass
class Proposals:
    """The items of one results folder, in the order asked for, and what they came from:
    ``judge`` (identity), ``approximate`` (the offline judge), ``runs`` (run names in order),
    ``samples`` (judge samples per chunk), ``source`` (the folder)."""

    items: list[dict[str, Any]]
    judge: str
    runs: list[str]
    samples: int = 1
    approximate: bool = False
    source: str = ""
    total: int = 0
    left_out_labelled: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def _statements(folder: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for _, row in iter_jsonl(folder / "statements.jsonl"):
        qid = str(row.get("question_id"))
        out.setdefault(qid, [])
        if row.get("statement") is not None:
            out[qid].append({"n": int(row["statement"]), "text": row.get("text") or ""})
    return out


def _evidence(row: dict[str, Any], chunk: str) -> list[dict[str, Any]]:
    out = []
    for n, quote in sorted((row.get("evidence") or {}).items(), key=lambda kv: int(kv[0])):
        spans = locate(str(quote), chunk)
        out.append({"statement": int(n), "quote": quote, "spans": [list(s) for s in spans]})
    return out


def _item(lineno: int, row: dict[str, Any], statements: dict[str, list[dict[str, Any]]], path: Path) -> dict[str, Any]:
    for key in ("question_id", "chunk_id"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise InputError("missing or not a string", path=path, line=lineno, field=key)
    for key in ("question", "chunk_text"):
        if not isinstance(row.get(key), str):
            raise InputError(
                f"no {key}: this folder was written by an older judge-eval that did not keep the texts; "
                "run the same `judge-eval score` again (cached answers cost nothing) to add them",
                path=path, line=lineno, field=key)
    qid, cid, chunk = row["question_id"], row["chunk_id"], row["chunk_text"]
    runs = {str(k): int(v) for k, v in (row.get("runs") or {}).items()}
    failed = bool(row.get("error")) or row.get("grade") is None
    proposed = None if failed else int(row["capped_grade"] if row.get("capped_grade") is not None else row["grade"])
    item: dict[str, Any] = {
        "id": item_id(qid, cid),
        "question_id": qid,
        "chunk_id": cid,
        "question": row["question"],
        "statements": statements.get(qid, []),
        "chunk_text": chunk,
        "runs": runs,
        "proposed_grade": proposed,
        "judge_grade": None if failed else int(row["grade"]),
        "supported": [] if failed else [int(n) for n in row.get("supported") or []],
        "evidence": [] if failed else _evidence(row, chunk),
        "reason": row.get("reason") if not failed else (row.get("error_message") or row.get("error")),
        "confidence": confidence(row),
        "signals": signals(row),
        "error": row.get("error"),
    }
    if row.get("sample_grades"):
        item["sample_grades"] = list(row["sample_grades"])
    item.update({k: None for k in REVIEW_FIELDS})
    return item


def _labelled(qrels: PathLike | None) -> set[tuple[str, str]]:
    if qrels is None:
        return set()
    from judge_eval.data.load import load_qrels

    return {(qid, cid) for qid, cid, _ in load_qrels(qrels)}


def _sort(items: list[dict[str, Any]], order: Order, runs: list[str]) -> list[dict[str, Any]]:
    q_order: dict[str, int] = {}
    for it in items:
        q_order.setdefault(it["question_id"], len(q_order))

    def best_rank(it: dict[str, Any]) -> int:
        return min(it["runs"].values(), default=10**9)

    if order == "uncertainty":
        return sorted(items, key=lambda it: (it["confidence"], -len(it["signals"]), q_order[it["question_id"]],
                                             best_rank(it), it["chunk_id"]))
    if order == "question":
        return sorted(items, key=lambda it: (q_order[it["question_id"]], best_rank(it), it["chunk_id"]))
    run_pos = {r: i for i, r in enumerate(runs)}

    def first_run(it: dict[str, Any]) -> tuple[int, int]:
        named = [(run_pos.get(r, len(run_pos)), rank) for r, rank in it["runs"].items()]
        return min(named, default=(len(run_pos), 10**9))

    return sorted(items, key=lambda it: (first_run(it)[0], q_order[it["question_id"]], first_run(it)[1],
                                         it["chunk_id"]))


def load_proposals(results: PathLike, *, order: Order = "uncertainty", limit: int | None = None,
                   only_unlabelled: bool = False, qrels: PathLike | None = None) -> Proposals:
    """The label proposals of a results folder.

    ``order``: ``uncertainty`` (lowest confidence first, then most signals; ties in question
    order), ``question`` (questions in the folder's order, chunks by their best rank in any run)
    or ``run`` (by the first run, in run order, that returned the chunk, then question, then
    rank in that run). ``limit``: keep the first N. ``only_unlabelled`` with ``qrels``: leave out
    the (question, chunk) pairs the qrels already grade.
    """
    if order not in ORDERS:
        raise ConfigError(f"unknown order {order!r}; choose one of {', '.join(ORDERS)}", option="--order")
    if only_unlabelled and qrels is None:
        raise ConfigError("--only-unlabelled needs --qrels PATH (the labels you already have)",
                          option="--only-unlabelled")
    if qrels is not None and not only_unlabelled:
        raise ConfigError("--qrels is only used with --only-unlabelled", option="--qrels")
    if limit is not None and limit < 1:
        raise ConfigError(f"must be >= 1, got {limit}", option="--limit")
    folder = Path(results)
    _, info = read_results_dir(folder)  # the folder's summary.json, checked
    statements = _statements(folder)
    labelled = _labelled(qrels)
    path = folder / "verdicts.jsonl"
    items = []
    total = skipped = 0
    for lineno, row in iter_jsonl(path):
        total += 1
        item = _item(lineno, row, statements, path)
        if (item["question_id"], item["chunk_id"]) in labelled:
            skipped += 1
            continue
        items.append(item)
    runs = list((info.get("dataset") or {}).get("runs") or [])
    items = _sort(items, order, runs)
    if limit is not None:
        items = items[:limit]
    return Proposals(
        items=items,
        judge=str(info["judge"].get("identity", "")),
        approximate=bool(info["judge"].get("approximate", False)),
        runs=runs,
        samples=int((info.get("settings") or {}).get("samples", 1) or 1),
        source=str(folder),
        total=total,
        left_out_labelled=skipped,
        meta={"fingerprint": (info.get("dataset") or {}).get("fingerprint")},
    )
