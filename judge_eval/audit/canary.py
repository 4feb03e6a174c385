"""The canary: human-labelled (question, chunk) pairs the judge re-judges every night, without
the cache, so a judge that changes (a provider silently swapping a model) is noticed.

The pairs (JSONL, one per line: ``question_id``, ``chunk_id``, ``grade`` (human, >= 0),
``text`` (the chunk), and ``question``/``reference`` unless the dataset has that question) are
judged as one run through :func:`judge_eval.evaluate` with ``cache_mode="off"``: every pair is
asked again, and nothing the canary hears is written to the cache the audit's runs read.
A pair is judge-relevant iff its capped grade is >= 2, human-relevant iff its grade is >= 1
(the defaults of ``evaluate``). The canary's statistic (``accuracy``: the share of pairs where
both agree on relevant/not; or ``cohen_kappa``) below its floor is **drift**: the audit exits 3.

The canary's calls count against the audit's budget: it gets what the runs left of it
(:func:`remaining_budget`); a canary cut short by the budget is ``partial``, and the audit then
exits 3 as for a budget reached by the runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from judge_eval.data.models import Chunk, Dataset, Question, Run
from judge_eval.errors import InputError
from judge_eval.metrics.agreement import cohen_kappa
from judge_eval.report.folder import iter_jsonl

if TYPE_CHECKING:
    from judge_eval.run import Budget

__all__ = ["CanaryPair", "CanaryResult", "load_pairs", "remaining_budget", "run_canary", "score_canary"]

JUDGE_RELEVANT = 2
HUMAN_RELEVANT = 1


@dataclass(frozen=True)
class CanaryPair:
    question_id: str
    chunk_id: str
    grade: int
    text: str
    question: str
    reference: str


def _field(row: Mapping[str, Any], name: str, kind: type, path: Path, line: int, fallback: Any = None) -> Any:
    """``row[name]`` (or ``fallback``): a non-empty string, or for ``int`` an integer >= 0."""
    value = row.get(name, fallback)
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        ok = isinstance(value, str) and bool(value.strip())
    if not ok:
        what = "an integer >= 0" if kind is int else "a non-empty string"
        raise InputError(f"must be {what}, got {value!r}", path=path, line=line, field=name)
    return value


def load_pairs(path: str | Path, questions: Mapping[str, Question] | None = None) -> list[CanaryPair]:
    """Read and check the canary file; an :class:`InputError` names the line and field."""
    p = Path(path)
    pairs: list[CanaryPair] = []
    seen: set[tuple[str, str]] = set()
    questions = questions or {}
    for lineno, row in iter_jsonl(p):
        qid = row.get("question_id")
        qid = _field(row, "question_id", str, p, lineno, str(qid) if isinstance(qid, (str, int)) else None)
        known = questions.get(qid)
        pair = CanaryPair(
            question_id=qid, chunk_id=_field(row, "chunk_id", str, p, lineno),
            grade=_field(row, "grade", int, p, lineno), text=_field(row, "text", str, p, lineno),
            question=_field(row, "question", str, p, lineno, known.question if known else None),
            reference=_field(row, "reference", str, p, lineno, known.reference if known else None),
        )
        if (pair.question_id, pair.chunk_id) in seen:
            raise InputError(f"pair ({pair.question_id}, {pair.chunk_id}) appears twice", path=p, line=lineno,
                             field="chunk_id")
        seen.add((pair.question_id, pair.chunk_id))
        pairs.append(pair)
    if not pairs:
        raise InputError("no canary pair (the file is empty)", path=p)
    return pairs


def canary_dataset(pairs: list[CanaryPair]) -> Dataset:
    """The pairs as one run named ``canary``: per question, its labelled chunks."""
    questions: dict[str, Question] = {}
    rankings: dict[str, list[Chunk]] = {}
    for pair in pairs:
        q = questions.setdefault(pair.question_id, Question(id=pair.question_id, question=pair.question,
                                                            reference=pair.reference))
        if (q.question, q.reference) != (pair.question, pair.reference):
            raise InputError(f"question {pair.question_id!r} has two different question or reference texts in the "
                             "canary file", field="question")
        rankings.setdefault(pair.question_id, []).append(Chunk(id=pair.chunk_id, text=pair.text))
    return Dataset(questions=questions, runs={"canary": Run(name="canary", rankings=rankings)})


@dataclass
class CanaryResult:
    """The canary of one audit: its items (``question_id, chunk_id, human_grade, judge_grade,
    error``), the agreement statistics, and whether it is drift."""

    items: list[dict[str, Any]]
    statistic: str
    floor: float
    value: float | None
    accuracy: float | None
    cohen_kappa: float | None
    drift: bool
    reason: str
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    partial: bool = False  # a budget stopped the canary before every pair was judged
    previous_audit: str | None = None
    changed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Pairs that could not be judged (an error, or a budget reached first)."""
        return sum(i["error"] is not None for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": len(self.items), "judged": len(self.items) - self.errors, "errors": self.errors,
                "calls": self.calls, "tokens": self.tokens, "cost_usd": self.cost_usd, "partial": self.partial,
                "statistic": self.statistic, "value": self.value, "floor": self.floor,
                "accuracy": self.accuracy, "cohen_kappa": self.cohen_kappa, "drift": self.drift,
                "reason": self.reason, "cache": "bypassed", "previous_audit": self.previous_audit,
                "changed": self.changed, "items": self.items}


