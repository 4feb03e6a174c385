"""The numbers behind the report's sections, computed from a :class:`ReportSource` (and a
baseline): plain lists and dicts that the HTML and Markdown renderers only format, so the tests
check every number here once.

- :func:`movers`: the questions whose metric moved most between a baseline and the current
  results (same run name, same question id);
- :func:`statement_gaps`: the reference statements that no run's top k supports (a corpus gap),
  and those that some run's top k supports but another's does not (a retriever gap);
- :func:`agreement_points`: judged vs human metric per (run, question), for the scatter plot;
- :func:`ranked_chunks`: a run's judged top k for one question, with grades and evidence.
"""

from __future__ import annotations

import math
from typing import Any

from judge_eval.report.source import ReportSource

__all__ = ["agreement_points", "default_metric", "movers", "question_texts", "ranked_chunks", "statement_gaps",
           "statement_texts"]

#: the measure families the report prefers, in order, for "the" metric of a section
PREFERRED = ("context_recall", "recall", "context_precision", "judge_ndcg", "ndcg")


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _k_of(measure: str) -> int:
    _, _, k = measure.partition("@")
    return int(k) if k.isdigit() else 0


def default_metric(measures: list[str]) -> str | None:
    """The measure a section shows when none is asked for: the first family of
    :data:`PREFERRED` present, at its largest k; else the first measure."""
    for family in PREFERRED:
        found = [m for m in measures if m.split("@")[0] == family]
        if found:
            return max(found, key=_k_of)
    return measures[0] if measures else None


def question_texts(src: ReportSource) -> dict[str, str]:
    """question id -> question text (from the verdicts; empty when the folder has none)."""
    out: dict[str, str] = {}
    if "question" in src.verdicts.columns:
        for qid, text in zip(src.verdicts["question_id"], src.verdicts["question"], strict=True):
            if isinstance(text, str):
                out.setdefault(str(qid), text)
    return out


def movers(current: ReportSource, baseline: ReportSource, *, metric: str | None = None,
           limit: int = 15) -> dict[str, Any]:
    """The (run, question) pairs whose ``metric`` changed most from ``baseline`` to ``current``.

    Runs are matched by name; when the two folders share no run name but each has exactly one
    run, those two are compared. Questions are matched by id; a pair where either value is
    missing is left out (counted in ``missing``). Rows are sorted by |change|, largest first
    (ties: drops first, then run order, then question order of the current folder); at most
    ``limit``.

    Returns ``metric``, ``pairs`` ([current run, baseline run]), ``compared`` (pairs with both
    values), ``missing``, ``moved`` (pairs whose value changed), ``up``, ``down`` and ``rows``
    ([{run, baseline_run, question_id, question, baseline, current, delta}])."""
    cur_runs, base_runs = current.runs, baseline.runs
    pairs = [(r, r) for r in cur_runs if r in base_runs]
    if not pairs and len(cur_runs) == 1 and len(base_runs) == 1:
        pairs = [(cur_runs[0], base_runs[0])]
    shared = [m for m in current.per_question.columns if m in baseline.per_question.columns
              and m not in ("run", "question_id")]
    if metric is None:
        metric = default_metric([m for m in current.measures if m in shared] or shared)
    out: dict[str, Any] = {"metric": metric, "pairs": [list(p) for p in pairs], "compared": 0, "missing": 0,
                           "moved": 0, "up": 0, "down": 0, "rows": []}
    if metric is None or metric not in shared or not pairs:
        return out
    texts = {**question_texts(baseline), **question_texts(current)}
    rows = []
    for order, (run, base_run) in enumerate(pairs):
        cur = current.per_question[current.per_question["run"].astype(str) == run]
        base = baseline.per_question[baseline.per_question["run"].astype(str) == base_run]
        base_values = dict(zip(base["question_id"].astype(str), base[metric], strict=True))
        for q_order, (qid, value) in enumerate(zip(cur["question_id"].astype(str), cur[metric], strict=True)):
            if qid not in base_values:
                continue
            c, b = _num(value), _num(base_values[qid])
            if c is None or b is None:
                out["missing"] += 1
                continue
            out["compared"] += 1
            delta = c - b
            if delta != 0:
                out["moved"] += 1
                out["up" if delta > 0 else "down"] += 1
                # rounded: 0.2 - 0.7 and 0.0 - 0.5 are the same change for a reader
                row = {"run": run, "baseline_run": base_run, "question_id": qid, "question": texts.get(qid, ""),
                       "baseline": b, "current": c, "delta": delta}
                rows.append((-round(abs(delta), 12), round(delta, 12), order, q_order, row))
    rows.sort(key=lambda t: t[:4])
    out["rows"] = [r for *_, r in rows[:limit]]
    return out


def _statement_texts(src: ReportSource) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    st = src.statements
    if st.empty or "statement" not in st.columns:
        return out
    errors = st["error"] if "error" in st.columns else [None] * len(st)
    for qid, num, text, err in zip(st["question_id"], st["statement"], st["text"], errors, strict=True):
        n = _num(num)
        if n is None or (isinstance(err, str) and err):
            continue
        out.setdefault(str(qid), []).append((int(n), str(text) if text is not None else ""))
    return out


