"""The scheduler of distributed mode: pages are leased from the open rounds' shared frontiers.

The URD spider sets it (``SCHEDULER``, spider priority) in distributed mode only; embedded,
and for every other spider, Scrapy's own scheduler runs.

:meth:`next_request` hands out the next leased page of the oldest open round (breadth
first) and the spider builds its request; the lease ends when the page's item is in the
feed, or expires after ``WEBRACE_LEASE_TIMEOUT`` seconds if this worker dies, and the page
goes back to the queue. Requests made on this worker (redirects, retries) wait in a local
queue: they belong to a leased page, so a crash loses nothing that the lease does not bring
back. A worker fetches no more leased pages than ``WEBRACE_MAX_LEASED`` at once, so that the
round's pages spread over the workers.

No Redis round trip runs on the reactor thread (issue 23): leases are taken ahead, in the
worker's lease thread (:mod:`webrace.distributed.offload`), into a buffer of at most
``WEBRACE_MAX_LEASED`` pages (one script call leases several), which :meth:`next_request`
takes from without waiting (None while it is empty: the buffer is topped up in the
background and the engine woken when leases arrive); leases buffered are renewed like those
being fetched, and a worker killed with some loses nothing (they expire and go back to the
queue; one that stops gives them back at once). Lease ends (acks) and renewals are sent from
that thread too: the acks of the items written in 50 ms (``ACK_WAIT``) in one call, after
one flush of the feeds. An idle worker polls Redis with a backoff (50 ms
doubling to 2 s) instead of Scrapy's 5-second idle tick, and stops after
``WEBRACE_IDLE_CLOSE`` seconds without work (unset: it runs until stopped).

A Redis that goes away mid-crawl (issue 44) is said once, in one line, and once when it is
back (the spider's :class:`~webrace.outage.Outage`); leases are asked for again
after the outage's wait (1 s doubling to 30 s). Leases of pages written meanwhile end once
Redis answers (their acks wait); pages that met the outage while being handled are given up
(``page_abandoned``) and their leases ended as soon as Redis answers, so they go back to the
queue instead of waiting ``WEBRACE_LEASE_TIMEOUT``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.extensions.feedexport import FeedExporter
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from webrace.distributed.offload import RedisThread
from webrace.middlewares.recrawl import PRELOADED, RecrawlMiddleware
from webrace.outage import REDIS_DOWN, Outage
from webrace.records.rounds import Node
from webrace.signals import page_abandoned

logger = logging.getLogger(__name__)

MIN_POLL, MAX_POLL = 0.05, 2.0
ACK_WAIT = 0.05  # seconds written items wait, to end their leases together after one flush (LeaseScheduler._ack)
_NONE = object()  # no preloaded meta-info (None is: never fetched)


class LeaseScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.rounds: Any = None  # the spider's round engine (RedisRounds), from open()
        self.registry: Any = None
        self.io = RedisThread("webrace-leases")  # leases, acks, renewals: never on the reactor
        self.lease_ms = int(settings.getfloat("WEBRACE_LEASE_TIMEOUT") * 1000)
        self.max_leased = settings.getint("WEBRACE_MAX_LEASED")
        self.idle_close = settings.getfloat("WEBRACE_IDLE_CLOSE") if settings.get("WEBRACE_IDLE_CLOSE") else None
        self.local: deque[Request] = deque()
        self.buffer: deque[tuple[str, Node]] = deque()  # leased ahead, not requested yet (round id, page)
        self.preloaded: dict[str, Any] = {}  # URL -> its meta-info, read with its lease (PRELOADED)
        self.spider: Spider | None = None
        self.last_work = time.monotonic()
        self.poll_delay = MIN_POLL
        self._poll_call: Any = None
        self._rounds_cache: tuple[float, list[str]] = (0.0, [])  # the lease thread's
        self.outage = Outage(logger.warning)  # the spider's, from open(): one per worker
        self.store_outage = Outage(logger.warning)  # the spider's, from open(): the object store unwritable
        self._abandoned: deque[tuple[str, str]] = deque()  # (round id, URL) whose leases end at the next lease call
        # round id -> URLs leased by this worker whose items are not written yet (buffered,
        # being fetched, or their items in the pipeline): their leases are renewed while this
        # worker lives and end when the item is in the feed
        self.holding: dict[str, set[str]] = {}
        self._renewal: Any = None
        self._filling: Deferred | None = None  # the lease call in flight
        self._renewing = False
        self._written: deque[tuple[str, str]] = deque()  # (round id, URL) whose items are written
        self._acks: deque[tuple[str, str]] = deque()  # those of them flushed: their leases can end
        self._acking = False
        self._ack_call: Any = None
        self._closing = False
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self.item_done, signal=signal)
        crawler.signals.connect(self.callback_failed, signal=signals.spider_error)
        crawler.signals.connect(self.page_abandoned, signal=page_abandoned)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:
        return cls(crawler)

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.rounds = spider.engine  # the URD spider's RedisRounds: one registry for both
        self.registry = self.rounds.registry
        self.outage = spider.outage or self.outage
        self.store_outage = getattr(spider, "store_outage", None) or Outage(logger.warning)
        self._renewal = task.LoopingCall(self._renew)
        self._renewal.start(max(self.lease_ms / 3000, 0.05), now=False).addErrback(
            lambda failure: logger.error("Lease renewal stopped: %s", failure.getErrorMessage()))
        self._fill()  # the first leases while the engine starts

    def close(self, reason: str) -> Deferred:
        self._closing = True
        for call in (self._poll_call, self._ack_call):
            if call is not None and call.active():
                call.cancel()
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()
        return deferred_from_coro(self._close())

    async def _close(self) -> None:
        """Send the acks still waiting, and give back the leases buffered (their pages go
        back to the queue now instead of when their leases expire)."""
        if self._filling is not None:  # its leases land in the buffer first
            await maybe_deferred_to_future(self._filling)
        unused: dict[str, list[str]] = {}
        while self.buffer:
            round_id, node = self.buffer.popleft()
            unused.setdefault(round_id, []).append(node.url)
            self.holding.get(round_id, set()).discard(node.url)
        self._release_acks()
        try:
            await self.io.call(self._end, unused)
        except Exception as exc:  # Redis gone: the acks and the leases given back wait for expiry
            logger.warning("Leases not ended at close (%s: %s): they expire", type(exc).__name__, exc)
        finally:
            self.io.stop()

    def _end(self, unused: dict[str, list[str]]) -> None:
        """(Lease thread) The last acks, and the leases this worker will not fetch given back."""
        self._send_acks()
        for round_id, urls in unused.items():
            back = self.registry.frontier(round_id).release(urls)
            self.stats.inc_value("webrace/leases/given_back", back)

    # -- leases ending -------------------------------------------------------------------

    def item_done(self, item: Any, **kwargs: Any) -> None:
        """An item left the pipeline (written to the feeds, dropped or failed): its lease
        ends once the feeds are flushed (:meth:`_release_acks`, once for every item written
        meanwhile), in the lease thread with the others waiting. A worker killed before
        that loses no page: the lease expires and another worker fetches the page again."""
        lease = getattr(item, "_webrace_lease", None)
        if lease is None:
            return
        round_id, url = lease
        self.holding.get(round_id, set()).discard(url)
        self._written.append(lease)
        self.last_work = time.monotonic()
        self._ack()

    def _release_acks(self) -> None:
        """(Reactor) Flush the feeds, then hand the leases of the items written so far to
        the lease thread's next call (:meth:`_send_acks`)."""
        if not self._written:
            return
        exporter = self.crawler.get_extension(FeedExporter)
        for slot in exporter.slots if exporter is not None else ():
            if slot.file is not None and not slot.file.closed:
                slot.file.flush()
        self._acks.extend(self._written)
        self._written.clear()

    def _ack(self) -> None:
        """Acks wait ``ACK_WAIT``, then the feeds are flushed once for all the items written
        meanwhile and their leases end in one call (or with a lease call already waiting)."""
        if self._acking or not (self._acks or self._written) or self._closing:
            return
        if self._ack_call is None or not self._ack_call.active():
            from twisted.internet import reactor  # the reactor Scrapy installed

            self._ack_call = reactor.callLater(ACK_WAIT, self._ack_alone)

    def _ack_alone(self) -> None:
        if self._acking or self._closing:
            return
        self._release_acks()
        if not self._acks:
            return
        self._acking = True
        self.io.run(self._send_acks).addBoth(self._acked)

    def _send_acks(self) -> None:
        """(Lease thread) End the leases of every item written so far: one call per round.
        Redis away: those not ended wait for the next call (raised: the outage is said by the
        caller), so a page written is not fetched again for want of its ack."""
        by_round: dict[str, list[str]] = {}
        while self._acks:
            round_id, url = self._acks.popleft()
            by_round.setdefault(round_id, []).append(url)
        for n, (round_id, urls) in enumerate(list(by_round.items())):
            try:
                self.rounds.written(round_id, urls)
            except REDIS_DOWN:
                self._acks.extendleft(reversed([(r, u) for r, left in list(by_round.items())[n:] for u in left]))
                raise

    def _acked(self, result: Any) -> None:
        self._acking = False
        if isinstance(result, Failure):
            if result.check(*REDIS_DOWN):
                self.outage.seen(result.value)
                return  # the acks wait for the next lease call, which comes with the outage's pace
            logger.error("Ending leases failed: %s", result.getErrorMessage())
        self._ack()  # those that came meanwhile

    def page_abandoned(self, request: Request) -> None:
        """Redis went away while the page of ``request`` was handled (the spider said so): its
        lease ends as soon as Redis answers (the next lease call), so it goes back to the queue."""
        context = request.meta.get("webrace")
        if context and context.get("round") in self.holding:
            self.holding[context["round"]].discard(context["link"])
            self._abandoned.append((context["round"], context["link"]))

    def callback_failed(self, failure: Any, response: Any, spider: Spider) -> None:
        """A page's callback raised (e.g. Redis went away meanwhile): its item will not come,
        so its lease is no longer renewed; it expires and the page is fetched again."""
        context = response.request.meta.get("webrace") if response is not None else None
        if context and context.get("round") in self.holding:
            self.holding[context["round"]].discard(context["link"])

    def _renew(self) -> None:
        """Extend the leases this worker holds (buffered, in flight, items not written yet)."""
        if self._renewing or self._closing or not self.holding:
            return
        asked = {round_id: sorted(urls) for round_id, urls in self.holding.items()}
        self._renewing = True
        self.io.run(self._renew_leases, asked).addBoth(self._renewed, asked)

    def _renew_leases(self, asked: dict[str, list[str]]) -> dict[str, set[str]]:
        """(Lease thread) round id -> the leases of ``asked`` that still exist, renewed."""
        return {round_id: self.registry.frontier(round_id).renew(urls, self.lease_ms)
                for round_id, urls in asked.items()}

    def _renewed(self, alive: Any, asked: dict[str, list[str]]) -> None:
        self._renewing = False
        if isinstance(alive, Failure):
            if alive.check(*REDIS_DOWN):  # tried again at the next renewal
                self.outage.seen(alive.value)
            else:
                logger.error("Lease renewal failed: %s", alive.getErrorMessage())
            return
        for round_id, urls in asked.items():
            held = self.holding.get(round_id)
            if held is None:
                continue
            held -= set(urls) - alive.get(round_id, set())  # the others ended (failed or duplicate pages: no item)
            if not held:
                del self.holding[round_id]

    # -- handing out pages ---------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        # Pages queued in Redis but not leased yet are not pending here: when nothing else
        # is, the engine goes idle and spider_idle polls (a lease arriving wakes it at once).
        return bool(self.local) or bool(self.buffer)

    def enqueue_request(self, request: Request) -> bool:
        self.local.append(request)
        self.stats.inc_value("scheduler/enqueued/local")
        return True

    def next_request(self) -> Request | None:
        if self.local:
            return self.local.popleft()
        # Fetch no more than WEBRACE_MAX_LEASED at once, or this worker hoards the round's
        # queue (Scrapy asks for requests until CONCURRENT_REQUESTS are in its downloader).
        if len(self.crawler.engine.downloader.active) >= self.max_leased:
            return None
        request = self._next_leased()
        if request is None:
            self.stats.inc_value("webrace/leases/buffer_empty")
        self._fill()
        return request

    def _next_leased(self) -> Request | None:
        while self.buffer:
            round_id, node = self.buffer.popleft()
            preloaded = self.preloaded.pop(node.url, _NONE)
            request = self.spider.request_for_lease(round_id, node)
            if request is not None:
                if preloaded is not _NONE:
                    request.meta[PRELOADED] = {"url": node.url, "meta": preloaded}
                self.stats.inc_value("webrace/leases/taken")
                self.last_work = time.monotonic()
                return request
            self.holding.get(round_id, set()).discard(node.url)  # its round is gone: the lease expires
        return None

    def _fill(self) -> None:
        """Top the buffer up in the lease thread (one call at a time; while Redis is away,
        once the outage's wait is over)."""
        if self._filling is not None or self._closing or len(self.buffer) >= self.max_leased:
            return
        if not self.outage.due() or not self.store_outage.due():
            return
        self._filling = self.io.run(self._lease)
        self._filling.addBoth(self._filled)

    def _lease(self) -> tuple[list[tuple[str, Node]], list[str] | None, int, int, dict[str, Any], list[str]]:
        """(Lease thread) Pages leased to fill the buffer, oldest open round first; the
        rounds lost if Redis came back empty; leases expired and queue entries skipped
        meanwhile; the leased pages' meta-info; the open rounds."""
        self._send_acks()  # those flushed and waiting (see _ack)
        self._expire_abandoned()
        want = self.max_leased - len(self.buffer)  # as it is now: the reactor took some meanwhile
        leased: list[tuple[str, Node]] = []
        lost = self._lost_rounds()
        reaped = skipped = 0
        open_rounds = self._open_rounds()
        for round_id in open_rounds:
            frontier = self.registry.frontier(round_id)
            before = frontier.reaped, frontier.skipped
            delegation = self.rounds.delegation
            if delegation is None:
                nodes = frontier.lease_many(self.lease_ms, want - len(leased))
            else:  # IPMicra: this worker's own queue, then the shared one, then stopped workers'
                delegation.heartbeat()
                nodes = frontier.lease_many(self.lease_ms, want - len(leased), delegation.me,
                                            delegation.stopped_workers())
            reaped += frontier.reaped - before[0]
            skipped += frontier.skipped - before[1]
            if nodes:
                self.rounds.load(round_id)  # its URDs read here, not on the reactor
                leased += [(round_id, node) for node in nodes]
            if len(leased) >= want:
                break
        return leased, lost, reaped, skipped, self._preload([node.url for _, node in leased]), open_rounds

    def _expire_abandoned(self) -> None:
        """(Lease thread) End the leases of the pages given up during an outage (see
        :meth:`page_abandoned`); kept for the next call if Redis is still away."""
        by_round: dict[str, list[str]] = {}
        for round_id, url in list(self._abandoned):
            by_round.setdefault(round_id, []).append(url)
        for round_id, urls in by_round.items():
            self.registry.frontier(round_id).expire(urls)
            for url in urls:
                self._abandoned.remove((round_id, url))

    def _preload(self, urls: list[str]) -> dict[str, Any]:
        """(Lease thread) The meta-info of the pages just leased, in one round trip, so that
        their requests need no lookup of their own; {} if it cannot be had (they look it up)."""
        recrawl = self.crawler.get_downloader_middleware(RecrawlMiddleware)
        if recrawl is None or not urls:
            return {}
        try:
            found = recrawl.preload(urls)
        except Exception as exc:  # noqa: BLE001 - the requests look their records up themselves
            logger.debug("Meta-info of leased pages not preloaded: %s", exc)
            return {}
        return dict(zip(urls, found, strict=True)) if found is not None else {}

    def _filled(self, result: Any) -> None:
        self._filling = None
        if isinstance(result, Failure):
            if result.check(*REDIS_DOWN):
                self.outage.failed(result.value)  # said once; the next try after its wait
            else:
                logger.error("Leasing pages failed: %s", result.getTraceback())
            return
        leased, lost, reaped, skipped, preloaded, open_rounds = result
        self.outage.ok()
        self.stats.inc_value("webrace/leases/expired", reaped)
        self.stats.inc_value("webrace/leases/corrupt_skipped", skipped)
        if lost is not None:
            self._forget(lost)
        # the rounds `scrapy urd schedule` closed, unless this worker still leases pages of them
        busy = {round_id for round_id, urls in self.holding.items() if urls} | {r for r, _ in self.buffer}
        self.rounds.forget_closed(open_rounds, busy | {r for r, _ in leased})
        if len(self.preloaded) > 4 * self.max_leased:  # left by pages dropped unrequested (rounds lost)
            self.preloaded.clear()
        self.preloaded.update(preloaded)
        for round_id, node in leased:
            self.holding.setdefault(round_id, set()).add(node.url)
            self.buffer.append((round_id, node))
        if leased:
            logger.debug("Leased %d pages ahead, %d buffered: %s", len(leased), len(self.buffer),
                         " ".join(node.url for _, node in leased))
        if leased and not self._closing:
            self.poll_delay = MIN_POLL
            if self._poll_call is not None and self._poll_call.active():
                self._poll_call.cancel()
            self._wake()

    def _wake(self) -> None:
        """Leases arrived: hand one to the engine if it has room (it then asks for the
        others); when it has none, it asks as soon as a download ends."""
        if len(self.crawler.engine.downloader.active) >= self.max_leased:
            return
        request = self._next_leased()
        if request is not None:
            self.crawler.engine.crawl(request)

    def _open_rounds(self) -> list[str]:
        """(Lease thread) The open rounds (re-read at most twice a second: rounds open and
        close rarely)."""
        at, rounds = self._rounds_cache
        now = time.monotonic()
        if now - at > 0.5:
            rounds = self.registry.open_rounds()
            self._rounds_cache = (now, rounds)
        return rounds

    def _lost_rounds(self) -> list[str] | None:
        """(Lease thread) None, or (Redis came back empty: restarted without its data, or
        flushed) the rounds this process knew; looked at when the open rounds are re-read."""
        if time.monotonic() - self._rounds_cache[0] <= 0.5:
            return None
        return self.rounds.lost_rounds()

    def _forget(self, lost: list[str]) -> None:
        """Redis came back empty: say so, once, and drop what this worker held of those rounds."""
        self.stats.inc_value("webrace/redis_lost")
        for round_id in lost:
            self.holding.pop(round_id, None)
        self.buffer = deque((r, n) for r, n in self.buffer if r not in lost)
        self._abandoned = deque((r, u) for r, u in self._abandoned if r not in lost)
        logger.error("Redis came back empty: the state of %s is gone; `scrapy urd schedule` opens a "
                     "round again for the URDs it had not checked",
                     f"round(s) {', '.join(lost)}" if lost else "the open rounds")

    # -- idle ----------------------------------------------------------------------------

    def spider_idle(self, spider: Spider) -> None:
        idle_for = time.monotonic() - self.last_work
        # (a lease call may be in flight: the engine asked just before; leases it brings are
        # given back at close)
        # (not while Redis is away: whether there is work is not known)
        if self.idle_close is not None and idle_for >= self.idle_close and not self.outage.down \
                and not self.store_outage.down:
            logger.info("No work for %.0f s (WEBRACE_IDLE_CLOSE): stopping", idle_for)
            return
        if self._poll_call is None or not self._poll_call.active():
            from twisted.internet import reactor  # the reactor Scrapy installed

            self._poll_call = reactor.callLater(self.poll_delay, self._poll)
        raise DontCloseSpider

    def _poll(self) -> None:
        """While idle: look for pages to lease (they wake the engine when they arrive), a
        bit later each time (until WEBRACE_IDLE_CLOSE says stop, at Scrapy's next idle tick)."""
        if self._closing:
            return
        if self.buffer:
            self.poll_delay = MIN_POLL
            self._wake()
            return
        self._fill()
        self.poll_delay = min(self.poll_delay * 2, MAX_POLL)
        idle_for = time.monotonic() - self.last_work
        if self.idle_close is None or idle_for < self.idle_close:
            from twisted.internet import reactor

            self._poll_call = reactor.callLater(max(self.poll_delay, self.outage.left(), self.store_outage.left()),
                                                self._poll)
