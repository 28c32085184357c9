"""Embedded state stores: SQLite files under ``WEBRACE_DATA_DIR``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from webrace.backends.base import UrdStore
from webrace.urd import Urd

_URD_SCHEMA = """
CREATE TABLE IF NOT EXISTS urd (
    id        TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    url       TEXT NOT NULL,
    next_due  INTEGER NOT NULL,
    xml       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS urd_next_due ON urd(next_due);
"""


def connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class SqliteUrdStore(UrdStore):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = connect(self.path)
        self.conn.executescript(_URD_SCHEMA)

    def put_many(self, urds: Iterable[Urd]) -> None:
        rows = [(u.id, u.owner, u.url, u.next_due, u.to_xml()) for u in urds]
        with self._transaction():
            self.conn.executemany(
                "INSERT OR REPLACE INTO urd (id, owner, url, next_due, xml) VALUES (?, ?, ?, ?, ?)", rows
            )

    def remove(self, ids: Iterable[str]) -> list[str]:
        removed = []
        with self._transaction():
            for urd_id in ids:
                if self.conn.execute("DELETE FROM urd WHERE id = ?", (urd_id,)).rowcount:
                    removed.append(urd_id)
        return removed

    def get(self, urd_id: str) -> Urd | None:
        row = self.conn.execute("SELECT xml FROM urd WHERE id = ?", (urd_id,)).fetchone()
        return Urd.from_xml(row[0]) if row else None

    def all(self) -> list[Urd]:
        return [Urd.from_xml(x) for (x,) in self.conn.execute("SELECT xml FROM urd ORDER BY id")]

    def due(self, now_ms: int) -> list[Urd]:
        rows = self.conn.execute("SELECT xml FROM urd WHERE next_due <= ? ORDER BY next_due, id", (now_ms,))
        return [Urd.from_xml(x) for (x,) in rows]

    def mark_checked(self, ids: Iterable[str], at_ms: int) -> None:
        with self._transaction():
            for urd_id in ids:
                row = self.conn.execute("SELECT xml FROM urd WHERE id = ?", (urd_id,)).fetchone()
                if row is None:  # removed while it was being crawled
                    continue
                urd = Urd.from_xml(row[0]).checked(at_ms)
                self.conn.execute(
                    "UPDATE urd SET next_due = ?, xml = ? WHERE id = ?", (urd.next_due, urd.to_xml(), urd_id)
                )

    def close(self) -> None:
        self.conn.close()

    def _transaction(self) -> sqlite3.Connection:
        return _Transaction(self.conn)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception: all or nothing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