def statement_gaps(src: ReportSource, *, k: int | None = None) -> dict[str, Any]:
    """Which reference statements each run's top ``k`` supports (default: the largest judged k),
    and, for those it does not, whether another run's does.

    A statement is *supported in run r* when a chunk of r's top k supports it with verified
    evidence (``supported`` in ``verdicts.jsonl``). Per statement:

    - **retriever gap** (for run r): some other run's top k supports it, r's does not: the
      corpus holds it and r fails to rank it; fix the retriever;
    - **corpus gap**: no chunk in the judged pool (every run's top k) supports it: the corpus
      may not hold it at all (or every retriever misses it); check the corpus first;
    - **unknown**: a judge call on a chunk that could decide it failed (for r: one in r's top
      k; for a corpus gap: one anywhere in the pool).

    Returns ``k``, ``runs``, ``statements`` (how many were checked), ``questions``,
    ``per_run`` ({run: {supported, retriever_gap, corpus_gap, unknown}}), ``corpus`` (the corpus
    gaps: [{question_id, question, statement, text}]), ``retriever`` ([{question_id, question,
    statement, text, missed_by: [runs], found_by: {run: best rank}}]) and ``unknown``."""
    ks = src.ks
    k = k or (max(ks) if ks else None)
    runs = src.runs
    out: dict[str, Any] = {"k": k, "runs": runs, "statements": 0, "questions": 0,
                           "per_run": {r: {"supported": 0, "retriever_gap": 0, "corpus_gap": 0, "unknown": 0}
                                       for r in runs},
                           "corpus": [], "retriever": [], "unknown": []}
    statements = _statement_texts(src)
    v = src.verdicts
    if k is None or not statements or v.empty or "runs" not in v.columns:
        return out
    texts = question_texts(src)
    found: dict[str, dict[int, dict[str, int]]] = {}
    errored: dict[str, set[str]] = {}
    has_error = v["error"].notna() & (v["error"].astype(str) != "") if "error" in v.columns else [False] * len(v)
    for qid, ranks, supported, err in zip(v["question_id"], v["runs"], v["supported"], has_error, strict=True):
        qid = str(qid)
        in_top = {str(r): int(rank) for r, rank in (ranks or {}).items() if int(rank) <= k}
        if not in_top:
            continue
        if err:
            errored.setdefault(qid, set()).update(in_top)
            continue
        for s in supported or []:
            by_run = found.setdefault(qid, {}).setdefault(int(s), {})
            for r, rank in in_top.items():
                by_run[r] = min(rank, by_run.get(r, rank))
    for qid, items in statements.items():
        out["questions"] += 1
        for num, text in items:
            out["statements"] += 1
            where = found.get(qid, {}).get(num, {})
            row = {"question_id": qid, "question": texts.get(qid, ""), "statement": num, "text": text}
            if not where:
                kind = "unknown" if errored.get(qid) else "corpus_gap"
                for r in runs:
                    out["per_run"][r][kind] += 1
                (out["unknown"] if kind == "unknown" else out["corpus"]).append(row)
                continue
            missed = []
            for r in runs:
                if r in where:
                    out["per_run"][r]["supported"] += 1
                elif r in errored.get(qid, set()):
                    out["per_run"][r]["unknown"] += 1
                else:
                    out["per_run"][r]["retriever_gap"] += 1
                    missed.append(r)
            if missed:
                out["retriever"].append({**row, "missed_by": missed, "found_by": dict(sorted(where.items()))})
    return out


def agreement_points(src: ReportSource) -> dict[str, Any]:
    """Judged vs human value per (run, question) for each (judged, human) pair that the trust
    report's question level covers, at the largest k of each family; identical points are
    merged with a count. Returns ``pairs`` (["judged vs human"]) and ``points``
    ([{pair, run, human, judged, count}])."""
    trust = src.trust or {}
    rows = (trust.get("agreement") or {}).get("question") or []
    pq = src.per_question
    seen: dict[str, tuple[str, str]] = {}
    for r in rows:
        j, h = str(r.get("judged")), str(r.get("human"))
        if j in pq.columns and h in pq.columns:
            family = j.split("@")[0]
            best = seen.get(family)
            if best is None or _k_of(j) > _k_of(best[0]):
                seen[family] = (j, h)
    pairs, points = [], []
    for j, h in seen.values():
        label = f"{j} vs {h}"
        pairs.append(label)
        both = pq[["run", j, h]].dropna()
        counts = both.groupby(["run", h, j], sort=False).size()
        for (run, hv, jv), n in counts.items():
            points.append({"pair": label, "run": str(run), "human": float(hv), "judged": float(jv), "count": int(n)})
    return {"pairs": pairs, "points": points}


def ranked_chunks(src: ReportSource, question_id: str, run: str, k: int | None = None) -> list[dict[str, Any]]:
    """The chunks of ``run``'s judged top ``k`` (default: all judged) for one question, by rank:
    rank, chunk_id, chunk_text, grade, capped_grade, supported, evidence ({statement: quote}),
    reason, error."""
    v = src.verdicts
    if v.empty or "runs" not in v.columns:
        return []
    out = []
    for row in v[v["question_id"].astype(str) == str(question_id)].to_dict(orient="records"):
        rank = (row.get("runs") or {}).get(run)
        if rank is None or (k is not None and int(rank) > k):
            continue
        evidence = row.get("evidence") if isinstance(row.get("evidence"), dict) else {}
        err = row.get("error")
        out.append({"rank": int(rank), "chunk_id": str(row.get("chunk_id")), "chunk_text": row.get("chunk_text"),
                    "grade": _num(row.get("grade")), "capped_grade": _num(row.get("capped_grade")),
                    "supported": [int(s) for s in row.get("supported") or []],
                    "evidence": {str(s): str(q) for s, q in evidence.items()},
                    "reason": row.get("reason") if isinstance(row.get("reason"), str) else "",
                    "error": err if isinstance(err, str) and err else None})
    return sorted(out, key=lambda r: r["rank"])


def statement_texts(src: ReportSource, question_id: str) -> list[tuple[int, str]]:
    """The reference statements of one question: [(number, text)]."""
    return _statement_texts(src).get(str(question_id), [])

