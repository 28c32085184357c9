"""Embedded state stores: SQLite files under ``WEBRACE_DATA_DIR``."""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, SentinelStore, UrdStore, Version
from webrace.records.aci import Aci
from webrace.records.metainfo import MetaInfo, Revisit
from webrace.records.sentinel import Sentinel
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
# URDs being added, before they are stored together (SQLite keeps temporary tables on disk).
_STAGE = "CREATE TEMP TABLE staged (id TEXT, owner TEXT, url TEXT, next_due INTEGER, xml TEXT)"
_BATCH = 1000  # rows staged per statement
SQLITE_MAX_INTEGER = 2**63 - 1


_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS metainfo (
    url  TEXT PRIMARY KEY,
    xml  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS version (
    url      TEXT NOT NULL,
    number   INTEGER NOT NULL,
    digest   TEXT NOT NULL,
    fetched  INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    status   INTEGER NOT NULL,
    header   TEXT,
    PRIMARY KEY (url, number)
);
CREATE INDEX IF NOT EXISTS version_digest ON version(digest);
CREATE TABLE IF NOT EXISTS revisit (
    url      TEXT NOT NULL,
    fetched  INTEGER NOT NULL,
    number   INTEGER NOT NULL,
    digest   TEXT NOT NULL,
    header   TEXT
);
CREATE INDEX IF NOT EXISTS revisit_url ON revisit(url, fetched);
"""


def connect(path: Path, threads: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL. ``threads``: usable
    from any thread (its store then serialises calls with a lock of its own)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=not threads)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class SqliteUrdStore(UrdStore):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = connect(self.path)
        self.conn.executescript(_URD_SCHEMA)

    def put_many(self, urds: Iterable[Urd]) -> None:
        """``urds`` may be a long iterator (a large ``urd add``): it is staged in a temporary
        table in batches, with no list of it in memory and no lock on the URD-DB while it
        runs, then stored in one short transaction. An exception from it stores nothing."""
        rows = ((u.id, u.owner, u.url, _fits(u.next_due), u.to_xml()) for u in urds)
        self.conn.execute(_STAGE)
        try:
            while batch := list(islice(rows, _BATCH)):
                with _Transaction(self.conn, immediate=False):  # writes the temporary table only
                    self.conn.executemany("INSERT INTO temp.staged VALUES (?, ?, ?, ?, ?)", batch)
            with self._transaction():
                self.conn.execute("INSERT OR REPLACE INTO urd (id, owner, url, next_due, xml) "
                                  "SELECT id, owner, url, next_due, xml FROM temp.staged ORDER BY rowid")
        finally:
            self.conn.execute("DROP TABLE temp.staged")

    def remove(self, ids: Iterable[str]) -> list[str]:
        removed = []
        with self._transaction():
            for urd_id in ids:
                if self.conn.execute("DELETE FROM urd WHERE id = ?", (urd_id,)).rowcount:
                    removed.append(urd_id)
        return removed

    def get(self, urd_id: str) -> Urd | None:
        row = self.conn.execute("SELECT xml, next_due FROM urd WHERE id = ?", (urd_id,)).fetchone()
        return _urd(*row) if row else None

    def all(self) -> list[Urd]:
        return [_urd(*row) for row in self.conn.execute("SELECT xml, next_due FROM urd ORDER BY id")]

    def due(self, now_ms: int) -> list[Urd]:
        rows = self.conn.execute("SELECT xml, next_due FROM urd WHERE next_due <= ? ORDER BY next_due, id", (now_ms,))
        return [_urd(*row) for row in rows]

    def next_due(self) -> int | None:
        return self.conn.execute("SELECT MIN(next_due) FROM urd").fetchone()[0]  # the next_due index answers

    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        with self._transaction():
            if ids is None:
                self.conn.execute("UPDATE urd SET next_due = ?", (at_ms,))
                return [i for (i,) in self.conn.execute("SELECT id FROM urd ORDER BY id")]
            found = []
            for urd_id in ids:
                if self.conn.execute("UPDATE urd SET next_due = ? WHERE id = ?", (at_ms, urd_id)).rowcount:
                    found.append(urd_id)
            return found

    def mark_checked(self, ids: Iterable[str], at_ms: int) -> None:
        with self._transaction():
            for urd_id in ids:
                row = self.conn.execute("SELECT xml, next_due FROM urd WHERE id = ?", (urd_id,)).fetchone()
                if row is None:  # removed while it was being crawled
                    continue
                asked = _urd(*row).due_at
                urd = Urd.from_xml(row[0]).checked(at_ms)
                # `scrapy urd due` after the round opened (at_ms): that request still stands
                next_due = asked if asked is not None and asked > at_ms else urd.next_due
                self.conn.execute(
                    "UPDATE urd SET next_due = ?, xml = ? WHERE id = ?", (_fits(next_due), urd.to_xml(), urd_id)
                )

    def close(self) -> None:
        self.conn.close()

    def _transaction(self) -> sqlite3.Connection:
        return _Transaction(self.conn)


def _fits(ms: int) -> int:
    """``ms``, at most what a SQLite INTEGER holds: a time no bound checked cannot overflow."""
    return min(ms, SQLITE_MAX_INTEGER)


def _urd(xml: str, next_due: int) -> Urd:
    urd = Urd.from_xml(xml)
    return urd if urd.next_due == next_due else replace(urd, due_at=next_due)


def _serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    """One call at a time on the store's connection, from whichever thread."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return call


class SqliteMetaInfoStore(MetaInfoStore):
    """The embedded meta-info store. Usable from several threads (the crawl does its store
    work in a thread pool, off the reactor): calls are serialised by a lock."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.conn = connect(self.path, threads=True)
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(version)")}
        if columns and "header" not in columns:  # a cache written before versions kept their headers
            self.conn.execute("ALTER TABLE version ADD COLUMN header TEXT")
        self.conn.executescript(_CACHE_SCHEMA)

    @_serialised
    def get(self, url: str) -> MetaInfo | None:
        row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (url,)).fetchone()
        return MetaInfo.from_xml(row[0]) if row else None

    @_serialised
    def put(self, meta: MetaInfo, new_version: Version | None = None) -> None:
        with _Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO metainfo (url, xml) VALUES (?, ?)", (meta.url, meta.to_xml()))
            if new_version is not None:
                v = new_version
                self.conn.execute(
                    "INSERT INTO version (url, number, digest, fetched, size, status, header) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (v.url, v.number, v.digest, v.fetched, v.size, v.status, v.header),
                )

    @_serialised
    def versions(self, url: str) -> list[Version]:
        rows = self.conn.execute(
            "SELECT url, number, digest, fetched, size, status, header FROM version WHERE url = ? ORDER BY number",
            (url,))
        return [Version(*row) for row in rows]

    @_serialised
    def add_revisit(self, revisit: Revisit, keep: int) -> None:
        r = revisit
        with _Transaction(self.conn):
            self.conn.execute("INSERT INTO revisit (url, fetched, number, digest, header) VALUES (?, ?, ?, ?, ?)",
                              (r.url, r.fetched, r.number, r.digest, r.header))
            self.conn.execute(
                "DELETE FROM revisit WHERE url = ? AND rowid NOT IN "
                "(SELECT rowid FROM revisit WHERE url = ? ORDER BY fetched DESC, rowid DESC LIMIT ?)",
                (r.url, r.url, max(keep, 0)))

    @_serialised
    def revisits(self, url: str) -> list[Revisit]:
        rows = self.conn.execute(
            "SELECT url, fetched, number, digest, header FROM revisit WHERE url = ? ORDER BY fetched, rowid", (url,))
        return [Revisit(*row) for row in rows]

    @_serialised
    def urls(self) -> list[str]:
        return [url for (url,) in self.conn.execute("SELECT url FROM metainfo ORDER BY url")]

    @_serialised
    def prune(self, keep: int, protected: set[str] = frozenset()) -> list[Version]:
        rows = self.conn.execute(
            "SELECT url, number, digest, fetched, size, status, header FROM ("
            " SELECT *, ROW_NUMBER() OVER (PARTITION BY url ORDER BY number DESC) AS age FROM version"
            ") WHERE age > ?",
            (max(keep, 1),),
        ).fetchall()
        dropped = [Version(*row) for row in rows if row[2] not in protected]
        with _Transaction(self.conn):
            self.conn.executemany(
                "DELETE FROM version WHERE url = ? AND number = ?", [(v.url, v.number) for v in dropped]
            )
            # a 304 confirming a version no longer kept confirms nothing that can be shown
            self.conn.execute("DELETE FROM revisit WHERE NOT EXISTS (SELECT 1 FROM version v "
                              "WHERE v.url = revisit.url AND v.number = revisit.number)")
        return dropped

    @_serialised
    def referenced_digests(self) -> set[str]:
        return {d for (d,) in self.conn.execute("SELECT DISTINCT digest FROM version")}

    @_serialised
    def drop_version(self, expected: MetaInfo, meta: MetaInfo, version: Version) -> bool | None:
        with _Transaction(self.conn):
            row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (meta.url,)).fetchone()
            if row is None or row[0] != expected.to_xml():
                return None
            self.conn.execute("UPDATE metainfo SET xml = ? WHERE url = ?", (meta.to_xml(), meta.url))
            self.conn.execute("DELETE FROM version WHERE url = ? AND number = ?", (version.url, version.number))
            return self.conn.execute("SELECT 1 FROM version WHERE digest = ? LIMIT 1",
                                     (version.digest,)).fetchone() is not None

    @_serialised
    def close(self) -> None:
        self.conn.close()


_ACI_SCHEMA = """
CREATE TABLE IF NOT EXISTS aci (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    updatetime  INTEGER NOT NULL,
    relevance   REAL NOT NULL,
    docbase     TEXT NOT NULL,
    delivered   INTEGER NOT NULL DEFAULT 0,
    xml         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS aci_owner ON aci(owner, updatetime);
"""


class SqliteAciStore(AciStore):
    def __init__(self, path: str | Path) -> None:
        self.conn = connect(Path(path))
        self.conn.executescript(_ACI_SCHEMA)

    def add(self, acis: Iterable[Aci]) -> int:
        rows = [(a.id, a.owner, a.updatetime, a.relevance, a.docbase, a.to_xml()) for a in acis]
        with _Transaction(self.conn):
            before = self.conn.total_changes
            self.conn.executemany(
                "INSERT OR IGNORE INTO aci (id, owner, updatetime, relevance, docbase, xml) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            return self.conn.total_changes - before

    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        rows = self.conn.execute(
            "SELECT xml FROM aci WHERE owner = ? AND updatetime >= ? AND relevance >= ? "
            "ORDER BY updatetime DESC, id", (owner, since, min_relevance))
        return [Aci.from_xml(x) for (x,) in rows]

    def get(self, aci_id: str) -> Aci | None:
        row = self.conn.execute("SELECT xml FROM aci WHERE id = ?", (aci_id,)).fetchone()
        return Aci.from_xml(row[0]) if row else None

    def owners(self) -> list[str]:
        return [o for (o,) in self.conn.execute("SELECT DISTINCT owner FROM aci ORDER BY owner")]

    def ack(self, owner: str, ids: Iterable[str] | None = None) -> int:
        with _Transaction(self.conn):
            if ids is None:
                return self.conn.execute("UPDATE aci SET delivered = 1 WHERE owner = ? AND delivered = 0",
                                         (owner,)).rowcount
            return sum(self.conn.execute("UPDATE aci SET delivered = 1 WHERE owner = ? AND id = ? AND delivered = 0",
                                         (owner, i)).rowcount for i in ids)

    def undelivered_digests(self) -> set[str]:
        return {d for (d,) in self.conn.execute("SELECT DISTINCT docbase FROM aci WHERE delivered = 0")}

    def close(self) -> None:
        self.conn.close()


_RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS document (
    url  TEXT PRIMARY KEY,
    seq  INTEGER NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS result (
    rule     TEXT NOT NULL,
    url      TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    results  TEXT NOT NULL,
    updated  INTEGER NOT NULL,
    PRIMARY KEY (rule, url)
);
CREATE INDEX IF NOT EXISTS result_seq ON result(rule, seq);
"""


class SqliteResultsStore(ResultsStore):
    def __init__(self, path: str | Path) -> None:
        self.conn = connect(Path(path))
        self.conn.executescript(_RESULTS_SCHEMA)

    def seq(self, url: str) -> int:
        row = self.conn.execute("SELECT seq FROM document WHERE url = ?", (url,)).fetchone()
        if row:
            return row[0]
        with _Transaction(self.conn):
            row = self.conn.execute("SELECT seq FROM document WHERE url = ?", (url,)).fetchone()
            if row:
                return row[0]
            (top,) = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM document").fetchone()
            self.conn.execute("INSERT INTO document (url, seq) VALUES (?, ?)", (url, top + 1))
            return top + 1

    def put(self, rule: str, url: str, seq: int, results: list, at_ms: int) -> None:
        with _Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO result (rule, url, seq, results, updated) VALUES (?, ?, ?, ?, ?)",
                              (rule, url, seq, json.dumps(results, ensure_ascii=False), at_ms))

    def get(self, rule: str, url: str) -> list | None:
        row = self.conn.execute("SELECT results FROM result WHERE rule = ? AND url = ?", (rule, url)).fetchone()
        return json.loads(row[0]) if row else None

    def rows(self, rule: str | None = None) -> Iterator[tuple[str, str, int, list]]:
        if rule is None:
            cursor = self.conn.execute("SELECT rule, url, seq, results FROM result ORDER BY rule, seq")
        else:
            cursor = self.conn.execute("SELECT rule, url, seq, results FROM result WHERE rule = ? ORDER BY seq",
                                       (rule,))
        for name, url, seq, results in cursor:
            yield name, url, seq, json.loads(results)

    def rules(self) -> list[str]:
        return [r for (r,) in self.conn.execute("SELECT DISTINCT rule FROM result ORDER BY rule")]

    def close(self) -> None:
        self.conn.close()


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
        self.conn = connect(Path(path))
        self.conn.executescript(_SENTINEL_SCHEMA)

    def add(self, sentinels: Iterable[Any]) -> list[str]:
        ids = []
        with _Transaction(self.conn):
            for s in sentinels:
                self.conn.execute(
                    "INSERT INTO sentinel (id, owner, url, next_due, seen, json) VALUES (?, ?, ?, 0, NULL, ?) "
                    "ON CONFLICT(id) DO UPDATE SET json = excluded.json", (s.id, s.owner, s.url, s.to_json()))
                ids.append(s.id)
        return ids

    def remove(self, ids: Iterable[str]) -> list[str]:
        removed = []
        with _Transaction(self.conn):
            for i in ids:
                if self.conn.execute("DELETE FROM sentinel WHERE id = ?", (i,)).rowcount:
                    removed.append(i)
        return removed

    def all(self, owner: str | None = None) -> list[tuple[Any, int, str | None]]:
        where = " WHERE owner = ?" if owner else ""
        query = f"SELECT json, next_due, seen FROM sentinel{where} ORDER BY url, id"
        rows = self.conn.execute(query, (owner,) if owner else ())
        return [(self.sentinel_cls.from_json(j), due, seen) for j, due, seen in rows]

    def due(self, now_ms: int) -> list[tuple[Any, str | None]]:
        rows = self.conn.execute("SELECT json, seen FROM sentinel WHERE next_due <= ? ORDER BY url, id", (now_ms,))
        return [(self.sentinel_cls.from_json(j), seen) for j, seen in rows]

    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        with _Transaction(self.conn):
            if ids is None:
                self.conn.execute("UPDATE sentinel SET next_due = ?", (at_ms,))
                return [i for (i,) in self.conn.execute("SELECT id FROM sentinel ORDER BY id")]
            return [i for i in ids if self.conn.execute("UPDATE sentinel SET next_due = ? WHERE id = ?",
                                                        (at_ms, i)).rowcount]

    def checked(self, ids: Iterable[str], at_ms: int, seen: str | None = None) -> None:
        with _Transaction(self.conn):
            for i in ids:
                row = self.conn.execute("SELECT json FROM sentinel WHERE id = ?", (i,)).fetchone()
                if row is None:
                    continue  # removed meanwhile
                every = self.sentinel_cls.from_json(row[0]).every
                if seen is None:
                    self.conn.execute("UPDATE sentinel SET next_due = ? WHERE id = ?", (at_ms + every, i))
                else:
                    self.conn.execute("UPDATE sentinel SET next_due = ?, seen = ? WHERE id = ?",
                                      (at_ms + every, seen, i))

    def advance(self, expected: Mapping[str, str | None], at_ms: int, seen: str, data: bytes,
                notes: Iterable[Any]) -> list[str]:
        with _Transaction(self.conn):
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
        self.conn.execute("UPDATE sentinel SET next_due = ?, seen = ? WHERE id = ?", (at_ms + every, seen, sentinel_id))
        return True

    def put_digest(self, sha: str, data: bytes) -> None:
        with _Transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO pagedigest (sha, data) VALUES (?, ?)", (sha, data))

    def get_digest(self, sha: str) -> bytes | None:
        row = self.conn.execute("SELECT data FROM pagedigest WHERE sha = ?", (sha,)).fetchone()
        return bytes(row[0]) if row else None

    def gc_digests(self) -> int:
        with _Transaction(self.conn):
            return self.conn.execute("DELETE FROM pagedigest WHERE sha NOT IN "
                                     "(SELECT seen FROM sentinel WHERE seen IS NOT NULL) "
                                     "AND sha NOT IN (SELECT sha FROM notedigest)").rowcount

    def add_notifications(self, notes: Iterable[Any]) -> int:
        with _Transaction(self.conn):
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

    def notifications(self, owner: str, since: int = 0) -> list[dict]:
        rows = self.conn.execute("SELECT json FROM notification WHERE owner = ? AND at >= ? ORDER BY at DESC, id",
                                 (owner, since))
        return [json.loads(j) for (j,) in rows]

    def close(self) -> None:
        self.conn.close()


def _note_digests(note: Any) -> list[str]:
    """The digests a notification's diff is built from (none for one made without them)."""
    return [sha for sha in (getattr(note, "before_digest", ""), getattr(note, "after_digest", "")) if sha]


class _Transaction:
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