def score_canary(items: list[dict[str, Any]], *, statistic: str, floor: float,
                 previous: tuple[str | None, list[dict[str, Any]]] = (None, [])) -> CanaryResult:
    """Agreement of the items' judge grades with the human grades, and the pairs whose judge
    grade changed since the ``previous`` audit's canary (``History.last_canary()``)."""
    ok = [i for i in items if i["error"] is None and i["judge_grade"] is not None]
    h = np.array([int(i["human_grade"] >= HUMAN_RELEVANT) for i in ok], dtype=np.int64)
    j = np.array([int(i["judge_grade"] >= JUDGE_RELEVANT) for i in ok], dtype=np.int64)
    accuracy = float((h == j).mean()) if ok else None
    kappa_stat = cohen_kappa(h, j, groups=[i["question_id"] for i in ok], n_boot=1) if ok else None
    kappa = None if kappa_stat is None or np.isnan(kappa_stat.value) else float(kappa_stat.value)
    value = accuracy if statistic == "accuracy" else kappa
    prev_id, prev_items = previous
    before = {(p["question_id"], p["chunk_id"]): p["judge_grade"] for p in prev_items}
    changed = [{"question_id": i["question_id"], "chunk_id": i["chunk_id"], "human_grade": i["human_grade"],
                "judge_grade": i["judge_grade"], "previous_judge_grade": before[(i["question_id"], i["chunk_id"])]}
               for i in ok if before.get((i["question_id"], i["chunk_id"])) not in (None, i["judge_grade"])]
    errors = len(items) - len(ok)
    if value is None:
        why = ("no canary pair could be judged" if not ok else
               f"{statistic} is undefined ({kappa_stat.reason if kappa_stat else ''})")
        drift, reason = True, f"canary: {why}"
    else:
        drift = value < floor
        reason = (f"canary: judge agreement with human labels ({statistic}) {value:.3f} "
                  f"{'<' if drift else '>='} floor {floor:g} on {len(ok)} pairs")
    if errors:
        reason += f"; {errors} pair{'s' * (errors != 1)} failed to be judged"
    if changed and prev_id:
        shown = ", ".join(f"{c['question_id']}/{c['chunk_id']} {c['previous_judge_grade']}->{c['judge_grade']}"
                          for c in changed[:5])
        reason += f"; {len(changed)} pair{'s' * (len(changed) != 1)} changed grade since audit {prev_id}: {shown}"
    return CanaryResult(items=items, statistic=statistic, floor=floor, value=value, accuracy=accuracy,
                        cohen_kappa=kappa, drift=drift, reason=reason, previous_audit=prev_id, changed=changed)


def remaining_budget(budget: Budget | None, spent: Mapping[str, Any]) -> Budget:
    """What is left of ``budget`` once ``spent`` (an accounting dictionary: ``calls``,
    ``total_tokens``, ``cost_usd``) is taken off it; each limit at least 0 (no call at all)."""
    from judge_eval.run import Budget

    if budget is None:
        return Budget()
    calls, tokens = int(spent.get("calls", 0)), int(spent.get("total_tokens", 0))
    cost = float(spent.get("cost_usd", 0.0))
    return Budget(
        max_calls=None if budget.max_calls is None else max(0, budget.max_calls - calls),
        max_tokens=None if budget.max_tokens is None else max(0, budget.max_tokens - tokens),
        max_cost=None if budget.max_cost is None else max(0.0, budget.max_cost - cost),
    )


def run_canary(pairs: list[CanaryPair], judge_kwargs: Mapping[str, Any], *, statistic: str, floor: float,
               previous: tuple[str | None, list[dict[str, Any]]] = (None, []),
               spent: Mapping[str, Any] | None = None) -> CanaryResult:
    """Judge the pairs with the audit's judge settings but ``cache_mode="off"``, and score them.
    ``spent``: the accounting of the audit's runs, taken off ``judge_kwargs["budget"]``."""
    from judge_eval.evaluation import evaluate

    ds = canary_dataset(pairs)
    depth = max(len(r) for r in ds.runs["canary"].rankings.values())
    kwargs = {k: v for k, v in judge_kwargs.items() if k not in ("cache", "cache_mode", "budget")}
    budget = remaining_budget(judge_kwargs.get("budget"), spent or {})
    results = evaluate(ds, ks=(depth,), cache_mode="off", n_boot=1, budget=budget, **kwargs)
    verdicts = results.verdicts.set_index(["question_id", "chunk_id"])
    items = []
    for pair in pairs:
        row = verdicts.loc[(pair.question_id, pair.chunk_id)] if (pair.question_id, pair.chunk_id) in verdicts.index \
            else None
        error = None if row is None else row.get("error")
        error = error if isinstance(error, str) else (None if row is not None else "not judged")
        grade = None if error or row is None else int(row["capped_grade"])
        items.append({"question_id": pair.question_id, "chunk_id": pair.chunk_id, "human_grade": pair.grade,
                      "judge_grade": grade, "error": error})
    result = score_canary(items, statistic=statistic, floor=floor, previous=previous)
    result.calls = int(results.accounting.calls)
    result.tokens = int(results.accounting.usage.total_tokens)
    result.cost_usd = round(float(results.accounting.cost), 6)
    result.partial = bool(results.partial)
    return result
