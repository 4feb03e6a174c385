"""Label proposals written for people and for annotation tools (docs/labels.md has examples).

- ``jsonl``: one item per line, every field of :mod:`judge_eval.labels.propose`;
- ``csv``: the same, one row per item; lists and objects as JSON text, the statements as
  numbered lines;
- ``label-studio``: a task list for Label Studio's import, each task with the item in ``data``
  and the judge's verdict as a pre-annotation (``predictions``: the grade as a ``choices``
  result, each evidence span as a ``labels`` region of the chunk), plus the labelling config XML
  those results refer to (written beside the tasks as ``<name>.label_config.xml``);
- ``argilla``: records as Argilla 2.x's ``dataset.records.to_json`` writes them (and
  ``records.from_json`` reads them), with the grade and the evidence spans as suggestions,
  plus the dataset settings as ``Settings.to_json`` writes them (``<name>.settings.json``).

Each writer returns ``{file name suffix or "": text}``: ``""`` is the main file.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from judge_eval.labels.propose import Proposals

__all__ = ["FORMATS", "CSV_COLUMNS", "render", "statements_text"]

#: the columns of the CSV form, in order (the reviewer fields last)
CSV_COLUMNS = ("id", "question_id", "chunk_id", "question", "statements", "chunk_text", "runs", "proposed_grade",
               "judge_grade", "supported", "evidence", "reason", "confidence", "signals", "error",
               "grade", "reviewer", "reviewed_at", "note")
GRADES = (0, 1, 2, 3)
GRADE_NAMES = {0: "0 irrelevant", 1: "1 related, answers nothing", 2: "2 supports part of the answer",
               3: "3 supports the whole answer"}
#: the grade scale as the Label Studio form states it
_GRADE_HELP = ("Grade: 0 irrelevant, 1 related but answers nothing, 2 supports part of the answer, "
               "3 supports the whole answer")


def statements_text(item: dict[str, Any]) -> str:
    """The reference statements as numbered lines (``1. ...``)."""
    if not item["statements"]:
        return "(no statements: the reference could not be decomposed)"
    return "\n".join(f"{s['n']}. {s['text']}" for s in item["statements"])


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _jsonl(p: Proposals) -> dict[str, str]:
    return {"": "".join(_dumps(it) + "\n" for it in p.items)}


def _csv(p: Proposals) -> dict[str, str]:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for it in p.items:
        row = dict(it, statements=statements_text(it), runs=_dumps(it["runs"]), supported=_dumps(it["supported"]),
                   evidence=_dumps(it["evidence"]), signals=";".join(it["signals"]))
        w.writerow(["" if row.get(c) is None else row[c] for c in CSV_COLUMNS])
    return {"": buf.getvalue()}


# ----------------------------------------------------------------------------- Label Studio


def _max_statements(p: Proposals) -> int:
    return max([len(it["statements"]) for it in p.items] + [s["statement"] for it in p.items for s in it["evidence"]]
               + [1])


def label_studio_config(n_statements: int) -> str:
    """The labelling config: the question, the statements, the chunk (with one ``S<n>`` label per
    statement for evidence regions), the grade (``Choices`` 0-3, hotkeys 0-3) and a note."""
    labels = "\n".join(f'    <Label value="S{n}"/>' for n in range(1, n_statements + 1))
    choices = "\n".join(f'    <Choice value="{g}" hotkey="{g}"/>' for g in GRADES)
    return f"""<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  <Header value="Reference statements"/>
  <Text name="statements" value="$statements"/>
  <Header value="Chunk $chunk_id (evidence: S1 = statement 1 ...)"/>
  <Labels name="evidence" toName="chunk" showInline="true">
{labels}
  </Labels>
  <Text name="chunk" value="$chunk_text"/>
  <Header value="Judge: grade $proposed_grade, confidence $confidence. $reason"/>
  <Header value="{_GRADE_HELP}"/>
  <Choices name="grade" toName="chunk" choice="single-radio" showInline="true" required="true">
{choices}
  </Choices>
  <TextArea name="note" toName="chunk" placeholder="note (optional)" maxSubmissions="1"/>
