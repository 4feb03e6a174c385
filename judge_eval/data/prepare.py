"""Prepare the dataset an evaluation scores: load the inputs, cross-check them, and apply the
scoring rules that concern the data (slices, no-answer references, chunk texts).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence

from judge_eval.data.load import load_dataset, load_qrels, load_run
from judge_eval.data.models import Dataset, Qrels, Run
from judge_eval.errors import DataWarning, InputError

__all__ = ["NO_ANSWER_MARKERS", "check_texts", "fingerprint", "prepare_dataset"]

PathLike = str | os.PathLike


def _load(
    data: PathLike | Dataset,
    runs: Mapping[str, PathLike | Run] | None,
    qrels: PathLike | Qrels | None,
    corpus: PathLike | None,
    columns: Mapping[str, str] | None = None,
    *,
    strict: bool = False,
) -> Dataset:
    """The dataset to score: ``data`` (a path or a Dataset) plus extra runs and labels.
    ``columns`` is the column mapping for table inputs (CSV/TSV/Parquet). Rankings of questions
    that are not in the data are dropped with a warning (an error with ``strict``); labels that
    match no question of the data are an error."""
    runs = dict(runs or {})
    run_paths = {name: r for name, r in runs.items() if not isinstance(r, Run)}
    if isinstance(data, Dataset):
        ds = data.model_copy()
        ds.runs = dict(ds.runs)
        for name, path in run_paths.items():
            ds.runs[name] = load_run(path, name, corpus=corpus, columns=columns)
        if qrels is not None and not isinstance(qrels, Qrels):
            ds.qrels = load_qrels(qrels, columns=columns)
    else:
        ds = load_dataset(data, run_paths, None if isinstance(qrels, Qrels) else qrels, corpus=corpus,
                          columns=columns, strict=strict)
    for name, run in runs.items():
        if isinstance(run, Run):
            ds.runs[name] = run
    if isinstance(qrels, Qrels):
        ds.qrels = qrels
    for name, run in ds.runs.items():
        extra = [qid for qid in run.rankings if qid not in ds.questions]
        if extra and strict:
            origin = run.origin(extra[0])
            raise InputError(
                f"run {name!r} ranks question {extra[0]!r}, which is not in the dataset",
                path=origin[0] if origin else None, line=origin[1] if origin else None, field="id",
            )
        if extra:
            warnings.warn(f"run {name!r} ranks {len(extra)} question(s) that are not in the dataset; "
                          "they are left out", DataWarning, stacklevel=3)
            ds.runs[name] = Run(name=run.name, rankings={q: c for q, c in run.rankings.items() if q in ds.questions})
    if ds.qrels is not None and ds.qrels.grades and not any(q in ds.questions for q in ds.qrels.grades):
        raise InputError(
            f"none of the {len(ds.qrels.grades)} labelled question ids is a question of the data "
            f"(labels for e.g. {next(iter(ds.qrels.grades))!r}); are these the qrels of another dataset?",
            path=qrels if not isinstance(qrels, Qrels) else None, field="question_id",
        )
    return ds


#: References that say there is no answer: MS MARCO writes "No Answer Present." for them.
NO_ANSWER_MARKERS: tuple[str, ...] = ("No Answer Present.",)


def _without_no_answer_references(ds: Dataset, markers: Sequence[str]) -> Dataset:
    """``ds`` with every reference that equals a no-answer marker (case and surrounding space
    ignored) removed: such a question has no statement to recall, so it is scored as a question
    without a reference (reason ``no_reference``), with one warning that counts them."""
    wanted = {m.strip().casefold() for m in markers if m and m.strip()}
    hits = [qid for qid, q in ds.questions.items() if q.reference and q.reference.strip().casefold() in wanted]
    if not hits:
        return ds
    warnings.warn(f"{len(hits)} reference(s) say there is no answer ({', '.join(repr(m) for m in markers)}); "
                  "they are scored as questions without a reference", DataWarning, stacklevel=3)
    questions = {qid: (q.model_copy(update={"reference": None}) if qid in hits else q)
                 for qid, q in ds.questions.items()}
    return ds.model_copy(update={"questions": questions})


def fingerprint(ds: Dataset, *, runs: bool = True) -> str:
    """SHA-256 (first 16 hex digits) of the questions, references and (with ``runs``) every
    ranking: two results with the same fingerprint scored the same inputs."""
    h = hashlib.sha256()
    for q in ds.questions.values():
        h.update(json.dumps([q.id, q.question, q.reference], ensure_ascii=False).encode())
    for name in sorted(ds.runs) if runs else ():
        for qid, chunks in ds.runs[name].rankings.items():
            h.update(json.dumps([name, qid, [(c.id, c.text) for c in chunks]], ensure_ascii=False).encode())
    return h.hexdigest()[:16]


def check_texts(ds: Dataset, depth: int) -> None:
    for name, run in ds.runs.items():
        for qid, chunks in run.rankings.items():
            if qid not in ds.questions:
                continue
            for rank, c in enumerate(chunks[:depth], start=1):
                if c.text is None:
                    origin = run.origin(qid)
                    raise InputError(
                        f"run {name!r}: chunk {c.id!r} (question {qid!r}, rank {rank}) has no text; "
                        "the judge needs chunk texts: give a corpus file (--corpus) or a run with texts",
                        path=origin[0] if origin else None,
                        line=origin[1] if origin else None,
                        field="text",
                    )


def prepare_dataset(
    data: PathLike | Dataset,
    runs: Mapping[str, PathLike | Run] | None = None,
    qrels: PathLike | Qrels | None = None,
    corpus: PathLike | None = None,
    columns: Mapping[str, str] | None = None,
    *,
    strict: bool = False,
    no_answer: Sequence[str] = NO_ANSWER_MARKERS,
) -> Dataset:
    """The dataset :func:`judge_eval.evaluate` scores: ``data`` (a path or a Dataset) plus extra
    runs and labels, with rankings of questions outside the data dropped (an error with
    ``strict``) and no-answer references removed (see ``_without_no_answer_references``)."""
    return _without_no_answer_references(_load(data, runs, qrels, corpus, columns, strict=strict), no_answer)
