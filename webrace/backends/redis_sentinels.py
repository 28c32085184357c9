"""The sentinel store in Redis (distributed mode): every worker evaluates the sentinels of the
pages it fetches against one store, and one change gives one notification however many
workers saw it.

Keys (``P`` is the prefix, default ``webrace:``):

- ``P sentinel``               hash: id -> sentinel JSON
- ``P sentinel:due``           sorted set: id -> next due (epoch ms)
- ``P sentinel:seen``          hash: id -> SHA-256 of the digest it compares against
- ``P sentinel:owner:<owner>`` set: the owner's sentinel ids
- ``P sentinel:asked``        set: ids added or made due and not checked since (``Sentinel.asked``)
- ``P sentinel:url:<url>``     set: ids of sentinels on the URL (may hold ids removed or moved
                               to another URL since: read through ``P sentinel``); ``P sentinel:urls``
                               says the sets were built (stores written before them are indexed once)
- ``P sentinel:digest:<sha>``  string: a Page Digest (binary form); ``P sentinel:digests`` the set of them
- ``P sentinel:refs``          hash: sha -> how many sentinels compare against it and notifications
                               show a diff from it (gc keeps those)
- ``P sentinel:note``          hash: notification id -> JSON; ``P sentinel:notes:<owner>`` sorted set id -> at

Every write that moves a baseline is one Lua script (atomic: no worker sees half of it, a
concurrent gc cannot delete a digest between its put and its use); batches go in chunks of
``CHUNK``, so no call blocks Redis for long. Keys named inside a script (an owner's) are
under the prefix too: a single Redis, not a Cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import islice
from typing import Any

import redis

from webrace.backends.base import SentinelStore
from webrace.backends.redis import DEFAULT_PREFIX, _text
from webrace.records.sentinel import Sentinel

CHUNK = 500  # ids (or notifications) per script call or pipeline


def _chunks(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


class RedisSentinelStore(SentinelStore):
    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX) -> None:
        self.sentinel_cls = Sentinel
        self.client = client
        self.prefix = key_prefix
        base = f"{key_prefix}sentinel"
        self.key, self.due_key, self.seen_key, self.refs_key = base, f"{base}:due", f"{base}:seen", f"{base}:refs"
        self.owner_prefix, self.digest_prefix, self.digests_key = f"{base}:owner:", f"{base}:digest:", f"{base}:digests"
        self.note_key, self.notes_prefix = f"{base}:note", f"{base}:notes:"
        self.url_prefix, self.urls_key = f"{base}:url:", f"{base}:urls"
        self.asked_key = f"{base}:asked"
        self._urls_indexed = False
        scripts = {"_remove": _REMOVE, "_make_due": _MAKE_DUE, "_checked": _CHECKED, "_advance": _ADVANCE,
                   "_gc": _GC, "_notify": _NOTIFY}
        for name, source in scripts.items():
            setattr(self, name, client.register_script(_COMMON + source))

    @property
    def _keys(self) -> list[str]:
        """The keys every script gets, in this order (see ``_COMMON``)."""
        return [self.key, self.due_key, self.seen_key, self.refs_key, self.digests_key, self.note_key]

    def _run(self, script: Any, *args: Any) -> Any:
        return script(keys=self._keys, args=[self.prefix, *args])

    def add(self, sentinels: Iterable[Any]) -> list[str]:
        ids = []
        for batch in _chunks(sentinels):
            pipe = self.client.pipeline(transaction=True)  # MULTI/EXEC: all of the batch or none
            for s in batch:
                pipe.hset(self.key, s.id, s.to_json())
                pipe.zadd(self.due_key, {s.id: 0}, nx=True)  # new ones are due now; a replaced one keeps its time
                pipe.sadd(self.owner_prefix + s.owner, s.id)
                pipe.sadd(self.url_prefix + s.url, s.id)
                pipe.sadd(self.asked_key, s.id)
            pipe.execute()
            ids += [s.id for s in batch]
        return ids

    def remove(self, ids: Iterable[str]) -> list[str]:
        return [_text(i) for batch in _chunks(ids) for i in self._run(self._remove, *batch)]

    def all(self, owner: str | None = None) -> list[tuple[Any, int, str | None]]:
        ids = self.client.smembers(self.owner_prefix + owner) if owner else self.client.hkeys(self.key)
        rows = []
        for batch in _chunks(sorted(_text(i) for i in ids)):
            pipe = self.client.pipeline(transaction=True)
            pipe.hmget(self.key, batch)
            pipe.zmscore(self.due_key, batch)
            pipe.hmget(self.seen_key, batch)
            for raw, due, seen in zip(*pipe.execute(), strict=True):
                if raw is not None:  # removed between the two reads
                    rows.append((self.sentinel_cls.from_json(_text(raw)), int(due or 0), _opt(seen)))
        return sorted(rows, key=lambda r: (r[0].url, r[0].id))

    def due(self, now_ms: int) -> list[tuple[Any, str | None]]:
        ids = [_text(i) for i in self.client.zrangebyscore(self.due_key, "-inf", now_ms)]
        rows = []
        for batch in _chunks(ids):
            pipe = self.client.pipeline(transaction=True)
            pipe.hmget(self.key, batch)
            pipe.hmget(self.seen_key, batch)
            pipe.smismember(self.asked_key, batch)
            rows += [(replace(self.sentinel_cls.from_json(_text(raw)), asked=bool(asked)), _opt(seen))
                     for raw, seen, asked in zip(*pipe.execute(), strict=True) if raw is not None]
        return sorted(rows, key=lambda r: (r[0].url, r[0].id))

    def watching(self, url: str) -> list[tuple[Any, str | None]]:
        if not self._urls_indexed:
            self._index_urls()
        ids = sorted(_text(i) for i in self.client.smembers(self.url_prefix + url))
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=True)
        pipe.hmget(self.key, ids)
        pipe.hmget(self.seen_key, ids)
        rows, gone = [], []
        for sentinel_id, raw, seen in zip(ids, *pipe.execute(), strict=True):
            sentinel = self.sentinel_cls.from_json(_text(raw)) if raw is not None else None
            if sentinel is None or sentinel.url != url:
                gone.append(sentinel_id)  # removed, or replaced by one on another URL
            else:
                rows.append((sentinel, _opt(seen)))
        if gone:
            self.client.srem(self.url_prefix + url, *gone)
        return rows

    def _index_urls(self) -> None:
        """The URL sets of a store written before they existed, built once."""
        if not self.client.exists(self.urls_key):
            for batch in _chunks(self.client.hkeys(self.key)):
                pipe = self.client.pipeline(transaction=False)
                for sentinel_id, raw in zip(batch, self.client.hmget(self.key, batch), strict=True):
                    if raw is not None:
                        pipe.sadd(self.url_prefix + self.sentinel_cls.from_json(_text(raw)).url, sentinel_id)
                pipe.execute()
            self.client.set(self.urls_key, 1)
        self._urls_indexed = True

    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        chosen = sorted(_text(i) for i in self.client.hkeys(self.key)) if ids is None else ids
        return [_text(i) for batch in _chunks(chosen) for i in self._run(self._make_due, at_ms, *batch)]

    def reclock(self, now_ms: int) -> int:
        """One pass over the due set above ``now_ms`` (the sentinels not due), in chunks."""
        late = self.client.zrangebyscore(self.due_key, f"({now_ms}", "+inf", withscores=True)
        moved = 0
        for batch in _chunks(late):
            raws = self.client.hmget(self.key, [i for i, _ in batch])
            ids = [_text(i) for (i, due), raw in zip(batch, raws, strict=True)
                   if raw is not None and due - now_ms > self.sentinel_cls.from_json(_text(raw)).every]
            if ids:  # made due as `sentinel due` does (fetched, not served from a fetch "in the future")
                moved += len(self._run(self._make_due, now_ms, *ids))
        return moved

    def checked(self, ids: Iterable[str], at_ms: int, seen: str | None = None) -> None:
        for batch in _chunks(ids):
            self._run(self._checked, at_ms, seen or "", *batch)

    def advance(self, expected: Mapping[str, str | None], at_ms: int, seen: str, data: bytes,
                notes: Iterable[Any]) -> list[str]:
        pairs = [x for sentinel_id, was in expected.items() for x in (sentinel_id, was or "")]
        records = [x for n in notes for x in (n.id, n.owner, n.sentinel, n.at, *_digests(n), _note_json(n))]
        moved = self._run(self._advance, at_ms, seen, data, len(pairs) // 2, *pairs, *records)
        return [_text(i) for i in moved]

    def put_digest(self, sha: str, data: bytes) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.set(self.digest_prefix + sha, data, nx=True)
        pipe.sadd(self.digests_key, sha)
        pipe.execute()

    def get_digest(self, sha: str) -> bytes | None:
        data = self.client.get(self.digest_prefix + sha)
        return bytes(data) if data is not None else None

    def gc_digests(self) -> int:
        shas = [_text(s) for s in self.client.sscan_iter(self.digests_key, count=CHUNK)]
        return sum(int(self._run(self._gc, *batch)) for batch in _chunks(shas))

    def add_notifications(self, notes: Iterable[Any]) -> int:
        records = ([x for n in batch for x in (n.id, n.owner, n.at, *_digests(n), _note_json(n))]
                   for batch in _chunks(notes))
        return sum(int(self._run(self._notify, *args)) for args in records)

    def notifications(self, owner: str, since: int = 0) -> list[dict]:
        ids = self.client.zrangebyscore(self.notes_prefix + owner, since, "+inf")
        notes = [json.loads(raw) for batch in _chunks(ids) for raw in self.client.hmget(self.note_key, batch) if raw]
        return sorted(notes, key=lambda n: (-n["at"], n["id"]))


def _opt(value: bytes | str | None) -> str | None:
    return _text(value) if value else None


def _note_json(note: Any) -> str:
    return json.dumps(note.to_dict(), ensure_ascii=False)


def _digests(note: Any) -> tuple[str, str]:
    """The digests the notification's diff is built from ('' when it has none): kept by gc."""
    return getattr(note, "before_digest", "") or "", getattr(note, "after_digest", "") or ""


