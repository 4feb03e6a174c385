"""Labelled IR measures: one question, one ranking, human grades.

Every measure takes

* ``ranking``: the retrieved chunk ids, rank 1 first. The input order *is* the ranking (scores
  are not looked at); ids are unique.
* ``grades``: chunk id -> integer grade >= 0 for the chunks a human labelled. A chunk without a
  label has grade 0.
* ``threshold``: a chunk is *relevant* iff its grade >= ``threshold`` (an int >= 1, default 1).

and returns a ``float``, or ``None`` when the measure is undefined for the question (see each
function). Notation below: ``rel(c) = 1 if grades.get(c, 0) >= threshold else 0``,
``R = |{c labelled : rel(c) = 1}|`` (relevant chunks labelled for the question, retrieved or
not), ``c_i`` = the chunk at rank ``i``, ``n = len(ranking)``; "top k" is the first
``min(k, n)`` chunks.

The definitions follow trec_eval (and ranx) except where the docstrings and ``docs/metrics.md``
say otherwise: the main difference is that we return ``None`` (undefined) for a question with
no relevant labelled chunk where both libraries return 0.

Measure strings (:func:`parse_measure`) name a measure and, where it takes one, a cutoff:
``hit_rate@5``, ``precision@5``, ``recall@5``, ``mrr`` / ``mrr@10``, ``ndcg@5``,
``ndcg_exp@5``, ``ndcg_jarvelin@5``, ``ndcg_exp_jarvelin@5``, ``map`` / ``map@10``,
``r_precision``, ``judged@5``.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from judge_eval.errors import InputError

Ranking = Sequence[str]
Grades = Mapping[str, int]
Gain = Literal["linear", "exp"]
Discount = Literal["log2", "jarvelin"]

__all__ = [
    "DEFAULT_KS",
    "DEFAULT_MEASURES",
    "MEASURES",
    "Measure",
    "MeasureDef",
    "average_precision",
    "dcg",
    "evaluate_ranking",
    "hit_rate",
    "ideal_dcg",
    "judged",
    "ndcg",
    "num_relevant",
    "check_k",
    "check_ks",
    "parse_measure",
    "precision",
    "r_precision",
    "recall",
    "reciprocal_rank",
    "resolve_measures",
]


# --------------------------------------------------------------------------- checks and helpers


def check_k(k: object) -> int:
    """A cutoff: an integer >= 1 (an :class:`~judge_eval.errors.InputError` naming ``k`` otherwise).
    The one cutoff check of the package."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise InputError(f"cutoff k must be an integer >= 1, got {k!r}", field="k")
    return int(k)


def _check_k(k: int | None, *, optional: bool = False) -> None:
    if k is None and optional:
        return
    check_k(k)


def check_ks(ks: Iterable[object]) -> list[int]:
    """The cutoffs, sorted and without duplicates; each checked by :func:`check_k`, and at least
    one."""
    out = [check_k(k) for k in ks]
    if not out:
        raise InputError("give at least one cutoff, e.g. 5,10", field="k")
    return sorted(dict.fromkeys(out))


def _check_threshold(threshold: int) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise InputError(
            f"relevance threshold must be an integer >= 1, got {threshold!r} (with 0 every "
            "unlabelled chunk would count as relevant)",
            field="threshold",
        )


def _top(ranking: Ranking, k: int | None) -> Sequence[str]:
    return ranking if k is None else ranking[:k]


def num_relevant(grades: Grades, threshold: int = 1) -> int:
    """``R``: how many labelled chunks have grade >= ``threshold`` (retrieved or not)."""
    _check_threshold(threshold)
    return sum(1 for g in grades.values() if g >= threshold)


def _relevant_hits(ranking: Sequence[str], grades: Grades, threshold: int) -> int:
    return sum(1 for c in ranking if grades.get(c, 0) >= threshold)


# --------------------------------------------------------------------------- binary measures


