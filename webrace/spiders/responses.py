"""From a response to a stored page: links extracted, the fetch recorded in the object cache,
the page described as a :class:`~webrace.items.Page` item (no owners yet: the round engine
fills them in when it releases the item); the rules run over it. Used by the URD spider.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from html import escape
from http import HTTPStatus
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import HtmlResponse, Request, Response, TextResponse
from scrapy.utils.response import get_base_url
from scrapy.utils.response import get_meta_refresh as response_meta_refresh
from twisted.internet import error as twisted_errors
from w3lib.html import get_meta_refresh

from webrace.extractor import UrlExtractor
from webrace.items import Page
from webrace.middlewares.exclusion import REFUSED
from webrace.middlewares.recrawl import CONDITIONAL, LOOKED_UP, SERVED_FRESH
from webrace.records.metainfo import MetaInfo
from webrace.records.rounds import Node
from webrace.rounds.tally import UrlTally
from webrace.store.cache import ObjectCache
from webrace.store.warc import ORIG_PREFIX
from webrace.urd import now_millis
from webrace.urls import media_type

logger = logging.getLogger(__name__)

_SCRAPY_ORIG = "\n" + ORIG_PREFIX.title()  # how Scrapy's Headers spell a header it stores


class PageRecorder:
    def __init__(self, cache: ObjectCache, extractor: UrlExtractor, stats: object,
                 tally: UrlTally, offload: Callable[..., Awaitable[Any]] | None = None,
                 refresh_max_delay: float = 100.0) -> None:
        self.cache = cache
        self.extractor = extractor
        self.stats = stats
        self.tally = tally  # what became of each URL, once per crawl (the round engine's)
        self.offload = offload or _inline  # runs the object cache's I/O off the reactor (store_io)
        self.refresh_max_delay = refresh_max_delay  # a refresh this many seconds away or more is not followed

    async def fetched(self, node: Node, response: Response, wanted: Iterable[str] = (),
                      round_opened: int | None = None) -> Page:
        """A full response: extract its links (into ``node.links``), store it, describe it.
        ``wanted``: the reach keys of the URDs it was fetched for, ``round_opened`` when
        their round opened (both kept in its record: ``MetaInfo.wanted``, ``checked``)."""
        status = response.status
        if status >= 400:
            self.tally.failed(response.url, f"http_{status}")
        elif is_binary(response) or not isinstance(response, HtmlResponse):
            self._inc("not_html")
            self.tally.fetched(response.url)
        else:
            node.links = self._extract(response)
        if 200 <= status < 300:
            self._read_refresh(node, response)
        looked_up = response.request.meta.get(LOOKED_UP)
        recorded = await self.offload(
            self.cache.record_fetch, response.url, status, response.body,
            fetched=now_millis(), header=header_text(response), links=node.links,
            ip=str(response.ip_address) if response.ip_address else None,
            etag=_header(response, b"ETag"), lastmodified=_header(response, b"Last-Modified"),
            previous=looked_up["meta"] if looked_up and looked_up["url"] == response.url else ...,
            wanted=wanted, checked=round_opened,
            refresh=node.refresh,
        )
        if response.request.meta.get(CONDITIONAL) and 200 <= status < 300:
            self.stats.inc_value("recrawl/unchanged_body" if recorded.unchanged else "recrawl/modified")
        if recorded.announce and not recorded.new_version:
            self._inc("announced_again")
        page = _page(node, response.url, status, media_type(response.headers.get(b"Content-Type")),
                     len(response.body), recorded.meta, recorded.version, recorded.announce, False)
        if not recorded.announce:
            _newcomers(page, recorded.newcomers)
        return page

    async def not_modified(self, node: Node, response: Response, wanted: Iterable[str] = (),
                           round_opened: int | None = None) -> Page | None:
        """A 304: answered from the meta-info store, its stored links followed (seed 003
        section 5.1); the body is neither downloaded nor parsed. None: a 304 nobody asked for.
        A page served fresh (no request: the body was confirmed lately) is answered alike."""
        conditional = response.request.meta.get(CONDITIONAL)
        if not conditional or conditional["url"] != response.url:
            self.tally.failed(response.url, "unexpected_304")
            return None
        newcomers = frozenset(wanted) - set(conditional["meta"].wanted)
        if response.request.meta.get(SERVED_FRESH):
            self._inc("served_fresh")
            meta = conditional["meta"]
            if not set(wanted) <= set(meta.wanted):
                meta = await self.offload(self.cache.want, meta.url, wanted) or meta
        else:
            meta = await self.offload(
                self.cache.record_not_modified, conditional["meta"], now_millis(), _header(response, b"ETag"),
                _header(response, b"Last-Modified"), header=header_text(response), wanted=wanted,
                checked=round_opened)
        self.tally.fetched(response.url)
        node.links = list(meta.links)  # found on the page too: the round engine counts them
        node.refresh = meta.refresh if meta.refresh in meta.links else None
        fresh = response.request.meta.get(SERVED_FRESH)
        again = meta.unannounced and meta.version is not None  # stored earlier, its item never went out
        if again:
            self._inc("announced_again")
        page = _page(node, response.url, meta.status if fresh else 304, media_type(meta.header_value("Content-Type")),
                     meta.size, meta, meta.version, again, True)
        if not again:
            _newcomers(page, newcomers)
        return page

    async def not_kept(self, request: Request, exc: BaseException) -> None:
        """A 2xx answer refused for its media type (at its headers: ``exc`` is the
        StopDownload holding it; or for its binary body): remembered with its validators and
        without a body (:meth:`ObjectCache.record_not_kept`), so the next round asks only
        whether it changed, or refuses it at its headers (exclusion middleware)."""
        response = getattr(exc, "response", None) or request.meta.get(REFUSED)
        if response is None or not 200 <= response.status < 300:
            return
        try:
            await self.offload(
                self.cache.record_not_kept, response.url, response.status, fetched=now_millis(),
                header=header_text(response), ip=str(response.ip_address) if response.ip_address else None,
                etag=_header(response, b"ETag"), lastmodified=_header(response, b"Last-Modified"))
        except Exception as exc:  # it saves a download next round; failing to must not stall this one
            logger.warning("Could not remember %s (a type not kept): %s: %s", response.url, type(exc).__name__, exc)
            self._inc("errors/not_kept")
            return
        self._inc("not_kept/remembered")

    def enqueued(self, node: Node, base_url: str, urls: list[str]) -> None:
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

    def _read_refresh(self, node: Node, response: Response) -> None:
        """A refresh to another page (a ``Refresh`` header, else ``<meta http-equiv="refresh">``)
        sooner than ``METAREFRESH_MAXDELAY``: its target becomes one of the page's links,
        followed like a redirect (``node.refresh``: with the page's depth budget)."""
        header = response.headers.get(b"Refresh")
        if header:
            markup = f'<meta http-equiv="refresh" content="{escape(header.decode("latin-1"))}">'
            wait, target = get_meta_refresh(markup, baseurl=response.url)
        elif isinstance(response, HtmlResponse) and not is_binary(response):
            try:
                wait, target = response_meta_refresh(response, ignore_tags=("script", "noscript"))
            except ValueError:  # lxml could not read it
                return
        else:
            return
        if target is None or wait is None or wait >= self.refresh_max_delay:
            return
        verdict, url = self.extractor.judge(target, response.url)
        if verdict is not None or url == response.url:
            return
        node.refresh = url
        self._inc("refresh")
        if url not in node.links:  # counted by the round engine, as the page's other links
            node.links.append(url)

    def _extract(self, response: HtmlResponse) -> list[str]:
        try:
            extraction = self.extractor.extract(response.selector, get_base_url(response))
        except (ValueError, TypeError) as exc:  # lxml could not make a tree of it
            logger.warning("Could not parse %s: %s", response.url, exc)
            self.tally.refused(response.url, "error/parse")
            return []
        self._inc("expanded")
        self.tally.fetched(response.url)
        if extraction.unread:
            self.stats.inc_value("webrace/links_unread", extraction.unread)
            logger.warning("%s has more link candidates than WEBRACE_MAX_LINK_CANDIDATES=%d: %d not read",
                           response.url, self.extractor.max_candidates, extraction.unread)
        # the links kept are counted by the round engine, followed or not, as it decides
        for url, counter in extraction.rejected:
            self.tally.not_followed(url, counter)
        return extraction.links

    def _inc(self, key: str) -> None:
        self.stats.inc_value(f"webrace/{key}")


async def run_rules(scout: Any, response: Response, item: Page, cache: ObjectCache) -> Any:
    """A Scout template's rules over this document: the response's body, or for a 304 the
    stored one (read in the rules thread)."""
    if 200 <= response.status < 300:
        headers = {k.decode("latin-1"): b", ".join(v).decode("latin-1") for k, v in response.headers.items()}
        return await scout.process(response.url, response.body, headers, response.status, item["version"])
    if response.status != 304:
        return None
    meta = response.request.meta[CONDITIONAL]["meta"]

    def stored() -> bytes | None:
        if meta.dropped or not meta.digest:
            return None
        try:
            return cache.objects.get(meta.digest)
        except (LookupError, ValueError, OSError) as exc:
            logger.warning("Rules skip %s: stored body unreadable: %s", response.url, exc)
            return None

    return await scout.process(response.url, stored, meta.headers(), meta.status, meta.version)


async def _inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


class CrawlStats:
    """The crawl's stats collector for the round engine, looked up when used (Scrapy sets
    ``crawler.stats`` only when the crawl starts)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.crawler.stats.inc_value(key, count, start)

    def get_value(self, key: str, default: Any = None) -> Any:
        return self.crawler.stats.get_value(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self.crawler.stats.set_value(key, value)


def _page(node: Node, url: str, status: int, content_type: str, size: int, meta: MetaInfo,
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


def _newcomers(page: Page, keys: frozenset[str]) -> None:
    """Mark ``page`` (not a new version) with the reach keys of its URDs that its record did not
    have: the version it holds was never judged for them (stored in another owner's round, or
    its record's keys lost with Redis's data), so the annotation judges it for them (an ACI
    they already have is kept once: its id is the owner's, the page's and the version's)."""
    if keys and page.get("kept") and page.get("digest"):
        page._webrace_newcomers = keys


def _header(response: Response, name: bytes) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def header_text(response: Response) -> str:
    """The response's status line and headers, as the seed's meta-info keeps them."""
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    headers = response.headers.to_string().decode("latin-1").replace("\r\n", "\n")
    text = f"HTTP/1.1 {response.status} {reason}\n{headers}".rstrip()
    return text.replace(_SCRAPY_ORIG, "\n" + ORIG_PREFIX)  # the wire's record (middlewares/compression.py)


def is_binary(response: Response) -> bool:
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
