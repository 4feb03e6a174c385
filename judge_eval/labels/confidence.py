"""How sure the judge was of one verdict: a confidence in [0, 1] and the signals behind it.

With several samples per chunk (``score --samples N``, N > 1) the confidence is the **agreement
among the samples**: the share of samples that said exactly what the final verdict says, the
same grade and the same set of supported statements (a sample's claims are counted as it made
them, before the evidence check; the final verdict is the vote over verified claims).

With one sample it is a documented **proxy** built from signals that the verdict contradicts
itself, starting at 1 and taking off

- 0.4 for ``rejected_evidence``: a support claim failed the evidence check (its quote is not in
  the chunk) or named a statement that does not exist;
- 0.4 for ``grade_without_support``: grade 2-3 ("supports the answer") without a single verified
  supported statement (the grade was capped to 1), or ``support_without_grade``: grade 0-1 while
  a statement is supported with verified evidence;
- 0.2 for ``boundary``: the proposed grade is 1 or 2, the two sides of the default relevance
  threshold (judge grade >= 2 counts as relevant), where a one-step change flips relevance;

and never going below 0. So 1.0 = no signal, 0.0 = every signal at once. A failed verdict
(``error``) has no proposal and confidence 0. The signals are listed with every item in both
cases, so a reviewer sees why an item came first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SIGNALS", "confidence", "signals"]

#: signal -> (tenths of confidence it takes off in the one-sample proxy, what it means)
SIGNALS: dict[str, tuple[int, str]] = {
    "error": (10, "the judge failed on this chunk: no proposal"),
    "rejected_evidence": (4, "a support claim failed the evidence check or named no statement"),
    "grade_without_support": (4, "grade 2-3 but no verified supported statement (capped to 1)"),
    "support_without_grade": (4, "grade 0-1 but a statement is supported with verified evidence"),
    "boundary": (2, "grade 1 or 2: one step flips relevance (threshold 2)"),
    "samples_disagree": (0, "the samples did not all say the same"),
}


def signals(verdict: Mapping[str, Any]) -> list[str]:
    """The signals of one row of ``verdicts.jsonl``, in the order of :data:`SIGNALS`."""
    if verdict.get("error") or verdict.get("grade") is None:
        return ["error"]
    out = []
    grade = int(verdict["grade"])
    capped = verdict.get("capped_grade")
    proposed = grade if capped is None else int(capped)
    supported = list(verdict.get("supported") or [])
    if int(verdict.get("unverified") or 0) or int(verdict.get("invalid_statement") or 0):
        out.append("rejected_evidence")
    if grade >= 2 and not supported:
        out.append("grade_without_support")
    if grade <= 1 and supported:
        out.append("support_without_grade")
    if proposed in (1, 2):
        out.append("boundary")
    if _sample_agreement(verdict) not in (None, 1.0):
        out.append("samples_disagree")
    return out


def _sample_agreement(verdict: Mapping[str, Any]) -> float | None:
    grades: Sequence[int] | None = verdict.get("sample_grades")
    claimed: Sequence[Sequence[int]] | None = verdict.get("sample_supported")
    if not grades or len(grades) < 2:
        return None
    claimed = claimed if claimed is not None and len(claimed) == len(grades) else [[]] * len(grades)
    final = set(verdict.get("supported") or [])
    agree = sum(1 for g, s in zip(grades, claimed, strict=True) if g == verdict["grade"] and set(s) == final)
    return agree / len(grades)


def confidence(verdict: Mapping[str, Any]) -> float:
    """The confidence of one row of ``verdicts.jsonl`` (see the module docstring)."""
    found = signals(verdict)
    if "error" in found:
        return 0.0
    agreement = _sample_agreement(verdict)
    if agreement is not None:
        return agreement
    tenths = 10 - sum(SIGNALS[s][0] for s in found)
    return max(tenths, 0) / 10