def hit_rate(ranking: Ranking, grades: Grades, k: int, threshold: int = 1) -> float | None:
    """Hit rate@k (trec_eval ``success_k``, ranx ``hit_rate@k``).

    ``hit@k = 1 if any(rel(c_i) for i <= k) else 0``; the mean over questions is the hit rate.
    Undefined (``None``) when ``R = 0``: no ranking can hit a question without relevant chunks
    (trec_eval and ranx give 0).
    """
    _check_k(k)
    if num_relevant(grades, threshold) == 0:
        return None
    return 1.0 if _relevant_hits(_top(ranking, k), grades, threshold) > 0 else 0.0


def precision(ranking: Ranking, grades: Grades, k: int, threshold: int = 1) -> float:
    """Precision@k (trec_eval ``P_k``): ``sum_{i<=k} rel(c_i) / k``.

    The denominator is ``k`` even when fewer than ``k`` chunks were returned (as trec_eval and
    ranx), so returning fewer chunks is not rewarded. Always defined: with ``R = 0`` it is 0
    (every retrieved chunk is noise), as in trec_eval and ranx.
    """
    _check_k(k)
    _check_threshold(threshold)
    return _relevant_hits(_top(ranking, k), grades, threshold) / k


def recall(ranking: Ranking, grades: Grades, k: int, threshold: int = 1) -> float | None:
    """Recall@k (trec_eval ``recall_k``): ``sum_{i<=k} rel(c_i) / R``.

    ``R`` counts every relevant labelled chunk, retrieved or not. Undefined (``None``) when
    ``R = 0`` (trec_eval and ranx give 0).
    """
    _check_k(k)
    big_r = num_relevant(grades, threshold)
    if big_r == 0:
        return None
    return _relevant_hits(_top(ranking, k), grades, threshold) / big_r


def reciprocal_rank(
    ranking: Ranking, grades: Grades, k: int | None = None, threshold: int = 1
) -> float | None:
    """Reciprocal rank (trec_eval ``recip_rank``; with a cutoff, ranx ``mrr@k``).

    ``RR@k = 1 / min{i <= k : rel(c_i) = 1}``, and 0 if no relevant chunk is in the top k
    (``k=None``: the whole ranking). The mean over questions is MRR. Undefined (``None``) when
    ``R = 0``: there is no relevant chunk to find (trec_eval and ranx give 0).
    """
    _check_k(k, optional=True)
    if num_relevant(grades, threshold) == 0:
        return None
    for i, c in enumerate(_top(ranking, k), start=1):
        if grades.get(c, 0) >= threshold:
            return 1.0 / i
    return 0.0


def average_precision(
    ranking: Ranking, grades: Grades, k: int | None = None, threshold: int = 1
) -> float | None:
    """Average precision (trec_eval ``map`` / ``map_cut_k``; ranx ``map@k``).

    ``AP@k = sum_{i<=k, rel(c_i)=1} P@i / R`` with ``P@i = sum_{j<=i} rel(c_j) / i``. The
    denominator is ``R``, not ``min(k, R)``: relevant chunks below the cutoff count as misses.
    ``k=None``: the whole ranking. Undefined (``None``) when ``R = 0`` (trec_eval, ranx: 0).
    """
    _check_k(k, optional=True)
    big_r = num_relevant(grades, threshold)
    if big_r == 0:
        return None
    hits = 0
    total = 0.0
    for i, c in enumerate(_top(ranking, k), start=1):
        if grades.get(c, 0) >= threshold:
            hits += 1
            total += hits / i
    return total / big_r


def r_precision(ranking: Ranking, grades: Grades, threshold: int = 1) -> float | None:
    """R-precision (trec_eval ``Rprec``): precision at ``R``, i.e. ``sum_{i<=R} rel(c_i) / R``.

    Divides by ``R`` even when fewer than ``R`` chunks were returned. Undefined (``None``) when
    ``R = 0`` (trec_eval, ranx: 0).
    """
    big_r = num_relevant(grades, threshold)
    if big_r == 0:
        return None
    return _relevant_hits(ranking[:big_r], grades, threshold) / big_r


def judged(ranking: Ranking, grades: Grades, k: int) -> float:
    """Judged@k: the share of the top k that carries a label (any grade, 0 included).

    ``judged@k = |{i <= k : c_i in grades}| / k``. Like precision@k the denominator is ``k``
    even when fewer than ``k`` chunks were returned, so ``judged@k`` is an upper bound on
    ``precision@k`` and ``1 - judged@k`` the share of the k slots whose relevance is unknown
    or empty. (ir_measures' ``Judged@k`` divides by ``min(k, n)`` instead.) An empty ranking
    scores 0. Does not depend on the threshold.
    """
    _check_k(k)
    return sum(1 for c in _top(ranking, k) if c in grades) / k


