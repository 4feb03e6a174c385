"""The evidence check: a support claim counts only if its quote is really in the chunk.

A judge answers ``judge_chunk`` with support claims ``(statement number, quote)``. :func:`verify`
keeps a claim only when the quote can be found in the chunk, so a judge cannot invent support.
It runs on every answer, cached or not (see :mod:`judge_eval.judge.protocol`).

Normalisation (applied to the quote and to the chunk alike), :func:`normalize`:

1. Unicode NFKC (full-width letters, ligatures, non-breaking spaces, ``…`` -> ``...``);
2. typographic quotes and dashes mapped to ASCII (``‘’`` -> ``'``, ``“”`` -> ``"``,
   ``–—−‐‑`` -> ``-``); zero-width characters and soft hyphens removed;
3. case-fold;
4. every run of whitespace collapsed to one space, ends stripped.

Quote matching, :func:`quote_found`:

- elisions ``[...]`` and ``(...)`` become ``...``; the quote is split on ``...`` into parts;
  each part is stripped of surrounding whitespace, quotes and ``.,;:!?`` and parts without a
  letter or digit are dropped. A quote with no part left (empty, ``"..."``) is **unverified**.
- every part must be found in the chunk, **in order** (each part after the end of the previous);
- a part is found if it is a substring of the normalised chunk (exact), or - only for parts of
  at least ``min_fuzzy_chars`` (20) characters - if ``rapidfuzz.fuzz.partial_ratio`` against the
  rest of the chunk is >= ``fuzzy_threshold`` (90) **and** every number in the part (``\\d+``
  with ``.``/``,`` groups) appears as a number in the aligned window of the chunk. So one typo
  in a long quote is forgiven, but a changed number (``2%`` vs ``3%``) or a short invented
  quote is not. A part longer than the remaining chunk is compared with ``fuzz.ratio``
  (``partial_ratio`` would otherwise align the *chunk* inside the quote and score 100 for a quote
  that is the chunk plus invented text).

The check proves the quote exists in the chunk; it does not prove that the quote supports the
statement. That remains the judge's call.

Grades. ``grade`` is kept exactly as the judge gave it. A grade of 2 or 3 with no verified support
is recorded as is and flagged (:attr:`VerifiedVerdict.grade_without_support`);
:attr:`VerifiedVerdict.capped_grade` gives ``min(grade, 1)`` in that case. Whether a chunk is
*useful* is decided in :mod:`judge_eval.metrics.judged` by configuration (``support`` rule by
default, or ``grade >= threshold``), not here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from rapidfuzz import fuzz

from judge_eval.judge.protocol import ChunkVerdict

__all__ = [
    "RejectedClaim",
    "VerifiedVerdict",
    "normalize",
    "quote_found",
    "quote_parts",
    "verify",
]

#: Parts shorter than this (normalised characters) must match exactly.
MIN_FUZZY_CHARS = 20

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
        "\u00ab": '"', "\u00bb": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2015": "-", "\u2212": "-",
        "\u200b": None, "\u200c": None, "\u200d": None, "\u2060": None, "\ufeff": None,
        "\u00ad": None,
    }
)
_WS = re.compile(r"\s+")
_ELISION = re.compile(r"\[\s*\.\.\.\s*\]|\(\s*\.\.\.\s*\)")
_ELLIPSIS = re.compile(r"\.{3,}")
_EDGE = " \"'`.,;:!?"
_ALNUM = re.compile(r"[^\W_]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: characters added on each side of a fuzzy alignment before looking for the part's numbers
_WINDOW_SLACK = 3


def normalize(text: str) -> str:
    """NFKC, ASCII quotes and dashes, zero-width characters removed, case-fold, whitespace
    collapsed to single spaces and stripped."""
    text = unicodedata.normalize("NFKC", text).translate(_TRANSLATE).casefold()
    return _WS.sub(" ", text).strip()


def quote_parts(quote: str) -> list[str]:
    """The normalised parts of a quote: split on ``...`` (and ``[...]``/``(...)``), each stripped
    of surrounding whitespace, quote marks and ``.,;:!?``; parts without a letter or digit are
    dropped. ``[]`` means there is nothing to verify."""
    text = _ELISION.sub("...", normalize(quote))
    parts = (p.strip(_EDGE) for p in _ELLIPSIS.split(text))
    return [p for p in parts if _ALNUM.search(p)]


def _numbers_in(part: str, window: str) -> bool:
    have = set(_NUMBER.findall(window))
    return all(n in have for n in _NUMBER.findall(part))


def _find_part(
    part: str, chunk: str, start: int, fuzzy_threshold: float, min_fuzzy_chars: int
) -> tuple[int, Literal["exact", "fuzzy"]] | None:
    """End position in ``chunk`` of the match of ``part`` at or after ``start``, and how it
    matched; ``None`` if not found."""
    pos = chunk.find(part, start)
    if pos >= 0:
        return pos + len(part), "exact"
    if len(part) < min_fuzzy_chars:
        return None
    rest = chunk[start:]
    if not rest:
        return None
    if len(part) > len(rest):
        if fuzz.ratio(part, rest) >= fuzzy_threshold and _numbers_in(part, rest):
            return len(chunk), "fuzzy"
        return None
    al = fuzz.partial_ratio_alignment(part, rest, score_cutoff=fuzzy_threshold)
    if al is None or al.score < fuzzy_threshold:
        return None
    lo = max(0, al.dest_start - _WINDOW_SLACK)
    hi = min(len(rest), al.dest_end + _WINDOW_SLACK)
    if not _numbers_in(part, rest[lo:hi]):
        return None
    return start + al.dest_end, "fuzzy"


def quote_found(
    quote: str,
    chunk: str,
    *,
    fuzzy_threshold: float = 90.0,
    min_fuzzy_chars: int = MIN_FUZZY_CHARS,
) -> Literal["exact", "fuzzy"] | None:
    """Whether ``quote`` is in ``chunk`` under the rules of this module: ``"exact"`` if every
    part matched exactly, ``"fuzzy"`` if at least one part needed the fuzzy match, ``None`` if
    the quote is empty or some part is not found (in order)."""
    return _match(quote_parts(quote), normalize(chunk), fuzzy_threshold, min_fuzzy_chars)


def _match(
    parts: list[str], chunk: str, fuzzy_threshold: float, min_fuzzy_chars: int
) -> Literal["exact", "fuzzy"] | None:
    if not parts:
        return None
    pos = 0
    how: Literal["exact", "fuzzy"] = "exact"
    for part in parts:
        found = _find_part(part, chunk, pos, fuzzy_threshold, min_fuzzy_chars)
        if found is None:
            return None
        pos, kind = found
        if kind == "fuzzy":
            how = "fuzzy"
    return how


@dataclass(frozen=True)
class RejectedClaim:
    """A support claim that did not count, for audits.

    ``statement`` is the number as the judge wrote it (1-based); ``cause`` is
    ``"invalid_statement"`` (outside 1..n), ``"unverified"`` (quote empty or not in the chunk) or
    ``"duplicate"`` (verified, but the statement already had verified evidence)."""

    statement: int
    evidence: str
    cause: Literal["invalid_statement", "unverified", "duplicate"]


@dataclass(frozen=True)
class VerifiedVerdict:
    """A judge's verdict on one chunk after the evidence check.

    Every claim of the verdict lands in exactly one bucket, so
    ``len(verdict.supports) == len(supported) + unverified + invalid_statement + duplicates``.

    - ``supported``: 0-based indices of statements with at least one verified claim;
    - ``evidence``: index -> the first verified quote for it (as the judge wrote it);
    - ``fuzzy``: indices whose kept quote matched only fuzzily;
    - ``grade``: the judge's grade, unchanged (0..3); ``reason``: the judge's reason;
    - ``unverified``: claims dropped because the quote is empty or not in the chunk;
    - ``invalid_statement``: claims naming a statement number outside ``1..n``;
    - ``duplicates``: further verified claims for an already supported statement (harmless);
    - ``rejected``: every claim that did not count, with its cause.
    """

    supported: frozenset[int]
    grade: int
    evidence: dict[int, str] = field(default_factory=dict, hash=False)
    fuzzy: frozenset[int] = frozenset()
    unverified: int = 0
    invalid_statement: int = 0
    duplicates: int = 0
    reason: str = ""
    rejected: tuple[RejectedClaim, ...] = ()

    @property
    def grade_without_support(self) -> bool:
        """The judge graded 2 or 3 ("supports (part of) the answer") but no claim verified."""
        return self.grade >= 2 and not self.supported

    @property
    def capped_grade(self) -> int:
        """The grade, capped at 1 when it claims support that did not verify."""
        return min(self.grade, 1) if self.grade_without_support else self.grade


def verify(
    verdict: ChunkVerdict,
    chunk: str,
    n_statements: int,
    *,
    fuzzy_threshold: float = 90.0,
    min_fuzzy_chars: int = MIN_FUZZY_CHARS,
) -> VerifiedVerdict:
    """Check every support claim of ``verdict`` against ``chunk``.

    Claims are processed in order. A claim whose statement number is outside ``1..n_statements``
    is ``invalid_statement``; else one whose quote is not found (:func:`quote_found`) is
    ``unverified``; else, if its statement is already supported, it is a ``duplicate``; else the
    statement (0-based: number - 1) becomes supported with that quote as evidence.
    """
    if n_statements < 0:
        raise ValueError(f"n_statements must be >= 0, got {n_statements}")
    chunk_norm = normalize(chunk)
    supported: set[int] = set()
    evidence: dict[int, str] = {}
    fuzzy: set[int] = set()
    rejected: list[RejectedClaim] = []
    for claim in verdict.supports:
        if not 1 <= claim.statement <= n_statements:
            rejected.append(RejectedClaim(claim.statement, claim.evidence, "invalid_statement"))
            continue
        how = _match(quote_parts(claim.evidence), chunk_norm, fuzzy_threshold, min_fuzzy_chars)
        if how is None:
            rejected.append(RejectedClaim(claim.statement, claim.evidence, "unverified"))
            continue
        idx = claim.statement - 1
        if idx in supported:
            rejected.append(RejectedClaim(claim.statement, claim.evidence, "duplicate"))
            continue
        supported.add(idx)
        evidence[idx] = claim.evidence
        if how == "fuzzy":
            fuzzy.add(idx)
    causes = [r.cause for r in rejected]
    return VerifiedVerdict(
        supported=frozenset(supported),
        grade=verdict.grade,
        evidence=evidence,
        fuzzy=frozenset(fuzzy),
        unverified=causes.count("unverified"),
        invalid_statement=causes.count("invalid_statement"),
        duplicates=causes.count("duplicate"),
        reason=verdict.reason,
        rejected=tuple(rejected),
    )
