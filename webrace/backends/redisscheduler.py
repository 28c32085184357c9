"""The scheduler of distributed mode: pages are leased from the open rounds' shared frontiers.

``SCHEDULER = "webrace.backends.redisscheduler.LeaseScheduler"`` is always set; without
``REDIS_URL`` it hands over to Scrapy's own scheduler (embedded mode: one code path).

With ``REDIS_URL``, :meth:`next_request` leases the next page of the oldest open round
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
from scrapy.core.scheduler import BaseScheduler, Scheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider

from webrace.backends.redis import connect, prefix
from webrace.backends.redisrounds import RoundRegistry

logger = logging.getLogger(__name__)

MIN_POLL, MAX_POLL = 0.05, 2.0


class LeaseScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler, registry: RoundRegistry) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.registry = registry
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
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:
        if not crawler.settings.get("REDIS_URL"):
            return Scheduler.from_crawler(crawler)
        return cls(crawler, RoundRegistry(connect(crawler.settings), prefix(crawler.settings)))

    def open(self, spider: Spider) -> None:
        self.spider = spider

    def close(self, reason: str) -> None:
        if self._poll_call is not None and self._poll_call.active():
            self._poll_call.cancel()

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
                delegation = getattr(self.spider, "delegation", None)
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
            rounds = self.registry.open_rounds()
            self._rounds_cache = (now, rounds)
        return rounds

    def _shared_queued(self) -> bool:
        """Whether an open round has queued pages (cached briefly: the engine asks often)."""
        at, queued = self._queued_cache
        now = time.monotonic()
        if now - at > 0.2:
            try:
                delegation = getattr(self.spider, "delegation", None)
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
