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
from webrace.records.aci import Aci, _xml_safe
from webrace.records.metainfo import MetaInfo, Revisit
from webrace.records.sentinel import Sentinel
from webrace.urd import Urd

# A URD is parsed once, when it is added: the crawl reads its fields from the columns (xml
# keeps the URD as it was added; lastcheck and next_due are in their columns).
_URD_SCHEMA = """
CREATE TABLE IF NOT EXISTS urd (
    id        TEXT PRIMARY KEY,
    owner     TEXT NOT NULL,
    url       TEXT NOT NULL,
    next_due  INTEGER NOT NULL,
    xml       TEXT NOT NULL,
    timing,
    depth     INTEGER,
    lastcheck,
    scope     TEXT,
    urgent    INTEGER,
    keywords  TEXT,
    threshold TEXT,
    type      TEXT
);
CREATE INDEX IF NOT EXISTS urd_next_due ON urd(next_due);
"""
# The columns a URD-DB written before them gets on open (filled from each row's XML, once).
_URD_FIELDS = ("timing", "depth", "lastcheck", "scope", "urgent", "keywords", "threshold", "type")
# timing and lastcheck have no type: a URD stored before the bounds existed may hold more
# than an SQLite INTEGER does, kept then as its decimal text (read back with int()).
_URD_FIELD_TYPES = {"timing": "", "depth": "INTEGER", "lastcheck": "", "urgent": "INTEGER"}
_URD_COLUMNS = "id, owner, url, next_due, " + ", ".join(_URD_FIELDS)
# Rows an older WebRACE added after the migration have no fields: read from their XML.
_URD_SELECT = f"SELECT {_URD_COLUMNS}, CASE WHEN timing IS NULL THEN xml END FROM urd"
_SET_FIELDS = f"({', '.join(_URD_FIELDS)}) = ({', '.join('?' * len(_URD_FIELDS))})"
# URDs being added, before they are stored together (SQLite keeps temporary tables on disk).
_STAGE = f"CREATE TEMP TABLE staged ({_URD_COLUMNS}, xml)"
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
        self._migrate()

    def _migrate(self) -> None:
        """A URD-DB from before the field columns: add them and fill them from each row's
        XML, once, in one transaction (then no crawl parses XML again)."""
        if not self._unmigrated():
            return
        with self._transaction():
            have = {row[1] for row in self.conn.execute("PRAGMA table_info(urd)")}
            for name in _URD_FIELDS:
                if name not in have:  # another process may have added them meanwhile
                    self.conn.execute(f"ALTER TABLE urd ADD COLUMN {name} {_URD_FIELD_TYPES.get(name, 'TEXT')}")
            rows = self.conn.execute("SELECT xml FROM urd WHERE timing IS NULL").fetchall()
            urds = (Urd.from_xml(xml) for (xml,) in rows)
            self.conn.executemany(f"UPDATE urd SET {_SET_FIELDS} WHERE id = ?",
                                  ((*_fields(urd), urd.id) for urd in urds))

    def _unmigrated(self) -> bool:
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(urd)")}
        return not set(_URD_FIELDS) <= have or self.conn.execute(
            "SELECT 1 FROM urd WHERE timing IS NULL LIMIT 1").fetchone() is not None

    def put_many(self, urds: Iterable[Urd]) -> None:
        """``urds`` may be a long iterator (a large ``urd add``): it is staged in a temporary
        table in batches, with no list of it in memory and no lock on the URD-DB while it
        runs, then stored in one short transaction. An exception from it stores nothing."""
        rows = ((u.id, u.owner, u.url, _fits(u.next_due), *_fields(u), u.to_xml()) for u in urds)
        self.conn.execute(_STAGE)
        marks = ", ".join("?" * (len(_URD_FIELDS) + 5))
        try:
            while batch := list(islice(rows, _BATCH)):
                with _Transaction(self.conn, immediate=False):  # writes the temporary table only
                    self.conn.executemany(f"INSERT INTO temp.staged VALUES ({marks})", batch)
            with self._transaction():
                self.conn.execute(f"INSERT OR REPLACE INTO urd ({_URD_COLUMNS}, xml) "
                                  f"SELECT {_URD_COLUMNS}, xml FROM temp.staged ORDER BY rowid")
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
        row = self.conn.execute(f"{_URD_SELECT} WHERE id = ?", (urd_id,)).fetchone()
        return _urd(row) if row else None

    def all(self) -> list[Urd]:
        return [_urd(row) for row in self.conn.execute(f"{_URD_SELECT} ORDER BY id")]

    def due(self, now_ms: int) -> list[Urd]:
        rows = self.conn.execute(f"{_URD_SELECT} WHERE next_due <= ? ORDER BY next_due, id", (now_ms,))
        return [_urd(row) for row in rows]

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
                row = self.conn.execute(f"{_URD_SELECT} WHERE id = ?", (urd_id,)).fetchone()
                if row is None:  # removed while it was being crawled
                    continue
                asked = _urd(row).due_at
                urd = _urd(row).checked(at_ms)
                # `scrapy urd due` after the round opened (at_ms): that request still stands
                next_due = asked if asked is not None and asked > at_ms else urd.next_due
                self.conn.execute(f"UPDATE urd SET next_due = ?, {_SET_FIELDS} WHERE id = ?",
                                  (_fits(next_due), *_fields(urd), urd_id))

    def close(self) -> None:
        self.conn.close()

    def _transaction(self) -> sqlite3.Connection:
        return _Transaction(self.conn)


