"""Why a value is missing: the vocabulary of ``missing.csv``'s ``reason`` column.

A missing value is never a 0: it is left out of the mean and counted in ``n_missing``, with one
of these reasons (a judge error may carry its causes after a colon, ``judge_error:timeout``, and
a judge-labelled measure says the failure was ``(in the judged pool)``).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["MissingReason"]


class MissingReason(str, Enum):
    """The reasons, with their kind (:attr:`kind`): ``undefined``, ``judge error`` or ``not judged``.

    - ``NO_REFERENCE``: the question has no reference answer (undefined).
    - ``NO_STATEMENTS``: the reference decomposed into no statement, m = 0 (undefined).
    - ``JUDGE_ERROR``: a judge call the value needs failed after its retries (judge error).
    - ``BUDGET``: a budget stopped the judge before that call (not judged).
    - ``ABORTED``: the endpoint refused the run before that call (not judged).
    - ``NO_RELEVANT_IN_POOL``: no chunk of the judged pool is judge-relevant, so judge-labelled
      recall and nDCG have no denominator (undefined).
    - ``NO_RELEVANT_LABEL``: no chunk is labelled relevant by humans (undefined).
    - ``NO_HUMAN_LABEL``: humans labelled no chunk of this question (not labelled), so its
      human-labelled measures have no value.
    """

    NO_REFERENCE = "no_reference"
    NO_STATEMENTS = "no_statements"
    JUDGE_ERROR = "judge_error"
    BUDGET = "budget"
    ABORTED = "aborted"
    NO_RELEVANT_IN_POOL = "undefined: no chunk in the judged pool is relevant"
    NO_RELEVANT_LABEL = "undefined: no relevant human label"
    NO_HUMAN_LABEL = "no_human_label"

    @classmethod
    def of(cls, reason: str) -> MissingReason:
        """The reason a ``missing.csv`` text starts with (``judge_error:timeout`` -> JUDGE_ERROR;
        ``decompose_failed`` is a judge error)."""
        for member in cls:
            if reason == member.value or reason.startswith(member.value + ":") or reason.startswith(member.value + " "):
                return member
        if reason == "decompose_failed":
            return cls.JUDGE_ERROR
        raise ValueError(f"unknown missing-value reason {reason!r}")

    @property
    def kind(self) -> str:
        """``judge error``, ``not judged (budget)`` or ``undefined``."""
        if self is MissingReason.JUDGE_ERROR:
            return "judge error"
        if self is MissingReason.BUDGET:
            return "not judged (budget)"
        if self is MissingReason.ABORTED:
            return "not judged (run stopped)"
        if self is MissingReason.NO_HUMAN_LABEL:
            return "not labelled"
        return "undefined"
