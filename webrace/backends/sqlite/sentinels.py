"""The embedded sentinel store (``sentinels.sqlite``): sentinels, the Page Digests they
compare with, and their notifications."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from webrace.backends.base import SentinelStore
from webrace.backends.sqlite.connection import Transaction, connect, serialised
from webrace.records.sentinel import Sentinel
from webrace.urd import MAX_TIME_MS

_SENTINEL_SCHEMA = """
CREATE TABLE IF NOT EXISTS sentinel (
    id        TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    url       TEXT NOT NULL,
    next_due  INTEGER NOT NULL,
    seen      TEXT,
    json      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sentinel_due ON sentinel(next_due);
CREATE INDEX IF NOT EXISTS sentinel_url ON sentinel(url);
CREATE TABLE IF NOT EXISTS pagedigest (
    sha   TEXT PRIMARY KEY,
    data  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS notification (
    id        TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    sentinel  TEXT NOT NULL,
    at        INTEGER NOT NULL,
    json      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notification_owner ON notification(owner, at);
CREATE TABLE IF NOT EXISTS notedigest (
    note  TEXT NOT NULL,
    sha   TEXT NOT NULL,
    PRIMARY KEY (note, sha)
);
CREATE INDEX IF NOT EXISTS notedigest_sha ON notedigest(sha);
"""


class SqliteSentinelStore(SentinelStore):
    def __init__(self, path: str | Path) -> None:
        self.sentinel_cls = Sentinel
        self.lock = threading.RLock()  # usable from any thread (the crawl looks sentinels up in worker threads)
        self.conn = connect(Path(path), threads=True)
        self.conn.executescript(_SENTINEL_SCHEMA)
        if "asked" not in {row[1] for row in self.conn.execute("PRAGMA table_info(sentinel)")}:
            self.conn.execute("ALTER TABLE sentinel ADD COLUMN asked INTEGER NOT NULL DEFAULT 0")

    @serialised
    def add(self, sentinels: Iterable[Any]) -> list[str]:
        ids = []
        with Transaction(self.conn):
            for s in sentinels:
                self.conn.execute(
                    "INSERT INTO sentinel (id, owner, url, next_due, seen, json, asked) "
                    "VALUES (?, ?, ?, 0, NULL, ?, 1) ON CONFLICT(id) DO UPDATE SET json = excluded.json, asked = 1",
                    (s.id, s.owner, s.url, s.to_json()))
                ids.append(s.id)
        return ids

    @serialised
    def remove(self, ids: Iterable[str]) -> list[str]:
        removed = []
        with Transaction(self.conn):
            for i in ids:
                if self.conn.execute("DELETE FROM sentinel WHERE id = ?", (i,)).rowcount:
                    removed.append(i)
        return removed

    @serialised
    def all(self, owner: str | None = None) -> list[tuple[Any, int, str | None]]:
        where = " WHERE owner = ?" if owner else ""
        query = f"SELECT json, next_due, seen FROM sentinel{where} ORDER BY url, id"  # noqa: S608 - names are module constants; values are bound
        rows = self.conn.execute(query, (owner,) if owner else ())
        return [(self.sentinel_cls.from_json(j), due, seen) for j, due, seen in rows]

    @serialised
    def due(self, now_ms: int) -> list[tuple[Any, str | None]]:
        rows = self.conn.execute("SELECT json, seen, asked FROM sentinel WHERE next_due <= ? ORDER BY url, id",
                                 (now_ms,))
        return [(replace(self.sentinel_cls.from_json(j), asked=bool(asked)), seen) for j, seen, asked in rows]

    @serialised
    def watching(self, url: str) -> list[tuple[Any, str | None]]:
        rows = self.conn.execute("SELECT json, seen FROM sentinel WHERE url = ? ORDER BY id", (url,))
        return [(self.sentinel_cls.from_json(j), seen) for j, seen in rows]

    @serialised
    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        with Transaction(self.conn):
            if ids is None:
                self.conn.execute("UPDATE sentinel SET next_due = ?, asked = 1", (at_ms,))
                return [i for (i,) in self.conn.execute("SELECT id FROM sentinel ORDER BY id")]
            return [i for i in ids if self.conn.execute("UPDATE sentinel SET next_due = ?, asked = 1 WHERE id = ?",
                                                        (at_ms, i)).rowcount]

    @serialised
    def reclock(self, now_ms: int) -> int:
        with Transaction(self.conn):  # the index's range of sentinels not due, one statement
            return self.conn.execute(
                "UPDATE sentinel SET next_due = :now, asked = 1 WHERE next_due > :now "
                "AND next_due - :now > CAST(json_extract(json, '$.every') AS INTEGER)", {"now": now_ms}).rowcount

    @serialised
    def checked(self, ids: Iterable[str], at_ms: int, seen: str | None = None) -> None:
        with Transaction(self.conn):
            for i in ids:
                row = self.conn.execute("SELECT json FROM sentinel WHERE id = ?", (i,)).fetchone()
                if row is None:
                    continue  # removed meanwhile
                every = self.sentinel_cls.from_json(row[0]).every
                if seen is None:
                    self.conn.execute("UPDATE sentinel SET next_due = ?, asked = 0 WHERE id = ?",
                                      (min(at_ms + every, MAX_TIME_MS), i))
                else:
                    self.conn.execute("UPDATE sentinel SET next_due = ?, seen = ?, asked = 0 WHERE id = ?",
                                      (min(at_ms + every, MAX_TIME_MS), seen, i))

    @serialised
    def advance(self, expected: Mapping[str, str | None], at_ms: int, seen: str, data: bytes,
                notes: Iterable[Any]) -> list[str]:
        with Transaction(self.conn):
            moved = [i for i, was in expected.items() if self._reseat(i, was, at_ms, seen)]
            if moved:
                self.conn.execute("INSERT OR IGNORE INTO pagedigest (sha, data) VALUES (?, ?)", (seen, data))
                self._notify(n for n in notes if n.sentinel in moved)
        return moved

    def _reseat(self, sentinel_id: str, was: str | None, at_ms: int, seen: str) -> bool:
        """Move the sentinel to ``seen`` if its baseline is still ``was``."""
        row = self.conn.execute("SELECT json, seen FROM sentinel WHERE id = ?", (sentinel_id,)).fetchone()
        if row is None or (row[1] or None) != (was or None):
            return False
        every = self.sentinel_cls.from_json(row[0]).every
        self.conn.execute("UPDATE sentinel SET next_due = ?, seen = ?, asked = 0 WHERE id = ?",
                          (min(at_ms + every, MAX_TIME_MS), seen, sentinel_id))
        return True

    @serialised
    def put_digest(self, sha: str, data: bytes) -> None:
        with Transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO pagedigest (sha, data) VALUES (?, ?)", (sha, data))

    @serialised
    def get_digest(self, sha: str) -> bytes | None:
        row = self.conn.execute("SELECT data FROM pagedigest WHERE sha = ?", (sha,)).fetchone()
        return bytes(row[0]) if row else None

    @serialised
    def gc_digests(self) -> int:
        with Transaction(self.conn):
            return self.conn.execute("DELETE FROM pagedigest WHERE sha NOT IN "
                                     "(SELECT seen FROM sentinel WHERE seen IS NOT NULL) "
                                     "AND sha NOT IN (SELECT sha FROM notedigest)").rowcount

    @serialised
    def add_notifications(self, notes: Iterable[Any]) -> int:
        with Transaction(self.conn):
            return self._notify(notes)

    def _notify(self, notes: Iterable[Any]) -> int:
        """Keep the notes (a repeated id is ignored) and the digests their diffs need."""
        notes = list(notes)
        before = self.conn.total_changes
        self.conn.executemany(
            "INSERT OR IGNORE INTO notification (id, owner, sentinel, at, json) VALUES (?, ?, ?, ?, ?)",
            [(n.id, n.owner, n.sentinel, n.at, json.dumps(n.to_dict(), ensure_ascii=False)) for n in notes])
        added = self.conn.total_changes - before
        self.conn.executemany("INSERT OR IGNORE INTO notedigest (note, sha) VALUES (?, ?)",
                              [(n.id, sha) for n in notes for sha in _note_digests(n)])
        return added

    @serialised
    def notifications(self, owner: str, since: int = 0) -> list[dict]:
        rows = self.conn.execute("SELECT json FROM notification WHERE owner = ? AND at >= ? ORDER BY at DESC, id",
                                 (owner, since))
        return [json.loads(j) for (j,) in rows]

    @serialised
    def close(self) -> None:
        self.conn.close()


def _note_digests(note: Any) -> list[str]:
    """The digests a notification's diff is built from (none for one made without them)."""
    return [sha for sha in (getattr(note, "before_digest", ""), getattr(note, "after_digest", "")) if sha]
