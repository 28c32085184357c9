"""Rounds in distributed mode: which are open, and the URDs each one crawls.

``scrapy urd schedule`` opens a round for the due URDs (their start pages are offered to the
round's shared frontier, which queues them) and closes it once nothing of it is queued or
leased; workers learn a round's URDs from Redis, so they need no URD-DB of their own.

Keys: ``<prefix>rounds`` (zset round id -> opening time, ms),
``<prefix>round:<id>:urds`` (hash URD id -> the URD's fields as JSON, ``Urd.to_record``:
no worker parses XML; a round opened by an older scheduler holds XML, read as such) and ``<prefix>round:<id>:sentinels``
(hash URL -> JSON list of ``[sentinel JSON, the digest it last saw]``: the sentinels due on
that page, evaluated by the worker that fetches it), beside the frontier's keys;
``<prefix>epoch`` (a token set once: when it vanishes, Redis lost everything, see :meth:`RoundRegistry.lost`);
``<prefix>urds`` (hash URD id -> ``Urd.to_record`` JSON: every URD of the URD-DB, kept by the
scheduler, :meth:`RoundRegistry.sync_urds`): a worker judges a new version for the URDs that
wanted the page in earlier rounds (``MetaInfo.wanted``), which need not be in the round.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Container, Iterable, Mapping
from itertools import islice
from typing import Any

import redis

from webrace.distributed.frontier import RedisFrontier
from webrace.records.sentinel import Sentinel
from webrace.urd import Urd, now_millis

# Seconds a closed round's keys stay, for a worker finishing a page whose lease expired: one
# lease timeout (WEBRACE_LEASE_TIMEOUT, see closed_round_ttl), at least this long. Not longer:
# a continuous crawl closes a round every few seconds, and an hour of them was most of Redis's
# memory, growing for that hour (issue 44).
MIN_CLOSED_ROUND_TTL = 60
URDS_SYNC_S = 10.0  # the scheduler copies the URD-DB to Redis at most this often (and when a round names a new URD)


class RoundRegistry:
    def __init__(self, client: redis.Redis, key_prefix: str, router=None,
                 closed_ttl: float = MIN_CLOSED_ROUND_TTL) -> None:
        self.client = client
        self.closed_ttl = max(int(closed_ttl), MIN_CLOSED_ROUND_TTL)
        self.prefix = key_prefix
        self.key = f"{key_prefix}rounds"
        self.router = router  # IPMicra: URLs -> the workers they are delegated to (see RedisFrontier)
        self._frontiers: dict[str, RedisFrontier] = {}
        self.epoch_key = f"{key_prefix}epoch"
        self._epoch: bytes | None = None  # the token this process saw last
        self.urds_key = f"{key_prefix}urds"
        self._synced: dict[str, str] = {}  # URD id -> the record JSON this process wrote to urds_key
        self._synced_at = float("-inf")

    def sync_urds(self, urds: Callable[[], Iterable[Urd]], force: bool = False) -> None:
        """(The scheduler) copy every URD of the URD-DB to ``urds_key``, writing only what
        changed since this process's last copy; at most every ``URDS_SYNC_S`` unless ``force``."""
        if not force and time.monotonic() - self._synced_at < URDS_SYNC_S:
            return
        records = {u.id: json.dumps(u.to_record(), sort_keys=True) for u in urds()}
        if not self.client.exists(self.urds_key):
            self._synced = {}  # Redis lost it (or it was never written): all of it again
        changed = {i: r for i, r in records.items() if self._synced.get(i) != r}
        gone = [i for i in self._synced if i not in records]
        pipe = self.client.pipeline(transaction=True)
        for batch in _batches(list(changed.items()), 1000):
            pipe.hset(self.urds_key, mapping=dict(batch))
        for batch in _batches(gone, 1000):
            pipe.hdel(self.urds_key, *batch)
        if changed or gone:
            pipe.execute()
        self._synced, self._synced_at = records, time.monotonic()

    @property
    def synced(self) -> Mapping[str, str]:
        return self._synced

    def all_urds(self) -> list[Urd]:
        """(A worker) every URD, as the scheduler last copied them."""
        return [_urd(raw) for raw in self.client.hvals(self.urds_key)]

    def lost(self) -> bool:
        """Whether Redis lost this prefix's data since the last call (it restarted empty, or
        was flushed): the epoch token the first process set is gone or was set anew."""
        self.client.set(self.epoch_key, secrets.token_hex(8), nx=True)
        token = self.client.get(self.epoch_key)
        seen, self._epoch = self._epoch, token
        if seen is not None and token != seen:
            self._frontiers.clear()
            return True
        return False

    def open(self, urds: Iterable[Urd], opened: int | None = None,
             sentinels: Mapping[str, list[tuple[Any, str | None]]] | None = None) -> str | None:
        """Open a round crawling ``urds`` (and evaluating ``sentinels``: URL -> [(sentinel,
        digest it last saw)]); return its id (None when there is nothing to crawl). Its start
        pages are offered by the round engine (:class:`~webrace.rounds.redis.RedisRounds`)."""
        urds = list(urds)
        if not urds:
            return None
        opened = opened if opened is not None else now_millis()
        round_id = f"{opened}-{secrets.token_hex(3)}"
        pipe = self.client.pipeline(transaction=True)  # a worker meets the round whole or not at all
        pipe.hset(self._urds_key(round_id), mapping={u.id: json.dumps(u.to_record()) for u in urds})
        if sentinels:
            pipe.hset(self._sentinels_key(round_id), mapping={
                url: json.dumps([[s.to_json(), seen] for s, seen in group]) for url, group in sentinels.items()})
        pipe.zadd(self.key, {round_id: opened})
        pipe.execute()
        return round_id

    def open_rounds(self) -> list[str]:
        """Open rounds, oldest first."""
        return [r.decode() if isinstance(r, bytes) else r for r in self.client.zrange(self.key, 0, -1)]

    def opened_at(self, round_id: str) -> int | None:
        score = self.client.zscore(self.key, round_id)
        return int(score) if score is not None else None

    def urds(self, round_id: str) -> dict[str, Urd]:
        raw = self.client.hgetall(self._urds_key(round_id))
        return {(k.decode() if isinstance(k, bytes) else k): _urd(v) for k, v in raw.items()}

    def sentinels(self, round_id: str) -> dict[str, list[tuple[Sentinel, str | None]]]:
        """URL -> the sentinels due on it in this round, with the digest each last saw."""
        raw = self.client.hgetall(self._sentinels_key(round_id))
        return {(url.decode() if isinstance(url, bytes) else url): [(Sentinel.from_json(s), seen)
                                                                     for s, seen in json.loads(group)]
                for url, group in raw.items()}

    def urd_ids(self, round_id: str) -> list[str]:
        return [k.decode() if isinstance(k, bytes) else k for k in self.client.hkeys(self._urds_key(round_id))]

    def frontier(self, round_id: str) -> RedisFrontier:
        if round_id not in self._frontiers:
            self._frontiers[round_id] = RedisFrontier(self.client, self.prefix, round_id, self.router)
        return self._frontiers[round_id]

    @property
    def frontiers(self) -> Mapping[str, RedisFrontier]:
        """The frontier handles this process made, by round id."""
        return self._frontiers

    def forget(self, keep: Container[str]) -> None:
        """(A worker) drop the frontier handles of rounds not in ``keep``: :meth:`close` drops
        them in the scheduler, a worker sees no round close."""
        for round_id in [r for r in self._frontiers if r not in keep]:
            self._frontiers.pop(round_id, None)

    def finished(self, round_id: str) -> bool:
        return self.frontier(round_id).pending() == 0

    def close(self, round_id: str) -> None:
        """Take the round off the open list; its keys expire a while later."""
        self.client.zrem(self.key, round_id)
        for key in [self._urds_key(round_id), self._sentinels_key(round_id), *self.frontier(round_id).all_keys()]:
            self.client.expire(key, self.closed_ttl)
        self._frontiers.pop(round_id, None)

    def _urds_key(self, round_id: str) -> str:
        return f"{self.prefix}round:{round_id}:urds"

    def _sentinels_key(self, round_id: str) -> str:
        return f"{self.prefix}round:{round_id}:sentinels"


def closed_round_ttl(settings: Any) -> float:
    """How long a closed round's keys stay: one lease timeout, so that a worker whose lease
    expired meanwhile still finds them (at least ``MIN_CLOSED_ROUND_TTL``)."""
    return max(settings.getfloat("WEBRACE_LEASE_TIMEOUT"), MIN_CLOSED_ROUND_TTL)


def _urd(value: bytes | str) -> Urd:
    """A round's URD as stored: its fields as JSON, or XML (a round an older scheduler opened)."""
    text = value.decode() if isinstance(value, bytes) else value
    return Urd.from_record(json.loads(text)) if text.startswith("{") else Urd.from_xml(text)


def _batches(items: list, size: int) -> Iterable[list]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch
