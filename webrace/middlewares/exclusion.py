"""Exclusion: block lists, robots.txt with its Crawl-delay, and accepted media types.

Every request of the crawl passes here, whatever produced it (a URD, an extracted link, a
redirect, later a rule): the block list is checked first, then robots.txt through Scrapy's
own :class:`~scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware` (Protego), whose
``Crawl-delay`` for our user agent becomes the minimum delay of that host's download slot
(Scrapy reads the directive but does not apply it). Responses whose Content-Type is not
accepted are stopped right after their headers, before the body is downloaded.

Each decision bumps a stats counter (``webrace/ignored/blocklist``, ``.../robots``,
``.../mime``, ``webrace/crawl_delay/<host>``) and marks the request's meta with
``webrace_ignored`` so the spider's errback does not count it twice.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload

from webrace.conf import conf_list
from webrace.urls import Blocklist, MediaTypes, read_list

logger = logging.getLogger(__name__)

IGNORED = "webrace_ignored"


class _RobotsFetchErrorsInOneLine(logging.Filter):
    """Scrapy logs a failed robots.txt download (an unreachable host, a user's typo) at
    ERROR with a traceback; the page fetch that follows fails and is counted anyway, so
    say it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith("Error downloading"):
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "Could not fetch robots.txt before %(request)s: %(f_exception)s"
        return True


_robots_logger = logging.getLogger("scrapy.downloadermiddlewares.robotstxt")
if not any(isinstance(f, _RobotsFetchErrorsInOneLine) for f in _robots_logger.filters):
    _robots_logger.addFilter(_RobotsFetchErrorsInOneLine())


class ExclusionMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.blocklist = Blocklist(read_list(settings.get("WEBRACE_BLOCKLIST")))
        self.media_types = MediaTypes(conf_list(settings, "WEBRACE_MIME_TYPES", "mime.types"))
        self.max_crawl_delay = settings.getfloat("WEBRACE_MAX_CRAWL_DELAY")
        self.download_delay = settings.getfloat("DOWNLOAD_DELAY")
        self.robots_useragent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        try:
            self.robots: RobotsTxtMiddleware | None = RobotsTxtMiddleware(crawler)
        except NotConfigured:
            self.robots = None
        self.delays: dict[str, float] = {}  # download slot -> Crawl-delay applied
        crawler.signals.connect(self.headers_received, signal=signals.headers_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ExclusionMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if request.meta.get("dont_obey_robotstxt"):  # robots.txt itself
            return
        if self.blocklist and self.blocklist.blocks(request.url):
            self._ignore(request, "blocklist", "Blocked by WEBRACE_BLOCKLIST")
        if self.robots is None:
            return
        parser = await self.robots.robot_parser(request)
        if parser is None:
            return
        try:
            self.robots.process_request_2(parser, request)
        except IgnoreRequest:
            self._ignore(request, "robots", "Forbidden by robots.txt")
        delay = parser.crawl_delay(self.robots_useragent)
        if delay:
            self._apply_crawl_delay(request, delay)

    def _apply_crawl_delay(self, request: Request, delay: float) -> None:
        downloader = self.crawler.engine.downloader
        key = downloader.get_slot_key(request)
        if delay > self.max_crawl_delay:
            self._ignore(
                request,
                "robots",
                f"robots.txt asks for Crawl-delay {delay:g}s, over WEBRACE_MAX_CRAWL_DELAY={self.max_crawl_delay:g}",
            )
        delay = max(delay, self.download_delay)
        if self.delays.get(key, 0.0) < delay:
            self.delays[key] = delay
            self.stats.set_value(f"webrace/crawl_delay/{key}", delay)
            logger.info("Honouring robots.txt Crawl-delay of %gs for %s", delay, key)
        # New slots read DOWNLOAD_SLOTS-style settings; a slot that exists (robots.txt was
        # fetched through it) is updated in place. No jitter: the delay is a minimum.
        conf = downloader.per_slot_settings.setdefault(key, {})
        if conf.get("delay", 0.0) < delay:
            conf.update(delay=delay, jitter=0.0)
        slot = downloader.slots.get(key)
        if slot is not None and (slot.delay < delay or slot.jitter):
            slot.delay = max(slot.delay, delay)
            slot.jitter = 0.0

    def headers_received(self, headers: Any, request: Request) -> None:
        if "webrace" not in request.meta:
            return
        if not self.media_types.accepts(headers.get(b"Content-Type")):
            ctype = (headers.get(b"Content-Type") or b"").decode("latin-1")
            request.meta[IGNORED] = "mime"
            self.stats.inc_value("webrace/ignored/mime")
            logger.debug("Media type %r not accepted, body not downloaded: %s", ctype, request.url)
            raise StopDownload(fail=True)

    def _ignore(self, request: Request, reason: str, message: str) -> None:
        request.meta[IGNORED] = reason
        self.stats.inc_value(f"webrace/ignored/{reason}")
        logger.debug("%s: %s", message, request.url)
        raise IgnoreRequest(message)
