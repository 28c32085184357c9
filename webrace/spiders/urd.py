"""``scrapy crawl urd``: crawl every due URD, on behalf of its owner.

A thin adapter over the round engine (:mod:`webrace.rounds`): the engine decides what a
round follows, coalesces and releases (seed 000 section 4: requests carry ``[Link,
ParentLink, Depth, {owners}]``, here in ``meta["webrace"]``, the owners as the ids of their
groups: see :mod:`webrace.rounds.groups`); the spider turns its steps into
Requests and items, and runs what needs Scrapy: the page recorder (links, object cache), the
rules, IPMicra's host resolution, and the continuous mode's timer. In distributed mode the
engine's calls on a fetched page (they go to Redis) run in the worker's Redis thread
(:mod:`webrace.distributed.offload`), awaited: the reactor goes on meanwhile.

Spider arguments: ``-a urd=ID[,ID...]`` crawls these URDs now, due or not;
``-a template=FILE`` runs the rules of a Scout template over every document
(``WEBRACE_RULES_TEMPLATE`` too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import task, threads
from twisted.python.failure import Failure

from webrace.backends import distributed, open_round_engine
from webrace.clock import steady_reactor
from webrace.distributed.offload import RedisThread
from webrace.extractor import UrlExtractor
from webrace.items import Page
from webrace.middlewares.exclusion import IGNORED
from webrace.middlewares.recrawl import FRESH_SINCE, UNCONDITIONAL, object_cache, store_io
from webrace.middlewares.redirect import REDIRECT_CLAIMED, REDIRECT_SEEN
from webrace.outage import REDIS_DOWN, Outage, until_reachable
from webrace.records.rounds import DONE, FAILED, Node
from webrace.rounds.engine import Round, Step
from webrace.scout.crawl import CrawlRules
from webrace.sentinels.crawl import StoredSentinels
from webrace.signals import page_abandoned, request_refused, round_closed, round_opened
from webrace.spiders.responses import CrawlStats, PageRecorder, failure_reason, run_rules
from webrace.store.objects import ObjectStoreUnwritable
from webrace.urd import now_millis

logger = logging.getLogger(__name__)


class UrdSpider(scrapy.Spider):
    name = "urd"
    # A refresh (<meta http-equiv="refresh">, a Refresh header) is read by the page recorder:
    # the page is stored (its re-crawl is conditional) and the target followed as one of its
    # links, with its depth budget; Scrapy's MetaRefreshMiddleware would drop the page unstored.
    custom_settings = {"METAREFRESH_ENABLED": False}

    def __init__(self, urd: str | None = None, template: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.only_ids = [i.strip() for i in (urd or "").split(",") if i.strip()]
        self.template_arg = template
        self.scout: CrawlRules | None = None
        self.continuous = False
        self._wake_call: Any = None
        self._probe_loop: Any = None
        self.redis_io: RedisThread | None = None  # distributed: where the engine's Redis calls run
        self.outage: Outage | None = None  # distributed: Redis away, said once (the lease scheduler's pace)
        # distributed or continuous: the object store cannot be written (full, gone), said once each way
        self.store_outage: Outage | None = None
        self._flush_check: Any = None  # distributed, idle: whether held items can go, asked
        self._flush_answer: bool | None = None
        # (round id, URL) -> the exception its callback raised, until an item of it is emitted
        self.unemitted: dict[tuple[str, str], str] = {}

    @classmethod
    def update_settings(cls, settings: Any) -> None:
        """Distributed mode: pages are leased from the shared rounds (this spider only)."""
        super().update_settings(settings)
        if distributed(settings):
            settings.set("SCHEDULER", "webrace.distributed.scheduler.LeaseScheduler", priority="spider")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> UrdSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.scout = CrawlRules.load(crawler, spider.template_arg)  # TemplateError: refused
        spider.continuous = settings.getbool("WEBRACE_CONTINUOUS")
        stats = CrawlStats(crawler)
        if distributed(settings):
            spider.outage = Outage(logger.warning)  # Redis away: said once each way for the whole worker
            spider.store_outage = Outage(logger.warning, away="The object store cannot be written; pages are "
                                         "handed back", back="The object store can be written again")
            spider.engine = _while_redis_away(lambda: open_round_engine(settings, stats, StoredSentinels(settings)),
                                              spider.outage)
        else:
            spider.engine = open_round_engine(settings, stats, StoredSentinels(settings))
            if spider.continuous:  # long-running too: a page that cannot be kept fails, the crawl goes on
                spider.store_outage = Outage(logger.warning, away="The object store cannot be written; pages "
                                             "fail until it can", back="The object store can be written again")
        spider.engine.on_open = spider._round_opened
        if spider.engine.shared:  # no Redis round trip on the reactor thread (issue 23)
            spider.redis_io = RedisThread()
        spider.extractor = UrlExtractor.from_settings(settings)
        spider.recorder = None  # needs the object cache, which its owner opens (spider_opened)
        crawler.signals.connect(spider.on_opened, signal=signals.spider_opened)
        spider.delegation = spider.engine.delegation  # IPMicra (distributed mode)
        if spider.delegation is not None and spider.delegation.measured is not None:
            crawler.signals.connect(spider.serve_probes, signal=signals.engine_started)
        spider.announced = Announced(crawler)
        crawler.signals.connect(spider.announced.item_out, signal=signals.item_scraped)
        crawler.signals.connect(spider.on_closed, signal=signals.spider_closed)
        if spider.scout is not None:
            crawler.signals.connect(spider.close_rules, signal=signals.spider_closed)
        crawler.signals.connect(spider.on_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider.request_refused, signal=request_refused)
        crawler.signals.connect(spider.page_failed, signal=signals.spider_error)
        return spider

    async def on_opened(self, spider: scrapy.Spider) -> None:
        if spider is not self:
            return
        # a wall-clock step holds none of its timed calls (webrace.clock); not in from_crawler:
        # the reactor is installed after the spider is made, and importing it first installs another
        steady_reactor(_reactor())
        self.cache = await self._open_cache()
        self.recorder = PageRecorder(self.cache, self.extractor, CrawlStats(self.crawler), self.engine.tally,
                                     store_io(self.crawler), self.crawler.settings.getfloat("METAREFRESH_MAXDELAY"))

    async def _open_cache(self) -> Any:
        """The object cache (owned by the recrawl middleware). A distributed worker that
        starts while Redis is away waits for it (said once each way, with the outage's
        backoff) before it opens: the crawl starts once it has somewhere to keep pages."""
        if self.outage is None:
            return object_cache(self.crawler)
        from webrace.backends.errors import RedisUnreachable

        while True:
            try:
                cache = object_cache(self.crawler)
            except (RedisUnreachable, *REDIS_DOWN) as exc:
                if not self.crawler.crawling:  # stopped (SIGTERM) while it waited
                    raise CloseSpider("redis_unavailable") from None
                await maybe_deferred_to_future(task.deferLater(_reactor(), self.outage.failed(exc), lambda: None))
            else:
                self.outage.ok()
                return cache

    def serve_probes(self) -> None:
        """IPMicra without a latency table: answer other workers' probe requests every
        quarter second, in a thread (they are TCP connects)."""
        self._probe_loop = task.LoopingCall(
            lambda: threads.deferToThread(self.delegation.serve_probes).addErrback(self._redis_failed))
        self._probe_loop.start(0.25, now=True).addErrback(
            lambda failure: logger.warning("IPMicra probe answering stopped: %s", failure.getErrorMessage()))

    # -- rounds --------------------------------------------------------------------------

    async def start(self) -> AsyncIterator[scrapy.Request]:
        if self.engine.shared:
            logger.info("Distributed mode: taking pages of the rounds `scrapy urd schedule` opens")
            return
        for request in self._open_round(self.only_ids):
            yield request

    def _open_round(self, only_ids: list[str] | None = None) -> list[scrapy.Request]:
        rnd = self.engine.open_due(now_millis(), only_ids)
        if self.engine.missing:
            logger.error("No URD with id %s (see `scrapy urd list`)", ", ".join(self.engine.missing))
            self.engine.missing = []
        if rnd is None:
            if not self.continuous:
                self._log_nothing_due()
            return []
        return [self._request(rnd, node) for node in self.engine.start(rnd)]

    def _round_opened(self, rnd: Round) -> None:
        """A round starts here (embedded) or this worker meets it (distributed)."""
        if not rnd.shared:
            owners = sorted({u.owner for u in rnd.urds.values()})
            self.crawler.stats.set_value("webrace/urds", len(rnd.real_urds))
            self.crawler.stats.set_value("webrace/owners", ",".join(owners))
            self.crawler.stats.inc_value("webrace/rounds")
            sentinels = sum(len(g) for g in rnd.sentinels.values())
            logger.info("Round %s: crawling %d URDs%s for %d owners: %s", rnd.id.rsplit("-", 1)[-1],
                        len(rnd.real_urds), f" and {sentinels} sentinels" if sentinels else "",
                        len(owners), ", ".join(owners))
        self.crawler.signals.send_catch_log(round_opened, round_id=rnd.id, urds=rnd.urds, sentinels=rnd.sentinels)

    def _log_nothing_due(self) -> None:
        next_due = self.engine.next_due()
        if next_due is None:
            logger.info("No URD registered: add some with `scrapy urd add FILE` (and no sentinel is due)")
        else:
            logger.info("No URD is due (nor any sentinel); next due at %s", _iso(next_due))

    def request_for_lease(self, round_id: str, node: Node) -> scrapy.Request | None:
        """The request for a page leased from a shared round (see the lease scheduler)."""
        rnd = self.engine.round(round_id)
        if rnd is None:
            return None
        request = self._request(rnd, node)
        request.meta["webrace_shared"] = True
        if node.parent_url:
            request.headers.setdefault(b"Referer", node.parent_url)
        return request

    def _request(self, rnd: Round, node: Node) -> scrapy.Request:
        # Groups and their depth budgets, not owners: a request costs the same for 10 URDs
        # sharing a start page as for 10,000 (owners are expanded on the page's item).
        context = {"round": rnd.id, "link": node.url, "parent": node.parent_url, "depth": node.depth,
                   "budgets": dict(node.budgets)}
        meta: dict[str, Any] = {"webrace": context}
        if any(not seen for _, seen in rnd.sentinels.get(node.url, ())):
            meta[UNCONDITIONAL] = True  # a sentinel with no baseline takes it from this page, changed or not
        else:  # a page a round confirmed within the shortest timing before this one: no request
            timing = rnd.groups.reach(node.budgets)[1]
            if timing > 0 and rnd.started_ms:
                meta[FRESH_SINCE] = rnd.started_ms - timing
        # The frontier already requests each URL once per round; Scrapy's dupefilter would
        # drop redirect targets silently (no errback), leaving a node pending.
        return scrapy.Request(node.url, callback=self.parse_page, errback=self.fetch_failed, priority=-node.depth,
                              meta=meta, dont_filter=True)

    def _emit(self, rnd: Round | None, step: Step) -> Iterator[Any]:
        for node in step.fetch:
            yield self._request(rnd, node)
        for node, item in step.items:
            if self.engine.shared:  # its lease ends once the item is written (lease scheduler)
                item._webrace_lease = (item["round"], node.url)
            self._keep_wanted(node, item)
            self.unemitted.pop((item["round"], node.url), None)
            yield item

    def _keep_wanted(self, node: Node, item: Any) -> None:
        """URDs merged into a page after its fetch (its item waited for them) want it too:
        added to its record, off the reactor, so its next new version is judged for them."""
        recorded = getattr(item, "_webrace_wanted", None)
        rnd = self.engine.rounds.get(item.get("round") or "")
        if recorded is None or rnd is None:
            return
        final = rnd.groups.reach(node.budgets)[0]
        if final <= recorded:
            return
        # deferred_from_coro, not Deferred.fromCoroutine: under the asyncio reactor the coroutine
        # awaits an asyncio future, which only an asyncio task may run
        done = deferred_from_coro(store_io(self.crawler)(self.cache.want, item["url"], final))
        done.addErrback(self._redis_failed).addErrback(
            lambda failure: logger.warning("Could not record the URDs that want %s: %s", item["url"],
                                           failure.getErrorMessage()))

    # -- a fetched page ------------------------------------------------------------------

    async def _call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, an engine call: in the Redis thread in distributed mode (awaited),
        else here."""
        if self.redis_io is None:
            return fn(*args)
        return await self.redis_io.call(fn, *args)

    async def claim_redirect(self, request: scrapy.Request, url: str) -> bool:
        """(The redirect middleware) ``request`` is about to follow a redirect to ``url``:
        True if the round claims ``url`` for its page; False if the round has ``url``
        already, and the redirect response comes to :meth:`parse_page` to end the page as
        its duplicate (see :class:`webrace.middlewares.redirect.RedirectMiddleware`)."""
        rnd, node = self._node(request)
        claimed, gained, state = await self._call(self.engine.claim_redirect, rnd, node, url)
        if not claimed:
            request.meta[REDIRECT_SEEN] = (url, gained, state)
        return claimed

    async def parse_page(self, response: Response) -> AsyncIterator[Any]:
        rnd, node = self._node(response.request)
        seen = response.meta.get(REDIRECT_SEEN)
        if seen is not None:  # a redirect to a page this round already has: not followed
            for out in self._emit(rnd, await self._call(self.engine.redirect_seen, rnd, node, *seen)):
                yield out
            return
        if response.url != node.url:
            node.answered_from = response.url  # its item's URL, and its links' parent
            # (claimed before it was followed, the usual case, it needs no engine call: no thread hop)
            if response.url not in response.meta.get(REDIRECT_CLAIMED, ()):
                step = await self._call(self.engine.redirected, rnd, node, response.url)
                if step is not None:  # answered from a page this round already has
                    for out in self._emit(rnd, step):
                        yield out
                    return
        recorder = self.recorder
        wanted = rnd.groups.reach(node.budgets)[0]  # kept in the page's record: its new versions are judged for them
        try:
            opened = rnd.started_ms or None
            if response.status == 304:
                item = await recorder.not_modified(node, response, wanted, opened)
            else:
                item = await recorder.fetched(node, response, wanted, opened)
        except ObjectStoreUnwritable as exc:  # full, read-only, gone: the crawl cannot keep what it fetches
            if self.store_outage is not None and self.engine.shared:  # a worker: the page goes back, leasing waits
                self.store_outage.struck(exc)
                self.crawler.stats.inc_value("webrace/store_unwritable/pages_abandoned")
                self.crawler.signals.send_catch_log(page_abandoned, request=response.request)
                return
            if self.store_outage is not None:  # continuous: failed in this round, fetched again in a later one
                self.store_outage.struck(exc)
                self.engine.tally.failed(response.url, "store_unwritable")
                for out in self._emit(rnd, await self._call(self.engine.finish, rnd, node, FAILED)):
                    yield out
                return
            logger.error("%s: the crawl stops (%s not recorded)", exc, response.url)
            self.crawler.stats.set_value("webrace/store_unwritable", str(exc))
            raise CloseSpider("store_unwritable") from None
        if self.store_outage is not None:
            self.store_outage.ok()
        if item is None:
            for out in self._emit(rnd, await self._call(self.engine.finish, rnd, node, FAILED)):
                yield out
            return
        item._webrace_wanted = wanted  # what its record holds (see _keep_wanted)
        if self.scout is not None:  # before the links are followed: rules may add some
            outcome = await run_rules(self.scout, response, item, self.cache)
            if outcome is not None:
                for result in outcome.results:
                    if result.results:
                        yield result
                self.recorder.enqueued(node, response.url, outcome.enqueued)
        if self.delegation is not None:  # hosts resolved before the links are routed (route: Redis thread)
            latency = response.meta.get("download_latency")
            if latency is not None and response.status != 304:
                await self._call(self.delegation.report, response.url, latency * 1000)
            await self.delegation.prepare(node.links, self._call)
        for out in self._emit(rnd, await self._call(self.engine.fetched, rnd, node, item)):
            yield out

    async def close_rules(self, spider: scrapy.Spider) -> None:
        """The rules' ``close()`` when the crawl ends (their results go to the table)."""
        if spider is self and self.scout is not None:
            done = await self.scout.close()
            if done:
                logger.info("Rules closed: %s", ", ".join(f"{r.rule} ({len(r.results)} results)" for r in done))

    # -- idle: release held items, close the round, wait for the next one ----------------

    def on_idle(self, spider: scrapy.Spider) -> None:
        """Nothing left to crawl here: release held items (a ``data:`` request carries them
        out: only a callback can emit items), close the round (its URDs get their last
        check), and in continuous mode start the next round when URDs fall due. In
        distributed mode `scrapy urd schedule` closes rounds; this worker only releases the
        items it holds (the lease scheduler decides when it stops)."""
        if spider is not self:
            return
        if self.engine.shared:
            self._shared_idle()
            return
        if self.engine.wants_flush():
            self._crawl_flush()
            raise DontCloseSpider
        try:  # an error here must not end a continuous crawl as if it had finished
            for rnd in self.engine.close_finished():
                logger.info("Round %s done", rnd.id.rsplit("-", 1)[-1])
                self.crawler.signals.send_catch_log(round_closed, round_id=rnd.id)
        except Exception as exc:
            self.crawler.stats.inc_value("webrace/errors/round_close")
            logger.error("Closing the round failed (%s: %s): its URDs keep their last check%s",
                         type(exc).__name__, exc, "; the crawl goes on" if self.continuous else "")
        if self.continuous:
            self._wake()
            raise DontCloseSpider

    def _crawl_flush(self) -> None:
        self.crawler.engine.crawl(scrapy.Request("data:,", callback=self._flush, dont_filter=True,
                                                 meta={"dont_obey_robotstxt": True}))

    def _shared_idle(self) -> None:
        """Distributed: whether held items can go is asked in the Redis thread (the crawl
        stays open meanwhile, and a flush follows when they can). An answer "not yet" lets
        the next idle tick through (the lease scheduler decides whether to stop), and the one
        after asks again."""
        if self._flush_answer is False:
            self._flush_answer = None
            return
        if self._flush_check is None and self.engine.held():
            self._flush_check = self.redis_io.run(self.engine.wants_flush).addBoth(self._flush_checked)
        if self._flush_check is not None:
            raise DontCloseSpider

    def _flush_checked(self, wants: Any) -> None:
        self._flush_check = None
        if isinstance(wants, Failure):
            if self._redis_failed(wants) is not None:  # (an outage is said once)
                logger.warning("Could not tell whether held items can go: %s", wants.getErrorMessage())
            wants = False
        self._flush_answer = bool(wants)
        if wants:
            self._flush_answer = None
            self._crawl_flush()

    async def _flush(self, response: Response) -> AsyncIterator[Page]:
        for out in self._emit(None, await self._call(self.engine.flush)):
            yield out

    def _wake(self) -> None:
        """Start a round with the URDs due now, or come back when the next one falls due."""
        if (self._wake_call is not None and self._wake_call.active()) or self.engine.current is not None:
            return
        try:
            requests = self._open_round()
        except Exception as exc:  # e.g. the URD-DB unreadable: said, and tried again in a minute
            self.crawler.stats.inc_value("webrace/errors/round_open")
            logger.error("Opening a round failed (%s: %s): trying again in 60 s", type(exc).__name__, exc)
            self._wake_call = _reactor().callLater(60.0, self._wake)
            return
        for request in requests:
            self.crawler.engine.crawl(request)
        if requests:
            return
        now = now_millis()
        next_due = self.engine.next_due()
        next_due = now + 60_000 if next_due is None else next_due
        delay = min(max((next_due - now) / 1000, 0.05), 60.0)  # re-read the URD-DB at least every minute
        self._wake_call = _reactor().callLater(delay, self._wake)

    # -- a failed fetch ------------------------------------------------------------------

    async def fetch_failed(self, failure: Failure) -> AsyncIterator[Page]:
        request = failure.request
        if self.engine.shared and failure.check(*REDIS_DOWN):
            # this worker's Redis (e.g. the meta-info lookup) failed, not the page
            self.abandon(request, failure.value)
            return
        try:
            async for out in self._fetch_failed(request, failure):
                yield out
        except REDIS_DOWN as exc:  # (an errback's error would bypass the outage middleware)
            if not self.engine.shared:
                raise
            self.abandon(request, exc)

    async def _fetch_failed(self, request: scrapy.Request, failure: Failure) -> AsyncIterator[Page]:
        rnd, node = self._node(request)
        if not request.meta.get(IGNORED):  # else counted where it was decided
            reason = failure_reason(failure.value)
            self.engine.tally.failed(request.url, reason)
            logger.warning("Fetch failed (%s) %s: %s", reason, request.url, failure.getErrorMessage()[:200])
        elif request.meta[IGNORED] == "mime":  # a type not kept: remembered, so not downloaded again
            await self.recorder.not_kept(request, failure.value)
        for out in self._emit(rnd, await self._call(self.engine.finish, rnd, node, FAILED)):
            yield out

    def abandon(self, request: scrapy.Request, exc: BaseException) -> None:
        """(Distributed) Redis went away while this page was handled (see
        :mod:`webrace.middlewares.outage`): said once for the outage, nothing of the page is
        emitted here, and its lease is given up: it goes back to the queue once Redis answers
        again, and this worker or another fetches it again (so it is no failure of this
        worker's: not counted in ``webrace/unemitted``)."""
        self.outage.seen(exc)
        self.crawler.stats.inc_value("webrace/redis_down/pages_abandoned")
        self.crawler.signals.send_catch_log(page_abandoned, request=request)

    def _redis_failed(self, failure: Failure) -> Failure | None:
        """An errback: a Redis outage (said once, see :class:`Outage`) is handled, any other failure passes on."""
        if self.outage is None or not failure.check(*REDIS_DOWN):
            return failure
        self.outage.seen(failure.value)
        return None

    def page_failed(self, failure: Failure, response: Response, spider: scrapy.Spider) -> None:
        """A page's callback raised (a bug, or Redis gone while it ran): no item of it comes
        from this worker unless the page comes back (a lease expiring); one that does not is
        counted at the end (``webrace/unemitted``), and the crawl exits 1."""
        context = response.request.meta.get("webrace") if spider is self and response is not None else None
        if context:
            self.unemitted[(context["round"], context["link"])] = type(failure.value).__name__

    def request_refused(self, request: scrapy.Request, reason: str) -> None:
        """The exclusion middleware refused a request of this crawl: its URL is ignored."""
        self.engine.tally.refused(request.url, f"ignored/{reason}")

    def _node(self, request: scrapy.Request) -> tuple[Round, Node]:
        context = request.meta["webrace"]
        return self.engine.node(context["round"], context)

    def on_closed(self, spider: scrapy.Spider, reason: str) -> None:
        if spider is not self:
            return
        self.announced.close()  # before the recrawl middleware closes the cache (it connected later)
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        if self._probe_loop is not None and self._probe_loop.running:
            self._probe_loop.stop()
        if self.delegation is not None:  # IPMicra's decisions by reason, its probes, addresses no worker had room for
            for key, value in self.delegation.delegator.stats.items():
                self.crawler.stats.set_value(key, value)
            self.crawler.stats.set_value("delegation/over_capacity", self.delegation.over_capacity)
        if self.redis_io is not None:  # after the work it was given (the lease scheduler stopped it already)
            self.redis_io.stop()
        current = getattr(self.engine, "current", None)
        if current is not None:
            logger.info("Crawl ended during round %s (%s): last check of its URDs left unchanged",
                        current.id.rsplit("-", 1)[-1], reason)
        if self.unemitted:
            self.crawler.stats.set_value("webrace/unemitted", len(self.unemitted))
            logger.error("%d fetched pages were not emitted: their processing failed (%s)", len(self.unemitted),
                         ", ".join(sorted(set(self.unemitted.values()))))
        unreleased = self.engine.held()
        if unreleased:
            logger.warning("%d pages were fetched and stored but their items not emitted: other "
                           "workers could still add owners to them", unreleased)


