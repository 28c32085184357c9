"""The delivery journal: what this delivery agent delivered, per channel, in its own data
directory (``WEBRACE_DATA_DIR/delivery-journal.sqlite``), so that an item it delivered is not
sent again when the delivery store forgot it (Redis came back empty, or from an older copy;
the channels registered again, the crawl made the same ACIs again with the same ids).

A channel is known by a keyed hash of its owner and URL (HMAC-SHA256 with a random key kept
in the journal itself): the journal holds no URL, and its keys cannot be checked against a
guessed URL without the file. Bounded: an entry older than ``max_age_ms`` is forgotten, and
beyond ``max_entries`` the oldest go first; pruned after each write.

One process's record: two delivery loops on two machines each know what they sent.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from pathlib import Path

from webrace.backends.sqlite.connection import Transaction, connect

Sent = tuple[str, str, int]  # (kind, item id, item time): as the delivery store's marks
CHUNK = 500  # ids a query at most (SQLite's bound on parameters)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name   TEXT PRIMARY KEY,
    value  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS delivered (
    channel  TEXT NOT NULL,
    kind     TEXT NOT NULL,
    item     TEXT NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (channel, kind, item)
);
CREATE INDEX IF NOT EXISTS delivered_at ON delivered(at);
"""


class DeliveryJournal:
    """``path``: the SQLite file (made if missing; :class:`~webrace.datadir.DataDirUnusable`
    when it cannot be used, ``sqlite3.Error`` when it is corrupt)."""

    def __init__(self, path: Path, max_age_ms: int, max_entries: int) -> None:
        self.max_age_ms = max_age_ms
        self.max_entries = max(max_entries, 1)
        self.conn = connect(path)
        try:
            self.conn.executescript(_SCHEMA)
            with Transaction(self.conn):
                self.conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('key', ?)",
                                  (secrets.token_bytes(32),))
                self.key = bytes(self.conn.execute("SELECT value FROM meta WHERE name = 'key'").fetchone()[0])
        except BaseException:
            self.conn.close()
            raise

    def channel_key(self, owner: str, url: str) -> str:
        """The channel as the journal knows it: no URL, no hash a guess can be checked against."""
        return hmac.new(self.key, f"{owner}\n{url}".encode(), hashlib.sha256).hexdigest()[:32]

    def delivered(self, owner: str, url: str, kind: str, ids: Iterable[str], now_ms: int) -> set[str]:
        """Those of ``ids`` (of ``kind``) delivered to the channel within the age bound."""
        channel, ids, found = self.channel_key(owner, url), list(ids), set()
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(item for (item,) in self.conn.execute(
                f"SELECT item FROM delivered WHERE channel = ? AND kind = ? AND at >= ? AND item IN ({marks})",  # noqa: S608 - placeholders only
                (channel, kind, now_ms - self.max_age_ms, *chunk)))
        return found

    def record(self, owner: str, url: str, items: Iterable[Sent], now_ms: int) -> None:
        """A send to the channel succeeded: its items delivered at ``now_ms``; then pruned."""
        channel = self.channel_key(owner, url)
        with Transaction(self.conn):
            self.conn.executemany("INSERT OR REPLACE INTO delivered (channel, kind, item, at) VALUES (?, ?, ?, ?)",
                                  [(channel, kind, item, now_ms) for kind, item, _ in items])
        self.prune(now_ms)

    def prune(self, now_ms: int) -> int:
        """Entries older than the age bound, and the oldest beyond the count, removed; how many."""
        with Transaction(self.conn):
            gone = self.conn.execute("DELETE FROM delivered WHERE at < ?", (now_ms - self.max_age_ms,)).rowcount
            over = self.conn.execute("SELECT COUNT(*) FROM delivered").fetchone()[0] - self.max_entries
            if over > 0:
                gone += self.conn.execute("DELETE FROM delivered WHERE rowid IN (SELECT rowid FROM delivered "
                                          "ORDER BY at, rowid LIMIT ?)", (over,)).rowcount
        return gone

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM delivered").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> DeliveryJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
