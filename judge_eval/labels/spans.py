"""Where an evidence quote sits in its chunk: character offsets for highlighting.

The evidence check (:mod:`judge_eval.judge.evidence`) accepts a quote when each of its parts
(split on ``...``) is found in the chunk in order, after normalisation (NFKC, ASCII quotes and
dashes, case-fold, collapsed whitespace), exactly or - for parts of 20+ characters - fuzzily.
:func:`locate` finds the same parts and maps them back to the original text, so a quote with
an elision gives two spans.

Offsets are ``[start, end)`` in Unicode code points of the chunk text as stored (Python string
indices), the unit Label Studio's ``Text`` regions and Argilla's span suggestions use.
"""

from __future__ import annotations

from rapidfuzz import fuzz

from judge_eval.judge.evidence import MIN_FUZZY_CHARS, normalize, quote_parts

__all__ = ["locate", "normalized_with_map"]


def normalized_with_map(text: str) -> tuple[str, list[int]]:
    """``text`` normalised character by character as :func:`~judge_eval.judge.evidence.normalize`
    does, and for each character of the result the index of the original character it came
    from. (Per character, so a combining sequence NFKC would compose stays apart; the fuzzy
    match covers that rare case.)"""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                where.append(i)
            continue
        for c in normalize(ch):
            out.append(c)
            where.append(i)
    return "".join(out), where


def locate(quote: str, chunk: str, *, fuzzy_threshold: float = 90.0) -> list[tuple[int, int]]:
    """The spans of ``chunk`` that ``quote`` matches, one per part, in order; ``[]`` when the
    quote (or one of its parts) cannot be found."""
    norm, where = normalized_with_map(chunk)
    spans: list[tuple[int, int]] = []
    pos = 0
    for part in quote_parts(quote):
        found = norm.find(part, pos)
        if found >= 0:
            start, end = found, found + len(part)
        elif len(part) >= MIN_FUZZY_CHARS and pos < len(norm):
            al = fuzz.partial_ratio_alignment(part, norm[pos:], score_cutoff=fuzzy_threshold)
            if al is None or al.dest_end <= al.dest_start:
                return []
            start, end = pos + al.dest_start, pos + al.dest_end
        else:
            return []
        spans.append((where[start], where[end - 1] + 1))
        pos = end
    return spans
