"""The summary ``judge-eval score`` prints: runs x metrics@k with CIs, then what the judge cost."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from judge_eval.report.tables import missing_note, records, render_by_measure

if TYPE_CHECKING:
    from judge_eval.results import Results

#: Measure families shown in the terminal table, in order; everything is in the results folder.
TABLE_FAMILIES = ("context_recall", "context_precision", "joint_context_recall", "judge_ndcg", "recall", "ndcg")


def _table_measures(measures: list[str]) -> list[str]:
    chosen: list[str] = []
    for family in TABLE_FAMILIES:
        chosen.extend(m for m in measures if m.split("@")[0] == family)
    return chosen


def accounting_line(info: dict) -> str:
    a = info["accounting"]
    parts = [
        f"tasks {a['tasks']}",
        f"calls {a['calls']}" + (f" (batch {a['batch_calls']})" if a.get("batch_calls") else ""),
        f"cache hits {a['cache_hits']}",
        f"tokens {a['total_tokens']}" + (f" (reasoning {a['reasoning_tokens']})" if a.get("reasoning_tokens") else ""),
        f"cost ${a['cost_usd']:.4f}",
        f"errors {a['errors']}" + (
            " (" + ", ".join(f"{cause} {n}" for cause, n in sorted(a["error_causes"].items())) + ")"
            if a["errors"] else ""
        ),
        f"unverified evidence {a['unverified_evidence']}",
    ]
    if a["skipped"]:
        parts.append(f"skipped (budget) {a['skipped']}")
    return ", ".join(parts)


def render_score_summary(results: Results, fmt: Literal["table", "csv", "json"] = "table") -> str:
    """Text for the terminal (table), or the summary as CSV/JSON (all measures)."""
    if fmt == "csv":
        return results.summary.to_csv(index=False)
    if fmt == "json":
        return json.dumps({"summary": records(results.summary), **results.info}, indent=2, ensure_ascii=False)
    info = results.info
    judge = info["judge"]["identity"]
    lines = []
    if info["judge"]["approximate"]:
        lines.append(f"judge: {judge} (APPROXIMATION: lexical overlap, not an LLM; for demos and smoke tests)")
    else:
        lines.append(f"judge: {judge}   prompts: {', '.join(info['prompts'].values())}")
    measures = list(dict.fromkeys(results.summary["measure"]))
    shown = _table_measures(measures)
    lines.append(render_by_measure(results.summary, measures=shown))
    lines.append("mean [95% bootstrap CI] over questions; n = questions with a value; '-' = none.")
    note = missing_note(results.summary[results.summary["measure"].isin(shown)], results.missing)
    if note:
        lines.append(note.replace("(left out of the mean)", "(left out of the mean; reasons in missing.csv)"))
    if len(shown) < len(measures):
        lines.append(f"{len(measures) - len(shown)} more measures (judge-labelled hit rate, precision, recall, MRR; "
                     "human hit rate, precision, MRR) in --format csv/json and the results folder.")
    lines.append(accounting_line(info))
    if results.trust is not None:
        lines += ["", results.trust.render_brief(shown)]
    if results.partial:
        lines.append("PARTIAL RESULT: a budget stopped the judge before every task ran.")
    return "\n".join(lines)
