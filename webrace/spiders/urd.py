"""``scrapy crawl urd``: crawl every due URD, on behalf of its owner.

The seed's mini-crawler (seed 000 section 4): requests are ``[Link, ParentLink, Depth,
{owners}]``; here they carry that context in ``meta["webrace"]`` and the crawl's
:class:`~webrace.frontier.Frontier` coalesces them, so a page reached for several URDs is
downloaded once and its item names every owner. Each page's links go through the URL
extractor pipe (:mod:`webrace.extractor`), then each URD's own scope and depth decide
which links it follows.

Spider arguments: ``-a urd=ID[,ID...]`` crawls these URDs now, due or not;
``-a template=FILE`` runs the rules of a Scout template over every document
(``WEBRACE_RULES_TEMPLATE`` too).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DontCloseSpider,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.response import get_base_url
from twisted.internet import error as twisted_errors
from twisted.python.failure import Failure

from webrace.backends import open_sentinel_store, open_urd_store
from webrace.conf import conf_list
from webrace.extractor import UrlExtractor
from webrace.frontier import DONE, FAILED, Frontier, Node, Offer
from webrace.items import Page
from webrace.middlewares.exclusion import IGNORED
from webrace.middlewares.recrawl import CONDITIONAL, LOOKED_UP
from webrace.scout.crawl import CrawlRules
from webrace.sentinels.crawl import due_sentinels
from webrace.signals import round_opened
from webrace.store.cache import ObjectCache
from webrace.store.metainfo import MetaInfo
from webrace.traps import PathRules, QueryVariants
from webrace.urd import Urd, now_millis
from webrace.urls import Blocklist, IgnoreTypes, in_scope, media_type, read_list

logger = logging.getLogger(__name__)


@dataclass
class Round:
    """A set of URDs crawled once: every page at most once, nothing remembered in the next
    round but what the object cache keeps. In distributed mode its frontier is shared by
    all workers (``RedisFrontier``) and each worker keeps its own held items and counts."""

    id: str
    urds: dict[str, Urd]
    frontier: Any  # Frontier, or RedisFrontier when shared
    started_ms: int
    shared: bool = False
    held: dict[str, tuple[Node, Page]] = field(default_factory=dict)  # items waiting for final owners
    owners_changed: bool = False
    # link -> why no URD follows it ("" when an earlier round of this crawl counted it already)
    not_followed: dict[str, str] = field(default_factory=dict)
    sentinels: dict[str, list] = field(default_factory=dict)  # URL -> [(sentinel, digest it last saw)] due
    sentinels_taken: set[str] = field(default_factory=set)  # ids evaluated on a new version
    queries: QueryVariants = field(default_factory=QueryVariants)  # `?page=N` traps, per path
    requested: Counter = field(default_factory=Counter)  # URD id -> pages requested for it (its budget)


class UrdSpider(scrapy.Spider):
    name = "urd"

    def __init__(self, urd: str | None = None, template: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.only_ids = [i.strip() for i in (urd or "").split(",") if i.strip()]
        self.template_arg = template
        self.scout: CrawlRules | None = None
        self.cache: ObjectCache | None = None
        self.continuous = False
        self.rounds = 0
        self.round: Round | None = None  # the embedded mode's current round, while open
        self.shared_rounds: dict[str, Round] = {}  # distributed mode: rounds seen, by id
        # The summary counts distinct URLs per crawl, however many rounds see them.
        self.discovered: set[str] = set()  # every URL the crawl came to know
        self.ignored_before: set[str] = set()  # links counted as ignored in an earlier round
        self.registry: Any = None  # RoundRegistry, in distributed mode
        self._wake_call: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> UrdSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.extractor = UrlExtractor(
            IgnoreTypes(conf_list(settings, "WEBRACE_IGNORE_TYPES", "ignore.types")),
            Blocklist(read_list(settings.get("WEBRACE_BLOCKLIST"))),
            max_url_length=settings.getint("WEBRACE_MAX_URL_LENGTH"),
            max_links=settings.getint("WEBRACE_MAX_LINKS_PER_PAGE"),
            path_rules=PathRules(settings.getint("WEBRACE_TRAP_MAX_SEGMENT_REPEATS"),
                                 settings.getint("WEBRACE_TRAP_MAX_SEGMENTS")),
        )
        spider.max_queries = settings.getint("WEBRACE_TRAP_MAX_QUERIES_PER_PATH")
        spider.page_budget = settings.getint("WEBRACE_MAX_PAGES_PER_URD")
        spider.scout = CrawlRules.load(crawler, spider.template_arg)  # TemplateError: refused
        spider.cache = ObjectCache.from_settings(settings)
        spider.continuous = settings.getbool("WEBRACE_CONTINUOUS")
        spider.delegation = None  # IPMicra's per-worker queues (distributed mode, WEBRACE_DELEGATION)
        if settings.get("REDIS_URL"):
            from webrace.backends.redis import connect, prefix
            from webrace.backends.redisrounds import RoundRegistry

            router = None
            if settings.getbool("WEBRACE_DELEGATION"):
                from webrace.backends.redisdelegation import RedisDelegation

                spider.delegation = RedisDelegation(connect(settings), prefix(settings), settings)
                spider.delegation.register()
                router = spider.delegation.route
                if spider.delegation.measured is not None:  # answer the other workers' probes
                    crawler.signals.connect(spider.serve_probes, signal=signals.engine_started)
            spider.registry = RoundRegistry(connect(settings), prefix(settings), router)
        crawler.signals.connect(spider.on_closed, signal=signals.spider_closed)
        if spider.scout is not None:
            crawler.signals.connect(spider.close_rules, signal=signals.spider_closed)
        crawler.signals.connect(spider.on_idle, signal=signals.spider_idle)
        return spider

    def serve_probes(self) -> None:
        """IPMicra without a latency table: answer other workers' probe requests every
        quarter second, in a thread (they are TCP connects)."""
        from twisted.internet import task, threads

        self._probe_loop = task.LoopingCall(lambda: threads.deferToThread(self.delegation.serve_probes))
        self._probe_loop.start(0.25, now=True).addErrback(
            lambda failure: logger.warning("IPMicra probe answering stopped: %s", failure.getErrorMessage()))

    # -- start: due URDs, coalesced by URL -----------------------------------------------

    async def start(self) -> AsyncIterator[scrapy.Request]:
        if self.registry is not None:
            logger.info("Distributed mode: taking pages of the rounds `scrapy urd schedule` opens")
            return
        for request in self._start_round(*self._due_work(now_millis())):
            yield request

    def _due_work(self, now: int) -> tuple[list[Urd], dict[str, list]]:
        """The URDs to crawl now, plus pseudo-URDs fetching the URLs of due sentinels."""
        urds = self._load_urds(now)
        sentinels: dict[str, list] = {}
        if not (self.only_ids and not self.rounds):
            extra, sentinels = due_sentinels(self.crawler.settings, now)
            if extra:
                self.crawler.stats.inc_value("sentinels/due", sum(len(g) for g in sentinels.values()))
            urds += extra
        if not urds and not self.continuous:
            self._log_nothing_due()
        return urds, sentinels

    def _start_round(self, urds: list[Urd], sentinels: dict[str, list] | None = None) -> list[scrapy.Request]:
        if not urds:
            return []
        self.rounds += 1
        rnd = self.round = self._open(Round(f"local-{self.rounds}", {u.id: u for u in urds}, Frontier(),
                                            now_millis(), sentinels=sentinels or {}))
        owners = sorted({u.owner for u in urds})
        self.crawler.stats.set_value("webrace/urds", len(urds))
        self.crawler.stats.set_value("webrace/owners", ",".join(owners))
        self.crawler.stats.inc_value("webrace/rounds")
        logger.info("Round %d: crawling %d URDs for %d owners: %s", self.rounds, len(urds), len(owners),
                    ", ".join(owners))
        requests = []
        for urd in urds:
            self._discover(urd.url)
            rnd.requested[urd.id] += 1
            verdict, _ = rnd.frontier.offer(urd.url, None, 0, {urd.id: urd.depth})
            if verdict is Offer.NEW:
                requests.append(self._request(rnd, rnd.frontier.get(urd.url)))
            else:
                self._inc("coalesced")
        return requests

    def shared_round(self, round_id: str) -> Round | None:
        """A distributed round, loaded from Redis the first time this worker meets it."""
        rnd = self.shared_rounds.get(round_id)
        if rnd is None and self.registry is not None:
            urds = self.registry.urds(round_id)
            if not urds:
                return None
            rnd = self._open(Round(round_id, urds, self.registry.frontier(round_id),
                                   self.registry.opened_at(round_id) or now_millis(), shared=True))
            self.shared_rounds[round_id] = rnd
        return rnd

    def _open(self, rnd: Round) -> Round:
        """A round starts here: its trap counters, and the ``round_opened`` signal."""
        rnd.queries = QueryVariants(self.max_queries)
        self.crawler.signals.send_catch_log(round_opened, round_id=rnd.id, urds=rnd.urds)
        return rnd

    def request_for_lease(self, round_id: str, node: Node) -> scrapy.Request | None:
        """The request for a page leased from a shared round (see the lease scheduler)."""
        rnd = self.shared_round(round_id)
        if rnd is None:
            return None
        request = self._request(rnd, node)
        request.meta["webrace_shared"] = True
        if node.parent_url:
            request.headers.setdefault(b"Referer", node.parent_url)
        return request

    def _load_urds(self, now: int) -> list[Urd]:
        with open_urd_store(self.crawler.settings) as store:
            if self.only_ids and not self.rounds:
                urds = [store.get(i) for i in self.only_ids]
                missing = [i for i, u in zip(self.only_ids, urds, strict=False) if u is None]
                if missing:
                    logger.error("No URD with id %s (see `scrapy urd list`)", ", ".join(missing))
                return [u for u in urds if u is not None]
            return store.due(now)

    def _log_nothing_due(self) -> None:
        with open_urd_store(self.crawler.settings) as store:
            pending = store.all()
        if not pending:
            logger.info("No URD registered: add some with `scrapy urd add FILE` (and no sentinel is due)")
        else:
            soonest = min(pending, key=lambda u: u.next_due)
            logger.info("No URD is due (nor any sentinel); %d registered, next due: %s at %s",
                        len(pending), soonest.id, _iso(soonest.next_due))

    def _request(self, rnd: Round, node: Node) -> scrapy.Request:
        context = {
            "round": rnd.id,
            "link": node.url,
            "parent": node.parent_url,
            "depth": node.depth,
            "budgets": dict(node.budgets),
            **self._owners(rnd, node),
        }
        return scrapy.Request(
            node.url,
            callback=self.parse_page,
            errback=self.fetch_failed,
            priority=-node.depth,
            meta={"webrace": context},
            # The frontier already requests each URL once per round; Scrapy's dupefilter
            # would drop redirect targets silently (no errback), leaving a node pending.
            dont_filter=True,
        )

    # -- a fetched page ------------------------------------------------------------------

    async def parse_page(self, response: Response) -> AsyncIterator[Any]:
        rnd, node = self._node(response.request)
        if response.url != node.url and not rnd.frontier.alias(response.url, node):
            self._inc("duplicate")  # a redirect to a page this round already has
            for out in self._release(rnd, rnd.frontier.finish(node, DONE)[0]):
                yield out
            return
        item = (self._not_modified(rnd, node, response) if response.status == 304
                else self._fetched(rnd, node, response))
        if item is None:
            for out in self._release(rnd, rnd.frontier.finish(node, FAILED)[0]):
                yield out
            return
        if self.scout is not None:  # before the links are followed: rules may add some
            outcome = await self._run_rules(response, item)
            if outcome is not None:
                for result in outcome.results:
                    if result.results:
                        yield result
                self._add_enqueued(node, response.url, outcome.enqueued)
        if self.delegation is not None and rnd.shared:  # hosts resolved before the links are routed
            latency = response.meta.get("download_latency")
            if latency is not None and response.status != 304:
                self.delegation.report(response.url, latency * 1000)
            await self.delegation.prepare(node.links)
        for out in self._expand(rnd, node, item):
            yield out

    def _expand(self, rnd: Round, node: Node, item: Page) -> Iterator[Page | scrapy.Request]:
        """Follow a stored page's links for its URDs, then release what can be released."""
        self._inc("pages")
        rnd.held[node.url] = (node, item)  # owners are filled in on release (see _release)
        requests, expanded, budgets = [], {}, dict(node.budgets)
        while True:  # until no URD was merged into the page while its links were followed
            requests += self._follow(rnd, node, budgets)
            expanded.update(budgets)
            ended, budgets = rnd.frontier.finish(node, DONE, expanded)
            if not budgets:
                break
        yield from requests
        yield from self._release(rnd, ended, node)

    async def _run_rules(self, response: Response, item: Page) -> Any:
        """The template's rules over this document: the response's body, or for a 304 the
        stored one (read in the rules thread)."""
        if 200 <= response.status < 300:
            headers = {k.decode("latin-1"): b", ".join(v).decode("latin-1") for k, v in response.headers.items()}
            return await self.scout.process(response.url, response.body, headers, response.status, item["version"])
        if response.status != 304:
            return None
        meta = response.request.meta[CONDITIONAL]["meta"]
        cache = self.cache

        def stored() -> bytes | None:
            if meta.dropped or not meta.digest:
                return None
            try:
                return cache.objects.get(meta.digest)
            except (LookupError, ValueError, OSError) as exc:
                logger.warning("Rules skip %s: stored body unreadable: %s", response.url, exc)
                return None

        return await self.scout.process(response.url, stored, meta.headers(), meta.status, meta.version)

    def _add_enqueued(self, node: Node, base_url: str, urls: list[str]) -> None:
        """URLs rules enqueued become links of the page (through the same checks as its
        own links), so the URDs' scope and depth decide which are crawled."""
        known = set(node.links)
        for raw in urls:
            verdict, url = self.extractor.judge(str(raw).strip(), base_url)
            if verdict is not None:
                self._inc("rules/enqueue_refused")
            elif url not in known:
                known.add(url)
                node.links.append(url)

    async def close_rules(self, spider: scrapy.Spider) -> None:
        """The rules' ``close()`` when the crawl ends (their results go to the table)."""
        if spider is self and self.scout is not None:
            done = await self.scout.close()
            if done:
                logger.info("Rules closed: %s", ", ".join(f"{r.rule} ({len(r.results)} results)" for r in done))

    def _fetched(self, rnd: Round, node: Node, response: Response) -> Page:
        """A full response: extract its links, store it, describe it."""
        status = response.status
        if status >= 400:
            self._inc(f"failed/http_{status}")
        elif _is_binary(response):
            self._inc("not_html")
        elif isinstance(response, HtmlResponse):
            node.links = self._extract(rnd, response)
        else:
            self._inc("not_html")
        looked_up = response.request.meta.get(LOOKED_UP)
        recorded = self.cache.record_fetch(
            response.url, status, response.body,
            fetched=now_millis(), header=_header_text(response), links=node.links,
            ip=str(response.ip_address) if response.ip_address else None,
            etag=_header(response, b"ETag"), lastmodified=_header(response, b"Last-Modified"),
            previous=looked_up["meta"] if looked_up and looked_up["url"] == response.url else ...,
        )
        if response.request.meta.get(CONDITIONAL) and 200 <= status < 300:
            self.crawler.stats.inc_value("recrawl/unchanged_body" if recorded.unchanged else "recrawl/modified")
        return self._page(node, response.url, status, media_type(response.headers.get(b"Content-Type")),
                          len(response.body), recorded.meta, recorded.version, recorded.new_version, False)

    def _not_modified(self, rnd: Round, node: Node, response: Response) -> Page | None:
        """A 304: answered from the meta-info store, its stored links followed (seed 003
        section 5.1); the body is neither downloaded nor parsed."""
        conditional = response.request.meta.get(CONDITIONAL)
        if not conditional or conditional["url"] != response.url:
            self._inc("failed/unexpected_304")
            return None
        meta = self.cache.record_not_modified(
            conditional["meta"], now_millis(), _header(response, b"ETag"), _header(response, b"Last-Modified")
        )
        node.links = list(meta.links)
        for url in node.links:  # the stored links were found on the page too
            self._discover(url)
        return self._page(node, response.url, 304, media_type(meta.header_value("Content-Type")), meta.size,
                          meta, meta.version, False, True)

    def _page(self, node: Node, url: str, status: int, content_type: str, size: int, meta: MetaInfo,
              version: int | None, new_version: bool, not_modified: bool) -> Page:
        return Page(
            url=url,
            parent_url=node.parent_url,
            depth=node.depth,
            status=status,
            content_type=content_type,
            size=size,
            links=list(node.links),
            ip=meta.ip,
            fetched_at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            not_modified=not_modified,
            version=version,
            new_version=new_version,
            digest=meta.digest,
            kept=version is not None and not meta.dropped,
        )

    def _extract(self, rnd: Round, response: HtmlResponse) -> list[str]:
        try:
            extraction = self.extractor.extract(response.selector, get_base_url(response))
        except (ValueError, TypeError) as exc:  # lxml could not make a tree of it
            logger.warning("Could not parse %s: %s", response.url, exc)
            self._inc("error/parse")
            return []
        self._inc("expanded")
        for url in extraction.links:
            self._discover(url)
        for url, counter in extraction.rejected:
            if self._discover(url):
                self._inc(counter)
        return extraction.links

    def _discover(self, url: str) -> bool:
        """Count ``url`` as discovered the first time this crawl sees it."""
        if url in self.discovered:
            return False
        self.discovered.add(url)
        self._inc("discovered")
        return True

    def _follow(self, rnd: Round, node: Node, budgets: dict[str, int]) -> Iterator[scrapy.Request]:
        """Offer ``node``'s links to the frontier for each URD in ``budgets`` that still has
        depth left and whose scope holds the link; carry URDs merged into pages already
        done through their stored links, without fetching them again."""
        stack = [(node, budgets)]
        while stack:
            parent, parent_budgets = stack.pop()
            offers, not_followed = [], []
            known = rnd.frontier.known(parent.links) if parent.links else set()
            for link in parent.links:
                child_budgets: dict[str, int] = {}
                reason = "depth"
                for urd_id, remaining in parent_budgets.items():
                    urd = rnd.urds[urd_id]
                    if remaining <= 0:
                        continue
                    if not in_scope(link, urd.url, urd.scope):
                        reason = "scope"
                    else:
                        child_budgets[urd_id] = remaining - 1
                if child_budgets and link not in known:  # a page new to the round: trap rules, budgets
                    if not rnd.queries.admit(link):
                        child_budgets, reason = {}, "trap"
                    else:
                        child_budgets = {u: r for u, r in child_budgets.items() if self._within_budget(rnd, u)}
                        reason = "budget"
                if child_budgets:
                    offers.append((link, child_budgets))
                else:
                    not_followed.append((link, reason))
            self._not_followed(rnd, not_followed)
            results = rnd.frontier.offer_many(parent.url, parent.depth + 1, offers)
            for (link, _), (verdict, gained, state) in zip(offers, results, strict=True):
                if verdict is Offer.NEW:
                    reason = rnd.not_followed.pop(link, None)
                    if reason:  # another path reached it after all
                        self._inc(f"ignored/{reason}", -1)
                    if not rnd.shared:  # a shared frontier has queued it already
                        yield self._request(rnd, rnd.frontier.get(link))
                elif verdict is Offer.MERGED:
                    self._inc("coalesced")
                    if state == DONE:
                        rnd.owners_changed = True
                        if any(r > 0 for r in gained.values()):
                            stack.append((rnd.frontier.get(link), gained))
                else:
                    self._inc("duplicate")

    def _within_budget(self, rnd: Round, urd_id: str) -> bool:
        """Whether ``urd_id`` may request one more page this round (and count it)."""
        if self.page_budget and rnd.requested[urd_id] >= self.page_budget:
            if not self.crawler.stats.get_value(f"webrace/budget_reached/{urd_id}"):
                logger.warning("URD %s reached its page budget (WEBRACE_MAX_PAGES_PER_URD=%d) this round",
                               urd_id, self.page_budget)
            self.crawler.stats.set_value(f"webrace/budget_reached/{urd_id}", self.page_budget)
            return False
        rnd.requested[urd_id] += 1
        return True

    def _not_followed(self, rnd: Round, links: list[tuple[str, str]]) -> None:
        """Count links no URD follows, once per round, and only while no other path has
        brought them into the frontier (then they were not ignored after all)."""
        fresh = [(link, reason) for link, reason in links if link not in rnd.not_followed]
        known = rnd.frontier.known([link for link, _ in fresh]) if fresh else set()
        for link, reason in fresh:
            if link not in known and link not in rnd.not_followed:
                counted = link not in self.ignored_before
                rnd.not_followed[link] = reason if counted else ""
                if counted:
                    self._inc(f"ignored/{reason}")

    # -- holding items until their owners are final --------------------------------------

    def _release(self, rnd: Round, ended: set[str], node: Node | None = None) -> Iterator[Page]:
        """Emit the held items whose owners can no longer grow: no URD still active that
        could reach the page (its scope holds it) is missing from the page's URDs. In a
        shared round other workers end URDs too, so every held item is looked at."""
        if ended or rnd.owners_changed or rnd.shared:
            candidates = list(rnd.held)
        else:
            candidates = [node.url] if node is not None and node.url in rnd.held else []
        rnd.owners_changed = False
        if not candidates:
            return
        # A page that every URD of the round reached can gain no owner: no need to ask.
        complete = [url for url in candidates if len(rnd.held[url][0].budgets) == len(rnd.urds)]
        for url in complete:
            held_node, item = rnd.held.pop(url)
            yield self._complete(rnd, held_node, item)
        candidates = [url for url in candidates if url in rnd.held]
        if not candidates:
            return
        # other workers may have merged URDs into a shared page: read it again with the actives
        active, nodes = rnd.frontier.snapshot(candidates if rnd.shared else [])
        for url in candidates:
            held_node, item = rnd.held[url]
            current = nodes.get(url) or held_node
            if not self._may_gain_owners(rnd, current, active):
                del rnd.held[url]
                yield self._complete(rnd, current, item)

    def _releasable(self, rnd: Round) -> bool:
        """Whether some item held for a shared round could be released now."""
        active = rnd.frontier.active_urds()
        return any(not self._may_gain_owners(rnd, rnd.frontier.get(url) or node, active)
                   for url, (node, _) in rnd.held.items())

    def _may_gain_owners(self, rnd: Round, node: Node, active: set[str]) -> bool:
        for urd_id in active:
            if urd_id not in node.budgets:
                urd = rnd.urds.get(urd_id)
                if urd is not None and in_scope(node.url, urd.url, urd.scope):
                    return True
        return False

    def _complete(self, rnd: Round, node: Node, item: Page) -> Page:
        item.update(self._owners(rnd, node))
        item["round"] = rnd.id
        return item

    def take_sentinels(self, round_id: str | None, url: str) -> list | None:
        """The sentinels due in this round on ``url`` (for the sentinel middleware), once."""
        rnd = self.round if self.round is not None and self.round.id == round_id else None
        if rnd is None or url not in rnd.sentinels:
            return None
        group = rnd.sentinels.pop(url)
        rnd.sentinels_taken.update(s.id for s, _ in group)
        return group

    def round_urds(self, round_id: str | None) -> dict[str, Urd] | None:
        """The URDs of a round this spider crawls (for the annotation middleware)."""
        if self.round is not None and self.round.id == round_id:
            return self.round.urds
        rnd = self.shared_rounds.get(round_id or "")
        return rnd.urds if rnd is not None else None

    def _owners(self, rnd: Round, node: Node) -> dict[str, Any]:
        """``owners``, ``urd_ids`` and ``urgent`` of the URDs a page is fetched for."""
        urds = [rnd.urds[i] for i in sorted(node.budgets) if i in rnd.urds]
        return {
            "owners": sorted({u.owner for u in urds}),
            "urd_ids": [u.id for u in urds],
            "urgent": any(u.urgent for u in urds),
        }

    def on_idle(self, spider: scrapy.Spider) -> None:
        """Nothing left to crawl here: release held items, close the round (its URDs get
        their last check), and in continuous mode start the next round when URDs fall due.
        In distributed mode `scrapy urd schedule` closes rounds; this worker only waits
        for the items it holds (the lease scheduler decides when it stops)."""
        if spider is not self:
            return
        rounds = [r for r in [self.round, *self.shared_rounds.values()] if r is not None and r.held]
        for rnd in rounds:
            if not rnd.shared:  # safety net: a request ended without callback or errback
                logger.warning("Releasing %d held items at idle", len(rnd.held))
                rnd.frontier.forget_active()
        if any(not rnd.shared or self._releasable(rnd) for rnd in rounds):
            self.crawler.engine.crawl(
                scrapy.Request("data:,", callback=self._flush, dont_filter=True, meta={"dont_obey_robotstxt": True})
            )
            raise DontCloseSpider
        if self.round is not None:
            with open_urd_store(self.crawler.settings) as store:
                store.mark_checked(self.round.urds, self.round.started_ms)
            left = [s.id for group in self.round.sentinels.values() for s, _ in group]
            if left:  # fetched without a new version (304, same body) or failed: checked, nothing changed
                with open_sentinel_store(self.crawler.settings) as sentinels:
                    sentinels.checked(left, self.round.started_ms)
            self.ignored_before.update(self.round.not_followed)
            logger.info("Round %d done", self.rounds)
            self.round = None
        if self.continuous and self.registry is None:
            self._wake()
            raise DontCloseSpider

    def _wake(self) -> None:
        """Start a round with the URDs due now, or come back when the next one falls due."""
        if self._wake_call is not None and self._wake_call.active():
            return
        if self.round is not None:
            return
        now = now_millis()
        requests = self._start_round(*self._due_work(now))
        for request in requests:
            self.crawler.engine.crawl(request)
        if requests:
            return
        with open_urd_store(self.crawler.settings) as store:
            pending = store.all()
        next_due = min((u.next_due for u in pending), default=now + 60_000)
        delay = min(max((next_due - now) / 1000, 0.05), 60.0)  # re-read the URD-DB at least every minute
        from twisted.internet import reactor  # the one Scrapy installed; importing it early would install another

        self._wake_call = reactor.callLater(delay, self._wake)

    def _flush(self, response: Response) -> Iterator[Page]:
        for rnd in [r for r in [self.round, *self.shared_rounds.values()] if r is not None]:
            yield from self._release(rnd, {"*"})

    # -- a failed fetch ------------------------------------------------------------------

    def fetch_failed(self, failure: Failure) -> Iterator[Page]:
        request = failure.request
        rnd, node = self._node(request)
        ended, _ = rnd.frontier.finish(node, FAILED)
        if not request.meta.get(IGNORED):  # else counted where it was decided
            reason = failure_reason(failure.value)
            self._inc(f"failed/{reason}")
            logger.warning("Fetch failed (%s) %s: %s", reason, request.url, failure.getErrorMessage()[:200])
        yield from self._release(rnd, ended)

    def _node(self, request: scrapy.Request) -> tuple[Round, Node]:
        context = request.meta["webrace"]
        rnd = self.shared_round(context["round"]) if self.registry is not None else self.round
        if rnd is None:  # e.g. resumed from JOBDIR after the round state was lost
            rnd = self.round = Round(context["round"], {}, Frontier(), now_millis())
        if rnd.shared:  # the lease carried the node; merges since are caught by finish()
            return rnd, Node(context["link"], context["parent"], context["depth"], dict(context["budgets"]))
        node = rnd.frontier.get(context["link"])
        if node is None:  # rebuild the node from the request
            node = rnd.frontier.adopt(
                Node(context["link"], context["parent"], context["depth"], dict(context["budgets"]))
            )
        return rnd, node

    # -- end of the round ----------------------------------------------------------------

    def on_closed(self, spider: scrapy.Spider, reason: str) -> None:
        if spider is not self:
            return
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        probes = getattr(self, "_probe_loop", None)
        if probes is not None and probes.running:
            probes.stop()
        if self.round is not None:
            logger.info("Crawl ended during round %d (%s): last check of its URDs left unchanged",
                        self.rounds, reason)
        unreleased = sum(len(r.held) for r in self.shared_rounds.values())
        if unreleased:
            logger.warning("%d pages were fetched and stored but their items not emitted: other "
                           "workers could still add owners to them", unreleased)
        if self.cache is not None:
            self.cache.close()

    def _inc(self, key: str, n: int = 1) -> None:
        if n:
            self.crawler.stats.inc_value(f"webrace/{key}", n)