# Every script: KEYS = sentinel hash, due zset, seen hash, refs hash, digest set, note hash;
# ARGV[1] = the prefix. ``reseat`` moves a sentinel's baseline to ``sha`` keeping the refs
# count of each digest right (gc deletes a digest only when nothing compares against it).
_COMMON = """
local P = ARGV[1]
local function reseat(id, sha)
  local old = redis.call('HGET', KEYS[3], id)
  if old == sha then return end
  redis.call('HSET', KEYS[3], id, sha)
  redis.call('HINCRBY', KEYS[4], sha, 1)
  if old and redis.call('HINCRBY', KEYS[4], old, -1) <= 0 then redis.call('HDEL', KEYS[4], old) end
end
local function keep(sha)  -- a notification's diff needs this digest
  if sha ~= '' then redis.call('HINCRBY', KEYS[4], sha, 1) end
end
local function every(id)
  local raw = redis.call('HGET', KEYS[1], id)
  if not raw then return nil end
  return cjson.decode(raw)['every']
end
"""

# ARGV[2..] ids. Returns the ids that existed.
_REMOVE = """
local removed = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local raw = redis.call('HGET', KEYS[1], id)
  if raw then
    redis.call('HDEL', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    local fields = cjson.decode(raw)
    redis.call('SREM', P .. 'sentinel:owner:' .. fields['owner'], id)
    redis.call('SREM', P .. 'sentinel:url:' .. fields['url'], id)
    redis.call('SREM', P .. 'sentinel:asked', id)
    local old = redis.call('HGET', KEYS[3], id)
    if old then
      redis.call('HDEL', KEYS[3], id)
      if redis.call('HINCRBY', KEYS[4], old, -1) <= 0 then redis.call('HDEL', KEYS[4], old) end
    end
    table.insert(removed, id)
  end
end
return removed
"""

