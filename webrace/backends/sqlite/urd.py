"""The embedded URD-DB (``urd.sqlite``): a URD a row, its fields in columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import replace
from itertools import islice
from pathlib import Path

from webrace.backends.base import UrdStore
from webrace.backends.sqlite.connection import Transaction, connect
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
                with Transaction(self.conn, immediate=False):  # writes the temporary table only
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

    def reclock(self, now_ms: int) -> int:
        """One statement over the index's range of URDs not due (a last check after now means a
        next due time after it); a last check kept as text is beyond any INTEGER: after now."""
        with self._transaction():
            return self.conn.execute("UPDATE urd SET next_due = :now WHERE next_due > :now AND lastcheck > :now",
                                     {"now": now_ms}).rowcount

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
        return Transaction(self.conn)


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
