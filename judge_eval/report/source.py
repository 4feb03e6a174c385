"""What a report is drawn from: one results folder's contents, read from disk or taken from a
:class:`~judge_eval.results.Results` before it is written.

Both ways give the same :class:`ReportSource` (the in-memory frames go through the JSON form
the folder stores), so ``score --out`` and ``judge-eval report DIR`` write the same pages. The
reader is :func:`judge_eval.report.render.read_source` (here it would close an import cycle
through ``report.folder``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from judge_eval.report.tables import records

if TYPE_CHECKING:
    from judge_eval.results import Results

__all__ = ["ReportSource", "source_from_results"]

VERDICT_COLUMNS = ["question_id", "chunk_id", "runs", "question", "chunk_text", "error", "grade", "capped_grade",
                   "supported", "evidence", "reason"]
STATEMENT_COLUMNS = ["question_id", "statement", "text", "error"]


@dataclass
class ReportSource:
    """A results folder's contents, as the report needs them.

    ``summary``: one record per (run, measure) (``mean``, ``ci_low``, ``ci_high``, ``n``,
    ``n_missing``); ``info``: the metadata of ``summary.json`` (``judge``, ``prompts``,
    ``dataset``, ``settings``, ``accounting``, and ``trust`` when human labels were given);
    ``per_question``, ``missing``, ``verdicts`` and ``statements`` as frames (empty when the
    folder lacks the file); ``name``: how the report names the folder."""

    summary: list[dict[str, Any]]
    info: dict[str, Any]
    per_question: pd.DataFrame
    missing: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VERDICT_COLUMNS))
    statements: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STATEMENT_COLUMNS))
    name: str = ""

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(str(r["run"]) for r in self.summary))

    @property
    def measures(self) -> list[str]:
        return list(dict.fromkeys(str(r["measure"]) for r in self.summary))

    @property
    def ks(self) -> list[int]:
        return [int(k) for k in (self.info.get("settings") or {}).get("ks") or []]

    @property
    def trust(self) -> dict[str, Any] | None:
        t = self.info.get("trust")
        return t if isinstance(t, dict) else None

    @property
    def partial(self) -> bool:
        return bool((self.info.get("accounting") or {}).get("partial"))


def _json_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as they read back from a JSONL file (NaN -> null, numpy -> Python, int keys -> str)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return None
        if hasattr(v, "item") and not isinstance(v, (list, dict)):
            return clean(v.item())
        return v

    return json.loads(json.dumps([{k: clean(v) for k, v in r.items()} for r in frame.to_dict(orient="records")],
                                 default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def source_from_results(results: Results, name: str = "") -> ReportSource:
    """The report source of an evaluation not yet written (what ``write_results`` renders)."""
    verdicts = pd.DataFrame(_json_rows(results.verdicts)) if len(results.verdicts) else pd.DataFrame(
        columns=VERDICT_COLUMNS)
    statements = pd.DataFrame(_json_rows(results.statements)) if len(results.statements) else pd.DataFrame(
        columns=STATEMENT_COLUMNS)
    per_question = results.per_question.astype({"run": str, "question_id": str})
    return ReportSource(summary=records(results.summary), info=json.loads(json.dumps(results.info, default=str)),
                        per_question=per_question, missing=results.missing, verdicts=verdicts,
                        statements=statements, name=name)
