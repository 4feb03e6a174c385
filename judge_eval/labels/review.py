"""The review page: ONE self-contained HTML file (no server, no network, no CDN) where a person
accepts or changes the judge's proposed grades, with the keyboard first, and downloads the
reviewed file for ``judge-eval labels import``.

The page's HTML, CSS and JavaScript live in ``judge_eval/labels/page/`` and are inlined here with
the items as JSON (``<`` escaped, so no text can close the script element). Questions and their
statements are stored once, not once per chunk. Decisions are kept in the browser's
``localStorage`` under a key derived from the items, so a reload keeps the work and another
page's work is never mixed in; the page warns before closing with changes not yet downloaded.
The downloaded file is our JSONL (``id``, ``question_id``, ``chunk_id``, ``proposed_grade``,
``grade``, ``reviewer``, ``reviewed_at``, ``note``; ``grade`` null for items not reviewed).
"""

from __future__ import annotations

import hashlib
import html
from importlib import resources
from pathlib import Path
from typing import Any

from judge_eval.labels.propose import Proposals
from judge_eval.report.html import script_json

__all__ = ["review_page"]

#: what the page needs of an item (the question's text and statements are stored per question)
PAGE_FIELDS = ("id", "question_id", "chunk_id", "chunk_text", "runs", "proposed_grade", "judge_grade", "supported",
               "evidence", "reason", "confidence", "signals", "error")


def _asset(name: str) -> str:
    return resources.files("judge_eval.labels").joinpath("page").joinpath(name).read_text(encoding="utf-8")


def review_page(p: Proposals, *, download_name: str = "reviewed.jsonl") -> str:
    """The HTML of the review page for the proposals ``p``."""
    questions: dict[str, dict[str, Any]] = {}
    items = []
    for it in p.items:
        questions.setdefault(it["question_id"], {"question": it["question"], "statements": it["statements"]})
        items.append({k: it[k] for k in PAGE_FIELDS})
    key = hashlib.sha256("\n".join([p.judge, *(it["id"] for it in p.items)]).encode("utf-8")).hexdigest()[:20]
    title = f"{Path(p.source).name or p.source} \u00b7 judge {p.judge}" + (
        " (offline approximation)" if p.approximate else "")
    data = {"meta": {"key": key, "title": title, "runs": p.runs, "download_name": download_name,
                     "judge": p.judge, "source": p.source},
            "questions": questions, "items": items}
    page = _asset("review.html")
    # the data last: it is the only part that may contain the placeholders' text
    page = page.replace("__TITLE__", html.escape(title)).replace("/*STYLE*/", _asset("review.css"))
    page = page.replace("/*SCRIPT*/", _asset("review.js"))
    return page.replace("__DATA__", script_json(data))
