"""Errors that judge-eval raises on purpose, and the exit code of each.

Every error a user can cause by giving us bad input is an :class:`InputError`: it names the file,
the line (or row) and the field, so the message alone is enough to fix the input. The CLI turns
every :class:`JudgeEvalError` into one message on stderr and its ``exit_code``
(:class:`ExitCode`), and writes nothing.
"""

from __future__ import annotations

import os
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge_eval.usage import Usage


class ExitCode(IntEnum):
    """What the ``judge-eval`` command's exit status means (the README's table is this one).

    - ``OK`` (0): done; every number was computed (failed judge items, if any, are within
      ``--max-errors`` and reported).
    - ``REGRESSION`` (1): reserved for audits: a metric regressed. ``score`` and ``metrics``
      never use it.
    - ``USAGE`` (2): bad input or configuration (a file, a line, an option); nothing was written.
    - ``JUDGE_FAILED`` (3): the judge did not deliver: it could not be reached or refused us
      (authentication, unknown model, connection refused: the run stops at once), more judge
      items failed than ``--max-errors`` allows, or a budget stopped it before every task ran.
      Results are written when the run got that far, marked as such.
    - ``INTERNAL`` (70, ``EX_SOFTWARE``): a bug in judge-eval; the traceback is printed.
    - ``INTERRUPTED`` (130): Ctrl-C; answers already received stay in the cache, so running the
      same command again resumes.
    """

    OK = 0
    REGRESSION = 1
    USAGE = 2
    JUDGE_FAILED = 3
    INTERNAL = 70
    INTERRUPTED = 130


class JudgeEvalError(Exception):
    """Base class of every error judge-eval raises on purpose."""

    #: the CLI's exit status for this error
    exit_code: ExitCode = ExitCode.USAGE


class InputError(JudgeEvalError, ValueError):
    """Bad input: names the file, the line (or row) and the field.

    ``line`` is 1-based (a line of a text file, or a data row of a CSV/Parquet file, where the
    first data row is row 1; ``kind`` says which). ``field`` is the JSON field or column name,
    dotted for nested fields (``contexts.2.id``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
        kind: str = "line",
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.kind = kind
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.line is not None:
            where.append(f"{self.kind} {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ConfigError(JudgeEvalError, ValueError):
    """The tool is not configured to do what was asked (e.g. no judge endpoint, an option out of
    range, an output folder we must not overwrite). ``option`` names the option when there is
    one (``--concurrency``)."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.message = message
        self.option = option
        super().__init__(f"{option}: {message}" if option else message)


#: Judge error causes that mean the endpoint will refuse every call (wrong key, no such model or
#: path, nothing listening): the first one stops the run (the runner sends no new task, the
#: transport no request still waiting), instead of paying for retries of every remaining task.
FATAL_CAUSES = frozenset({"http_401", "http_403", "http_404", "connection_refused"})


class JudgeUnavailableError(JudgeEvalError):
    """The judge endpoint refused us or could not be reached (authentication, unknown model or
    path, connection refused), so the run stopped before paying for more calls. ``cause`` is the
    judge error cause (``http_401``, ``connection_refused`` ...); ``accounting`` what was spent;
    ``info`` what was being scored (``judge``, ``prompts``, ``dataset``, ``settings``, as in
    ``summary.json``), set by :func:`judge_eval.evaluate` (None when raised elsewhere)."""

    exit_code = ExitCode.JUDGE_FAILED

    def __init__(self, cause: str, message: str, *, accounting: dict | None = None,
                 info: dict | None = None) -> None:
        self.cause = cause
        self.message = message
        self.accounting = accounting or {}
        self.info = info
        super().__init__(message)


class Interrupted(JudgeEvalError):
    """The user interrupted a run (Ctrl-C). ``stored`` is the number of judge answers this run
    wrote to the cache before stopping (they are reused by the next run)."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, message: str, *, stored: int = 0) -> None:
        self.stored = stored
        super().__init__(message)


class JudgeCallError(JudgeEvalError):
    """A judge call failed after its retries (or could not be repaired).

    ``cause`` is a short machine-readable reason (``rate_limited``, ``server_error``,
    ``timeout``, ``connection``, ``invalid_output``, ``truncated``, ``http_400``, ``budget``,
    ``cache_miss`` ...); the message is for humans.
    """

    def __init__(self, cause: str, message: str, *, calls: int = 0, usage: Usage | None = None) -> None:
        self.cause = cause
        self.message = message
        #: HTTP requests the failed task sent (retries and repairs included) and the tokens the
        #: server reported for them: a failure is not free, and budgets must see it.
        self.calls = calls
        self.usage = usage
        super().__init__(f"{cause}: {message}")


class DataWarning(UserWarning):
    """Input that is accepted but probably not what was meant (e.g. qrels for unknown questions,
    a run that ranks questions the data does not have). The CLI prints each as one line."""