def _header(response: Response, name: bytes) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def _header_text(response: Response) -> str:
    """The response's status line and headers, as the seed's meta-info keeps them."""
    from http import HTTPStatus

    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    headers = response.headers.to_string().decode("latin-1").replace("\r\n", "\n")
    return f"HTTP/1.1 {response.status} {reason}\n{headers}".rstrip()


def _is_binary(response: Response) -> bool:
    """A body that is not text whatever its headers say (NUL bytes near the start)."""
    return not isinstance(response, TextResponse) or b"\x00" in response.body[:2048]


def failure_reason(exc: BaseException) -> str:
    """Short counter name for why a fetch failed."""
    if isinstance(exc, (CannotResolveHostError, twisted_errors.DNSLookupError)):
        return "dns"
    if isinstance(exc, (DownloadConnectionRefusedError, twisted_errors.ConnectionRefusedError)):
        return "refused"
    if isinstance(exc, (DownloadTimeoutError, twisted_errors.TimeoutError, twisted_errors.TCPTimedOutError)):
        return "timeout"
    if isinstance(exc, DownloadCancelledError):
        return "too_large" if "size" in str(exc).lower() else "cancelled"
    if isinstance(exc, ResponseDataLossError):
        return "data_loss"
    if isinstance(exc, IgnoreRequest) and "redirect" in str(exc).lower():
        return "redirects"
    if isinstance(exc, (twisted_errors.ConnectError, twisted_errors.ConnectionLost, DownloadFailedError)):
        return "connection"
    return type(exc).__name__.lower()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
