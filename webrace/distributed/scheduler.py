"""The scheduler of distributed mode: pages are leased from the open rounds' shared frontiers.

The URD spider sets it (``SCHEDULER``, spider priority) in distributed mode only; embedded,
and for every other spider, Scrapy's own scheduler runs.

:meth:`next_request` leases the next page of the oldest open round
(breadth first) and the spider builds its request; the lease ends when the spider finishes
the page, or expires after ``WEBRACE_LEASE_TIMEOUT`` seconds if this worker dies, and the
page goes back to the queue. Requests made on this worker (redirects, retries) wait in a
local queue: they belong to a leased page, so a crash loses nothing that the lease does not
bring back. A worker leases no more pages than ``WEBRACE_MAX_LEASED`` at once, so that
the round's pages spread over the workers. An idle worker polls Redis with a backoff (50 ms doubling to 2 s) instead of
Scrapy's 5-second idle tick, and stops after ``WEBRACE_IDLE_CLOSE`` seconds without work
(unset: it runs until stopped). A Redis that goes away mid-crawl is logged and retried with
the same backoff.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import redis
from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.extensions.feedexport import FeedExporter
from twisted.internet import task

logger = logging.getLogger(__name__)

MIN_POLL, MAX_POLL = 0.05, 2.0


class LeaseScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.rounds: Any = None  # the spider's round engine (RedisRounds), from open()
        self.registry: Any = None
        self.lease_ms = int(settings.getfloat("WEBRACE_LEASE_TIMEOUT") * 1000)
        self.max_leased = settings.getint("WEBRACE_MAX_LEASED")
        self.idle_close = settings.getfloat("WEBRACE_IDLE_CLOSE") if settings.get("WEBRACE_IDLE_CLOSE") else None
        self.local: deque[Request] = deque()
        self.spider: Spider | None = None
        self.last_work = time.monotonic()
        self.poll_delay = MIN_POLL
        self._poll_call: Any = None
        self._queued_cache = (0.0, False)
        self._rounds_cache: tuple[float, list[str]] = (0.0, [])
        self._redis_down = False
        # round id -> URLs leased by this worker whose items are not written yet: their leases
        # are renewed while this worker lives and end when the item is in the feed
        self.holding: dict[str, set[str]] = {}
        self._renewal: Any = None
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self.item_done, signal=signal)
        crawler.signals.connect(self.callback_failed, signal=signals.spider_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:
        return cls(crawler)

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.rounds = spider.engine  # the URD spider's RedisRounds: one registry for both
        self.registry = self.rounds.registry
        self._renewal = task.LoopingCall(self._renew)
        self._renewal.start(max(self.lease_ms / 3000, 0.05), now=False).addErrback(
            lambda failure: logger.error("Lease renewal stopped: %s", failure.getErrorMessage()))

    def close(self, reason: str) -> None:
        if self._poll_call is not None and self._poll_call.active():
            self._poll_call.cancel()
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()

    def item_done(self, item: Any, **kwargs: Any) -> None:
        """An item left the pipeline (written to the feeds, dropped or failed): flush the
        feeds, then end the lease of its page. A worker killed before this point loses no
        page: the lease expires and another worker fetches the page again."""
        lease = getattr(item, "_webrace_lease", None)
        if lease is None:
            return
        round_id, url = lease
        exporter = self.crawler.get_extension(FeedExporter)
        for slot in exporter.slots if exporter is not None else ():
            if slot.file is not None and not slot.file.closed:
                slot.file.flush()
        try:
            self.rounds.written(round_id, [url])
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            logger.warning("Redis unreachable (%s): the lease of %s ends when it expires", exc, url)
        self.holding.get(round_id, set()).discard(url)

    def callback_failed(self, failure: Any, response: Any, spider: Spider) -> None:
        """A page's callback raised (e.g. Redis went away meanwhile): its item will not come,
        so its lease is no longer renewed; it expires and the page is fetched again."""
        context = response.request.meta.get("webrace") if response is not None else None
        if context and context.get("round") in self.holding:
            self.holding[context["round"]].discard(context["link"])

    def _renew(self) -> None:
        """Extend the leases this worker holds (pages in flight, items not written yet)."""
        try:
            for round_id, urls in list(self.holding.items()):
                alive = self.registry.frontier(round_id).renew(sorted(urls), self.lease_ms)
                urls &= alive  # the others ended (failed or duplicate pages: no item)
                if not urls:
                    del self.holding[round_id]
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            logger.warning("Redis unreachable (%s): leases not renewed", exc)

    def has_pending_requests(self) -> bool:
        return bool(self.local) or self._shared_queued()

    def enqueue_request(self, request: Request) -> bool:
        self.local.append(request)
        self.stats.inc_value("scheduler/enqueued/local")
        return True

    def next_request(self) -> Request | None:
        if self.local:
            return self.local.popleft()
        return self._lease()

    def _lease(self) -> Request | None:
        # Take no more than this worker fetches at once, or it hoards the round's queue
        # (Scrapy asks for requests until CONCURRENT_REQUESTS are in its downloader).
        if len(self.crawler.engine.downloader.active) >= self.max_leased:
            return None
        try:
            for round_id in self._open_rounds():
                frontier = self.registry.frontier(round_id)
                reaped, skipped = frontier.reaped, frontier.skipped
                delegation = self.rounds.delegation
                if delegation is None:
                    node = frontier.lease(self.lease_ms)
                else:  # IPMicra: this worker's own queue, then the shared one, then stopped workers'
                    delegation.heartbeat()
                    node = frontier.lease(self.lease_ms, delegation.me, delegation.stopped_workers())
                self.stats.inc_value("webrace/leases/expired", frontier.reaped - reaped)
                self.stats.inc_value("webrace/leases/corrupt_skipped", frontier.skipped - skipped)
                if node is None:
                    continue
                request = self.spider.request_for_lease(round_id, node)
                if request is not None:
                    self.holding.setdefault(round_id, set()).add(node.url)
                    self.stats.inc_value("webrace/leases/taken")
                    self.last_work = time.monotonic()
                    return request
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            if not self._redis_down:
                logger.warning("Redis unreachable (%s): retrying with backoff; leased pages are kept", exc)
            self._redis_down = True
            return None
        if self._redis_down:
            logger.info("Redis reachable again")
            self._redis_down = False
        return None

    def _open_rounds(self) -> list[str]:
        """The open rounds (re-read at most twice a second: rounds open and close rarely)."""
        at, rounds = self._rounds_cache
        now = time.monotonic()
        if now - at > 0.5:
            self._check_lost()
            rounds = self.registry.open_rounds()
            self._rounds_cache = (now, rounds)
        return rounds

    def _check_lost(self) -> None:
        """Redis came back empty (restarted without its data, or flushed): say so, once."""
        lost = self.rounds.lost_rounds()
        if lost is None:
            return
        self.stats.inc_value("webrace/redis_lost")
        for round_id in lost:
            self.holding.pop(round_id, None)
        logger.error("Redis came back empty: the state of %s is gone; `scrapy urd schedule` opens a "
                     "round again for the URDs it had not checked",
                     f"round(s) {', '.join(lost)}" if lost else "the open rounds")

    def _shared_queued(self) -> bool:
        """Whether an open round has queued pages (cached briefly: the engine asks often)."""
        at, queued = self._queued_cache
        now = time.monotonic()
        if now - at > 0.2:
            try:
                delegation = self.rounds.delegation
                me = delegation.me if delegation is not None else None
                queued = any(self.registry.frontier(r).queued(me) for r in self._open_rounds())
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                queued = False
            self._queued_cache = (now, queued)
        return queued

    def spider_idle(self, spider: Spider) -> None:
        idle_for = time.monotonic() - self.last_work
        if self.idle_close is not None and idle_for >= self.idle_close:
            logger.info("No work for %.0f s (WEBRACE_IDLE_CLOSE): stopping", idle_for)
            return
        if self._poll_call is None or not self._poll_call.active():
            from twisted.internet import reactor  # the reactor Scrapy installed

            self._poll_call = reactor.callLater(self.poll_delay, self._poll)
        raise DontCloseSpider

    def _poll(self) -> None:
        """While idle: lease a page and hand it to the engine, or look again a bit later
        (until WEBRACE_IDLE_CLOSE says stop, at Scrapy's next idle tick)."""
        request = self._lease()
        if request is not None:
            self.poll_delay = MIN_POLL
            self.crawler.engine.crawl(request)
            return
        self.poll_delay = min(self.poll_delay * 2, MAX_POLL)
        idle_for = time.monotonic() - self.last_work
        if self.idle_close is None or idle_for < self.idle_close:
            from twisted.internet import reactor

            self._poll_call = reactor.callLater(self.poll_delay, self._poll)
