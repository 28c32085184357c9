"""The embedded meta-info store (``cache.sqlite``): each URL's meta-info, its versions and
the revisits (304s) that confirmed them."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from webrace.backends.base import MetaInfoStore, Version
from webrace.backends.sqlite.connection import Transaction, connect, serialised
from webrace.records.metainfo import MetaInfo, Revisit, VersionExists

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

    @serialised
    def get(self, url: str) -> MetaInfo | None:
        row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (url,)).fetchone()
        return MetaInfo.from_xml(row[0]) if row else None

    @serialised
    def put(self, meta: MetaInfo, new_version: Version | None = None) -> None:
        with Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO metainfo (url, xml) VALUES (?, ?)", (meta.url, meta.to_xml()))
            if new_version is not None:
                v = new_version
                try:
                    self.conn.execute(
                        "INSERT INTO version (url, number, digest, fetched, size, status, header) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (v.url, v.number, v.digest, v.fetched, v.size, v.status, v.header),
                    )
                except sqlite3.IntegrityError as exc:  # the transaction rolls back: nothing written
                    raise VersionExists(f"{v.url} has a version {v.number} already") from exc

    @serialised
    def versions(self, url: str) -> list[Version]:
        rows = self.conn.execute(
            "SELECT url, number, digest, fetched, size, status, header FROM version WHERE url = ? ORDER BY number",
            (url,))
        return [Version(*row) for row in rows]

    @serialised
    def want(self, url: str, keys: Iterable[str]) -> MetaInfo | None:
        with Transaction(self.conn):  # (the lock serialises this store's callers; the transaction, other processes)
            row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (url,)).fetchone()
            if row is None:
                return None
            meta = MetaInfo.from_xml(row[0])
            wanted = meta.wanting(keys)
            if wanted != meta.wanted:
                meta = replace(meta, wanted=wanted)
                self.conn.execute("UPDATE metainfo SET xml = ? WHERE url = ?", (meta.to_xml(), url))
            return meta

    @serialised
    def confirm(self, meta: MetaInfo, revisit: Revisit | None, keep: int) -> None:
        with Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO metainfo (url, xml) VALUES (?, ?)", (meta.url, meta.to_xml()))
            if revisit is not None:
                self._add_revisit(revisit, keep)

    @serialised
    def add_revisit(self, revisit: Revisit, keep: int) -> None:
        with Transaction(self.conn):
            self._add_revisit(revisit, keep)

    def _add_revisit(self, revisit: Revisit, keep: int) -> None:
        r = revisit
        self.conn.execute("INSERT INTO revisit (url, fetched, number, digest, header) VALUES (?, ?, ?, ?, ?)",
                          (r.url, r.fetched, r.number, r.digest, r.header))
        self.conn.execute(
            "DELETE FROM revisit WHERE url = ? AND rowid NOT IN "
            "(SELECT rowid FROM revisit WHERE url = ? ORDER BY fetched DESC, rowid DESC LIMIT ?)",
            (r.url, r.url, max(keep, 0)))

    @serialised
    def revisits(self, url: str) -> list[Revisit]:
        rows = self.conn.execute(
            "SELECT url, fetched, number, digest, header FROM revisit WHERE url = ? ORDER BY fetched, rowid", (url,))
        return [Revisit(*row) for row in rows]

    @serialised
    def urls(self) -> list[str]:
        return [url for (url,) in self.conn.execute("SELECT url FROM metainfo ORDER BY url")]

    @serialised
    def prune(self, keep: int, protected: set[str] = frozenset()) -> list[Version]:
        rows = self.conn.execute(
            "SELECT url, number, digest, fetched, size, status, header FROM ("
            " SELECT *, ROW_NUMBER() OVER (PARTITION BY url ORDER BY number DESC) AS age FROM version"
            ") WHERE age > ?",
            (max(keep, 1),),
        ).fetchall()
        dropped = [Version(*row) for row in rows if row[2] not in protected]
        with Transaction(self.conn):
            self.conn.executemany(
                "DELETE FROM version WHERE url = ? AND number = ?", [(v.url, v.number) for v in dropped]
            )
            # a 304 confirming a version no longer kept confirms nothing that can be shown
            self.conn.execute("DELETE FROM revisit WHERE NOT EXISTS (SELECT 1 FROM version v "
                              "WHERE v.url = revisit.url AND v.number = revisit.number)")
        return dropped

    @serialised
    def referenced_digests(self) -> set[str]:
        return {d for (d,) in self.conn.execute("SELECT DISTINCT digest FROM version")}

    @serialised
    def drop_version(self, expected: MetaInfo, meta: MetaInfo, version: Version) -> bool | None:
        with Transaction(self.conn):
            row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (meta.url,)).fetchone()
            if row is None or row[0] != expected.to_xml():
                return None
            self.conn.execute("UPDATE metainfo SET xml = ? WHERE url = ?", (meta.to_xml(), meta.url))
            self.conn.execute("DELETE FROM version WHERE url = ? AND number = ?", (version.url, version.number))
            return self.conn.execute("SELECT 1 FROM version WHERE digest = ? LIMIT 1",
                                     (version.digest,)).fetchone() is not None

    @serialised
    def close(self) -> None:
        self.conn.close()
