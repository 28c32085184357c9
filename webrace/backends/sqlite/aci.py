"""The embedded ACI store (``aci.sqlite``): a page version's ACIs kept once for all its owners."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from webrace.backends.base import AciStore, Cursor
from webrace.backends.sqlite.connection import Transaction, connect, serialised
from webrace.records.aci import Aci, Keys, PageAcis, _xml_safe, owner_key, page_key, quoting, split_id, summary_of

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
# Which ACIs were delivered is a row each (aci_delivered). The owner index's pages are also
# kept by owner and time (aci_owner_time: a row per ACI, written in bulk with each run, sorted),
# so a page of an owner's list is one index range however long their history (SqliteAciStore.page).
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
CREATE TABLE IF NOT EXISTS aci_owner_time (
    owner       INTEGER NOT NULL,
    updatetime  INTEGER NOT NULL,
    page        INTEGER NOT NULL,
    number      INTEGER NOT NULL,
    PRIMARY KEY (owner, updatetime, page)
) WITHOUT ROWID;
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
_TIME_MARK = "time_indexed"  # aci_meta: the last run of the owner index put in aci_owner_time
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
        new = not self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci_meta'").fetchone()
        self.conn.executescript(_ACI_SCHEMA)
        if new:
            self.conn.execute("INSERT OR IGNORE INTO aci_meta (name, value) VALUES ('time_indexed', 0)")
        self.legacy = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci'").fetchone()
        if self.legacy:
            with Transaction(self.conn):
                have = {row[1] for row in self.conn.execute("PRAGMA table_info(aci)")}
                for name in _LEGACY_OWN:
                    if name not in have:
                        self.conn.execute(f"ALTER TABLE aci ADD COLUMN {name} "
                                          f"{'TEXT' if name == 'summary' else 'INTEGER'}")
                self.conn.execute("CREATE TABLE IF NOT EXISTS aci_page (id INTEGER PRIMARY KEY, "
                                  + ", ".join(_LEGACY_FIELDS) + ")")
                self.conn.execute("CREATE INDEX IF NOT EXISTS aci_owner_newest ON aci(owner, updatetime, id)")
        self._from_rows()
        self._index_again_if_older()
        self._time_index_known()
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
        with Transaction(self.conn):
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
            self._time_index_again()
            self.conn.execute("DELETE FROM aci_runs")
            self.conn.execute("UPDATE aci_meta SET value = 0 WHERE name = 'indexed'")
            self._index_owners()

    def _index_again_if_older(self) -> None:
        """An owner index of an earlier form (a row per run and owner, keyed by both): made
        again (it is derived from the pages' blobs)."""
        older = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aci_owner_rows'"
        if self.conn.execute(older).fetchone():
            with Transaction(self.conn):
                if self.conn.execute(older).fetchone():
                    self.conn.execute("DROP TABLE aci_owner_rows")
                    self._time_index_again()
                    self.conn.execute("DELETE FROM aci_runs")
                    self.conn.execute("UPDATE aci_meta SET value = 0 WHERE name = 'indexed'")
                    self._index_owners()

    def _time_index_known(self) -> None:
        """A store from before aci_owner_time was kept by runs (no ``time_indexed`` mark): its
        time index is made from the owner index by the first read that needs it."""
        if not self.conn.execute(f"SELECT 1 FROM aci_meta WHERE name = '{_TIME_MARK}'").fetchone():  # noqa: S608 - a module constant
            with Transaction(self.conn):
                if not self.conn.execute(f"SELECT 1 FROM aci_meta WHERE name = '{_TIME_MARK}'").fetchone():  # noqa: S608 - a module constant
                    self._time_index_again()

    def _time_index_again(self) -> None:
        """(In the caller's transaction) the time index emptied, to be made again from the runs."""
        self.conn.execute("DELETE FROM aci_owner_time")
        self.conn.execute(f"INSERT OR REPLACE INTO aci_meta (name, value) VALUES ('{_TIME_MARK}', 0)")  # noqa: S608 - a module constant

    def _catch_up_by_time(self) -> None:
        """Before a read of aci_owner_time: the owner index's runs past it put in it (a run at a
        time, sorted, in one transaction). Done by the reader, not the crawl: a crawl of 10,000
        owners makes hundreds of thousands of ACIs, and writing a row each as it indexes cost it
        a fifth of its pages a second; the web app's first page after it pays once, the next
        ones nothing. A store that cannot be written (read-only) is read as it is."""
        mark = f"SELECT value FROM aci_meta WHERE name = '{_TIME_MARK}'"  # noqa: S608 - a module constant
        done = (self.conn.execute(mark).fetchone() or (0,))[0]
        if not self.conn.execute("SELECT 1 FROM aci_runs WHERE run > ? LIMIT 1", (done,)).fetchone():
            return
        try:
            with Transaction(self.conn):
                done = (self.conn.execute(mark).fetchone() or (0,))[0]  # another process may have done it
                runs = [r for (r,) in self.conn.execute("SELECT run FROM aci_runs WHERE run > ? ORDER BY run",
                                                        (done,))]
                for run in runs:
                    low = run << _OWNER_BITS
                    for owner, blob in self.conn.execute(
                            "SELECT id - ?, rows FROM aci_owner_index WHERE id BETWEEN ? AND ?",
                            (low, low, low | (_OWNER_MAX - 1))).fetchall():
                        pairs = _int64s(blob, 2).reshape(-1, 2)
                        self._put_by_time(np.full(len(pairs), owner, dtype=np.int64), pairs[:, 0], pairs[:, 1])
                if runs:
                    self.conn.execute(f"UPDATE aci_meta SET value = ? WHERE name = '{_TIME_MARK}'", (runs[-1],))  # noqa: S608 - a module constant
        except sqlite3.OperationalError as exc:  # read-only, or locked past the busy timeout: read as it is
            _logger.warning("The ACI store's time index could not be brought up to date: %s", exc)

    def _put_by_time(self, owners: np.ndarray, pages: np.ndarray, numbers: np.ndarray) -> None:
        """Rows of aci_owner_time for these (owner, page, number), sorted by its key first (the
        B-tree is then written in order)."""
        if not len(pages):
            return
        unique = np.unique(pages)
        times = dict(self.conn.execute("SELECT id, updatetime FROM aci_version WHERE id IN "
                                       "(SELECT value FROM json_each(?))", (json.dumps(unique.tolist()),)))
        when = np.fromiter((times.get(p, 0) for p in unique.tolist()), dtype=np.int64, count=len(unique))
        when = when[np.searchsorted(unique, pages)]
        order = np.lexsort((pages, when, owners))
        self.conn.executemany("INSERT OR REPLACE INTO aci_owner_time (owner, updatetime, page, number) "
                              "VALUES (?, ?, ?, ?)", zip(owners[order].tolist(), when[order].tolist(),
                                                         pages[order].tolist(), numbers[order].tolist(), strict=True))

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

    @serialised
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
            with Transaction(self.conn):
                counts = [self._store(entry.pages) for entry in batch]
        except Exception:
            self._forget_numbers()
            if len(batch) == 1:
                batch[0].fail(sys.exc_info()[1])
                return
            for entry in batch:  # which of them failed: each alone
                try:
                    with Transaction(self.conn):
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
        done = self.conn.execute(f"SELECT value FROM aci_meta WHERE name = '{_TIME_MARK}'").fetchone()  # noqa: S608 - a module constant
        if done and run is not None and run <= done[0]:  # that run is in the time index already: these too
            self._put_by_time(numbers >> 38, np.full(len(numbers), page_id, dtype=np.int64), numbers)

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

    @serialised
    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        number = self._owner_no.get(owner) or self._number_of(owner)
        rows = [] if number is None else self._rows(number, self._pages_of(number), since)
        found = [a for a in self._acis(rows) if a.relevance >= min_relevance]
        if self.legacy:
            found += [_legacy_aci(row) for row in self.conn.execute(
                f"{_LEGACY_SELECT} WHERE a.owner = ? AND a.updatetime >= ? AND a.relevance >= ?",
                (owner, since, min_relevance))]
        return sorted(found, key=lambda a: (-a.updatetime, a.id))

    @serialised
    def page(self, owner: str, limit: int, after: Cursor | None = None, newer: bool = False) -> list[Aci]:
        """One index range of aci_owner_time (owner, then update time and page, read backwards
        for older ones), the pages past the owner index (at most ``_TAIL_PAGES``) and, in a
        store from before aci_version, its own index (aci_owner_newest); ties of update time
        go by page, newest stored first, then the older layout's by id."""
        limit = max(int(limit), 0)
        number = self._owner_no.get(owner) or self._number_of(owner)
        mark = None if after is None else self._mark(after)
        found: list[tuple[tuple, Any]] = []
        sign, order = (">", "ASC") if newer else ("<", "DESC")
        if number is not None and limit:
            self._catch_up_by_time()
            where, args = "", ()
            if mark is not None:  # an older layout's ACI stands after the stored layout's of its time
                where, args = f"AND (updatetime, page) {sign} (?, ?)", (mark[0], mark[2] if mark[1] else 0)
            rows = self.conn.execute(f"SELECT updatetime, page, number FROM aci_owner_time WHERE owner = ? {where} "  # noqa: S608 - fixed clauses; values are bound
                                     f"ORDER BY updatetime {order}, page {order} LIMIT ?",
                                     (number, *args, limit)).fetchall()
            rows += self._tail_of(number)
            found = [((t, 1, page), (page, packed)) for t, page, packed in rows]
        if self.legacy and limit:
            where, args = "", ()
            if mark is not None:
                args = (mark[0], mark[2]) if not mark[1] else (mark[0], "\uffff") if newer else (mark[0] + 1, "")
                where = f"AND (a.updatetime, a.id) {sign} (?, ?)"
            for row in self.conn.execute(f"{_LEGACY_SELECT} WHERE a.owner = ? {where} "  # noqa: S608 - fixed clauses; values are bound
                                         f"ORDER BY a.updatetime {order}, a.id {order} LIMIT ?", (owner, *args, limit)):
                item = _legacy_aci(row)
                found.append(((item.updatetime, 0, item.id), item))
        if mark is not None:  # the pages past the owner index were read whole
            found = [f for f in found if (f[0] > mark if newer else f[0] < mark)]
        found.sort(key=lambda f: f[0], reverse=True)
        chosen = found[-limit:] if newer and mark is not None else found[:limit]
        made: dict[int, Aci] = {}
        mine = {page: packed for (_, kind, _), (page, packed) in ((k, v) for k, v in chosen if k[1])}
        if mine:
            self._read_parts(list(mine))
            for row in self._rows(number, mine):
                item = self._acis([row])
                if item:  # a damaged version is skipped (and said)
                    made[row[5]] = item[0]
        return [made[v[0]] if k[1] else v for k, v in chosen if not k[1] or v[0] in made]

    def _mark(self, after: Cursor) -> tuple[int, int, Any]:
        """Where a cursor (updatetime, id) stands in this store's order: (time, 1, page) for an
        ACI of the stored layout, (time, 0, id) for one of the older."""
        when, aci_id = int(after[0]), str(after[1])
        parts = split_id(aci_id)
        if parts is not None:
            row = self.conn.execute("SELECT id FROM aci_version WHERE key = ? AND updatetime = ? ORDER BY id DESC",
                                    (parts[0], when)).fetchone()
            if row is not None:
                return when, 1, row[0]
        if self.legacy and self.conn.execute("SELECT 1 FROM aci WHERE id = ?", (aci_id,)).fetchone():
            return when, 0, aci_id
        return when, 1, 0  # an ACI unknown here: those of the same time come before it

    def _tail_of(self, number: int) -> list[tuple[int, int, int]]:
        """(updatetime, page, number) of owner ``number``'s ACIs on the pages past the owner index."""
        out = []
        for page, blob, when in self.conn.execute(
                f"SELECT p.page, p.rows, v.updatetime FROM aci_page_rows p JOIN aci_version v ON v.id = p.page "  # noqa: S608 - names are module constants; values are bound
                f"WHERE p.page > {_INDEXED}"):
            found_here = _number_in(blob, number)
            if found_here is not None:
                out.append((when, page, found_here))
        return out

    @serialised
    def count(self, owner: str) -> int:
        number = self._owner_no.get(owner) or self._number_of(owner)
        found = 0
        if number is not None:
            self._catch_up_by_time()
            found = self.conn.execute("SELECT count(*) FROM aci_owner_time WHERE owner = ?", (number,)).fetchone()[0]
            found += len(self._tail_of(number))
        if self.legacy:
            found += self.conn.execute("SELECT count(*) FROM aci WHERE owner = ?", (owner,)).fetchone()[0]
        return found

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
            parts = self._keep_parts(page, *self.conn.execute(
                "SELECT keywords, keys, relevances, text FROM aci_version WHERE id = ?", (page,)).fetchone())
        return parts

    def _keep_parts(self, page: int, keywords: str, keys: str, relevances: str, text: bytes | None) -> tuple:
        matches = None if text is None else quoting(*json.loads(zlib.decompress(text)))
        parts = (json.loads(keywords), _load_keys(keys), json.loads(relevances), matches)
        if len(self._parts_kept) >= _PARTS_KEPT:
            self._parts_kept.pop(next(iter(self._parts_kept)))
        self._parts_kept[page] = parts
        return parts

    def _read_parts(self, pages: list[int]) -> None:
        """:meth:`_parts` of these versions read in one query (a page of a list quotes each once)."""
        wanted = [p for p in pages if p not in self._parts_kept][:_PARTS_KEPT]
        if wanted:
            for page, *columns in self.conn.execute(
                    "SELECT id, keywords, keys, relevances, text FROM aci_version WHERE id IN "
                    "(SELECT value FROM json_each(?))", (json.dumps(wanted),)):
                try:
                    self._keep_parts(page, *columns)
                except (ValueError, TypeError, zlib.error):  # damaged: _acis says so when it reads it again
                    continue

    @serialised
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

    @serialised
    def owners(self) -> list[str]:
        numbers = {o for (o,) in self.conn.execute(f"SELECT DISTINCT id & {_OWNER_MAX - 1} FROM aci_owner_index")}  # noqa: S608 - names are module constants; values are bound
        for (blob,) in self.conn.execute(f"SELECT rows FROM aci_page_rows WHERE page > {_INDEXED}"):  # noqa: S608 - names are module constants; values are bound
            numbers.update(np.unique(_int64s(blob) >> 38).tolist())
        names = {o for (o,) in self.conn.execute("SELECT name FROM aci_owner_number WHERE id IN "
                                                  "(SELECT value FROM json_each(?))", (json.dumps(sorted(numbers)),))}
        if self.legacy:
            names.update(o for (o,) in self.conn.execute("SELECT DISTINCT owner FROM aci"))
        return sorted(names)

    @serialised
    def ack(self, owner: str, ids: Iterable[str] | None = None) -> int:
        with Transaction(self.conn):
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

    @serialised
    def undelivered_digests(self) -> set[str]:
        found = {d for (d,) in self.conn.execute(
            "SELECT DISTINCT v.docbase FROM aci_version v JOIN aci_page_rows p ON p.page = v.id "
            "WHERE p.owners > (SELECT count(*) FROM aci_delivered d WHERE d.page = p.page)")}
        if self.legacy:
            found.update(d for (d,) in self.conn.execute(
                "SELECT DISTINCT CASE WHEN a.page IS NULL THEN a.docbase ELSE p.docbase END "
                "FROM aci a LEFT JOIN aci_page p ON p.id = a.page WHERE a.delivered = 0"))
        return found

    @serialised
    def close(self) -> None:
        if self._wrote and (self._tail or self._tail_pages):
            with Transaction(self.conn):
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