class Announced:
    """The new versions whose items went out (``item_scraped``: past the annotation and
    sentinel middlewares, so their ACIs and notifications are kept): their records stop being
    :attr:`~webrace.records.metainfo.MetaInfo.unannounced`, in batches, in the store thread. A
    batch lost (the process killed, the store away) only means those versions are announced
    once more by their next fetch; ACIs and notifications are kept once each (one per owner,
    page and version; a sentinel's baseline moves once)."""

    BATCH = 64  # records a batch marks
    DELAY_S = 1.0  # a smaller batch goes this long after its first item

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.pending: list[tuple[str, int]] = []
        self._call: Any = None
        self.closed = False

    def item_out(self, item: Any, spider: scrapy.Spider) -> None:
        if (not isinstance(item, Page) or not item.get("new_version") or item.get("version") is None
                or getattr(item, "_webrace_not_announced", False)):
            return
        self.pending.append((item["url"], item["version"]))
        if len(self.pending) >= self.BATCH:
            self.flush()
        elif self._call is None or not self._call.active():
            self._call = _reactor().callLater(self.DELAY_S, self.flush)

    def flush(self) -> Any:
        batch, self.pending = self.pending, []
        if not batch or self.closed:
            return None
        cache = object_cache(self.crawler)
        return deferred_from_coro(store_io(self.crawler)(cache.index.announced, batch)).addErrback(
            self._failed, len(batch))

    def close(self) -> None:
        """At the spider's close (the store thread has stopped): the rest, here."""
        self.closed = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        batch, self.pending = self.pending, []
        if batch:
            try:
                object_cache(self.crawler).index.announced(batch)
            except Exception as exc:  # noqa: BLE001 - they are announced again by their next fetch
                self._failed(Failure(exc), len(batch))

    def _failed(self, failure: Failure, count: int) -> None:
        self.crawler.stats.inc_value("webrace/announcements_unmarked", count)
        logger.warning("%d new versions went out but could not be marked so (%s): their next fetch announces "
                       "them again", count, failure.getErrorMessage())


def _while_redis_away(attempt: Callable[[], Any], outage: Outage) -> Any:
    """``attempt()`` once Redis answers: a worker whose Redis went away between the crawl
    command's check and the spider's start waits for it here, with the outage's backoff (the
    crawl has not started: nothing else is waiting for the reactor)."""
    from webrace.backends.errors import RedisUnreachable

    return until_reachable(attempt, outage, lambda seconds: time.sleep(seconds) or False,
                           (RedisUnreachable, *REDIS_DOWN))


def _reactor() -> Any:
    from twisted.internet import reactor  # the one Scrapy installed; importing it early would install another

    return reactor


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["DONE", "UrdSpider", "failure_reason"]
