"""Due sentinels joining a crawl round, in either mode.

The round engine asks :class:`StoredSentinels` for the sentinels due now: their URLs are
fetched like a URD's start page with depth 0 (one pseudo-URD per URL and owner, so a URL
watched by many sentinels, or also reached by a URD, is fetched once: the frontier
coalesces them). Embedded, :class:`~webrace.rounds.local.LocalRounds` asks when its round
opens; distributed, `scrapy urd schedule` (:class:`~webrace.rounds.redis.RedisRounds`) asks,
and records them with the round for the workers (the sentinel store is then Redis's).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from webrace.backends import open_sentinel_store
from webrace.records.sentinel import Sentinel
from webrace.rounds.engine import SENTINEL_PREFIX
from webrace.urd import Urd


def due_sentinels(settings: Any, now_ms: int) -> tuple[list[Urd], dict[str, list[tuple[Sentinel, str | None]]]]:
    """Pseudo-URDs fetching the URLs of the sentinels due now, and those sentinels by URL."""
    with open_sentinel_store(settings) as store:
        due = store.due(now_ms)
    by_url: dict[str, list[tuple[Sentinel, str | None]]] = defaultdict(list)
    for sentinel, seen in due:
        by_url[sentinel.url].append((sentinel, seen))
    urds = {}
    for url, group in by_url.items():
        for sentinel, _ in group:
            key = hashlib.sha1(f"{sentinel.owner}\n{url}".encode(), usedforsecurity=False).hexdigest()[:12]
            urd = urds.get(key)
            every = sentinel.every if urd is None else min(urd.timing, sentinel.every)
            # added or made due by a person: fetched now, not served from another round's fetch
            asked = now_ms if sentinel.asked or (urd is not None and urd.due_at is not None) else None
            urds[key] = Urd(id=f"{SENTINEL_PREFIX}{key}", owner=sentinel.owner, url=url, timing=every, depth=0,
                            due_at=asked)
    return list(urds.values()), dict(by_url)


class StoredSentinels:
    """The sentinels of the sentinel store as the round engine sees them: those due join a
    round (:func:`due_sentinels`); those a round fetched without a new version are checked
    (embedded: when it closes; distributed: when it opens)."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def due(self, now_ms: int) -> tuple[list[Urd], dict[str, list[tuple[Sentinel, str | None]]]]:
        return due_sentinels(self.settings, now_ms)

    def checked(self, ids: list[str], at_ms: int) -> None:
        with open_sentinel_store(self.settings) as store:
            store.checked(ids, at_ms)

    def reclock(self, now_ms: int) -> int:
        with open_sentinel_store(self.settings) as store:
            return store.reclock(now_ms)


__all__ = ["StoredSentinels", "due_sentinels"]