# --------------------------------------------------------------------------- graded measures


def _gain(grade: int, gain: Gain) -> float:
    if gain == "linear":
        return float(grade)
    if gain == "exp":
        return float(2**grade - 1)
    raise InputError(f"unknown gain {gain!r} (use 'linear' or 'exp')", field="gain")


def _discount(i: int, discount: Discount) -> float:
    if discount == "log2":
        return math.log2(i + 1)
    if discount == "jarvelin":
        return 1.0 if i == 1 else math.log2(i)
    raise InputError(f"unknown discount {discount!r} (use 'log2' or 'jarvelin')", field="discount")


def _check_variant(gain: Gain, discount: Discount) -> None:
    """Reject an unknown gain or discount even when no grade is positive."""
    _gain(0, gain)
    _discount(1, discount)


def _dcg_of(grade_list: Iterable[int], gain: Gain, discount: Discount) -> float:
    total = 0.0
    for i, g in enumerate(grade_list, start=1):
        if g > 0:
            total += _gain(g, gain) / _discount(i, discount)
    return total


def dcg(
    ranking: Ranking,
    grades: Grades,
    k: int,
    gain: Gain = "linear",
    discount: Discount = "log2",
) -> float:
    """Discounted cumulative gain: ``DCG@k = sum_{i<=k} gain(g_i) / disc(i)``.

    ``g_i`` is the raw grade of ``c_i`` (0 if unlabelled); the relevance threshold plays no part
    (as trec_eval's ``ndcg_cut``). ``gain``: ``"linear"`` ``g`` (trec_eval, ranx ``ndcg``) or
    ``"exp"`` ``2**g - 1`` (Burges; ranx ``ndcg_burges``). ``discount``: ``"log2"``
    ``log2(i + 1)`` or ``"jarvelin"`` ``1`` for ``i = 1`` and ``log2(i)`` for ``i >= 2`` (the
    original Järvelin & Kekäläinen form with base 2, where ranks 1 and 2 share a discount of 1).
    """
    _check_k(k)
    _check_variant(gain, discount)
    return _dcg_of((grades.get(c, 0) for c in ranking[:k]), gain, discount)


def ideal_dcg(
    grades: Grades, k: int, gain: Gain = "linear", discount: Discount = "log2"
) -> float:
    """``IDCG@k``: the DCG@k of the best possible ranking, i.e. of *all* labelled grades of the
    question (retrieved or not) sorted in decreasing order. Sorting is optimal for both
    discounts because both are non-decreasing in the rank."""
    _check_k(k)
    _check_variant(gain, discount)
    return _dcg_of(sorted(grades.values(), reverse=True)[:k], gain, discount)


def ndcg(
    ranking: Ranking,
    grades: Grades,
    k: int,
    gain: Gain = "linear",
    discount: Discount = "log2",
) -> float | None:
    """Normalised DCG: ``nDCG@k = DCG@k / IDCG@k`` (see :func:`dcg`, :func:`ideal_dcg`).

    Grades count with their raw value whatever the relevance threshold (as trec_eval; ranx
    instead drops grades below its ``rel_lvl``, which only differs when the threshold is > 1).
    Undefined (``None``) when ``IDCG@k = 0``, i.e. no labelled chunk has a grade > 0 (trec_eval,
    ranx: 0). Defaults (linear gain, ``log2(i+1)``) equal trec_eval's ``ndcg_cut_k``.
    """
    ideal = ideal_dcg(grades, k, gain, discount)
    if ideal == 0.0:
        return None
    return dcg(ranking, grades, k, gain, discount) / ideal


# --------------------------------------------------------------------------- registry


MeasureFunc = Callable[[Ranking, Grades, "int | None", int], "float | None"]


