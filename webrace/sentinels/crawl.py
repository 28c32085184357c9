"""Sentinels in ``scrapy crawl urd``.

At the start of a round the due sentinels join it: their URLs are fetched like a URD's
start page with depth 0 (one pseudo-URD per URL and owner, so a URL watched by many
sentinels, or also reached by a URD, is fetched once: the frontier coalesces them), through
the object cache (a conditional GET). Every new version of a watched URL then goes through
:class:`SentinelMiddleware`: one encode of the new version, one load of each previous
digest the due sentinels compare against, one grouped evaluation; the notifications are
kept per owner and emitted as items. A 304 or an unchanged body changes nothing: those
sentinels are only marked checked when the round ends.

Stats: ``sentinels/due``, ``sentinels/groups``, ``sentinels/evaluated``,
``sentinels/skipped``, ``sentinels/fired``, ``sentinels/unchanged``, ``sentinels/failed``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from scrapy.crawler import Crawler

from webrace import digest as D
from webrace.backends import open_sentinel_store
from webrace.items import Page
from webrace.middlewares.recrawl import object_cache
from webrace.middlewares.threaded import ThreadedItemMiddleware
from webrace.records.sentinel import Sentinel
from webrace.sentinels.baseline import of_version
from webrace.sentinels.evaluate import GroupStats, Notification, evaluate
from webrace.signals import RoundBook
from webrace.urd import Urd

logger = logging.getLogger(__name__)


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
            key = hashlib.sha1(f"{sentinel.owner}\n{url}".encode()).hexdigest()[:12]
            urd = urds.get(key)
            every = sentinel.every if urd is None else min(urd.timing, sentinel.every)
            urds[key] = Urd(id=f"sentinel-{key}", owner=sentinel.owner, url=url, timing=every, depth=0)
    return list(urds.values()), dict(by_url)


class StoredSentinels:
    """The sentinels of the sentinel store as the round engine sees them: those due join a
    round (:func:`due_sentinels`); those a round fetched without a new version are checked
    when it closes."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def due(self, now_ms: int) -> tuple[list[Urd], dict[str, list[tuple[Sentinel, str | None]]]]:
        return due_sentinels(self.settings, now_ms)

    def checked(self, ids: list[str], at_ms: int) -> None:
        with open_sentinel_store(self.settings) as store:
            store.checked(ids, at_ms)


class SentinelMiddleware(ThreadedItemMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._store: Any = None
        self.rounds = RoundBook(crawler)  # each round's due sentinels, from the round_opened signal

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = open_sentinel_store(self.crawler.settings)
        return self._store

    def job(self, obj: Any) -> tuple | None:
        return self._job(obj)

    def work(self, job: tuple) -> Any:
        return self._work(*job[1:])

    def finish(self, job: tuple, result: Any) -> Iterator[Any]:
        yield job[0]
        yield from self._finish(job, result)

    def _job(self, obj: Any) -> tuple | None:
        """On the reactor thread: the due sentinels of a new version, and the previous
        digests they compare against."""
        if not isinstance(obj, Page) or not obj.get("new_version") or not obj.get("digest"):
            return None
        group = self.rounds.take_sentinels(obj.get("round"), obj["url"])
        if not group:
            return None
        cache = object_cache(self.crawler)
        meta = cache.lookup(obj["url"])
        if meta is None or meta.digest != obj["digest"]:
            return None
        previous = {seen: self.store.get_digest(seen) for seen in {seen for _, seen in group if seen}}
        return obj, group, previous, meta, cache

    def _work(self, group: list, previous: dict, meta: Any, cache: Any) -> Any:
        """In a worker thread: encode the new version once, evaluate each subgroup once."""
        try:
            new = of_version(cache.objects.get(meta.digest), meta.header_value("Content-Type"))
            stats, notes = GroupStats(), []
            by_seen: dict[str | None, list[Sentinel]] = defaultdict(list)
            for sentinel, seen in group:
                by_seen[seen].append(sentinel)
            for seen, sentinels in by_seen.items():
                blob = previous.get(seen) if seen else None
                old = D.loads(blob) if blob else None
                notes += evaluate(sentinels, old, new.digest, at=meta.fetched, version=meta.version, stats=stats)
            return new.sha, new.data, notes, stats, len(by_seen)
        except Exception as exc:  # a page the digest cannot take must not cost the crawl its item
            logger.warning("Sentinels on %s not evaluated: %s", meta.url, exc)
            return None

    def _finish(self, job: tuple, outcome: Any) -> Iterator[Notification]:
        page, group, _, meta, _ = job
        stats = self.crawler.stats
        ids = [s.id for s, _ in group]
        if outcome is None:
            stats.inc_value("sentinels/failed", len(ids))
            self.store.checked(ids, meta.fetched)
            return
        sha, data, notes, group_stats, groups = outcome
        self.store.put_digest(sha, data)
        self.store.add_notifications(notes)
        self.store.checked(ids, meta.fetched, seen=sha)
        stats.inc_value("sentinels/groups", groups)
        stats.inc_value("sentinels/evaluated", group_stats.evaluated)
        stats.inc_value("sentinels/skipped", group_stats.skipped)
        stats.inc_value("sentinels/fired", group_stats.fired)
        if group_stats.unchanged:
            stats.inc_value("sentinels/unchanged")
        yield from notes

    def closed(self) -> None:
        if self._store is not None:
            self._store.gc_digests()
            self._store.close()
            self._store = None
