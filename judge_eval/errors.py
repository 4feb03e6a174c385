"""Errors that judge-eval raises on purpose.

Every error a user can cause by giving us bad input is an :class:`InputError`: it names the file,
the line (or row) and the field, so the message alone is enough to fix the input. The CLI turns
it into exit code 2 and writes nothing.
"""

from __future__ import annotations

from pathlib import Path


class JudgeEvalError(Exception):
    """Base class of every error judge-eval raises on purpose."""


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
        path: str | Path | None = None,
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


class ConfigError(JudgeEvalError):
    """The tool is not configured to do what was asked (e.g. no judge endpoint)."""


class JudgeCallError(JudgeEvalError):
    """A judge call failed after its retries (or could not be repaired).

    ``cause`` is a short machine-readable reason (``rate_limited``, ``server_error``,
    ``timeout``, ``connection``, ``invalid_output``, ``truncated``, ``http_400``, ``budget``,
    ``cache_miss`` ...); the message is for humans.
    """

    def __init__(self, cause: str, message: str, *, calls: int = 0, usage: object | None = None) -> None:
        self.cause = cause
        self.message = message
        #: HTTP requests the failed task sent (retries and repairs included) and the tokens the
        #: server reported for them: a failure is not free, and budgets must see it.
        self.calls = calls
        self.usage = usage
        super().__init__(f"{cause}: {message}")