@dataclass(frozen=True)
class MeasureDef:
    """A measure in the registry: ``func(ranking, grades, k, threshold)``; ``cutoff`` says
    whether a measure string must (``"required"``), may (``"optional"``) or must not
    (``"none"``) carry ``@k``."""

    name: str
    func: MeasureFunc
    cutoff: Literal["required", "optional", "none"]
    summary: str


def _k(k: int | None) -> int:
    if k is None:
        raise InputError("this measure needs a cutoff k", field="k")
    return k


def _ndcg_variant(gain: Gain, discount: Discount) -> MeasureFunc:
    def f(ranking: Ranking, grades: Grades, k: int | None, threshold: int) -> float | None:
        return ndcg(ranking, grades, _k(k), gain=gain, discount=discount)

    return f


MEASURES: dict[str, MeasureDef] = {
    d.name: d
    for d in [
        MeasureDef(
            "hit_rate",
            lambda r, g, k, t: hit_rate(r, g, _k(k), t),
            "required",
            "1 if a relevant chunk is in the top k",
        ),
        MeasureDef(
            "precision",
            lambda r, g, k, t: precision(r, g, _k(k), t),
            "required",
            "relevant in top k / k",
        ),
        MeasureDef(
            "recall",
            lambda r, g, k, t: recall(r, g, _k(k), t),
            "required",
            "relevant in top k / relevant labelled",
        ),
        MeasureDef(
            "mrr",
            lambda r, g, k, t: reciprocal_rank(r, g, k, t),
            "optional",
            "reciprocal rank of the first relevant chunk (mean: MRR)",
        ),
        MeasureDef(
            "ndcg", _ndcg_variant("linear", "log2"), "required", "nDCG, gain g, disc log2(i+1)"
        ),
        MeasureDef(
            "ndcg_exp", _ndcg_variant("exp", "log2"), "required", "nDCG, gain 2^g-1, log2(i+1)"
        ),
        MeasureDef(
            "ndcg_jarvelin",
            _ndcg_variant("linear", "jarvelin"),
            "required",
            "nDCG, gain g, disc 1 then log2(i)",
        ),
        MeasureDef(
            "ndcg_exp_jarvelin",
            _ndcg_variant("exp", "jarvelin"),
            "required",
            "nDCG, gain 2^g-1, disc 1 then log2(i)",
        ),
        MeasureDef(
            "map",
            lambda r, g, k, t: average_precision(r, g, k, t),
            "optional",
            "average precision (mean: MAP)",
        ),
        MeasureDef(
            "r_precision",
            lambda r, g, k, t: r_precision(r, g, t),
            "none",
            "precision at R = relevant labelled",
        ),
        MeasureDef(
            "judged",
            lambda r, g, k, t: judged(r, g, _k(k)),
            "required",
            "labelled (any grade) in top k / k",
        ),
    ]
}

#: Other spellings accepted by :func:`parse_measure` (left) for a registry name (right).
ALIASES: dict[str, str] = {
    "hit": "hit_rate",
    "hits": "hit_rate",
    "success": "hit_rate",
    "p": "precision",
    "r": "recall",
    "rr": "mrr",
    "recip_rank": "mrr",
    "ap": "map",
    "ndcg_burges": "ndcg_exp",
    "rprec": "r_precision",
}

DEFAULT_MEASURES: tuple[str, ...] = (
    "hit_rate",
    "precision",
    "recall",
    "mrr",
    "ndcg",
    "map",
    "r_precision",
    "judged",
)
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)

_MEASURE_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:@\s*(\S+?))?\s*$")


