"""Sentinels in ``scrapy crawl urd``.

At the start of a round the due sentinels join it (:mod:`webrace.sentinels.due`): their
URLs are fetched like a URD's start page with depth 0, through the object cache (a
conditional GET). In the distributed mode the worker that fetches a page evaluates its
sentinels. Every new version of a watched URL then goes through
:class:`SentinelMiddleware`, for every sentinel on the URL, due in this round or not (a change
fetched by another owner's round is a change all the same: the sentinel's own round would
get a 304 for it): one encode of the new version, one load of each previous digest they
compare against, one grouped evaluation; the notifications are
kept per owner and emitted as items. A 304 or an unchanged body changes nothing: those
sentinels are only marked checked when the round ends.

A sentinel with no baseline (`sentinel add` found no stored body to take it from: the page
was not stored yet, or its body was dropped as relevant to no owner) takes it from its
page's next fetch, which the spider makes unconditional: a new version, or the unchanged
page's body (kept from the response, for a dropped body is not in the object cache). A
``--where`` that matches nothing on it is said then, in a warning.

Stats: ``sentinels/due``, ``sentinels/groups``, ``sentinels/evaluated``,
``sentinels/skipped``, ``sentinels/fired``, ``sentinels/unchanged``, ``sentinels/failed``,
``sentinels/not_due`` (sentinels evaluated on a new version fetched before they were due),
``sentinels/baselines`` (sentinels that took their first baseline from a fetch),
``sentinels/superseded`` (evaluations of a change another fetch recorded first: the
baseline moves by compare-and-set, so one change gives one notification).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from scrapy.crawler import Crawler

from webrace import digest as D
from webrace.backends import open_sentinel_store
from webrace.items import Page
from webrace.middlewares.recrawl import object_cache
from webrace.middlewares.threaded import ThreadedItemMiddleware
from webrace.records.sentinel import Sentinel
from webrace.sentinels.baseline import Baseline, of_version
from webrace.sentinels.due import StoredSentinels, due_sentinels
from webrace.sentinels.evaluate import GroupStats, Notification, evaluate
from webrace.signals import RoundBook

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Job:
    page: Page
    due: list[tuple[Sentinel, str | None]]  # the sentinels due on the page in its round, with the digest each saw last
    cache: Any
    body: bytes | None  # the fetched body, kept for sentinels with no baseline (None: read it from the cache)

    @property
    def changed(self) -> bool:
        return bool(self.page.get("new_version"))


@dataclass(frozen=True)
class _Outcome:
    group: list[tuple[Sentinel, str | None]]  # the sentinels evaluated, with the digest each saw last
    meta: Any  # the page's MetaInfo
    new: Baseline | None = None  # None: the page could not be encoded (counted as failed)
    notes: list[Notification] = field(default_factory=list)
    stats: GroupStats = field(default_factory=GroupStats)
    groups: int = 0  # evaluations, one per previous digest
    warnings: list[str] = field(default_factory=list)
    not_due: int = 0  # sentinels on the page evaluated before they were due


class SentinelMiddleware(ThreadedItemMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._store: Any = None
        self._store_lock = threading.Lock()
        self.rounds = RoundBook(crawler)  # each round's due sentinels, from the round_opened signal
        # (round, URL) -> the body of a page fetched for sentinels with no baseline, until its
        # item comes: an unchanged page is no new version, and a body dropped as relevant to
        # no owner is not in the object cache to be read back
        self._bodies: dict[tuple[str, str], bytes] = {}

    @property
    def store(self) -> Any:
        """Opened by whichever thread needs it first (worker threads look sentinels up)."""
        with self._store_lock:
            if self._store is None:
                self._store = open_sentinel_store(self.crawler.settings)
            return self._store

    def process_spider_input(self, response: Any) -> None:
        context = response.meta.get("webrace")
        if not context or not 200 <= response.status < 300:
            return
        round_id = context["round"]
        if any(not seen for _, seen in self.rounds.sentinels(round_id, response.url)):
            self._bodies = {key: body for key, body in self._bodies.items() if key[0] in self.rounds.rounds}
            self._bodies[(round_id, response.url)] = response.body

    def job(self, obj: Any) -> _Job | None:
        """On the reactor thread (no I/O): a new version, for every sentinel on its page; or
        a page fetched in full for sentinels with no baseline, which they take from it even
        if it did not change."""
        if not isinstance(obj, Page) or not obj.get("digest"):
            return None
        body = self._bodies.pop((obj.get("round"), obj["url"]), None)
        if not obj.get("new_version") and body is None:
            return None
        due = self.rounds.take_sentinels(obj.get("round"), obj["url"]) or []
        if not obj.get("new_version") and not due:
            return None
        return _Job(obj, due, object_cache(self.crawler), body)

    def work(self, job: _Job) -> _Outcome | None:
        """In a worker thread: the sentinels to evaluate (a new version: every sentinel on the
        page as the store has it now, due or not) and the digests they compare against; then
        encode the page once, evaluate each subgroup once (a new version), check the locations
        of the sentinels taking their baseline from it. None: nothing to evaluate."""
        url = job.page["url"]
        group, not_due = job.due, 0
        if job.changed:
            due = {s.id for s, _ in group}
            group = self.store.watching(url)
            not_due = len({s.id for s, _ in group} - due)
        if not group:
            return None
        meta = job.cache.lookup(url)
        if meta is None or meta.digest != job.page["digest"]:
            return None  # a newer fetch replaced it: that one is evaluated instead
        try:
            previous = {sha: self.store.get_digest(sha) for sha in {seen for _, seen in group if seen}} \
                if job.changed else {}
            body = job.body if job.body is not None else job.cache.objects.get(meta.digest)
            new = of_version(body, meta.header_value("Content-Type"))
            stats, notes = GroupStats(), []
            by_seen: dict[str | None, list[Sentinel]] = defaultdict(list)
            for sentinel, seen in group:
                by_seen[seen or None].append(sentinel)
            for seen, sentinels in by_seen.items() if job.changed else ():
                blob = previous.get(seen) if seen else None
                old = D.loads(blob) if blob else None
                notes += [replace(n, before_digest=seen, after_digest=new.sha)  # the diff is built from them
                          for n in evaluate(sentinels, old, new.digest, at=meta.fetched, version=meta.version,
                                            stats=stats)]
            warnings = _locations_matching_nothing(by_seen.get(None, []), new, meta.url)
            return _Outcome(group, meta, new, notes, stats, len(by_seen) if job.changed else 0, warnings, not_due)
        except Exception as exc:  # a page the digest cannot take must not cost the crawl its item
            logger.warning("Sentinels on %s not evaluated: %s", meta.url, exc)
            return _Outcome(group, meta, not_due=not_due)

    def finish(self, job: _Job, outcome: _Outcome | None) -> Iterator[Any]:
        yield job.page
        if outcome is not None:
            yield from self._finish(job, outcome)

    def _finish(self, job: _Job, outcome: _Outcome) -> Iterator[Notification]:
        stats, at, group = self.crawler.stats, outcome.meta.fetched, outcome.group
        ids = [s.id for s, _ in group]
        if outcome.not_due:
            stats.inc_value("sentinels/not_due", outcome.not_due)
        if outcome.new is None:
            stats.inc_value("sentinels/failed", len(ids))
            self.store.checked(ids, at)
            return
        fresh = [s.id for s, seen in group if not seen]
        # an unchanged page is the baseline of those with none; the others keep theirs
        expected = {s.id: seen for s, seen in group if job.changed or not seen}
        moved = set(self.store.advance(expected, at, outcome.new.sha, outcome.new.data, outcome.notes))
        if len(expected) < len(ids):
            self.store.checked([i for i in ids if i not in expected], at)
        notes = [n for n in outcome.notes if n.sentinel in moved]
        if len(moved) < len(expected):  # another fetch of this change (a lease that expired) recorded it first
            stats.inc_value("sentinels/superseded", len(expected) - len(moved))
        for warning in outcome.warnings:
            logger.warning(warning)
        if fresh:
            stats.inc_value("sentinels/baselines", len(fresh))
        if job.changed:
            stats.inc_value("sentinels/groups", outcome.groups)
            stats.inc_value("sentinels/evaluated", outcome.stats.evaluated)
            stats.inc_value("sentinels/skipped", outcome.stats.skipped)
            if outcome.stats.refused:
                stats.inc_value("sentinels/pattern_refused", outcome.stats.refused)
            if outcome.stats.failed:
                stats.inc_value("sentinels/failed", outcome.stats.failed)
            stats.inc_value("sentinels/fired", len(notes))
            if outcome.stats.unchanged:
                stats.inc_value("sentinels/unchanged")
        yield from notes

    def closed(self) -> None:
        self._bodies.clear()
        if self._store is not None:
            self._store.gc_digests()
            self._store.close()
            self._store = None


def _locations_matching_nothing(sentinels: list[Sentinel], baseline: Baseline, url: str) -> list[str]:
    """What to say of the locations of sentinels taking their first baseline (`sentinel
    add` could not check them: the page had no stored body) that match nothing on it."""
    ids_by_where: dict[str, list[str]] = defaultdict(list)
    for sentinel in sentinels:
        if sentinel.where:
            ids_by_where[sentinel.where].append(sentinel.id)
    warnings = []
    for where, ids in ids_by_where.items():
        region = D.mask(baseline.digest, where)
        if region is not None and not any(region):
            warnings.append(f"{where} matches nothing on {url} (sentinel{'s' if len(ids) > 1 else ''} "
                            f"{', '.join(ids)}): it will fire when that region appears")
    return warnings


__all__ = ["SentinelMiddleware", "StoredSentinels", "due_sentinels"]  # the last two: webrace.sentinels.due
