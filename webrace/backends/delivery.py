"""The delivery store: each owner's channels, what each channel was sent, its retry state and
its lease (so that two delivery loops never push the same item to one channel twice in the
normal case). One interface, an embedded SQLite implementation
(``WEBRACE_DATA_DIR/delivery.sqlite``) and a Redis one (with ``REDIS_URL``); the factory is
:func:`webrace.backends.open_delivery_store`.

A channel's URL holds its secrets: both stores keep it encrypted
(:class:`~webrace.backends.sealing.ChannelCipher`); a URL stored in clear by an older
version is read as it is and rewritten encrypted. A URL this process cannot decrypt
(another key) is given as ``""``.

Redis keys (``P`` is the prefix):

- ``P delivery:channel``       hash: channel id -> JSON ``{"id", "owner", "url", "events"}`` (``url`` encrypted)
- ``P delivery:state:<id>``    hash: since, attempts, next_try, last_error, failing_since, last_sent
- ``P delivery:sent:<id>``     sorted set: ``kind:item id`` by the item's time (pruned below ``since``)
- ``P delivery:lease:<id>``    string: the delivery loop holding the channel, with a time to live
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path

import redis

from webrace.backends.redis import DEFAULT_PREFIX
from webrace.backends.sealing import ChannelCipher, is_plain
from webrace.backends.sqlite.connection import Transaction, connect
from webrace.records.channel import Channel

Sent = tuple[str, str, int]  # (kind, item id, item time in epoch ms)


class DeliveryStore(ABC):
    def __enter__(self) -> DeliveryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def put_channel(self, channel: Channel) -> bool:
        """Keep the channel; True if it is new. A known id gets the new events, its state and
        what it was sent are kept."""

    @abstractmethod
    def channels(self, owner: str | None = None) -> list[Channel]:
        """Every channel (of ``owner``), by owner then id, with its state; its URL decrypted
        (``""`` if this process's key cannot)."""

    @abstractmethod
    def remove_channel(self, owner: str, channel_id: str) -> bool:
        """Remove the owner's channel and what it was sent; False if the owner has no such channel."""

    @abstractmethod
    def claim(self, channel_id: str, holder: str, lease_ms: int) -> bool:
        """Take the channel for ``lease_ms`` unless another holder has it (atomic)."""

    @abstractmethod
    def release(self, channel_id: str, holder: str) -> None:
        """Give the channel back, if ``holder`` still has it."""

    @abstractmethod
    def unsent(self, channel_id: str, kind: str, ids: Iterable[str]) -> list[str]:
        """Those of ``ids`` (of ``kind``: "aci", "notification") the channel was not sent, in order."""

    @abstractmethod
    def delivered(self, channel_id: str, items: Iterable[Sent], at_ms: int, since: int) -> None:
        """A send succeeded: mark ``items`` sent, clear the failures, move ``since`` up to
        ``since`` and forget marks of items older than it, in one transaction."""

    @abstractmethod
    def remember(self, channel_id: str, items: Iterable[Sent]) -> None:
        """Mark ``items`` sent without a send (the agent's journal says an earlier send took
        them): the channel's state (failures, ``since``, last send) is left as it is."""

    @abstractmethod
    def failed(self, channel_id: str, at_ms: int, error: str, next_try: int) -> int:
        """A send failed: count it, keep the error and the next try; return the failures in a row."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS channel (
    id             TEXT PRIMARY KEY,
    owner          TEXT NOT NULL,
    url            TEXT NOT NULL,
    events         TEXT NOT NULL,
    since          INTEGER NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    next_try       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT '',
    failing_since  INTEGER,
    last_sent      INTEGER,
    holder         TEXT,
    lease_until    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS channel_owner ON channel(owner);
CREATE TABLE IF NOT EXISTS sent (
    channel  TEXT NOT NULL,
    kind     TEXT NOT NULL,
    item     TEXT NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (channel, kind, item)
);
"""
_COLUMNS = "id, owner, url, events, since, attempts, next_try, last_error, failing_since, last_sent"


class SqliteDeliveryStore(DeliveryStore):
    def __init__(self, path: str | Path, cipher: ChannelCipher) -> None:
        self.conn = connect(Path(path))
        self.conn.execute("PRAGMA secure_delete = ON")  # a URL rewritten encrypted leaves no copy in free space
        self.conn.executescript(_SCHEMA)
        self.cipher = cipher
        self._seal_plain()

    def _seal_plain(self) -> None:
        """URLs an older version stored in clear: encrypted, once."""
        plain = self.conn.execute("SELECT id, url FROM channel WHERE instr(url, '://') > 0").fetchall()
        if plain:
            with Transaction(self.conn):
                self.conn.executemany("UPDATE channel SET url = ? WHERE id = ? AND url = ?",
                                      [(self.cipher.seal(url), cid, url) for cid, url in plain])

    def put_channel(self, channel: Channel) -> bool:
        with Transaction(self.conn):
            before = self.conn.total_changes
            self.conn.execute("INSERT OR IGNORE INTO channel (id, owner, url, events, since) VALUES (?, ?, ?, ?, ?)",
                              (channel.id, channel.owner, self.cipher.seal(channel.url), ",".join(channel.events),
                               channel.since))
            new = self.conn.total_changes > before
            self.conn.execute("UPDATE channel SET events = ? WHERE id = ?", (",".join(channel.events), channel.id))
            return new

    def channels(self, owner: str | None = None) -> list[Channel]:
        where = " WHERE owner = ?" if owner is not None else ""
        rows = self.conn.execute(f"SELECT {_COLUMNS} FROM channel{where} ORDER BY owner, id",  # noqa: S608 - a constant and bound values
                                 (owner,) if owner is not None else ())
        return [Channel(r[0], r[1], self.cipher.open(r[2]) or "", tuple(r[3].split(",")), *r[4:]) for r in rows]

    def remove_channel(self, owner: str, channel_id: str) -> bool:
        with Transaction(self.conn):
            if not self.conn.execute("DELETE FROM channel WHERE id = ? AND owner = ?", (channel_id, owner)).rowcount:
                return False
            self.conn.execute("DELETE FROM sent WHERE channel = ?", (channel_id,))
            return True

    def claim(self, channel_id: str, holder: str, lease_ms: int) -> bool:
        now = _now_ms()
        with Transaction(self.conn):
            return bool(self.conn.execute(
                "UPDATE channel SET holder = ?, lease_until = ? WHERE id = ? AND (holder IS NULL OR holder = ? "
                "OR lease_until < ?)", (holder, now + lease_ms, channel_id, holder, now)).rowcount)

    def release(self, channel_id: str, holder: str) -> None:
        with Transaction(self.conn):
            self.conn.execute("UPDATE channel SET holder = NULL, lease_until = 0 WHERE id = ? AND holder = ?",
                              (channel_id, holder))

    def unsent(self, channel_id: str, kind: str, ids: Iterable[str]) -> list[str]:
        query = "SELECT 1 FROM sent WHERE channel = ? AND kind = ? AND item = ?"
        return [i for i in ids if self.conn.execute(query, (channel_id, kind, i)).fetchone() is None]

    def delivered(self, channel_id: str, items: Iterable[Sent], at_ms: int, since: int) -> None:
        with Transaction(self.conn):
            self.conn.executemany("INSERT OR IGNORE INTO sent (channel, kind, item, at) VALUES (?, ?, ?, ?)",
                                  [(channel_id, kind, item, at) for kind, item, at in items])
            self.conn.execute("UPDATE channel SET attempts = 0, next_try = 0, last_error = '', failing_since = NULL, "
                              "last_sent = ?, since = MAX(since, ?) WHERE id = ?", (at_ms, since, channel_id))
            self.conn.execute("DELETE FROM sent WHERE channel = ? AND at < ?", (channel_id, since))

    def remember(self, channel_id: str, items: Iterable[Sent]) -> None:
        with Transaction(self.conn):
            self.conn.executemany("INSERT OR IGNORE INTO sent (channel, kind, item, at) VALUES (?, ?, ?, ?)",
                                  [(channel_id, kind, item, at) for kind, item, at in items])

    def failed(self, channel_id: str, at_ms: int, error: str, next_try: int) -> int:
        with Transaction(self.conn):
            self.conn.execute("UPDATE channel SET attempts = attempts + 1, next_try = ?, last_error = ?, "
                              "failing_since = COALESCE(failing_since, ?) WHERE id = ?",
                              (next_try, error, at_ms, channel_id))
            row = self.conn.execute("SELECT attempts FROM channel WHERE id = ?", (channel_id,)).fetchone()
            return row[0] if row else 0

    def close(self) -> None:
        self.conn.close()


class RedisDeliveryStore(DeliveryStore):
    def __init__(self, client: redis.Redis, cipher: ChannelCipher, key_prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.cipher = cipher
        self.key = f"{key_prefix}delivery:channel"
        self.prefix = f"{key_prefix}delivery:"
        self._claim = client.register_script(_CLAIM)
        self._release = client.register_script(_RELEASE)
        self._replace = client.register_script(_REPLACE)

    def _keys(self, channel_id: str) -> tuple[str, str, str]:
        """(state, sent, lease) keys of the channel."""
        return tuple(f"{self.prefix}{part}:{channel_id}" for part in ("state", "sent", "lease"))

    def put_channel(self, channel: Channel) -> bool:
        state, _, _ = self._keys(channel.id)
        record = {"id": channel.id, "owner": channel.owner, "url": self.cipher.seal(channel.url),
                  "events": list(channel.events)}
        with self.client.pipeline() as pipe:
            pipe.hexists(self.key, channel.id).hset(self.key, channel.id, json.dumps(record))
            pipe.hsetnx(state, "since", channel.since)
            return not pipe.execute()[0]

    def channels(self, owner: str | None = None) -> list[Channel]:
        records = []
        for raw in self.client.hvals(self.key):
            record = json.loads(raw)
            if is_plain(record["url"]):  # stored in clear by an older version: encrypted now
                self._replace(keys=[self.key], args=[record["id"], raw,
                                                     json.dumps({**record, "url": self.cipher.seal(record["url"])})])
            if owner is None or record["owner"] == owner:
                records.append({**record, "url": self.cipher.open(record["url"]) or ""})
        records.sort(key=lambda r: (r["owner"], r["id"]))
        with self.client.pipeline(transaction=False) as pipe:
            for r in records:
                pipe.hgetall(self._keys(r["id"])[0])
            states = pipe.execute()
        return [_channel(r, {_text(k): _text(v) for k, v in s.items()}) for r, s in zip(records, states, strict=True)]

    def remove_channel(self, owner: str, channel_id: str) -> bool:
        raw = self.client.hget(self.key, channel_id)
        if raw is None or json.loads(raw)["owner"] != owner:
            return False
        with self.client.pipeline() as pipe:
            pipe.hdel(self.key, channel_id).delete(*self._keys(channel_id)).execute()
        return True

    def claim(self, channel_id: str, holder: str, lease_ms: int) -> bool:
        return bool(self._claim(keys=[self._keys(channel_id)[2]], args=[holder, lease_ms]))

    def release(self, channel_id: str, holder: str) -> None:
        self._release(keys=[self._keys(channel_id)[2]], args=[holder])

    def unsent(self, channel_id: str, kind: str, ids: Iterable[str]) -> list[str]:
        ids = list(ids)
        if not ids:
            return []
        scores = self.client.zmscore(self._keys(channel_id)[1], [f"{kind}:{i}" for i in ids])
        return [i for i, score in zip(ids, scores, strict=True) if score is None]

    def delivered(self, channel_id: str, items: Iterable[Sent], at_ms: int, since: int) -> None:
        state, sent, _ = self._keys(channel_id)
        marks = {f"{kind}:{item}": at for kind, item, at in items}
        current = int(self.client.hget(state, "since") or 0)
        with self.client.pipeline() as pipe:
            if marks:
                pipe.zadd(sent, marks)
            pipe.hset(state, mapping={"attempts": 0, "next_try": 0, "last_error": "", "last_sent": at_ms,
                                      "since": max(current, since)})
            pipe.hdel(state, "failing_since").zremrangebyscore(sent, "-inf", f"({since}").execute()

    def remember(self, channel_id: str, items: Iterable[Sent]) -> None:
        marks = {f"{kind}:{item}": at for kind, item, at in items}
        if marks:
            self.client.zadd(self._keys(channel_id)[1], marks)

    def failed(self, channel_id: str, at_ms: int, error: str, next_try: int) -> int:
        state = self._keys(channel_id)[0]
        with self.client.pipeline() as pipe:
            pipe.hincrby(state, "attempts", 1).hsetnx(state, "failing_since", at_ms)
            pipe.hset(state, mapping={"last_error": error, "next_try": next_try})
            return int(pipe.execute()[0])


# KEYS: the lease. ARGV: holder, time to live (ms). Taken if free or already ours.
_CLAIM = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
# KEYS: the channel hash. ARGV: channel id, the record as read, its replacement (unless changed meanwhile).
_REPLACE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1
"""


def _channel(record: dict, state: dict[str, str]) -> Channel:
    def number(name: str) -> int | None:
        return int(state[name]) if state.get(name) not in (None, "") else None

    return Channel(record["id"], record["owner"], record["url"], tuple(record["events"]), number("since") or 0,
                   number("attempts") or 0, number("next_try") or 0, state.get("last_error", ""),
                   number("failing_since"), number("last_sent"))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
