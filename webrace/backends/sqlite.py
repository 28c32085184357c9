"""Embedded state stores: SQLite files under ``WEBRACE_DATA_DIR``."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, SentinelStore, UrdStore, Version
from webrace.datadir import private, unusable
from webrace.records.aci import Aci, Keys, PageAcis, _xml_safe, owner_key, page_key, quoting, split_id, summary_of
from webrace.records.metainfo import MetaInfo, Revisit, VersionExists
from webrace.records.sentinel import Sentinel
from webrace.urd import MAX_TIME_MS, Urd

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
_URD_SELECT = f"SELECT {_URD_COLUMNS}, CASE WHEN timing IS NULL THEN xml END FROM urd"  # noqa: S608 - names are module constants; values are bound
_SET_FIELDS = f"({', '.join(_URD_FIELDS)}) = ({', '.join('?' * len(_URD_FIELDS))})"
# URDs being added, before they are stored together (SQLite keeps temporary tables on disk).
_STAGE = f"CREATE TEMP TABLE staged ({_URD_COLUMNS}, xml)"
_BATCH = 1000  # rows staged per statement
SQLITE_MAX_INTEGER = 2**63 - 1
# URDs whose timing and lastcheck are integers (not the decimal text of a value too large)
_PLAIN_TIMES = "timing IS NOT NULL AND typeof(timing) = 'integer' AND typeof(lastcheck) IN ('integer', 'null')"
# Urd.next_due as stored: the natural time unless `scrapy urd due` asked for another
_NATURAL = "CASE WHEN lastcheck IS NULL THEN 0 ELSE min(lastcheck + timing, :latest) END"
_MARK_CHECKED = (f"UPDATE urd SET lastcheck = :at, next_due = CASE WHEN next_due != {_NATURAL} AND next_due > :at "  # noqa: S608 - names are module constants; values are bound
                 f"THEN next_due ELSE min(:at + timing, :latest) END "
                 f"WHERE id IN (SELECT id FROM checking) AND {_PLAIN_TIMES}")


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
            self.conn.executemany(f"UPDATE urd SET {_SET_FIELDS} WHERE id = ?",  # noqa: S608 - names are module constants; values are bound
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
                    self.conn.executemany(f"INSERT INTO temp.staged VALUES ({marks})", batch)  # noqa: S608 - names are module constants; values are bound
            with self._transaction():
                self.conn.execute(f"INSERT OR REPLACE INTO urd ({_URD_COLUMNS}, xml) "  # noqa: S608 - names are module constants; values are bound
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
        """Each URD's ``lastcheck`` is ``at_ms`` and its next due time ``at_ms`` + timing,
        unless `scrapy urd due` asked for a later time after the round opened. Two statements
        for the URDs whose fields are plain integers (a round of 10,000 URDs closes at once);
        the others (fields older than the bounds) one by one."""
        with self._transaction():
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS checking (id TEXT PRIMARY KEY)")
            self.conn.execute("DELETE FROM checking")
            self.conn.executemany("INSERT OR IGNORE INTO checking (id) VALUES (?)", ((i,) for i in ids))
            self.conn.execute(_MARK_CHECKED, {"at": at_ms, "latest": MAX_TIME_MS})
            others = [i for (i,) in self.conn.execute(f"SELECT id FROM urd WHERE id IN (SELECT id FROM checking) "  # noqa: S608 - names are module constants; values are bound
                                                      f"AND NOT ({_PLAIN_TIMES})")]
            for urd_id in others:
                row = self.conn.execute(f"{_URD_SELECT} WHERE id = ?", (urd_id,)).fetchone()
                asked = _urd(row).due_at
                urd = _urd(row).checked(at_ms)
                # `scrapy urd due` after the round opened (at_ms): that request still stands
                next_due = asked if asked is not None and asked > at_ms else urd.next_due
                self.conn.execute(f"UPDATE urd SET next_due = ?, {_SET_FIELDS} WHERE id = ?",  # noqa: S608 - names are module constants; values are bound
                                  (_fits(next_due), *_fields(urd), urd_id))
            self.conn.execute("DELETE FROM checking")

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
                try:
                    self.conn.execute(
                        "INSERT INTO version (url, number, digest, fetched, size, status, header) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (v.url, v.number, v.digest, v.fetched, v.size, v.status, v.header),
                    )
                except sqlite3.IntegrityError as exc:  # the transaction rolls back: nothing written
                    raise VersionExists(f"{v.url} has a version {v.number} already") from exc

    @_serialised
    def versions(self, url: str) -> list[Version]:
        rows = self.conn.execute(
            "SELECT url, number, digest, fetched, size, status, header FROM version WHERE url = ? ORDER BY number",
            (url,))
        return [Version(*row) for row in rows]

    @_serialised
    def want(self, url: str, keys: Iterable[str]) -> MetaInfo | None:
        with _Transaction(self.conn):  # (the lock serialises this store's callers; the transaction, other processes)
            row = self.conn.execute("SELECT xml FROM metainfo WHERE url = ?", (url,)).fetchone()
            if row is None:
                return None
            meta = MetaInfo.from_xml(row[0])
            wanted = meta.wanting(keys)
            if wanted != meta.wanted:
                meta = replace(meta, wanted=wanted)
                self.conn.execute("UPDATE metainfo SET xml = ? WHERE url = ?", (meta.to_xml(), url))
            return meta

    @_serialised
    def confirm(self, meta: MetaInfo, revisit: Revisit | None, keep: int) -> None:
        with _Transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO metainfo (url, xml) VALUES (?, ?)", (meta.url, meta.to_xml()))
            if revisit is not None:
                self._add_revisit(revisit, keep)

    @_serialised
    def add_revisit(self, revisit: Revisit, keep: int) -> None:
        with _Transaction(self.conn):
            self._add_revisit(revisit, keep)

    def _add_revisit(self, revisit: Revisit, keep: int) -> None:
        r = revisit
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


# A page's ACIs are kept as the crawl makes them (webrace.records.aci.PageAcis): the page
# version once (aci_version: the text its summaries quote, compressed, the keywords they quote
# and the distinct lists of them owners' summaries are made of; summaries are made when read),
# owners numbered once (aci_owner_number), and the page's owners as one blob (aci_page_rows):
# a number per owner, sorted, owner << 38 | summary << 20 | relevance << 2 | urgent << 1 |
# expired (which of the page's distinct summaries and relevances are theirs). A page costs one
# row however many owners share it. An owner's list is read through the owner index,
# aci_owner_index (a row per run and owner, id run << 25 | owner, holding the owner's (page,
# number) pairs): every _TAIL_ROWS numbers (or _TAIL_PAGES pages) past it,
# the pages past it become one more run, a row per owner holding (page, number) pairs, labelled
# by the last page it holds (listed in aci_runs). A run is appended whole (its label is the
# largest), so bringing the index up costs the same in a large store as in a new one; an
# owner's list is one seek per run, and the pages past the index are read from their blobs.
# Which ACIs were delivered is a row each (aci_delivered).
_ACI_SCHEMA = """
CREATE TABLE IF NOT EXISTS aci_version (
    id          INTEGER PRIMARY KEY,
    key         TEXT NOT NULL,
    uri         TEXT NOT NULL,
    docbase     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    updatetime  INTEGER NOT NULL,
    filesize    INTEGER NOT NULL,
    format      TEXT NOT NULL,
    extension   TEXT NOT NULL,
    title       TEXT NOT NULL,
    keywords    TEXT NOT NULL,
    keys        TEXT NOT NULL,
    text        BLOB,
    relevances  TEXT NOT NULL,
    UNIQUE (uri, docbase)
);
CREATE INDEX IF NOT EXISTS aci_version_key ON aci_version(key);
CREATE TABLE IF NOT EXISTS aci_owner_number (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    key         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS aci_owner_number_key ON aci_owner_number(key);
CREATE TABLE IF NOT EXISTS aci_page_rows (
    page        INTEGER PRIMARY KEY,
    owners      INTEGER NOT NULL,
    rows        BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS aci_owner_index (
    id          INTEGER PRIMARY KEY,
    rows        BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS aci_runs (
    run         INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS aci_delivered (
    page        INTEGER NOT NULL,
    owner       INTEGER NOT NULL,
    PRIMARY KEY (page, owner)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aci_meta (
    name        TEXT PRIMARY KEY,
    value       INTEGER NOT NULL
);
INSERT OR IGNORE INTO aci_meta (name, value) VALUES ('indexed', 0);
"""
_TAIL_ROWS = 200_000  # ACIs past the owner index before it is brought up to date
_TAIL_PAGES = 2_000  # pages past it (an owner's list reads each of their blobs)
_PARTS_KEPT = 256  # page versions whose quoting parts a store keeps (see SqliteAciStore._parts)
_INDEXED = "(SELECT value FROM aci_meta WHERE name = 'indexed')"
_INT64 = np.dtype("<i8")
_logger = logging.getLogger(__name__)


def _int64s(blob: Any, width: int = 1) -> np.ndarray:
    """A blob of the ACI store's numbers (``width`` to a row); a damaged one (not bytes, or cut
    short) is said in one line and read as empty, so one bad page does not cost every list."""
    if not isinstance(blob, bytes) or len(blob) % (8 * width):
        _logger.warning("ACI store: a damaged row of numbers (%s) is skipped",
                        f"{len(blob)} bytes" if isinstance(blob, bytes) else type(blob).__name__)
        return np.zeros(0, dtype=_INT64)
    return np.frombuffer(blob, dtype=_INT64)
_VERSION_FIELDS = "v.id, v.key, v.uri, v.docbase, v.version, v.updatetime, v.filesize, v.format, v.extension, v.title"
_OWNER_BITS = 25
_FIELD_MAX, _OWNER_MAX = 1 << 18, 1 << _OWNER_BITS  # distinct summaries (and relevances) a page version holds; owners
# ACI stores from before aci_version: one row per ACI (its XML, or its own fields and a row
# of aci_page); read, acknowledged and kept, never written to
_LEGACY_FIELDS = ("uri", "docbase", "version", "updatetime", "filesize", "format", "extension", "title")
_LEGACY_SELECT = ("SELECT a.xml, a.owner, a.relevance, a.summary, a.urgent, a.expired, a.id, "  # noqa: S608 - names are module constants; values are bound
                  + ", ".join(f"p.{f}" for f in _LEGACY_FIELDS) + " FROM aci a LEFT JOIN aci_page p ON p.id = a.page")
_LEGACY_OWN = ("page", "summary", "urgent", "expired")


class SqliteAciStore(AciStore):
    """The embedded ACI store. Usable from several threads (the crawl stores a page's ACIs
    in the thread that judged it): calls are serialised by a lock."""

    def __init__(self, path: str | Path) -> None:
        self.conn = connect(Path(path), threads=True)
        self.lock = threading.RLock()
        self.conn.executescript(_ACI_SCHEMA)
        self.legacy = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci'").fetchone()
        if self.legacy:
            with _Transaction(self.conn):
                have = {row[1] for row in self.conn.execute("PRAGMA table_info(aci)")}
                for name in _LEGACY_OWN:
                    if name not in have:
                        self.conn.execute(f"ALTER TABLE aci ADD COLUMN {name} "
                                          f"{'TEXT' if name == 'summary' else 'INTEGER'}")
                self.conn.execute("CREATE TABLE IF NOT EXISTS aci_page (id INTEGER PRIMARY KEY, "
                                  + ", ".join(_LEGACY_FIELDS) + ")")
        self._from_rows()
        self._index_again_if_older()
        self._owner_no: dict[str, int] = {}
        self._spaces: dict[int, tuple[Any, np.ndarray]] = {}  # owner spaces (see PageAcis) -> store numbers
        self._tail, self._tail_pages = self.conn.execute(
            f"SELECT coalesce(sum(owners), 0), count(*) FROM aci_page_rows WHERE page > {_INDEXED}").fetchone()  # noqa: S608 - names are module constants; values are bound
        self._wrote = False  # a store that only read leaves the index to the one that wrote
        self._waiting: list[_Pending] = []  # pages of threads waiting to be written
        self._parts_kept: dict[int, tuple[list, Any, list, Any]] = {}  # see _parts
        self._waiting_lock = threading.Lock()

    def _from_rows(self) -> None:
        """A store of the layout before (aci_row: a row per ACI, and an owner index of rows):
        each page's rows become its blob, the delivered ones rows of aci_delivered, and the
        owner index is made again, in one transaction."""
        exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci_row'"
        if not self.conn.execute(exists).fetchone():
            return
        with _Transaction(self.conn):
            if not self.conn.execute(exists).fetchone():  # another process moved it meanwhile
                return
            last = 0
            while True:  # a page range at a time: bounded memory however large the store
                rows = self.conn.execute(
                    "SELECT page, owner, summary, relevance, flags, delivered FROM aci_row WHERE page > ? AND page <= "
                    "(SELECT max(page) FROM (SELECT page FROM aci_row WHERE page > ? ORDER BY page LIMIT ?)) "
                    "ORDER BY page, owner", (last, last, _TAIL_ROWS)).fetchall()
                if not rows:
                    break
                table = np.array(rows, dtype=np.int64)
                packed = (table[:, 1] << 38) | (table[:, 2] << 20) | (table[:, 3] << 2) | table[:, 4]
                starts = np.flatnonzero(np.diff(table[:, 0])) + 1
                for page_rows, (page,) in zip(np.split(packed, starts), table[np.append(0, starts)][:, :1].tolist(),
                                              strict=True):
                    self.conn.execute("INSERT OR REPLACE INTO aci_page_rows (page, owners, rows) VALUES (?, ?, ?)",
                                      (page, len(page_rows), page_rows.astype(_INT64).tobytes()))
                done = table[table[:, 5] != 0]
                self.conn.executemany("INSERT OR IGNORE INTO aci_delivered (page, owner) VALUES (?, ?)",
                                      done[:, :2].tolist())
                last = int(table[-1, 0])
            for name in ("aci_row", "aci_by_owner", "aci_owner_run", "aci_run"):
                self.conn.execute(f"DROP TABLE IF EXISTS {name}")
            self.conn.execute("DELETE FROM aci_owner_index")
            self.conn.execute("DELETE FROM aci_runs")
            self.conn.execute("UPDATE aci_meta SET value = 0 WHERE name = 'indexed'")
            self._index_owners()

    def _index_again_if_older(self) -> None:
        """An owner index of an earlier form (a row per run and owner, keyed by both): made
        again (it is derived from the pages' blobs)."""
        older = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci_owner_rows'"
        if self.conn.execute(older).fetchone():
            with _Transaction(self.conn):
                if self.conn.execute(older).fetchone():
                    self.conn.execute("DROP TABLE aci_owner_rows")
                    self.conn.execute("DELETE FROM aci_runs")
                    self.conn.execute("UPDATE aci_meta SET value = 0 WHERE name = 'indexed'")
                    self._index_owners()

    def add(self, acis: PageAcis | Iterable[Aci]) -> int:
        """All in one transaction: each page version once, then one row per owner.

        Threads adding at once are written together (a group commit): whoever takes the
        store's lock writes every page waiting, in one transaction, and the others find theirs
        written. Should that transaction fail, each of its pages is written alone, so a page
        that cannot be stored fails by itself, all or none of its ACIs."""
        pages = [acis] if isinstance(acis, PageAcis) else PageAcis.of(list(acis))
        pages = [p for p in pages if p]
        if not pages:
            return 0
        entry = _Pending(pages)
        with self._waiting_lock:
            self._waiting.append(entry)
        with self.lock:
            if not entry.done:
                with self._waiting_lock:
                    batch, self._waiting = self._waiting, []
                self._write(batch)
        if entry.error is not None:
            raise entry.error
        return entry.added

    @_serialised
    def add_pages(self, pages: list[PageAcis | Iterable[Aci]]) -> list[int | Exception]:
        """Every page in one transaction (each alone should it fail, see :meth:`add`)."""
        entries = [_Pending([q for q in ([p] if isinstance(p, PageAcis) else PageAcis.of(list(p))) if q])
                   for p in pages]
        waiting = [e for e in entries if e.pages]
        for entry in entries:
            if entry not in waiting:
                entry.done = True
        if waiting:
            self._write(waiting)
        return [e.error if e.error is not None else e.added for e in entries]

    def _write(self, batch: list[_Pending]) -> None:
        try:
            with _Transaction(self.conn):
                counts = [self._store(entry.pages) for entry in batch]
        except Exception:
            self._forget_numbers()
            if len(batch) == 1:
                batch[0].fail(sys.exc_info()[1])
                return
            for entry in batch:  # which of them failed: each alone
                try:
                    with _Transaction(self.conn):
                        entry.added = self._store(entry.pages)
                except Exception as exc:
                    self._forget_numbers()
                    entry.fail(exc)
                entry.done = True
            return
        for entry, added in zip(batch, counts, strict=True):
            entry.added, entry.done = added, True

    def _store(self, pages: list[PageAcis]) -> int:
        added = 0
        for page in pages:
            relevances, which = np.unique(np.asarray(page.relevance, dtype=np.float64), return_inverse=True)
            page_id, key_base, relevance_base = self._version(page, relevances.tolist())
            owners = self._owners_of(page)
            flags = np.asarray(page.urgent, dtype=np.int64) * 2
            if page.expired:
                flags += np.asarray(page.expired, dtype=np.int64)
            packed = ((owners << 38) | ((np.asarray(page.key, dtype=np.int64) + key_base) << 20)
                      | ((which.astype(np.int64) + relevance_base) << 2) | flags)
            _, first = np.unique(owners, return_index=True)  # an owner twice in one page: the first counts
            packed = np.sort(packed[first])
            stored = self.conn.execute("SELECT rows FROM aci_page_rows WHERE page = ?", (page_id,)).fetchone()
            if stored is None:
                new = packed
                self.conn.execute("INSERT INTO aci_page_rows (page, owners, rows) VALUES (?, ?, ?)",
                                  (page_id, len(new), new.astype(_INT64).tobytes()))
            else:  # more owners of a stored version: those not in it yet
                before = _int64s(stored[0])
                new = packed[~np.isin(packed >> 38, before >> 38)]
                if not len(new):
                    continue
                merged = np.sort(np.concatenate((before, new)))
                self.conn.execute("UPDATE aci_page_rows SET owners = ?, rows = ? WHERE page = ?",
                                  (len(merged), merged.astype(_INT64).tobytes(), page_id))
                if page_id <= self._indexed():  # a page the owner index holds: its newcomers go in too
                    self._index_late(page_id, new)
                    added += len(new)
                    continue
            added += len(new)
            self._tail += len(new)
            self._tail_pages += stored is None
        self._wrote = True
        if self._tail > _TAIL_ROWS or self._tail_pages > _TAIL_PAGES:
            self._index_owners()
        return added

    def _index_late(self, page_id: int, numbers: np.ndarray) -> None:
        """Owners added to a page the owner index holds already: into its last run."""
        run = self.conn.execute("SELECT max(run) FROM aci_runs").fetchone()[0]
        for number in numbers.tolist():
            owner = number >> 38
            found = self.conn.execute("SELECT rows FROM aci_owner_index WHERE id = ?",
                                      (run << _OWNER_BITS | owner,)).fetchone()
            pairs = _int64s(found[0], 2) if found else np.zeros(0, dtype=_INT64)
            pairs = np.concatenate((pairs, np.array([page_id, number], dtype=_INT64)))
            self.conn.execute("INSERT OR REPLACE INTO aci_owner_index (id, rows) VALUES (?, ?)",
                              (run << _OWNER_BITS | owner, pairs.tobytes()))

    def _indexed(self) -> int:
        return self.conn.execute(f"SELECT {_INDEXED}").fetchone()[0]

    def _version(self, page: PageAcis, relevances: list[float]) -> tuple[int, int, int]:
        """The row of ``page``'s version (made, or the one stored, its quoted keywords,
        summaries' keys and relevances extended by the page's), and where the page's keys and
        relevances start in it."""
        keywords, keys = page.keywords, page.keys  # tuples are JSON arrays too
        found = self.conn.execute("SELECT id, keywords, keys, relevances, text IS NULL FROM aci_version "
                                  "WHERE uri = ? AND docbase = ?", (page.uri, page.docbase)).fetchone()
        if found is None:
            found = (None, "[]", "[]", "[]", True)
        page_id, stored_keywords, stored_keys, stored_relevances, no_text = found
        stored_keywords, stored_keys = json.loads(stored_keywords), _load_keys(stored_keys)
        stored_relevances = json.loads(stored_relevances)
        if len(stored_keys) + len(keys) > _FIELD_MAX or len(stored_relevances) + len(relevances) > _FIELD_MAX:
            raise ValueError(f"{page.uri}: more than {_FIELD_MAX} distinct summaries or relevances in one page version")
        shift = len(stored_keywords)
        if shift:
            keys = keys.shifted(shift) if isinstance(keys, Keys) else \
                [k if isinstance(k, str) else [i + shift for i in k] for k in keys]
        # the text summaries quote, once per version (the two forms differ only where links are)
        # exactly as judged (escaped JSON keeps any character), so a summary made later is the same
        text = zlib.compress(json.dumps(list(page.text)).encode(), 1) if page.text is not None and no_text else None
        values = (json.dumps(stored_keywords + list(keywords)), _keys_text(stored_keys, keys),
                  json.dumps(stored_relevances + relevances))
        if page_id is None:
            page_id = self.conn.execute(
                "INSERT INTO aci_version (key, uri, docbase, version, updatetime, filesize, format, extension, title, "
                "keywords, keys, relevances, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (page_key(page.uri, page.docbase), page.uri, page.docbase, page.version, page.updatetime,
                 page.filesize, page.format, page.extension, _xml_safe(page.title), *values, text)).lastrowid
        else:
            self.conn.execute("UPDATE aci_version SET keywords = ?, keys = ?, relevances = ?, "
                              "text = coalesce(text, ?) WHERE id = ?", (*values, text, page_id))
        return page_id, len(stored_keys), len(stored_relevances)

    def _owners_of(self, page: PageAcis) -> np.ndarray:
        """The store's numbers of the page's owners: through its owner space (mapped once a
        round), else name by name."""
        if page.owner_space is not None and page.owner_index is not None:
            kept = self._spaces.get(id(page.owner_space))
            if kept is None or kept[0] is not page.owner_space:
                known = self._owner_numbers(set(page.owner_space.tolist()))
                if len(self._spaces) >= 8:
                    self._spaces.clear()
                kept = self._spaces[id(page.owner_space)] = (page.owner_space, np.fromiter(
                    (known[o] for o in page.owner_space), dtype=np.int64, count=len(page.owner_space)))
            return kept[1][page.owner_index]
        known = self._owner_numbers(set(page.owners))
        return np.fromiter((known[o] for o in page.owners), dtype=np.int64, count=len(page.owners))

    def _forget_numbers(self) -> None:
        """A transaction rolled back: owner numbers given in it may not exist."""
        self._owner_no.clear()
        self._spaces.clear()

    def _owner_numbers(self, owners: set[str]) -> dict[str, int]:
        known = self._owner_no
        new = [o for o in owners if o not in known]
        if len(known) + len(new) > _OWNER_MAX:
            raise ValueError(f"more than {_OWNER_MAX} owners in one ACI store")
        if new:  # two statements however many (a round of 10,000 owners meets the store at once)
            self.conn.execute("INSERT OR IGNORE INTO aci_owner_number (name, key) SELECT json_extract(value, '$[0]'), "
                              "json_extract(value, '$[1]') FROM json_each(?)",
                              (json.dumps([(o, owner_key(o)) for o in new]),))
            known.update(self.conn.execute("SELECT name, id FROM aci_owner_number WHERE name IN "
                                           "(SELECT value FROM json_each(?))", (json.dumps(new),)))
        return known

    @_serialised
    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        number = self._owner_no.get(owner) or self._number_of(owner)
        rows = [] if number is None else self._rows(number, self._pages_of(number), since)
        found = [a for a in self._acis(rows) if a.relevance >= min_relevance]
        if self.legacy:
            found += [_legacy_aci(row) for row in self.conn.execute(
                f"{_LEGACY_SELECT} WHERE a.owner = ? AND a.updatetime >= ? AND a.relevance >= ?",
                (owner, since, min_relevance))]
        return sorted(found, key=lambda a: (-a.updatetime, a.id))

    def _number_of(self, owner: str) -> int | None:
        row = self.conn.execute("SELECT id FROM aci_owner_number WHERE name = ?", (owner,)).fetchone()
        return None if row is None else row[0]

    def _pages_of(self, number: int) -> dict[int, int]:
        """The pages holding an ACI of owner ``number``, each with its number there: from the
        owner index's runs, and the blobs of the pages past it."""
        found: dict[int, int] = {}
        for (blob,) in self.conn.execute(f"SELECT rows FROM aci_owner_index WHERE id IN "  # noqa: S608 - names are module constants; values are bound
                                         f"(SELECT run << {_OWNER_BITS} | ? FROM aci_runs)", (number,)):
            pairs = _int64s(blob, 2).reshape(-1, 2)
            found.update(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True))
        for page, blob in self.conn.execute(f"SELECT page, rows FROM aci_page_rows WHERE page > {_INDEXED}"):  # noqa: S608 - names are module constants; values are bound
            found_here = _number_in(blob, number)
            if found_here is not None:
                found[page] = found_here
        return found

    def _rows(self, number: int, pages: dict[int, int], since: int = 0) -> list[tuple]:
        """What :meth:`_acis` reads, for owner ``number`` on ``pages`` (page -> their number)."""
        if not pages:
            return []
        name, okey = self.conn.execute("SELECT name, key FROM aci_owner_number WHERE id = ?", (number,)).fetchone()
        out = []
        for page, *fields in self.conn.execute(
                f"SELECT {_VERSION_FIELDS} FROM aci_version v WHERE v.id IN (SELECT value FROM json_each(?)) "  # noqa: S608 - names are module constants; values are bound
                f"AND v.updatetime >= ?", (json.dumps(list(pages)), since)):
            packed = pages[page]
            out.append(((packed >> 2) & 262143, (packed >> 20) & 262143, packed & 3, name, okey, page, *fields))
        return out

    def _index_owners(self) -> None:
        """Bring the owner index up to the last page (inside the caller's transaction): the
        pages past it become runs of at most about ``_TAIL_ROWS`` ACIs, each appended whole."""
        while True:
            indexed = self._indexed()
            pages, blobs = [], []
            count = 0
            for page, owners, blob in self.conn.execute(
                    "SELECT page, owners, rows FROM aci_page_rows WHERE page > ? ORDER BY page", (indexed,)):
                pages.append(page)
                blobs.append(blob)
                count += owners
                if count >= _TAIL_ROWS:
                    break
            if not pages:
                break
            numbers = [_int64s(b) for b in blobs]
            page_of = np.repeat(np.array(pages, dtype=np.int64), [len(n) for n in numbers])
            numbers = np.concatenate(numbers)
            owner = numbers >> 38
            order = np.lexsort((page_of, owner))
            owner, pairs = owner[order], np.column_stack((page_of[order], numbers[order])).astype(_INT64)
            starts = np.concatenate(([0], np.flatnonzero(np.diff(owner)) + 1)).tolist()
            run = pages[-1]  # labelled by its last page: the largest label, appended whole
            ids = (owner[starts] | (run << _OWNER_BITS)).tolist()
            self.conn.executemany("INSERT OR REPLACE INTO aci_owner_index (id, rows) VALUES (?, ?)",
                                  zip(ids, (pairs[a:b].tobytes() for a, b in
                                            zip(starts, [*starts[1:], len(pairs)], strict=True)), strict=True))
            self.conn.execute("INSERT OR IGNORE INTO aci_runs (run) VALUES (?)", (run,))
            self.conn.execute("UPDATE aci_meta SET value = ? WHERE name = 'indexed'", (run,))
        self._tail = self._tail_pages = 0

    def _acis(self, rows: list[tuple]) -> list[Aci]:
        out = []
        for relevance, key, flags, owner, okey, page, pkey, *fields in rows:
            try:
                keywords, keys, relevances, matches = self._parts(page, key, relevance)
                keys[key], relevances[relevance]  # noqa: B018 - numbers past what the version holds: damaged
            except (ValueError, TypeError, KeyError, IndexError, zlib.error) as exc:
                _logger.warning("ACI store: the ACI of %s on page %d is skipped: its version's columns are "
                                "damaged (%s)", owner, page, type(exc).__name__)
                continue
            uri, docbase, version, updatetime, filesize, fmt, extension, title = fields
            # the relevance as an ACI's XML gives it (``%g``), as `aci list` and feeds read it before
            out.append(Aci(owner=owner, uri=uri, relevance=float(f"{relevances[relevance]:g}"), updatetime=updatetime,
                           filesize=filesize, version=version, docbase=docbase,
                           summary=_xml_safe(summary_of(keys[key], keywords, matches)), urgent=bool(flags & 2),
                           expired=bool(flags & 1), format=fmt, extension=extension, title=title, id=pkey + okey))
        return out

    def _parts(self, page: int, key: int, relevance: int) -> tuple[list, Any, list, Any]:
        """A version's keywords, keys, relevances and text to quote, read once for the last
        ``_PARTS_KEPT`` versions asked about (owners' lists quote the same pages again and
        again). They only grow (more owners of a version extend them): a number past what
        was read reads them again."""
        parts = self._parts_kept.get(page)
        if parts is None or key >= len(parts[1]) or relevance >= len(parts[2]):
            keywords, keys, relevances, text = self.conn.execute(
                "SELECT keywords, keys, relevances, text FROM aci_version WHERE id = ?", (page,)).fetchone()
            matches = None if text is None else quoting(*json.loads(zlib.decompress(text)))
            parts = (json.loads(keywords), _load_keys(keys), json.loads(relevances), matches)
            if len(self._parts_kept) >= _PARTS_KEPT:
                self._parts_kept.pop(next(iter(self._parts_kept)))
            self._parts_kept[page] = parts
        return parts

    @_serialised
    def get(self, aci_id: str) -> Aci | None:
        parts = split_id(aci_id)
        if parts is not None:
            owner = self.conn.execute("SELECT id FROM aci_owner_number WHERE key = ?", (parts[1],)).fetchone()
            if owner is not None:
                for page, blob in self.conn.execute("SELECT p.page, p.rows FROM aci_page_rows p JOIN aci_version v "
                                                    "ON v.id = p.page WHERE v.key = ?", (parts[0],)):
                    number = _number_in(blob, owner[0])
                    if number is not None:
                        return self._acis(self._rows(owner[0], {page: number}))[0]
        if self.legacy:
            row = self.conn.execute(f"{_LEGACY_SELECT} WHERE a.id = ?", (aci_id,)).fetchone()
            return _legacy_aci(row) if row else None
        return None

    @_serialised
    def owners(self) -> list[str]:
        numbers = {o for (o,) in self.conn.execute(f"SELECT DISTINCT id & {_OWNER_MAX - 1} FROM aci_owner_index")}  # noqa: S608 - names are module constants; values are bound
        for (blob,) in self.conn.execute(f"SELECT rows FROM aci_page_rows WHERE page > {_INDEXED}"):  # noqa: S608 - names are module constants; values are bound
            numbers.update(np.unique(_int64s(blob) >> 38).tolist())
        names = {o for (o,) in self.conn.execute("SELECT name FROM aci_owner_number WHERE id IN "
                                                  "(SELECT value FROM json_each(?))", (json.dumps(sorted(numbers)),))}
        if self.legacy:
            names.update(o for (o,) in self.conn.execute("SELECT DISTINCT owner FROM aci"))
        return sorted(names)

    @_serialised
    def ack(self, owner: str, ids: Iterable[str] | None = None) -> int:
        with _Transaction(self.conn):
            row = self.conn.execute("SELECT id, key FROM aci_owner_number WHERE name = ?", (owner,)).fetchone()
            done = 0
            if ids is None:
                if row is not None:
                    done += self._delivered(row[0], list(self._pages_of(row[0])))
                if self.legacy:
                    done += self.conn.execute("UPDATE aci SET delivered = 1 WHERE owner = ? AND delivered = 0",
                                              (owner,)).rowcount
                return done
            for aci_id in ids:
                parts = split_id(aci_id)
                if row is not None and parts is not None and parts[1] == row[1]:
                    pages = [page for page, blob in self.conn.execute(
                        "SELECT p.page, p.rows FROM aci_page_rows p JOIN aci_version v ON v.id = p.page "
                        "WHERE v.key = ?", (parts[0],)) if _number_in(blob, row[0]) is not None]
                    done += self._delivered(row[0], pages)
                elif self.legacy:
                    done += self.conn.execute("UPDATE aci SET delivered = 1 WHERE owner = ? AND id = ? "
                                              "AND delivered = 0", (owner, aci_id)).rowcount
            return done

    def _delivered(self, owner: int, pages: list[int]) -> int:
        """Mark the owner's ACIs on ``pages`` delivered; how many were not yet."""
        start = self.conn.total_changes
        self.conn.execute("INSERT OR IGNORE INTO aci_delivered (page, owner) SELECT value, ? FROM json_each(?)",
                          (owner, json.dumps(pages)))
        return self.conn.total_changes - start

    @_serialised
    def undelivered_digests(self) -> set[str]:
        found = {d for (d,) in self.conn.execute(
            "SELECT DISTINCT v.docbase FROM aci_version v JOIN aci_page_rows p ON p.page = v.id "
            "WHERE p.owners > (SELECT count(*) FROM aci_delivered d WHERE d.page = p.page)")}
        if self.legacy:
            found.update(d for (d,) in self.conn.execute(
                "SELECT DISTINCT CASE WHEN a.page IS NULL THEN a.docbase ELSE p.docbase END "
                "FROM aci a LEFT JOIN aci_page p ON p.id = a.page WHERE a.delivered = 0"))
        return found

    @_serialised
    def close(self) -> None:
        if self._wrote and (self._tail or self._tail_pages):
            with _Transaction(self.conn):
                self._index_owners()
        self.conn.close()


def _number_in(blob: bytes, owner: int) -> int | None:
    """Owner ``owner``'s number in a page's blob (None: no ACI of theirs there)."""
    numbers = _int64s(blob)
    at = int(np.searchsorted(numbers >> 38, owner))
    return int(numbers[at]) if at < len(numbers) and numbers[at] >> 38 == owner else None


class _Pending:
    """Pages one thread is adding, and what came of it."""

    __slots__ = ("added", "done", "error", "pages")

    def __init__(self, pages: list[PageAcis]) -> None:
        self.pages = pages
        self.added = 0
        self.done = False
        self.error: BaseException | None = None

    def fail(self, exc: BaseException | None) -> None:
        self.error, self.done = exc, True


def _load_keys(text: str) -> Any:
    """A version's stored keys: a JSON list (of lists and summaries given as they are), or
    a :class:`~webrace.records.aci.Keys` as JSON."""
    value = json.loads(text)
    return Keys.from_json(value) if isinstance(value, dict) else value


def _keys_text(stored: Any, added: Any) -> str:
    """The JSON of a version's keys, the stored followed by the added (compact when both
    are :class:`~webrace.records.aci.Keys`, or none is stored)."""
    if isinstance(added, Keys) and (isinstance(stored, Keys) or not stored):
        return (stored + added if len(stored) else added).to_json()
    return _json_safe(list(stored) + list(added))


def _json_safe(value: Any) -> str:
    """JSON of page text (summaries given as they are), without what XML 1.0 cannot hold."""
    return _xml_safe(json.dumps(value, ensure_ascii=False))


def _legacy_aci(row: tuple) -> Aci:
    xml, owner, relevance, summary, urgent, expired, aci_id, *page = row
    if xml:  # written before aci_page
        return Aci.from_xml(xml)
    uri, docbase, version, updatetime, filesize, fmt, extension, title = page
    # the relevance as the ACI's XML gave it (``%g``), as `aci list` and feeds read it before
    return Aci(owner=owner, uri=uri, relevance=float(f"{relevance:g}"), updatetime=updatetime, filesize=filesize,
               version=version, docbase=docbase, summary=summary, urgent=bool(urgent), expired=bool(expired),
               format=fmt, extension=extension, title=title, id=aci_id)


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
        self.lock = threading.RLock()  # usable from any thread (the crawl looks sentinels up in worker threads)
        self.conn = connect(Path(path), threads=True)
        self.conn.executescript(_SENTINEL_SCHEMA)
        if "asked" not in {row[1] for row in self.conn.execute("PRAGMA table_info(sentinel)")}:
            self.conn.execute("ALTER TABLE sentinel ADD COLUMN asked INTEGER NOT NULL DEFAULT 0")

    @_serialised
    def add(self, sentinels: Iterable[Any]) -> list[str]:
        ids = []
        with _Transaction(self.conn):
            for s in sentinels:
                self.conn.execute(
                    "INSERT INTO sentinel (id, owner, url, next_due, seen, json, asked) "
                    "VALUES (?, ?, ?, 0, NULL, ?, 1) ON CONFLICT(id) DO UPDATE SET json = excluded.json, asked = 1",
                    (s.id, s.owner, s.url, s.to_json()))
                ids.append(s.id)
        return ids

    @_serialised
    def remove(self, ids: Iterable[str]) -> list[str]:
        removed = []
        with _Transaction(self.conn):
            for i in ids:
                if self.conn.execute("DELETE FROM sentinel WHERE id = ?", (i,)).rowcount:
                    removed.append(i)
        return removed

    @_serialised
    def all(self, owner: str | None = None) -> list[tuple[Any, int, str | None]]:
        where = " WHERE owner = ?" if owner else ""
        query = f"SELECT json, next_due, seen FROM sentinel{where} ORDER BY url, id"  # noqa: S608 - names are module constants; values are bound
        rows = self.conn.execute(query, (owner,) if owner else ())
        return [(self.sentinel_cls.from_json(j), due, seen) for j, due, seen in rows]

    @_serialised
    def due(self, now_ms: int) -> list[tuple[Any, str | None]]:
        rows = self.conn.execute("SELECT json, seen, asked FROM sentinel WHERE next_due <= ? ORDER BY url, id",
                                 (now_ms,))
        return [(replace(self.sentinel_cls.from_json(j), asked=bool(asked)), seen) for j, seen, asked in rows]

    @_serialised
    def watching(self, url: str) -> list[tuple[Any, str | None]]:
        rows = self.conn.execute("SELECT json, seen FROM sentinel WHERE url = ? ORDER BY id", (url,))
        return [(self.sentinel_cls.from_json(j), seen) for j, seen in rows]

    @_serialised
    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        with _Transaction(self.conn):
            if ids is None:
                self.conn.execute("UPDATE sentinel SET next_due = ?, asked = 1", (at_ms,))
                return [i for (i,) in self.conn.execute("SELECT id FROM sentinel ORDER BY id")]
            return [i for i in ids if self.conn.execute("UPDATE sentinel SET next_due = ?, asked = 1 WHERE id = ?",
                                                        (at_ms, i)).rowcount]

    @_serialised
    def checked(self, ids: Iterable[str], at_ms: int, seen: str | None = None) -> None:
        with _Transaction(self.conn):
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

    @_serialised
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
        self.conn.execute("UPDATE sentinel SET next_due = ?, seen = ?, asked = 0 WHERE id = ?",
                          (min(at_ms + every, MAX_TIME_MS), seen, sentinel_id))
        return True

    @_serialised
    def put_digest(self, sha: str, data: bytes) -> None:
        with _Transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO pagedigest (sha, data) VALUES (?, ?)", (sha, data))

    @_serialised
    def get_digest(self, sha: str) -> bytes | None:
        row = self.conn.execute("SELECT data FROM pagedigest WHERE sha = ?", (sha,)).fetchone()
        return bytes(row[0]) if row else None

    @_serialised
    def gc_digests(self) -> int:
        with _Transaction(self.conn):
            return self.conn.execute("DELETE FROM pagedigest WHERE sha NOT IN "
                                     "(SELECT seen FROM sentinel WHERE seen IS NOT NULL) "
                                     "AND sha NOT IN (SELECT sha FROM notedigest)").rowcount

    @_serialised
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

    @_serialised
    def notifications(self, owner: str, since: int = 0) -> list[dict]:
        rows = self.conn.execute("SELECT json FROM notification WHERE owner = ? AND at >= ? ORDER BY at DESC, id",
                                 (owner, since))
        return [json.loads(j) for (j,) in rows]

    @_serialised
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
