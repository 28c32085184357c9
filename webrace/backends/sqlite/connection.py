"""What every embedded store shares: opening an SQLite file (WAL, private to the user, one
clear line when the place is unusable), explicit transactions, and one call at a time on a
connection shared by threads."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webrace.datadir import private, unusable


def connect(path: Path, threads: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL. ``threads``: usable
    from any thread (its store then serialises calls with a lock of its own)."""
    conn = None
    try:  # a directory, a file that is no database, a place this user cannot write: one line
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=not threads)
        conn.execute("PRAGMA journal_mode=WAL")
    except (OSError, sqlite3.DatabaseError) as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise  # busy past the timeout: not the place's fault
        raise unusable(path, exc) from None
    conn.execute("PRAGMA synchronous=NORMAL")
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):  # private whatever the umask
        private(path.with_name(name))
    return conn


def serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    """One call at a time on the store's connection, from whichever thread."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return call


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception: all or nothing.
    ``immediate=False``: a plain BEGIN, which locks only the databases it writes."""

    def __init__(self, conn: sqlite3.Connection, immediate: bool = True) -> None:
        self.conn = conn
        self.begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute(self.begin)
        return self.conn

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