# ARGV[2] = at, ARGV[3..] ids. Returns the ids that exist.
_MAKE_DUE = """
local found = {}
for i = 3, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
    redis.call('SADD', P .. 'sentinel:asked', ARGV[i])
    table.insert(found, ARGV[i])
  end
end
return found
"""

# ARGV[2] = at, ARGV[3] = seen ('' for none), ARGV[4..] ids.
_CHECKED = """
local at = tonumber(ARGV[2])
for i = 4, #ARGV do
  local n = every(ARGV[i])
  if n then
    redis.call('ZADD', KEYS[2], at + n, ARGV[i])
    redis.call('SREM', P .. 'sentinel:asked', ARGV[i])
    if ARGV[3] ~= '' then reseat(ARGV[i], ARGV[3]) end
  end
end
return 0
"""

# The compare-and-set of an evaluation. ARGV[2] = at, [3] = new sha, [4] = its digest, [5] = k,
# then k pairs (id, the baseline it was evaluated against, '' for none), then the
# notifications as (id, owner, sentinel, at, before digest, after digest, JSON). A sentinel whose baseline is still the
# expected one moves to the new sha and keeps its notifications; the others were recorded
# by another evaluation of the same change, which wins. Returns the ids moved.
_ADVANCE = """
local at, sha, k = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[5])
local moved, won = {}, {}
for i = 0, k - 1 do
  local id, was = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  local n = every(id)
  if n and (redis.call('HGET', KEYS[3], id) or '') == was then
    redis.call('SET', P .. 'sentinel:digest:' .. sha, ARGV[4], 'NX')
    redis.call('SADD', KEYS[5], sha)
    reseat(id, sha)
    redis.call('ZADD', KEYS[2], at + n, id)
    redis.call('SREM', P .. 'sentinel:asked', id)
    table.insert(moved, id)
    won[id] = true
  end
end
for j = 6 + 2 * k, #ARGV, 7 do
  if won[ARGV[j + 2]] and redis.call('HSETNX', KEYS[6], ARGV[j], ARGV[j + 6]) == 1 then
    redis.call('ZADD', P .. 'sentinel:notes:' .. ARGV[j + 1], ARGV[j + 3], ARGV[j])
    keep(ARGV[j + 4])
    keep(ARGV[j + 5])
  end
end
return moved
"""

# ARGV[2..] digest shas. Deletes those no sentinel compares against; returns how many.
_GC = """
local deleted = 0
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[4], ARGV[i]) == 0 then
    redis.call('DEL', P .. 'sentinel:digest:' .. ARGV[i])
    redis.call('SREM', KEYS[5], ARGV[i])
    deleted = deleted + 1
  end
end
return deleted
"""

# ARGV[2..] notifications as (id, owner, at, before digest, after digest, JSON); one already
# kept is ignored. Returns how many were new.
_NOTIFY = """
local added = 0
for j = 2, #ARGV, 6 do
  if redis.call('HSETNX', KEYS[6], ARGV[j], ARGV[j + 5]) == 1 then
    redis.call('ZADD', P .. 'sentinel:notes:' .. ARGV[j + 1], ARGV[j + 2], ARGV[j])
    keep(ARGV[j + 3])
    keep(ARGV[j + 4])
    added = added + 1
  end
end
return added
"""