@dataclass(frozen=True)
class Measure:
    """A registry measure with its cutoff (``k=None``: no cutoff). ``label`` is the canonical
    measure string, used as the column name (``"ndcg@5"``, ``"mrr"``, ``"r_precision"``)."""

    name: str
    k: int | None = None

    @property
    def label(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def definition(self) -> MeasureDef:
        return MEASURES[self.name]

    def __call__(self, ranking: Ranking, grades: Grades, threshold: int = 1) -> float | None:
        return self.definition.func(ranking, grades, self.k, threshold)

    def __str__(self) -> str:
        return self.label


def _split(text: str) -> tuple[str, int | None]:
    m = _MEASURE_RE.match(text) if isinstance(text, str) else None
    if m is None:
        raise InputError(
            f"cannot parse measure {text!r}: expected NAME or NAME@K, e.g. 'ndcg@5'",
            field="measures",
        )
    raw_name, raw_k = m.group(1).lower(), m.group(2)
    name = ALIASES.get(raw_name, raw_name)
    if name not in MEASURES:
        known = ", ".join(MEASURES)
        raise InputError(f"unknown measure {m.group(1)!r} (known: {known})", field="measures")
    k: int | None = None
    if raw_k is not None:
        if not raw_k.isdigit() or int(raw_k) < 1:
            raise InputError(
                f"measure {text!r}: the cutoff after '@' must be an integer >= 1",
                field="measures",
            )
        k = int(raw_k)
        if MEASURES[name].cutoff == "none":
            raise InputError(f"measure {name!r} takes no cutoff (got {text!r})", field="measures")
    return name, k


def parse_measure(text: str) -> Measure:
    """Parse one measure string, ``NAME`` or ``NAME@K`` (case-insensitive, aliases allowed).

    Raises :class:`InputError` for an unknown name, a bad cutoff, a cutoff on ``r_precision``,
    or a missing cutoff on a measure that needs one (``hit_rate``, ``precision``, ``recall``,
    ``ndcg*``, ``judged``). Bare ``mrr`` and ``map`` mean "no cutoff" (the whole ranking).
    """
    name, k = _split(text)
    if k is None and MEASURES[name].cutoff == "required":
        raise InputError(f"measure {name!r} needs a cutoff, e.g. '{name}@5'", field="measures")
    return Measure(name, k)


def resolve_measures(
    measures: str | Iterable[str | Measure] | None = None, ks: Iterable[int] | None = None
) -> list[Measure]:
    """Expand measure strings into :class:`Measure` objects, in order, without duplicates.

    A string with ``@k`` is taken as is. A bare name of a measure that needs a cutoff is
    expanded over ``ks`` (``["precision"], ks=[1, 5]`` -> ``precision@1, precision@5``); bare
    ``mrr``/``map`` (no cutoff) and ``r_precision`` are not expanded. ``measures`` may be one
    comma-separated string. Defaults: :data:`DEFAULT_MEASURES` and :data:`DEFAULT_KS`.
    """
    if measures is None:
        measures = DEFAULT_MEASURES
    if isinstance(measures, str):
        measures = [m for m in measures.split(",") if m.strip()]
    ks_list = list(DEFAULT_KS if ks is None else ks)
    for k in ks_list:
        _check_k(k)
    out: list[Measure] = []
    for item in measures:
        if isinstance(item, Measure):
            expanded = [item]
        else:
            name, cutoff = _split(item)
            if cutoff is None and MEASURES[name].cutoff == "required":
                if not ks_list:
                    raise InputError(
                        f"measure {name!r} needs a cutoff: write '{name}@K' or give ks",
                        field="measures",
                    )
                expanded = [Measure(name, kk) for kk in ks_list]
            else:
                expanded = [Measure(name, cutoff)]
        for m in expanded:
            if m not in out:
                out.append(m)
    return out


def _check_inputs(ranking: Ranking, grades: Grades) -> None:
    seen: set[str] = set()
    for rank, c in enumerate(ranking, start=1):
        if c in seen:
            raise InputError(f"chunk id {c!r} appears twice in the ranking (again at rank {rank})")
        seen.add(c)
    for c, g in grades.items():
        if isinstance(g, bool) or not isinstance(g, int) or g < 0:
            raise InputError(f"chunk {c!r}: grade must be an integer >= 0, got {g!r}")


def evaluate_ranking(
    ranking: Ranking,
    grades: Grades,
    measures: str | Iterable[str | Measure] | None = None,
    ks: Iterable[int] | None = None,
    threshold: int = 1,
) -> dict[str, float | None]:
    """All requested measures for one ranking: ``{label: value or None}``, in the order of
    :func:`resolve_measures`. Checks that chunk ids are unique and grades are ints >= 0."""
    _check_threshold(threshold)
    resolved = resolve_measures(measures, ks)
    ranking = list(ranking)
    _check_inputs(ranking, grades)
    return {m.label: m(ranking, grades, threshold) for m in resolved}
