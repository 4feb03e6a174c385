"""One SQLite write transaction, shared by the response cache and the audit history."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["write_transaction"]


@contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` (take the write lock now, so a reader cannot upgrade into a deadlock)
    ... ``COMMIT``; on any error ``ROLLBACK``, unless SQLite already rolled back (a full disk, an
    I/O error). ``db`` must be in autocommit mode (``isolation_level=None``)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
