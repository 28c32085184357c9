"""Exclusion: block lists, robots.txt, pacing per host, traps and accepted media types.

Every request of the crawl passes here, whatever produced it (a URD, an extracted link, a
redirect, a DynaBot seed or probe, a rule): the block list is checked first, then robots.txt
(:mod:`webrace.middlewares.robots`: RFC 9309, fetched once per origin, every request
waiting for it). A redirect is judged like a link: the trap rules and the scope of the URDs
the request serves (learned from the ``round_opened`` signal) must hold its target.

Pacing (:mod:`webrace.pacing`): after each answer, the host's download slot rests the
answer's whole download time times ``WEBRACE_DELAY_FACTOR`` (bounded by
``WEBRACE_MIN_DELAY`` / ``WEBRACE_MAX_DELAY``), and two starts are never closer than
robots.txt's Crawl-delay or ``DOWNLOAD_DELAY``; ``WEBRACE_HOST_CONCURRENCY`` requests per
host at most. Responses whose Content-Type is not accepted are stopped right after their
headers; one that declares no type (none, or application/octet-stream) is judged as
browsers do, by its URL's name at the headers and by its first bytes once downloaded
(:meth:`webrace.urls.MediaTypes.judge`). A 2xx refused so is remembered by the spider
without a body (:meth:`webrace.store.cache.ObjectCache.record_not_kept`), so the recrawl
middleware asks next time only whether it changed: its 304 is refused here as the 200 was
(``webrace/not_kept/not_modified``), and an undeclared type that was binary last time is
stopped at its headers, not downloaded again (``webrace/not_kept/known_binary``).

Each decision bumps a stats counter (``robots/allowed``, ``robots/disallowed``,
``robots/unreachable``, ``pacing/<host>/...``); a URD crawl's request refused here is told
with the ``request_refused`` signal (the spider counts its URL as ``webrace/ignored/<reason>``,
once per crawl) and has ``webrace_ignored`` in its meta so the spider's errback does not
count it again.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response

from webrace.conf import conf_list
from webrace.middlewares.recrawl import CONDITIONAL, LOOKED_UP
from webrace.middlewares.robots import UNREACHABLE, RobotsTxt, origin
from webrace.pacing import Pacing
from webrace.signals import request_refused, round_opened
from webrace.traps import PathRules
from webrace.urls import REFUSE, SNIFF, Blocklist, MediaTypes, in_scope, looks_binary, media_type, read_list

logger = logging.getLogger(__name__)

IGNORED = "webrace_ignored"
# meta: the answer refused for its media type after its body came (the spider remembers it;
# one refused at its headers is the StopDownload failure's ``response``)
REFUSED = "webrace_refused"
_HEADERS_AT = "webrace_headers_at"  # meta: time.monotonic() when the answer's headers arrived
_SNIFF = "webrace_sniff"  # meta: the answer's media type is undeclared; its body decides
_ROUNDS_KEPT = 16  # scopes of this many recent rounds are kept for judging redirects


class ExclusionMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.blocklist = Blocklist(read_list(settings.get("WEBRACE_BLOCKLIST")))
        self.media_types = MediaTypes(conf_list(settings, "WEBRACE_MIME_TYPES", "mime.types"))
        self.max_crawl_delay = settings.getfloat("WEBRACE_MAX_CRAWL_DELAY")
        self.useragent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        self.robots = RobotsTxt(crawler) if settings.getbool("ROBOTSTXT_OBEY") else None
        self.paths = PathRules(settings.getint("WEBRACE_TRAP_MAX_SEGMENT_REPEATS"),
                               settings.getint("WEBRACE_TRAP_MAX_SEGMENTS"))
        self.pacing = Pacing(
            factor=settings.getfloat("WEBRACE_DELAY_FACTOR"),
            min_delay=settings.getfloat("WEBRACE_MIN_DELAY"),
            max_delay=settings.getfloat("WEBRACE_MAX_DELAY"),
            floor=settings.getfloat("DOWNLOAD_DELAY"),
        )
        self.host_concurrency = settings.getint("WEBRACE_HOST_CONCURRENCY")
        self._downloader_ready = False
        self.scopes: OrderedDict[str, dict[str, tuple[str, str]]] = OrderedDict()  # round -> URD -> (url, scope)
        crawler.signals.connect(self.headers_received, signal=signals.headers_received)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self.round_opened, signal=round_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ExclusionMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if request.url.startswith(("data:", "file:")):
            return
        self._prepare_slot(request)
        if request.meta.get("dont_obey_robotstxt"):  # robots.txt itself
            return
        if self.blocklist and self.blocklist.blocks(request.url):
            self._ignore(request, "blocklist", "Blocked by WEBRACE_BLOCKLIST")
        if request.meta.get("redirect_urls"):
            self.judge_redirect(request)
        if self.robots is not None:
            await self._judge_robots(request)

    # -- robots.txt ----------------------------------------------------------------------

    async def _judge_robots(self, request: Request) -> None:
        rules = await self.robots.rules(request)
        if rules.kind == UNREACHABLE:
            self.stats.inc_value("robots/unreachable")
            self.stats.set_value(f"robots/unreachable_origin/{origin(request)}", rules.reason)
            if rules.error is not None:  # the host itself is unreachable: the page failed as robots.txt did
                request.meta["dont_retry"] = True
                raise rules.error.with_traceback(None)
            self._ignore(request, "robots_unreachable",
                         f"robots.txt unreachable ({rules.reason}): nothing fetched from this host this round")
        if not rules.allowed(request.url, self.useragent):
            self.stats.inc_value("robots/disallowed")
            self._ignore(request, "robots", "Forbidden by robots.txt")
        delay = rules.crawl_delay(self.useragent)
        if delay is not None:
            self._apply_crawl_delay(request, delay)
        self.stats.inc_value("robots/allowed")

    def _apply_crawl_delay(self, request: Request, delay: float) -> None:
        key = self.crawler.engine.downloader.get_slot_key(request)
        if delay > self.max_crawl_delay:
            self.stats.set_value(f"robots/crawl_delay_too_long/{key}", delay)
            self.stats.inc_value("robots/disallowed")
            self._ignore(request, "crawl_delay",
                         f"robots.txt asks for Crawl-delay {delay:g}s, over WEBRACE_MAX_CRAWL_DELAY="
                         f"{self.max_crawl_delay:g}: host skipped")
        if self.pacing.crawl_delays.get(key) != delay:
            self.pacing.crawl_delays[key] = delay
            self.stats.set_value(f"webrace/crawl_delay/{key}", delay)
            if self.pacing.floor > delay:
                logger.info("robots.txt asks a Crawl-delay of %gs for %s; DOWNLOAD_DELAY=%gs is longer and applies",
                            delay, key, self.pacing.floor)
            else:
                logger.info("Honouring robots.txt Crawl-delay of %gs for %s", delay, key)
            slot = self.crawler.engine.downloader.slots.get(key)
            if slot is not None and slot.delay < delay:
                slot.delay = delay

    # -- redirects -----------------------------------------------------------------------

    def round_opened(self, round_id: str, urds: dict[str, Any]) -> None:
        self.scopes[round_id] = {i: (u.url, u.scope) for i, u in urds.items()}
        while len(self.scopes) > _ROUNDS_KEPT:
            self.scopes.popitem(last=False)
        if self.robots is not None:
            self.robots.new_round()

    def judge_redirect(self, request: Request) -> None:
        """A redirect target passes the checks a link passes: trap rules, and the scope of
        at least one URD the request serves."""
        trap = self.paths.trap(request.url)
        if trap:
            self._ignore(request, "trap", f"Redirect to a trap ({trap})")
        context = request.meta.get("webrace")
        scopes = self.scopes.get(context.get("round", "")) if context else None
        if not scopes:
            return  # not a URD crawl (DynaBot), or a round this process never opened
        urd_ids = context.get("urd_ids") or list(context.get("budgets", ()))
        judged = [scopes[i] for i in urd_ids if i in scopes]
        if judged and not any(in_scope(request.url, url, scope) for url, scope in judged):
            self._ignore(request, "redirect_scope",
                         f"Redirect from {request.meta['redirect_urls'][-1]} leaves the URDs' scope")

    # -- pacing --------------------------------------------------------------------------

    def _prepare_slot(self, request: Request) -> None:
        """New slots get WEBRACE_HOST_CONCURRENCY (the downloader was built before this
        middleware could say so; DOWNLOAD_SLOTS entries still win)."""
        if not self._downloader_ready:
            self.crawler.engine.downloader.domain_concurrency = self.host_concurrency
            self._downloader_ready = True

    def headers_received(self, headers: Any, body_length: int, request: Request, spider: Any = None) -> None:
        request.meta[_HEADERS_AT] = time.monotonic()
        if "webrace" not in request.meta:
            return
        request.meta.pop(_SNIFF, None)  # a redirect's request carries its predecessor's meta
        ctype = (headers.get(b"Content-Type") or b"").decode("latin-1")
        if not ctype and body_length == 0:  # a 304 (its type is the stored version's), or no body at all
            return
        verdict = self.media_types.judge(ctype, request.url)
        if verdict == SNIFF and _known_binary(request, ctype):
            self._refused(request, "mime")
            self.stats.inc_value("webrace/not_kept/known_binary")
            logger.debug("Undeclared media type, binary body last time: not downloaded again: %s", request.url)
            raise StopDownload(fail=True)
        if verdict == SNIFF:  # no type, or octet-stream, and a name that may be text: the body decides
            request.meta[_SNIFF] = True
            self.stats.inc_value("webrace/mime_sniffed")
        elif verdict == REFUSE:
            self._refused(request, "mime")
            logger.debug("Media type %r not accepted, body not downloaded: %s", ctype, request.url)
            raise StopDownload(fail=True)

    def process_response(self, request: Request, response: Response) -> Response:
        """A body let through by its name alone is kept only if it is text (WHATWG's rule,
        on the decompressed body: this middleware sees responses after HttpCompression)."""
        if request.meta.get(_SNIFF) and looks_binary(response.body):
            self._refused(request, "mime")
            request.meta[REFUSED] = response
            logger.debug("Undeclared media type, binary body: not kept: %s", request.url)
            raise IgnoreRequest("Undeclared media type and a binary body")
        conditional = request.meta.get(CONDITIONAL)
        if response.status == 304 and conditional and conditional["url"] == request.url \
                and conditional["meta"].not_kept:
            self._refused(request, "mime")
            self.stats.inc_value("webrace/not_kept/not_modified")
            logger.debug("Media type not kept, unchanged (304): %s", request.url)
            raise IgnoreRequest("Media type not kept, and not modified")
        return response

    def response_downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        """The answer is complete: set the delay before the host's next request."""
        latency = request.meta.get("download_latency")
        if latency is None:
            return
        headers_at = request.meta.get(_HEADERS_AT)
        seconds = latency + (time.monotonic() - headers_at if headers_at is not None else 0.0)
        downloader = self.crawler.engine.downloader
        key = request.meta.get(downloader.DOWNLOAD_SLOT) or downloader.get_slot_key(request)
        rest = self.pacing.answered(key, seconds) - seconds
        slot = downloader.slots.get(key)
        if slot is not None:
            # Scrapy spaces a slot's requests by `delay` from `lastseen`, the last start; the
            # rest is counted from this answer instead, so it holds with any concurrency.
            slot.lastseen, slot.delay, slot.jitter = time.monotonic(), rest, 0.0
            if slot.latercall is not None:
                # Scrapy timed the next start when this request left, by the delay the answer
                # before it set; dropped here, the downloader times it again by this rest when
                # it frees the request's transfer slot, just after this signal.
                slot.latercall.cancel()
                slot.latercall = None
        delays = self.pacing.hosts[key]
        self.stats.set_value(f"pacing/{key}/delay_mean", round(delays.mean, 4))
        self.stats.set_value(f"pacing/{key}/delay_max", round(delays.largest, 4))
        self.stats.set_value(f"pacing/{key}/requests", delays.count)

    def _ignore(self, request: Request, reason: str, message: str) -> None:
        self._refused(request, reason)
        logger.debug("%s: %s", message, request.url)
        raise IgnoreRequest(message)

    def _refused(self, request: Request, reason: str) -> None:
        request.meta[IGNORED] = reason
        if "webrace" in request.meta:
            self.crawler.signals.send_catch_log(request_refused, request=request, reason=reason)


def _known_binary(request: Request, content_type: str) -> bool:
    """The URL answered this undeclared type last time too, with a binary body the crawl did
    not keep (:attr:`MetaInfo.not_kept`): no need to download it again to know."""
    known = request.meta.get(LOOKED_UP)
    meta = known["meta"] if known and known["url"] == request.url else None
    return bool(meta is not None and meta.not_kept
                and media_type(meta.header_value("Content-Type")) == media_type(content_type))
