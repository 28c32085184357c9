"""The crawl pushes too: a delivery pass after each round closes (``round_closed``), every
``WEBRACE_DELIVERY_INTERVAL`` seconds while the crawl runs (a distributed worker sees no round
close), and one when the crawl ends.

A pass runs in a thread of its own (a daemon thread), never in the reactor; a trigger while a
pass runs asks for one more after it, never two at once. Each send is limited to
``WEBRACE_DELIVERY_TIMEOUT`` seconds, so a dead channel delays the end of a crawl by at most
that, and the crawl itself not at all; the crawl waits for its last pass at most
:data:`CLOSE_WAIT` times that (plus a few seconds), then ends without it, saying so: a pass
stuck in anything else (a store that stopped answering) never holds the crawl open. Its
counters join the crawl's stats (``delivery/...``).
Off with ``WEBRACE_DELIVERY = False``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer, task
from twisted.python.failure import Failure

from webrace.delivery.agent import DeliveryAgent, PassReport
from webrace.signals import round_closed

logger = logging.getLogger(__name__)

CLOSE_WAIT = 3  # the crawl waits for its last pass at most this many send timeouts, plus CLOSE_GRACE s
CLOSE_GRACE = 5.0


def _in_thread(function: Any) -> defer.Deferred:
    """``function()`` in a daemon thread; its result (or failure) fires the Deferred in the
    reactor. Not the reactor's thread pool: the reactor joins that pool's threads when it
    stops, so a stuck pass would hold the process open."""
    from twisted.internet import reactor  # the one Scrapy installed (importing it earlier would install another)

    done: defer.Deferred = defer.Deferred()

    def run() -> None:
        try:
            result: Any = function()
        except BaseException:  # noqa: BLE001 - handed to the Deferred, as deferToThread does
            result = Failure()
        reactor.callFromThread(done.errback if isinstance(result, Failure) else done.callback, result)

    threading.Thread(target=run, name="webrace-delivery", daemon=True).start()
    return done


class DeliveryExtension:
    def __init__(self, crawler: Crawler, agent: DeliveryAgent) -> None:
        self.crawler = crawler
        self.agent = agent
        self.running: defer.Deferred | None = None
        self.again = False  # a trigger came while a pass ran: one more after it
        self.waiters: list[defer.Deferred] = []
        self.loop: task.LoopingCall | None = None
        self.interval = 0.0
        self.clock: Any = None  # what times the wait for the last pass (None: the reactor)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DeliveryExtension:
        settings = crawler.settings
        if not settings.getbool("WEBRACE_DELIVERY"):
            raise NotConfigured  # off, as by default: nothing to say (Scrapy logs a reason as a warning)
        ext = cls(crawler, DeliveryAgent(settings))
        crawler.signals.connect(ext.trigger, signal=round_closed)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        interval = settings.getfloat("WEBRACE_DELIVERY_INTERVAL")
        if interval > 0:
            ext.loop = task.LoopingCall(ext.trigger)
            ext.interval = interval
            crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        return ext

    def engine_started(self) -> None:
        self.loop.start(self.interval, now=False).addErrback(
            lambda failure: logger.warning("Delivery passes stopped: %s", failure.getErrorMessage()))

    def trigger(self, **_: Any) -> None:
        """A pass now, or one more after the running one."""
        if self.running is not None:
            self.again = True
            return
        self.running = _in_thread(self.agent.run_pass)
        self.running.addCallbacks(self._done, self._failed)
        self.running.addBoth(self._next)

    async def spider_closed(self, spider: Any, reason: str) -> None:
        """The last pass: the crawl ends when it has (each send at most the timeout)."""
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        if self.running is None:
            self.trigger()
        else:
            self.again = True
        waiter: defer.Deferred = defer.Deferred()
        self.waiters.append(waiter)
        from twisted.internet import reactor

        limit = CLOSE_WAIT * self.agent.config.timeout + CLOSE_GRACE
        waiter.addTimeout(limit, self.clock or reactor)
        try:
            await maybe_deferred_to_future(waiter)
        except defer.TimeoutError:
            self.crawler.stats.inc_value("delivery/abandoned")
            logger.warning("The last delivery pass did not end within %g s; the crawl ends without it "
                           "(what it had not sent is sent by the next pass: `scrapy deliver`)", limit)

    def _next(self, _: object) -> None:
        self.running = None
        if self.again:
            self.again = False
            self.trigger()
            return
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            waiter.callback(None)

    def _done(self, report: PassReport) -> None:
        for key, value in report.stats.items():
            self.crawler.stats.inc_value(key, value)
        if report.stats:
            logger.info(report.line())

    def _failed(self, failure: Failure) -> None:
        self.crawler.stats.inc_value("delivery/errors")
        logger.warning("Delivery pass failed (%s: %s); the next pass tries again",
                       failure.type.__name__, failure.getErrorMessage()[:300])