</View>
"""


def _ls_task(it: dict[str, Any], p: Proposals) -> dict[str, Any]:
    data = {
        "item_id": it["id"], "question_id": it["question_id"], "chunk_id": it["chunk_id"],
        "question": it["question"], "statements": statements_text(it), "chunk_text": it["chunk_text"],
        "proposed_grade": it["proposed_grade"], "judge_grade": it["judge_grade"],
        "confidence": it["confidence"], "signals": ", ".join(it["signals"]) or "none",
        "reason": it["reason"] or "", "runs": ", ".join(f"{r}@{k}" for r, k in it["runs"].items()),
    }
    task: dict[str, Any] = {"data": data}
    if it["proposed_grade"] is None:
        return task
    result: list[dict[str, Any]] = [{
        "id": f"{it['id']}-grade", "from_name": "grade", "to_name": "chunk", "type": "choices",
        "value": {"choices": [str(it["proposed_grade"])]},
    }]
    for ev in it["evidence"]:
        for i, (start, end) in enumerate(ev["spans"]):
            result.append({
                "id": f"{it['id']}-s{ev['statement']}-{i}", "from_name": "evidence", "to_name": "chunk",
                "type": "labels",
                "value": {"start": start, "end": end, "text": it["chunk_text"][start:end],
                          "labels": [f"S{ev['statement']}"]},
            })
    task["predictions"] = [{"model_version": p.judge or "judge", "score": it["confidence"], "result": result}]
    return task


def _label_studio(p: Proposals) -> dict[str, str]:
    tasks = [_ls_task(it, p) for it in p.items]
    return {"": json.dumps(tasks, ensure_ascii=False, indent=1) + "\n",
            ".label_config.xml": label_studio_config(_max_statements(p))}


# ----------------------------------------------------------------------------- Argilla


def argilla_settings(n_statements: int, runs: list[str]) -> dict[str, Any]:
    """Dataset settings in the shape of Argilla 2.x ``Settings.serialize()``: fields, questions
    (a ``rating`` grade 0-3, a ``span`` evidence question on the chunk, a ``text`` note),
    metadata to filter by."""
    def field(name: str, title: str) -> dict[str, Any]:
        return {"name": name, "title": title, "required": True, "description": None, "type": "text",
                "settings": {"type": "text", "use_markdown": False}}

    def meta(name: str, title: str, settings: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "title": title, "type": settings["type"], "visible_for_annotators": True,
                "settings": settings}

    return {
        "guidelines": "Grade how much the chunk supports the reference answer to the question: "
                      + "; ".join(GRADE_NAMES.values()) + ". The judge's grade and its evidence spans are "
                      "suggestions: accept or correct them.",
        "allow_extra_metadata": False,
        "fields": [field("question", "Question"), field("statements", "Reference statements"),
                   field("chunk", "Chunk"), field("judge", "Judge's verdict")],
        "questions": [
            {"name": "grade", "title": "Grade (0-3)", "description": "; ".join(GRADE_NAMES.values()),
             "required": True, "type": "rating",
             "settings": {"type": "rating", "options": [{"value": g} for g in GRADES]}},
            {"name": "evidence", "title": "Evidence for statement n (S<n>)", "description": None,
             "required": False, "type": "span",
             "settings": {"type": "span", "field": "chunk", "allow_overlapping": True,
                          "options": [{"value": f"S{n}", "text": f"S{n}", "description": None}
                                      for n in range(1, n_statements + 1)],
                          "visible_options": n_statements if n_statements >= 3 else None}},
            {"name": "note", "title": "Note (optional)", "description": None, "required": False, "type": "text",
             "settings": {"type": "text", "use_markdown": False}},
        ],
        "metadata": [
            meta("question_id", "question", {"type": "terms", "values": None}),
            meta("chunk_id", "chunk", {"type": "terms", "values": None}),
            meta("runs", "runs", {"type": "terms", "values": list(runs) or None}),
            meta("proposed_grade", "proposed grade", {"type": "integer", "min": 0, "max": 3}),
            meta("confidence", "confidence", {"type": "float", "min": 0.0, "max": 1.0}),
            meta("signals", "signals", {"type": "terms", "values": None}),
        ],
        "vectors": [],
    }


def _judge_text(it: dict[str, Any]) -> str:
    if it["proposed_grade"] is None:
        return f"no proposal: the judge failed ({it['reason'] or it['error']})"
    quotes = "; ".join(f"S{e['statement']}: \u201c{e['quote']}\u201d" for e in it["evidence"]) or "none"
    return (f"grade {it['proposed_grade']} (confidence {it['confidence']}; signals: "
            f"{', '.join(it['signals']) or 'none'}). Reason: {it['reason'] or ''}. Evidence: {quotes}")


def _argilla_record(it: dict[str, Any], p: Proposals) -> dict[str, Any]:
    suggestions: dict[str, Any] = {}
    if it["proposed_grade"] is not None:
        agent = p.judge or "judge"
        suggestions["grade"] = {"value": it["proposed_grade"], "score": it["confidence"], "agent": agent}
        spans = [{"start": s, "end": e, "label": f"S{ev['statement']}"}
                 for ev in it["evidence"] for s, e in ev["spans"]]
        if spans:
            suggestions["evidence"] = {"value": spans, "score": None, "agent": agent}
    return {
        "id": it["id"],
        "fields": {"question": it["question"], "statements": statements_text(it), "chunk": it["chunk_text"],
                   "judge": _judge_text(it)},
        "metadata": {"question_id": it["question_id"], "chunk_id": it["chunk_id"], "runs": list(it["runs"]),
                     "proposed_grade": it["proposed_grade"], "confidence": it["confidence"],
                     "signals": list(it["signals"]) or ["none"]},
        "suggestions": suggestions,
        "responses": {},
        "vectors": {},
        "_server_id": None,
    }


def _argilla(p: Proposals) -> dict[str, str]:
    records = [_argilla_record(it, p) for it in p.items]
    for r in records:  # Argilla rejects null metadata values
        r["metadata"] = {k: v for k, v in r["metadata"].items() if v is not None}
    return {"": json.dumps(records, ensure_ascii=False, indent=1) + "\n",
            ".settings.json": json.dumps(argilla_settings(_max_statements(p), p.runs), ensure_ascii=False,
                                         indent=1) + "\n"}


FORMATS: dict[str, Callable[[Proposals], dict[str, str]]] = {
    "jsonl": _jsonl, "csv": _csv, "label-studio": _label_studio, "argilla": _argilla,
}


def render(p: Proposals, fmt: str) -> dict[str, str]:
    """The files of ``p`` in format ``fmt``: ``{suffix: text}``, ``""`` the main file."""
    return FORMATS[fmt](p)

