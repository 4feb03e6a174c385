"""From reviewed proposals to TREC qrels, a provenance file, and how well the judge did.

- **qrels**: ``qid 0 docid grade`` for every reviewed item (and, with ``accept_unreviewed``, the
  judge's proposed grade for the items nobody reviewed), in the file's order;
- **provenance** (CSV): per label the item, the proposed and the final grade, the decision
  (``kept``, ``up``, ``down``; ``new`` for an item the judge had no grade for; ``proposed`` for an
  unreviewed item written with ``accept_unreviewed``), reviewer, time, note and source file;
- **agreement**: counts of kept / changed up / changed down, and Cohen's kappa (unweighted, grades
  0-3 as categories) and the quadratic-weighted kappa between the proposals and the final labels
  over the reviewed items that had a proposal, with 95% bootstrap CIs over questions
  (:mod:`judge_eval.metrics.agreement`): the judge's measured agreement with the reviewers on
  this data. (The reviewers saw the proposals, so this is agreement with *reviewed* labels,
  which anchoring can only raise; docs/labels.md says more.)
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from judge_eval.atomic import check_file, write_text
from judge_eval.errors import ConfigError, InputError
from judge_eval.labels.importer import Review, read_reviews
from judge_eval.metrics.agreement import Statistic, cohen_kappa, quadratic_weighted_kappa

__all__ = ["ImportReport", "import_reviews", "PROVENANCE_COLUMNS"]

PathLike = str | os.PathLike
PROVENANCE_COLUMNS = ("question_id", "chunk_id", "item_id", "proposed_grade", "final_grade", "decision",
                      "reviewer", "reviewed_at", "note", "source")


@dataclass
class ImportReport:
    """What :func:`import_reviews` did. ``kappa`` and ``weighted_kappa`` are
    :class:`~judge_eval.metrics.agreement.Statistic` (NaN with a reason when undefined)."""

    items: int
    reviewed: int
    kept: int
    up: int
    down: int
    new: int
    unreviewed: int
    written: int
    questions: int
    kappa: Statistic
    weighted_kappa: Statistic
    accept_unreviewed: bool = False
    qrels_path: str = ""
    provenance_path: str = ""
    labels: list[tuple[str, str, int]] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"reviewed {self.reviewed} of {self.items} items: kept {self.kept}, changed up {self.up}, "
                 f"changed down {self.down}" + (f", graded without a proposal {self.new}" if self.new else "")]
        if self.unreviewed:
            lines.append(f"unreviewed {self.unreviewed}: " + ("written with the judge's proposed grade"
                                                              if self.accept_unreviewed else
                                                              "left out of the qrels (--accept-unreviewed writes "
                                                              "the judge's grade for them)"))
        n = self.kept + self.up + self.down
        lines.append(f"agreement of the judge's proposals with the final labels ({n} items, "
                     f"{self.kappa.n_questions} questions): Cohen's kappa {_stat(self.kappa)}, "
                     f"quadratic-weighted kappa {_stat(self.weighted_kappa)}")
        lines.append(f"qrels: {self.written} labels for {self.questions} questions -> {self.qrels_path}; "
                     f"provenance -> {self.provenance_path}")
        return "\n".join(lines)


def _stat(s: Statistic) -> str:
    if math.isnan(s.value):
        return f"undefined ({s.reason})"
    ci = "" if math.isnan(s.ci_low) else f" [{s.ci_low:.2f}, {s.ci_high:.2f}]"
    return f"{s.value:.3f}{ci}"


def _decision(r: Review) -> str:
    if r.grade is None:
        return "proposed"
    if r.proposed_grade is None:
        return "new"
    if r.grade == r.proposed_grade:
        return "kept"
    return "up" if r.grade > r.proposed_grade else "down"


def default_provenance(out: PathLike) -> Path:
    """``qrels.txt`` -> ``qrels.provenance.csv`` beside it."""
    p = Path(out)
    return p.with_name(f"{p.stem}.provenance.csv")


def _check_token(value: str, r: Review, source: Path, field_name: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise InputError(f"{value!r} cannot be written to TREC qrels (empty or contains whitespace); nothing was "
                         "written", path=source, line=r.row, field=field_name, kind=r.kind)


def import_reviews(source: PathLike, out: PathLike, *, provenance: PathLike | None = None,
                   accept_unreviewed: bool = False, n_boot: int = 1000, seed: int = 0) -> ImportReport:
    """Read reviewed proposals (any format :func:`~judge_eval.labels.importer.read_reviews`
    reads), write TREC qrels to ``out`` and the provenance CSV to ``provenance`` (default:
    ``<out stem>.provenance.csv`` beside ``out``); both are checked before reading and written
    only when the whole file is valid."""
    out_p = check_file(out, option="--out")
    prov_p = check_file(provenance if provenance is not None else default_provenance(out), option="--provenance")
    if out_p.resolve() == prov_p.resolve():
        raise ConfigError("--out and --provenance name the same file", option="--provenance")
    src = Path(source)
    reviews = read_reviews(src)
    chosen = [r for r in reviews if r.grade is not None or (accept_unreviewed and r.proposed_grade is not None)]
    if not chosen:
        raise InputError("no item has a reviewer's grade, so there is nothing to write (use --accept-unreviewed "
                         "to write the judge's proposals as they are)", path=src)
    qrels_lines, prov = [], io.StringIO()
    w = csv.writer(prov, lineterminator="\n")
    w.writerow(PROVENANCE_COLUMNS)
    labels = []
    for r in chosen:
        _check_token(r.question_id, r, src, "question_id")
        _check_token(r.chunk_id, r, src, "chunk_id")
        final = r.grade if r.grade is not None else r.proposed_grade
        assert final is not None
        qrels_lines.append(f"{r.question_id} 0 {r.chunk_id} {final}\n")
        labels.append((r.question_id, r.chunk_id, final))
        w.writerow([r.question_id, r.chunk_id, r.item_id, "" if r.proposed_grade is None else r.proposed_grade,
                    final, _decision(r), r.reviewer, r.reviewed_at, r.note, src.name])
    reviewed = [r for r in reviews if r.grade is not None]
    paired = [r for r in reviewed if r.proposed_grade is not None]
    final_grades = [r.grade for r in paired]
    proposed_grades = [r.proposed_grade for r in paired]
    groups = [r.question_id for r in paired]
    kappa = cohen_kappa(final_grades, proposed_grades, groups=groups, n_boot=n_boot, seed=seed)
    wkappa = quadratic_weighted_kappa(final_grades, proposed_grades, groups=groups, n_boot=n_boot, seed=seed)
    decisions = [_decision(r) for r in reviewed]
    write_text(prov_p, prov.getvalue(), option="--provenance")
    write_text(out_p, "".join(qrels_lines), option="--out")
    return ImportReport(
        items=len(reviews), reviewed=len(reviewed), kept=decisions.count("kept"), up=decisions.count("up"),
        down=decisions.count("down"), new=decisions.count("new"), unreviewed=len(reviews) - len(reviewed),
        written=len(chosen), questions=len({r.question_id for r in chosen}), kappa=kappa, weighted_kappa=wkappa,
        accept_unreviewed=accept_unreviewed, qrels_path=str(out_p), provenance_path=str(prov_p), labels=labels,
    )