def _fits(ms: int) -> int:
    """``ms``, at most what a SQLite INTEGER holds: a time no bound checked cannot overflow."""
    return min(ms, SQLITE_MAX_INTEGER)


_PLAIN = ["http", "pull", "filter"]  # the seed's type of nearly every URD: stored as NULL


def _integer(value: int | None) -> int | str | None:
    """``value`` as an SQLite INTEGER, or as its text when it is larger than one."""
    return str(value) if value is not None and not -SQLITE_MAX_INTEGER - 1 <= value <= SQLITE_MAX_INTEGER else value


def _fields(urd: Urd) -> tuple:
    """The values of ``_URD_FIELDS`` for ``urd``."""
    record = urd.to_record()
    return (_integer(record["timing"]), record["depth"], _integer(record["lastcheck"]), record["scope"],
            int(record["urgent"]),
            record["keywords"], record["threshold"], json.dumps(record["type"]) if record["type"] != _PLAIN else None)


def _urd(row: tuple) -> Urd:
    """A URD from its columns (``_URD_SELECT``), not from its XML unless it has no fields."""
    urd_id, owner, url, next_due, timing, depth, lastcheck, scope, urgent, keywords, threshold, kind, xml = row
    if xml is not None:
        urd = Urd.from_xml(xml)
    else:
        urd = Urd.from_record({"id": urd_id, "owner": owner, "url": url, "timing": timing, "depth": depth,
                               "lastcheck": lastcheck, "scope": scope, "urgent": urgent, "keywords": keywords,
                               "threshold": threshold, "type": json.loads(kind) if kind else None})
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


# A page's ACIs share the page's fields: kept once per page version (aci_page), and each
# owner's row holds only what is the owner's (relevance, summary, urgency). Rows written
# before aci_page hold their ACI as XML (and no page); both are read.
_ACI_SCHEMA = """
CREATE TABLE IF NOT EXISTS aci (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    updatetime  INTEGER NOT NULL,
    relevance   REAL NOT NULL,
    docbase     TEXT NOT NULL,
    delivered   INTEGER NOT NULL DEFAULT 0,
    xml         TEXT NOT NULL,
    page        INTEGER,
    summary     TEXT,
    urgent      INTEGER,
    expired     INTEGER
);
CREATE INDEX IF NOT EXISTS aci_owner ON aci(owner, updatetime);
CREATE TABLE IF NOT EXISTS aci_page (
    id          INTEGER PRIMARY KEY,
    uri         TEXT NOT NULL,
    docbase     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    updatetime  INTEGER NOT NULL,
    filesize    INTEGER NOT NULL,
    format      TEXT NOT NULL,
    extension   TEXT NOT NULL,
    title       TEXT NOT NULL,
    UNIQUE (uri, docbase, version, updatetime, filesize, format, extension, title)
);
"""
_ACI_OWN = ("page", "summary", "urgent", "expired")  # the columns an ACI store from before aci_page gets
_PAGE_FIELDS = ("uri", "docbase", "version", "updatetime", "filesize", "format", "extension", "title")
_PAGE_ID = f"SELECT id FROM aci_page WHERE {' AND '.join(f'{f} = ?' for f in _PAGE_FIELDS)}"
_ACI_SELECT = ("SELECT a.xml, a.owner, a.relevance, a.summary, a.urgent, a.expired, "
               + ", ".join(f"p.{f}" for f in _PAGE_FIELDS) + " FROM aci a LEFT JOIN aci_page p ON p.id = a.page")


