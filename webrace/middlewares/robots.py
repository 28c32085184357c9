"""robots.txt per RFC 9309, fetched once per origin with every request waiting for it.

Scrapy's ``RobotsTxtMiddleware`` keeps one Deferred per host while robots.txt downloads and
lets every request await it; a Deferred's result passes from callback to callback, so only
the first waiter gets the parser and the others get ``None``, which reads "no robots.txt":
they go out unchecked (Scrapy 2.19). It also treats a robots.txt that answers 5xx as
"allow everything". This module replaces that part and keeps the rest: Scrapy downloads
robots.txt through the engine (retries, redirects, the user agent) and ``ROBOTSTXT_PARSER``
(Protego) parses it.

RFC 9309, section 2.3.1: a 2xx answer is parsed (its first 500 KiB); 4xx ("unavailable")
means no rules; 5xx, 429, a timeout or a failed connection ("unreachable") means complete
disallow until the next round; redirects are followed up to five hops, after which the
file counts as unavailable. Rules are kept at most ``WEBRACE_ROBOTS_MAX_AGE`` seconds
(the RFC's 24 hours by default).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

MAX_BYTES = 500 * 1024  # RFC 9309 2.5: parse at least the first 500 KiB
MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2
ROBOTS = "webrace_robots"  # meta key marking a robots.txt request (its byte count while downloading)

ALLOWED, NONE, UNREACHABLE = "parsed", "none", "unreachable"


@dataclass(frozen=True)
class HostRules:
    """What robots.txt says for one origin: ``kind`` is ``parsed`` (rules), ``none`` (no
    rules: everything allowed) or ``unreachable`` (everything disallowed for now)."""

    kind: str
    reason: str = ""
    parser: Any = None  # a scrapy.robotstxt.RobotParser when kind == "parsed"
    fetched: float = 0.0  # time.monotonic() of the answer
    error: BaseException | None = None  # why robots.txt could not be downloaded (DNS, refused, timeout...)

    def allowed(self, url: str, useragent: str) -> bool:
        if self.kind == UNREACHABLE:
            return False
        return self.parser is None or self.parser.allowed(url, useragent)

    def crawl_delay(self, useragent: str) -> float | None:
        """The Crawl-delay for ``useragent``; None when absent, zero or negative."""
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(useragent)
        return delay if delay is not None and delay > 0 else None


def classify(status: int) -> str:
    """RFC 9309 2.3.1 by final status (redirects already followed)."""
    if 200 <= status < 300:
        return ALLOWED
    if status == 429 or status >= 500:  # 429 as Google reads it: the server is overloaded
        return UNREACHABLE
    return NONE  # 4xx, and a 3xx that could not be followed


def origin(request: Request) -> str:
    parts = urlparse_cached(request)
    return f"{parts.scheme}://{parts.netloc}"


class RobotsTxt:
    """robots.txt rules per origin. ``rules(request)`` downloads an origin's robots.txt
    once; every request arriving meanwhile waits for the same answer (each its own
    Deferred, so each gets the rules)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.timeout = settings.getfloat("WEBRACE_ROBOTS_TIMEOUT")
        self.max_age = settings.getfloat("WEBRACE_ROBOTS_MAX_AGE")
        self.parser_class = load_object(settings.get("ROBOTSTXT_PARSER"))
        self.entries: dict[str, HostRules] = {}
        self.waiting: dict[str, list[Deferred]] = {}
        crawler.signals.connect(self.bytes_received, signal=signals.bytes_received)

    async def rules(self, request: Request) -> HostRules:
        key = origin(request)
        entry = self.entries.get(key)
        if entry is not None and time.monotonic() - entry.fetched < self.max_age:
            return entry
        if key in self.waiting:
            waiter: Deferred = Deferred()
            self.waiting[key].append(waiter)
            return await maybe_deferred_to_future(waiter)
        self.waiting[key] = []
        entry = HostRules(UNREACHABLE, "download cancelled", fetched=time.monotonic())
        try:
            entry = await self._fetch(key)
        except Exception as exc:  # noqa: BLE001 - any failure to fetch is "unreachable"
            entry = HostRules(UNREACHABLE, _describe(exc), fetched=time.monotonic(), error=exc)
        finally:  # even when this request is cancelled, the others waiting get an answer
            self.entries[key] = entry
            self.crawler.stats.inc_value("robotstxt/request_count")  # Scrapy's own name for it
            self.crawler.stats.inc_value(f"robotstxt/{entry.kind}")
            for waiter in self.waiting.pop(key):
                waiter.callback(entry)
        return entry

    def new_round(self) -> None:
        """Origins whose robots.txt was unreachable are asked again."""
        self.entries = {k: e for k, e in self.entries.items() if e.kind != UNREACHABLE}

    async def _fetch(self, key: str) -> HostRules:
        request = Request(
            f"{key}/robots.txt",
            priority=1000,
            callback=NO_CALLBACK,
            meta={
                "dont_obey_robotstxt": True,
                ROBOTS: 0,
                "redirect_ttl": MAX_REDIRECTS,
                "download_timeout": self.timeout,
                "download_maxsize": 0,  # bytes_received stops it at MAX_BYTES
                "max_retry_times": 1,
            },
        )
        try:
            response: Response = await self.crawler.engine.download_async(request)
        except IgnoreRequest as exc:  # over MAX_REDIRECTS hops: unavailable (RFC 9309 2.3.1.2)
            return HostRules(NONE, str(exc), fetched=time.monotonic())
        kind = classify(response.status)
        fetched = time.monotonic()
        if kind != ALLOWED:
            return HostRules(kind, f"HTTP {response.status}", fetched=fetched)
        parser = build_from_crawler(self.parser_class, self.crawler, response.body[:MAX_BYTES])
        return HostRules(ALLOWED, parser=parser, fetched=fetched)

    def bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        """Stop a robots.txt download once it passed MAX_BYTES (the part read is parsed)."""
        if ROBOTS not in request.meta:
            return
        request.meta[ROBOTS] += len(data)
        if request.meta[ROBOTS] > MAX_BYTES:
            raise StopDownload(fail=False)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__
