"""Label proposals and review: the judge's verdicts become human-checked qrels (docs/labels.md).

- :func:`propose`: one item per judged (question, chunk) of a results folder, written as JSONL,
  CSV, a Label Studio task file (+ labelling config) or Argilla records (+ dataset settings);
- :func:`write_review_page`: the same items as one self-contained HTML review page;
- :func:`import_reviews`: reviewed items back to TREC qrels, with provenance and the judge's
  agreement with the reviewers.

The twins of ``judge-eval labels propose|review|import``.
"""

from __future__ import annotations

import os
from pathlib import Path

from judge_eval.atomic import check_file, write_text
from judge_eval.errors import ConfigError
from judge_eval.labels.formats import FORMATS, render
from judge_eval.labels.propose import ORDERS, Order, Proposals, item_id, load_proposals
from judge_eval.labels.qrels import ImportReport, import_reviews
from judge_eval.labels.review import review_page

__all__ = ["FORMATS", "ORDERS", "ImportReport", "Proposals", "import_reviews", "item_id", "load_proposals",
           "propose", "write_review_page"]

PathLike = str | os.PathLike


def _sibling(out: Path, suffix: str) -> Path:
    """``proposals.json`` + ``.label_config.xml`` -> ``proposals.label_config.xml``."""
    return out.with_name(out.stem + suffix)


def propose(results: PathLike, out: PathLike, *, fmt: str = "jsonl", order: Order = "uncertainty",
            limit: int | None = None, only_unlabelled: bool = False,
            qrels: PathLike | None = None) -> tuple[Proposals, list[Path]]:
    """Write the label proposals of the results folder ``results`` to ``out`` in format ``fmt``
    (``jsonl``, ``csv``, ``label-studio``, ``argilla``); the last two also write a sibling file
    (``<stem>.label_config.xml``, ``<stem>.settings.json``). Returns the proposals and the paths
    written. Every output location is checked before anything is read or written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", option="--format")
    out_p = check_file(out)
    proposals = load_proposals(results, order=order, limit=limit, only_unlabelled=only_unlabelled, qrels=qrels)
    files = render(proposals, fmt)
    targets = {suffix: (out_p if not suffix else _sibling(out_p, suffix)) for suffix in files}
    for suffix, path in targets.items():
        check_file(path)
        if suffix and path.resolve() == out_p.resolve():
            raise ConfigError(f"{out_p} would be overwritten by its own {suffix} file; choose another name")
    for suffix in sorted(files, key=lambda s: s == ""):  # the main file last: it appears when all is there
        write_text(targets[suffix], files[suffix])
    return proposals, [targets[s] for s in sorted(files, key=lambda s: s != "")]


def write_review_page(results: PathLike, out: PathLike, *, order: Order = "uncertainty", limit: int | None = None,
                      only_unlabelled: bool = False, qrels: PathLike | None = None) -> Proposals:
    """Write the review page (one self-contained HTML file) for the results folder ``results``."""
    out_p = check_file(out)
    proposals = load_proposals(results, order=order, limit=limit, only_unlabelled=only_unlabelled, qrels=qrels)
    stem = out_p.stem or "review"
    write_text(out_p, review_page(proposals, download_name=f"{stem}.reviewed.jsonl"))
    return proposals