class SqliteAciStore(AciStore):
    def __init__(self, path: str | Path) -> None:
        self.conn = connect(Path(path))
        have = {row[1] for row in self.conn.execute("PRAGMA table_info(aci)")}
        if have and not set(_ACI_OWN) <= have:  # an ACI store from before aci_page
            with _Transaction(self.conn):
                have = {row[1] for row in self.conn.execute("PRAGMA table_info(aci)")}
                for name in _ACI_OWN:
                    if name not in have:
                        self.conn.execute(f"ALTER TABLE aci ADD COLUMN {name} "
                                          f"{'TEXT' if name == 'summary' else 'INTEGER'}")
        self.conn.executescript(_ACI_SCHEMA)

    def add(self, acis: Iterable[Aci]) -> int:
        """All in one transaction: each page's fields once, then one row per owner."""
        acis = list(acis)
        with _Transaction(self.conn):
            pages: dict[tuple, int] = {}
            for key in dict.fromkeys(_page_of(a) for a in acis):
                self.conn.execute(f"INSERT OR IGNORE INTO aci_page ({', '.join(_PAGE_FIELDS)}) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", key)
                pages[key] = self.conn.execute(_PAGE_ID, key).fetchone()[0]
            before = self.conn.total_changes
            self.conn.executemany(
                "INSERT OR IGNORE INTO aci (id, owner, updatetime, relevance, docbase, xml, page, summary, urgent, "
                "expired) VALUES (?, ?, ?, ?, '', '', ?, ?, ?, ?)",
                [(a.id, a.owner, a.updatetime, a.relevance, pages[_page_of(a)], _xml_safe(a.summary), int(a.urgent),
                  int(a.expired)) for a in acis])
            return self.conn.total_changes - before

    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        rows = self.conn.execute(
            f"{_ACI_SELECT} WHERE a.owner = ? AND a.updatetime >= ? AND a.relevance >= ? "
            "ORDER BY a.updatetime DESC, a.id", (owner, since, min_relevance))
        return [_aci(row) for row in rows]

    def get(self, aci_id: str) -> Aci | None:
        row = self.conn.execute(f"{_ACI_SELECT} WHERE a.id = ?", (aci_id,)).fetchone()
        return _aci(row) if row else None

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
        rows = self.conn.execute("SELECT DISTINCT CASE WHEN a.page IS NULL THEN a.docbase ELSE p.docbase END "
                                 "FROM aci a LEFT JOIN aci_page p ON p.id = a.page WHERE a.delivered = 0")
        return {d for (d,) in rows}

    def close(self) -> None:
        self.conn.close()


def _page_of(aci: Aci) -> tuple:
    """The fields an ACI shares with the other ACIs of its page version (``_PAGE_FIELDS``),
    text as its XML would keep it."""
    return (aci.uri, aci.docbase, aci.version, aci.updatetime, aci.filesize, aci.format, aci.extension,
            _xml_safe(aci.title))


def _aci(row: tuple) -> Aci:
    xml, owner, relevance, summary, urgent, expired, *page = row
    if xml:  # written before aci_page
        return Aci.from_xml(xml)
    uri, docbase, version, updatetime, filesize, fmt, extension, title = page
    # the relevance as the ACI's XML gave it (``%g``), as `aci list` and feeds read it before
    return Aci(owner=owner, uri=uri, relevance=float(f"{relevance:g}"), updatetime=updatetime, filesize=filesize,
               version=version, docbase=docbase, summary=summary, urgent=bool(urgent), expired=bool(expired),
               format=fmt, extension=extension, title=title)


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
